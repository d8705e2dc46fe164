"""Habits users bring from other tools: HF_* variables, the XDG cache, NO_COLOR, --quiet,
--json for pipes, and shell completion. Each is checked the way a user meets it: through a
real `mmrun` process where the process boundary matters."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from mmrun.plugins import builtin_registry
from tests.helpers.cli import in_process

HF_VARIABLES = ("HF_HOME", "HF_HUB_OFFLINE", "HF_TOKEN")
ESC = "\x1b"


def mmrun(
    args: Sequence[str],
    *,
    drop: Sequence[str] = (),
    script: Path | None = None,
    timeout: float = 120,
    **env: str,
) -> subprocess.CompletedProcess[str]:
    """Run mmrun in a fresh process (or ``script``, which calls mmrun's main); ``drop``
    removes variables the test session set."""
    environ = {k: v for k, v in os.environ.items() if k not in drop}
    environ.update(env)
    command = [sys.executable, str(script)] if script else [sys.executable, "-m", "mmrun"]
    return subprocess.run(
        [*command, *args],
        capture_output=True,
        text=True,
        env=environ,
        timeout=timeout,
    )


@pytest.fixture
def noisy_engine(fake_vllm_env: dict[str, str]) -> dict[str, str]:
    """The stand-in vLLM (tests/helpers/fake_vllm), printing on file descriptors 1 and 2 while
    it starts, as vLLM and its worker processes do."""
    return {"PYTHONPATH": fake_vllm_env["PYTHONPATH"], "FAKE_VLLM_NOISE": "1"}


# --- HF_HOME, HF_HUB_OFFLINE, HF_TOKEN ---------------------------------------------------


def test_hf_variables_reach_the_template_renderer_untouched(
    media_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: dict[str, str | None] = {}

    class RecordingRenderer:
        def __init__(self, model: str, trust_remote_code: bool = False) -> None:
            self.model = model

        def render(
            self, messages: Sequence[Any], *, source: str, chat_template: str | None = None
        ) -> str:
            seen.update({name: os.environ.get(name) for name in HF_VARIABLES})
            return "USER: <image>\nQ ASSISTANT:"

        def token_id(self, token: str) -> int:
            return 0

        def eos_token_id(self) -> int:
            return 0

    expected = {"HF_HOME": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "1", "HF_TOKEN": "hf_test_token"}
    for name, value in expected.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr("mmrun.templates.HFTemplateRenderer", RecordingRenderer)
    result = in_process(
        ["image", "-m", "llava", "-i", str(media_dir / "blue.png"), "--dry-run", "--json"]
    )
    assert result.exit_code == 0, result.stderr
    assert seen == expected
    assert json.loads(result.stdout)["prompt"] == "USER: <image>\nQ ASSISTANT:"


@pytest.mark.alone
def test_offline_without_a_cached_processor_fails_fast_in_one_line(
    media_dir: Path, tmp_path: Path
) -> None:
    """A run (a dry run goes on without the prompt: tests/unit/test_first_run.py) stops
    before the engine starts."""
    start = time.monotonic()
    proc = mmrun(
        ["image", "-m", "llava", "-i", str(media_dir / "blue.png")],
        HF_HOME=str(tmp_path / "empty-hf-home"),
        HF_HUB_OFFLINE="1",
        timeout=60,
    )
    assert time.monotonic() - start < 45
    assert proc.returncode == 1
    line = proc.stderr.splitlines()[-1]
    assert line.startswith(
        "mmrun: error: llava-hf/llava-1.5-7b-hf is not in the Hugging Face cache"
    )
    # HF_HUB_OFFLINE is set: the hint says what else to do.
    assert "set HF_HUB_OFFLINE=1" not in line and "hf download llava-hf/llava-1.5-7b-hf" in line
    assert proc.stdout == ""


@pytest.fixture(scope="module")
def hf_home_with_llava(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An HF_HOME whose hub cache holds a (tiny, random) llava-hf/llava-1.5-7b-hf snapshot,
    laid out as huggingface_hub lays out what it downloads."""
    from tests.tiny import builders

    hf_home = tmp_path_factory.mktemp("hf-home")
    repo = hf_home / "hub" / "models--llava-hf--llava-1.5-7b-hf"
    commit = "0" * 40
    builders()[("image", "llava")](repo / "snapshots" / commit)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)
    return hf_home


def test_hf_home_cache_serves_the_chat_template_offline(
    hf_home_with_llava: Path, media_dir: Path
) -> None:
    proc = mmrun(
        ["image", "-m", "llava", "-i", str(media_dir / "blue.png"), "--dry-run", "--json"],
        HF_HOME=str(hf_home_with_llava),
        HF_HUB_OFFLINE="1",
        timeout=90,
    )
    assert proc.returncode == 0, proc.stderr
    assert (
        json.loads(proc.stdout)["prompt"]
        == "USER: <image>\nWhat is the content of each image? ASSISTANT:"
    )


# --- the XDG cache folder ------------------------------------------------------------------


