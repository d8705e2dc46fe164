"""Run a command; print when its stdout first had output and when it exited (seconds from
spawn), its exit code, and its stdout's length. stderr passes through."""

import subprocess
import sys
import time

start = time.perf_counter()
proc = subprocess.Popen(sys.argv[1:], stdout=subprocess.PIPE)
assert proc.stdout is not None
first = None
size = 0
while chunk := proc.stdout.read1(65536):
    if first is None:
        first = time.perf_counter() - start
    size += len(chunk)
code = proc.wait()
end = time.perf_counter() - start
shown = "none" if first is None else f"{first:.2f}"
print(
    f"rc={code} first_output_s={shown} exit_s={end:.2f} "
    f"exit_after_output_s={'-' if first is None else f'{end - first:.2f}'} stdout_bytes={size}"
)
