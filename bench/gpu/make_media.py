"""Write the media the GPU runs read from disk: small test media, or N distinct bench images."""

import sys
from pathlib import Path

import numpy as np
import soundfile
from PIL import Image

out = Path(sys.argv[1])
out.mkdir(parents=True, exist_ok=True)
if len(sys.argv) > 2:  # bench: N distinct random 448x448 images
    rng = np.random.default_rng(2)
    for i in range(int(sys.argv[2])):
        Image.fromarray(rng.integers(0, 256, (448, 448, 3), dtype=np.uint8)).save(
            out / f"b{i:03d}.png"
        )
else:
    Image.new("RGB", (112, 84), (255, 0, 0)).save(out / "img0.png")
    Image.new("RGB", (64, 64), (0, 255, 0)).save(out / "img1.png")
    t = np.linspace(0, 2.0, 32000, dtype=np.float32)
    soundfile.write(out / "tone0.wav", 0.3 * np.sin(2 * np.pi * 440 * t), 16000)
    soundfile.write(out / "tone1.wav", 0.3 * np.sin(2 * np.pi * 220 * t), 16000)
