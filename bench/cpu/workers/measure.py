"""Run a command and print its wall time, CPU time and peak RSS, from a small process.

``ru_maxrss`` of a child includes the memory of the process it was forked from, up to its
``exec``: measured from the benchmark's own (large) process, every command would show at
least that. This launcher is small, so the figure is the command's own.
argv[1:]: the command (an absolute path first). Its output goes to /dev/null.
"""

import json
import os
import sys
import time


def main() -> None:
    argv = sys.argv[1:]
    devnull = os.open(os.devnull, os.O_WRONLY)
    actions = [(os.POSIX_SPAWN_DUP2, devnull, 1), (os.POSIX_SPAWN_DUP2, devnull, 2)]
    start = time.perf_counter()
    pid = os.posix_spawn(argv[0], argv, dict(os.environ), file_actions=actions)
    _, status, usage = os.wait4(pid, 0)
    wall = time.perf_counter() - start
    print(
        json.dumps(
            {
                "wall_s": wall,
                "maxrss_mib": usage.ru_maxrss / 1024,
                "cpu_s": usage.ru_utime + usage.ru_stime,
                "returncode": os.waitstatus_to_exitcode(status),
            }
        ),
        flush=True,
    )


if __name__ == "__main__":
    main()
