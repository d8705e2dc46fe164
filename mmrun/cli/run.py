"""``mmrun <modality>``: one command per registered modality, built from the Modality."""

# No `from __future__ import annotations`: Typer reads the closure-built option annotations at runtime.

import enum
import inspect
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Annotated, Any

import typer

from mmrun.cli import _options as o
from mmrun.errors import EXIT_PARTIAL, UsageError
from mmrun.registry import GENERIC_KEY, MediaOption, Modality

if TYPE_CHECKING:
    from mmrun.planning import RunOptions


class MethodChoice(str, enum.Enum):
    generate = "generate"
    chat = "chat"


class BackendChoice(str, enum.Enum):
    local = "local"
    ray = "ray"


def _execute(modality: str, **kw: Any) -> None:
    # Imported here, not at the top: `mmrun --help` must stay fast.
    from mmrun.capture import show_library_output
    from mmrun.devices import visible_gpus
    from mmrun.engine import configure_environment
    from mmrun.planning import plan
    from mmrun.plugins import get_registry
    from mmrun.support import vllm_info

    json_out, quiet, verbose = kw.pop("json_out"), kw.pop("quiet"), kw.pop("verbose")
    if quiet and verbose:
        raise UsageError("--quiet and --verbose contradict each other", hint="pass one of them")
    opts = _run_options(modality, kw)
    configure_environment(verbose)
    show_library_output(verbose)
    gpus = visible_gpus() if opts.data_parallel_size > 1 else []
    the_plan = plan(opts, get_registry(), vllm_info(), gpus)
    # Why this model, where -m did not name it; what became of an option; the GPU choices
    # with -v or --dry-run.
    said = [the_plan.model_choice] if the_plan.model_choice else []
    said += list(the_plan.notes)
    if verbose or opts.dry_run:
        said += [f"for this GPU run: {choice}" for choice in the_plan.choices]
    if said and not quiet:
        from mmrun.cli._output import stderr_console

        for line in said:
            stderr_console().print(f"mmrun: {line}", highlight=False, markup=False)
    if the_plan.batch:
        from mmrun.cli.batch import run_batch

        code = run_batch(the_plan, json_out=json_out, quiet=quiet, verbose=verbose)
        if code:
            raise typer.Exit(code)
        return
    _run_named(the_plan, json_out=json_out, quiet=quiet, verbose=verbose)


def _run_options(modality: str, kw: dict[str, Any]) -> "RunOptions":
    """The command's options as the library's RunOptions."""
    from mmrun.inputs import InputOptions
    from mmrun.planning import RunOptions, parse_key_values

    # The companions' media options arrive with the modality's own options.
    companions = {
        name: tuple(kw["modality_options"].pop(_companion_param(name), None) or ())
        for name in kw.pop("companions")
    }
    return RunOptions(
        modality=modality,
        key=kw["key"],
        sources=tuple(kw["sources"] or ()),
        count=kw["count"],
        question=kw["question"],
        method=kw["method"].value if kw["method"] is not None else None,
        num_prompts=kw["num_prompts"],
        seed=kw["seed"],
        max_tokens=kw["max_tokens"],
        temperature=kw["temperature"],
        model=kw["model"],
        tensor_parallel_size=kw["tensor_parallel_size"],
        engine_args=parse_key_values(kw["engine_arg"] or []),
        sampling_args=parse_key_values(kw["sampling_arg"] or [], option="--sampling-arg"),
        trust_remote_code=kw["trust_remote_code"],
        dry_run=kw["dry_run"],
        per_prompt=kw["per_prompt"],
        warmup=kw["warmup"],
        input=kw["input"],
        output=kw["output"],
        fail_fast=kw["fail_fast"],
        max_restarts=kw["max_restarts"],
        retry_errors=kw["retry_errors"],
        overwrite=kw["overwrite"],
        data_parallel_size=kw["data_parallel_size"],
        backend=kw["backend"].value,
        replicas=kw["replicas"],
        server=kw["server"],
        api_key=kw["api_key"],
        json_schema=kw["json_schema"],
        choice=tuple(kw["choice"] or ()),
        regex=kw["regex"],
        grammar=kw["grammar"],
        json_object=kw["json_object"],
        input_options=InputOptions(
            format=kw["input_format"],
            columns=kw["columns"],
            keep_columns=kw["keep_columns"],
            split=kw["split"],
            dataset_config=kw["dataset_config"],
            revision=kw["revision"],
            limit=kw["limit"],
            shard=kw["shard"],
            question_template=kw["question_template"],
            media_root=kw["media_root"],
        ),
        output_format=_output_format(kw["output_format"]),
        modality_options=kw["modality_options"],
        companions=companions,
    )


