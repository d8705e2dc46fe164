"""The benchmark's work: distinct random 448x448 JPEGs, 4 per prompt, and the same prompts in
each tool's input format.

usage: media.py ROOT PROMPTS [PROMPTS ...]     e.g. media.py /tmp/bench 512 4096
Writes, per size N (existing complete sets are kept):
  ROOT/iN/NNNNNN.jpg       4 x N images, every one different (no processor-cache hit)
  ROOT/mN.jsonl            mmrun's manifest: {"id": "p00000", "image": [4 paths]}
  ROOT/bN.jsonl            `vllm run-batch` input: one chat completion per prompt, the same
                           question, images as file:// URLs, greedy, 64 tokens, ignore_eos
The raw script reads the manifest.
"""

import json
import multiprocessing
import os
import sys
from pathlib import Path

PER_PROMPT = 4
SIZE = 448
QUESTION = "What is the content of each image?"  # mmrun's question for 4 images
MAX_TOKENS = 64


def _write(job: tuple[str, int, int]) -> None:
    import numpy as np
    from PIL import Image

    folder, seed, index = job
    path = Path(folder) / f"{index:06d}.jpg"
    if path.exists():
        return
    rng = np.random.default_rng([seed, index])
    pixels = rng.integers(0, 256, (SIZE, SIZE, 3), dtype=np.uint8)
    tmp = path.with_suffix(".tmp")
    Image.fromarray(pixels).save(tmp, format="JPEG", quality=90)
    os.replace(tmp, path)


def run_batch_line(custom_id: str, paths: list[str], model: str) -> dict:
    content = [{"type": "image_url", "image_url": {"url": f"file://{p}"}} for p in paths]
    content.append({"type": "text", "text": QUESTION})
    return {
        "custom_id": custom_id,
        "method": "POST",
        "url": "/v1/chat/completions",
        "body": {
            "model": model,
            "messages": [{"role": "user", "content": content}],
            "max_tokens": MAX_TOKENS,
            "temperature": 0,
            "ignore_eos": True,
        },
    }


def main() -> int:
    root = Path(sys.argv[1])
    sizes = [int(n) for n in sys.argv[2:]]
    model = os.environ.get("BENCH_MODEL", "/tmp/qwen3b")
    jobs = []
    for n in sizes:
        folder = root / f"i{n}"
        folder.mkdir(parents=True, exist_ok=True)
        jobs += [(str(folder), n, i) for i in range(n * PER_PROMPT)]
    with multiprocessing.get_context("fork").Pool(min(16, os.cpu_count() or 1)) as pool:
        pool.map(_write, jobs, chunksize=64)
    for n in sizes:
        files = sorted(str(p) for p in (root / f"i{n}").glob("*.jpg"))
        assert len(files) == n * PER_PROMPT, (n, len(files))
        with open(root / f"m{n}.jsonl", "w") as m, open(root / f"b{n}.jsonl", "w") as b:
            for i in range(n):
                paths = files[i * PER_PROMPT : (i + 1) * PER_PROMPT]
                m.write(json.dumps({"id": f"p{i:05d}", "image": paths}) + "\n")
                b.write(json.dumps(run_batch_line(f"p{i:05d}", paths, model)) + "\n")
        print(f"{n} prompts x {PER_PROMPT} images -> {root}/m{n}.jsonl, {root}/b{n}.jsonl")
    return 0


if __name__ == "__main__":
    sys.exit(main())
