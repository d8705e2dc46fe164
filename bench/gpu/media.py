"""The benchmark's work, and the same prompts in each tool's input format.

usage: media.py ROOT PROMPTS [PROMPTS ...] [--task qwen2_5_vl|whisper]
       e.g. media.py /tmp/bench 512 4096;  media.py /tmp/bench 1024 --task whisper
Writes, per size N (existing complete sets are kept):
  qwen2_5_vl (the default): distinct random 448x448 JPEGs, 4 per prompt
    ROOT/iN/NNNNNN.jpg     4 x N images, every one different (no processor-cache hit)
    ROOT/mN.jsonl          mmrun's manifest: {"id": "p00000", "image": [4 paths]}
    ROOT/bN.jsonl          `vllm run-batch` input: one chat completion per prompt, the same
                           question, images as file:// URLs, greedy, 64 tokens, ignore_eos
  whisper: distinct clips of 5 to 30 s, one per prompt
    ROOT/aN/NNNNNN.wav     N clips, 16 kHz mono 16-bit PCM, each of its own length (uniform
                           over 5-30 s) and sound: a voice-like buzz (a wandering pitch with
                           its harmonics) in syllable-like bursts over quiet noise
    ROOT/wN.jsonl          mmrun's manifest: {"id": "c00000", "audio": path}
The raw scripts read mmrun's manifests.
"""

import argparse
import json
import multiprocessing
import os
import sys
import wave
from pathlib import Path

PER_PROMPT = 4
SIZE = 448
QUESTION = "What is the content of each image?"  # mmrun's question for 4 images
MAX_TOKENS = 64
SAMPLE_RATE = 16_000
CLIP_SECONDS = (5.0, 30.0)  # Whisper's window is 30 s; mmrun refuses longer clips
TASKS = ("qwen2_5_vl", "whisper")


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


def clip(seed: int, index: int):
    """One clip's samples (float32 in [-1, 1]), its own length and sound for each index."""
    import numpy as np

    rng = np.random.default_rng([seed, index, 1])
    seconds = round(float(rng.uniform(*CLIP_SECONDS)), 2)
    t = np.arange(int(seconds * SAMPLE_RATE)) / SAMPLE_RATE
    # a pitch that wanders around the speaker's own, and its harmonics
    base = rng.uniform(90, 240)
    drift = sum(rng.uniform(3, 15) * np.sin(2 * np.pi * rng.uniform(0.1, 1.5) * t + rng.uniform(0, 6.3))
                for _ in range(3))  # fmt: skip
    phase = 2 * np.pi * np.cumsum(base + drift) / SAMPLE_RATE
    voice = sum(np.sin(k * phase) / k for k in range(1, 9))
    # syllables of 3 to 7 a second, and pauses
    syllables = np.clip(np.sin(2 * np.pi * rng.uniform(3, 7) * t + rng.uniform(0, 6.3)), 0, None)
    pauses = np.sin(2 * np.pi * rng.uniform(0.15, 0.4) * t + rng.uniform(0, 6.3)) > -0.6
    noise = rng.normal(0, 0.02, t.size)
    samples = 0.25 * voice * syllables * pauses + noise
    return np.clip(samples, -1, 1).astype(np.float32)


def _write_clip(job: tuple[str, int, int]) -> None:
    import numpy as np

    folder, seed, index = job
    path = Path(folder) / f"{index:06d}.wav"
    if path.exists():
        return
    pcm = (clip(seed, index) * 32767).astype("<i2")
    tmp = path.with_suffix(".tmp")
    with wave.open(str(tmp), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(SAMPLE_RATE)
        w.writeframes(np.ascontiguousarray(pcm).tobytes())
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


def _pool_map(function, jobs: list, chunksize: int) -> None:
    with multiprocessing.get_context("fork").Pool(min(16, os.cpu_count() or 1)) as pool:
        pool.map(function, jobs, chunksize=chunksize)


def images(root: Path, sizes: list[int]) -> None:
    model = os.environ.get("BENCH_MODEL", "/tmp/qwen3b")
    jobs = []
    for n in sizes:
        folder = root / f"i{n}"
        folder.mkdir(parents=True, exist_ok=True)
        jobs += [(str(folder), n, i) for i in range(n * PER_PROMPT)]
    _pool_map(_write, jobs, 64)
    for n in sizes:
        files = sorted(str(p) for p in (root / f"i{n}").glob("*.jpg"))
        assert len(files) == n * PER_PROMPT, (n, len(files))
        with open(root / f"m{n}.jsonl", "w") as m, open(root / f"b{n}.jsonl", "w") as b:
            for i in range(n):
                paths = files[i * PER_PROMPT : (i + 1) * PER_PROMPT]
                m.write(json.dumps({"id": f"p{i:05d}", "image": paths}) + "\n")
                b.write(json.dumps(run_batch_line(f"p{i:05d}", paths, model)) + "\n")
        print(f"{n} prompts x {PER_PROMPT} images -> {root}/m{n}.jsonl, {root}/b{n}.jsonl")


def clips(root: Path, sizes: list[int]) -> None:
    jobs = []
    for n in sizes:
        folder = root / f"a{n}"
        folder.mkdir(parents=True, exist_ok=True)
        jobs += [(str(folder), n, i) for i in range(n)]
    _pool_map(_write_clip, jobs, 4)
    for n in sizes:
        files = sorted(str(p) for p in (root / f"a{n}").glob("*.wav"))
        assert len(files) == n, (n, len(files))
        seconds = sum(os.path.getsize(f) - 44 for f in files) / 2 / SAMPLE_RATE
        with open(root / f"w{n}.jsonl", "w") as m:
            for i, path in enumerate(files):
                m.write(json.dumps({"id": f"c{i:05d}", "audio": path}) + "\n")
        print(f"{n} clips ({seconds / 3600:.2f} h of audio) -> {root}/w{n}.jsonl")


def main() -> int:
    ap = argparse.ArgumentParser(description="the benchmark's media and manifests")
    ap.add_argument("root", type=Path)
    ap.add_argument("sizes", type=int, nargs="+")
    ap.add_argument("--task", choices=TASKS, default="qwen2_5_vl")
    args = ap.parse_args()
    (clips if args.task == "whisper" else images)(args.root, args.sizes)
    return 0


if __name__ == "__main__":
    sys.exit(main())