def _output_format(value: str | None) -> str | None:
    if value is not None and value not in ("jsonl", "parquet", "csv", "openai"):
        raise UsageError(
            f"unknown --output-format {value!r}", hint="use jsonl, parquet, csv or openai"
        )
    return value


def _run_named(the_plan: Any, *, json_out: bool, quiet: bool, verbose: bool = False) -> None:
    from mmrun.api import run_plan
    from mmrun.cli._output import (
        DownloadProgress,
        StartProgress,
        print_json,
        print_result,
        print_texts,
        stderr_console,
        stdout_console,
    )
    from mmrun.engine.output import engine_output
    from mmrun.outcome import Hooks
    from mmrun.records import document

    err = stderr_console()
    starting = None if quiet else StartProgress(err, spinner=not verbose)

    def announce() -> None:
        if starting is not None:
            err.print("[dim]mmrun: starting vLLM (this takes a while the first time)...[/]")
            starting.start()

    def started(total: int) -> None:
        if starting is not None:
            starting.stop()

    progress = DownloadProgress(err) if not quiet else None
    hooks = Hooks(on_engine_start=announce, on_started=started, on_progress=progress)
    try:
        with engine_output(quiet, verbose):
            result, engine = run_plan(the_plan, hooks)
    finally:
        if starting is not None:
            starting.stop()
        if progress is not None:
            progress.close()
    try:
        if json_out:
            print_json(document(result))
        elif quiet:
            print_texts(result)
        else:
            print_result(result, stdout_console())
    finally:
        # The engine stops after the results are out: its shutdown takes seconds.
        if engine is not None:
            with engine_output(quiet, verbose):
                engine.close()
    if result.errors:  # answers their constraint does not allow: shown, and exit 3
        first = result.errors[min(result.errors)]
        err.print(
            f"mmrun: {len(result.errors)} of {len(result.outputs)} answer(s) failed their "
            f"check: {first.message}",
            markup=False,
            highlight=False,
        )
        raise typer.Exit(EXIT_PARTIAL)


def _model_key_completion(modality: str) -> Callable[[str], list[tuple[str, str]]]:
    """Shell completion for ``-m``: the registry's keys for this modality, with their checkpoint.

    It runs on every <TAB>, so it reads the registry only (no vllm, torch or transformers).
    """

    def complete(incomplete: str) -> list[tuple[str, str]]:
        from mmrun.plugins import get_registry

        keys = [(spec.key, spec.repo_id) for spec in get_registry().specs(modality)]
        keys.append((GENERIC_KEY, "the --model checkpoint, with its own chat template"))
        return [(key, what) for key, what in keys if key.startswith(incomplete)]

    return complete


# Short options every modality command has; a modality's media option does not take one.
_SHARED_SHORT = frozenset({"", "-v", "-q", "-o", "-m", "-n", "-h", "-tp", "-dp"})


def _article(noun: str) -> str:
    return "an" if noun[:1] in "aeiou" else "a"


def _number(value: float) -> str:
    return f"{value:g}"


