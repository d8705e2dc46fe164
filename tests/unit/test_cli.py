"""The CLI through Typer's runner and through real subprocesses, media over real HTTP."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from mmrun.plugins import builtin_registry
from tests.helpers import original_examples as oracle
from tests.helpers.cli import in_process
from tests.helpers.upstream_oracle import CHANGED_SINCE_ORIGINAL


def invoke(*args: str) -> tuple[int, str, str]:
    result = in_process(list(args))
    return result.exit_code, result.stdout, result.stderr


def mmrun(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mmrun", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=120,
    )


def test_models_json_lists_every_row_of_vllms_original_examples_with_its_repo() -> None:
    code, out, _ = invoke("models", "--json")
    assert code == 0
    # The built-in rows: plugins installed here (the example plugin) add rows of their own.
    builtin = {(spec.modality, spec.key) for spec in builtin_registry().specs()}
    rows = {(r["modality"], r["key"]): r for r in json.loads(out)["models"]}
    image_audio = {(m, k) for m, k in builtin if m in ("image", "audio")}
    # 52 original + 12 multi-image (0.33, 0.34) + 29 single-image + 0.34's ming_v3_asr
    assert builtin <= rows.keys() and len(image_audio) == 94
    for modality, path, request in (
        ("image", oracle.IMAGE_EXAMPLE, oracle.image_request),
        ("audio", oracle.AUDIO_EXAMPLE, oracle.audio_request),
    ):
        for key in oracle.example_keys(path):
            if (modality, key) == ("audio", "voxtral"):
                assert rows[(modality, key)]["repo_id"] == "mistralai/Voxtral-Mini-3B-2507"
                continue
            if (modality, key) in CHANGED_SINCE_ORIGINAL:  # test_upstream_parity.py checks these
                continue
            count = 1
            example = request(key, "Q", count)
            assert rows[(modality, key)]["repo_id"] == example.engine_args["model"], key
    assert rows[("audio", "whisper")]["max_items"] == 1
    assert rows[("image", "qwen_vl_chat")]["trust_remote_code"] is True


def test_models_table_and_filter() -> None:
    code, out, _ = invoke("models", "audio")
    assert code == 0 and "whisper" in out and "qwen2_5_vl" not in out
    code, out, _ = invoke("models", "video", "--json")
    video = {row["key"] for row in json.loads(out)["models"]}
    assert code == 0 and {"qwen2_vl", "qwen3_vl", "llava-next-video"} <= video
    assert "whisper" not in video and len(video) == 26
    code, _, err = invoke("models", "smell")
    assert code == 2 and "unknown modality 'smell'" in err


def _rows() -> list[dict[str, object]]:
    return list(json.loads(invoke("models", "--json")[1])["models"])


def test_models_piped_keeps_every_column_and_every_repo_id_whole() -> None:
    """Piped (the in-process stdout is no terminal), Rich used to cut the table at 80 columns:
    no repo id came out whole."""
    code, out, err = invoke("models")
    assert code == 0 and err == ""
    header = next(line for line in out.splitlines() if "key" in line)
    for column in ("key", "repo id", "modality", "vLLM", "max items", "methods", "remote code"):
        assert column in header, header
    assert "…" not in out
    for row in _rows():
        assert f" {row['key']} " in out and f" {row['repo_id']} " in out, row["key"]


@pytest.mark.parametrize("width", [60, 80, 110, 200])
def test_models_on_a_terminal_never_cuts_a_key_or_a_repo_id(
    width: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a 110-column terminal, `CohereLabs/cohere-transcr…` was all a user could copy."""
    import io

    from rich.console import Console

    screen = io.StringIO()
    terminal = Console(file=screen, force_terminal=True, width=width, color_system=None)
    monkeypatch.setattr("mmrun.cli._output.stdout_console", lambda: terminal)
    code, _, err = invoke("models")
    assert code == 0
    out = screen.getvalue()
    assert "…" not in out
    for row in _rows():
        assert f" {row['key']} " in out and f" {row['repo_id']} " in out, row["key"]
    if width < 200:  # columns were left out: said where they are, on stderr
        assert "`mmrun models --json` has every field" in err
    else:
        assert err == ""
        assert max(len(line) for line in out.splitlines()) <= width


