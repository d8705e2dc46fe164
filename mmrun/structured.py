"""Structured outputs: a constraint on what a prompt may answer, checked before any engine
starts, and each answer checked against it when it comes back.

A constraint is a dict in vLLM's own words (the fields of ``StructuredOutputsParams``): one of
``json`` (a JSON Schema), ``choice`` (a list of strings), ``regex``, ``grammar`` (EBNF or Lark
text) or ``json_object`` (true: any JSON object), with vLLM's optional settings beside it. It
travels as plain data in the run's sampling under ``structured_outputs`` (so it shows in the
dry run, is part of what a resumed run must share, and crosses to replica processes and Ray
workers as it is); the engine module turns it into ``StructuredOutputsParams``.

A run that asks for JSON starts its engine with the guidance backend and without free
whitespace in JSON (vLLM's engine setting ``structured_outputs_config``: vLLM 0.32's backends
read ``disable_any_whitespace`` from the engine, not from the request, and take it only with
a backend named, not "auto"), unless the user sets ``structured_outputs_config`` itself. The
grammar otherwise allows blanks and newlines between any two tokens, and a model may spend its
tokens on them (seen: the tiny test model's answers all blanks until max_tokens); compact
JSON is also fewer tokens to generate. Guidance rather than xgrammar: it takes more of JSON
Schema (vLLM's "auto" sends the schemas xgrammar cannot compile to guidance; a backend named
has no such fallback).

vLLM's constrained decoding keeps every token inside the constraint, but a text cut by
``max_tokens`` is still incomplete: :func:`checked` parses and validates each answer, and an
answer that fails becomes the prompt's error (stage ``output``), its text kept.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Mapping, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

from mmrun.errors import UsageError
from mmrun.outcome import Completion, ItemError

KINDS = ("json", "choice", "regex", "grammar", "json_object")
# The fields of a manifest line that constrain its answer.
LINE_FIELDS = ("json_schema", "choice", "regex")
COMPACT_JSON = {"backend": "guidance", "disable_any_whitespace": True}
# vLLM's settings of a constraint, allowed beside it in --sampling-arg structured_outputs=...
SETTINGS = ("disable_any_whitespace", "disable_additional_properties", "whitespace_pattern")
FLAGS = {
    "json": "--json-schema",
    "choice": "--choice",
    "regex": "--regex",
    "grammar": "--grammar",
    "json_object": "--json-object",
}


def from_options(
    *,
    json_schema: str | None = None,
    choice: Sequence[str] = (),
    regex: str | None = None,
    grammar: str | None = None,
    json_object: bool = False,
) -> dict[str, Any] | None:
    """The constraint the command line's flags name, checked; None without one."""
    given = [
        flag
        for flag, value in (
            ("--json-schema", json_schema),
            ("--choice", choice or None),
            ("--regex", regex),
            ("--grammar", grammar),
            ("--json-object", json_object or None),
        )
        if value is not None
    ]
    if len(given) > 1:
        raise UsageError(
            f"{' and '.join(given)} both constrain the answer", hint="give at most one of them"
        )
    if json_schema is not None:
        return {"json": read_schema(json_schema, "--json-schema")}
    if choice:
        return {"choice": split_choices(choice, "--choice")}
    if regex is not None:
        return {"regex": check_regex(regex, "--regex")}
    if grammar is not None:
        return {"grammar": read_grammar(grammar)}
    if json_object:
        return {"json_object": True}
    return None


def asks_for_json(constraint: Mapping[str, Any] | None) -> bool:
    if not constraint:
        return False
    return constraint.get("json") is not None or bool(constraint.get("json_object"))


def compact_json(engine_args: dict[str, Any], overrides: Mapping[str, Any]) -> None:
    """Engine arguments for a run that asks for JSON: no free whitespace (see above), unless
    the user set ``structured_outputs_config``."""
    if "structured_outputs_config" not in overrides:
        engine_args["structured_outputs_config"] = dict(COMPACT_JSON)


