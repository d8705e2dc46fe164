"""Every seed model, under its seed key, builds the request the seed script builds.

The oracle runs the seed scripts' own functions (see seed_oracle.py); mmrun's loader runs
with the same stand-in template renderer. Engine arguments, prompt, stop token ids, chat
template and LoRA adapter must be equal, for several media counts. Deliberate differences
(seed bugs that mmrun fixes) are listed in DEVIATIONS and tested on their own.
"""

from __future__ import annotations

import os

import pytest

from mmrun.plan import compose_engine_args
from mmrun.plugins import builtin_registry
from mmrun.request import LoaderContext, Prompt
from tests.helpers import seed_oracle as oracle
from tests.helpers.upstream_oracle import CHANGED_SINCE_SEED

# The kinds of media vLLM receives from the built-in modalities.
ENGINE_KEYS = builtin_registry().engine_keys()

REGISTRY = builtin_registry()
# What the seed scripts cover (the video loaders follow vLLM's video example instead).
SEED_MODALITIES = ("image", "audio")

# Seed rows whose request mmrun builds differently on purpose, each with its own test.
DEVIATIONS = {
    ("audio", "gemma3n"): "seed drops the end of its prompt and emits one audio token",
    ("audio", "voxtral"): "seed tokenizes with mistral_common from the Hub; tested offline",
    ("image", "rvl"): "seed omits trust_remote_code from the engine args; the engine needs it",
    ("image", "aria"): "seed sets tokenizer_mode='slow', which current vLLM rejects",
    ("audio", "kimi_audio"): "one prompt at a time (max_num_seqs=1): vLLM 0.32 fails on a "
    "batch of clips of different lengths (tests/e2e/test_first_run.py)",
    # Rows vLLM's current examples changed: test_upstream_parity.py compares them.
    **{row: f"changed upstream since the seed: {why}" for row, why in CHANGED_SINCE_SEED.items()},
}

CASES = [("image", key) for key in oracle.seed_keys(oracle.IMAGE_SEED)] + [
    ("audio", key) for key in oracle.seed_keys(oracle.AUDIO_SEED)
]


def _counts(modality: str, key: str) -> list[int]:
    spec = REGISTRY.get(modality, key)
    wanted = [1, 3] if modality == "image" else [0, 1, 2]
    return [
        n for n in wanted if n >= spec.min_items and (spec.max_items is None or n <= spec.max_items)
    ]


def test_every_seed_key_is_registered() -> None:
    assert len(CASES) == 52
    for modality, key in CASES:
        REGISTRY.get(modality, key)
    # The others are the keys vLLM's current examples added (test_upstream_parity.py).
    assert set(CASES) <= {(s.modality, s.key) for m in SEED_MODALITIES for s in REGISTRY.specs(m)}


@pytest.mark.parametrize(("modality", "key"), [c for c in CASES if c not in DEVIATIONS])
def test_request_matches_seed(modality: str, key: str) -> None:
    spec = REGISTRY.get(modality, key)
    mod = REGISTRY.modalities[modality]
    for count in _counts(modality, key):
        question = mod.question(count)
        if modality == "image":
            seed = oracle.image_request(key, question, count)
        else:
            seed = oracle.audio_request(key, question, count)
        model = seed.engine_args["model"]
        ctx = LoaderContext(
            question=question, num_items=count, model=model, templates=oracle.RecordingRenderer()
        )
        prompt = spec(ctx)
        engine_args = compose_engine_args(
            spec, model=model, num_items=count, seed=None, engine_keys=ENGINE_KEYS
        )

        expected_args = dict(seed.engine_args)
        expected_args["limit_mm_per_prompt"] = {m: 0 for m in ENGINE_KEYS} | expected_args.get(
            "limit_mm_per_prompt", {}
        )
        assert engine_args == expected_args, (key, count)
        assert prompt.text == seed.prompt, (key, count)
        assert list(prompt.token_ids or []) == list(seed.prompt_token_ids or [])
        assert list(prompt.stop_token_ids) == list(seed.stop_token_ids or []), (key, count)
        assert spec.chat_template == seed.chat_template, (key, count)
        if seed.lora is None:
            assert spec.lora is None
        else:
            assert spec.lora is not None
            sub = spec.lora.subfolder
            path = model if sub is None else os.path.join(model, sub)
            assert (spec.lora.name, spec.lora.int_id, path) == seed.lora
        if spec.repo_id != "funaudiochat":
            assert spec.repo_id == model, key


def _image_request_and_seed(
    key: str,
) -> tuple[dict[str, object], dict[str, object], Prompt, oracle.SeedRequest]:
    spec = REGISTRY.get("image", key)
    question = REGISTRY.modalities["image"].question(2)
    seed = oracle.image_request(key, question, 2)
    model = seed.engine_args["model"]
    ctx = LoaderContext(
        question=question, num_items=2, model=model, templates=oracle.RecordingRenderer()
    )
    prompt = spec(ctx)
    engine_args = compose_engine_args(
        spec, model=model, num_items=2, seed=None, engine_keys=ENGINE_KEYS
    )
    expected = dict(seed.engine_args, limit_mm_per_prompt={"image": 2, "video": 0, "audio": 0})
    return engine_args, expected, prompt, seed


def test_rvl_differs_from_seed_only_by_trust_remote_code() -> None:
    engine_args, expected, prompt, seed = _image_request_and_seed("rvl")
    assert engine_args == dict(expected, trust_remote_code=True)
    assert prompt.text == seed.prompt


def test_aria_differs_from_seed_only_by_dropping_slow_tokenizer_mode() -> None:
    engine_args, expected, prompt, seed = _image_request_and_seed("aria")
    assert expected.pop("tokenizer_mode") == "slow"
    assert engine_args == expected
    assert prompt.text == seed.prompt
    assert list(prompt.stop_token_ids) == seed.stop_token_ids
