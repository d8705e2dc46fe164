"""What a new user meets in the first minutes, without an engine: offline dry runs, panels
that wrap instead of cutting, a closed pipe, misspelled vLLM arguments, help and `models` at
80 columns, short options, messages, and progress lines in a log."""

from __future__ import annotations

import io
import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from mmrun.cli._output import BatchProgress, StartProgress
from mmrun.planning import RunOptions, plan
from mmrun.plugins import builtin_registry, get_registry
from mmrun.results import identity
from mmrun.support import VllmInfo

# A key whose prompt the model's processor renders (needs the Hub or the cache), and one
# whose prompt mmrun writes itself.
PROCESSOR_KEY = "qwen2_5_vl"
WRITTEN_KEY = "mistral3"
BOX = "│╭╮╰╯─"


def mmrun(
    *args: str, columns: int = 80, terminal: bool = False, **env: str
) -> subprocess.CompletedProcess[str]:
    """``python -m mmrun`` as a new user runs it: offline, with an empty Hugging Face cache."""
    full_env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR")}
    full_env.update(COLUMNS=str(columns), **env)
    if terminal:  # Rich takes FORCE_COLOR as "stdout is a terminal"
        full_env["FORCE_COLOR"] = "1"
    return subprocess.run(
        [sys.executable, "-m", "mmrun", *args],
        capture_output=True,
        text=True,
        env=full_env,
        timeout=120,
    )