def from_sampling_arg(
    value: Any, where: str = "--sampling-arg structured_outputs"
) -> dict[str, Any]:
    """``structured_outputs`` given as a sampling setting: a JSON object of
    StructuredOutputsParams' fields, checked as the flags are."""
    hint = "use --json-schema, --choice, --regex, --grammar or --json-object"
    if not isinstance(value, dict):
        raise UsageError(f"{where} must be a JSON object, got {value!r}", hint=hint)
    unknown = sorted(set(value) - set(KINDS) - set(SETTINGS))
    if unknown:
        raise UsageError(f"{where} has unknown field {unknown[0]!r}", hint=hint)
    kinds = [k for k in KINDS if value.get(k) not in (None, False)]
    if len(kinds) != 1:
        raise UsageError(
            f"{where} must name one constraint ({', '.join(KINDS)}), got "
            f"{', '.join(kinds) or 'none'}",
            hint=hint,
        )
    constraint = dict(value)
    kind = kinds[0]
    if kind == "json":
        schema = value["json"]
        if isinstance(schema, str):  # vLLM also takes the schema as JSON text
            schema = _parse_json(schema, where)
        constraint["json"] = check_schema(schema, where)
    elif kind == "choice":
        constraint["choice"] = check_choices(value["choice"], where)
    elif kind == "regex":
        constraint["regex"] = check_regex(value["regex"], where)
    elif kind == "grammar" and not (isinstance(value["grammar"], str) and value["grammar"].strip()):
        raise UsageError(f"{where}: grammar must be the grammar's text", hint=hint)
    elif kind == "json_object" and value["json_object"] is not True:
        raise UsageError(f"{where}: json_object must be true", hint=hint)
    return constraint


def from_line(row: Mapping[str, Any], where: str, base: Path) -> dict[str, Any] | None:
    """A manifest line's own constraint (``json_schema``: an object, or a file relative to the
    manifest; ``choice``: a list; ``regex``), checked; None where the line has none."""
    given = [name for name in LINE_FIELDS if name in row]
    if len(given) > 1:
        raise UsageError(
            f"{where}: {' and '.join(given)} both constrain the answer", hint="give one of them"
        )
    if not given:
        return None
    name = given[0]
    value = row[name]
    if name == "json_schema":
        if isinstance(value, str):
            return {"json": read_schema(str(base / value), f"{where}: json_schema")}
        return {"json": check_schema(value, f"{where}: json_schema")}
    if name == "choice":
        return {"choice": check_choices(value, f"{where}: choice")}
    if not isinstance(value, str):
        raise UsageError(f"{where}: regex must be a string", hint='e.g. "[A-Z][a-z]+"')
    return {"regex": check_regex(value, f"{where}: regex")}


def read_schema(text: str, where: str) -> Any:
    """A JSON Schema given inline (text starting with ``{``) or as a file."""
    if text.lstrip().startswith("{"):
        return check_schema(_parse_json(text, where), where)
    return check_schema(_parse_json(_read(text, where), f"{where} {text}"), f"{where} {text}")


def read_grammar(path: str) -> str:
    text = _read(path, "--grammar")
    if not text.strip():
        raise UsageError(f"--grammar {path} is empty", hint="name a file holding a grammar")
    return text


def _read(path: str, where: str) -> str:
    try:
        return Path(path).expanduser().read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = getattr(exc, "strerror", None) or exc
        raise UsageError(
            f"cannot read {where} {path}: {reason}",
            hint="name a readable UTF-8 file, or give the schema inline as JSON",
        ) from exc


