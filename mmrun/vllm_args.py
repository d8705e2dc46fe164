"""The names (and simple types) of the arguments the installed vLLM takes, read without
importing it.

``--engine-arg`` and ``--sampling-arg`` go to ``vllm.LLM(...)`` and ``vllm.SamplingParams``;
a misspelled key used to be found only after the engine had started (a minute on a CPU, more
on a GPU). Importing vLLM to ask takes seconds too, so the fields are read from vLLM's source
files: the ``EngineArgs`` dataclass and ``LLM.__init__`` (whose keyword arguments end in
``EngineArgs``), and the ``SamplingParams`` struct. Nothing is read on paths that take no
such argument (``--help``, ``mmrun models``). Where the source is not where 0.2x-0.3x keep it,
no check is made: vLLM itself still refuses the argument, later.
"""

from __future__ import annotations

import ast
import difflib
import importlib.util
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Literal

from mmrun.errors import UsageError

Target = Literal["engine", "sampling"]

# The Python types a value must have for an annotation that names only these (``int``,
# ``float | None``): checked here; anything richer is left to vLLM.
_SIMPLE: dict[str, tuple[type, ...]] = {
    "int": (int,),
    "float": (int, float),
    "bool": (bool,),
    "str": (str,),
}


@dataclass(frozen=True)
class Fields:
    """Each argument's name and its annotation as written in vLLM's source."""

    annotations: Mapping[str, str]

    def __contains__(self, name: object) -> bool:
        return name in self.annotations


def _vllm_dir() -> Path | None:
    try:
        spec = importlib.util.find_spec("vllm")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def _class(tree: ast.Module, name: str) -> ast.ClassDef | None:
    return next(
        (node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == name), None
    )


def _class_fields(node: ast.ClassDef) -> dict[str, str]:
    return {
        stmt.target.id: ast.unparse(stmt.annotation)
        for stmt in node.body
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)
    }


def _parse(path: Path) -> ast.Module | None:
    try:
        return ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return None


@cache
def fields(target: Target) -> Fields | None:
    """The arguments vLLM's LLM (``engine``) or SamplingParams (``sampling``) take; None where
    vLLM is not installed or its source is not laid out as expected."""
    root = _vllm_dir()
    if root is None:
        return None
    if target == "sampling":
        tree = _parse(root / "sampling_params.py")
        node = _class(tree, "SamplingParams") if tree is not None else None
        return Fields(_class_fields(node)) if node is not None else None
    tree = _parse(root / "engine" / "arg_utils.py")
    node = _class(tree, "EngineArgs") if tree is not None else None
    if node is None:
        return None
    found = _class_fields(node)
    llm = _parse(root / "entrypoints" / "llm.py")
    llm_class = _class(llm, "LLM") if llm is not None else None
    init = next(
        (
            stmt
            for stmt in (llm_class.body if llm_class is not None else [])
            if isinstance(stmt, ast.FunctionDef) and stmt.name == "__init__"
        ),
        None,
    )
    if init is not None:
        for arg in [*init.args.args[1:], *init.args.kwonlyargs]:
            if arg.annotation is not None:
                found.setdefault(arg.arg, ast.unparse(arg.annotation))
    return Fields(found)


def _types(annotation: str) -> tuple[tuple[type, ...], bool] | None:
    """The accepted Python types of a simple annotation, and whether None is accepted."""
    parts = [part.strip() for part in annotation.split("|")]
    optional = "None" in parts
    named = [part for part in parts if part != "None"]
    if not named or any(part not in _SIMPLE for part in named):
        return None
    return tuple(t for part in named for t in _SIMPLE[part]), optional


def _value_problem(value: Any, annotation: str) -> str | None:
    accepted = _types(annotation)
    if accepted is None:
        return None
    types, optional = accepted
    if value is None:
        return None if optional else f"takes {annotation}, not null"
    if isinstance(value, bool) and bool not in types:  # JSON true is not a number here
        return f"takes {annotation}, not a boolean"
    if not isinstance(value, types):
        return f"takes {annotation}, not {type(value).__name__}"
    return None


# Ranges vLLM checks when it builds the engine's config (its own
# ``_verify_args`` and config validators), as (low, low inclusive, high, high inclusive).
# Checked here so that a dry run, and a run before its engine starts, says so at once.
_ENGINE_RANGES: dict[str, tuple[float | None, bool, float | None, bool]] = {
    "gpu_memory_utilization": (0, False, 1, True),
    "max_model_len": (1, True, None, False),
    "max_num_seqs": (1, True, None, False),
    "max_num_batched_tokens": (1, True, None, False),
    "tensor_parallel_size": (1, True, None, False),
    "pipeline_parallel_size": (1, True, None, False),
}


def _range_problem(value: Any, bounds: tuple[float | None, bool, float | None, bool]) -> str | None:
    if not isinstance(value, int | float) or isinstance(value, bool):
        return None
    low, low_in, high, high_in = bounds
    below = low is not None and (value < low or (value == low and not low_in))
    above = high is not None and (value > high or (value == high and not high_in))
    if not (below or above):
        return None
    if high is None:
        return f"must be {'at least' if low_in else 'more than'} {low:g}"
    return f"must be in {'[' if low_in else '('}{low:g}, {high:g}{']' if high_in else ')'}"


def check_engine_args(args: Mapping[str, Any]) -> None:
    """Raise one usage line for the first ``--engine-arg`` key vLLM does not take, naming the
    closest one, or for a value of the wrong simple type or out of vLLM's range. (Sampling
    settings are checked by mmrun.sampling, with these field names.)"""
    if not args:
        return
    known = fields("engine")
    if known is None:
        return
    for key, value in args.items():
        if key not in known:
            close = difflib.get_close_matches(key, list(known.annotations), n=1, cutoff=0.6)
            raise UsageError(
                f"--engine-arg {key}: the installed vLLM's vllm.LLM / EngineArgs has no such "
                "argument",
                hint=f"did you mean --engine-arg {close[0]}=...?"
                if close
                else "see `vllm serve --help` for the engine's arguments",
            )
        problem = _value_problem(value, known.annotations[key])
        bounds = _ENGINE_RANGES.get(key)
        if problem is None and bounds is not None:
            problem = _range_problem(value, bounds)
        if problem is not None:
            raise UsageError(
                f"--engine-arg {key}={_shown(value)}: vLLM's {key} {problem}",
                hint='VALUE is read as JSON: 4, 0.5, true, null, "text"',
            )


def _shown(value: Any) -> str:
    import json

    return value if isinstance(value, str) else json.dumps(value)