def test_idefics3_dry_run_prints_the_examples_prompt_exactly(media_dir: Path) -> None:
    code, out, err = invoke(
        "image",
        "-m",
        "idefics3",
        "-i",
        str(media_dir / "duck.jpg"),
        "-i",
        str(media_dir / "lion.jpg"),
        "--dry-run",
        "--json",
    )
    assert code == 0, err
    doc = json.loads(out)
    assert doc["prompt"] == (
        "<|begin_of_text|>User:Image-1: <image>\n\nImage-2: <image>\n\n"
        "What is the content of each image?<end_of_utterance>\nAssistant:"
    )
    assert doc["request"]["engine_args"]["limit_mm_per_prompt"] == {
        "image": 2,
        "video": 0,
        "audio": 0,
    }
    assert [m["width"] for m in doc["media"]] == [64, 72]
    assert doc["outputs"] == [] and doc["dry_run"] is True


def test_qwen2_audio_dry_run_prints_the_examples_prompt_exactly(media_dir: Path) -> None:
    code, out, err = invoke(
        "audio",
        "-m",
        "qwen2_audio",
        "-a",
        str(media_dir / "tone.wav"),
        "-a",
        str(media_dir / "mary_had_lamb.ogg"),
        "--dry-run",
        "--json",
    )
    assert code == 0, err
    doc = json.loads(out)
    assert doc["prompt"] == (
        "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n"
        "Audio 1: <|audio_bos|><|AUDIO|><|audio_eos|>\nAudio 2: <|audio_bos|><|AUDIO|><|audio_eos|>\n"
        "What sport and what nursery rhyme are referenced?<|im_end|>\n<|im_start|>assistant\n"
    )
    assert doc["request"]["sampling"] == {"temperature": 0.2, "max_tokens": 64}
    assert doc["request"]["engine_args"]["seed"] == 0
    assert doc["media"][0]["sample_rate"] == 16000 and doc["media"][0]["duration_s"] == 1.0


def test_default_assets_come_from_mirror_and_second_run_makes_no_request(media_server) -> None:  # type: ignore[no-untyped-def]
    env = {"MMRUN_ASSETS_BASE_URL": media_server.url}
    first = mmrun(
        "image", "-m", "phi3_v", "-n", "4", "--dry-run", "--json", "--trust-remote-code", **env
    )
    assert first.returncode == 0, first.stderr
    assert sorted(media_server.requests) == sorted(
        ["/duck.jpg", "/lion.jpg", "/flycatcher.jpeg", "/somefish.jpg"]
    )
    doc = json.loads(first.stdout)
    assert [m["source"] for m in doc["media"]] == ["duck", "lion", "flycatcher", "somefish"]
    media_server.requests.clear()
    second = mmrun(
        "image", "-m", "phi3_v", "-n", "4", "--dry-run", "--json", "--trust-remote-code", **env
    )
    assert second.returncode == 0
    assert media_server.requests == []
    assert json.loads(second.stdout)["media"] == doc["media"]


def test_audio_batch_varies_single_clip_like_the_example(media_server) -> None:  # type: ignore[no-untyped-def]
    code_env = {"MMRUN_ASSETS_BASE_URL": media_server.url}
    out = mmrun(
        "audio", "-m", "qwen2_audio", "--num-prompts", "3", "--dry-run", "--json", **code_env
    )
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert [m["source"] for m in doc["media"]] == ["mary_had_lamb", "winning_call"]
    assert doc["media_per_prompt"] == [[0], [1], [0]]


