"""Every tiny checkpoint through the real mmrun CLI and the real vLLM engine, offline.

Each case runs ``mmrun <modality> -m KEY --model <tiny checkpoint> --json`` as a subprocess,
with the default media served by a local HTTP server, and checks what proves the prompt was
right: one output per prompt, the prompt token count larger than the text alone (vLLM's
processor expanded each placeholder), and generated tokens.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest

from mmrun.plugins import builtin_registry
from mmrun.tiny import TinyCheckpoint, builders

pytestmark = pytest.mark.e2e

REGISTRY = builtin_registry()
CASES = sorted(builders())
NUM_PROMPTS = 3


@pytest.fixture(scope="session")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """Build each tiny checkpoint once per test session, on first use."""
    built: dict[tuple[str, str], TinyCheckpoint] = {}
    root = tmp_path_factory.mktemp("tiny")

    def get(modality: str, key: str) -> TinyCheckpoint:
        if (modality, key) not in built:
            built[(modality, key)] = builders()[(modality, key)](root / f"{modality}-{key}")
        return built[(modality, key)]

    return get


def items_per_prompt(modality: str, key: str) -> int:
    spec = REGISTRY.get(modality, key)
    return 2 if spec.max_items is None else spec.max_items


def run_cli(modality: str, key: str, checkpoint: TinyCheckpoint, server_url: str,
            *extra: str) -> dict[str, Any]:
    engine_args = [f"--engine-arg={k}={json.dumps(v)}" for k, v in checkpoint.engine_args.items()]
    args = [sys.executable, "-m", "mmrun", modality, "-m", key, "--model", str(checkpoint.path),
            "-n", str(items_per_prompt(modality, key)), "--max-tokens", "6", "--json",
            "--trust-remote-code", *engine_args, *extra]
    env = {**os.environ, "MMRUN_ASSETS_BASE_URL": server_url, "VLLM_CPU_KVCACHE_SPACE": "1",
           "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run(args, capture_output=True, text=True, env=env, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)  # type: ignore[no-any-return]


def text_only_tokens(checkpoint: TinyCheckpoint, prompt: str) -> int:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(checkpoint.path)
    return len(tokenizer(prompt, add_special_tokens=False).input_ids)


def check_outputs(doc: dict[str, Any], text_tokens: int) -> None:
    outputs = doc["outputs"]
    assert len(outputs) == NUM_PROMPTS
    for output in outputs:
        assert output["prompt_tokens"] > text_tokens, (output, text_tokens)
        assert output["completion_tokens"] > 0


@pytest.mark.parametrize(("modality", "key"), CASES, ids=[f"{m}-{k}" for m, k in CASES])
def test_generate_and_chat(modality: str, key: str, tiny: Any, media_server: Any) -> None:
    checkpoint = tiny(modality, key)
    doc = run_cli(modality, key, checkpoint, media_server.url, "--num-prompts", str(NUM_PROMPTS))
    assert doc["method"] == "generate"
    count = items_per_prompt(modality, key)
    assert all(len(p) == count for p in doc["media_per_prompt"])
    prompt = doc["prompt"]
    text_tokens = text_only_tokens(checkpoint, prompt) if prompt is not None else 0
    if prompt is None:  # a pre-tokenized prompt: count its ids instead
        text_tokens = len(doc["prompt_token_ids"])
    check_outputs(doc, text_tokens)
    if "chat" in REGISTRY.get(modality, key).methods:
        chat = run_cli(modality, key, checkpoint, media_server.url, "--method", "chat",
                       "--num-prompts", str(NUM_PROMPTS))
        check_outputs(chat, text_tokens)


@pytest.mark.parametrize(("modality", "key"), [("image", "qwen2_5_vl"), ("audio", "whisper")])
def test_same_seed_same_text(modality: str, key: str, tiny: Any, media_server: Any) -> None:
    if (modality, key) not in builders():
        pytest.fail(f"no tiny builder for {key}")
    checkpoint = tiny(modality, key)
    runs = [run_cli(modality, key, checkpoint, media_server.url, "--seed", "1234",
                    "--temperature", "1.0", "--max-tokens", "12") for _ in range(2)]
    texts = [[o["text"] for o in run["outputs"]] for run in runs]
    assert texts[0] == texts[1]
