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

        loader.exec_module = exec_module
        return spec


def main() -> None:
    if len(sys.argv) < 2 or (sys.argv[1] == "-m" and len(sys.argv) < 3):
        raise SystemExit(__doc__)
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
