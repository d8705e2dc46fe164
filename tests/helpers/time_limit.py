"""A time limit for the fast tests (those not marked e2e), as a pytest hook.

A subprocess's own timeout does not cover a test that waits in its own process: a CliRunner
run, a read of a pipe, a join. Past the limit such a test fails, with the stack where it
waited, instead of holding the suite. The end-to-end tests start the real engine and bound
their own waits.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Generator
from typing import Any

import pytest

LIMIT_ENV = "MMRUN_TEST_TIME_LIMIT_S"
# Ten times what the slowest fast test takes on a loaded 2-core machine.
DEFAULT_LIMIT_S = 600


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, Any, Any]:
    if item.get_closest_marker("e2e") is not None:
        return (yield)
    limit = int(os.environ.get(LIMIT_ENV, DEFAULT_LIMIT_S))

    def expire(signum: int, frame: Any) -> None:
        # pytest's Failed is no Exception: the code under test cannot catch it.
        pytest.fail(f"ran over {limit} s ({LIMIT_ENV}): stuck where the stack shows")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(limit)
    try:
        return (yield)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
