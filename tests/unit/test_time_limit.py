"""The fast tests' time limit (tests/helpers/time_limit.py): a test that waits for good fails
at the limit, with where it waited; an end-to-end test is left to its own timeouts."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from tests.helpers.time_limit import LIMIT_ENV

ROOT = Path(__file__).resolve().parents[2]

STUCK = textwrap.dedent("""
    import threading

    import pytest


    def test_stuck():
        threading.Event().wait()


    @pytest.mark.e2e
    def test_slow_e2e():
        threading.Event().wait(3)  # past the limit, and passes
""")


def test_a_fast_test_that_waits_for_good_fails_at_the_limit(tmp_path: Path) -> None:
    (tmp_path / "test_stuck.py").write_text(STUCK)
    plugin = ["-p", "tests.helpers.time_limit", "-p", "no:cacheprovider", "-o", "markers=e2e"]
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", *plugin, "-q", "--rootdir", str(tmp_path), str(tmp_path)],
        cwd=ROOT,
        env={**os.environ, LIMIT_ENV: "2"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "1 failed, 1 passed" in proc.stdout, proc.stdout
    assert f"ran over 2 s ({LIMIT_ENV})" in proc.stdout
    assert "threading.Event().wait()" in proc.stdout  # where it waited
