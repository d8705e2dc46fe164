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

from tests.tiny.intern import build_interns1_pro
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


# Intern-S1-Pro: vLLM's processor over the stand-in classes (one image, one clip with its
# metadata), then the engine itself.
_INTERNS1_PRO_RUN = """
import sys
import numpy as np
from PIL import Image
from vllm import LLM, SamplingParams
from vllm.engine.arg_utils import EngineArgs
from vllm.v1.engine.input_processor import InputProcessor

model = sys.argv[1]
args = dict(
    trust_remote_code=True,
    load_format="dummy",
    max_model_len=2048,
    max_num_seqs=2,
    enforce_eager=True,
    limit_mm_per_prompt={"image": 1, "video": 1},
    mm_processor_cache_gb=0,
)
config = EngineArgs(model, **args).create_engine_config()
processor = InputProcessor(config)
hf_config = config.model_config.hf_config
turn = "<|im_start|>user\\n<|vision_start|>{}<|vision_end|>\\nWhat is shown?<|im_end|>\\n"
frames = np.full((4, 64, 96, 3), 120, dtype=np.uint8)
metadata = {
    "total_num_frames": 4,
    "fps": 2.0,
    "duration": 2.0,
    "video_backend": "opencv",
    "frames_indices": [0, 1, 2, 3],
    "do_sample_frames": False,
}
requests = {
    "image": ("<|image_pad|>", {"image": Image.new("RGB", (300, 200), (200, 30, 30))}),
    "video": ("<|video_pad|>", {"video": (frames, metadata)}),
}
params = SamplingParams(max_tokens=2)
for media, (placeholder, data) in requests.items():
    request = {"prompt": turn.format(placeholder), "multi_modal_data": data}
    ids = processor.process_inputs("0", request, params, ("generate",)).prompt_token_ids
    token = hf_config.image_token_id if media == "image" else hf_config.video_token_id
    print(media, "features", ids.count(token), flush=True)
LLM(model, **args)
print("engine started", flush=True)
"""


def test_interns1_pro_stops_at_building_the_model(tmp_path: Path) -> None:
    """Intern-S1-Pro: vLLM's processor (Qwen3-VL's, over the stand-in processor classes)
    expands the image and video placeholders; then the model cannot be built:
    InternS1ProForConditionalGeneration.__init__ (interns1_pro.py) skips Qwen3-VL's
    ``__init__``, which sets ``self.model_config``, and reads it for the vision tower's input
    norm (``build_mm_input_norm(self.model_config)``): an AttributeError on any device."""
    checkpoint = build_interns1_pro(tmp_path / "interns1_pro")
    proc = subprocess.run(
        [sys.executable, "-c", _INTERNS1_PRO_RUN, str(checkpoint.path)],
        capture_output=True,
        text=True,
        # Only the model's construction is run: a small KV cache whatever the machine's memory.
        env={**os.environ, "HF_HUB_OFFLINE": "1", "VLLM_CPU_KVCACHE_SPACE": "1"},
        timeout=900,
    )
    # The 300x200 image is resized to 12 merged 32x32 patches (the processor's 4 to 16); the
    # 4 frames of 64x96 to 2 temporal patches of 2.
    assert "image features 12" in proc.stdout, proc.stdout + proc.stderr[-3000:]
    assert "video features 4" in proc.stdout, proc.stdout + proc.stderr[-3000:]
    assert proc.returncode != 0, f"Intern-S1-Pro ran on the CPU engine: {proc.stdout}"
    tail = proc.stderr[-6000:]
    assert "interns1_pro.py" in tail and "build_mm_input_norm(self.model_config)" in tail, tail
    assert "has no attribute 'model_config'" in tail, tail
