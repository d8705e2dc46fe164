"""bench/cpu's `--server` figure: reading mmrun's summary line, and the rows the page gets
(each target judged from the figures, a missed one named under "Targets missed")."""

from __future__ import annotations

import statistics
from typing import Any

import pytest

from bench.cpu import report, served


def test_the_rate_and_its_span_come_from_mmrun_s_summary_line() -> None:
    stderr = (
        "mmrun: 512/1024 prompts, 0 failed, 80.1 prompts/s\n"
        "1024 done, 0 failed, 0 skipped in 1m03s; 35,840 prompt + 64,131 output tokens, "
        "59.77 prompts/s, 3743.3 output tok/s over 1m02.5s after the engine start\n"
    )
    assert served.summary_rate(stderr) == (59.77, 62.5)
    with pytest.raises(RuntimeError, match="no summary line"):
        served.summary_rate("1024 done, 0 failed in 3s\n")


def _figure(server_rates: list[float], firsts: list[float], tokens: list[int]) -> dict[str, Any]:
    in_process = [90.0] * len(server_rates)
    runs = {
        "in_process": [
            {
                "prompts_per_s": r,
                "first_line_s": 30.0,
                "texts_identical": 1024,
                "prompt_tokens": tokens[0],
            }
            for r in in_process
        ],
        "server": [
            {"prompts_per_s": r, "first_line_s": f, "texts_identical": 1000, "prompt_tokens": t}
            for r, f, t in zip(server_rates, firsts, tokens, strict=True)
        ],
    }
    ratios = [s / p for s, p in zip(server_rates, in_process, strict=True)]
    return {
        "served": {
            "prompts": 1024,
            "rounds": len(server_rates),
            "runs": runs,
            "in_process_per_s": 90.0,
            "server_per_s": statistics.median(server_rates),
            "paired_ratios": ratios,
            "paired_ratio": statistics.median(ratios),
            "in_process_first_line_s": 30.0,
            "server_first_call_first_line_s": firsts[0],
            "server_first_line_s": statistics.median(firsts[1:]),
            "prompt_tokens_equal": len(set(tokens)) == 1,
        }
    }


def test_a_server_within_the_targets_is_met_on_every_row() -> None:
    rows, notes = report._served_summary(_figure([85.0, 88.0, 84.0], [6.0, 0.5, 0.6], [7] * 3))
    assert len(rows) == 3 and all(row.endswith("| yes |") for row in rows)
    assert "0.94x within a round" in rows[0]
    assert "first call, which loads the processor to render its prompts: 6.00 s" in rows[1]
    assert "in-process run's of the same pictures: 1000 of 1024 | in-process, the same" in rows[2]
    assert notes == []


def test_a_slow_server_and_other_requests_are_named() -> None:
    rows, notes = report._served_summary(_figure([60.0, 70.0, 65.0], [6.0, 4.0, 5.0], [7, 7, 8]))
    assert [row.endswith("| **no** |") for row in rows] == [True, True, True]
    assert "**not equal**" in rows[2]
    assert len(notes) == 2
    assert notes[0].startswith("- `--server`: 0.72x of the in-process rate")
    assert "first result line 4.50 s" in notes[1]