def test_url_and_data_uri_sources(media_server, media_dir: Path) -> None:  # type: ignore[no-untyped-def]
    data = base64.b64encode((media_dir / "blue.png").read_bytes()).decode()
    code, out, err = invoke(
        "image",
        "-m",
        "llava",
        "-i",
        f"{media_server.url}/blue.png",
        "-i",
        f"data:image/png;base64,{data}",
        "--dry-run",
        "--json",
        "--model",
        "llava-hf/llava-1.5-7b-hf",
        "-q",
        "Same?",
    )
    # llava renders the model's own chat template, which needs its processor from the Hub:
    # here (offline) the dry run shows the rest and says why the prompt is not there.
    assert code == 0, err
    doc = json.loads(out)
    assert doc["prompt"] is None and "processor" in doc["prompt_note"]
    assert [m["source"][:5] for m in doc["media"]] == ["http:", "data:"]
    code, out, err = invoke(
        "image",
        "-m",
        "mistral3",
        "-i",
        f"{media_server.url}/blue.png",
        "-i",
        f"data:image/png;base64,{data}",
        "--dry-run",
        "--json",
    )
    assert code == 0, err
    doc = json.loads(out)
    assert doc["media"][0]["sha256"] == doc["media"][1]["sha256"]
    assert doc["prompt"] == "<s>[INST]What is the content of each image?\n[IMG][IMG][/INST]"


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["image", "-m", "qwen25_vl", "--dry-run"], 2, "did you mean 'qwen2_5_vl'"),
        (
            ["image", "-m", "mistral3", "-n", "13", "--dry-run"],
            2,
            "-n 13: `mmrun image` has 12 default images (name 13 files with --image)",
        ),
        (["image", "-m", "mistral3", "-n", "0", "--dry-run"], 2, "-n 0 is out of range"),
        (["audio", "-m", "whisper", "-n", "2", "--dry-run"], 2, "-n 2 is out of range for whisper"),
        (["image", "-m", "qwen_vl_chat", "--dry-run"], 2, "--trust-remote-code"),
        (["image", "-m", "mistral3", "-i", "/nonexistent.png", "--dry-run"], 2, "no such file"),
        (
            ["image", "-m", "mistral3", "-i", "ftp://x/y.png", "--dry-run"],
            2,
            "unsupported URL scheme",
        ),
        (
            ["image", "-m", "mistral3", "--method", "beam", "--dry-run"],
            2,
            "invalid value for '--method': 'beam' is not one of 'generate', 'chat'",
        ),
        (
            ["audio", "-m", "whisper", "--method", "chat", "--dry-run"],
            2,
            "cannot run with --method chat",
        ),
        (
            ["image", "-m", "mistral3", "--engine-arg", "oops", "--dry-run"],
            2,
            "invalid --engine-arg",
        ),
        (["audio", "-m", "funaudiochat", "--dry-run"], 2, "pass --model"),
    ],
)
def test_user_errors_are_one_line_with_documented_code(
    args: list[str], code: int, message: str
) -> None:
    got, out, err = invoke(*args)
    assert got == code, err
    assert message in err
    assert err.count("\n") == 1 and err.startswith("mmrun: error: ")
    assert out == ""


def test_more_media_than_model_takes(media_dir: Path) -> None:
    got, _, err = invoke(
        "audio",
        "-m",
        "whisper",
        "-a",
        str(media_dir / "tone.wav"),
        "-a",
        str(media_dir / "tone.wav"),
        "--dry-run",
    )
    assert got == 2 and "whisper takes at most 1 audio per prompt, got 2" in err


def test_http_404_is_a_run_failure(media_server) -> None:  # type: ignore[no-untyped-def]
    got, _, err = invoke(
        "image", "-m", "mistral3", "-i", f"{media_server.url}/missing.png", "--dry-run"
    )
    assert got == 1 and "HTTP 404" in err