@pytest.fixture
def offline(tmp_path: Path) -> dict[str, str]:
    return {"HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "empty-hf-home")}


@pytest.fixture(scope="module")
def photo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from PIL import Image

    path = tmp_path_factory.mktemp("photo") / "photo.png"
    Image.new("RGB", (64, 48), (200, 10, 10)).save(path)
    return path


@pytest.fixture(scope="module")
def photos(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder of 400 small images: a batch whose output is larger than a pipe holds."""
    from PIL import Image

    folder = tmp_path_factory.mktemp("photos")
    for i in range(400):
        Image.new("RGB", (16, 16), (i % 256, 0, 0)).save(folder / f"{i:03d}.png")
    return folder


def unboxed(text: str) -> str:
    """A panel's text as one string: box characters and line breaks taken out."""
    return re.sub(r"\s+", " ", "".join(" " if c in BOX else c for c in text)).strip()


# --- dry runs need no network ------------------------------------------------------------


def test_an_offline_dry_run_of_a_processor_rendered_key_shows_the_rest_and_why(
    offline: dict[str, str], photo: Path
) -> None:
    proc = mmrun("image", "-m", PROCESSOR_KEY, "-i", str(photo), "--dry-run", **offline)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    text = unboxed(proc.stdout)
    for shown in ("engine args", "sampling", "max_model_len", str(photo), "64x48"):
        assert shown in text, shown
    assert "prompt (not rendered)" in text
    assert "renders the prompt at run time" in text
    # The hint fits the environment: HF_HUB_OFFLINE is set already, so it says what else to do.
    assert "set HF_HUB_OFFLINE=1" not in text
    assert "hf download Qwen/Qwen2.5-VL-3B-Instruct" in text


def test_an_offline_dry_run_as_json_has_a_null_prompt_and_the_note(
    offline: dict[str, str], photo: Path
) -> None:
    proc = mmrun("image", "-m", PROCESSOR_KEY, "-i", str(photo), "--dry-run", "--json", **offline)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["prompt"] is None and doc["prompt_token_ids"] is None
    assert "processor" in doc["prompt_note"]
    assert doc["request"]["engine_args"]["model"] == "Qwen/Qwen2.5-VL-3B-Instruct"
    assert [m["source"] for m in doc["media"]] == [str(photo)]


def test_an_offline_batch_dry_run_notes_each_line(offline: dict[str, str], photos: Path) -> None:
    proc = mmrun("image", "-m", PROCESSOR_KEY, "-i", str(photos), "--dry-run", "--json", **offline)
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = [json.loads(line) for line in proc.stdout.splitlines()]
    assert len(rows) == 400
    assert all(row["prompt"] is None and "processor" in row["prompt_note"] for row in rows)


# --- nothing cut ---------------------------------------------------------------------------


def test_a_long_prompt_wraps_at_80_columns_and_keeps_every_character(
    offline: dict[str, str], photo: Path
) -> None:
    word = "x" * 150  # no space to wrap at: it must fold, not be cut
    question = f"Describe {word} and then everything else in this picture, please."
    proc = mmrun(
        "image", "-m", WRITTEN_KEY, "-i", str(photo), "-q", question, "--dry-run", **offline
    )
    assert proc.returncode == 0, proc.stderr
    panel = proc.stdout[proc.stdout.index("╭─ prompt") :]
    assert max(len(line) for line in panel.splitlines()) <= 80
    body = "".join(
        line.strip(" │") for line in panel.splitlines()[1:-1]
    )  # the folded lines, joined back
    assert word in body
    assert "…" not in panel


# --- a closed pipe ---------------------------------------------------------------------------


@pytest.mark.parametrize("view", ["--json", "rich"])
def test_a_closed_stdout_ends_quietly_with_141(
    view: str, offline: dict[str, str], photos: Path
) -> None:
    args = [sys.executable, "-m", "mmrun", "image", "-m", PROCESSOR_KEY, "-i", str(photos)]
    args += ["--dry-run"] + (["--json"] if view == "--json" else [])
    env = {**os.environ, "COLUMNS": "80", **offline}
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    assert proc.stdout is not None and proc.stderr is not None
    # The reads below wait for the process, with no timeout of their own: kill a hung one.
    watchdog = threading.Timer(120, proc.kill)
    watchdog.start()
    try:
        first = proc.stdout.readline()  # `| head -1`
        proc.stdout.close()
        stderr = proc.stderr.read().decode()
        code = proc.wait(timeout=120)
    finally:
        watchdog.cancel()
        proc.kill()
    assert code != -signal.SIGKILL, "killed after 120 s: the run hung"
    assert first
    # Nothing but progress (a log's line every 10 s): no error, no traceback.
    assert all(line.startswith("mmrun: 0/400 prompts") for line in stderr.splitlines()), stderr
    assert code == 141


def test_help_into_a_closed_pipe_ends_quietly() -> None:
    shell = f"{sys.executable} -m mmrun image --help | head -1; echo ${{PIPESTATUS[0]}} >&2"
    proc = subprocess.run(["bash", "-c", shell], capture_output=True, text=True, timeout=60)
    assert proc.stderr.strip() in ("141", "0")  # 0: the whole text fitted in the pipe


# --- vLLM's argument names, before anything starts ----------------------------------------


REPORT_VLLM_IMPORT = textwrap.dedent("""
    import atexit
    import sys

    atexit.register(lambda: print("VLLM", "vllm" in sys.modules, file=sys.stderr))
    from mmrun.cli.main import main

    main()
""")


@pytest.mark.parametrize(
    ("flag", "pair", "expected"),
    [
        ("--engine-arg", "max_model_lenn=4096", "did you mean --engine-arg max_model_len=...?"),
        ("--engine-arg", "no_such_thing=1", "has no such argument"),
        ("--sampling-arg", "top_pp=0.5", "unknown sampling setting 'top_pp' (did you mean top_p?)"),
        ("--engine-arg", "max_model_len=lots", "max_model_len takes int, not str"),
        (
            "--sampling-arg",
            "top_p=0",
            "--sampling-arg top_p must be a number from 0 (excluded) to 1",
        ),
        ("--engine-arg", "gpu_memory_utilization=1.5", "must be in (0, 1]"),
    ],
)
@pytest.mark.parametrize("dry_run", [True, False])
def test_a_bad_vllm_argument_is_one_line_before_the_engine(
    flag: str,
    pair: str,
    expected: str,
    dry_run: bool,
    tmp_path: Path,
    offline: dict[str, str],
    photo: Path,
) -> None:
    script = tmp_path / "run.py"
    script.write_text(REPORT_VLLM_IMPORT)
    args = ["image", "-m", WRITTEN_KEY, "-i", str(photo), flag, pair]
    args += ["--dry-run"] if dry_run else []
    proc = subprocess.run(
        [sys.executable, str(script), *args],
        capture_output=True,
        text=True,
        env={**os.environ, **offline},
        timeout=120,
    )
    lines = proc.stderr.splitlines()
    assert proc.returncode == 2, proc.stderr
    assert lines[-1] == "VLLM False"  # checked from vLLM's source, not by importing it
    assert len(lines) == 2, proc.stderr
    assert lines[0].startswith("mmrun: error: ") and expected in lines[0], lines[0]


def test_help_and_models_read_no_vllm_argument_lists(tmp_path: Path) -> None:
    script = tmp_path / "run.py"
    script.write_text(
        REPORT_VLLM_IMPORT.replace('"vllm" in sys.modules', '"mmrun.vllm_args" in sys.modules')
    )
    for args in (["image", "--help"], ["models"]):
        proc = subprocess.run(
            [sys.executable, str(script), *args], capture_output=True, text=True, timeout=60
        )
        assert proc.returncode == 0, proc.stderr
        assert proc.stderr.splitlines()[-1] == "VLLM False", args


# --- help: literal, readable at 80 columns, one meaning per short option -----------------


def test_help_shows_bracketed_text_literally() -> None:
    proc = mmrun("image", "--help-all", terminal=True)
    assert proc.returncode == 0
    plain = re.sub(r"\x1b\[[0-9;]*m", "", proc.stdout)
    assert "pip install 'mmrun[ray]'" in unboxed(plain)


def test_cli_docs_show_bracketed_text_literally() -> None:
    docs = (Path(__file__).parents[2] / "docs" / "cli.md").read_text()
    assert "pip install 'mmrun[ray]'" in docs
    assert "&#x27;" not in docs


@pytest.mark.parametrize("modality", ["image", "audio", "video"])
def test_help_reads_at_80_columns(modality: str) -> None:
    proc = mmrun(modality, "--help", terminal=True)
    assert proc.returncode == 0
    lines = re.sub(r"\x1b\[[0-9;]*m", "", proc.stdout).splitlines()
    assert max(len(line) for line in lines) <= 80
    # The descriptions get a column of their own of about 30 characters (it was about 22, and
    # the help took 6 lines an option): about 4 lines an option.
    options = [line for line in lines if line.startswith("│ --")]
    panel = [line for line in lines if line.startswith("│")]
    assert len(panel) / len(options) < 4.5, (len(panel), len(options))
    model_type = next(line for line in options if line.startswith("│ --model-type"))
    assert 80 - model_type.index("Which model") >= 28, model_type
    option_names = [m.group(0) for line in lines for m in re.finditer(r"--[a-z][a-z-]*…?", line)]
    assert "--tensor-parallel-size" in option_names
    assert not any(name.endswith("…") for name in option_names)
    # Every default is stated for this modality.
    text = unboxed("\n".join(lines))
    modality_spec = get_registry().modalities[modality]
    assert f"default {modality_spec.max_tokens}" in text
    assert f"default: {modality_spec.default_model}" in text
    for word in ("seed's", "stand-in"):
        assert word not in text


def test_each_short_option_means_one_thing_in_every_command() -> None:
    """Across every command: those that run a model (one per modality), `models`, and the
    commands that read results (`report`, `score`, `compare`, `export`)."""
    from typer.main import get_command

    from mmrun.cli.main import app

    def meaning(command: str, param: str) -> str:
        # A command's media (``mmrun image -i``) and the same kind of media as another's
        # companion (``mmrun video -i``, an image with each clip) are one thing.
        if param == "sources":
            return f"{command} media"
        if param.startswith("companion_"):
            return f"{param.removeprefix('companion_')} media"
        return param

    meanings: dict[str, set[str]] = {}
    root: Any = get_command(app)
    for name, command in root.commands.items():
        for param in command.params:
            if param.hidden:  # a companion's letter refused in this command (mmrun video -i)
                continue
            for opt in param.opts:
                if not opt.startswith("--"):
                    meanings.setdefault(opt, set()).add(meaning(name, param.name))
    ambiguous = {opt: names for opt, names in meanings.items() if len(names) > 1}
    assert ambiguous == {}
    assert meanings["-v"] == {"verbose"}


@pytest.mark.parametrize(
    ("typed", "suggestion"), [("--bogus", None), ("--modle", "--model"), ("--dryrun", "--dry-run")]
)
def test_an_unknown_option_suggests_only_a_likely_typo(typed: str, suggestion: str | None) -> None:
    proc = mmrun("image", typed)
    assert proc.returncode == 2
    line = proc.stderr.strip()
    assert line.startswith(f"mmrun: error: no such option: {typed} (")
    if suggestion is None:
        assert "did you mean" not in line and "Possible" not in line, line
    else:
        assert f"did you mean {suggestion}?" in line, line


def test_num_prompts_with_a_folder_names_only_what_the_user_gave(photos: Path) -> None:
    proc = mmrun("image", "-m", WRITTEN_KEY, "-i", str(photos), "--num-prompts", "3", "--dry-run")
    assert proc.returncode == 2
    line = proc.stderr.strip()
    assert "--per-prompt" not in line, line
    assert "400 image files" in line


# --- `mmrun models` at 80 columns and piped --------------------------------------------------


def test_models_on_an_80_column_terminal_shows_the_modality_and_cuts_no_key() -> None:
    proc = mmrun("models", terminal=True)
    assert proc.returncode == 0, proc.stderr
    plain = re.sub(r"\x1b\[[0-9;]*m", "", proc.stdout)
    assert max(len(line) for line in plain.splitlines()) <= 80
    for modality in ("image", "audio", "video"):
        assert f"{modality} models" in plain
    for spec in builtin_registry().specs():
        assert f" {spec.key} " in plain, spec.key
        assert spec.repo_id in plain, spec.repo_id


def test_models_piped_keeps_every_column() -> None:
    proc = mmrun("models")
    assert proc.returncode == 0
    header = next(line for line in proc.stdout.splitlines() if "repo id" in line)
    for column in ("key", "repo id", "modality", "vLLM", "max items", "methods", "proven on"):
        assert column in header, column
    assert proc.stderr == ""


# --- resume: one model, however its path is written -----------------------------------------


def test_a_relative_model_path_is_the_same_model_to_a_resumed_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    checkpoint = tmp_path / "ckpt"
    checkpoint.mkdir()
    (tmp_path / "elsewhere").mkdir()
    info = VllmInfo(version="0.32.0", architectures=frozenset(), removed={}, device="cpu")
    identities = []
    for cwd, model in (
        (tmp_path, "ckpt"),
        (tmp_path, "./ckpt"),
        (tmp_path / "elsewhere", "../ckpt"),
    ):
        monkeypatch.chdir(cwd)
        opts = RunOptions(modality="image", key=WRITTEN_KEY, model=model, dry_run=True)
        identities.append(identity(plan(opts, builtin_registry(), info)))
    assert identities[0] == identities[1] == identities[2]
    assert identities[0]["model"] == str(checkpoint.resolve())


# --- progress in a log ------------------------------------------------------------------------


def _log_console() -> tuple[Console, io.StringIO]:
    stream = io.StringIO()
    return Console(file=stream, force_terminal=False, width=200), stream


def test_the_engine_start_prints_a_line_every_period_off_a_terminal() -> None:
    console, stream = _log_console()
    starting = StartProgress(console, every_s=0.1)
    starting.start()
    time.sleep(0.55)
    starting.stop()
    lines = stream.getvalue().splitlines()
    assert 4 <= len(lines) <= 6, lines
    assert all(re.fullmatch(r"mmrun: starting vLLM\.\.\. \d+s", line) for line in lines), lines
    time.sleep(0.2)
    assert stream.getvalue().splitlines() == lines  # nothing after stop()


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _done(tokens: int) -> Any:
    from types import SimpleNamespace

    from mmrun.outcome import Completion

    return SimpleNamespace(error=None, completion=Completion("x", 10, tokens, "length"))


def test_batch_rates_come_from_the_results_not_from_the_start() -> None:
    console, _ = _log_console()
    progress = BatchProgress(console, total=100, every_s=3600)
    clock = _Clock()
    progress._clock = clock  # type: ignore[method-assign]
    progress.start(skipped=0)
    try:
        clock.now += 60  # the first prompts of a batch take a while
        progress.advance(_done(8))
        assert progress.line() == "1/100 prompts, 0 failed, measuring"
        for _ in range(10):  # then one a second
            clock.now += 1
            progress.advance(_done(8))
        line = progress.line()
    finally:
        progress.close()
    assert line.startswith("11/100 prompts, 0 failed, 1.0 prompts/s · 8 tok/s"), line
    assert line.endswith("about 1m29s left"), line


# --- the CPU KV cache, sized for the run ------------------------------------------------------


def test_the_cpu_kv_cache_is_what_the_run_needs_within_the_free_memory() -> None:
    from mmrun.engine.cpu import GIB, HEADROOM_BYTES, choose

    # Qwen2.5-VL-3B's language model: 36 layers x 2 KV heads x 128 x bf16 x (K, V).
    per_token = 2 * 36 * 2 * 128 * 2
    small = choose(per_token, 4096, 5, free_bytes=20 * GIB)
    assert small.gib == 1  # 0.83 GiB needed, whole GiB as vLLM reads it
    big = choose(per_token, 32768, 256, free_bytes=20 * GIB)
    assert big.gib == int((20 * GIB - HEADROOM_BYTES) // GIB)  # what is free, not more
    assert "room for" in big.reason


def test_a_kv_cache_that_cannot_fit_is_one_line_naming_what_to_lower() -> None:
    from mmrun.engine.cpu import GIB, choose
    from mmrun.errors import EngineError

    with pytest.raises(EngineError) as caught:
        choose(2 * 36 * 2 * 128 * 2, 128_000, 1, free_bytes=4 * GIB)
    line = str(caught.value)
    assert "\n" not in line
    assert "max_model_len=128000" in line and "lower --engine-arg max_model_len=" in line


def test_the_cpu_compile_cache_is_left_off_only_where_it_cannot_load() -> None:
    from mmrun.engine.cpu import no_unloadable_compile_cache

    assert no_unloadable_compile_cache("0.32.0", {})
    assert no_unloadable_compile_cache("0.32.1+cpu", {})
    assert not no_unloadable_compile_cache("0.31.0", {})  # not seen to fail: vLLM decides
    assert not no_unloadable_compile_cache("0.33.0", {})
    assert not no_unloadable_compile_cache(None, {})
    # the user's own setting wins, whatever it says
    assert not no_unloadable_compile_cache("0.32.0", {"VLLM_USE_AOT_COMPILE": "1"})


def test_a_cpu_start_says_it_leaves_the_compile_cache_off(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import os

    from mmrun import support
    from mmrun.engine import cpu, environment

    monkeypatch.setattr(environment, "is_quiet", lambda: False)  # as with -v
    monkeypatch.setattr(support, "vllm_device", lambda: "cpu")
    monkeypatch.setattr(support, "vllm_version", lambda: "0.32.0")
    monkeypatch.setattr(cpu, "size_for_the_run", lambda engine_args: None)
    monkeypatch.delenv("VLLM_USE_AOT_COMPILE", raising=False)
    monkeypatch.setattr(os, "environ", dict(os.environ))  # what the start sets stays here
    cpu.prepare_the_cpu_start({})
    assert os.environ["VLLM_USE_AOT_COMPILE"] == "0"
    err = capsys.readouterr().err
    assert "mmrun: VLLM_USE_AOT_COMPILE=0 for this run: vLLM 0.32.0's CPU build" in err
    # `mmrun serve` without -v: set, not said
    del os.environ["VLLM_USE_AOT_COMPILE"]
    cpu.prepare_the_cpu_start({}, say=False)
    assert os.environ["VLLM_USE_AOT_COMPILE"] == "0"
    assert capsys.readouterr().err == ""
