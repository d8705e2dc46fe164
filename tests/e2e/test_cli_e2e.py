"""Every tiny checkpoint through the real mmrun CLI and the real vLLM engine, offline.

Each case runs ``mmrun <modality> -m KEY --model <tiny checkpoint> --json`` with the
default media served by a local HTTP server, the most media the model takes per prompt (2
where allowed) and 3 prompts, by ``generate`` and, where the model has a chat path, by
``chat``. It checks what proves the prompt was right: one output per prompt, more prompt
tokens than the text alone (vLLM's processor expanded every placeholder; a wrong placeholder
count makes vLLM refuse the prompt, so the run fails), and generated tokens.

Each row runs in the CLI worker (tests/e2e/cli_worker.py): mmrun's own Typer app in a process
that keeps vLLM imported, with the engine core in that process, and ``chat`` on the engine
that ``generate`` started (one engine start per row instead of two, each without vLLM's three
imports). ``test_the_mmrun_command`` runs the generate checks on qwen2_5_vl and whisper
through ``python -m mmrun`` processes, as a user does (engine core and worker as processes of
their own), then again with one prompt per batch and the engine core in mmrun's process, with
one seed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mmrun.plugins import builtin_registry
from mmrun.tiny import TinyCheckpoint
from tests.e2e.cli_worker import CliRun, CliWorker
from tests.tiny import builders, proofs

pytestmark = pytest.mark.e2e

REGISTRY = builtin_registry()
# The video rows have their own test (test_video_e2e.py): the video modality has no default
# media.
# A row too slow for CI (tests.tiny.Proof.in_ci) runs only in `make test-outside-ci`.
PROOFS = proofs()
CASES = [
    pytest.param(
        modality,
        key,
        id=f"{modality}-{key}",
        marks=() if PROOFS[(modality, key)].in_ci else pytest.mark.outside_ci,
    )
    for modality, key in sorted(k for k in builders() if k[0] in ("image", "audio"))
]
NUM_PROMPTS = 3
# Encoder-decoder models: vLLM reports the decoder prompt; the audio goes to the encoder.
ENCODER_DECODER = {"WhisperForConditionalGeneration", "CohereAsrForConditionalGeneration"}
# The rows also run as `python -m mmrun` processes (the selftest's two models).
COMMAND_CASES = [("image", "qwen2_5_vl"), ("audio", "whisper")]


def items_per_prompt(modality: str, key: str) -> int:
    spec = REGISTRY.get(modality, key)
    return 2 if spec.max_items is None else min(2, spec.max_items)


def cli_args(modality: str, key: str, checkpoint: TinyCheckpoint, *extra: str) -> list[str]:
    """``mmrun``'s arguments for one run of a tiny checkpoint (what follows ``mmrun``)."""
    engine_args = [f"--engine-arg={k}={json.dumps(v)}" for k, v in checkpoint.engine_args.items()]
    engine_args += [
        f"--sampling-arg={k}={json.dumps(v)}" for k, v in checkpoint.sampling_args.items()
    ]
    # Eager mode: torch.compile adds about 40 s to each engine start on these CPUs. One
    # worker: vLLM's examples shard the big models (-tp 2 to 8); a tiny one runs on one CPU node.
    return [
        modality,
        "-m",
        key,
        "--model",
        str(checkpoint.path),
        "-n",
        str(items_per_prompt(modality, key)),
        "--max-tokens",
        "6",
        "--json",
        "--trust-remote-code",
        "--engine-arg",
        "enforce_eager=true",
        "-tp",
        "1",
        *engine_args,
        *extra,
    ]


def run_command(
    modality: str,
    key: str,
    checkpoint: TinyCheckpoint,
    server_url: str,
    *extra: str,
    **env_vars: str,
) -> dict[str, Any]:
    """``python -m mmrun ...`` in a process of its own; its --json document."""
    args = [sys.executable, "-m", "mmrun", *cli_args(modality, key, checkpoint, *extra)]
    env = {**os.environ, "MMRUN_ASSETS_BASE_URL": server_url, "HF_HUB_OFFLINE": "1", **env_vars}
    proc = subprocess.run(args, capture_output=True, text=True, env=env, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)  # type: ignore[no-any-return]