def _cached_path(proc: subprocess.CompletedProcess[str]) -> Path:
    assert proc.returncode == 0, proc.stderr
    return Path(json.loads(proc.stdout)["media"][0]["path"])


def test_cache_follows_xdg_cache_home_then_home_and_mmrun_cache_dir_wins(
    media_server: Any, tmp_path: Path
) -> None:
    args = ["image", "-m", "mistral3", "-n", "1", "--dry-run", "--json"]
    base = {"MMRUN_ASSETS_BASE_URL": media_server.url, "HOME": str(tmp_path / "home")}

    xdg = tmp_path / "xdg-cache"
    path = _cached_path(mmrun(args, drop=["MMRUN_CACHE_DIR"], XDG_CACHE_HOME=str(xdg), **base))
    assert path.is_file() and path.is_relative_to(xdg / "mmrun" / "media")

    path = _cached_path(mmrun(args, drop=["MMRUN_CACHE_DIR", "XDG_CACHE_HOME"], **base))
    assert path.is_file() and path.is_relative_to(tmp_path / "home" / ".cache" / "mmrun" / "media")

    own = tmp_path / "mmrun-cache"
    path = _cached_path(mmrun(args, XDG_CACHE_HOME=str(xdg), MMRUN_CACHE_DIR=str(own), **base))
    assert path.is_file() and path.is_relative_to(own / "media")
    assert media_server.requests == ["/duck.jpg"] * 3  # three caches, one download each


# --- NO_COLOR ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "code", "styled"),
    [
        (["image", "-m", "mistral3", "-i", "{media}/blue.png", "--dry-run"], 0, True),
        (["models", "audio"], 0, True),
        (["image", "--help"], 0, True),
        (["image", "-m", "qwen25_vl", "--dry-run"], 2, False),  # mmrun's error line is plain
        # Typer's usage-error panel, or one plain line if the root group reports it as mmrun does.
        (["image", "--no-such-option"], 2, None),
    ],
)
def test_no_color_means_no_escape_sequence_even_on_a_forced_terminal(
    args: list[str], code: int, styled: bool | None, media_dir: Path
) -> None:
    args = [a.replace("{media}", str(media_dir)) for a in args]
    forced = {"FORCE_COLOR": "1", "TERM": "xterm-256color"}
    colored = mmrun(args, drop=["NO_COLOR"], **forced)
    assert colored.returncode == code
    if styled is not None:  # the forced terminal turns styles on: the check below can fail
        assert (ESC in colored.stdout + colored.stderr) is styled
    plain = mmrun(args, NO_COLOR="1", **forced)
    assert plain.returncode == code
    assert ESC not in plain.stdout + plain.stderr


# --- --quiet -------------------------------------------------------------------------------


ANSWER = "answer to 'each image?\\n[IMG][/INST]'"  # what the stand-in answers mistral3's prompt


def test_quiet_run_prints_each_answer_and_nothing_else(
    noisy_engine: dict[str, str], media_dir: Path
) -> None:
    args = ["image", "-m", "mistral3", "-i", str(media_dir / "blue.png"), "--num-prompts", "2"]
    plain = mmrun(args, **noisy_engine)
    assert plain.returncode == 0, plain.stderr
    # Without -v what the engine prints goes to its log, not to the terminal.
    assert plain.stderr == "mmrun: starting vLLM (this takes a while the first time)...\n"
    assert "engine noise" not in plain.stdout and ANSWER in plain.stdout
    loud = mmrun([*args, "-v"], **noisy_engine)
    assert loud.returncode == 0, loud.stderr
    assert "starting vLLM" in loud.stderr and "engine noise on stdout" in loud.stderr
    assert "engine noise" not in loud.stdout and ANSWER in loud.stdout

    quiet = mmrun([*args, "--quiet"], **noisy_engine)
    assert quiet.returncode == 0
    assert quiet.stdout == f"{ANSWER}\n\n{ANSWER}\n"
    assert quiet.stderr == ""


def test_quiet_failure_is_still_one_line_on_stderr(
    noisy_engine: dict[str, str], media_dir: Path
) -> None:
    proc = mmrun(
        ["image", "-m", "mistral3", "-i", str(media_dir / "blue.png"), "--quiet"],
        **noisy_engine,
        FAKE_VLLM_FAIL_STEP="CUDA out of memory. Tried to allocate 2.00 GiB",
    )
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.startswith(
        "mmrun: error: the engine ran out of memory: RuntimeError: CUDA out of memory. "
    )
    assert proc.stderr.count("\n") == 1


def test_quiet_dry_run_prints_the_prompt_alone(media_dir: Path) -> None:
    proc = mmrun(
        ["image", "-m", "mistral3", "-i", str(media_dir / "blue.png"), "--dry-run", "--quiet"]
    )
    assert proc.returncode == 0 and proc.stderr == ""
    assert proc.stdout == "<s>[INST]What is the content of each image?\n[IMG][/INST]\n"


