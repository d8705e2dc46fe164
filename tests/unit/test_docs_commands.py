"""Every `mmrun ...` command shown in the console blocks of README.md and docs/*.md is run
here, and its shown output checked: in this process, in a folder holding the files it names,
the network cut, the stand-in vLLM where the run is not a dry run. A command that needs a
Hub checkpoint runs as a dry run; one that cannot run in a unit test at all (a real server,
GPUs, a remote host, the real engine) is parsed against the real command line instead.
COMMANDS lists them all, in the docs' order: a command added to the docs fails
test_every_doc_command_is_listed until it is listed here with how it is checked."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cache
from http.server import SimpleHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.cli import Result, in_process
from tests.helpers.http import QuietHTTPServer
from tests.helpers.stand_in import load_stand_in_vllm

ROOT = Path(__file__).parents[2]
FENCE = re.compile(r"^```(?:console|bash|shell|sh)\n(.*?)^```", re.S | re.M)
DOCS = ("README.md", *sorted(f"docs/{p.name}" for p in (ROOT / "docs").glob("*.md")))

# How each command is checked: RUN as shown (a dry run already, or a real run on the
# stand-in vLLM); DRY with --dry-run added (a real run needs a Hub checkpoint); PARSE parsed
# against the real command line, not run; PROCESS as RUN, in a process of its own (what its
# variables change is read once per process, at import).
RUN, DRY, PARSE, PROCESS = "run", "dry", "parse", "process"


@dataclass(frozen=True)
class Row:
    doc: str
    command: str  # the mmrun part of the shell line, as the docs write it
    how: str = RUN
    why: str = ""  # why DRY or PARSE
    exit_code: int | None = None  # where it differs from what the docs show, and why
    shown: bool = True  # False: what the docs show after it is not checked, and why


# --- the docs' commands --------------------------------------------------------------------


@dataclass
class Shown:
    """One shell line of a doc's console block and the lines shown after it."""

    doc: str
    section: str  # the `## ` heading it is under
    shell: str
    output: list[str] = field(default_factory=list)


@cache
def shell_lines(doc: str) -> list[Shown]:
    """Each shell line of the doc's console blocks (`$ ` prompts where the block has them,
    else every line that is not a comment), `\\` continuations joined, with the lines shown
    after it up to the next prompt."""
    found: list[Shown] = []
    text = (ROOT / doc).read_text()
    for match in FENCE.finditer(text):
        titles = re.findall(r"^## (.+)$", text[: match.start()], re.M)
        section = titles[-1] if titles else ""
        lines = match.group(1).splitlines()
        prompted = any(line.startswith("$ ") for line in lines)
        current: Shown | None = None
        index = 0
        while index < len(lines):
            line = lines[index]
            index += 1
            if prompted and not line.startswith("$ "):
                if current is not None:
                    current.output.append(line)
                continue
            command = line.removeprefix("$ ")
            while command.rstrip().endswith("\\") and index < len(lines):
                command = command.rstrip()[:-1].rstrip() + " " + lines[index].strip()
                index += 1
            if not command.strip() or command.lstrip().startswith("#"):
                continue
            current = Shown(doc, section, command)
            found.append(current)
    return found


@dataclass
class DocCommand:
    doc: str
    command: str  # the mmrun part, comment and pipe cut off
    env: dict[str, str]
    args: list[str]
    after: list[str]  # the pipe after it, shell words
    stderr_to: str | None  # 2>FILE, or "&1"
    output: list[str]  # the lines shown after the shell line
    exit_code: int  # what `echo $?` shows next, else 0
    line: Shown

    @property
    def id(self) -> str:
        return f"{self.doc.removeprefix('docs/')}: {self.command}"


def split_shell(shell: str) -> list[list[str]]:
    """The shell line's commands, split at `|`, `;` and `&&`; words as the shell reads them."""
    shell = shell.replace("2>&1", "2>STDOUT")
    lexer = shlex.shlex(shell, posix=True, punctuation_chars="|;&")
    lexer.whitespace_split = True
    lexer.commenters = "#"
    commands: list[list[str]] = [[]]
    for word in lexer:
        if word in ("|", ";", "&&", "&", "||"):
            commands.append([])
        else:
            commands[-1].append(word)
    return [c for c in commands if c]


def as_mmrun(words: list[str]) -> tuple[dict[str, str], list[str]] | None:
    env: dict[str, str] = {}
    words = list(words)
    if words and words[0] == "time":
        words = words[1:]
    while words and re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", words[0]):
        name, _, value = words.pop(0).partition("=")
        env[name] = value
    if not words or words[0] != "mmrun":
        return None
    return env, words[1:]


@cache
def doc_commands() -> list[DocCommand]:
    """Every mmrun command of the docs, in order."""
    commands = []
    for doc in DOCS:
        shown = shell_lines(doc)
        for n, line in enumerate(shown):
            parts = split_shell(line.shell)
            for i, words in enumerate(parts):
                found = as_mmrun(words)
                if found is None:
                    continue
                env, args = found
                stderr_to = next((a[2:] for a in args if a.startswith("2>")), None)
                args = [a for a in args if not a.startswith("2>")]
                after = parts[i + 1] if i + 1 < len(parts) else []
                following = shown[n + 1] if n + 1 < len(shown) else None
                code = 0
                if following is not None and following.shell == "echo $?":
                    code = int(following.output[0])
                output = line.output
                if line.shell.endswith("echo ${PIPESTATUS[0]}"):
                    code, output = int(line.output[-1]), line.output[:-1]
                if "[OPTIONS]" in args:  # a synopsis of docs/cli.md, not a command
                    continue
                text = shlex.join(w for w in words if not w.startswith("2>"))
                commands.append(
                    DocCommand(doc, text, env, args, after, stderr_to, output, code, line)
                )
                break
    return commands


