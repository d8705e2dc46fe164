"""Structured outputs and per-line settings above the engine, with the stand-in vLLM: every
malformed constraint or setting is one line and exit 2 before any engine starts; the dry run
shows the constraint; answers are parsed, checked, and a failed check is an ``output`` error
line; a resumed run redoes a line whose own settings changed. The real engine runs them in
tests/e2e/test_structured_e2e.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mmrun.errors import EXIT_OK, EXIT_PARTIAL, EXIT_USAGE
from mmrun.outcome import Completion
from mmrun.structured import checked
from tests.helpers.http import PNG
from tests.unit.test_bad_inputs import IMAGE, check, cli

DRY = ("--dry-run", "--json")
SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "count": {"type": "integer"}},
    "required": ["name"],
}


@pytest.fixture
def photo(tmp_path: Path) -> Path:
    path = tmp_path / "p.png"
    path.write_bytes(PNG)
    return path


def manifest(tmp_path: Path, photo: Path, *rows: dict[str, Any]) -> str:
    path = tmp_path / "m.jsonl"
    path.write_text("".join(json.dumps({"image": str(photo), **r}) + "\n" for r in rows))
    return str(path)


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (["--json-schema", '{"type": "objekt"}'], ["--json-schema is not a valid JSON Schema"]),
        (["--json-schema", "{not json"], ["--json-schema is not valid JSON"]),
        (["--json-schema", "[1, 2]"], ["cannot read --json-schema [1, 2]"]),
        (["--json-schema", "/nonexistent/schema.json"], ["cannot read --json-schema"]),
        (["--choice", ","], ["--choice: the list of choices is empty"]),
        (["--regex", "([a-z"], ["--regex '([a-z' is not a valid regular expression"]),
        (["--grammar", "/nonexistent/g.ebnf"], ["cannot read --grammar"]),
        (["--json-object", "--choice", "a"], ["--choice and --json-object both constrain"]),
        (["--regex", "a+", "--json-schema", "{}"], ["--json-schema and --regex both constrain"]),
        (
            ["--choice", "a", "--sampling-arg", 'structured_outputs={"regex": "b"}'],
            ["--sampling-arg structured_outputs and --choice both constrain"],
        ),
        (
            ["--sampling-arg", 'structured_outputs={"json": {"type": 3}}'],
            ["--sampling-arg structured_outputs is not a valid JSON Schema"],
        ),
        (
            ["--sampling-arg", 'structured_outputs={"regex": "a", "choice": ["b"]}'],
            ["must name one constraint", "got choice, regex"],
        ),
        (["--sampling-arg", "structured_outputs=3"], ["must be a JSON object", "--json-schema"]),
        (["--sampling-arg", "max_token=3"], ["unknown sampling setting 'max_token'", "max_tokens"]),
        (["--sampling-arg", "top_p=2"], ["--sampling-arg top_p must be a number from 0"]),
    ],
)
def test_a_malformed_constraint_is_one_line_before_any_engine(
    args: list[str], fragments: list[str], fake_vllm: Any, isolated_cache: Path
) -> None:
    """Without --dry-run: nothing may reach the (stand-in) engine."""
    check(cli(*IMAGE, *args), EXIT_USAGE, *fragments, cache=isolated_cache)
    assert fake_vllm.submitted == [] and fake_vllm.sampled == []


@pytest.mark.parametrize(
    ("row", "fragments"),
    [
        ({"max_tokens": 20}, ["m.jsonl line 2 has unknown field 'max_tokens'", "sampling"]),
        ({"sampling": {"max_tokenz": 5}}, ["line 2: sampling: unknown sampling setting"]),
        ({"sampling": {"max_tokens": 0}}, ["line 2: sampling max_tokens must be an integer"]),
        ({"sampling": {"temperature": "hot"}}, ["line 2: sampling temperature must be"]),
        ({"sampling": [1]}, ["line 2: 'sampling' must be a JSON object"]),
        ({"json_schema": {"type": "nope"}}, ["line 2: json_schema is not a valid JSON Schema"]),
        ({"json_schema": "missing.json"}, ["m.jsonl line 2: json_schema", "missing.json"]),
        ({"choice": []}, ["line 2: choice: the list of choices is empty"]),
        ({"choice": "a"}, ["line 2: choice must be a list of strings"]),
        ({"regex": "(("}, ["line 2: regex '((' is not a valid regular expression"]),
        ({"choice": ["a"], "regex": "a"}, ["line 2: choice and regex both constrain"]),
        (
            {"choice": ["a"], "sampling": {"structured_outputs": {"regex": "a"}}},
            ["line 2: sampling structured_outputs and the line's constraint"],
        ),
    ],
)
def test_a_malformed_line_setting_is_one_line_naming_the_line(
    row: dict[str, Any],
    fragments: list[str],
    fake_vllm: Any,
    photo: Path,
    tmp_path: Path,
    isolated_cache: Path,
) -> None:
    path = manifest(tmp_path, photo, {"id": "fine"}, {"id": "bad", **row})
    check(cli(*IMAGE, "--input", path), EXIT_USAGE, *fragments, cache=isolated_cache)
    assert fake_vllm.submitted == []


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--json-schema", json.dumps(SCHEMA)], {"json": SCHEMA}),
        (["--choice", "cat", "--choice", "dog,bird"], {"choice": ["cat", "dog", "bird"]}),
        (["--regex", "[0-9]+"], {"regex": "[0-9]+"}),
        (["--json-object"], {"json_object": True}),
        (["--sampling-arg", 'structured_outputs={"choice": ["x"]}'], {"choice": ["x"]}),
        (
            ["--sampling-arg", 'structured_outputs={"json": {}, "disable_any_whitespace": false}'],
            {"json": {}, "disable_any_whitespace": False},
        ),
    ],
)
def test_the_dry_run_shows_the_constraint(
    args: list[str], expected: dict[str, Any], photo: Path
) -> None:
    outcome = cli(*IMAGE, "-i", str(photo), *args, *DRY)
    assert outcome.code == EXIT_OK, outcome.stderr
    request = json.loads(outcome.stdout)["request"]
    assert request["sampling"]["structured_outputs"] == expected
    # JSON without free whitespace: an engine setting in vLLM 0.32
    compact = request["engine_args"].get("structured_outputs_config")
    wants_json = "json" in expected or "json_object" in expected
    assert compact == (
        {"backend": "guidance", "disable_any_whitespace": True} if wants_json else None
    )


def test_a_line_s_own_schema_starts_the_engine_for_compact_json(
    fake_vllm: Any, photo: Path, tmp_path: Path
) -> None:
    from mmrun.planning import RunOptions, plan
    from mmrun.plugins import get_registry
    from mmrun.support import vllm_info

    def engine_args(rows: list[dict[str, Any]], **options: Any) -> dict[str, Any]:
        path = manifest(tmp_path, photo, *rows)
        opts = RunOptions(modality="image", key="mistral3", input=path, **options)
        return plan(opts, get_registry(), vllm_info()).engine_args

    own_schema = [{"id": "a"}, {"id": "b", "json_schema": SCHEMA}]
    compact = {"backend": "guidance", "disable_any_whitespace": True}
    assert engine_args(own_schema)["structured_outputs_config"] == compact
    mine = {"structured_outputs_config": {"disable_any_whitespace": False}}
    assert engine_args(own_schema, engine_args=mine)["structured_outputs_config"] == {
        "disable_any_whitespace": False
    }
    assert "structured_outputs_config" not in engine_args([{"id": "a", "choice": ["x"]}])


def test_a_schema_file_and_a_grammar_file_are_read(photo: Path, tmp_path: Path) -> None:
    (tmp_path / "s.json").write_text(json.dumps(SCHEMA))
    (tmp_path / "g.ebnf").write_text('root ::= "yes" | "no"\n')
    for flag, name, constraint in [
        ("--json-schema", "s.json", {"json": SCHEMA}),
        ("--grammar", "g.ebnf", {"grammar": 'root ::= "yes" | "no"\n'}),
    ]:
        outcome = cli(*IMAGE, "-i", str(photo), flag, str(tmp_path / name), *DRY)
        assert outcome.code == EXIT_OK, outcome.stderr
        sampling = json.loads(outcome.stdout)["request"]["sampling"]
        assert sampling["structured_outputs"] == constraint


def test_answers_are_parsed_and_checked_and_a_failed_check_is_an_output_line(
    fake_vllm: Any, photo: Path, tmp_path: Path
) -> None:
    """The stand-in answers within the constraint: each required field the string "x". A
    line whose schema wants an integer gets "x" anyway: an output error, its text kept."""
    (tmp_path / "wants_int.json").write_text(
        json.dumps({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]})
    )
    path = manifest(
        tmp_path,
        photo,
        {"id": "run-schema"},
        {"id": "own-choice", "choice": ["left", "right"], "sampling": {"max_tokens": 3}},
        {"id": "bad-int", "json_schema": "wants_int.json"},
        {"id": "seeded", "sampling": {"seed": 5, "temperature": 0.5}},
    )
    out = tmp_path / "out.jsonl"
    result = cli(*IMAGE, "--input", path, "-o", str(out), "--json-schema", json.dumps(SCHEMA))
    assert result.code == EXIT_PARTIAL, result.stderr
    rows = {r["id"]: r for r in map(json.loads, out.read_text().splitlines())}
    assert rows["run-schema"]["parsed"] == {"name": "x"} and rows["run-schema"]["error"] is None
    assert rows["own-choice"]["text"] == "left" and rows["own-choice"]["parsed"] is None
    assert rows["bad-int"]["error"]["stage"] == "output"
    assert "does not match the JSON schema" in rows["bad-int"]["error"]["message"]
    assert rows["bad-int"]["text"] == '{"n": "x"}' and rows["bad-int"]["parsed"] is None
    assert rows["run-schema"]["settings"] is None and rows["own-choice"]["settings"]
    # Each prompt got its own sampling: the line's settings over the run's.
    sent = {
        json.dumps(p.kwargs["structured_outputs"].json or p.kwargs["structured_outputs"].choice)
        for p in fake_vllm.sampled
    }
    assert json.dumps(["left", "right"]) in sent and json.dumps(SCHEMA) in sent
    by_tokens = sorted(p.kwargs["max_tokens"] for p in fake_vllm.sampled)
    assert by_tokens[0] == 3 and by_tokens[-1] == 256
    assert any(p.kwargs.get("seed") == 5 for p in fake_vllm.sampled)


def test_a_resumed_run_redoes_a_line_whose_settings_changed(
    fake_vllm: Any, photo: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out.jsonl"
    rows = [{"id": "a", "sampling": {"max_tokens": 4}}, {"id": "b"}, {"id": "c", "choice": ["x"]}]
    assert cli(*IMAGE, "--input", manifest(tmp_path, photo, *rows), "-o", str(out)).code == 0
    assert len(fake_vllm.submitted) == 3
    rows[0]["sampling"] = {"max_tokens": 8}  # changed: runs again
    rows[2] = {"id": "c", "choice": ["x"]}  # the same settings: done
    again = cli(*IMAGE, "--input", manifest(tmp_path, photo, *rows), "-o", str(out))
    assert again.code == 0, again.stderr
    assert len(fake_vllm.submitted) == 4 and "1 done, 0 failed, 2 skipped" in again.stderr
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted(r["id"] for r in lines) == ["a", "b", "c"]  # each id once


def test_a_named_run_keeps_an_answer_that_fails_its_check_and_exits_3(
    fake_vllm: Any, photo: Path
) -> None:
    wants_int = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    outcome = cli(*IMAGE, "-i", str(photo), "--json-schema", json.dumps(wants_int), "--json")
    assert outcome.code == EXIT_PARTIAL
    document = json.loads(outcome.stdout)
    (output,) = document["outputs"]
    assert output["text"] == '{"n": "x"}' and output["parsed"] is None
    assert output["error"]["stage"] == "output"
    assert "1 of 1 answer(s) failed their check" in outcome.stderr


@pytest.mark.parametrize(
    ("constraint", "text", "finish", "problem"),
    [
        ({"json": SCHEMA}, '{"name": "a"}', "stop", None),
        ({"json": SCHEMA}, '{"name": "a", "cou', "length", "is not JSON"),
        ({"json": SCHEMA}, '{"count": 1}', "stop", "'name' is a required property"),
        ({"json_object": True}, "[1, 2]", "stop", None),
        ({"choice": ["a", "b"]}, "b", "stop", None),
        ({"choice": ["a", "b"]}, "c", "stop", "is not one of the choices"),
        ({"regex": "[0-9]{3}"}, "123", "stop", None),
        ({"regex": "[0-9]{3}"}, "12", "length", "does not match the regex"),
        ({"grammar": 'root ::= "a"'}, "anything", "stop", None),
        (None, "free text", "stop", None),
    ],
)
def test_an_answer_is_checked_against_its_constraint(
    constraint: dict[str, Any] | None, text: str, finish: str, problem: str | None
) -> None:
    completion, error = checked(Completion(text, 5, 7, finish), constraint)
    if problem is None:
        assert error is None
        if constraint and ("json" in constraint or "json_object" in constraint):
            assert completion.parsed == json.loads(text)
    else:
        assert error is not None and error.stage == "output" and problem in error.message
        assert completion.text == text and completion.parsed is None
        assert ("raise --max-tokens" in error.message) == (finish == "length")


def test_ray_rows_carry_each_line_s_constraint_and_answers_are_checked(
    fake_vllm: Any, photo: Path, tmp_path: Path
) -> None:
    """--backend ray: a line's constraint reaches the row's sampling_params (Ray Data builds
    StructuredOutputsParams from it), and the driver checks the answer that comes back."""
    from mmrun.backends import ray as ray_backend
    from mmrun.builder import PromptSettings
    from mmrun.planning import RunOptions, plan
    from mmrun.plugins import get_registry
    from mmrun.support import vllm_info

    path = manifest(tmp_path, photo, {"id": "a", "choice": ["yes", "no"]}, {"id": "b"})
    opts = RunOptions(modality="image", key="mistral3", input=path, regex="[0-9]+")
    the_plan = plan(opts, get_registry(), vllm_info())
    items = {item.id: item for item in the_plan.items}
    try:
        for ident, constraint in [("a", {"choice": ["yes", "no"]}), ("b", {"regex": "[0-9]+"})]:
            (row,) = ray_backend._rows([items[ident]])
            request = ray_backend.preprocess(the_plan.recipe(), row)
            assert request["mmrun_error"] == ""
            assert request["sampling_params"]["structured_outputs"] == constraint
    finally:
        ray_backend._STATE.clear()
    answer = {
        "mmrun_question": "q",
        "mmrun_error": "",
        "inference_error": "",
        "generated_text": "maybe",
        "num_input_tokens": 9,
        "num_generated_tokens": 2,
    }
    outcome = ray_backend._outcome(PromptSettings(the_plan), items["a"], answer)
    assert outcome.error is not None and outcome.error.stage == "output"
    assert outcome.completion is not None and outcome.completion.text == "maybe"
    fine = ray_backend._outcome(
        PromptSettings(the_plan), items["b"], {**answer, "generated_text": "42"}
    )
    assert fine.error is None
