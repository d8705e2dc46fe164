"""`mmrun models`: list every model key, from the same registry the commands use."""

import json
from collections.abc import Callable, Sequence
from functools import cache
from importlib import resources
from typing import Annotated, Any

import typer

from mmrun.cli import _options as o
from mmrun.errors import UsageError
from mmrun.plugins import BUILTIN_PLUGINS, get_registry
from mmrun.registry import LoaderSpec
from mmrun.support import vllm_info


@cache
def proofs() -> dict[str, dict[str, Any]]:
    """How the project's end-to-end tests prove each built-in row ("modality/key": level,
    vLLM versions, stand-ins), as generated into mmrun/proofs.json by `make docs` from the
    tests' tiny builders (tests/tiny)."""
    text = resources.files("mmrun").joinpath("proofs.json").read_text()
    rows: dict[str, dict[str, Any]] = json.loads(text)["rows"]
    return rows


def model_rows(modality: str | None = None) -> list[dict[str, Any]]:
    """One row per model key: what `mmrun models --json` prints and docs/models.md shows."""
    registry = get_registry()
    if modality is not None and modality not in registry.modalities:
        raise UsageError(
            f"unknown modality {modality!r}", hint=f"use one of: {', '.join(registry.modalities)}"
        )
    info = vllm_info()
    return [
        {
            **_row(spec, info.supports(spec.architecture), info.removed.get(spec.architecture)),
            "plugin": registry.plugin_of(spec),
            "proof": _proof(spec, registry.plugin_of(spec)),
        }
        for spec in registry.specs(modality)
    ]


def _proof(spec: LoaderSpec, plugin: str | None) -> dict[str, Any] | None:
    if plugin not in BUILTIN_PLUGINS:  # a plugin's loaders are not what the tests proved
        return None
    return proofs().get(f"{spec.modality}/{spec.key}")


def _row(spec: LoaderSpec, supported: bool | None, last_version: str | None) -> dict[str, Any]:
    return {
        "key": spec.key,
        "modality": spec.modality,
        "repo_id": spec.repo_id,
        "architecture": spec.architecture,
        "family": spec.family,
        "min_items": spec.min_items,
        "max_items": spec.max_items,
        "companions": list(spec.companions),
        "methods": list(spec.methods),
        "trust_remote_code": spec.trust_remote_code,
        "needs_model": spec.needs_model,
        "requires": list(spec.requires),
        "vllm_supported": supported,
        "vllm_last_supported": last_version,
        # The vLLM versions the row declares it runs on, and those from which its request
        # differs (LoaderSpec.since, until, changes).
        "vllm_since": spec.since,
        "vllm_until": spec.until,
        "vllm_changes": [change.version for change in spec.changes],
        "gpus_per_replica": int(spec.engine_args.get("tensor_parallel_size") or 1),
        "note": spec.note,
    }


def models(
    modality: Annotated[
        str | None,
        typer.Argument(help="A modality, e.g. image (default: all).", show_default=False),
    ] = None,
    json_out: o.JsonOpt = False,
) -> None:
    """List the model keys, their checkpoints, media limits and vLLM support."""
    from mmrun.cli._output import print_json, stderr_console, stdout_console

    rows = model_rows(modality)
    if json_out:
        print_json({"vllm": vllm_info().version, "models": rows})
        return
    console = stdout_console()
    version = vllm_info().version or "not installed"
    if not console.is_terminal:
        # Piped or redirected: every column, at the width it needs (Rich would cut it at 80).
        console.width = 1_000
        console.print(_table(f"mmrun models (vLLM {version})", rows, COLUMNS))
        return
    # A terminal: one table per modality (its title says which), with as many columns as
    # fit; the key and the repo id always and never cut (they are what a user copies). The
    # columns left out are named, with where to find them.
    columns = [c for c in COLUMNS if c[0] != "modality"]
    groups: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault(row["modality"], []).append(row)
    count = min(
        _fitting(console, f"{name} models", group, columns) for name, group in groups.items()
    )
    for name, group in groups.items():
        table = _table(f"{name} models (vLLM {version})", group, columns[:count])
        natural = console.measure(table, options=console.options.update(max_width=10_000))
        if natural.maximum > console.width:  # not even the key and the repo id fit: the
            console.width = natural.maximum  # terminal wraps the lines rather than Rich cutting
        console.print(table)
    left_out = [name for name, _ in columns[count:]]
    if left_out:
        stderr_console().print(
            f"[dim]mmrun: {', '.join(left_out)} left out for this terminal's width; "
            "`mmrun models --json` has every field[/]"
        )