def make_command(modality: Modality, companions: Sequence[Modality] = ()) -> Callable[..., None]:
    """``companions``: the registered modalities of ``modality.companions``, whose media
    options the command also takes."""
    noun = modality.name
    companion_names = [c.name for c in companions]
    lit = o.literal
    # The media option's one-letter form, where it means nothing else in any command: -v is
    # --verbose everywhere, -q --question, -o --output, -m --model-type, -n the count.
    short = [modality.short_option] if modality.short_option not in _SHARED_SHORT else []
    question_default = modality.questions[min(modality.questions)] if modality.questions else ""
    seed_default = "none" if modality.seed is None else str(modality.seed)

    def command(
        key: Annotated[
            str | None,
            typer.Option(
                "--model-type",
                "-m",
                help=lit(
                    f"Which model: a key from `mmrun models` (default: {modality.default_model};"
                    f" with --model, the key of its architecture, else {GENERIC_KEY}: the "
                    "checkpoint with its own chat template)."
                ),
                show_default=False,
                metavar="KEY",
                autocompletion=_model_key_completion(noun),
            ),
        ] = None,
        sources: Annotated[
            list[str] | None,
            typer.Option(
                modality.option,
                *short,
                help=lit(
                    f"{_article(noun).capitalize()} {noun}: a path, http(s) URL, data: URI, "
                    f"folder (its {noun} files, recursively) or quoted glob ('dir/**/*"
                    f"{modality.extensions[0] if modality.extensions else ''}'). Repeatable."
                ),
                show_default=False,
                metavar="SRC",
            ),
        ] = None,
        count: Annotated[
            int | None,
            typer.Option(
                modality.count_option,
                "-n",
                help=f"How many of vLLM's example {noun}s to put in one prompt "
                f"(default {modality.default_count}).",
                show_default=False,
                metavar="N",
            ),
        ] = None,
        per_prompt: Annotated[
            int | None,
            typer.Option(
                "--per-prompt",
                help=f"Split the named {noun}s into prompts of N each (256 files, "
                "--per-prompt 4: 64 prompts). A folder or pattern: 1 by default.",
                min=1,
                show_default=False,
                metavar="N",
            ),
        ] = None,
        input: o.InputOpt = None,
        input_format: o.InputFormatOpt = None,
        columns: o.ColumnsOpt = None,
        keep_columns: o.KeepColumnsOpt = None,
        split: o.SplitOpt = None,
        dataset_config: o.DatasetConfigOpt = None,
        revision: o.RevisionOpt = None,
        limit: o.LimitOpt = None,
        shard: o.ShardOpt = None,
        question_template: o.QuestionTemplateOpt = None,
        media_root: o.MediaRootOpt = None,
        output: o.OutputOpt = None,
        output_format: o.OutputFormatOpt = None,
        question: Annotated[
            str | None,
            typer.Option(
                "--question",
                "-q",
                help=lit(f"The question to ask (default: vLLM's example's, {question_default!r})."),
                show_default=False,
                metavar="TEXT",
            ),
        ] = None,
        method: Annotated[
            MethodChoice | None,
            typer.Option(
                "--method",
                help="vLLM method: generate (mmrun renders the prompt) or chat (vLLM does). "
                f"Default: generate; chat for a checkpoint without a key (-m {GENERIC_KEY}).",
                case_sensitive=False,
                show_default=False,
                metavar="METHOD",
            ),
        ] = None,
        num_prompts: o.NumPromptsOpt = 1,
        seed: Annotated[
            int | None,
            typer.Option(
                "--seed",
                help="Engine seed; each prompt samples with a seed from it and its id "
                f"(default: {seed_default}).",
                show_default=False,
                metavar="N",
            ),
        ] = None,
        max_tokens: Annotated[
            int | None,
            typer.Option(
                "--max-tokens",
                help=f"Tokens to generate per prompt (default {modality.max_tokens}; "
                "--dry-run shows a model's own).",
                min=1,
                show_default=False,
                metavar="N",
            ),
        ] = None,
        temperature: Annotated[
            float | None,
            typer.Option(
                "--temperature",
                help=f"Sampling temperature (default {_number(modality.temperature)}; "
                "--dry-run shows a model's own).",
                min=0.0,
                show_default=False,
                metavar="T",
            ),
        ] = None,
        model: o.ModelOpt = None,
        tensor_parallel_size: o.TensorParallelOpt = None,
        data_parallel_size: o.DataParallelOpt = 1,
        backend: Annotated[
            BackendChoice,
            typer.Option(
                "--backend",
                help=lit(
                    "Where the engines run: local (this host) or ray (the Ray cluster "
                    "RAY_ADDRESS names, else a local one; pip install 'mmrun[ray]')."
                ),
                case_sensitive=False,
                metavar="NAME",
            ),
        ] = BackendChoice.local,
        replicas: o.ReplicasOpt = None,
        server: o.ServerOpt = None,
        api_key: o.ApiKeyOpt = None,
        engine_arg: o.EngineArgOpt = None,
        sampling_arg: o.SamplingArgOpt = None,
        json_schema: o.JsonSchemaOpt = None,
        choice: o.ChoiceOpt = None,
        regex: o.RegexOpt = None,
        grammar: o.GrammarOpt = None,
        json_object: o.JsonObjectOpt = False,
        warmup: o.WarmupOpt = 0,
        fail_fast: o.FailFastOpt = False,
        max_restarts: o.MaxRestartsOpt = 3,
        retry_errors: o.RetryErrorsOpt = False,
        overwrite: o.OverwriteOpt = False,
        trust_remote_code: o.TrustRemoteCodeOpt = False,
        dry_run: o.DryRunOpt = False,
        json_out: o.JsonOpt = False,
        verbose: o.VerboseOpt = False,
        quiet: o.QuietOpt = False,
        **modality_options: Any,
    ) -> None:
        given = {
            k: v
            for k, v in locals().items()
            if k not in ("companion_names", "modality", "misplaced")
        }
        _refuse_misplaced(modality, misplaced, given)
        _execute(noun, companions=companion_names, **given)

    command.__doc__ = modality.summary or f"Run a model on {noun} inputs through vLLM."
    command.__name__ = noun
    taken = {*_SHARED_SHORT, modality.short_option}
    misplaced = [c for c in companions if c.short_option not in taken]
    _add_modality_options(
        command,
        modality.options,
        [
            *(_companion_option(modality, c) for c in companions),
            *(_misplaced_option(c) for c in misplaced),
        ],
    )
    return command


