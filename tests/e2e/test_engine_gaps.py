"""Rows that vLLM 0.32's CPU engine cannot run, held by a test of the failure itself: each
runs its tiny checkpoint (stand-in classes where the real ones are remote code) through the
real engine and checks that it fails where the row's UNPROVEN reason says. When a vLLM
release runs the row, the test fails: register the checkpoint as the row's proof instead."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.tiny.minicpm import build_minicpmv

pytestmark = pytest.mark.e2e

# One image and one clip through vLLM's engine, in the engine's own process; the traceback of
# the failure goes to stderr.
_RUN = """
import sys
import numpy as np
from PIL import Image
from vllm import LLM, SamplingParams

model, media = sys.argv[1], sys.argv[2]
llm = LLM(
    model,
    trust_remote_code=True,
    load_format="dummy",
    max_model_len=2048,
    max_num_seqs=2,
    enforce_eager=True,
    limit_mm_per_prompt={"image": 1, "video": 1},
    # Off: the request below is processed twice (once to read its prompt back).
    mm_processor_cache_gb=0,
)
turn = "<|im_start|>user\\n{}\\nWhat is shown?<|im_end|>\\n<|im_start|>assistant\\n"
if media == "image":
    data = {"image": Image.new("RGB", (300, 200), (200, 30, 30))}
    prompt = turn.format("(<image>./</image>)")
else:
    data = {"video": np.full((4, 60, 80, 3), 120, dtype=np.uint8)}
    prompt = turn.format("(<video>./</video>)")
request = {"prompt": prompt, "multi_modal_data": data}
params = SamplingParams(max_tokens=2)
# The prompt as vLLM's processor expanded it: the image features' positions are <unk> tokens.
processed = llm.llm_engine.input_processor.process_inputs("0", request, params, ("generate",))
unk = llm.get_tokenizer().convert_tokens_to_ids("<unk>")
print("features", processed.prompt_token_ids.count(unk), flush=True)
out = llm.generate(request, params)
print("generated", len(out[0].outputs[0].token_ids))
"""


@pytest.mark.parametrize("media", ["image", "video"])
def test_minicpmv_stops_at_the_resampler_on_the_cpu_engine(media: str, tmp_path: Path) -> None:
    """MiniCPM-V 2.6: vLLM's processor expands the placeholder and the vision tower runs; then
    vLLM's resampler (Resampler2_5.forward, minicpmv.py) calls
    ``torch.cuda.is_current_stream_capturing()``, which raises on a machine without a CUDA
    driver (PyPI's torch: "CUDA driver version is insufficient for CUDA runtime version"; in a
    CPU-only torch build, torch.cuda.graphs makes the check a dummy type that raises)."""
    import torch

    if torch.cuda.is_available():
        pytest.skip("a CUDA driver is present: torch answers the capture check")
    checkpoint = build_minicpmv(tmp_path / "minicpmv")
    proc = subprocess.run(
        [sys.executable, "-c", _RUN, str(checkpoint.path), media],
        capture_output=True,
        text=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
        timeout=900,
    )
    # 16 resampler queries per overview or slice: the 300x200 image is an overview and a 4x2
    # grid of slices (the stand-in image processor's rule), each of the 4 frames one overview.
    expected = f"features {16 * (9 if media == 'image' else 4)}"
    assert expected in proc.stdout, proc.stdout + proc.stderr[-3000:]
    assert proc.returncode != 0, f"MiniCPM-V ran on the CPU engine: {proc.stdout}"
    tail = proc.stderr[-6000:]
    assert "in get_vision_hidden_states" in tail, tail
    assert "minicpmv.py" in tail and "in is_current_stream_capturing" in tail, tail
