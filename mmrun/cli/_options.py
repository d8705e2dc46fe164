"""Options shared by commands, declared once."""

from __future__ import annotations

from typing import Annotated

import typer

QuestionOpt = Annotated[
    str | None,
    typer.Option(
        "--question",
        "-q",
        help="The question to ask. Default: the seed's question.",
        show_default=False,
    ),
]
NumPromptsOpt = Annotated[
    int,
    typer.Option(
        "--num-prompts", help="Number of prompts, sent to vLLM in one batched call.", min=1
    ),
]
# The sampling options' help, with the command's own default (its modality's).


def seed_help(default: int | None) -> str:
    shown = "none" if default is None else str(default)
    return (
        "Engine seed. With a temperature above 0 each prompt also samples with its own seed, "
        "drawn from this one and the prompt's id, so a rerun, a resumed run or -dp gives the "
        f"same texts. Default: {shown} (as vLLM's example)."
    )


def max_tokens_help(default: int) -> str:
    return f"Tokens to generate per prompt. Default: {default}."


def temperature_help(default: float) -> str:
    return f"Sampling temperature. Default: {default:g}."


ModelOpt = Annotated[
    str | None,
    typer.Option(
        "--model",
        help="Hugging Face repo id or local path replacing the key's default checkpoint.",
        show_default=False,
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
    ),
]
EngineArgOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--engine-arg",
        help="Extra vllm.LLM argument KEY=VALUE (VALUE read as JSON if it parses). Repeatable.",
        show_default=False,
    ),
]
SamplingArgOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--sampling-arg",
        help="Extra SamplingParams field KEY=VALUE, e.g. ignore_eos=true. Repeatable.",
        show_default=False,
    ),
]
TrustRemoteCodeOpt = Annotated[
    bool,
    typer.Option(
        "--trust-remote-code", help="Allow models that run Python code from their repository."
    ),
]
DryRunOpt = Annotated[
    bool,
    typer.Option(
        "--dry-run",
        help="Resolve the model, media and full request and print them; do not start vLLM.",
    ),
]
JsonOpt = Annotated[
    bool,
    typer.Option(
        "--json", help="Print JSON on stdout: one document, or for a batch one line per prompt."
    ),
]
VerboseOpt = Annotated[bool, typer.Option("--verbose", "-v", help="Show vLLM's own log on stderr.")]
QuietOpt = Annotated[
    bool, typer.Option("--quiet", help="Print only the results: no progress or notes.")
]
InputOpt = Annotated[
    str | None,
    typer.Option(
        "--input",
        help="A JSONL manifest of prompts (- for standard input): one object per line "
        '({"id": ..., "<modality>": [...], "question": ..., "meta": {...}}) or a bare path.',
        show_default=False,
    ),
]
OutputOpt = Annotated[
    str | None,
    typer.Option(
        "--output",
        "-o",
        help="Write one JSON line per prompt to this file as each finishes; run again to resume.",
        show_default=False,
    ),
]
WarmupOpt = Annotated[
    int,
    typer.Option(
        "--warmup", help="Run the first N prompts once before the timed batch (benchmarks).", min=0
    ),
]
FailFastOpt = Annotated[
    bool, typer.Option("--fail-fast", help="Batch: stop at the first prompt that fails.")
]
RetryErrorsOpt = Annotated[
    bool,
    typer.Option("--retry-errors", help="Resuming -o: also redo the prompts that failed before."),
]
OverwriteOpt = Annotated[
    bool,
    typer.Option("--overwrite", help="Start -o afresh, even if it holds another run's results."),
]
DataParallelOpt = Annotated[
    int,
    typer.Option(
        "--data-parallel-size",
        "-dp",
        help="Engines on this host, each on its own GPUs (-tp each), fed from one queue.",
        min=1,
    ),
]
ReplicasOpt = Annotated[
    int | None,
    typer.Option(
        "--replicas", help="--backend ray: engine actors (default 1).", min=1, show_default=False
    ),
]
