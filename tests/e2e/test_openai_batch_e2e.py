"""One OpenAI batch file through vLLM's own `vllm run-batch` and through mmrun, on the real
engine and the tiny Qwen2.5-VL checkpoint: each `custom_id` gets the same texts, the same token
counts and the same finish reasons. Its lines set their own settings (max_completion_tokens,
max_tokens, temperature, seed, top_p, top_k, stop, a JSON schema as response_format, `n: 2`
sampled with a seed, whose choices vLLM seeds seed + index, and `logprobs: true` with
`top_logprobs: 2`, whose tokens match and whose values match to 1e-3) and carry their images as
`data:` URLs and `file://` URLs (run-batch's `--allowed-local-media-path`).

The installed vLLM's run-batch (0.32) routes no `/v1/completions` lines (vLLM 0.34 does): those
are read and answered by mmrun in tests/unit/test_openai_batch.py. run-batch starts with the
engine arguments mmrun's dry run shows (its media limits, seed, structured-output backend),
one sequence at a time on both sides, so that no answer depends on its neighbours.
"""

from __future__ import annotations

import base64
import io
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from mmrun.tiny import TinyCheckpoint
from tests.e2e.cli_worker import CliWorker

pytestmark = pytest.mark.e2e

FIXTURES = Path(__file__).parent.parent / "fixtures" / "data"
SCHEMA = {
    "type": "object",
    "properties": {"colour": {"enum": ["red", "green", "blue"]}},
    "required": ["colour"],
    "additionalProperties": False,
}


def request(custom_id: str, question: str, image: str, **fields: Any) -> dict[str, Any]:
    content = [
        {"type": "text", "text": question},
        {"type": "image_url", "image_url": {"url": image}},
    ]
    body = {"model": "tiny", "messages": [{"role": "user", "content": content}], **fields}
    return {"custom_id": custom_id, "method": "POST", "url": "/v1/chat/completions", "body": body}


def picture() -> bytes:
    """The test photo at 112 x 84 pixels, as PNG: sides on Qwen-VL's 28-pixel grid, which
    mmrun's qwen2_5_vl row resizes each image to before vLLM's processor does (see
    docs/models.md), while run-batch hands the processor the image as it is. On the grid
    already, the image is the same on both sides."""
    from PIL import Image

    with Image.open(FIXTURES / "test_image_rgb.jpg") as image:
        small = image.convert("RGB").resize((112, 84))
    out = io.BytesIO()
    small.save(out, format="PNG")
    return out.getvalue()


def batch_file(folder: Path) -> Path:
    png = picture()
    data_url = "data:image/png;base64," + base64.b64encode(png).decode()
    local = folder / "rgb.png"
    local.write_bytes(png)
    lines = [
        request("greedy", "Describe it.", data_url, max_completion_tokens=20, temperature=0),
        request(
            "schema",
            "Which colour?",
            data_url,
            max_tokens=40,
            temperature=0,
            response_format={"type": "json_schema", "json_schema": {"name": "c", "schema": SCHEMA}},
        ),
        request(
            "sampled",
            "What is in the picture?",
            local.as_uri(),
            max_tokens=8,
            temperature=0.8,
            top_p=0.9,
            top_k=20,
            seed=7,
        ),
        request("stopped", "Say more.", local.as_uri(), max_tokens=12, temperature=0, stop=["e"]),
        request("two", "Name it.", data_url, max_tokens=6, temperature=1.0, seed=11, n=2),
        request(
            "logprobs",
            "What colour?",
            local.as_uri(),
            max_tokens=6,
            temperature=0,
            logprobs=True,
            top_logprobs=2,
        ),
    ]
    lines[3]["body"]["messages"].insert(0, {"role": "system", "content": "Be brief."})
    path = folder / "batch.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def vllm_flags(engine_args: dict[str, Any]) -> list[str]:
    """Engine arguments as vLLM's command line takes them."""
    flags: list[str] = []
    for key, value in engine_args.items():
        if key == "model":
            continue
        flag = "--" + key.replace("_", "-")
        if value is True:
            flags.append(flag)
        elif value is not False:
            flags += [flag, json.dumps(value) if isinstance(value, dict) else str(value)]
    return flags


