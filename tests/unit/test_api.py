"""mmrun as a library (mmrun.api), with the stand-in vLLM: the request of one prompt, a model
whose engine starts once for many calls, its results equal to the command line's lines, bad
items as error results and user errors raised. The real engine: tests/e2e/test_api_e2e.py."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import mmrun
from mmrun.errors import MmrunError, UnknownModelError, UsageError
from tests.helpers.cli import in_process
from tests.helpers.http import PNG

KEY = "mistral3"  # writes its own prompt: no processor to load, so it runs offline


@pytest.fixture
def photos(tmp_path: Path) -> list[str]:
    folder = tmp_path / "photos"
    folder.mkdir()
    for i in range(4):
        (folder / f"p{i}.png").write_bytes(PNG)
    return sorted(str(p) for p in folder.iterdir())


def without_time(row: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in row.items() if k != "finished_at"}


def test_request_is_what_the_dry_run_shows(photos: list[str]) -> None:
    req = mmrun.request_for(KEY, "What is here?", photos[0], max_tokens=7)
    cli = in_process(
        [
            *("image", "-m", KEY, "--image", photos[0], "-q", "What is here?"),
            *("--max-tokens", "7", "--dry-run", "--json"),
        ]
    )
    assert cli.exit_code == 0, cli.stderr
    shown = json.loads(cli.stdout)
    doc = req.to_dict()
    assert doc["request"] == shown["request"] and doc["prompt"] == shown["prompt"]
    assert req.prompt == shown["prompt"] and "What is here?" in (req.prompt or "")
    assert req.sampling["max_tokens"] == 7 and req.key == KEY and req.modality == "image"
    assert [m["source"] for m in req.media] == [photos[0]]


def test_request_imports_no_engine_library(photos: list[str]) -> None:
    code = (
        "import sys, mmrun\n"
        f"r = mmrun.request_for({KEY!r}, 'Hi?', {photos[0]!r})\n"
        "assert r.prompt, r\n"
        "print([m for m in ('vllm', 'torch', 'transformers') if m in sys.modules])\n"
    )
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=root, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_user_errors_raise_their_mmrun_error() -> None:
    with pytest.raises(UnknownModelError, match="unknown image model 'mistral33'"):
        mmrun.request_for("mistral33", modality="image")
    with pytest.raises(UsageError, match="unknown option 'max_token'"):
        mmrun.request_for(KEY, max_token=3)
    with pytest.raises(MmrunError, match="--json-schema is not a valid JSON Schema"):
        mmrun.request_for(KEY, json_schema='{"type": 3}')


def test_one_engine_answers_three_calls_with_the_command_lines_lines(
    fake_vllm: Any, photos: list[str], tmp_path: Path
) -> None:
    out = tmp_path / "cli.jsonl"
    cli = in_process(["image", "-m", KEY, "-i", str(Path(photos[0]).parent), "-o", str(out)])
    assert cli.exit_code == 0, cli.stderr
    by_cli = {r["id"]: without_time(r) for r in map(json.loads, out.read_text().splitlines())}
    shutdowns = fake_vllm.shutdowns
    with mmrun.Model(KEY) as model:
        submitted = len(fake_vllm.submitted)
        first = list(model.run(photos))
        second = list(model.run(photos))
        one = model.ask(None, photos[2])
        assert fake_vllm.shutdowns == shutdowns  # one engine for the three calls
    assert fake_vllm.shutdowns == shutdowns + 1  # stopped on leaving the block
    assert len(fake_vllm.submitted) == submitted + 9
    for results in (first, second):
        assert sorted(r.id for r in results) == photos
        for result in results:
            assert isinstance(result, mmrun.Result) and result.ok
            assert without_time(result.to_dict()) == by_cli[result.id]
    assert one.text == by_cli[photos[2]]["text"] and one.media == (photos[2],)


def test_bad_items_are_error_results_and_the_others_are_answered(
    fake_vllm: Any, photos: list[str], tmp_path: Path
) -> None:
    items: list[Any] = [
        photos[0],
        str(tmp_path / "missing.png"),
        {"id": "odd", "image": photos[1], "colour": "red"},
        42,
        {"id": "refused", "image": photos[2], "question": "REJECT this"},
        {"id": "kept", "image": [photos[3]], "meta": {"row": 7}},
    ]
    with mmrun.Model(KEY) as model:
        results = {r.id: r for r in model.run(items)}
    assert set(results) == {photos[0], str(tmp_path / "missing.png"), "odd", "3", "refused", "kept"}
    assert results[photos[0]].ok and results["kept"].meta == {"row": 7}
    missing = results[str(tmp_path / "missing.png")].error
    assert missing is not None and missing.stage == "media"
    odd = results["odd"].error
    assert odd is not None and "unknown field 'colour'" in odd.message
    assert results["3"].error is not None and "not int" in results["3"].error.message
    refused = results["refused"].error
    assert refused is not None and refused.stage == "request"


def test_per_call_sampling_and_constraints(fake_vllm: Any, photos: list[str]) -> None:
    schema = {"type": "object", "properties": {"kind": {"type": "string"}}, "required": ["kind"]}
    with mmrun.Model(KEY, max_tokens=50) as model:
        picked = model.ask("Cat or dog?", photos[0], choice=["cat", "dog"])
        parsed = model.ask("Describe", photos[0], json_schema=schema, max_tokens=9)
        plain = model.ask("Describe", photos[0])
        with pytest.raises(UsageError, match="unknown sampling setting 'max_tokenz'"):
            model.ask("Describe", photos[0], max_tokenz=3)
    assert picked.text == "cat"
    assert parsed.parsed == {"kind": "x"}
    limits = [getattr(p, "kwargs", {}).get("max_tokens") for p in fake_vllm.sampled[-3:]]
    assert limits == [50, 9, 50]  # a call's own setting does not outlive the call
    assert plain.ok and plain.parsed is None


def test_a_run_left_unread_does_not_leak_into_the_next_call(
    fake_vllm: Any, photos: list[str]
) -> None:
    with mmrun.Model(KEY) as model:
        stream = model.run(photos * 3)
        next(stream)
        with pytest.raises(UsageError, match="still being read"):
            list(model.run(photos))
        stream.close()
        again = list(model.run(photos))
    assert sorted(r.id for r in again) == photos and all(r.ok for r in again)


def test_a_closed_model_refuses_calls(fake_vllm: Any, photos: list[str]) -> None:
    model = mmrun.Model(KEY)
    with pytest.raises(UsageError, match="not open"):
        model.ask("Hi?", photos[0])
    model.open()
    model.close()
    with pytest.raises(UsageError, match="not open"):
        model.ask("Hi?", photos[0])


def test_media_as_bytes_or_a_pil_image(fake_vllm: Any, photos: list[str]) -> None:
    from PIL import Image

    data = Path(photos[0]).read_bytes()
    image = Image.new("RGB", (8, 8), (0, 0, 255))
    with mmrun.Model(KEY) as model:
        from_bytes = model.ask("What is here?", data)
        results = {r.id: r for r in model.run([{"id": "pil", "image": [image, photos[1]]}])}
        with pytest.raises(UsageError, match="no image, audio or video format"):
            mmrun.request_for(KEY, "Hi?", b"plain text")
    assert from_bytes.ok and from_bytes.media == ("item 0 image",)
    pil = results["pil"]
    assert pil.ok and pil.media == ("item 0 image[0]", photos[1])
    assert pil.prompt_tokens == 12  # the stand-in counts 10 plus one per media item


def test_write_resumes_a_results_file_as_o_does(
    fake_vllm: Any, photos: list[str], tmp_path: Path
) -> None:
    out = tmp_path / "results.jsonl"
    with mmrun.Model(KEY) as model:
        first = model.write(photos[:2], out)
        second = model.write([*photos, str(tmp_path / "missing.png")], out)
        third = model.write(photos, out)
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r.to_dict() for r in first + second] == lines
    assert sorted(r.id for r in first) == photos[:2]
    assert sorted(r.id for r in second) == sorted([*photos[2:], str(tmp_path / "missing.png")])
    assert third == []  # everything was done already
    sidecar = json.loads((tmp_path / "results.jsonl.mmrun.json").read_text())
    assert sidecar["run"]["key"] == KEY


def test_write_refuses_an_id_used_twice(fake_vllm: Any, photos: list[str], tmp_path: Path) -> None:
    with (
        mmrun.Model(KEY) as model,
        pytest.raises(UsageError, match="id 'a' is used twice"),
    ):
        model.write(
            [{"id": "a", "image": photos[0]}, {"id": "a", "image": photos[1]}], tmp_path / "o.jsonl"
        )


SIGNATURES = {
    "request_for": "(key: 'str', question: 'str | None' = None, media: 'Media' = (), *, "
    "modality: 'str | None' = None, **options: 'Any') -> 'Request'",
    "Model.__init__": "(self, key: 'str', *, modality: 'str | None' = None, "
    "hooks: 'Hooks | None' = None, **options: 'Any') -> 'None'",
    "Model.ask": "(self, question: 'str | None' = None, media: 'Media' = (), "
    "**sampling: 'Any') -> 'Result'",
    "Model.run": "(self, items: 'Iterable[ItemLike]', **sampling: 'Any') -> 'Iterator[Result]'",
    "Model.write": "(self, items: 'Iterable[ItemLike]', path: 'str | Path', *, "
    "overwrite: 'bool' = False, retry_errors: 'bool' = False, **sampling: 'Any') "
    "-> 'list[Result]'",
    # What the command line runs its plans through (mmrun/cli/batch.py, mmrun/cli/run.py).
    "api.open_batch": "(plan: 'Plan') -> 'Batch'",
    "api.run_plan": "(plan: 'Plan', hooks: 'Hooks | None' = None) -> 'tuple[RunResult, Any]'",
}


def test_the_library_signatures_change_only_on_purpose() -> None:
    """A change here changes what users' code calls: update docs/python.md with it."""
    import inspect

    from mmrun import api

    owners = {"Model": mmrun.Model, "api": api}
    found = {
        name: str(inspect.signature(getattr(owners[name.split(".")[0]], name.split(".")[1])))
        if "." in name
        else str(inspect.signature(getattr(mmrun, name)))
        for name in SIGNATURES
    }
    assert found == SIGNATURES


def test_a_call_whose_engine_dies_raises_and_the_next_call_starts_a_new_engine(
    fake_vllm: Any, photos: list[str]
) -> None:
    with mmrun.Model(KEY) as model:
        fake_vllm.die_at = {fake_vllm.steps + 1}
        with pytest.raises(MmrunError) as raised:
            list(model.run(photos))
        assert str(raised.value).startswith("the engine core stopped without logging a reason")
        shutdowns = fake_vllm.shutdowns
        results = list(model.run(photos))
        assert sorted(r.id for r in results) == photos and all(r.ok for r in results)
        assert fake_vllm.shutdowns == shutdowns  # the new engine is still up
