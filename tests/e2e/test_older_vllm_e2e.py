"""The rows that only an older vLLM runs, through mmrun's CLI in that vLLM's environment.

vLLM removed some architectures of its examples (hyperclovax_seed_vision after 0.28; tarsier,
musicflamingo, aya_vision after 0.24; tarsier2, qwen_vl_chat after 0.23). Their tiny
checkpoints' builders are in tests/tiny (``Proof.env`` names the line) and ``make vllm-envs``
builds the environments (not part of `make test` nor CI: ``make test-outside-ci`` builds them
and runs this file) (.venv-vllm-<line>, tools/vllm_env.py); each case builds its checkpoint
with that environment's Python (``python -m tests.tiny build``: its transformers writes the
files) and runs ``mmrun <modality> -m KEY --model <checkpoint> --json`` there, as
tests/e2e/test_cli_e2e.py does on the project's vLLM: the most media the model takes per prompt
(2 where allowed), 3 prompts, ``generate``. It checks one output per prompt, more prompt tokens
than the text alone (vLLM's processor expanded every placeholder), generated tokens, and that
the vLLM that answered is the line's. One row per line also runs in batch mode over a folder
of 3 images: vLLM 0.23, 0.24 and 0.28 take mmrun's requests one at a time (``LLM.enqueue``),
as 0.32 does. One row of a line whose frontend loads the model's processor once the engine is
ready (0.26 to 0.28) runs with vLLM's engine core a process, and shows mmrun having that
processor loaded while the engine core started.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from mmrun.plugins import builtin_registry
from tests.tiny import MAIN, ROOT, env_folder, env_vllm_version, proofs

pytestmark = [pytest.mark.e2e, pytest.mark.outside_ci]

REGISTRY = builtin_registry()
PROOFS = proofs()
CASES = sorted(row for row, proof in PROOFS.items() if proof.env != MAIN)
NUM_PROMPTS = 3
# One row per line in batch mode (a folder of images, one prompt each).
BATCH_CASES = [("image", "tarsier"), ("image", "tarsier2"), ("image", "hyperclovax_seed_vision")]


def python_of(env: str) -> Path:
    folder = env_folder(env)
    if not (folder / ".mmrun-installed").exists():
        pytest.fail(f"{folder.name} is not built: run `make vllm-envs` (or `make test-outside-ci`)")
    return folder / "bin" / "python"


def run(env: str, *args: str, variables: dict[str, str] | None = None) -> str:
    """``python ARGS`` in the environment of ``env``, from the repository root; its stdout."""
    # MMRUN_PLUGINS: the project environment's example plugin is visible to an overlay but
    # not importable from it (its editable install is a .pth file there).
    variables = {**os.environ, "HF_HUB_OFFLINE": "1", "MMRUN_PLUGINS": "", **(variables or {})}
    proc = subprocess.run(
        [str(python_of(env)), *args],
        capture_output=True,
        text=True,
        env=variables,
        cwd=ROOT,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def build(env: str, modality: str, key: str, dest: Path) -> dict[str, Any]:
    out = run(env, "-m", "tests.tiny", "build", modality, key, str(dest))
    return json.loads(out.strip().splitlines()[-1])  # type: ignore[no-any-return]


def mmrun_args(modality: str, key: str, checkpoint: dict[str, Any], *extra: str) -> list[str]:
    flags = [f"--engine-arg={k}={json.dumps(v)}" for k, v in checkpoint["engine_args"].items()]
    flags += [f"--sampling-arg={k}={json.dumps(v)}" for k, v in checkpoint["sampling_args"].items()]
    # Eager and one worker, as in test_cli_e2e.py.
    return [
        "-m",
        "mmrun",
        modality,
        "-m",
        key,
        "--model",
        checkpoint["path"],
        "--max-tokens",
        "6",
        "--trust-remote-code",
        "--engine-arg",
        "enforce_eager=true",
        "-tp",
        "1",
        *flags,
        *extra,
    ]


@pytest.mark.parametrize(("modality", "key"), CASES, ids=[f"{m}-{k}" for m, k in CASES])
def test_generate_on_its_vllm(
    modality: str, key: str, media_server: Any, tmp_path_factory: pytest.TempPathFactory
) -> None:
    env = PROOFS[(modality, key)].env
    spec = REGISTRY.get(modality, key)
    count = 2 if spec.max_items is None else spec.max_items
    checkpoint = build(env, modality, key, tmp_path_factory.mktemp(f"tiny-{env}-{key}"))
    args = mmrun_args(modality, key, checkpoint, "-n", str(count), "--json")
    out = run(
        env,
        *args,
        "--num-prompts",
        str(NUM_PROMPTS),
        variables={"MMRUN_ASSETS_BASE_URL": media_server.url},
    )
    doc = json.loads(out)
    assert doc["versions"]["vllm"].startswith(env_vllm_version(env)), doc["versions"]
    assert doc["method"] == "generate"
    assert all(len(p) == count for p in doc["media_per_prompt"])
    text_tokens = int(run(env, "-m", "tests.tiny", "count", checkpoint["path"], doc["prompt"]))
    assert len(doc["outputs"]) == NUM_PROMPTS
    for output in doc["outputs"]:
        assert output["prompt_tokens"] > text_tokens, (output, text_tokens)
        assert output["completion_tokens"] > 0


# vLLM 0.26 to 0.28 load the model's processor in the frontend once the engine is ready (0.32
# while its engine core starts): one row of such a line, with vLLM's engine core a process.
WARM_CASES = [
    (modality, key)
    for modality, key in CASES
    if (0, 26)
    <= tuple(int(p) for p in env_vllm_version(PROOFS[(modality, key)].env).split(".")[:2])
    < (0, 29)
][:1]


@pytest.mark.engine_processes
@pytest.mark.parametrize(("modality", "key"), WARM_CASES, ids=[k for _, k in WARM_CASES])
def test_the_processor_is_loaded_while_the_engine_core_starts(
    modality: str, key: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """mmrun finds the real vLLM's starting engine and has its frontend load the model's
    processor meanwhile (``timings.frontend_warm_s``), not on the first request."""
    from PIL import Image

    env = PROOFS[(modality, key)].env
    tmp = tmp_path_factory.mktemp(f"warm-{env}-{key}")
    checkpoint = build(env, modality, key, tmp / "model")
    Image.new("RGB", (64, 48), (30, 120, 200)).save(tmp / "photo.png")
    args = mmrun_args(modality, key, checkpoint, "-i", str(tmp / "photo.png"), "--json")
    doc = json.loads(run(env, *args))
    assert doc["versions"]["vllm"].startswith(env_vllm_version(env)), doc["versions"]
    assert doc["timings"].get("frontend_warm_s", -1) >= 0, doc["timings"]
    assert len(doc["outputs"]) == 1 and doc["outputs"][0]["completion_tokens"] > 0


@pytest.mark.parametrize(("modality", "key"), BATCH_CASES, ids=[k for _, k in BATCH_CASES])
def test_a_folder_of_images_in_batch_mode(
    modality: str, key: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    from PIL import Image

    env = PROOFS[(modality, key)].env
    tmp = tmp_path_factory.mktemp(f"batch-{env}-{key}")
    checkpoint = build(env, modality, key, tmp / "model")
    folder = tmp / "photos"
    folder.mkdir()
    for i, size in enumerate([(320, 240), (56, 56), (240, 320)]):
        Image.new("RGB", size, (40 * i, 90, 200 - 50 * i)).save(folder / f"photo{i}.png")
    out = tmp / "out.jsonl"
    run(env, *mmrun_args(modality, key, checkpoint, "-i", str(folder), "-o", str(out)))
    lines = [json.loads(text) for text in out.read_text().splitlines()]
    assert sorted(line["id"] for line in lines) == sorted(str(p) for p in folder.iterdir())
    for line in lines:
        assert line.get("error") is None, line
        assert line["prompt_tokens"] > 0 and line["completion_tokens"] > 0, line
