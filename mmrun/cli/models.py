"""`mmrun models`: list every model key, from the same registry the commands use."""

from typing import Annotated, Any

import typer

from mmrun.cli import _options as o
from mmrun.cli._errors import error_boundary
from mmrun.errors import UsageError
from mmrun.plugins import get_registry
from mmrun.registry import LoaderSpec
from mmrun.support import vllm_info


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
        }
        for spec in registry.specs(modality)
    ]


def _row(spec: LoaderSpec, supported: bool | None, last_version: str | None) -> dict[str, Any]:
    return {
        "key": spec.key,
        "modality": spec.modality,
        "repo_id": spec.repo_id,
        "architecture": spec.architecture,
        "family": spec.family,
        "min_items": spec.min_items,
        "max_items": spec.max_items,
        "methods": list(spec.methods),
        "trust_remote_code": spec.trust_remote_code,
        "needs_model": spec.needs_model,
        "requires": list(spec.requires),
        "vllm_supported": supported,
        "vllm_last_supported": last_version,
        "gpus_per_replica": int(spec.engine_args.get("tensor_parallel_size") or 1),
        "note": spec.note,
    }


@error_boundary
def models(
    modality: Annotated[
        str | None, typer.Argument(help="image or audio (default: all).", show_default=False)
    ] = None,
    json_out: o.JsonOpt = False,
) -> None:
    """List the model keys, their checkpoints, media limits and vLLM support."""
    from mmrun.cli._output import print_json, stdout_console

    rows = model_rows(modality)
    if json_out:
        print_json({"vllm": vllm_info().version, "models": rows})
        return
    from rich.table import Table

    table = Table(title=f"mmrun models (vLLM {vllm_info().version or 'not installed'})")
    for column in ("key", "modality", "repo id", "max items", "methods", "remote code", "vLLM"):
        table.add_column(column)
    for row in rows:
        supported = {True: "[green]yes[/]", False: "[red]no[/]", None: "?"}[row["vllm_supported"]]
        if row["vllm_last_supported"] and not row["vllm_supported"]:
            supported += f" (≤{row['vllm_last_supported']})"
        table.add_row(
            row["key"],
            row["modality"],
            row["repo_id"],
            "any" if row["max_items"] is None else str(row["max_items"]),
            ",".join(row["methods"]),
            "yes" if row["trust_remote_code"] else "",
            supported,
        )
    stdout_console().print(table)
