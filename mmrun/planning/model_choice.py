"""Which model spec a run uses.

- ``-m KEY``: that key's. Neither ``-m`` nor ``--model``: the modality's default key.
- ``--model`` without ``-m``: the key whose checkpoint it is (its repo id), else the one key
  of the command's modality whose architecture its config.json names. Where several keys run
  that architecture, the run is refused with their names: their prompts differ, and mmrun
  cannot tell from config.json which one the checkpoint was trained for. Where only keys of
  another modality run it, the run is refused with the command that runs it.
- No key (or ``-m auto``): the checkpoint itself, with its own chat template, on an
  architecture the installed vLLM runs as multimodal (mmrun.checkpoint.generic_spec).

The choice comes with a sentence saying why, which the command line prints on stderr and the
dry run shows.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from mmrun.checkpoint import CONFIG_FILE, CheckpointConfig, generic_spec, read_config
from mmrun.errors import UnsupportedModelError, UsageError
from mmrun.planning.checks import TRUST_REMOTE_CODE_ENV
from mmrun.planning.options import RunOptions
from mmrun.planning.prompts import resolved_model
from mmrun.registry import GENERIC_KEY, LoaderSpec, Modality, Registry
from mmrun.support import VllmInfo

# How alike a key must be to a checkpoint (its model type to the key, or its architecture to
# the key's, letters compared) to be named as the closest.
CLOSE_ENOUGH = 0.8
_SUFFIXES = ("ForConditionalGeneration", "ForCausalLM", "LMHeadModel", "ChatModel", "Model")


@dataclass(frozen=True)
class ModelChoice:
    """The spec a run uses, and why where mmrun chose it (None: ``-m`` or the default)."""

    spec: LoaderSpec
    note: str | None = None


def choose_spec(
    opts: RunOptions, modality: Modality, registry: Registry, vllm: VllmInfo
) -> ModelChoice:
    if opts.key == GENERIC_KEY:
        if not opts.model:
            raise UsageError(
                f"-m {GENERIC_KEY} runs the checkpoint that --model names",
                hint="add --model ORG/NAME or a local checkpoint folder",
            )
        config = read_config(resolved_model(opts.model) or opts.model)
        return own_template(opts, modality, registry, vllm, config, forced=True)
    if opts.key or not opts.model:
        return ModelChoice(registry.get(modality.name, opts.key or modality.default_model))
    return _by_checkpoint(opts, opts.model, modality, registry, vllm)


def _by_checkpoint(
    opts: RunOptions, model: str, modality: Modality, registry: Registry, vllm: VllmInfo
) -> ModelChoice:
    name = modality.name
    named = [s for s in registry.specs(name) if s.repo_id == model]
    if len(named) == 1:
        key = named[0].key
        return ModelChoice(named[0], f"--model {model} is the checkpoint of -m {key}: using it")
    config = read_config(resolved_model(model) or model)
    matches = [s for s in registry.specs(name) if s.architecture in config.architectures]
    if len(matches) == 1:
        spec = matches[0]
        what = a(spec.architecture)
        return ModelChoice(spec, f"--model {model} is {what}: using -m {spec.key}")
    if matches:
        raise UsageError(
            f"--model {model} is {a(matches[0].architecture)}, which several {name} keys run "
            f"with different prompts: {_listed(s.key for s in matches)}",
            hint=f"name one with -m, or run it with its own chat template: -m {GENERIC_KEY}",
        )
    elsewhere = [s for s in registry.specs() if s.architecture in config.architectures]
    if elsewhere:
        spec = elsewhere[0]
        raise UsageError(
            f"--model {model} is {a(spec.architecture)}, which mmrun runs as {spec.modality} "
            f"(-m {spec.key}), not as {name}",
            hint=f"run `mmrun {spec.modality} --model {model}`, or -m {GENERIC_KEY} to try "
            f"its own chat template on {name}",
        )
    return own_template(opts, modality, registry, vllm, config, forced=False)


def own_template(
    opts: RunOptions,
    modality: Modality,
    registry: Registry,
    vllm: VllmInfo,
    config: CheckpointConfig,
    *,
    forced: bool,
) -> ModelChoice:
    """The checkpoint ``--model`` names as a spec of its own (``-m auto``, or no key for it)."""
    assert opts.model  # the caller checked
    model = opts.model
    architecture = runnable_architecture(model, config, modality, vllm)
    if opts.method == "generate":
        raise UsageError(
            f"{model} runs with its own chat template (--method chat): no mmrun key writes "
            "its prompt for --method generate",
            hint="drop --method generate, or name a key with -m",
        )
    allowed = opts.trust_remote_code or os.environ.get(TRUST_REMOTE_CODE_ENV) == "1"
    spec = generic_spec(modality, model, architecture, config.remote_code or allowed)
    keyed = [s for s in registry.specs(modality.name) if s.architecture == architecture]
    how = "runs with its own chat template (--method chat), engine arguments from vLLM"
    if forced:
        note = f"-m {GENERIC_KEY}: {model} ({a(architecture)}) {how}"
        if keyed:
            return ModelChoice(spec, f"{note}; mmrun's key for it is {keyed[0].key}")
    else:
        note = f"no mmrun key describes --model {model} ({a(architecture)}): it {how}"
    near = closest(config, architecture, registry.specs(modality.name))
    return ModelChoice(spec, note + (f"; the closest key is {near.key}" if near else ""))


def runnable_architecture(
    model: str, config: CheckpointConfig, modality: Modality, vllm: VllmInfo
) -> str:
    """The first architecture of ``config`` that the installed vLLM runs as multimodal (any,
    where that is unknown); one line, before anything starts, where there is none."""
    if not config.architectures:
        raise UsageError(
            f"{CONFIG_FILE} of {model} names no architecture",
            hint=f"name the model's key with -m; `mmrun models {modality.name}` lists them",
        )
    for architecture in config.architectures:
        if vllm.runs_multimodal(architecture) is not False:
            return architecture
    architecture = config.architecture
    last = vllm.removed.get(architecture)
    if last:
        why, hint = f"vLLM {last} and earlier ran it", f"pip install 'vllm<={last}'"
    elif vllm.supports(architecture):
        why = "it runs it as a text-only model"
        hint = f"choose one that takes {modality.name}: `mmrun models {modality.name}` lists them"
    else:
        why, hint = "it does not have this architecture", "upgrade vLLM, or check the checkpoint"
    raise UnsupportedModelError(
        f"--model {model} is {a(architecture)}, which the installed vLLM {vllm.version} does "
        f"not run as a multimodal model ({why})",
        hint=hint,
    )


def closest(
    config: CheckpointConfig, architecture: str, specs: Iterable[LoaderSpec]
) -> LoaderSpec | None:
    """The key most like the checkpoint, by its model type (against the keys, which mostly
    are model types) or its architecture's name; None where none is close."""
    best, score = None, 0.0
    for spec in specs:
        alike = max(
            _alike(config.model_type or "", spec.key),
            _alike(_stem(architecture), _stem(spec.architecture)),
        )
        if alike > score:
            best, score = spec, alike
    return best if score >= CLOSE_ENOUGH else None


def _alike(a: str, b: str) -> float:
    a, b = a.lower().replace("-", "_"), b.lower().replace("-", "_")
    return difflib.SequenceMatcher(None, a, b).ratio() if a and b else 0.0


def _stem(architecture: str) -> str:
    """An architecture's name without its class suffix: "Lfm2VlForConditionalGeneration" ->
    "Lfm2Vl"."""
    for suffix in _SUFFIXES:
        if architecture.endswith(suffix) and len(architecture) > len(suffix):
            return architecture.removesuffix(suffix)
    return architecture


def a(noun: str) -> str:
    """``noun`` with its indefinite article: "a LlavaForConditionalGeneration", "an Aria..."."""
    return f"{'an' if noun[:1].lower() in 'aeiou' else 'a'} {noun}"


def _listed(names: Iterable[str]) -> str:
    items: Sequence[str] = list(names)
    return ", ".join(items[:-1]) + f" and {items[-1]}" if len(items) > 1 else "".join(items)