def answers(path: Path) -> dict[str, dict[str, Any]]:
    """Each line's texts, token counts, finish reasons and log probabilities' tokens, by
    custom_id (the log probabilities' values apart: see ``logprob_values``)."""
    got = {}
    for row in map(json.loads, path.read_text().splitlines()):
        assert row["error"] is None, row
        body = row["response"]["body"]
        usage = body["usage"]
        assert isinstance(usage["prompt_tokens_details"]["cached_tokens"], int), usage
        got[row["custom_id"]] = {
            "choices": [
                {
                    "index": choice["index"],
                    "text": choice["message"]["content"],
                    "finish_reason": choice["finish_reason"],
                    "tokens": None
                    if choice["logprobs"] is None
                    else [
                        (step["token"], step["bytes"], [t["token"] for t in step["top_logprobs"]])
                        for step in choice["logprobs"]["content"]
                    ],
                }
                for choice in body["choices"]
            ],
            "prompt_tokens": usage["prompt_tokens"],
            "completion_tokens": usage["completion_tokens"],
        }
    return got


def logprob_values(path: Path) -> dict[str, list[float]]:
    """Each line's log probabilities (each token's, then its top tokens'), by custom_id."""
    got = {}
    for row in map(json.loads, path.read_text().splitlines()):
        values = []
        for choice in row["response"]["body"]["choices"]:
            for step in (choice["logprobs"] or {}).get("content") or []:
                values += [step["logprob"], *(t["logprob"] for t in step["top_logprobs"])]
        got[row["custom_id"]] = values
    return got


def test_a_batch_file_gives_vllm_run_batchs_texts_and_token_counts_per_custom_id(
    tiny_checkpoint: Callable[[str, str], TinyCheckpoint], cli_worker: CliWorker, tmp_path: Path
) -> None:
    checkpoint = tiny_checkpoint("image", "qwen2_5_vl")
    batch = batch_file(tmp_path)
    engine_args = {**checkpoint.engine_args, "enforce_eager": True, "max_num_seqs": 1}
    common = ["image", "-m", "qwen2_5_vl", "--model", str(checkpoint.path), "-tp", "1"]
    common += [f"--engine-arg={k}={json.dumps(v)}" for k, v in engine_args.items()]
    env = {"HF_HUB_OFFLINE": "1"}
    try:
        # The engine arguments of this run (a JSON schema: the structured-output backend).
        dry = cli_worker.run(
            [*common, "-i", str(tmp_path / "rgb.png"), "--json-object", "--dry-run", "--json"], env
        )
        assert dry.returncode == 0, dry.stderr[-3000:]
        ran_with = json.loads(dry.stdout)["request"]["engine_args"]
        mine = tmp_path / "mmrun.jsonl"
        done = cli_worker.run(
            [*common, "--input", str(batch), "-o", str(mine), "--output-format", "openai"], env
        )
        assert done.returncode == 0, done.stderr[-3000:]
    finally:
        cli_worker.release()  # its engine's memory, before run-batch starts another

    theirs = tmp_path / "run-batch.jsonl"
    command = [sys.executable, "-m", "vllm.entrypoints.openai.run_batch", "-i", str(batch)]
    command += ["-o", str(theirs), "--model", str(checkpoint.path), *vllm_flags(ran_with)]
    command += ["--served-model-name", "tiny", "--allowed-local-media-path", str(tmp_path)]
    command += ["--enable-prompt-tokens-details"]
    vllm = subprocess.run(
        command, capture_output=True, text=True, timeout=900, env={**os.environ, **env}
    )
    assert vllm.returncode == 0, vllm.stderr[-3000:]

    expected = answers(theirs)
    assert sorted(expected) == ["greedy", "logprobs", "sampled", "schema", "stopped", "two"]
    assert answers(mine) == expected
    assert expected["greedy"]["completion_tokens"] <= 20  # each line's own settings held
    assert expected["sampled"]["completion_tokens"] <= 8
    schema = expected["schema"]["choices"][0]["text"]
    assert json.loads(schema)["colour"] in ("red", "green", "blue")
    # n: 2 gives two choices, their tokens counted together
    assert [c["index"] for c in expected["two"]["choices"]] == [0, 1]
    assert 2 <= expected["two"]["completion_tokens"] <= 12
    # logprobs: each generated token with its 2 top tokens, values as run-batch's
    tokens = expected["logprobs"]["choices"][0]["tokens"]
    assert tokens and all(len(top) == 2 for _, _, top in tokens)
    values, theirs_values = logprob_values(mine), logprob_values(theirs)
    assert sorted(values) == sorted(theirs_values) and theirs_values["logprobs"]
    for custom_id, wanted in theirs_values.items():
        assert values[custom_id] == pytest.approx(wanted, abs=1e-3), custom_id
