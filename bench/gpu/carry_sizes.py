"""Check each device call of RUNBOOK.md against the 64 MiB that one call may carry: the working
tree that travels (tracked and untracked-not-ignored files) plus the carried paths.

usage: carry_sizes.py REPO      (exit 1 if a call is over the limit)
"""

import subprocess
import sys
from pathlib import Path

LIMIT = 64 * 1024 * 1024
# The carry list of each call (RUNBOOK.md).
CALLS = {
    "A1 setup, first half": [".gpu/a1", ".gpu/s"],
    "A2 setup, second half": [".gpu/a2", ".gpu/s"],
    # B after a call that installed vLLM (.gpu/b) on the same warm machine: the MoE kernels
    # instead of .gpu/b (the four together are over the limit)
    "B  proofs (vLLM installed)": [".gpu/s", ".gpu/t", ".gpu/m"],
    # B on a machine without vLLM: no MoE kernels (llama4 and step3 fail)
    "B' proofs (vLLM not installed)": [".gpu/b", ".gpu/s", ".gpu/t"],
    "I  install only (setup.sh)": [".gpu/b", ".gpu/s"],
    "C  start-up gap": [".gpu/b", ".gpu/s", ".gpu/r2"],
    "D  throughput + scale-out": [".gpu/b", ".gpu/s", ".gpu/r1"],
}


def size(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


def tree_size(repo: Path) -> int:
    names = subprocess.run(
        ["git", "-C", str(repo), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    total = 0
    for name in filter(None, names):
        p = repo / name.decode()
        if p.is_file() and not p.is_symlink():
            total += p.stat().st_size
    return total


def main() -> int:
    repo = Path(sys.argv[1])
    tree = tree_size(repo)
    parts = {p: size(repo / p) for paths in CALLS.values() for p in paths if (repo / p).exists()}
    print(f"working tree that travels: {tree / 2**20:.1f} MiB")
    for p, s in sorted(parts.items()):
        print(f"  {p}: {s / 2**20:.1f} MiB ({s} bytes)")
    bad = 0
    for call, paths in CALLS.items():
        missing = [p for p in paths if not (repo / p).exists()]
        total = tree + sum(parts.get(p, 0) for p in paths)
        flag = "OK" if total <= LIMIT and not missing else "OVER" if total > LIMIT else "MISSING"
        bad += flag != "OK"
        extra = f" missing: {missing}" if missing else ""
        print(
            f"call {call}: carry {' '.join(paths)} -> {total / 2**20:.1f} MiB of 64 "
            f"({(LIMIT - total) / 2**20:+.1f} left) {flag}{extra}"
        )
    four = [".gpu/b", ".gpu/s", ".gpu/t", ".gpu/m"]
    if all((repo / p).exists() for p in four):
        total = tree + sum(size(repo / p) for p in four)
        print(
            f"(for reference, not a call: {' '.join(four)} -> {total / 2**20:.1f} MiB of 64"
            f" {'fits' if total <= LIMIT else 'over: B carries .gpu/m only where vLLM is installed'})"
        )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
