"""``mmrun serve``: vLLM's own OpenAI-compatible server for a model key (mmrun.serving), for
``--server URL`` runs that should not each start an engine."""

# No `from __future__ import annotations`: Typer reads the option annotations at runtime.

import shlex
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from mmrun.cli import _options as o
from mmrun.errors import EngineError, UsageError

if TYPE_CHECKING:
    from mmrun.plan import Plan
    from mmrun.serving import ServeOptions

DEFAULT_PORT = 8000
# A server is started for a batch of many prompts: the engine arguments mmrun would choose on
# a GPU for a data set this large (mmrun.engine.gpu) are the server's.
SERVE_PROMPTS = 1000

SERVE_EXAMPLES = """Examples:

  mmrun serve -m qwen2_5_vl &

  mmrun image -m qwen2_5_vl -i photos/ -o captions.jsonl --server http://127.0.0.1:8000

  mmrun serve -m qwen2_5_vl --detach && mmrun serve --stop"""


def serve(
    key: Annotated[
        str | None,
        typer.Option(
            "--model-type",
            "-m",
            help="Which model: a key from `mmrun models`.",
            show_default=False,
            metavar="KEY",
        ),
    ] = None,
    modality: Annotated[
        str | None,
        typer.Option(
            "--modality",
            help="Serve the key for this modality only (default: every modality that has it).",
            show_default=False,
            metavar="NAME",
        ),
    ] = None,
    model: o.ModelOpt = None,
    host: Annotated[
        str,
        typer.Option("--host", help="The address to listen on.", metavar="ADDR"),
    ] = "127.0.0.1",
    port: Annotated[
        int | None,
        typer.Option(
            "--port",
            help=f"The port to listen on (default {DEFAULT_PORT}); with --stop, the server's.",
            min=1,
            max=65535,
            show_default=False,
            metavar="N",
        ),
    ] = None,
    api_key: o.ApiKeyOpt = None,
    api_servers: Annotated[
        int | None,
        typer.Option(
            "--api-servers",
            help="vLLM's API-server processes (its --api-server-count): each prepares the "
            "requests it takes (images, audio) on cores of its own. Default: on a GPU, one "
            "per 4 cores, at most 4; on vLLM's CPU build, 1.",
            min=1,
            show_default=False,
            metavar="N",
        ),
    ] = None,
    items: Annotated[
        int | None,
        typer.Option(
            "--items",
            help="Media items one request may carry (default: the modality's default count).",
            min=1,
            show_default=False,
            metavar="N",
        ),
    ] = None,
    tensor_parallel_size: o.TensorParallelOpt = None,
    engine_arg: o.EngineArgOpt = None,
    trust_remote_code: o.TrustRemoteCodeOpt = False,
    detach: Annotated[
        bool,
        typer.Option(
            "--detach",
            help="Leave the server running once it is ready (pid file and log in mmrun's "
            "state dir; `mmrun serve --stop` ends it).",
            metavar="",
        ),
    ] = False,
    stop: Annotated[
        bool,
        typer.Option(
            "--stop", help="Stop the servers started with --detach (--port: that one).", metavar=""
        ),
    ] = False,
    dry_run: Annotated[
        bool,
        typer.Option(
            "--dry-run",
            help="Print the `vllm serve` command line, after the environment variables mmrun "
            "sets for it; start nothing.",
            metavar="",
        ),
    ] = False,
    verbose: o.VerboseOpt = False,
) -> None:
    """Start vLLM's OpenAI-compatible server with a model key's engine arguments, chat template
    and LoRA adapter, for `--server URL` runs."""
    from mmrun import serving

    if stop:
        for url in serving.stop_detached(serving.state_dir(), port):
            _say(f"mmrun: stopped the vLLM server at {url}")
        return
    if key is None:
        raise UsageError(
            "mmrun serve needs a model key", hint="pass -m KEY (`mmrun models` lists them)"
        )
    if api_servers is None:
        from mmrun.engine.gpu import chosen_api_servers

        api_servers = chosen_api_servers()
    options = serving.ServeOptions(host, port or DEFAULT_PORT, api_key or None, api_servers)
    the_plan = _plan(
        key, modality, model, items, tensor_parallel_size, engine_arg, trust_remote_code, dry_run
    )
    folder = serving.state_dir()
    command = _command(the_plan, options, folder)
    if dry_run:
        added = [
            f"{name}={value}"
            for name, value in serving.added_environment(the_plan, options.api_servers).items()
        ]
        print(shlex.join([*added, *command]))
        return
    _run(the_plan, options, command, folder, detach=detach, verbose=verbose)