def test_unsupported_architecture_is_refused_before_loading(media_dir: Path) -> None:
    got, _, err = invoke("image", "-m", "aya_vision", "-i", str(media_dir / "blue.png"))
    assert got == 2
    assert "does not support aya_vision" in err and "0.24.0" in err


def test_engine_args_override_and_tp(media_dir: Path) -> None:
    got, out, err = invoke(
        "image",
        "-m",
        "mistral3",
        "-i",
        str(media_dir / "blue.png"),
        "-tp",
        "1",
        "--engine-arg",
        "max_model_len=2048",
        "--engine-arg",
        'mm_processor_kwargs={"a": 1}',
        "--seed",
        "7",
        "--dry-run",
        "--json",
    )
    assert got == 0, err
    args = json.loads(out)["request"]["engine_args"]
    assert args["tensor_parallel_size"] == 1 and args["max_model_len"] == 2048
    assert args["mm_processor_kwargs"] == {"a": 1} and args["seed"] == 7


def planned_engine_args(
    media_dir: Path,
    named: dict[str, Any],
    *,
    device: str,
    version: str | None = None,
    num_prompts: int = 1,
) -> dict[str, Any]:
    """The engine arguments mmrun plans for qwen2_5_vl on one image, with the installed vLLM
    seen as a build for ``device`` (and of ``version``, when given)."""
    from dataclasses import replace

    from mmrun.planning import RunOptions, plan
    from mmrun.plugins import get_registry
    from mmrun.support import vllm_info

    opts = RunOptions(
        modality="image",
        key="qwen2_5_vl",
        model="x",
        sources=(str(media_dir / "blue.png"),),
        num_prompts=num_prompts,
        engine_args=named,
    )
    info = replace(vllm_info(), device=device)
    if version is not None:
        info = replace(info, version=version)
    return plan(opts, get_registry(), info).engine_args


@pytest.mark.parametrize(
    ("device", "prompts", "named", "expected"),
    [
        ("gpu", 6, {}, 64),  # more prompts than qwen2_5_vl's own max_num_seqs (5)
        ("gpu", 64, {}, 64),  # all of them at once, with fewer CUDA graphs than 256
        ("gpu", 65, {}, 256),
        ("gpu", 5000, {}, 256),  # a data set: 256 at a time
        ("gpu", 5, {}, 5),  # no more: the model's setting (and its compile cache)
        ("gpu", 6, {"max_num_seqs": 8}, 8),  # the user's setting
        ("cpu", 6, {}, 5),  # vLLM's CPU build: unchanged
    ],
    ids=["gpu-small", "gpu-64", "gpu-65", "gpu-data-set", "gpu-few", "gpu-named", "cpu"],
)
def test_a_gpu_batch_runs_more_prompts_at_once_than_the_examples_demo(
    media_dir: Path, device: str, prompts: int, named: dict[str, int], expected: int
) -> None:
    """vLLM's examples' max_num_seqs (2 to 5) size one prompt on a small GPU; a batch on a GPU held
    to them would leave the GPU mostly idle."""
    args = planned_engine_args(media_dir, named, device=device, num_prompts=prompts)
    assert args["max_num_seqs"] == expected


NORM_KERNELS = {"rms_norm": ["vllm_c", "native"], "fused_add_rms_norm": ["vllm_c", "native"]}