# --- the folders the commands run in -------------------------------------------------------


def png(path: Path, size: tuple[int, int], colour: tuple[int, int, int] = (200, 10, 10)) -> None:
    from PIL import Image

    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", size, colour).save(path)


def tone(path: Path, seconds: float, **kwargs: Any) -> None:
    import numpy as np
    import soundfile

    path.parent.mkdir(parents=True, exist_ok=True)
    t = np.linspace(0, seconds, int(16000 * seconds), endpoint=False, dtype=np.float32)
    soundfile.write(path, 0.3 * np.sin(2 * np.pi * 440 * t), 16000, **kwargs)


def checkpoint(folder: Path, architecture: str, model_type: str) -> None:
    folder.mkdir(parents=True)
    config = {"architectures": [architecture], "model_type": model_type}
    (folder / "config.json").write_text(json.dumps(config))


def common_media(here: Path) -> None:
    """What the docs' walkthrough names: a.png (640x480), b.png (320x240), a two-second tone."""
    png(here / "a.png", (640, 480))
    png(here / "b.png", (320, 240), (10, 200, 10))
    tone(here / "clip.wav", 2.0)


# --- comparing what the docs show with what the command printed -----------------------------

BOX = re.compile(r"[\s│╭╮╰╯─]+")
ELIDED = {"...", "…"}
# What differs from the machine the docs were captured on (times, the tiny random-weight
# model's token counts and answers): compared as placeholders, in both texts.
MACHINE = (
    (re.compile(r"\b(\d+m)?\d+(\.\d+)?s\b"), "<s>"),
    (
        re.compile(
            r"; \d+ prompt \+ \d+ output tokens(, [\d.]+ prompts/s, [\d.]+ output tok/s over "
            r"<s> after the engine start)?"
        ),
        "",
    ),
    (re.compile(re.escape(sys.executable)), "/usr/bin/python3"),
    (re.compile(r"huggingface\.invalid"), "huggingface.co"),
    # A download's URL and the network's error: the docs' machine had no network at all.
    (
        re.compile(r"download of \S+/([^/\s]+) failed: \[Errno [^\]]+\][^)]*"),
        r"download of \1 failed",
    ),
)


# Lines written to the process's own stderr (file descriptor 2) while the engine starts, which
# an in-process run's captured stderr does not hold.
UNCAPTURED = ("mmrun: starting vLLM",)


def comparable(text: str, here: Path) -> str:
    for pattern, placeholder in MACHINE:
        text = pattern.sub(placeholder, text)
    text = BOX.sub("", text)  # a path the panel wrapped is whole again
    return text.replace(f"{here}/tmp/", "").replace(f"{here}/", "").replace(str(here), ".")


def doc_paths(line: str, here: Path) -> str:
    """The docs' absolute paths, in the sandbox: the walkthrough's folder, /tmp, ~."""
    places = {"/tmp/docs-demo/": f"{here}/", "/root/": f"{here}/root/", "/tmp/": f"{here}/tmp/"}
    return re.sub(r"(?<![\w/])(/tmp/docs-demo/|/root/|/tmp/)", lambda m: places[m[1]], line)


def missing_lines(shown: list[str], printed: str, here: Path) -> list[str]:
    """The shown lines that are not in what was printed, in order (whitespace and the boxes'
    lines left out, so that a panel wrapped at another width compares equal)."""
    text = comparable(printed, here)
    shown = [doc_paths(line, here) for line in shown]
    at = 0
    missing = []
    for line in shown:
        if line.strip() in ELIDED or line.startswith(UNCAPTURED):
            continue
        want = comparable(line, here)
        found = text.find(want, at)
        if found < 0:
            missing.append(line)
        else:
            at = found + len(want)
    return missing


# --- the files each section's commands name ------------------------------------------------


def photos(here: Path, *names: str) -> None:
    colours = [(220, 30, 30), (30, 200, 60), (30, 60, 220), (250, 250, 250)]
    for i, name in enumerate(names):
        png(here / "photos" / name, (64, 48), colours[i % len(colours)])


def readme(here: Path) -> None:
    photos(here, "beach.png", "dog.png")
    for name in ("calls/monday/c1.wav", "calls/c2.wav"):
        tone(here / name, 1.0)
    (here / "refs.jsonl").write_text(
        '{"id": "photos/beach.png", "reference": "A beach."}\n'
        '{"id": "photos/dog.png", "reference": "A dog."}\n'
    )
    schema = {"type": "object", "properties": {"kind": {"type": "string"}}, "required": ["kind"]}
    (here / "fields.json").write_text(json.dumps(schema))


def checkpoints(here: Path) -> None:
    shutil.copytree(tiny_qwen(here.parent), here / "my-qwen2_5_vl-finetune")
    for name, arch, kind in (
        ("internvl3", "InternVLForConditionalGeneration", "internvl"),
        ("llama", "LlamaForCausalLM", "llama"),
        ("my-llava", "LlavaForConditionalGeneration", "llava"),
    ):
        checkpoint(here / name, arch, kind)


@cache
def tiny_qwen(root: Path) -> Path:
    """The tiny random-weight Qwen2.5-VL that `mmrun selftest --keep DIR` builds."""
    from mmrun.tiny.qwen_vl import build_qwen2_5_vl

    return build_qwen2_5_vl(root / "tiny-qwen2_5_vl").path


