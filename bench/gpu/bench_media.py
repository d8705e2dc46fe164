"""Write the benchmark's image sets and manifests: distinct random 448x448 PNGs (every image of
every set differs, so vLLM's processor cache never hits across prompts), 4 per prompt.

usage: bench_media.py ROOT NAME:IMAGES:SEED [...]   e.g. /tmp/bench s64:256:1 s256:1024:2
Writes ROOT/NAME/bNNNNN.png and ROOT/mNAME.jsonl (one manifest line per 4 images:
{"id": "p00000", "image": [4 absolute paths]}). Existing complete sets are kept.
"""

import json
import os
import sys
from multiprocessing import Pool
from pathlib import Path

PER_PROMPT = 4


def _write(job: tuple[str, int, int]) -> None:
    import numpy as np
    from PIL import Image

    folder, seed, index = job
    path = Path(folder) / f"b{index:05d}.png"
    if path.exists():
        return
    rng = np.random.default_rng([seed, index])
    pixels = rng.integers(0, 256, (448, 448, 3), dtype=np.uint8)
    tmp = path.with_suffix(".tmp.png")
    Image.fromarray(pixels).save(tmp, compress_level=1)
    os.replace(tmp, path)


def main() -> int:
    root = Path(sys.argv[1])
    jobs = []
    sets = []
    for spec in sys.argv[2:]:
        name, count, seed = spec.split(":")
        folder = root / name
        folder.mkdir(parents=True, exist_ok=True)
        sets.append((name, folder, int(count)))
        jobs += [(str(folder), int(seed), i) for i in range(int(count))]
    with Pool(min(16, os.cpu_count() or 1)) as pool:
        pool.map(_write, jobs, chunksize=16)
    for name, folder, count in sets:
        files = sorted(str(p) for p in folder.glob("b*.png") if ".tmp" not in p.name)
        assert len(files) == count, (name, len(files), count)
        with open(root / f"m{name}.jsonl", "w") as f:
            for i in range(0, count, PER_PROMPT):
                f.write(
                    json.dumps(
                        {"id": f"p{i // PER_PROMPT:05d}", "image": files[i : i + PER_PROMPT]}
                    )
                    + "\n"
                )
        print(f"{name}: {count} images, {count // PER_PROMPT} prompts -> {root / f'm{name}.jsonl'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
