"""A golden file per loader: the exact request it builds for a fixed question and media count.

test_original_examples_parity.py proves each request equals the one vLLM's original example
builds; these files pin the requests themselves, so any change to one shows up as a reviewable
diff. Regenerate after an intended change with ``pytest tests/golden --update-golden`` and read
the diff.
voxtral's request depends on the audio itself and is pinned in test_audio_deviations.py.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from mmrun import ImageResize
from mmrun.planning import compose_engine_args
from mmrun.plugins import builtin_registry
from mmrun.request import LoaderContext
from tests.helpers import original_examples as oracle

REGISTRY = builtin_registry()
GOLDEN = Path(__file__).parent / "requests"
MEDIA_DEPENDENT = {("audio", "voxtral")}
CASES = [
    (s.modality, s.key) for s in REGISTRY.specs() if (s.modality, s.key) not in MEDIA_DEPENDENT
]


def build(modality: str, key: str) -> dict[str, Any]:
    spec = REGISTRY.get(modality, key)
    count = 2 if spec.max_items is None else spec.max_items
    question = REGISTRY.modalities[modality].question(count)
    renderer = oracle.RecordingRenderer()
    ctx = LoaderContext(question=question, num_items=count, model=spec.repo_id, templates=renderer)
    prompt = spec(ctx)
    return {
        "question": question,
        "num_items": count,
        "engine_args": compose_engine_args(
            spec,
            model=spec.repo_id,
            num_items=count,
            seed=None,
            engine_keys=builtin_registry().engine_keys(),
        ),
        "prompt": prompt.text,
        "prompt_token_ids": prompt.token_ids,
        "stop_tokens_looked_up": renderer.lookups,
        "stop_token_ids": list(prompt.stop_token_ids),
        "chat_template": spec.chat_template,
        "lora": dataclasses.asdict(spec.lora) if spec.lora else None,
        "image_resize": dataclasses.asdict(spec.media_options)
        if isinstance(spec.media_options, ImageResize)
        else None,
        # The model's own sampling defaults, where it has any (deepseek_ocr).
        **({"sampling": dict(spec.sampling)} if spec.sampling else {}),
        # The request of a prompt that also carries one item of each companion (a clip with
        # an image: ``mmrun video --image``).
        **({"with_companions": with_companions(modality, spec, count)} if spec.companions else {}),
        # The vLLM versions that have the row, where it says; and its request from each version
        # on which it changes (LoaderSpec.changes).
        **({"vllm_since": spec.since} if spec.since else {}),
        **({"vllm_until": spec.until} if spec.until else {}),
        **({"from_vllm": from_vllm(spec, count)} if spec.changes else {}),
    }


def from_vllm(spec: Any, count: int) -> dict[str, Any]:
    found = {}
    for change in spec.changes:
        changed = spec.for_vllm(change.version)
        engine_args = compose_engine_args(
            changed,
            model=changed.repo_id,
            num_items=count,
            seed=None,
            engine_keys=builtin_registry().engine_keys(),
        )
        found[change.version] = {"engine_args": engine_args, "sampling": dict(changed.sampling)}
    return found


def with_companions(modality: str, spec: Any, count: int) -> dict[str, Any]:
    companions = {name: 1 for name in spec.companions}
    question = REGISTRY.modalities[modality].question(count, tuple(companions))
    renderer = oracle.RecordingRenderer()
    ctx = LoaderContext(
        question=question,
        num_items=count,
        model=spec.repo_id,
        templates=renderer,
        companions=companions,
    )
    engine_args = compose_engine_args(
        spec,
        model=spec.repo_id,
        num_items=count,
        seed=None,
        engine_keys=builtin_registry().engine_keys(),
        companions=companions,
    )
    return {
        "companions": companions,
        "question": question,
        "limit_mm_per_prompt": engine_args["limit_mm_per_prompt"],
        "prompt": spec(ctx).text,
    }


def test_golden_files_cover_every_loader() -> None:
    files = {(p.parent.name, p.stem) for p in GOLDEN.glob("*/*.json")}
    assert files == set(CASES)


@pytest.mark.parametrize(("modality", "key"), CASES, ids=[f"{m}-{k}" for m, k in CASES])
def test_request_matches_golden(modality: str, key: str, request: pytest.FixtureRequest) -> None:
    path = GOLDEN / modality / f"{key}.json"
    got = json.loads(json.dumps(build(modality, key)))
    if request.config.getoption("--update-golden"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(got, indent=2, ensure_ascii=False) + "\n")
    assert path.exists(), f"no golden file {path}; run pytest --update-golden and review it"
    assert got == json.loads(path.read_text())
