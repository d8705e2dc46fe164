"""Peak memory and time of a dry run over a generated Parquet of N rows, each with a small PNG
in a bytes column (the shape of a `datasets` Image column): the table streams by row group,
so peak RSS should stay flat from 10,000 to 1,000,000 rows.

Stand-alone (not part of `make bench`, which it would lengthen by a quarter of an hour):

    python -m bench.cpu.tables                    # 10k, 100k and 1M rows
    python -m bench.cpu.tables --rows 10000,100000

Each size runs ``mmrun image -m mistral3 --input T.parquet --dry-run --json --quiet`` (the
model renders its own prompt, so nothing is downloaded; every row's image is decoded and its
prompt built, without an engine) in a process of its own; the figures are that process's peak
RSS (getrusage of the waited child) and its wall time.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def png(i: int) -> bytes:
    from PIL import Image

    out = io.BytesIO()
    Image.new("RGB", (32, 32), (i % 256, (7 * i) % 256, (13 * i) % 256)).save(out, "PNG")
    return out.getvalue()


def write_table(path: Path, rows: int, group: int = 10_000) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    # 256 images, each row's made distinct by its number after the PNG's end (which decoders
    # ignore), so that Parquet cannot store the column as a small dictionary.
    images = [png(i) for i in range(256)]
    schema = pa.schema([("id", pa.string()), ("image", pa.binary()), ("question", pa.string())])
    with pq.ParquetWriter(path, schema) as writer:
        for start in range(0, rows, group):
            ids = range(start, min(rows, start + group))
            writer.write_table(
                pa.table(
                    {
                        "id": [f"row{i}" for i in ids],
                        "image": [images[i % 256] + str(i).encode() for i in ids],
                        "question": [f"What is in image {i}?" for i in ids],
                    },
                    schema=schema,
                )
            )


def measure(table: Path) -> dict[str, float]:
    command = [
        sys.executable,
        "-m",
        "mmrun",
        "image",
        "-m",
        "mistral3",
        "--input",
        str(table),
        "--dry-run",
        "--json",
        "--quiet",
    ]
    t0 = time.monotonic()
    with open(os.devnull, "wb") as sink, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(command, stdout=sink, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)  # this child's own peak RSS
        wall = time.monotonic() - t0
        if status:
            err.seek(0)
            raise SystemExit(f"mmrun failed ({status}): {err.read().decode()[-2000:]}")
    return {"wall_s": round(wall, 1), "peak_rss_mib": round(usage.ru_maxrss / 1024, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default="10000,100000,1000000")
    sizes = [int(n) for n in parser.parse_args().rows.split(",")]
    results = []
    with tempfile.TemporaryDirectory(prefix="mmrun-tables-") as folder:
        for rows in sizes:
            table = Path(folder) / f"t{rows}.parquet"
            write_table(table, rows)
            figures = measure(table)
            figures.update(
                rows=rows,
                s_per_100k_rows=round(figures["wall_s"] * 1e5 / rows, 1),
                table_mb=round(table.stat().st_size / 1e6, 1),
            )
            results.append(figures)
            print(json.dumps(figures), flush=True)
            table.unlink()


if __name__ == "__main__":
    main()
