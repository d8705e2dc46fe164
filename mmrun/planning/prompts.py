"""Which prompts a run has: a manifest or table's lines, or the media named on the command
line (a folder or pattern: one prompt per file), or the modality's default media."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from mmrun.errors import UsageError
from mmrun.inputs import InputOptions, Item, expand_sources, open_input, selection_of
from mmrun.plan import Items
from mmrun.planning.options import RunOptions, method_of
from mmrun.registry import LoaderSpec, Method, Modality


def resolved_model(model: str | None) -> str | None:
    """A local folder as its absolute path (``./ckpt`` and ``ckpt`` are one model to a resumed
    run, from wherever it is started); a Hub repo id as given."""
    if not model:
        return model
    path = Path(model).expanduser()
    return str(path.resolve()) if path.exists() else model


def _item_ids(groups: list[list[str]]) -> list[str]:
    """The prompts' ids: each one's file when each prompt has a file of its own (an id that
    stays the same when files are added to the folder, so a resumed run skips the right ones),
    else each one's place."""
    if (
        len(groups) > 1
        and all(len(g) == 1 for g in groups)
        and len({g[0] for g in groups}) == len(groups)
    ):
        return [g[0] for g in groups]
    return [str(i) for i in range(len(groups))]


def _count_bounds(
    spec: LoaderSpec, modality: Modality, from_assets: bool
) -> tuple[int, int | None]:
    low = max(spec.min_items, modality.min_count)
    high = spec.max_items
    if from_assets:
        high = len(modality.assets) if high is None else min(high, len(modality.assets))
    return low, high


