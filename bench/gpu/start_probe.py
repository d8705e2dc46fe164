"""Run a Python program as `python SCRIPT ARGS` or `python -m MODULE ARGS` would, printing a
mark on stderr at each step of its start that no log line shows: the interpreter up, the
first import of the heavy packages (begins, done), vLLM's and mmrun's plugin loading, mmrun's
engine start (its planning done), mmrun's frontend warm-up, `vllm.LLM(...)` (called,
returned) and the first request given to the engine. startup.py reads the marks, with vLLM's
own log lines, into a timeline. The same marks for every program, so that the raw script and
mmrun are timed alike; nothing is changed but a wrapper around each named function.

usage: start_probe.py SCRIPT [ARGS...]    or    start_probe.py -m MODULE [ARGS...]
Each mark is one line: "STARTUP_MARK <epoch seconds> <pid> <event>". A forked child (vLLM's
engine core) inherits the probe: its marks carry its own pid.

BENCH_START_SWITCH_INTERVAL=S (a diagnostic, as a throughput.py variant's
"+env.BENCH_START_SWITCH_INTERVAL=0.0002"): the interpreter's switch interval
(sys.setswitchinterval, 0.005 s by default) is S from the start until mmrun's engine start
returns, then the default again (in a forked child, from its fork). A thread that gives up
the GIL at each file it reads, as an import does, waits up to that interval for it each time
while other threads hold it: does mmrun's media decoding during the engine start keep
vLLM's imports waiting so?
"""

from __future__ import annotations

import functools
import importlib.abc
import os
import runpy
import sys
import time

MARK = "STARTUP_MARK"


def mark(event: str) -> None:
    sys.stderr.write(f"{MARK} {time.time():.3f} {os.getpid()} {event}\n")
    sys.stderr.flush()


mark("interpreter up")

# The modules whose first import is timed (begins, done).
IMPORTS = (
    "torch",
    "transformers",
    "vllm",
    "vllm.entrypoints.llm",
    "mmrun",
    "mmrun.cli.main",
    "mmrun.runner",
)
# Functions whose first call is timed, wrapped once their module is imported: (module,
# attribute path, event).
CALLS = (
    ("vllm.plugins", "load_general_plugins", "vLLM plugins"),
    ("vllm.entrypoints.llm", "LLM.__init__", "LLM()"),
    ("vllm.v1.engine.llm_engine", "LLMEngine.add_request", "first request"),
    ("mmrun.plugins", "load_entry_point_plugins", "mmrun plugins"),
    ("mmrun.runner", "Runner.start", "mmrun engine start"),
    ("mmrun.builder", "RequestBuilder.warm", "mmrun frontend warm"),
)
_done: set[str] = set()


def timed(func, event: str):  # type: ignore[no-untyped-def]
    """``func`` with "EVENT begins" and "EVENT done" marks around its first call."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):  # type: ignore[no-untyped-def]
        if event in _done:
            return func(*args, **kwargs)
        _done.add(event)
        mark(f"{event} begins")
        try:
            return func(*args, **kwargs)
        finally:
            mark(f"{event} done")

    return wrapper


def wrap_calls(name: str, module: object) -> None:
    for module_name, path, event in CALLS:
        if module_name != name:
            continue
        *owners, attribute = path.split(".")
        owner = module
        try:
            for part in owners:
                owner = getattr(owner, part)
            setattr(owner, attribute, timed(getattr(owner, attribute), event))
        except AttributeError:  # another version of the program: that mark is left out
            mark(f"no {path} in {name}")


class Watch(importlib.abc.MetaPathFinder):
    """Finds nothing itself: marks the first import of IMPORTS and wraps CALLS' functions
    once their module has run."""

    names = set(IMPORTS) | {c[0] for c in CALLS}

    def find_spec(self, name, path, target=None):  # type: ignore[no-untyped-def]
        if name not in self.names:  # (asked for again until its module has run)
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                break
        else:
            return None
        loader = spec.loader
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        run = loader.exec_module
        shown = name in IMPORTS

        def exec_module(module):  # type: ignore[no-untyped-def]
            Watch.names.discard(name)
            if shown:
                mark(f"import {name} begins")
            try:
                run(module)
            finally:
                del loader.exec_module  # the loader's own method again
                if shown:
                    mark(f"import {name} done")
            wrap_calls(name, module)
            start_switch_interval(name, module)

        loader.exec_module = exec_module
        return spec


SWITCH_INTERVAL = "BENCH_START_SWITCH_INTERVAL"
DEFAULT_SWITCH_INTERVAL = sys.getswitchinterval()  # the interpreter's, before main sets another


def start_switch_interval(name: str, module: object) -> None:
    """With SWITCH_INTERVAL set: mmrun's engine start (Runner.start) puts the default switch
    interval back when it first returns."""
    if name != "mmrun.runner" or not os.environ.get(SWITCH_INTERVAL):
        return
    owner = getattr(module, "Runner", None)
    start = getattr(owner, "start", None)
    if start is None:
        mark("no Runner.start in mmrun.runner")
        return

    @functools.wraps(start)
    def wrapper(*args, **kwargs):  # type: ignore[no-untyped-def]
        try:
            return start(*args, **kwargs)
        finally:
            if sys.getswitchinterval() != DEFAULT_SWITCH_INTERVAL:
                sys.setswitchinterval(DEFAULT_SWITCH_INTERVAL)
                mark("switch interval back to the default")

    owner.start = wrapper  # type: ignore[union-attr]


def main() -> None:
    if len(sys.argv) < 2 or (sys.argv[1] == "-m" and len(sys.argv) < 3):
        raise SystemExit(__doc__)
    if os.environ.get(SWITCH_INTERVAL):
        sys.setswitchinterval(float(os.environ[SWITCH_INTERVAL]))
        mark(f"switch interval {sys.getswitchinterval()}")
        # a forked engine core runs with the default
        os.register_at_fork(after_in_child=lambda: sys.setswitchinterval(DEFAULT_SWITCH_INTERVAL))
    sys.meta_path.insert(0, Watch())
    if sys.argv[1] == "-m":
        module = sys.argv[2]
        sys.argv = [module, *sys.argv[3:]]
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    else:
        script = sys.argv[1]
        sys.argv = sys.argv[1:]
        sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
        runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    main()