def _companion_param(name: str) -> str:
    return f"companion_{name}"


def _companion_option(modality: Modality, companion: Modality) -> inspect.Parameter:
    """The option that names a companion's item (``mmrun video --image photo.jpg``). It has no
    one-letter form: in a command, a one-letter media option names the command's own media."""
    noun = companion.name
    return inspect.Parameter(
        _companion_param(noun),
        inspect.Parameter.KEYWORD_ONLY,
        default=None,
        annotation=Annotated[
            list[str] | None,
            typer.Option(
                companion.option,
                help=o.literal(
                    f"{_article(noun).capitalize()} {noun} that every prompt carries ahead of "
                    f"its {modality.name}, for the models that take both (`mmrun models "
                    f"{modality.name}` lists them): a path, http(s) URL or data: URI."
                ),
                show_default=False,
                metavar="SRC",
            ),
        ],
    )


def _misplaced_param(short: str) -> str:
    return f"misplaced_{short.lstrip('-')}"


def _misplaced_option(companion: Modality) -> inspect.Parameter:
    """A companion's one-letter option (``-i`` in ``mmrun video``), hidden: it is refused in
    one line, for it would otherwise read as the command's own media (_refuse_misplaced)."""
    return inspect.Parameter(
        _misplaced_param(companion.short_option),
        inspect.Parameter.KEYWORD_ONLY,
        default=None,
        annotation=Annotated[
            list[str] | None, typer.Option(companion.short_option, hidden=True, metavar="SRC")
        ],
    )