def _plural(n: int | None, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def choose_sources(
    opts: RunOptions, spec: LoaderSpec, modality: Modality
) -> tuple[int, list[list[str]]]:
    """The number of items per prompt and each prompt's sources."""
    noun = modality.name
    if opts.sources:
        count = len(opts.sources) if opts.per_prompt is None else opts.per_prompt
        if opts.count is not None and opts.count != count:
            raise UsageError(
                f"-n {opts.count} does not match the {count} {noun} sources given",
                hint="drop -n when you name the media",
            )
        low, high = _count_bounds(spec, modality, from_assets=False)
        if high is not None and count > high:
            raise UsageError(
                f"{spec.key} takes at most {_plural(high, noun)} per prompt, got {count}",
                hint=f"give at most {high}",
            )
        if count < low:
            raise UsageError(
                f"{spec.key} needs at least {_plural(low, noun)} per prompt, got {count}",
                hint=f"give at least {low}",
            )
        if opts.per_prompt is None:
            return count, [list(opts.sources)] * opts.num_prompts
        return count, _groups(opts, count, noun)
    low, high = _count_bounds(spec, modality, from_assets=True)
    if high is None:
        raise UsageError(f"`mmrun {noun}` has no default media", hint=f"name {noun} files")
    if opts.count is None:
        count = min(max(modality.default_count, low), high)
    else:
        count = opts.count
        defaults = len(modality.assets)
        if count > defaults >= low and (spec.max_items is None or count <= spec.max_items):
            raise UsageError(
                f"-n {count}: `mmrun {noun}` has {_plural(defaults, f'default {noun}')}",
                hint=f"name {count} files with {modality.option}",
            )
        if not low <= count <= high:
            takes = f"{low} to {high}" if low < high else f"{_plural(low, noun)} per prompt"
            use = f"between {low} and {high}" if low < high else str(low)
            raise UsageError(
                f"-n {count} is out of range for {spec.key}: it takes {takes}",
                hint=f"use -n {use}, or name files with {modality.option}",
            )
    names = [asset.name for asset in modality.assets]
    if count == 1 and opts.num_prompts > 1:
        # One item per prompt: vary it across prompts, as the audio seed does, so a batch
        # is not the same request repeated.
        return count, [[names[i % len(names)]] for i in range(opts.num_prompts)]
    return count, [names[:count]] * opts.num_prompts


def _groups(opts: RunOptions, count: int, noun: str) -> list[list[str]]:
    """Split the named sources into consecutive groups of ``count``, one group per prompt."""
    total = len(opts.sources)
    if count < 1 or total % count:
        raise UsageError(
            f"--per-prompt {count} does not divide the {total} {noun} sources given",
            hint=f"give a multiple of {count} sources",
        )
    groups = [list(opts.sources[i : i + count]) for i in range(0, total, count)]
    if opts.num_prompts not in (1, len(groups)):
        raise UsageError(
            f"--num-prompts {opts.num_prompts} does not match the {len(groups)} prompts "
            f"that --per-prompt {count} makes",
            hint="drop --num-prompts with --per-prompt",
        )
    return groups


@dataclass(frozen=True)
class Chosen:
    """A run's prompts and what they imply: ``count`` the media per prompt where every prompt
    carries the same number; ``method`` chat for an OpenAI batch file's own messages
    (``chat_input``); ``json_lines`` where a manifest line asks for JSON; ``expanded`` where
    a folder or pattern named the prompts' media."""

    items: Items
    count: int | None
    method: Method
    chat_input: bool = False
    json_lines: bool = False
    expanded: bool = False


def choose_prompts(opts: RunOptions, spec: LoaderSpec, modality: Modality) -> Chosen:
    """The run's prompts: the input's lines (``--input``), else the named media, else the
    modality's default media."""
    sources, expanded = expand_sources(opts.sources, modality)
    if opts.input is not None:
        return _from_input(opts.input, opts, spec, modality)
    selecting = replace(
        InputOptions(), limit=opts.input_options.limit, shard=opts.input_options.shard
    )
    if opts.input_options != selecting:
        raise UsageError(
            "--input-format, --columns, --keep-columns, --split, --dataset-config, "
            "--revision, --question-template and --media-root are for --input",
            hint="add --input FILE, or drop them",
        )
    per_prompt_opts = opts
    if expanded and opts.per_prompt is None:  # a folder or pattern: one file per prompt
        if opts.num_prompts != 1 and opts.num_prompts != len(sources):
            raise UsageError(
                f"--num-prompts {opts.num_prompts} does not match the {len(sources)} "
                f"{modality.name} files named, one prompt each",
                hint="drop --num-prompts; a folder or pattern gives one prompt per file",
            )
        per_prompt_opts = replace(opts, per_prompt=1)
    count, groups = choose_sources(replace(per_prompt_opts, sources=tuple(sources)), spec, modality)
    ids = _item_ids(groups)
    listed = _selected(
        [Item(ids[i], i, tuple(group)) for i, group in enumerate(groups)], opts.input_options
    )
    method = method_of(opts, spec)
    return Chosen(Items(listed, len(listed), count), count, method, expanded=expanded)


def _selected(items: list[Item], options: InputOptions) -> list[Item]:
    """The prompts ``--limit`` and ``--shard`` take, by their place on the command line (a
    folder's files and a pattern's matches sorted): each keeps its id and its place."""
    selection = selection_of(options.limit, options.shard)
    taken = selection.take(items)
    if not taken:
        raise UsageError(
            f"--shard {options.shard} takes none of the {len(items)} prompts",
            hint=f"use at most {len(items)} shards",
        )
    return taken


def _from_input(path: str, opts: RunOptions, spec: LoaderSpec, modality: Modality) -> Chosen:
    if opts.sources:
        raise UsageError(
            f"--input and {modality.option} name the prompts twice",
            hint="put the media in the manifest, or drop --input",
        )
    reader = open_input(path, modality, opts.input_options)
    reader.check()
    chat_input = bool(getattr(reader, "chat", False))
    if chat_input and "chat" not in spec.methods:  # the user's own messages run through LLM.chat
        raise UsageError(
            f"{spec.key} cannot run chat messages (an OpenAI batch file)",
            hint="choose a model that runs --method chat (see `mmrun models`)",
        )
    return Chosen(
        Items(reader, reader.total, reader.max_count),
        None,
        "chat" if chat_input else method_of(opts, spec),
        chat_input=chat_input,
        json_lines=bool(getattr(reader, "asks_for_json", False)),
    )
