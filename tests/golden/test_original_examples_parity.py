"""Every model of vLLM's original examples (its multi-image and audio examples as mmrun first
took them), under its key there, builds the request the example builds.

The oracle runs the examples' own functions (see tests/helpers/original_examples.py); mmrun's
loader runs with the same stand-in template renderer. Engine arguments, prompt, stop token ids,
chat template and LoRA adapter must be equal, for several media counts. Deliberate differences
(bugs of the examples that mmrun fixes) are listed in DEVIATIONS and tested on their own.
"""

from __future__ import annotations

import os

import pytest

from mmrun.planning import compose_engine_args
from mmrun.plugins import builtin_registry
from mmrun.request import LoaderContext, Prompt
from tests.helpers import original_examples as oracle
from tests.helpers.upstream_oracle import CHANGED_SINCE_ORIGINAL

# The kinds of media vLLM receives from the built-in modalities.
ENGINE_KEYS = builtin_registry().engine_keys()

REGISTRY = builtin_registry()
# What the original examples cover (the video loaders follow vLLM's video example instead).
EXAMPLE_MODALITIES = ("image", "audio")

# Rows whose request mmrun builds differently from the original example on purpose, each with
# its own test.
DEVIATIONS = {
    ("audio", "gemma3n"): "the example drops the end of its prompt and emits one audio token",
    ("audio", "voxtral"): "the example tokenizes with mistral_common from the Hub; tested offline",
    ("image", "rvl"): "the example omits trust_remote_code from the engine args; the engine "
    "needs it",
    ("image", "aria"): "the example sets tokenizer_mode='slow', which current vLLM rejects",
    ("audio", "kimi_audio"): "one prompt at a time (max_num_seqs=1): vLLM 0.32 fails on a "
    "batch of clips of different lengths (tests/e2e/test_first_run_e2e.py)",
    # Rows vLLM's current examples changed: test_upstream_parity.py compares them.
    **{
        row: f"changed upstream since the original example: {why}"
        for row, why in CHANGED_SINCE_ORIGINAL.items()
    },
}

CASES = [("image", key) for key in oracle.example_keys(oracle.IMAGE_EXAMPLE)] + [
    ("audio", key) for key in oracle.example_keys(oracle.AUDIO_EXAMPLE)
]


def _counts(modality: str, key: str) -> list[int]:
    spec = REGISTRY.get(modality, key)
    wanted = [1, 3] if modality == "image" else [0, 1, 2]
    return [
        n for n in wanted if n >= spec.min_items and (spec.max_items is None or n <= spec.max_items)
    ]


def test_every_key_of_the_original_examples_is_registered() -> None:
    assert len(CASES) == 52
    for modality, key in CASES:
        REGISTRY.get(modality, key)
    # The others are the keys vLLM's current examples added (test_upstream_parity.py).
    assert set(CASES) <= {
        (s.modality, s.key) for m in EXAMPLE_MODALITIES for s in REGISTRY.specs(m)
    }


@pytest.mark.parametrize(("modality", "key"), [c for c in CASES if c not in DEVIATIONS])
def test_request_matches_the_original_example(modality: str, key: str) -> None:
    spec = REGISTRY.get(modality, key)
    mod = REGISTRY.modalities[modality]
    for count in _counts(modality, key):
        question = mod.question(count)
        if modality == "image":
            example = oracle.image_request(key, question, count)
        else:
            example = oracle.audio_request(key, question, count)
        model = example.engine_args["model"]
        ctx = LoaderContext(
            question=question, num_items=count, model=model, templates=oracle.RecordingRenderer()
        )
        prompt = spec(ctx)
        engine_args = compose_engine_args(
            spec, model=model, num_items=count, seed=None, engine_keys=ENGINE_KEYS
        )

        expected_args = dict(example.engine_args)
        expected_args["limit_mm_per_prompt"] = {m: 0 for m in ENGINE_KEYS} | expected_args.get(
            "limit_mm_per_prompt", {}
        )
        assert engine_args == expected_args, (key, count)
        assert prompt.text == example.prompt, (key, count)
        assert list(prompt.token_ids or []) == list(example.prompt_token_ids or [])
        assert list(prompt.stop_token_ids) == list(example.stop_token_ids or []), (key, count)
        assert spec.chat_template == example.chat_template, (key, count)
        if example.lora is None:
            assert spec.lora is None
        else:
            assert spec.lora is not None
            sub = spec.lora.subfolder
            path = model if sub is None else os.path.join(model, sub)
            assert (spec.lora.name, spec.lora.int_id, path) == example.lora
        if spec.repo_id != "funaudiochat":
            assert spec.repo_id == model, key


def _image_request_and_example(
    key: str,
) -> tuple[dict[str, object], dict[str, object], Prompt, oracle.ExampleRequest]:
    spec = REGISTRY.get("image", key)
    question = REGISTRY.modalities["image"].question(2)
    example = oracle.image_request(key, question, 2)
    model = example.engine_args["model"]
    ctx = LoaderContext(
        question=question, num_items=2, model=model, templates=oracle.RecordingRenderer()
    )
    prompt = spec(ctx)
    engine_args = compose_engine_args(
        spec, model=model, num_items=2, seed=None, engine_keys=ENGINE_KEYS
    )
    expected = dict(example.engine_args, limit_mm_per_prompt={"image": 2, "video": 0, "audio": 0})
    return engine_args, expected, prompt, example


def test_rvl_differs_from_its_example_only_by_trust_remote_code() -> None:
    engine_args, expected, prompt, example = _image_request_and_example("rvl")
    assert engine_args == dict(expected, trust_remote_code=True)
    assert prompt.text == example.prompt


def test_aria_differs_from_its_example_only_by_dropping_slow_tokenizer_mode() -> None:
    engine_args, expected, prompt, example = _image_request_and_example("aria")
    assert expected.pop("tokenizer_mode") == "slow"
    assert engine_args == expected
    assert prompt.text == example.prompt
    assert list(prompt.stop_token_ids) == example.stop_token_ids