def _parse_json(text: str, where: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(
            f"{where} is not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})",
            hint='e.g. {"type": "object", "properties": {"name": {"type": "string"}}}',
        ) from exc


def check_schema(schema: Any, where: str) -> Any:
    """The schema, if it is a valid JSON Schema (a JSON object) for jsonschema's validator."""
    if not isinstance(schema, dict):
        raise UsageError(
            f"{where} must be a JSON object (a JSON Schema), got {type(schema).__name__}",
            hint='e.g. {"type": "object", "properties": {"name": {"type": "string"}}}',
        )
    problem = _schema_error(json.dumps(schema, sort_keys=True))
    if problem is not None:
        raise UsageError(
            f"{where} is not a valid JSON Schema: {problem}",
            hint="check it against https://json-schema.org",
        )
    return schema


@lru_cache(maxsize=256)
def _schema_error(schema_text: str) -> str | None:
    """What is wrong with a schema (its JSON text: a manifest may repeat one on every line)."""
    import jsonschema

    schema = json.loads(schema_text)
    try:
        jsonschema.validators.validator_for(schema).check_schema(schema)
    except jsonschema.SchemaError as exc:
        at = "/".join(str(p) for p in exc.absolute_path)
        return _short(exc.message) + (f" (at {at})" if at else "")
    return None


def split_choices(values: Sequence[str], where: str) -> list[str]:
    """``--choice A --choice B`` or ``--choice A,B``."""
    return check_choices([c.strip() for v in values for c in v.split(",")], where)


def check_choices(choices: Any, where: str) -> list[str]:
    if not isinstance(choices, list) or not all(isinstance(c, str) for c in choices):
        raise UsageError(f"{where} must be a list of strings", hint='e.g. ["cat", "dog"]')
    kept = list(dict.fromkeys(c for c in choices if c))
    if not kept:
        raise UsageError(f"{where}: the list of choices is empty", hint="give at least one")
    return kept


def check_regex(pattern: Any, where: str) -> str:
    if not isinstance(pattern, str) or not pattern:
        raise UsageError(f"{where} must be a non-empty pattern", hint="e.g. [A-Z][a-z]+")
    try:
        re.compile(pattern)
    except re.error as exc:
        raise UsageError(
            f"{where} {pattern!r} is not a valid regular expression: {exc}",
            hint="e.g. [A-Z][a-z]+",
        ) from None
    return pattern


def _short(text: str, limit: int = 200) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


# --- answers ---------------------------------------------------------------------------------


def checked(
    completion: Completion, constraint: Mapping[str, Any] | None
) -> tuple[Completion, ItemError | None]:
    """The completion, with ``parsed`` set for a JSON constraint, and the error (stage
    ``output``) of an answer that is not what the constraint allows: with ``n`` outputs, each
    one checked, the first that fails named by its index."""
    if not constraint:
        return completion, None
    first, error = _checked_one(completion, constraint)
    others = []
    for index, other in enumerate(completion.others, start=1):
        other, problem = _checked_one(other, constraint)
        others.append(other)
        if error is None and problem is not None:
            error = ItemError("output", f"choice {index}: {problem.message}")
    if others:
        first = dataclasses.replace(first, others=tuple(others))
    return first, error


def _checked_one(
    completion: Completion, constraint: Mapping[str, Any]
) -> tuple[Completion, ItemError | None]:
    problem: str | None = None
    text = completion.text
    if constraint.get("json") is not None or constraint.get("json_object"):
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            problem = f"the answer is not JSON ({exc.msg} at column {exc.colno})"
        else:
            schema = constraint.get("json")
            if schema is not None:
                problem = _schema_problem(json.dumps(schema, sort_keys=True), value)
            if problem is None:
                return dataclasses.replace(completion, parsed=value), None
    elif constraint.get("choice"):
        if text not in constraint["choice"]:
            problem = f"the answer {_short(repr(text), 80)} is not one of the choices"
    elif constraint.get("regex") and re.fullmatch(constraint["regex"], text) is None:
        problem = f"the answer {_short(repr(text), 80)} does not match the regex"
    if problem is None:
        return completion, None
    if completion.finish_reason == "length":
        problem += (
            f"; it stopped at max_tokens ({completion.completion_tokens} tokens): "
            "raise --max-tokens (or the line's sampling max_tokens)"
        )
    return completion, ItemError("output", problem)


def _schema_problem(schema_text: str, value: Any) -> str | None:
    import jsonschema

    error = jsonschema.exceptions.best_match(_validator(schema_text).iter_errors(value))
    if error is None:
        return None
    at = "/".join(str(p) for p in error.absolute_path)
    return f"the answer does not match the JSON schema: {_short(error.message)}" + (
        f" (at {at})" if at else ""
    )


@lru_cache(maxsize=64)
def _validator(schema_text: str) -> Any:
    """One validator per schema (the JSON text is the cache key: a schema is a dict)."""
    import jsonschema

    schema = json.loads(schema_text)
    return jsonschema.validators.validator_for(schema)(schema)
