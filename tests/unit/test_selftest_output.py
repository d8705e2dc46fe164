"""`mmrun selftest` on stderr: one line per step; what the libraries print meanwhile (Triton's
warnings, a checkpoint's shard progress bar) goes to the engine log, or with -v to stderr."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from rich.console import Console

from mmrun.cli.selftest import Steps
from mmrun.engine import configure_environment
from mmrun.engine.output import engine_log_part


def noisy() -> str:
    os.write(2, b"UserWarning: triton not found; using the slow kernels\n")
    # (as a library writes to its process's stderr: the test's capture replaces sys.stderr)
    os.write(2, b"Loading checkpoint shards: 100%|##########| 2/2\n")
    os.write(1, b"a library's own line\n")
    return "value"


@pytest.fixture
def engine_env_kept(engine_env: None) -> Iterator[None]:
    yield


@pytest.mark.parametrize("verbose", [False, True])
def test_a_step_prints_one_line_and_the_noise_goes_to_the_log(
    verbose: bool, engine_env_kept: None, capfd: pytest.CaptureFixture[str]
) -> None:
    configure_environment(verbose)
    step = Steps(Console(file=sys.stderr, width=80, color_system=None), verbose)
    assert step("build tiny whisper checkpoint", noisy) == "value"
    out, err = capfd.readouterr()
    assert out == ""
    lines = err.splitlines()
    assert lines[-1].startswith("ok   build tiny whisper checkpoint (")
    if verbose:
        assert "UserWarning: triton not found; using the slow kernels" in lines
        assert "a library's own line" in lines
        return
    assert len(lines) == 1, err
    part = engine_log_part()
    assert part is not None
    log = Path(part[0]).read_text()
    assert "triton not found" in log and "Loading checkpoint shards" in log
    assert [s["step"] for s in step.done] == ["build tiny whisper checkpoint"]


def test_a_failed_step_names_the_log(
    engine_env_kept: None, capfd: pytest.CaptureFixture[str]
) -> None:
    configure_environment(False)
    step = Steps(Console(file=sys.stderr, width=200, color_system=None), False)

    def fails() -> None:
        os.write(2, b"Traceback (most recent call last): ...\n")
        raise RuntimeError("engine core died")

    with pytest.raises(RuntimeError):
        step("run whisper through vLLM (generate, 2 prompts)", fails)
    part = engine_log_part()
    assert part is not None
    assert capfd.readouterr().err.splitlines() == [
        f"FAIL run whisper through vLLM (generate, 2 prompts) (vLLM's log: {part[0]}; -v "
        "shows it here)"
    ]
