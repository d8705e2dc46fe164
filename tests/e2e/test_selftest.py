"""`mmrun selftest` on this install: tiny image and audio models through vLLM, offline."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

# The install check as users run it: vLLM's engine processes included.
pytestmark = [pytest.mark.e2e, pytest.mark.engine_processes]


def test_selftest_passes_offline(tmp_path) -> None:  # type: ignore[no-untyped-def]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "MMRUN_CACHE_DIR": str(tmp_path / "cache")}
    proc = subprocess.run(
        [sys.executable, "-m", "mmrun", "selftest", "--json", "--keep", str(tmp_path / "build")],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads(proc.stdout)
    assert doc["ok"] is True and doc["vllm"]
    runs = [step for step in doc["steps"] if step["step"].startswith("run ")]
    assert [step["step"].split()[1] for step in runs] == ["qwen2_5_vl", "whisper"]
    assert all(step["ok"] and step["prompt_tokens"] > 0 for step in runs)
    assert (tmp_path / "build" / "qwen2_5_vl" / "config.json").exists()
    # It says what it proved: an offline install check on this device, not a real model.
    assert doc["device"] == "cpu"
    assert doc["scope"].startswith("offline, with tiny random-weight models")
