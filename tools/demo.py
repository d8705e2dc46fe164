"""``make demo``: the main job where the machine can run it, the offline selftest where not.

mmrun's main job is ``mmrun image -m qwen2_5_vl -n 4``: a real 3B model from the Hugging Face
Hub on a GPU. Without a GPU or without the Hub it cannot run; ``mmrun selftest`` then proves
the install offline on tiny models, and this says so first.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import urllib.request

MAIN_JOB = ["image", "-m", "qwen2_5_vl", "-n", "4"]


def has_gpu() -> bool:
    if shutil.which("nvidia-smi") is None:
        return False
    return subprocess.run(["nvidia-smi", "-L"], capture_output=True, timeout=30).returncode == 0


def hub_answers() -> bool:
    if os.environ.get("HF_HUB_OFFLINE") not in (None, "", "0"):
        return False
    endpoint = os.environ.get("HF_ENDPOINT", "https://huggingface.co").rstrip("/")
    try:
        with urllib.request.urlopen(
            f"{endpoint}/api/models/Qwen/Qwen2.5-VL-3B-Instruct", timeout=5
        ):
            return True
    except OSError:
        return False


def main() -> int:
    gpu, hub = has_gpu(), hub_answers()
    if gpu and hub:
        command = MAIN_JOB
    else:
        missing = " and ".join(
            n for n, ok in (("an NVIDIA GPU", gpu), ("the Hugging Face Hub", hub)) if not ok
        )
        print(
            f"mmrun demo: no {missing} here, so not `mmrun {' '.join(MAIN_JOB)}`; running "
            "`mmrun selftest` instead (tiny offline models: proves the install)",
            file=sys.stderr,
        )
        command = ["selftest"]
    return subprocess.run([sys.executable, "-m", "mmrun", *command]).returncode


if __name__ == "__main__":
    raise SystemExit(main())
