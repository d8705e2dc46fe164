"""A row's request for the installed vLLM's version (LoaderSpec.since/until/changes), with
faked version strings: nothing here imports vLLM."""

from __future__ import annotations

from pathlib import Path

import pytest

from mmrun import support
from mmrun.errors import UnsupportedModelError, UsageError
from mmrun.planning import RunOptions, plan
from mmrun.plugins import builtin_registry
from mmrun.registry import version_key
from mmrun.support import VllmInfo
from tests.helpers.cli import in_process

REGISTRY = builtin_registry()


def vllm(version: str | None) -> VllmInfo:
    return VllmInfo(version, frozenset(), {}, "cpu" if version else None)


def dry_run(key: str, modality: str = "image") -> RunOptions:
    return RunOptions(modality=modality, key=key, trust_remote_code=True, dry_run=True)


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("0.34.0", (0, 34, 0)),
        ("0.32.0+cpu", (0, 32, 0)),
        ("0.34", (0, 34)),
        ("1.0.0rc1", (1, 0, 0)),
    ],
)
def test_version_key(text: str, key: tuple[int, ...]) -> None:
    assert version_key(text) == key


def test_a_version_without_numbers_is_refused() -> None:
    with pytest.raises(ValueError, match="not a version"):
        version_key("dev")


@pytest.mark.parametrize("key", ["deepseek_ocr", "deepseek_ocr2"])
@pytest.mark.parametrize(
    ("version", "guard"),
    [("0.32.0+cpu", True), ("0.33.0", True), ("0.34.0", False), ("0.34.1+cu129", False)],
)
def test_deepseek_ocr_has_its_ngram_guard_only_before_0_34(
    key: str, version: str, guard: bool
) -> None:
    run = plan(dry_run(key), REGISTRY, vllm(version))
    assert ("logits_processors" in run.engine_args) is guard
    assert ("extra_args" in run.sampling) is guard
    # The rest of DeepSeek's OCR sampling stays.
    assert run.sampling["max_tokens"] == 8192 and run.sampling["skip_special_tokens"] is False


def test_without_vllm_a_row_is_as_declared() -> None:
    spec = REGISTRY.get("image", "deepseek_ocr")
    assert spec.for_vllm(None) is spec
    run = plan(dry_run("deepseek_ocr"), REGISTRY, vllm(None))
    assert "logits_processors" in run.engine_args


@pytest.mark.parametrize(("version", "remote"), [("0.33.0", True), ("0.34.0", False)])
def test_aria_runs_without_remote_code_from_0_34(version: str, remote: bool) -> None:
    spec = REGISTRY.get("image", "aria").for_vllm(version)
    assert spec.trust_remote_code is remote
    run = plan(dry_run("aria"), REGISTRY, vllm(version))
    assert ("trust_remote_code" in run.engine_args) is remote


@pytest.mark.parametrize(("version", "fraction"), [("0.33.0", 0.85), ("0.34.0", None)])
def test_step3_leaves_the_memory_fraction_to_vllm_from_0_34(
    version: str, fraction: float | None
) -> None:
    spec = REGISTRY.get("image", "step3").for_vllm(version)
    assert spec.engine_args.get("gpu_memory_utilization") == fraction
    assert spec.engine_args["tensor_parallel_size"] == 8


@pytest.mark.parametrize(
    ("modality", "key"),
    [("image", "keye_vl"), ("image", "keye_vl1_5"), ("video", "keye_vl"), ("video", "keye_vl1_5")],
)
def test_keye_rows_are_refused_on_0_34_naming_0_33(modality: str, key: str) -> None:
    spec = REGISTRY.get(modality, key)
    assert spec.runs_on("0.33.0") and spec.runs_on("0.33.2") and spec.runs_on("0.32.0+cpu")
    assert not spec.runs_on("0.34.0")
    with pytest.raises(UnsupportedModelError) as caught:
        plan(dry_run(key, modality), REGISTRY, vllm("0.34.0"))
    message = str(caught.value)
    assert "0.34.0" in message and "vLLM 0.33 is the last" in message
    assert "\n" not in message


def test_a_refused_row_fails_in_one_line_before_the_engine_starts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(support, "vllm_info", lambda: vllm("0.34.0"))
    result = in_process(["image", "-m", "keye_vl", "--trust-remote-code"])
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert "vLLM 0.33 is the last" in lines[0] and "Traceback" not in result.stderr
    assert len(lines) <= 2  # the message, and what to do


def test_the_dry_run_names_the_vllm_version(
    monkeypatch: pytest.MonkeyPatch, media_dir: Path
) -> None:
    monkeypatch.setattr(support, "vllm_info", lambda: vllm("0.34.0"))
    image = str(media_dir / "blue.png")
    result = in_process(["image", "-m", "aria", "-i", image, "--trust-remote-code", "--dry-run"])
    assert result.exit_code == 0, result.stderr
    assert "for vLLM" in result.stdout and "0.34.0" in result.stdout
    assert "trust_remote_code" not in result.stdout


@pytest.mark.parametrize(
    ("modality", "key"), [("image", "unlimited_ocr2"), ("audio", "ming_v3_asr")]
)
def test_rows_new_in_0_34_are_refused_on_an_older_vllm(modality: str, key: str) -> None:
    spec = REGISTRY.get(modality, key)
    assert spec.runs_on("0.34.0") and not spec.runs_on("0.33.0")
    with pytest.raises(UnsupportedModelError) as caught:
        plan(dry_run(key, modality), REGISTRY, vllm("0.32.0+cpu"))
    message = str(caught.value)
    assert "0.32.0+cpu" in message and "needs vLLM 0.34 or later" in message
    assert "\n" not in message
    assert plan(dry_run(key, modality), REGISTRY, vllm("0.34.0")).spec.key == key


def test_ming_v3_asr_takes_exactly_one_clip() -> None:
    options = RunOptions(
        modality="audio", key="ming_v3_asr", count=2, trust_remote_code=True, dry_run=True
    )
    with pytest.raises(UsageError):
        plan(options, REGISTRY, vllm("0.34.0"))


def test_mmrun_models_says_which_versions_a_row_declares() -> None:
    from mmrun.cli.models import model_rows

    rows = {(r["modality"], r["key"]): r for r in model_rows()}
    assert rows[("image", "keye_vl")]["vllm_until"] == "0.33"
    assert rows[("audio", "ming_v3_asr")]["vllm_since"] == "0.34"
    assert rows[("image", "aria")]["vllm_changes"] == ["0.34"]
    assert rows[("image", "llava")]["vllm_changes"] == []
    result = in_process(["models", "image"])
    assert result.exit_code == 0
    line = next(li for li in result.stdout.splitlines() if "unlimited_ocr2" in li)
    assert "≥0.34" in line
