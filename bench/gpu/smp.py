"""Summaries of the stack samples that smp/sitecustomize.py writes (diagnosis, no figures).

usage: smp.py DIR [--from WALL] [--to WALL] [--top N] [--timeline]
  DIR: a folder of <pid>.smp files (a sampled run's smp/).
  --from/--to: keep samples of these wall seconds only (e.g. the batch's window).
  --timeline: per second, each busy thread's most frequent innermost frames.
For every process with samples: its threads by samples, and per thread the functions where the
time went, inclusive (a function counted once per sample it is on the stack) and by leaf (the
innermost two frames), as shares of that thread's samples.
"""

from __future__ import annotations

import argparse
import collections
from pathlib import Path


def load(folder: Path) -> dict[int, dict]:
    procs: dict[int, dict] = {}
    for path in sorted(folder.glob("*.smp")):
        proc = {"argv": "", "ppid": 0, "rows": []}
        for line in path.read_text(errors="replace").splitlines():
            if line.startswith("# "):
                parts = line[2:].split(" ", 2)
                proc["ppid"] = int(parts[1])
                proc["argv"] = parts[2] if len(parts) > 2 else ""
                continue
            fields = line.split("\t")
            if len(fields) != 4:
                continue
            proc["rows"].append((int(fields[0]), fields[1], fields[2].split(";"), int(fields[3])))
        procs[int(path.stem)] = proc
    return procs


def short(frame: str) -> str:
    file, _, rest = frame.partition(":")
    return f"{file.removesuffix('.py')}:{rest}"


def leaf(stack: list[str], depth: int = 2) -> str:
    return " < ".join(short(f) for f in reversed(stack[-depth:]))


def summarise(procs: dict[int, dict], lo: float, hi: float, top: int, timeline: bool) -> str:
    out = []
    for pid, proc in procs.items():
        rows = [r for r in proc["rows"] if lo <= r[0] <= hi]
        total = sum(r[3] for r in rows)
        if total < 20:
            continue
        role = "child of " + str(proc["ppid"]) if proc["ppid"] in procs else "top"
        secs = sorted({r[0] for r in rows})
        out.append(
            f"## process {pid} ({role}; {secs[0]}..{secs[-1]}, {len(secs)} s): {proc['argv'][:120]}"
        )
        by_thread: dict[str, list] = collections.defaultdict(list)
        for row in rows:
            by_thread[row[1]].append(row)
        for thread, trows in sorted(by_thread.items(), key=lambda kv: -sum(r[3] for r in kv[1])):
            n = sum(r[3] for r in trows)
            leaves: collections.Counter[str] = collections.Counter()
            incl: collections.Counter[str] = collections.Counter()
            for _, _, stack, k in trows:
                leaves[leaf(stack)] += k
                for f in {short(f).rsplit(":", 1)[0] for f in stack}:
                    incl[f] += k
            idle = sum(k for s, k in leaves.items() if _idle(s))
            out.append(f"### thread {thread}: {n} samples, {100 * idle / n:.0f}% waiting/idle")
            out.append("  leaf (innermost two frames):")
            for s, k in leaves.most_common(top):
                out.append(f"    {100 * k / n:5.1f}%  {s}")
            out.append("  inclusive:")
            for s, k in incl.most_common(top):
                out.append(f"    {100 * k / n:5.1f}%  {s}")
            if timeline:
                out.append("  timeline (second: top leaf, its share of that second's samples):")
                per: dict[int, collections.Counter[str]] = collections.defaultdict(
                    collections.Counter
                )
                for sec, _, stack, k in trows:
                    per[sec][leaf(stack, 3)] += k
                for sec in sorted(per):
                    c = per[sec]
                    s, k = c.most_common(1)[0]
                    out.append(f"    {sec} {100 * k / sum(c.values()):3.0f}% {s}")
        out.append("")
    return "\n".join(out)


# Innermost functions where a thread waits (matched whole: a prefix match took get_vocab).
IDLE = {"wait", "select", "poll", "sleep", "recv", "_recv", "get", "acquire", "epoll"}


def _idle(leaf_text: str) -> bool:
    return leaf_text.split(" < ")[0].rsplit(":", 1)[0].split(":")[-1] in IDLE


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--from", dest="lo", type=float, default=0)
    ap.add_argument("--to", dest="hi", type=float, default=float("inf"))
    ap.add_argument("--top", type=int, default=15)
    ap.add_argument("--timeline", action="store_true")
    args = ap.parse_args()
    print(summarise(load(Path(args.dir)), args.lo, args.hi, args.top, args.timeline))


if __name__ == "__main__":
    main()
