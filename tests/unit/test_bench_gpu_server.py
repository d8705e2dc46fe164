"""bench/gpu/server.py's engine arguments and its check before it starts anything: the engines'
shares of the card must leave each the memory the 3B shape's batch needs."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest

GPU_BENCH = Path(__file__).resolve().parents[2] / "bench" / "gpu"
sys.path.insert(0, str(GPU_BENCH))  # server.py imports throughput.py beside it
_spec = importlib.util.spec_from_file_location("bench_gpu_server", GPU_BENCH / "server.py")
assert _spec is not None and _spec.loader is not None
server = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(server)
sys.path.remove(str(GPU_BENCH))

H100_MIB, H200_MIB = 81559.0, 143771.0


def test_three_engines_on_an_h100_are_refused_in_one_line() -> None:
    problem = server.too_small(0.267, 3, H100_MIB)
    assert problem is not None
    assert "3 engines at 0.267" in problem and "80 GiB" in problem and "\n" not in problem


def test_two_engines_on_an_h100_and_three_on_an_h200_start() -> None:
    assert server.too_small(0.4, 2, H100_MIB) is None
    assert server.too_small(0.267, 3, H200_MIB) is None


def test_an_unknown_card_is_not_refused() -> None:
    assert server.too_small(0.1, 8, None) is None


def test_every_engine_gets_an_equal_share_and_no_processor_or_prefix_cache() -> None:
    # A server keeps vLLM's processor cache and prefix cache between calls; an in-process run
    # starts with both empty, so a server's second call of the same pictures would gain.
    assert server.default_engine_args(2, H100_MIB) == {
        "gpu_memory_utilization": 0.4,
        "mm_processor_cache_gb": 0,
        "enable_prefix_caching": False,
    }


def test_a_split_too_small_for_the_card_ends_before_anything_starts() -> None:
    with pytest.raises(SystemExit, match=re.escape("server.py: 3 engines at 0.267")):
        server.default_engine_args(3, H100_MIB)


def test_run_batch_s_rate_runs_from_its_engine_s_ready_line_to_its_last_result() -> None:
    assert server.ready_rate({"spawn": 0.0, "ready": 40.0, "last": 72.0}, 512) == (16.0, 32.0)
    assert server.ready_rate({"spawn": 0.0, "ready": 40.0}, 512) == (None, None)  # unfinished


def test_the_table_sets_each_round_s_server_rate_against_in_process_and_run_batch() -> None:
    rows = [
        {"run": "server-a1", "ready_after_s": 60.0},
        {"run": "mmrun-512-1", "variant": "mmrun", "prompts_per_s": 30.0},
        {"run": "mmrun-server-a1-512-1", "variant": "mmrun-server-a1", "prompts_per_s": 27.0},
        {"run": "runbatch-512-1", "variant": "runbatch", "prompts_per_s": 12.0},
        {"run": "mmrun-512-2", "variant": "mmrun", "prompts_per_s": 32.0},
        {"run": "mmrun-server-a1-512-2", "variant": "mmrun-server-a1", "prompts_per_s": None},
    ]
    ratios = [line for line in server.table(rows).splitlines() if " / " in line]
    assert ratios == [
        "mmrun-server-a1-512-1 / mmrun-512-1 = 0.90x",
        "mmrun-server-a1-512-1 / runbatch-512-1 = 2.25x",
        "runbatch-512-1 / mmrun-512-1 = 0.40x",
    ]


def test_error_lines_of_mmrun_and_of_run_batch_are_counted(tmp_path: Path) -> None:
    # media.py's run-batch input names the model by BENCH_MODEL: another path is a 404 a line
    out = tmp_path / "out.jsonl"
    out.write_text(
        '{"id": "p0", "text": "a", "error": null}\n'
        '{"id": "p1", "text": null, "error": {"stage": "media", "message": "x"}}\n'
        '{"custom_id": "p2", "response": {"status_code": 404, "body": null}, '
        '"error": {"error": {"code": 404}}}\n'
        '{"custom_id": "p3", "response": {"status_code": 200, "body": {}}, "error": null}\n'
        '{"id": "p4", "err'  # a line cut short
    )
    assert server.error_lines(out) == 2
    assert server.error_lines(tmp_path / "missing.jsonl") == 0


def test_each_api_servers_value_is_a_server_with_its_own_engine_arguments() -> None:
    assert server.server_specs("1,4,1+renderer_num_workers=8") == [
        ("a1", 1, {}),
        ("a4", 4, {}),
        ("a1+renderer_num_workers=8", 1, {"renderer_num_workers": 8}),
    ]
    label = server.server_specs("2+renderer_num_workers=8+mm_processor_cache_gb=0")[0][0]
    assert server.file_label(label) == "a2_renderer_num_workers_8_mm_processor_cache_gb_0"


@pytest.mark.parametrize(
    ("values", "says"),
    [
        ("x", "begins with a number"),
        ("0", "begins with a number"),
        ("1+workers", "KEY=VALUE"),
        ("1+env.OMP_NUM_THREADS=4", "not env.NAME=VALUE"),
    ],
)
def test_a_malformed_api_servers_value_is_refused_in_one_line(values: str, says: str) -> None:
    with pytest.raises(SystemExit, match=says) as refused:
        server.server_specs(values)
    assert "\n" not in str(refused.value)


def test_a_variant_s_plus_parts_are_engine_arguments_and_environment_variables(
    tmp_path: Path,
) -> None:
    # throughput.py's parser, which server.py's --api-servers values share
    assert server.plus_parts(["max_num_seqs=512", "env.X=1", "name=abc"]) == (
        {"max_num_seqs": 512, "name": "abc"},
        {"X": "1"},
    )
    with pytest.raises(SystemExit, match=re.escape("'mmrun+seqs': each part after '+' is KEY")):
        server.command("mmrun+seqs", 8, tmp_path, "model", tmp_path / "run", {})


def test_a_warm_up_without_its_manifest_ends_before_any_server_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "m512.jsonl").write_text("")
    argv = ["server.py", "--bench", str(tmp_path), "--model", "m", "--prompts", "512"]
    monkeypatch.setattr(sys, "argv", [*argv, "--res", str(tmp_path / "res")])
    monkeypatch.setattr(server, "start_server", lambda *a: pytest.fail("a server started"))
    with pytest.raises(SystemExit, match=r"--warm 8: no .*m8\.jsonl .*--warm 0"):
        server.main()


def test_starts_time_each_server_alone_in_alternating_order_and_stop_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--starts: a stand-in for `mmrun serve` that prints its URL after a delay set by its
    API processes, then runs until stopped: each start is timed to that line, in turn, and
    stopped (SIGTERM: rc 0 from the stand-in's handler)."""
    import argparse
    import textwrap

    stand_in = tmp_path / "serve.py"
    stand_in.write_text(
        textwrap.dedent(
            """
            import signal, sys, time
            signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
            time.sleep(0.2 * int(sys.argv[1]))
            print("http://127.0.0.1:1", flush=True)
            time.sleep(60)
            """
        )
    )
    started: list[int] = []

    def argv(model: str, engine_args: dict, port: int, api_servers: int = 1) -> list[str]:
        started.append(api_servers)
        return [sys.executable, str(stand_in), str(api_servers)]

    monkeypatch.setattr(server, "serve_argv", argv)
    args = argparse.Namespace(starts=2, budget=3600, res=tmp_path, model="m", engine_args={},
                              port=8390)  # fmt: skip
    rows = server.time_starts(server.server_specs("1,4"), args)
    assert started == [1, 4, 4, 1]
    assert [r["run"] for r in rows] == ["start-a1-1", "start-a4-1", "start-a4-2", "start-a1-2"]
    assert all(r["stopped_rc"] == 0 for r in rows)
    by_count = {r["api_servers"]: r["ready_after_s"] for r in rows}
    assert 0.8 <= by_count[4] < 30 and 0.2 <= by_count[1] < by_count[4]
    assert "| start-a4-2 | 4 |" in server.starts_table(rows)