def _plan(
    key: str,
    modality: str | None,
    model: str | None,
    items: int | None,
    tensor_parallel_size: int | None,
    engine_arg: list[str] | None,
    trust_remote_code: bool,
    dry_run: bool,
) -> "Plan":
    """The plan of the key's first modality (its engine arguments), with the media limits of
    every modality served."""
    import dataclasses

    from mmrun import structured
    from mmrun.planning import RunOptions, parse_key_values, plan
    from mmrun.plugins import get_registry
    from mmrun.support import vllm_info

    registry = get_registry()
    names = [
        name
        for name in registry.modalities
        if (modality is None or name == modality)
        and any(s.key == key for s in registry.specs(name))
    ]
    if not names:
        where = f"{modality} model" if modality else "model"
        raise UsageError(f"unknown {where} key {key!r}", hint="`mmrun models` lists the keys")
    engine_args = parse_key_values(engine_arg or [])
    plans = [
        plan(
            RunOptions(
                modality=name,
                key=key,
                count=items,
                num_prompts=SERVE_PROMPTS,
                model=model,
                tensor_parallel_size=tensor_parallel_size,
                engine_args=engine_args,
                trust_remote_code=trust_remote_code,
                dry_run=dry_run,
            ),
            registry,
            vllm_info(),
        )
        for name in names
    ]
    first = plans[0]
    merged = dict(first.engine_args)
    # The server's JSON answers as compact as a JSON run of mmrun's own engine (its whitespace
    # setting is the engine's, not a request's).
    structured.compact_json(merged, engine_args)
    if "limit_mm_per_prompt" not in engine_args:
        # A modality without default media (video) plans no item: it takes --items, else one.
        limits: dict[str, Any] = {}
        for each in plans:
            own = each.spec.media_key or each.modality.engine_key or each.modality.name
            for kind, count in each.engine_args.get("limit_mm_per_prompt", {}).items():
                if kind == own and not count:
                    count = items or 1
                limits[kind] = max(int(limits.get(kind, 0)), int(count))
        merged["limit_mm_per_prompt"] = limits
    return dataclasses.replace(first, engine_args=merged)


def _command(the_plan: "Plan", options: "ServeOptions", folder: Path) -> list[str]:
    from mmrun import serving
    from mmrun.hub_access import lora_path

    lora = lora_path(the_plan.spec.lora, the_plan.model, resolve=not the_plan.dry_run)
    template = serving.template_file(the_plan, folder / "templates")
    return serving.server_command(the_plan, options, template_file=template, lora_path=lora)


def _run(
    the_plan: "Plan",
    options: "ServeOptions",
    command: list[str],
    folder: Path,
    *,
    detach: bool,
    verbose: bool,
) -> None:
    from mmrun import serving
    from mmrun.engine.cpu import prepare_the_cpu_start
    from mmrun.engine.server import ServerTarget

    prepare_the_cpu_start(the_plan.engine_args, say=verbose)  # said with -v, as in a run
    url = serving.url_of(options)
    folder.mkdir(parents=True, exist_ok=True)
    log_path = folder / f"server-{options.port}.log"
    log = None if verbose and not detach else log_path.open("wb")
    processes = f", {options.api_servers} API-server processes" if options.api_servers > 1 else ""
    _say(
        f"mmrun: starting vLLM's server for {the_plan.spec.key} ({the_plan.model}) at {url}"
        + processes
    )
    added = serving.added_environment(the_plan, options.api_servers)
    if verbose and added:
        _say("mmrun: its environment adds " + " ".join(f"{k}={v}" for k, v in added.items()))
    server = serving.RunningServer(command, serving.environment(added, options), log)
    if log is not None:
        log.close()  # the server holds its own descriptor
    stopped = [False]

    def terminate(signum: int, frame: Any) -> None:
        stopped[0] = True
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, terminate)
    try:
        server.wait_ready(ServerTarget(url, options.api_key), None if log is None else log_path)
        print(url, flush=True)
        if detach:
            serving.record(folder, options, server.pid, the_plan.spec.key, log_path)
            _say(f"mmrun: the server runs on (log: {log_path}); `mmrun serve --stop` ends it")
            server = None  # type: ignore[assignment]
            return
        _say("mmrun: ready (Ctrl-C stops it)")
        code = server.process.wait()
        server = None  # type: ignore[assignment]
        where = f" (its log: {log_path})" if log is not None else ""
        raise EngineError(f"vLLM's server exited with code {code}{where}")
    except KeyboardInterrupt:
        if stopped[0]:  # SIGTERM: a clean stop
            raise typer.Exit(0) from None
        raise
    finally:
        signal.signal(signal.SIGTERM, previous)
        if server is not None:
            server.stop()


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)
