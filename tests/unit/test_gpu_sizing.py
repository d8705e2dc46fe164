"""The size-aware GPU settings: the rule on its own, through the plan, and what the CLI says."""

from __future__ import annotations

import copy
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from mmrun.engine.gpu import (
    ENCODER_COMPILE_ARCHITECTURES,
    ENCODER_COMPILE_MIN_IMAGES,
    RUNNER_ENV,
    V1_RUNNER_ARCHITECTURES,
    choose_the_model_runner,
    compile_the_encoder,
    images_per_engine,
)
from mmrun.plan import Plan
from tests.helpers.cli import in_process

QWEN = "Qwen2_5_VLForConditionalGeneration"
LIMIT = ENCODER_COMPILE_MIN_IMAGES


def test_the_measured_architecture_is_the_one_the_rule_names() -> None:
    assert QWEN in ENCODER_COMPILE_ARCHITECTURES
    assert QWEN in V1_RUNNER_ARCHITECTURES


@pytest.mark.parametrize(
    ("images", "args", "named", "expected"),
    [
        (LIMIT, {}, {}, {"compile_mm_encoder": True}),
        (LIMIT - 1, {}, {}, None),  # below the break-even: the start costs more than it gains
        (
            10 * LIMIT,
            {"compilation_config": {"mode": 3}},
            {},
            {"mode": 3, "compile_mm_encoder": True},
        ),
        (LIMIT, {}, {"compilation_config": {"mode": 0}}, None),  # the user's own
        (LIMIT, {"enforce_eager": True}, {}, None),  # nothing is compiled
        (LIMIT, {"compilation_config": {"compile_mm_encoder": False}}, {}, None),  # the model's
        (LIMIT, {"compilation_config": 3}, {}, None),  # a level: left as it is
    ],
    ids=["at", "below", "merged", "named", "eager", "model-says-no", "level"],
)
def test_the_encoder_is_compiled_from_the_break_even_on(
    images: int, args: dict[str, Any], named: dict[str, Any], expected: dict[str, Any] | None
) -> None:
    given = copy.deepcopy(args.get("compilation_config"))
    why = compile_the_encoder(args, QWEN, images, named)
    if expected is None:
        assert why is None
        assert args.get("compilation_config") == given  # left as it was
        return
    assert args["compilation_config"] == expected
    assert why is not None and f"{images:,} images" in why
    if given is not None:
        assert given != expected  # the model's own mapping was copied, not changed


def test_only_architectures_it_was_measured_with_get_the_compiled_encoder() -> None:
    args: dict[str, Any] = {}
    assert compile_the_encoder(args, "LlavaForConditionalGeneration", 10 * LIMIT, {}) is None
    assert args == {}


@pytest.mark.parametrize(
    ("version", "environ", "expected"),
    [
        ("0.26.0", {}, {RUNNER_ENV: "0"}),
        ("0.26.0+cu130", {}, {RUNNER_ENV: "0"}),
        # from 0.27 vLLM's default (V2) runner runs the encoder at its start itself
        ("0.27.0rc1", {}, {}),
        ("0.32.0", {}, {}),
        ("0.25.1", {}, {}),  # not measured before 0.26
        ("0.26.0+rocm7", {}, {}),
        ("0.26.0", {RUNNER_ENV: "1"}, {}),  # the user chose the runner: kept, whichever
        ("0.26.0", {RUNNER_ENV: "0"}, {}),
        (None, {}, {}),
    ],
    ids=["0.26", "0.26-cuda", "0.27", "0.32", "older", "rocm", "v2-named", "v1-named", "none"],
)
def test_the_v1_runner_on_the_vllm_whose_v2_runner_starts_without_the_encoder(
    version: str | None, environ: dict[str, str], expected: dict[str, str]
) -> None:
    assert choose_the_model_runner(QWEN, version, environ) == expected


def test_only_architectures_it_was_measured_with_get_another_runner() -> None:
    assert choose_the_model_runner("LlavaForConditionalGeneration", "0.26.0", {}) == {}


@pytest.mark.parametrize(
    ("prompts", "per", "engines", "expected"),
    [(4096, 4, 1, 16384), (4096, 4, 2, 8192), (5, 4, 2, 12), (0, 4, 1, 0), (7, 1, 0, 7)],
)
def test_images_per_engine(prompts: int, per: int, engines: int, expected: int) -> None:
    assert images_per_engine(prompts, per, engines) == expected


def write_manifest(folder: Path, image: Path, images: int) -> Path:
    """A manifest of ``images`` images, 4 per prompt (the last prompt takes the rest)."""
    manifest = folder / f"m{images}.jsonl"
    with manifest.open("w") as f:
        for i, start in enumerate(range(0, images, 4)):
            count = min(4, images - start)
            f.write(json.dumps({"id": f"p{i}", "image": [str(image)] * count}) + "\n")
    return manifest


def planned(
    media_dir: Path,
    tmp_path: Path,
    images: int,
    named: dict[str, Any],
    device: str = "gpu",
    dp: int = 1,
) -> Plan:
    """The plan of a Qwen2.5-VL run of ``images`` images, 4 per prompt, on vLLM 0.26.0."""
    from mmrun.planning import RunOptions, plan
    from mmrun.plugins import get_registry
    from mmrun.support import vllm_info

    opts = RunOptions(
        modality="image",
        key="qwen2_5_vl",
        model="x",
        input=str(write_manifest(tmp_path, media_dir / "blue.png", images)),
        engine_args=named,
        data_parallel_size=dp,
    )
    info = replace(vllm_info(), device=device, version="0.26.0")
    return plan(opts, get_registry(), info, [str(i) for i in range(dp)])


