"""mmrun loads the model's processor into vLLM's own cache while the engine starts, so that
the first request does not load it again after the engine is ready (vLLM 0.26 does: ~4 s of
the first result's time on the H200; docs/performance.md). Proven here on the installed vLLM
with the tiny Qwen2.5-VL checkpoint: after the warm-up, vLLM's own lookup is a cache hit."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable

import pytest

from mmrun.tiny import TinyCheckpoint

pytestmark = pytest.mark.e2e

# In a process of its own: this one does not import vLLM.
CHECK = """
import json, sys
from mmrun.engine import warm_processor
from vllm.engine.arg_utils import EngineArgs
from vllm.multimodal import MULTIMODAL_REGISTRY
from vllm.transformers_utils import processor

args = json.loads(sys.argv[1])
warmed = warm_processor(args)
before = processor.cached_get_processor.cache_info()
# What vLLM's frontend does on a request: its processor for the model's config.
config = EngineArgs(**args).create_model_config()
MULTIMODAL_REGISTRY.create_processor(config).info.get_hf_processor()
after = processor.cached_get_processor.cache_info()
print(json.dumps({"warmed": warmed, "size": before.currsize,
                  "hits": after.hits - before.hits, "misses": after.misses - before.misses}))
"""


def test_the_processor_is_warm_in_vllms_cache(
    tiny_checkpoint: Callable[[str, str], TinyCheckpoint],
) -> None:
    qwen = tiny_checkpoint("image", "qwen2_5_vl")
    args = {"model": str(qwen.path), **qwen.engine_args}
    proc = subprocess.run(
        [sys.executable, "-c", CHECK, json.dumps(args)],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    found = json.loads(proc.stdout.splitlines()[-1])
    assert found["warmed"] is True
    assert found["size"] >= 1
    assert found["hits"] >= 1 and found["misses"] == 0, found


def test_a_model_that_does_not_load_is_left_to_the_engine(tmp_path: os.PathLike[str]) -> None:
    """A warm-up failure says nothing: the engine's own start reports the problem."""
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            "import json; from mmrun.engine import warm_processor; "
            f"print(json.dumps(warm_processor({{'model': {str(tmp_path)!r}}})))",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.splitlines()[-1] == "false"
    assert "Traceback" not in proc.stderr