def test_quiet_and_verbose_together_is_a_usage_error(media_dir: Path) -> None:
    proc = mmrun(
        ["image", "-m", "mistral3", "-i", str(media_dir / "blue.png"), "--dry-run", "--quiet", "-v"]
    )
    assert proc.returncode == 2
    assert proc.stderr.startswith("mmrun: error: --quiet and --verbose contradict each other")


# --- --json on stdout alone ----------------------------------------------------------------


def test_json_is_alone_on_stdout_in_a_dry_run(media_server: Any, tmp_path: Path) -> None:
    # A broken plugin writes a warning on stderr: it must not reach the JSON on stdout.
    (tmp_path / "brokenplugin.py").write_text("raise RuntimeError('boom')\n")
    info = tmp_path / "brokenplugin-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: brokenplugin\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        "[mmrun.plugins]\nbrokenplugin = brokenplugin:register\n"
    )
    proc = mmrun(
        ["audio", "-m", "qwen2_audio", "-n", "2", "--dry-run", "--json"],
        PYTHONPATH=str(tmp_path),
        MMRUN_ASSETS_BASE_URL=media_server.url,
    )
    assert proc.returncode == 0, proc.stderr
    document = json.loads(proc.stdout)
    assert document["schema"] == "mmrun.result/1" and document["dry_run"] is True
    assert "plugin 'brokenplugin' skipped" in proc.stderr


def test_json_is_alone_on_stdout_while_the_engine_prints(
    noisy_engine: dict[str, str], media_dir: Path
) -> None:
    proc = mmrun(
        ["image", "-m", "mistral3", "-i", str(media_dir / "blue.png"), "--json", "-v"],
        **noisy_engine,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["outputs"][0]["text"] == f"  {ANSWER}\n"
    assert "engine noise on stdout" in proc.stderr and "a print() inside the engine" in proc.stderr


def test_batch_json_lines_are_alone_on_stdout_while_the_engine_prints(
    noisy_engine: dict[str, str], media_dir: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "images"
    folder.mkdir()
    for name in ("a.png", "b.png"):
        (folder / name).write_bytes((media_dir / "blue.png").read_bytes())
    for verbose in ([], ["-v"]):
        proc = mmrun(
            ["image", "-m", "mistral3", "-i", str(folder), "--json", *verbose], **noisy_engine
        )
        assert proc.returncode == 0, proc.stderr
        rows = [json.loads(line) for line in proc.stdout.splitlines()]
        assert sorted(r["id"] for r in rows) == [str(folder / "a.png"), str(folder / "b.png")]
        assert "2 done, 0 failed" in proc.stderr
        assert ("engine noise on stdout" in proc.stderr) == bool(verbose), proc.stderr


# --- shell completion, through Typer's own mechanism ---------------------------------------

NO_SHELL_DETECTION = {"_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION": "1"}


def test_show_completion_prints_a_bash_script() -> None:
    proc = mmrun(["--show-completion", "bash"], **NO_SHELL_DETECTION)
    assert proc.returncode == 0, proc.stderr
    assert "_MMRUN_COMPLETE=complete_bash" in proc.stdout
    assert "complete -o default -F _mmrun_completion mmrun" in proc.stdout


def test_install_completion_writes_the_script_under_home(tmp_path: Path) -> None:
    proc = mmrun(["--install-completion", "bash"], HOME=str(tmp_path), **NO_SHELL_DETECTION)
    assert proc.returncode == 0, proc.stderr
    script = tmp_path / ".bash_completions" / "mmrun.sh"
    assert "_MMRUN_COMPLETE=complete_bash" in script.read_text()
    assert f"source '{script}'" in (tmp_path / ".bashrc").read_text()


COMPLETE_AND_REPORT_IMPORTS = textwrap.dedent("""
    import atexit
    import sys

    atexit.register(lambda: print("HEAVY", sorted(
        m for m in ("vllm", "torch", "transformers") if m in sys.modules), file=sys.stderr))
    from mmrun.cli.main import main

    main()
""")


@pytest.mark.parametrize(
    ("words", "modality", "prefix"),
    [("mmrun image -m qwen", "image", "qwen"), ("mmrun audio -m ", "audio", "")],
)
def test_model_key_completion_lists_the_modality_keys_without_heavy_imports(
    words: str, modality: str, prefix: str, tmp_path: Path
) -> None:
    script = tmp_path / "complete.py"
    script.write_text(COMPLETE_AND_REPORT_IMPORTS)
    proc = mmrun(
        [],
        script=script,
        _MMRUN_COMPLETE="complete_bash",
        COMP_WORDS=words,
        COMP_CWORD=str(len(words.split(" ")) - 1),
        MMRUN_PLUGINS="",
    )
    assert proc.returncode == 0, proc.stderr
    keys = [s.key for s in builtin_registry().specs(modality)] + ["auto"]  # auto: --model's own
    expected = [key for key in keys if key.startswith(prefix)]
    assert proc.stdout.split() == expected
    assert "HEAVY []" in proc.stderr