def test_a_large_gpu_run_compiles_the_encoder_and_says_why(media_dir: Path, tmp_path: Path) -> None:
    the_plan = planned(media_dir, tmp_path, LIMIT, {})
    args, choices = the_plan.engine_args, the_plan.choices
    assert args["compilation_config"] == {"compile_mm_encoder": True}
    assert "ir_op_priority" not in args  # Inductor fuses the compiled encoder's norms
    assert args["max_num_seqs"] == 256
    said = "\n".join(choices)
    assert "compilation_config=" in said and f"{LIMIT:,} images on one engine" in said
    assert "max_num_seqs=256" in said and "the model's own setting is 5" in said


def test_a_smaller_gpu_run_keeps_the_encoder_uncompiled_with_vllms_kernels(
    media_dir: Path, tmp_path: Path
) -> None:
    the_plan = planned(media_dir, tmp_path, LIMIT - 4, {})
    args, choices = the_plan.engine_args, the_plan.choices
    assert "compilation_config" not in args
    assert "ir_op_priority" in args
    assert not any(c.startswith("compilation_config") for c in choices)
    assert any(c.startswith("ir_op_priority") for c in choices)


def test_the_runner_mmrun_chooses_travels_with_the_plan(
    media_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mmrun.plugins import get_registry
    from mmrun.support import vllm_info

    monkeypatch.delenv(RUNNER_ENV, raising=False)
    the_plan = planned(media_dir, tmp_path, LIMIT, {}, dp=2)
    assert dict(the_plan.engine_env) == {RUNNER_ENV: "0"}
    assert any(c.startswith(f"{RUNNER_ENV}=0 (") for c in the_plan.choices)
    recipe = the_plan.recipe()  # what each replica process rebuilds its plan from
    replica = recipe.plan(get_registry(), replace(vllm_info(), device="gpu"))
    assert replica.engine_env == the_plan.engine_env
    monkeypatch.setenv(RUNNER_ENV, "1")  # the user's choice: nothing to add
    the_plan = planned(media_dir, tmp_path, LIMIT, {})
    assert the_plan.engine_env == ()
    assert not any(c.startswith(RUNNER_ENV) for c in the_plan.choices)


def test_replicas_share_the_images(media_dir: Path, tmp_path: Path) -> None:
    the_plan = planned(media_dir, tmp_path, LIMIT, {}, dp=2)
    args = the_plan.engine_args
    assert "compilation_config" not in args  # half of them per engine: below the break-even


def test_the_users_engine_args_win(media_dir: Path, tmp_path: Path) -> None:
    named = {"compilation_config": {"compile_mm_encoder": False}, "max_num_seqs": 32}
    the_plan = planned(media_dir, tmp_path, LIMIT, named)
    args, choices = the_plan.engine_args, the_plan.choices
    assert args["compilation_config"] == {"compile_mm_encoder": False}
    assert args["max_num_seqs"] == 32
    assert not any(c.split("=")[0] in named for c in choices)


def test_nothing_is_chosen_on_vllms_cpu_build(media_dir: Path, tmp_path: Path) -> None:
    the_plan = planned(media_dir, tmp_path, LIMIT, {}, device="cpu")
    args, choices = the_plan.engine_args, the_plan.choices
    assert choices == ()
    assert "compilation_config" not in args


def test_verbose_and_dry_run_say_what_was_chosen(
    media_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import mmrun.engine.gpu
    import mmrun.support

    real = mmrun.support.vllm_info()
    monkeypatch.setattr(
        mmrun.support, "vllm_info", lambda: replace(real, device="gpu", version="0.26.0")
    )
    monkeypatch.setattr(mmrun.engine.gpu, "ENCODER_COMPILE_MIN_IMAGES", 80)  # a short manifest
    monkeypatch.delenv(RUNNER_ENV, raising=False)
    manifest = write_manifest(tmp_path, media_dir / "blue.png", 80)
    model = tmp_path / "model"  # a folder without a processor: the prompts are not rendered
    model.mkdir()
    args = ["image", "-m", "qwen2_5_vl", "--model", str(model), "--input", str(manifest)]
    args.append("--dry-run")
    result = in_process([*args, "--quiet"])
    assert "for this GPU run" not in result.stderr
    result = in_process(args)
    # said whether or not the prompts can be rendered (a dry run goes on without them)
    assert result.exit_code == 0, result.stderr
    lines = [line for line in result.stderr.splitlines() if "for this GPU run" in line]
    assert any("80 images on one engine" in line for line in lines), result.stderr
    assert any("max_num_seqs=64" in line for line in lines)
    assert any(f"{RUNNER_ENV}=0 (" in line for line in lines)
    # and in a run's JSON document, for a script
    one = ["image", "-m", "qwen2_5_vl", "--model", str(model), "-i", str(media_dir / "blue.png")]
    result = in_process([*one, "--dry-run", "--json"])
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["request"]["engine_env"] == {RUNNER_ENV: "0"}