def _fitting(
    console: Any,
    title: str,
    rows: list[dict[str, Any]],
    columns: Sequence[tuple[str, Callable[[dict[str, Any]], str]]],
) -> int:
    """How many of ``columns`` (at least the key and the repo id) fit the console's width."""
    for count in range(len(columns), 2, -1):
        table = _table(title, rows, columns[:count])
        natural = console.measure(table, options=console.options.update(max_width=10_000))
        if natural.maximum <= console.width:
            return count
    return 2


# Columns by priority: the key and the repo id first, never cut.
COLUMNS: tuple[tuple[str, Callable[[dict[str, Any]], str]], ...] = (
    ("key", lambda row: str(row["key"])),
    ("repo id", lambda row: str(row["repo_id"])),
    ("modality", lambda row: str(row["modality"])),
    ("vLLM", lambda row: _supported(row)),
    ("max items", lambda row: _max_items(row)),
    ("methods", lambda row: ",".join(row["methods"])),
    ("remote code", lambda row: "yes" if row["trust_remote_code"] else ""),
    ("proven on", lambda row: _proof_cell(row["proof"])),
)


def _max_items(row: dict[str, Any]) -> str:
    """The most items a prompt takes ("any": no limit), and "+1 image" where it may carry an
    image with its own."""
    text = "any" if row["max_items"] is None else str(row["max_items"])
    return text + "".join(f" +1 {name}" for name in row.get("companions", ()))


def _supported(row: dict[str, Any]) -> str:
    text = {True: "[green]yes[/]", False: "[red]no[/]", None: "?"}[row["vllm_supported"]]
    if row["vllm_last_supported"] and not row["vllm_supported"]:
        text += f" (≤{row['vllm_last_supported']})"
    return text + versions_note(row["vllm_since"], row["vllm_until"], row["vllm_changes"])


def versions_note(since: str | None, until: str | None, changes: Sequence[str]) -> str:
    """`` (≥0.34)``, `` (≤0.33)``, `` (own request from 0.34)``: what a row declares."""
    parts = [f"≥{since}"] if since else []
    parts += [f"≤{until}"] if until else []
    parts += [f"own request from {', '.join(changes)}"] if changes else []
    return f" ({'; '.join(parts)})" if parts else ""


def _table(
    title: str,
    rows: list[dict[str, Any]],
    columns: Sequence[tuple[str, Callable[[dict[str, Any]], str]]],
) -> Any:
    from rich import box
    from rich.table import Table

    # No outer border and no column rules: the key and the repo id of the longest rows fit
    # 80 columns side by side.
    table = Table(title=title, box=box.SIMPLE_HEAD, show_edge=False, collapse_padding=True)
    for index, (name, _) in enumerate(columns):
        table.add_column(name, no_wrap=index < 2)
    for row in rows:
        table.add_row(*(cell(row) for _, cell in columns))
    return table


def _proof_cell(proof: dict[str, Any] | None) -> str:
    """The vLLM versions the tests ran a row on offline; "engine path" where the run used a
    stand-in template or tokenizer: the engine path is proven, not the exact prompt (docs/models.md)."""
    if proof is None:
        return ""
    versions = ", ".join(proof["vllm"])
    return versions if proof["level"] == "real" else f"{versions} (engine path)"