def _refuse_misplaced(
    modality: Modality, companions: Sequence[Modality], kw: dict[str, Any]
) -> None:
    for companion in companions:
        param = _misplaced_param(companion.short_option)
        if kw.get("modality_options", {}).pop(param, None):
            raise UsageError(
                f"{companion.short_option} is not an option of `mmrun {modality.name}`: name "
                f"the {modality.name} with {modality.option} ({companion.option} adds "
                f"{_article(companion.name)} {companion.name} to every prompt)",
                hint=f"see `mmrun {modality.name} --help`",
            )


def _add_modality_options(
    command: Callable[..., None],
    options: tuple[MediaOption, ...],
    more: Sequence[inspect.Parameter] = (),
) -> None:
    """The modality's own options (``--num-frames``), and ``more`` (its companions' media
    options), as parameters of its command: Typer reads the signature, and their values arrive
    in the command's ``modality_options``."""
    signature = inspect.signature(command)
    fixed = [p for p in signature.parameters.values() if p.kind is not p.VAR_KEYWORD]
    extra = [
        inspect.Parameter(
            option.name,
            inspect.Parameter.KEYWORD_ONLY,
            default=None,
            annotation=Annotated[
                option.kind | None,
                typer.Option(
                    option.flag,
                    help=option.help,
                    min=option.minimum,
                    show_default=False,
                    metavar="N",
                ),
            ],
        )
        for option in options
    ]
    command.__signature__ = signature.replace(parameters=[*fixed, *extra, *more])  # type: ignore[attr-defined]


# `mmrun <modality> --help` shows the options of a first run; `--help-all` every option (and
# docs/cli.md lists them all): a help that fits a terminal and a half at 80 columns.
HELP_ALL = "--help-all"
FOLDED = frozenset(
    {
        "input_format",
        "columns",
        "keep_columns",
        "split",
        "dataset_config",
        "revision",
        "limit",
        "shard",
        "question_template",
        "media_root",
        "output_format",
        "replicas",
        "sampling_arg",
        "json_schema",
        "choice",
        "regex",
        "grammar",
        "json_object",
        "warmup",
        "retry_errors",
        "max_restarts",
        "backend",
        "api_key",
        "fail_fast",
        "overwrite",
        "num_prompts",
        "temperature",
        "seed",
        "per_prompt",
    }
)


def _no_type(ctx: Any) -> None:
    return None


def plain_help(root: Any, show_all: bool) -> None:
    """The help of ``root`` (the click command Typer built) and its commands: a flag shows no
    type (Typer would write ``<bool>``), nor does an argument, and a modality command folds the options of
    ``FOLDED`` unless ``show_all``."""
    from mmrun.plugins import get_registry

    modalities = get_registry().modalities
    for name, command in {"": root, **getattr(root, "commands", {})}.items():
        help_option = command.get_help_option(
            command.context_class(
                command, info_name=name or "mmrun", help_option_names=["-h", "--help"]
            )
        )
        for param in [*command.params, *([help_option] if help_option is not None else [])]:
            if param.metavar is None and getattr(param, "is_flag", False):
                param.metavar = ""
            if getattr(param, "param_type_name", "") == "argument":
                # An argument's name says what it takes (RESULTS); no `<path>` beside it.
                param.display_type_rich = _no_type
            if name in modalities and param.name in FOLDED:
                param.hidden = not show_all


def epilog(modality: Modality) -> str:
    more = f"More options: mmrun {modality.name} {HELP_ALL} (data sets, structured answers, Ray)"
    if not modality.examples:
        return more
    examples = "\n\n".join(f"  {line}" for line in modality.examples)
    return f"Examples:\n\n{examples}\n\n{more}"