def run_in_worker(
    worker: CliWorker,
    modality: str,
    key: str,
    checkpoint: TinyCheckpoint,
    server_url: str,
    *extra: str,
) -> dict[str, Any]:
    """The same run in the CLI worker; its --json document."""
    env = {name: value for name, value in os.environ.items() if name.startswith(("MMRUN_", "HF_"))}
    env.update(MMRUN_ASSETS_BASE_URL=server_url, HF_HUB_OFFLINE="1")
    run: CliRun = worker.run(cli_args(modality, key, checkpoint, *extra), env)
    assert run.returncode == 0, run.stderr[-3000:]
    # Finite logits: tokens generated from NaN logits (id 0 on the CPU sampler) prove nothing.
    assert run.logits_batches, "no logits seen (the hook on vLLM's LogitsProcessor)"
    assert run.nan_logits_batches == 0, (run.nan_logits_batches, run.logits_batches)
    return json.loads(run.stdout)  # type: ignore[no-any-return]


def text_only_tokens(checkpoint: TinyCheckpoint, doc: dict[str, Any]) -> int:
    if doc["prompt"] is None:  # pre-tokenized (voxtral): the ids already hold the audio tokens
        return len(doc["prompt_token_ids"]) - 1
    from transformers import AutoTokenizer

    # As the runs do (--trust-remote-code): a checkpoint may name its tokenizer class in auto_map.
    tokenizer = AutoTokenizer.from_pretrained(checkpoint.path, trust_remote_code=True)
    return len(tokenizer(doc["prompt"], add_special_tokens=False).input_ids)


def has_chat_template(checkpoint: TinyCheckpoint) -> bool:
    path = Path(checkpoint.path)
    if (path / "chat_template.jinja").exists() or (path / "chat_template.json").exists():
        return True
    config = path / "tokenizer_config.json"
    return config.exists() and bool(json.loads(config.read_text()).get("chat_template"))


def check_outputs(doc: dict[str, Any], text_tokens: int, encoder_decoder: bool) -> None:
    outputs = doc["outputs"]
    assert len(outputs) == NUM_PROMPTS
    for output in outputs:
        if encoder_decoder:
            assert output["prompt_tokens"] == text_tokens, output
        else:
            assert output["prompt_tokens"] > text_tokens, (output, text_tokens)
        assert output["completion_tokens"] > 0


def check_generate(modality: str, key: str, checkpoint: TinyCheckpoint, doc: dict[str, Any]) -> int:
    """The checks of a generate run; the text-only token count of its prompt."""
    assert doc["method"] == "generate"
    count = items_per_prompt(modality, key)
    assert all(len(p) == count for p in doc["media_per_prompt"])
    text_tokens = text_only_tokens(checkpoint, doc)
    encoder_decoder = REGISTRY.get(modality, key).architecture in ENCODER_DECODER
    check_outputs(doc, text_tokens, encoder_decoder)
    return text_tokens


def chats(modality: str, key: str, checkpoint: TinyCheckpoint) -> bool:
    return "chat" in REGISTRY.get(modality, key).methods and has_chat_template(checkpoint)


@pytest.fixture
def worker(cli_worker: CliWorker) -> Iterator[CliWorker]:
    """The session's CLI worker; the engine a test started is stopped after it."""
    yield cli_worker
    cli_worker.release()


@pytest.mark.parametrize(("modality", "key"), CASES)
def test_generate_and_chat(
    modality: str, key: str, tiny_checkpoint: Any, media_server: Any, worker: CliWorker
) -> None:
    checkpoint = tiny_checkpoint(modality, key)
    prompts = ("--num-prompts", str(NUM_PROMPTS))
    doc = run_in_worker(worker, modality, key, checkpoint, media_server.url, *prompts)
    text_tokens = check_generate(modality, key, checkpoint, doc)
    if chats(modality, key, checkpoint):
        chat = run_in_worker(
            worker, modality, key, checkpoint, media_server.url, "--method", "chat", *prompts
        )
        assert chat["method"] == "chat"
        encoder_decoder = REGISTRY.get(modality, key).architecture in ENCODER_DECODER
        check_outputs(chat, text_tokens, encoder_decoder)