@pytest.mark.parametrize(
    ("device", "version", "named", "expected"),
    [
        ("gpu", "0.26.0", {}, NORM_KERNELS),
        ("gpu", "0.32.1+cu130", {}, NORM_KERNELS),
        ("gpu", "0.25.1", {}, None),  # before the version it was measured on
        ("gpu", "0.26.0+rocm700", {}, None),  # ROCm picks its own kernels
        ("cpu", "0.32.0", {}, None),  # vLLM's CPU build has no CUDA kernels
        ("gpu", "0.26.0", {"ir_op_priority": {"rms_norm": ["native"]}}, {"rms_norm": ["native"]}),
        ("gpu", "0.26.0", {"kernel_config": {"enable_flashinfer_autotune": False}}, None),
        ("gpu", "0.26.0", {"enforce_eager": True}, None),  # vLLM picks them itself
        ("gpu", "0.26.0", {"compilation_config": {"compile_mm_encoder": True}}, None),
    ],
    ids=[
        "gpu",
        "gpu-local-version",
        "old-vllm",
        "rocm",
        "cpu",
        "named",
        "kernel-config",
        "eager",
        "encoder-compiled",
    ],
)
def test_a_gpu_run_puts_vllms_norm_kernels_first(
    media_dir: Path,
    device: str,
    version: str,
    named: dict[str, Any],
    expected: dict[str, list[str]] | None,
) -> None:
    """With the language model compiled, vLLM runs its plain PyTorch RMSNorm, and so does the
    vision encoder it does not compile; mmrun asks for vLLM's CUDA kernel, unless the user
    chose kernels or compilation that makes it moot."""
    args = planned_engine_args(media_dir, named, device=device, version=version)
    assert args.get("ir_op_priority") == expected
    for key, value in named.items():
        assert args[key] == value


@pytest.mark.parametrize(
    "args", [["--help"], ["image", "--help"], ["audio", "--help"], ["models", "--json"]]
)
def test_fast_commands_import_nothing_heavy(args: list[str]) -> None:
    code = (
        "import sys\nfrom mmrun.cli.main import app\n"
        f"try:\n    app({args!r})\nexcept SystemExit:\n    pass\n"
        "heavy = sorted(m for m in ('vllm', 'torch', 'transformers', 'pyarrow', 'datasets') if m in sys.modules)\n"
        "print('HEAVY', heavy, file=sys.stderr)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert "HEAVY []" in out.stderr


def test_version_and_no_args() -> None:
    code, out, _ = invoke("--version")
    assert code == 0 and out.startswith("mmrun ")
    proc = mmrun()
    assert proc.returncode == 2 and "Usage" in proc.stdout + proc.stderr


def test_per_prompt_splits_named_media_into_prompts(media_dir: Path) -> None:
    files = [str(media_dir / name) for name in ("duck.jpg", "lion.jpg", "snail.jpg", "blue.png")]
    args = [a for f in files for a in ("-i", f)]
    code, out, err = invoke(
        "image", "-m", "mistral3", *args, "--per-prompt", "2", "--dry-run", "--json"
    )
    assert code == 0, err
    doc = json.loads(out)
    assert doc["media_per_prompt"] == [[0, 1], [2, 3]]
    assert doc["request"]["num_prompts"] == 2
    assert doc["request"]["engine_args"]["limit_mm_per_prompt"]["image"] == 2
    code, _, err = invoke("image", "-m", "mistral3", *args[:6], "--per-prompt", "2", "--dry-run")
    assert code == 2 and "does not divide the 3 image sources" in err


def test_download_progress_reports_chunks_and_draws_only_on_a_terminal(media_server) -> None:  # type: ignore[no-untyped-def]
    import io

    from rich.console import Console

    from mmrun.cli._output import DownloadProgress
    from mmrun.media import Downloader

    seen: list[tuple[str, int, int | None]] = []
    Downloader(on_progress=lambda url, done, total: seen.append((url, done, total))).fetch(
        f"{media_server.url}/duck.jpg"
    )
    assert seen and seen[-1][1] == seen[-1][2] and seen[-1][1] > 0

    drawn = io.StringIO()
    bar = DownloadProgress(Console(file=drawn, force_terminal=True, width=80), delay_s=0)
    bar("http://x/duck.jpg", 50, 100)
    bar.close()
    assert "duck.jpg" in drawn.getvalue()
    silent = io.StringIO()
    quiet_bar = DownloadProgress(Console(file=silent, force_terminal=False), delay_s=0)
    quiet_bar("http://x/duck.jpg", 50, 100)
    quiet_bar.close()
    assert silent.getvalue() == ""
