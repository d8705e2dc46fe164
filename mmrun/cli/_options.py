"""Options shared by commands, declared once.

Help texts are short (the option table must read at 80 columns) and are shown literally:
``literal`` escapes what Rich would read as markup (``pip install 'mmrun[ray]'``). A flag's
metavar is empty, a value's names what it takes (N, FILE, KEY=VALUE), so the type column
stays narrow.
"""

from __future__ import annotations

from typing import Annotated

import typer


def literal(text: str) -> str:
    """``text`` as Typer's help shows it literally, whichever help formatter is on."""
    from mmrun.cli._output import color_disabled

    if color_disabled():  # the plain formatter prints the text as it is
        return text
    from rich.markup import escape

    return escape(text)


NumPromptsOpt = Annotated[
    int,
    typer.Option(
        "--num-prompts",
        help="Number of prompts, sent to vLLM in one batched call.",
        min=1,
        metavar="N",
    ),
]
ModelOpt = Annotated[
    str | None,
    typer.Option(
        "--model",
        help="The checkpoint to run: a Hugging Face repo id or a local folder (default: -m's "
        "repo id in `mmrun models`). Without -m, the architecture its config.json names "
        "picks the key (none: -m auto).",
        show_default=False,
        metavar="PATH",
    ),
]
TensorParallelOpt = Annotated[
    int | None,
    typer.Option(
        "--tensor-parallel-size",
        "-tp",
        help="GPUs to shard the model over.",
        min=1,
        show_default=False,
        metavar="N",
    ),
]
EngineArgOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--engine-arg",
        help="Extra vllm.LLM argument KEY=VALUE, VALUE read as JSON if it parses. Repeatable.",
        show_default=False,
        metavar="K=V",
    ),
]
SamplingArgOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--sampling-arg",
        help="Extra SamplingParams field KEY=VALUE, e.g. ignore_eos=true. Repeatable.",
        show_default=False,
        metavar="K=V",
    ),
]
TrustRemoteCodeOpt = Annotated[
    bool,
    typer.Option(
        "--trust-remote-code",
        help="Allow models that run Python code from their repository.",
        metavar="",
    ),
]
DryRunOpt = Annotated[
    bool,
    typer.Option(
        "--dry-run",
        help="Resolve the model, media and full request and print them; do not start vLLM.",
        metavar="",
    ),
]
JsonOpt = Annotated[
    bool,
    typer.Option(
        "--json",
        help="Print JSON on stdout: one document, or for a batch one line per prompt.",
        metavar="",
    ),
]
VerboseOpt = Annotated[
    bool,
    typer.Option(
        "--verbose", "-v", help="Show vLLM's own log (the engine log) on stderr.", metavar=""
    ),
]
QuietOpt = Annotated[
    bool,
    typer.Option("--quiet", help="Print only the results: no progress or notes.", metavar=""),
]
InputOpt = Annotated[
    str | None,
    typer.Option(
        "--input",
        help="The prompts: a JSONL manifest (- for stdin), CSV/TSV, Parquet, Arrow, a datasets "
        "folder, hf://datasets/ORG/NAME, .tar shards, an OpenAI batch file or LLaVA-style "
        "conversation JSON (docs/usage.md).",
        show_default=False,
        metavar="FILE",
    ),
]
OutputOpt = Annotated[
    str | None,
    typer.Option(
        "--output",
        "-o",
        help="Write a JSON line per prompt as each finishes; run again to resume. A .parquet "
        "or .csv name: a table at the end.",
        show_default=False,
        metavar="FILE",
    ),
]
WarmupOpt = Annotated[
    int,
    typer.Option(
        "--warmup",
        help="Run the first N prompts once before the timed batch (benchmarks).",
        min=0,
        metavar="N",
    ),
]
FailFastOpt = Annotated[
    bool,
    typer.Option("--fail-fast", help="Batch: stop at the first prompt that fails.", metavar=""),
]
MaxRestartsOpt = Annotated[
    int,
    typer.Option(
        "--max-restarts",
        help="Batch: restarts of an engine that died, in a row without a result (0: stop).",
        metavar="N",
    ),
]
RetryErrorsOpt = Annotated[
    bool,
    typer.Option(
        "--retry-errors", help="Resuming -o: also redo the prompts that failed before.", metavar=""
    ),
]
OverwriteOpt = Annotated[
    bool,
    typer.Option(
        "--overwrite", help="Start -o afresh, even if it holds another run's results.", metavar=""
    ),
]
DataParallelOpt = Annotated[
    int,
    typer.Option(
        "--data-parallel-size",
        "-dp",
        help="Engines on this host, each on its own GPUs (-tp each), fed from one queue.",
        min=1,
        metavar="N",
    ),
]
ReplicasOpt = Annotated[
    int | None,
    typer.Option(
        "--replicas",
        help="--backend ray: engine actors (default 1).",
        min=1,
        show_default=False,
        metavar="N",
    ),
]
JsonSchemaOpt = Annotated[
    str | None,
    typer.Option(
        "--json-schema",
        help="Answer JSON matching this JSON Schema (a file or inline); results carry `parsed`.",
        show_default=False,
        metavar="SCHEMA",
    ),
]
ChoiceOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--choice",
        help="Answer one of these strings (repeatable, or cat,dog).",
        show_default=False,
        metavar="TEXT",
    ),
]
RegexOpt = Annotated[
    str | None,
    typer.Option(
        "--regex",
        help="Answer text that matches this regular expression.",
        show_default=False,
        metavar="REGEX",
    ),
]
GrammarOpt = Annotated[
    str | None,
    typer.Option(
        "--grammar",
        help="Answer text of this grammar (an EBNF/GBNF or Lark file).",
        show_default=False,
        metavar="FILE",
    ),
]
JsonObjectOpt = Annotated[
    bool,
    typer.Option(
        "--json-object", help="Answer any JSON value; results carry it as `parsed`.", metavar=""
    ),
]
InputFormatOpt = Annotated[
    str | None,
    typer.Option(
        "--input-format",
        help="--input's format if its name does not say: jsonl, openai, conversations, csv, "
        "tsv, parquet, arrow, webdataset, hf.",
        show_default=False,
        metavar="FORMAT",
    ),
]
ColumnsOpt = Annotated[
    str | None,
    typer.Option(
        "--columns",
        help="Columns for mmrun's fields, e.g. id=uid,image=img (default: found by type or name).",
        show_default=False,
        metavar="MAP",
    ),
]
KeepColumnsOpt = Annotated[
    str | None,
    typer.Option(
        "--keep-columns",
        help="Input columns copied to each result's meta, e.g. label,url.",
        show_default=False,
        metavar="NAMES",
    ),
]
QuestionTemplateOpt = Annotated[
    str | None,
    typer.Option(
        "--question-template",
        help="Each prompt's question from its row, e.g. '{hint}\\n{question}\\nA. {A}' (a line "
        "with an empty field is left out).",
        show_default=False,
        metavar="TEXT",
    ),
]
MediaRootOpt = Annotated[
    str | None,
    typer.Option(
        "--media-root",
        help="Folder that --input's relative media paths are in (default: the input's own).",
        show_default=False,
        metavar="DIR",
    ),
]
SplitOpt = Annotated[
    str | None,
    typer.Option(
        "--split",
        help="A data set's split (default: train).",
        show_default=False,
        metavar="NAME",
    ),
]
DatasetConfigOpt = Annotated[
    str | None,
    typer.Option(
        "--dataset-config",
        help="The config (subset) of a Hub data set.",
        show_default=False,
        metavar="NAME",
    ),
]
RevisionOpt = Annotated[
    str | None,
    typer.Option(
        "--revision",
        help="A Hub data set's branch, tag or commit.",
        show_default=False,
        metavar="REV",
    ),
]
LimitOpt = Annotated[
    int | None,
    typer.Option(
        "--limit",
        help="Run at most this many prompts (of --input, a folder or a pattern).",
        min=1,
        show_default=False,
        metavar="N",
    ),
]
ShardOpt = Annotated[
    str | None,
    typer.Option(
        "--shard",
        help="Every N-th prompt from prompt I (e.g. 0/4), in the input's order.",
        show_default=False,
        metavar="I/N",
    ),
]
OutputFormatOpt = Annotated[
    str | None,
    typer.Option(
        "--output-format",
        help="-o's format if its name does not say: jsonl, parquet, csv, openai (run-batch lines).",
        show_default=False,
        metavar="FORMAT",
    ),
]
ServerOpt = Annotated[
    str | None,
    typer.Option(
        "--server",
        help="Send the prompts to this running vLLM server (`mmrun serve`, `vllm serve`) "
        "instead of starting vLLM, e.g. http://127.0.0.1:8000.",
        envvar="MMRUN_SERVER",
        show_default=False,
        show_envvar=True,
        metavar="URL",
    ),
]
ApiKeyOpt = Annotated[
    str | None,
    typer.Option(
        "--api-key",
        help="The vLLM server's API key (sent as a Bearer token).",
        envvar="VLLM_API_KEY",
        show_default=False,
        show_envvar=True,
        metavar="KEY",
    ),
]