@pytest.mark.engine_processes
@pytest.mark.parametrize(
    ("modality", "key"), COMMAND_CASES, ids=[f"{m}-{k}" for m, k in COMMAND_CASES]
)
def test_the_mmrun_command(
    modality: str, key: str, tiny_checkpoint: Any, media_server: Any
) -> None:
    """The row's generate checks through two ``python -m mmrun`` processes, as a user runs it
    (vLLM's engine core and worker in processes of their own), with one seed: the same sampled
    texts, though the second run puts every prompt in a batch of its own (each prompt samples
    with its own seed; with vLLM's engine seed alone, a text depends on the prompts beside it
    and on when each arrived: CI saw this test fail that way). The second run has the engine
    core in mmrun's process (``VLLM_ENABLE_V1_MULTIPROCESSING=0``, see tests/e2e/conftest.py):
    the same texts whatever the process layout, at one import of vLLM instead of three."""
    checkpoint = tiny_checkpoint(modality, key)
    seeded = ("--num-prompts", str(NUM_PROMPTS), "--seed", "1234", "--temperature", "1.0")
    alone = ("--engine-arg", "max_num_seqs=1")
    in_process = {"VLLM_ENABLE_V1_MULTIPROCESSING": "0"}
    runs = [
        run_command(modality, key, checkpoint, media_server.url, *seeded, *extra, **env)
        for extra, env in (((), {}), (alone, in_process))
    ]
    for doc in runs:
        check_generate(modality, key, checkpoint, doc)
    texts = [[o["text"] for o in run["outputs"]] for run in runs]
    assert texts[0] == texts[1]


# What a run prints on stderr without -v (measured before: torch's "No CUDA runtime is found"
# and Triton's notice from each of the three processes, two FutureWarnings, c10's NUMA
# warning, vLLM's "Loading safetensors checkpoint shards" bars: 14 lines besides mmrun's).
NOISE = ("Loading safetensors", "Warning", "warnings.warn", "cpp_extension", "NUMA", "it/s]")
# vLLM logs this while it is imported in each engine process it spawns on the CPU backend,
# before it has set up its log, so no log level reaches it; mmrun has no hold on those
# processes before that moment (they are spawned fresh by vLLM).
VLLM_IMPORT_NOTICE = "Triton is installed, but doesn't include CPU backend. Disabling Triton."


@pytest.mark.engine_processes
def test_a_run_without_verbose_shows_mmruns_lines_and_the_results(
    tiny_checkpoint: Any, media_server: Any
) -> None:
    checkpoint = tiny_checkpoint("image", "qwen2_5_vl")
    args = [
        sys.executable,
        "-m",
        "mmrun",
        "image",
        "-m",
        "qwen2_5_vl",
        "--model",
        str(checkpoint.path),
        "-n",
        "2",
        "--max-tokens",
        "4",
        "--engine-arg",
        "enforce_eager=true",
        "-tp",
        "1",
        *(f"--engine-arg={k}={json.dumps(v)}" for k, v in checkpoint.engine_args.items()),
    ]
    env = {**os.environ, "MMRUN_ASSETS_BASE_URL": media_server.url, "HF_HUB_OFFLINE": "1"}
    env.pop("PYTHONWARNINGS", None)
    proc = subprocess.run(args, capture_output=True, text=True, env=env, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "prompt 1/1" in proc.stdout
    others = [
        line
        for line in proc.stderr.splitlines()
        if not line.startswith("mmrun: ") and line != VLLM_IMPORT_NOTICE
    ]
    assert others == [], proc.stderr
    assert not any(noise in proc.stderr for noise in NOISE), proc.stderr
