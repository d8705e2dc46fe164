"""`mmrun plugins`: the plugins loaded (mmrun's own and installed ones) and what each registered."""

from typing import Any

from mmrun.cli import _options as o


def plugin_rows() -> list[dict[str, Any]]:
    from mmrun.plugins import BUILTIN_PLUGINS, get_registry

    registry = get_registry()
    rows = []
    for name, names in registry.origins.items():
        rows.append(
            {
                "plugin": name,
                "builtin": name in BUILTIN_PLUGINS,
                "modalities": [n for n in names if "/" not in n],
                "models": [n for n in names if "/" in n],
            }
        )
    return rows


def plugins(json_out: o.JsonOpt = False) -> None:
    """List the plugins loaded and the modalities and model keys each registered."""
    from rich.table import Table

    from mmrun.cli._output import print_json, stdout_console

    rows = plugin_rows()
    if json_out:
        print_json({"plugins": rows})
        return
    table = Table(title="mmrun plugins")
    for column in ("plugin", "modalities", "models"):
        table.add_column(column, overflow="fold")
    for row in rows:
        name = row["plugin"] + (" (built-in)" if row["builtin"] else "")
        models = ", ".join(row["models"])
        table.add_row(name, ", ".join(row["modalities"]) or "-", models or "-")
    stdout_console().print(table)
