"""``mmrun export``: a batch's result lines as a Parquet or CSV table."""

# No `from __future__ import annotations`: Typer reads the annotations at runtime.

from typing import Annotated

import typer


def export(
    results: Annotated[str, typer.Argument(help="The JSONL file a batch wrote (-o).")],
    out: Annotated[str, typer.Argument(help="The table to write: a .parquet or .csv file.")],
    output_format: Annotated[
        str | None,
        typer.Option(
            "--format",
            help="parquet or csv, when OUT's name does not say.",
            show_default=False,
            metavar="FORMAT",
        ),
    ] = None,
) -> None:
    """Write a batch's results as a Parquet or CSV table, with the kept input columns."""
    from mmrun.cli._output import stderr_console
    from mmrun.errors import UsageError
    from mmrun.export import export as write_table

    if output_format is not None and output_format not in ("parquet", "csv"):
        raise UsageError(f"unknown --format {output_format!r}", hint="use parquet or csv")
    rows = write_table(results, out, output_format)
    stderr_console().print(f"{rows} rows in {out}", highlight=False)
