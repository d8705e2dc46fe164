"""What the engine's processes inherit from this one: the environment for vLLM's logs and
warnings, a private folder for its sockets, a frozen heap, and torch's threads carried
safely across vLLM's fork. Where their output goes is mmrun.engine.output's."""

from __future__ import annotations

import atexit
import contextlib
import gc
import logging
import os
import shutil
import tempfile
import warnings
from collections.abc import Iterator

from mmrun.engine import log_stream

_QUIET_RESOURCE_TRACKER = "ignore::UserWarning:multiprocessing.resource_tracker"

RPC_DIR_ENV = "VLLM_RPC_BASE_PATH"
_SOCKET_PATH_MAX = 107  # a Unix socket's path, in bytes (sockaddr_un.sun_path less its NUL)
_temporary: list[str] = []  # files and folders of this process, removed when it ends


def remember_temporary(path: str) -> None:
    """Remove ``path`` (a file or a folder) when this process ends."""
    if not _temporary:
        atexit.register(remove_temporary_files)
    _temporary.append(path)


def keep_temporary(path: str) -> None:
    """Keep ``path`` after this process ends (an engine log that tells why an engine died)."""
    with contextlib.suppress(ValueError):
        _temporary.remove(path)


def is_temporary(path: str) -> bool:
    """Whether this process made ``path`` and removes it when it ends."""
    return path in _temporary


def remove_temporary_files() -> None:
    while _temporary:
        path = _temporary.pop()
        if os.path.isdir(path):
            shutil.rmtree(path, ignore_errors=True)
        else:
            with contextlib.suppress(OSError):
                os.unlink(path)


def use_private_rpc_dir() -> None:
    """vLLM names its ZMQ sockets ``ipc://<temp folder>/<uuid>`` and leaves the socket files
    behind (5 per run, measured in /tmp with vLLM 0.32). Unless the user chose the folder,
    this process's engines put theirs in a folder of its own, removed when the process ends."""
    if os.environ.get(RPC_DIR_ENV) or any(os.path.isdir(p) for p in _temporary):
        return
    folder = tempfile.mkdtemp(prefix="mmrun-")
    if len(folder) + 1 + 36 > _SOCKET_PATH_MAX:  # "<folder>/<uuid4>" must fit: vLLM's default
        os.rmdir(folder)
        return
    remember_temporary(folder)
    os.environ[RPC_DIR_ENV] = folder


@contextlib.contextmanager
def heap_frozen() -> Iterator[None]:
    """This process's objects out of the garbage collector's reach while vLLM starts
    (``gc.freeze``, after one collection), back in it afterwards (``gc.unfreeze``).

    vLLM forks its engine core from this process on a GPU. A forked child walks every object
    it inherited in each full collection, and its start (loading the compile cache, building
    the model) is one allocation-heavy Python thread: frozen, those objects cost its
    collector nothing (docs/performance.md). The child keeps its copy frozen; this process
    gets its objects back once the engine has started, so nothing stays uncollectable. It
    costs one full collection."""
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


@contextlib.contextmanager
def one_thread_until_forked(threads: int | None) -> Iterator[None]:
    """vLLM's start with one torch thread in this process; a process forked meanwhile (vLLM's
    engine core) gets ``threads`` back at once, and this process once vLLM has started.

    torch's CPU threads are GNU OpenMP's, which does not survive a fork: once a process has
    run a parallel region on more than one thread, a child forked from it hangs in its own
    first one. vLLM builds the model's processor in this process with OMP_NUM_THREADS torch
    threads, then forks its engine core, which runs that processor on dummy inputs before it
    reports ready: with several threads, that step can hang for good (docs/performance.md).
    vLLM with OMP_NUM_THREADS unset runs both steps on one thread; mmrun runs no torch work
    before this. So while vLLM starts, OMP_NUM_THREADS is 1 here (vLLM reads it) and torch's
    threads are 1. A fork handler puts ``threads`` back in the child before it runs anything
    (no team existed to inherit), and this process gets them back after the start, for the
    requests' processing. Nothing to do for None or 1 (vLLM's CPU build), nor when vLLM is
    told to spawn its processes (VLLM_WORKER_MULTIPROC_METHOD=spawn): a spawned process
    inherits no OpenMP state, only the environment, which then keeps ``threads`` for it."""
    if threads is None or threads <= 1 or os.environ.get(_MULTIPROC_METHOD) == "spawn":
        yield
        return
    import torch

    _register_fork_handler()
    _threads_for_children[0] = threads
    os.environ["OMP_NUM_THREADS"] = "1"
    torch.set_num_threads(1)
    try:
        yield
    finally:
        _threads_for_children[0] = None
        use_threads(threads)


_MULTIPROC_METHOD = "VLLM_WORKER_MULTIPROC_METHOD"  # how vLLM starts its processes
# The torch threads a process forked from this one gets; None: what it inherits.
_threads_for_children: list[int | None] = [None]
_fork_handler_registered = [False]


def _register_fork_handler() -> None:
    if not _fork_handler_registered[0]:
        os.register_at_fork(after_in_child=_threads_in_child)
        _fork_handler_registered[0] = True


def _threads_in_child() -> None:
    threads = _threads_for_children[0]
    if threads is not None:
        _threads_for_children[0] = None  # its own children inherit
        use_threads(threads)


def use_threads(threads: int) -> None:
    import torch

    os.environ["OMP_NUM_THREADS"] = str(threads)
    torch.set_num_threads(threads)


def configure_environment(verbose: bool) -> None:
    """Send vLLM's logs to stderr and keep them quiet unless asked for. Without ``verbose``,
    what torch, Triton and Python's warnings print, in this process and in the engine's, is
    kept back too: a run shows mmrun's lines and the results, and ``-v`` shows the rest."""
    global _quiet
    _quiet = not verbose
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "INFO" if verbose else "ERROR")
    # stderr, and the reason for a failed start back to this process (see log_stream)
    os.environ.setdefault("VLLM_LOGGING_STREAM", log_stream.STREAM_SPEC)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    if verbose:
        return
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("TORCH_CPP_LOG_LEVEL", "ERROR")  # c10's "[W...] Warning: NUMA ..."
    os.environ.setdefault("TORCH_LOGS", "-all")  # torch's "No CUDA runtime is found, ..."
    # vLLM logs a few warnings while it is imported, before it has set up its log (Triton's
    # "doesn't include CPU backend"): Python prints those whatever VLLM_LOGGING_LEVEL says.
    # This handler takes them; vLLM's own set-up replaces it.
    vllm_logger = logging.getLogger("vllm")
    if not any(isinstance(h, logging.NullHandler) for h in vllm_logger.handlers):
        vllm_logger.addHandler(logging.NullHandler())
    current = os.environ.get("PYTHONWARNINGS")
    if current is None:
        # Python's warnings (vLLM's FutureWarnings, the resource tracker's notes on the
        # shared memory it cleans up after the engine): here and in the engine's processes.
        os.environ["PYTHONWARNINGS"] = "ignore"
        warnings.simplefilter("ignore")
    elif _QUIET_RESOURCE_TRACKER not in current:
        # The user's own filters, and the resource tracker's housekeeping kept out: work
        # that succeeds, and nothing the user can act on.
        os.environ["PYTHONWARNINGS"] = ",".join(filter(None, [current, _QUIET_RESOURCE_TRACKER]))


_quiet = False  # set by configure_environment: no progress bars from the engine either


def is_quiet() -> bool:
    """Whether configure_environment was told to keep the engine's output back."""
    return _quiet