def tinyq(here: Path) -> None:
    shutil.copytree(tiny_qwen(here.parent), here / "tinyq")
    (here / "tmp").mkdir()
    (here / "tmp" / "tinyq").symlink_to(here / "tinyq")


def batch_runs(here: Path) -> None:
    tinyq(here)
    photos(here, "cat.jpg", "dog.jpg", "bird.jpg")
    (here / "photos" / "broken.jpg").write_bytes(b"\xff\xd8\xff\xe0\x00\x10JFIF")


def structured(here: Path) -> None:
    tinyq(here)
    photos(here, "red.png", "green.png", "blue.png")


def data_sets(here: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from tests.helpers.published import jpeg

    tinyq(here)
    (here / "rgb.jpg").write_bytes(jpeg("red"))
    png(here / "rgba.png", (64, 48))
    (here / "photos").mkdir()
    (here / "photos" / "rgb.jpg").write_bytes(jpeg("green"))
    png(here / "photos" / "rgba.png", (64, 48))
    rows = {
        "uid": ["p-001", "p-002", "p-003"],
        "img": [
            {"bytes": jpeg("red"), "path": "rgb.jpg"},
            {"bytes": (here / "rgba.png").read_bytes(), "path": "rgba.png"},
            {"bytes": None, "path": "photos/rgb.jpg"},
        ],
        "prompt": ["What is in the picture?", None, "Is it outdoors?"],
        "label": ["outdoor", "object", "outdoor"],
    }
    pq.write_table(pa.table(rows), here / "photos.parquet")
    revision = "0123456789abcdef0123456789abcdef01234567"
    repo = here / "hf" / "hub" / "datasets--acme--photos"
    snapshot = repo / "snapshots" / revision / "data"
    snapshot.mkdir(parents=True)
    hub_rows = {
        "image": [{"bytes": None, "path": "rgb.jpg"}, {"bytes": None, "path": "rgba.png"}],
        "question": ["What is in the picture?", "Which colours do you see?"],
    }
    pq.write_table(pa.table(hub_rows), snapshot / "test-00000-of-00001.parquet")
    for name in ("rgb.jpg", "rgba.png"):
        (snapshot / name).write_bytes((here / name).read_bytes())
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(revision)
    image = {"type": "image_url", "image_url": {"url": "rgb.jpg"}}
    requests = [
        [
            {"role": "system", "content": "Answer in one word."},
            {"role": "user", "content": [image, {"type": "text", "text": "What colour is it?"}]},
        ],
        [{"role": "user", "content": [{"type": "text", "text": "Describe it."}, image]}],
    ]
    (here / "batch.jsonl").write_text(
        "".join(
            json.dumps(
                {
                    "custom_id": f"request-{i}",
                    "method": "POST",
                    "url": "/v1/chat/completions",
                    "body": {"model": "Qwen/Qwen2.5-VL-3B-Instruct", "messages": messages},
                }
            )
            + "\n"
            for i, messages in enumerate(requests, 1)
        )
    )


def published_sets(here: Path) -> None:
    from tests.helpers import published

    (here / "MMBench_DEV_EN.tsv").write_text(published.mmbench_tsv(here).read_text())
    published.llava_json(here)
    clips = here / "cv-corpus-en" / "clips"
    lines = ["client_id\tpath\tsentence\n"]
    for i, sentence in enumerate(published.SENTENCES[:2]):
        tone(clips / f"common_voice_en_{4100 + i}.mp3", 1.0, format="MP3")
        lines.append(f"c{i}\tcommon_voice_en_{4100 + i}.mp3\t{sentence.capitalize()}.\n")
    (here / "cv-corpus-en" / "test.tsv").write_text("".join(lines))
    chapter = here / "LibriSpeech" / "test-clean" / "1089" / "134686"
    transcripts = []
    for i, sentence in enumerate(published.SENTENCES):
        tone(chapter / f"1089-134686-{i:04d}.flac", 1.0, format="FLAC")
        transcripts.append(f"1089-134686-{i:04d} {sentence}\n")
    (chapter / "1089-134686.trans.txt").write_text("".join(transcripts))


def video(here: Path) -> None:
    from tests.helpers.media import write_clip

    write_clip(here / "clip.mp4")
    write_clip(here / "talk.mp4", frames=1800, fps=1)
    (here / "cut.mp4").write_bytes((here / "clip.mp4").read_bytes()[:600])
    tone(here / "speech.wav", 1.0)
    png(here / "photo.png", (64, 48))


def audio_formats(here: Path) -> None:
    (here / "song.m4a").write_bytes(
        b"\x00\x00\x00\x20ftypM4A \x00\x00\x00\x00M4A mp42isom" + bytes(64)
    )
    tone(here / "cut.aiff", 1.0, format="AIFF")
    (here / "cut.aiff").write_bytes((here / "cut.aiff").read_bytes()[:40])


def quick_start(here: Path) -> None:
    png(here / "photo.jpg", (64, 48))
    tone(here / "talk.wav", 2.0)


def transcripts(here: Path) -> None:
    """Two runs' transcripts of six calls, B with one failed prompt, and the references."""
    said = [
        "I'd like to check the balance of my account.",
        "The meeting is moved to Tuesday at three p.m.",
        "Please send the invoice to our Berlin office",
        "Thank you for calling.",
        "Can you call me back tomorrow morning?",
        "Goodbye.",
    ]
    heard_b = [
        "I like to check the balance of my account.",
        "The meeting is moved to Tuesday at 3 PM.",
        "Please send the invoices to our Berlin office.",
        None,
        "Can you call me back to morrow morning?",
        "Goodbye.",
    ]

    def lines(texts: list[str | None]) -> str:
        rows = []
        for i, text in enumerate(texts, 1):
            error = None if text is not None else {"stage": "media", "message": "no such file"}
            rows.append(
                {
                    "id": f"call{i:02d}",
                    "index": i - 1,
                    "media": [f"call{i:02d}.wav"],
                    "question": None,
                    "text": text,
                    "error": error,
                }
            )
        return "".join(json.dumps(r) + "\n" for r in rows)

    small = [t.replace("Tuesday", "Thursday").replace("morning", "evening") for t in said]
    (here / "small.jsonl").write_text(lines([small[0].replace("balance", "balanse"), *small[1:]]))
    (here / "large.jsonl").write_text(lines(heard_b))
    refs = [{"id": f"call{i:02d}", "text": t} for i, t in enumerate(said, 1)]
    (here / "refs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in refs))


def exit_codes(here: Path) -> None:
    photos(here, "p1.png", "p2.png")


SECTIONS = {
    "README.md": readme,
    "docs/index.md": quick_start,
    "Models without a key": checkpoints,
    "A real run": tinyq,
    "Batch runs": batch_runs,
    "Structured outputs": structured,
    "Data sets": data_sets,
    "Published data sets": published_sets,
    "Results only: `--quiet`": tinyq,
    "Video: frames, rate and size": video,
    "The media cache": audio_formats,
    "Exit codes and errors": exit_codes,
    "Reviewing and scoring results": transcripts,
}
# Files a section's console block shows with `cat` before the commands that read them.
SHOWN_INPUTS = ("manifest.jsonl", "schema.json", "photos.csv")


# --- running them --------------------------------------------------------------------------


@contextlib.contextmanager
def stand_in_vllm() -> Iterator[None]:
    """tests/helpers/fake_vllm as `vllm`, as the fake_vllm fixture of tests/conftest.py."""
    from mmrun import engine
    from mmrun.support import vllm_info

    module = load_stand_in_vllm()
    environ = dict(os.environ)
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(sys.modules, "vllm", module)
        vllm_info.cache_clear()
        try:
            yield
        finally:
            vllm_info.cache_clear()
            engine.remove_temporary_files()
            os.environ.clear()
            os.environ.update(environ)


@contextlib.contextmanager
def web_server(folder: Path, port: int) -> Iterator[None]:
    """The docs' `python3 -m http.server 8765` of a folder."""

    class Handler(SimpleHTTPRequestHandler):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, directory=str(folder), **kwargs)

        def log_message(self, *args: Any) -> None:
            pass

    server = QuietHTTPServer(("127.0.0.1", port), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield
    finally:
        server.shutdown()
        server.server_close()


def closed_port() -> int:
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = int(probe.getsockname()[1])
    probe.close()
    return port


@dataclass
class Ran:
    code: int
    printed: str  # what the docs' block shows of it: the pipe's output, else stdout and stderr
    result: Result


class Sandbox:
    """One section of a doc: its files, and its shell lines replayed in order (the `cat` of
    an input writes it, `sed -i` edits it, each mmrun command runs once)."""

    def __init__(self, doc: str, section: str, here: Path) -> None:
        self.doc, self.here = doc, here
        here.mkdir(parents=True)
        common_media(here)
        build = SECTIONS.get(section) or SECTIONS.get(doc)
        if build is not None:
            build(here)
        self.lines = [s for s in shell_lines(doc) if s.section == section]
        for line in reversed(self.lines):  # a block may use an input shown further down
            words = split_shell(line.shell)
            if words and words[0][0] == "cat" and words[0][1] in SHOWN_INPUTS:
                (here / words[0][1]).write_text("\n".join(line.output) + "\n")
        self.done = 0
        self.ran: dict[int, Ran] = {}
        self.servers = contextlib.ExitStack()

    def run_until(self, command: DocCommand) -> Ran:
        """Replay the section's lines up to and including this command's; its run."""
        at = next(i for i, line in enumerate(self.lines) if line is command.line)
        while self.done <= at:
            line = self.lines[self.done]
            self.done += 1
            self.replay(line)
        return self.ran[id(command)]

    def replay(self, line: Shown) -> None:
        words = split_shell(line.shell)
        if words and words[0][0] == "cat" and words[0][1] in SHOWN_INPUTS:
            (self.here / words[0][1]).write_text("\n".join(line.output) + "\n")
        elif words and words[0][:2] == ["sed", "-i"]:
            subprocess.run(words[0], cwd=self.here, check=True)
        elif words and words[0][:3] == ["python3", "-m", "http.server"]:
            self.servers.enter_context(web_server(self.here, int(words[0][3])))
        for n, command in enumerate(doc_commands()):
            if command.line is line:
                self.ran[id(command)] = self.execute(command, COMMANDS[n])

    def execute(self, command: DocCommand, row: Row) -> Ran:
        if row.how == PARSE:
            return Ran(0, "", Result(0, "", "", ""))
        args = [self.local(a) for a in command.args]
        if row.how == DRY and "--dry-run" not in args:
            args.append("--dry-run")
        env: dict[str, str | None] = {
            "MMRUN_ASSETS_BASE_URL": f"http://127.0.0.1:{closed_port()}",
            "HF_HOME": str(self.here / "hf"),
            "HF_HUB_CACHE": None,
            "NO_COLOR": "1",
            "COLUMNS": "200",  # long sandbox paths are not cut short
            **{k: self.local(v) for k, v in command.env.items()},
            **ENVS.get(command.command, {}),
        }
        if "XDG_CACHE_HOME" in command.env:
            env["MMRUN_CACHE_DIR"] = None
        home = env.pop("HOME", None)
        if home is not None:
            env["HOME"] = str(self.here / home)
        stdin = self.stdin_of(command)
        if row.how == PROCESS:
            return self.process(args, env, stdin)
        real = "--dry-run" not in args
        cwd = os.getcwd()
        os.chdir(self.here)
        try:
            with stand_in_vllm() if real else contextlib.nullcontext():
                result = in_process(args, env=env, input=stdin)
        finally:
            os.chdir(cwd)
        if command.stderr_to and command.stderr_to != "STDOUT":
            (self.here / command.stderr_to).write_text(result.stderr)
        printed = result.stdout if command.stderr_to else result.output
        if command.stderr_to == "STDOUT":
            printed = result.output
        if command.after and command.stderr_to == "STDOUT":
            printed = self.pipe(command, printed)
        elif command.after:  # the terminal shows stderr, and stdout through the pipe
            printed = result.stderr + self.pipe(command, result.stdout)
        return Ran(result.exit_code, printed, result)

    def process(self, args: list[str], env: dict[str, str | None], stdin: str | None) -> Ran:
        environ = {**os.environ, "PYTHONPATH": str(ROOT)}
        for name, value in env.items():
            if value is None:
                environ.pop(name, None)
            else:
                environ[name] = value
        done = subprocess.run(
            [sys.executable, "-m", "mmrun", *args],
            cwd=self.here,
            env=environ,
            input=stdin,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        result = Result(done.returncode, done.stdout, done.stderr, done.stderr + done.stdout)
        return Ran(done.returncode, result.output, result)

    def local(self, word: str) -> str:
        """/tmp/... of the docs, in this folder."""
        return re.sub(r"(?<![\w/])/tmp/", f"{self.here}/tmp/", word)

    def stdin_of(self, command: DocCommand) -> str | None:
        parts = split_shell(command.line.shell)
        first = parts[0]
        if as_mmrun(first) is not None:
            return None
        done = subprocess.run(first, cwd=self.here, capture_output=True, text=True, check=True)
        return done.stdout

    def pipe(self, command: DocCommand, text: str) -> str:
        parts = split_shell(command.line.shell)
        at = next(i for i, p in enumerate(parts) if as_mmrun(p) is not None)
        for words in parts[at + 1 :]:
            if words[0] == "echo":
                break
            done = subprocess.run(words, input=text, capture_output=True, text=True, check=False)
            text = done.stdout
        return text


# --- the table -----------------------------------------------------------------------------

HUB = "a real run needs the Hub checkpoint"
SERVER = "starts (or stops) vLLM's real server"
REMOTE = "sends its prompts to a running vLLM server"
SELFTEST = "runs the real vLLM engine on tiny checkpoints (minutes)"
GPUS = "one engine per GPU of the host"
RAY = "a Ray cluster"
PLACEHOLDER = "ORG/NAME stands for any checkpoint"
NOISE = "the answer of the tiny random-weight model the docs ran, not the stand-in vLLM's"
CHAIN = "reads the results of the run above, which needs the Hub checkpoint"
STANDIN = 'the stand-in vLLM answers a JSON schema with "x" in each required field: no enum holds'
ONCE = "reads its variables once per process (huggingface_hub, the plugins)"
SCORES = "the docs' hand-written transcripts are not these; the scores differ"
PIPE = "141 is `head` closing the pipe, which a run in this process does not see"
COMMANDS = [
    Row(
        "README.md",
        "mmrun image -m qwen2_5_vl -i photos/ -o captions.jsonl -q 'Describe this photo in one sentence.'",
        DRY,
        HUB,
    ),
    Row("README.md", "mmrun audio -m whisper --input - -o transcripts.jsonl"),
    Row("README.md", "mmrun models image"),
    Row("README.md", "mmrun image --model ORG/NAME -i a.png", PARSE, PLACEHOLDER),
    Row("README.md", "mmrun image -m qwen2_5_vl -n 4", DRY, HUB),
    Row("README.md", "mmrun image -m idefics3 -i a.png -i b.png --dry-run"),
    Row("README.md", "mmrun video -m qwen2_5_vl --dry-run"),
    Row("README.md", "mmrun audio -m qwen2_audio -a clip.wav --json", DRY, HUB),
    Row("README.md", "mmrun selftest", PARSE, SELFTEST),
    Row("README.md", "mmrun report captions.jsonl", PARSE, CHAIN),
    Row("README.md", "mmrun score captions.jsonl -r refs.jsonl --metric bleu", PARSE, CHAIN),
    Row("README.md", "mmrun plugins"),
    Row("README.md", "mmrun serve -m qwen2_5_vl --detach", PARSE, SERVER),
    Row(
        "README.md",
        "mmrun image -m qwen2_5_vl -i photos/ --server http://127.0.0.1:8000",
        PARSE,
        REMOTE,
    ),
    Row(
        "README.md",
        "mmrun image -m qwen2_5_vl -i photos/ --json-schema fields.json -o fields.jsonl",
        DRY,
        HUB,
    ),
    Row(
        "docs/index.md",
        "mmrun image -m qwen2_5_vl -i photo.jpg -q 'What is in this picture?'",
        DRY,
        HUB,
    ),
    Row("docs/index.md", "mmrun audio -m whisper -a talk.wav", DRY, HUB),
    Row("docs/index.md", "mmrun models image"),
    Row("docs/index.md", "mmrun image -m idefics3 -i a.png -i b.png --dry-run"),
    Row("docs/index.md", "mmrun image -m qwen2_5_vl -n 2", DRY, HUB),
    Row("docs/index.md", "mmrun selftest", PARSE, SELFTEST),
    Row(
        "docs/scaling.md",
        "mmrun image -m qwen2_5_vl --input photos.jsonl -o captions.jsonl -dp 4",
        PARSE,
        GPUS,
    ),
    Row(
        "docs/scaling.md",
        "'RAY_ADDRESS=<head>:6379' mmrun image -m qwen2_5_vl --input photos.jsonl -o captions.jsonl --backend ray --replicas 8",
        PARSE,
        RAY,
    ),
    Row("docs/usage.md", "mmrun image -m idefics3 -i a.png -i b.png --dry-run"),
    Row("docs/usage.md", "mmrun audio -m qwen2_audio -a clip.wav -q 'What do you hear?' --dry-run"),
    Row("docs/usage.md", "mmrun audio -m whisper --dry-run"),
    Row("docs/usage.md", "mmrun image --model qwen2_5_vl --dry-run"),
    Row("docs/usage.md", "mmrun image -m qwen2_5_vl --model ./ckpt --dry-run"),
    Row("docs/usage.md", "mmrun image -m idefics3 -i a.png -i b.png --dry-run --json"),
    Row("docs/usage.md", "mmrun image -m idefics3 -i a.png -i b.png --dry-run --json"),
    Row("docs/usage.md", "mmrun models --json"),
    Row("docs/usage.md", "mmrun audio -m whisper -a clip.wav --method chat --dry-run"),
    Row("docs/usage.md", "mmrun image --model ./my-qwen2_5_vl-finetune -i a.png --dry-run"),
    Row("docs/usage.md", "mmrun image --model ./internvl3 -i a.png --dry-run --json"),
    Row(
        "docs/usage.md",
        "mmrun image --model ./my-qwen2_5_vl-finetune -m auto -i a.png --dry-run --quiet",
    ),
    Row("docs/usage.md", "mmrun image --model ./llama -i a.png --dry-run"),
    Row("docs/usage.md", "mmrun image --model ./my-llava -i a.png --dry-run"),
    Row("docs/usage.md", "mmrun selftest --keep /tmp/selftest", PARSE, SELFTEST),
    Row(
        "docs/usage.md",
        "mmrun image -m qwen2_5_vl --model /tmp/tinyq -i a.png --max-tokens 8 --engine-arg max_model_len=2048",
        shown=False,
        why=NOISE,
    ),
    Row(
        "docs/usage.md",
        "mmrun image -m qwen2_5_vl --model /tmp/tinyq -i a.png -i b.png --num-prompts 2 --max-tokens 8 --engine-arg max_model_len=2048 --json",
        shown=False,
        why=NOISE,
    ),
    Row(
        "docs/usage.md",
        "mmrun image -m qwen2_5_vl --model tinyq --input manifest.jsonl -o out.jsonl --max-tokens 8 --engine-arg max_model_len=2048 -tp 1",
    ),
    Row(
        "docs/usage.md",
        "mmrun image -m qwen2_5_vl --model tinyq --input manifest.jsonl -o out.jsonl --max-tokens 8 --engine-arg max_model_len=2048 -tp 1",
    ),
    Row(
        "docs/usage.md",
        "mmrun image -m qwen2_5_vl --model tinyq --input manifest.jsonl -o out.jsonl --max-tokens 16 --engine-arg max_model_len=2048 -tp 1",
    ),
    Row(
        "docs/usage.md",
        'mmrun image -m qwen2_5_vl --model tinyq -i photos/red.png --json-schema \'{"type": "objekt"}\'',
    ),
    Row(
        "docs/usage.md",
        "mmrun image -m qwen2_5_vl --model tinyq -i photos/red.png --json-schema schema.json --dry-run --json",
    ),
    Row(
        "docs/usage.md",
        "mmrun image -m qwen2_5_vl --model tinyq -i photos/ --json-schema schema.json -o fields.jsonl --max-tokens 64 --engine-arg max_model_len=2048 -tp 1 -q 'Describe the picture as JSON: its main color, how many objects it shows, whether one is an animal.'",
        exit_code=3,
        shown=False,
        why=STANDIN,
    ),
    Row(
        "docs/usage.md",
        "mmrun image -m qwen2_5_vl --model tinyq -i photos/red.png --choice cat,dog,bird --quiet --engine-arg max_model_len=2048 -tp 1 -q 'Which animal is this?'",
    ),
    Row(
        "docs/usage.md",
        "mmrun image -m qwen2_5_vl --model tinyq --input manifest.jsonl -o out.jsonl --max-tokens 64 --engine-arg max_model_len=2048 -tp 1",
        exit_code=3,
        shown=False,
        why=STANDIN,
    ),
    Row(
        "docs/usage.md",
        "mmrun image -m qwen2_5_vl --model tinyq --input manifest.jsonl -o out.jsonl --max-tokens 64 --engine-arg max_model_len=2048 -tp 1",
        exit_code=3,
        shown=False,
        why=STANDIN,
    ),
    Row(
        "docs/usage.md",
        "mmrun image -m qwen2_5_vl --model tinyq --input photos.parquet --columns id=uid,image=img,question=prompt --keep-columns label -o results.parquet --max-tokens 8 --engine-arg max_model_len=2048 -tp 1",
    ),
    Row(
        "docs/usage.md",
        "mmrun image -m qwen2_5_vl --model tinyq --input photos.csv --columns question=prompt",
    ),
    Row(
        "docs/usage.md",
        "mmrun image -m qwen2_5_vl --model tinyq --input photos.csv -o out.csv --max-tokens 8 --engine-arg max_model_len=2048 -tp 1",
    ),
    Row(
        "docs/usage.md",
        "HF_HUB_OFFLINE=1 mmrun image -m qwen2_5_vl --model tinyq --input hf://datasets/acme/photos --split test -o hub.jsonl --max-tokens 8 --engine-arg max_model_len=2048 -tp 1",
    ),
    Row(
        "docs/usage.md",
        "mmrun image -m qwen2_5_vl --model tinyq --input batch.jsonl -o answers.jsonl --output-format openai --max-tokens 8 --engine-arg max_model_len=2048 -tp 1",
    ),
    Row(
        "docs/usage.md",
        "mmrun image -m qwen2_5_vl --input MMBench_DEV_EN.tsv --columns id=index --keep-columns answer --question-template 'Hint: {hint}\\nQuestion: {question}\\nA. {A}\\nB. {B}\\nC. {C}\\nD. {D}' -o mmbench.jsonl",
        DRY,
        HUB,
        shown=False,
    ),
    Row("docs/usage.md", "mmrun score mmbench.jsonl -r meta.answer --metric choice", PARSE, CHAIN),
    Row(
        "docs/usage.md",
        "mmrun image -m qwen2_5_vl --input llava.json --media-root images -o llava.jsonl",
        DRY,
        HUB,
        shown=False,
    ),
    Row(
        "docs/usage.md",
        "mmrun score llava.jsonl -r meta.reference --metric chrf --in-place",
        PARSE,
        CHAIN,
    ),
    Row(
        "docs/usage.md",
        "mmrun audio -m whisper --input cv-corpus-en/test.tsv --columns audio=path --media-root cv-corpus-en/clips --keep-columns sentence -o cv.jsonl",
    ),
    Row("docs/usage.md", "mmrun score cv.jsonl -r meta.sentence --metric wer"),
    Row(
        "docs/usage.md", "mmrun audio -m whisper --audio LibriSpeech/test-clean -o test-clean.jsonl"
    ),
    Row("docs/usage.md", "mmrun score test-clean.jsonl -r LibriSpeech/test-clean --metric wer"),
    Row("docs/usage.md", "mmrun serve -m qwen2_5_vl --dry-run"),
    Row("docs/usage.md", "mmrun serve -m qwen2_5_vl", PARSE, SERVER),
    Row("docs/usage.md", "mmrun serve -m qwen2_5_vl --detach --port 8000", PARSE, SERVER),
    Row("docs/usage.md", "mmrun image -m qwen2_5_vl -i photos/ -o captions.jsonl", PARSE, REMOTE),
    Row(
        "docs/usage.md",
        "mmrun image -m qwen2_5_vl --input questions.jsonl --json-schema fields.json -o fields.jsonl",
        PARSE,
        REMOTE,
    ),
    Row("docs/usage.md", "mmrun serve --stop", PARSE, SERVER),
    Row(
        "docs/usage.md",
        "mmrun image -m qwen2_5_vl --model /tmp/tinyq -i a.png --num-prompts 2 --max-tokens 8 --engine-arg max_model_len=2048 --quiet",
        shown=False,
        why=NOISE,
    ),
    Row("docs/usage.md", "mmrun image -m mistral3 -i a.png --dry-run --quiet"),
    Row(
        "docs/usage.md",
        "mmrun video -m qwen3_vl --video talk.mp4 --fps 0.0333 --num-frames 32 --max-pixels 1024 --dry-run",
    ),
    Row(
        "docs/usage.md",
        "mmrun video -m qwen2_5_vl --video clip.mp4 --num-frames 100 --method chat --dry-run",
    ),
    Row("docs/usage.md", "mmrun video --video cut.mp4 --dry-run"),
    Row("docs/usage.md", "mmrun video --video speech.wav --dry-run"),
    Row("docs/usage.md", "mmrun video -m qwen2_5_vl --video clip.mp4 --image photo.png --dry-run"),
    Row("docs/usage.md", "HF_HUB_OFFLINE=1 mmrun image -m llava -i a.png --dry-run"),
    Row("docs/usage.md", "mmrun image -m llava -i a.png --dry-run", PROCESS, ONCE),
    Row("docs/usage.md", "mmrun image -m mistral3 -i http://127.0.0.1:8765/a.png --dry-run --json"),
    Row("docs/usage.md", "mmrun image -m mistral3 -i http://127.0.0.1:8765/a.png --dry-run --json"),
    Row(
        "docs/usage.md",
        "XDG_CACHE_HOME=/tmp/demo/xdg mmrun image -m mistral3 -i http://127.0.0.1:8765/a.png --dry-run --json",
    ),
    Row("docs/usage.md", "mmrun audio -m whisper -a song.m4a --dry-run"),
    Row("docs/usage.md", "mmrun audio -m whisper -a cut.aiff --dry-run"),
    Row(
        "docs/usage.md",
        "mmrun image -m mistral3 -i a.png --engine-arg max_model_lenn=4096 --dry-run",
        PROCESS,
        ONCE,
    ),
    Row("docs/usage.md", "mmrun image -m mistral3 -i a.png --sampling-arg top_p=0 --dry-run"),
    Row(
        "docs/usage.md", "mmrun image -m mistral3 -i photos --dry-run --json", exit_code=0, why=PIPE
    ),
    Row("docs/usage.md", "mmrun image -m qwen25_vl --dry-run"),
    Row("docs/usage.md", "mmrun image -m qwen_vl_chat -i a.png --dry-run"),
    Row("docs/usage.md", "mmrun image -m mistral3 -i missing.png --dry-run"),
    Row("docs/usage.md", "mmrun image -m mistral3 -i http://127.0.0.1:9/a.png --dry-run"),
    Row("docs/usage.md", "mmrun selftest", PARSE, SELFTEST),
    Row(
        "docs/usage.md",
        "mmrun score small.jsonl --reference refs.jsonl --reference-field text --metric wer --metric cer --in-place",
        shown=False,
        why=SCORES,
    ),
    Row(
        "docs/usage.md",
        "mmrun score large.jsonl --reference refs.jsonl --reference-field text --metric wer --metric cer --in-place",
        shown=False,
        why=SCORES,
    ),
    Row(
        "docs/usage.md",
        "mmrun score small.jsonl -r refs.jsonl --reference-field text --metric wer --fail-above 0.05 --json",
        shown=False,
        why=SCORES,
    ),
    Row("docs/usage.md", "mmrun score small.jsonl -r meta.answer --metric wer"),
    Row(
        "docs/usage.md",
        "mmrun compare small.jsonl large.jsonl -o compare.html",
        shown=False,
        why=SCORES,
    ),
    Row("docs/usage.md", "mmrun compare small.jsonl large.jsonl --json", shown=False, why=SCORES),
    Row("docs/writing-plugins.md", "mmrun models image --json"),
    Row("docs/writing-plugins.md", "mmrun image -m llava-interleave -i a.png -i b.png --dry-run"),
    Row(
        "docs/writing-plugins.md",
        "MMRUN_PLUGINS= mmrun image -m llava-interleave -i a.png --dry-run",
        PROCESS,
        ONCE,
    ),
]
# The environment of a command beyond the docs' own prefix: the walkthrough's machine had no
# network (a name that never resolves stands in for the Hub's).
HOME = {"MMRUN_CACHE_DIR": None, "XDG_CACHE_HOME": None, "HOME": "root"}
ENVS: dict[str, dict[str, str | None]] = {
    "mmrun image -m mistral3 -i http://127.0.0.1:8765/a.png --dry-run --json": HOME,
    "mmrun image -m llava -i a.png --dry-run": {
        "HF_HUB_OFFLINE": None,
        "HF_ENDPOINT": "https://huggingface.invalid",
    },
}


@pytest.fixture(scope="module")
def sandboxes() -> Iterator[dict[tuple[str, str], Sandbox]]:
    made: dict[tuple[str, str], Sandbox] = {}
    yield made
    for box in made.values():
        box.servers.close()


def sandbox_of(
    command: DocCommand, sandboxes: dict[tuple[str, str], Sandbox], root: Path
) -> Sandbox:
    key = (command.doc, command.line.section)
    if key not in sandboxes:
        name = re.sub(r"\W+", "-", "-".join(key)).strip("-")
        sandboxes[key] = Sandbox(*key, root / name)
    return sandboxes[key]


def test_every_doc_command_is_listed() -> None:
    found = [(c.doc, c.command) for c in doc_commands()]
    assert found == [(r.doc, r.command) for r in COMMANDS]


@pytest.mark.parametrize(
    "n",
    range(len(COMMANDS)),
    ids=[f"{r.doc.removeprefix('docs/')}: {r.command}"[:100] for r in COMMANDS],
)
def test_doc_command(
    n: int, sandboxes: dict[tuple[str, str], Sandbox], tmp_path_factory: pytest.TempPathFactory
) -> None:
    command, row = doc_commands()[n], COMMANDS[n]
    if row.how == PARSE:
        parse_check(command.args)
        return
    box = sandbox_of(command, sandboxes, tmp_path_factory.getbasetemp() / "docs")
    ran = box.run_until(command)
    assert ran.code == expected_exit(command, row), ran.result.output
    if row.shown:
        assert missing_lines(command.output, ran.printed, box.here) == [], ran.printed


def expected_exit(command: DocCommand, row: Row) -> int:
    """The row's own, else what `echo $?` shows after it; an error line shown after a
    command without it: 2, the usage error most errors of the docs are."""
    if row.exit_code is not None:
        return row.exit_code
    if (
        command.exit_code == 0
        and command.output[:1]
        and command.output[0].startswith("mmrun: error:")
    ):
        return 2
    return command.exit_code


def parse_check(args: list[str]) -> None:
    """The command line parses against the real app: every option exists, every choice is
    valid, every -m a registered key (of the command's modality), without running it."""
    import typer

    from mmrun.cli.main import app
    from mmrun.plugins import get_registry

    group = typer.main.get_command(app)
    with group.make_context("mmrun", list(args), resilient_parsing=False) as ctx:
        words = [*ctx._protected_args, *ctx.args]
        name, sub, rest = group.resolve_command(ctx, words)
        assert sub is not None and name is not None
        with sub.make_context(name, rest, parent=ctx) as sub_ctx:
            key = sub_ctx.params.get("key")
            if key not in (None, "auto"):
                modality = name if name in ("image", "audio", "video") else None
                registry = get_registry()
                assert any(spec.key == key for spec in registry.specs(modality)), key
