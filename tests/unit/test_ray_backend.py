"""--backend ray: what mmrun asks of Ray Data for each engine actor (pure functions; the real
Ray run is tests/e2e/test_scale_out_e2e.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mmrun.backends.ray import (
    BATCH_SIZE,
    MAX_CONCURRENT_BATCHES,
    engine_batch_size,
    engine_placement,
    engine_pool,
    workers_environment,
)
from mmrun.engine import FRONTEND_THREADS_MAX
from tests.helpers.http import PNG


def test_replicas_start_together_not_autoscaled() -> None:
    assert engine_pool(2) == (2, 2)  # an int would mean 1 to 2, scaled up late
    assert engine_pool(None) == (1, 1)


def test_an_actor_keeps_twice_max_num_seqs_in_its_engine() -> None:
    size = engine_batch_size({"max_num_seqs": 256})
    assert size * MAX_CONCURRENT_BATCHES == 512
    # an odd max_num_seqs rounds up, never down (the engine would run short)
    assert engine_batch_size({"max_num_seqs": 257}) * MAX_CONCURRENT_BATCHES >= 514


def test_small_engines_keep_the_smallest_batch() -> None:
    assert engine_batch_size({}) == BATCH_SIZE
    assert engine_batch_size({"max_num_seqs": 5}) == BATCH_SIZE


def test_the_cpu_build_asks_for_one_cpu_and_no_gpu() -> None:
    assert engine_placement({}, True, {"CPU": 2.0}) == {"bundles": [{"CPU": 1}]}


def test_a_gpu_engine_holds_cpus_for_its_frontend() -> None:
    # 2 H200s and 32 cores (the lent machine): 8 CPUs per engine, 16 left for preprocessing
    assert engine_placement({}, False, {"CPU": 32.0, "GPU": 2.0}) == {
        "bundles": [{"GPU": 1, "CPU": 8}]
    }
    # never more than the frontend uses, never less than one
    big = engine_placement({}, False, {"CPU": 256.0, "GPU": 2.0})
    assert big == {"bundles": [{"GPU": 1, "CPU": FRONTEND_THREADS_MAX}]}
    assert engine_placement({}, False, {"CPU": 4.0, "GPU": 8.0}) == {
        "bundles": [{"GPU": 1, "CPU": 1}]
    }


def test_several_gpus_per_engine_keep_ray_data_s_placement() -> None:
    assert engine_placement({"tensor_parallel_size": 2}, False, {"CPU": 32.0, "GPU": 2.0}) is None
    assert engine_placement({}, False, {"CPU": 32.0}) is None  # no GPU in the cluster (yet)


def test_the_workers_get_the_plans_environment_and_the_users_wins() -> None:
    environ = {"VLLM_USE_V2_MODEL_RUNNER": "1", "HF_HOME": "/h", "HOME": "/root"}
    chosen = (("VLLM_USE_V2_MODEL_RUNNER", "0"), ("VLLM_OTHER", "x"))
    assert workers_environment(chosen, environ) == {
        "VLLM_USE_V2_MODEL_RUNNER": "1",
        "VLLM_OTHER": "x",
        "HF_HOME": "/h",
    }


def test_a_line_s_own_problem_is_its_error_on_the_workers_as_on_one_host(
    fake_vllm: Any, tmp_path: Path
) -> None:
    """A line the reader could not make a prompt of (here its --question-template field is
    empty) carries its reason to the worker, which answers with it: not a different one of
    its own (the line had no media left, so the workers once said the model needs an image)."""
    from mmrun.backends import ray as ray_backend
    from mmrun.inputs import InputOptions
    from mmrun.planning import RunOptions, plan
    from mmrun.plugins import get_registry
    from mmrun.support import vllm_info

    photo = tmp_path / "p.png"
    photo.write_bytes(PNG)
    manifest = tmp_path / "m.jsonl"
    lines = [{"id": "a", "meta": {"topic": "cats"}}, {"id": "b", "meta": {"topic": ""}}]
    manifest.write_text("".join(json.dumps({"image": str(photo), **r}) + "\n" for r in lines))
    opts = RunOptions(
        modality="image",
        key="mistral3",
        input=str(manifest),
        input_options=InputOptions(question_template="About {topic}?"),
    )
    the_plan = plan(opts, get_registry(), vllm_info())
    try:
        a, b = (
            ray_backend.preprocess(the_plan.recipe(), row)
            for row in ray_backend._rows(the_plan.items)
        )
    finally:
        ray_backend._STATE.clear()
    assert a["mmrun_error"] == "" and "About cats?" in a["prompt"]
    assert json.loads(b["mmrun_error"]) == [
        "request",
        "--question-template gives no text here: each of its lines has an empty field",
    ]
