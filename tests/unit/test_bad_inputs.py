"""Every way a user can hand mmrun something wrong, and what they get back.

Each case checks the whole contract: exactly one line on stderr, ``mmrun: error: <what is
wrong> (<what to do>)``; the documented exit code (2 usage or input, 1 run failure); no
traceback; nothing on stdout; and a cache folder with no partial download and no file that a
later run would trust. Most cases run in-process, through the entry point's error boundary
(tests.helpers.cli); the ones where the process boundary matters (permissions, a missing
vLLM, the real entry point) run ``python -m mmrun``.
"""

from __future__ import annotations

import base64
import ctypes
import http.server
import io
import json
import multiprocessing
import os
import struct
import subprocess
import sys
import time
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import soundfile

from mmrun.errors import EXIT_FAILURE, EXIT_USAGE
from mmrun.media import download
from tests.helpers.cli import in_process
from tests.helpers.http import PNG, ScriptedServer, partial_files, reply, trusted_files


@dataclass(frozen=True)
class Outcome:
    code: int
    stdout: str
    stderr: str


def cli(*args: str, env: dict[str, str] | None = None) -> Outcome:
    result = in_process(args, env=env)
    return Outcome(result.exit_code, result.stdout, result.stderr)


def mmrun(*args: str, env: dict[str, str] | None = None, **popen: Any) -> Outcome:
    proc = subprocess.run(
        [sys.executable, "-m", "mmrun", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=120,
        **popen,
    )
    return Outcome(proc.returncode, proc.stdout, proc.stderr)


def check(outcome: Outcome, code: int, *fragments: str, cache: Path | None) -> str:
    """The contract of a failed run; returns the error line."""
    assert "Traceback" not in outcome.stderr, outcome.stderr
    assert outcome.code == code, outcome.stderr
    assert outcome.stdout == ""
    lines = outcome.stderr.splitlines()
    assert len(lines) == 1, outcome.stderr
    line = lines[0]
    assert line.startswith("mmrun: error: "), line
    assert line.endswith(")"), f"no hint on what to do: {line}"  # "what is wrong (what to do)"
    for fragment in fragments:
        assert fragment in line, line
    if cache is not None:
        assert partial_files(cache) == []
        assert trusted_files(cache) == []
    return line


# --- media files, built once -------------------------------------------------------------------


def _png_chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def bomb_png(width: int, height: int) -> bytes:
    """A valid 1-bit PNG of width x height pixels that is only a few kB: all rows are zero."""
    row = b"\0" * (1 + (width + 7) // 8)
    packer = zlib.compressobj(9)
    pixels = b"".join(packer.compress(row) for _ in range(height)) + packer.flush()
    header = struct.pack(">IIBBBBB", width, height, 1, 0, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + _png_chunk(b"IHDR", header)
        + _png_chunk(b"IDAT", pixels)
        + _png_chunk(b"IEND", b"")
    )


@pytest.fixture(scope="session")
def bad(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from PIL import Image

    folder = tmp_path_factory.mktemp("bad-media")
    (folder / "empty.png").write_bytes(b"")
    (folder / "text.png").write_bytes(b"<html>this is a web page, not a picture</html>\n")
    buffer = io.BytesIO()
    Image.new("RGB", (64, 64), (200, 10, 10)).save(buffer, format="JPEG")
    jpeg = buffer.getvalue()
    (folder / "truncated.jpg").write_bytes(jpeg[: len(jpeg) // 2])
    # 20000 x 10000 = 200 M pixels in a 25 kB file: over mmrun's limit (178,956,970); before
    # mmrun checked it itself, Pillow only warned up to twice that, and mmrun decoded it.
    (folder / "bomb.png").write_bytes(bomb_png(20_000, 10_000))
    (folder / "blue.png").write_bytes(PNG)
    (folder / "not-audio.wav").write_bytes(b"RIFF? no: just some text pretending to be a wav\n")
    t = np.linspace(0, 31, 16000 * 31, dtype=np.float32)
    soundfile.write(
        folder / "long.ogg",
        0.3 * np.sin(2 * np.pi * 440 * t),
        16000,
        format="OGG",
        subtype="VORBIS",
    )
    ogg = (folder / "long.ogg").read_bytes()
    (folder / "corrupt.ogg").write_bytes(ogg[:200] + b"\0" * 500 + ogg[700:4000])
    soundfile.write(folder / "short.wav", 0.3 * np.sin(2 * np.pi * 440 * t[:16000]), 16000)
    (folder / "a-folder.png").mkdir()
    os.mkfifo(folder / "fifo.png")
    return folder


IMAGE = ("image", "-m", "mistral3")  # a model whose dry run needs no template from the Hub
DRY = ("--dry-run",)


# --- the command line itself ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (
            ["image", "-m", "qwen25_vl"],
            ["unknown image model 'qwen25_vl'", "did you mean 'qwen2_5_vl'"],
        ),
        (["image", "-m", "whisper"], ["'whisper' is an audio model", "mmrun audio -m whisper"]),
        (["audio", "-m", "zzzzzz"], ["unknown audio model", "mmrun models audio"]),
    ],
)
def test_unknown_model_key(args: list[str], fragments: list[str], isolated_cache: Path) -> None:
    check(cli(*args, *DRY), EXIT_USAGE, *fragments, cache=isolated_cache)


CLICK_ERRORS = [
    (["imag"], ["no such command 'imag'", "mmrun --help"]),
    (["image", "--bogus"], ["no such option: --bogus", "mmrun image --help"]),
    (["image", "-n", "four"], ["invalid value for '--num-images' / '-n'"]),
    (["image", "--num-prompts", "0"], ["invalid value for '--num-prompts'"]),
    (["audio", "-m"], ["option '-m' requires an argument"]),
]


@pytest.mark.parametrize(("args", "fragments"), CLICK_ERRORS)
def test_click_usage_errors_are_one_line(
    args: list[str], fragments: list[str], isolated_cache: Path
) -> None:
    check(cli(*args), EXIT_USAGE, *fragments, cache=isolated_cache)


def test_help_version_and_bare_mmrun_are_no_errors() -> None:
    """What the boundary leaves to Typer: help, the version, and bare `mmrun` (the help)."""
    assert cli("--help").code == 0 and cli("--version").code == 0
    bare = cli()
    assert bare.code == 2 and "Usage" in bare.stdout + bare.stderr
    assert "mmrun: error" not in bare.stdout + bare.stderr


def test_unknown_command_through_the_real_entry_point(isolated_cache: Path) -> None:
    check(mmrun("imag"), EXIT_USAGE, "no such command 'imag'", cache=isolated_cache)


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (
            [*IMAGE, "-n", "13"],
            [
                "mmrun: error: -n 13: `mmrun image` has 12 default images (name 13 files with --image)"
            ],
        ),
        ([*IMAGE, "-n", "0"], ["-n 0 is out of range"]),
        ([*IMAGE, "-n", "-3"], ["-n -3 is out of range"]),
        (["audio", "-m", "whisper", "-n", "2"], ["-n 2 is out of range for whisper"]),
    ],
)
def test_count_out_of_range(args: list[str], fragments: list[str], isolated_cache: Path) -> None:
    check(cli(*args, *DRY), EXIT_USAGE, *fragments, cache=isolated_cache)


def test_num_prompts_beyond_any_batch(isolated_cache: Path) -> None:
    """A typo of a few zeros must fail at once, not build a billion-entry plan in memory."""
    check(
        cli(*IMAGE, "--num-prompts", "1000000000", *DRY),
        EXIT_USAGE,
        "--num-prompts 1000000000 is more than",
        cache=isolated_cache,
    )


@pytest.mark.parametrize("value", ["inf", "1e999"])  # nan is refused by the option parser
def test_temperature_not_a_finite_number(value: str, isolated_cache: Path) -> None:
    check(
        cli(*IMAGE, "--temperature", value, *DRY),
        EXIT_USAGE,
        "--temperature must be a finite number",
        cache=isolated_cache,
    )


@pytest.mark.parametrize("value", ["abc", "1.5", "true", "[1]"])
def test_a_sampling_seed_that_is_not_an_integer(value: str, isolated_cache: Path) -> None:
    """vLLM accepts any value as a request's seed and fails only in the engine."""
    check(
        cli(*IMAGE, "--sampling-arg", f"seed={value}", *DRY),
        EXIT_USAGE,
        "--sampling-arg seed must be an integer",
        cache=isolated_cache,
    )


def test_more_media_than_the_model_takes(bad: Path, isolated_cache: Path) -> None:
    wav = str(bad / "short.wav")
    check(
        cli("audio", "-m", "whisper", "-a", wav, "-a", wav, *DRY),
        EXIT_USAGE,
        "whisper takes at most 1 audio per prompt, got 2",
        "give at most 1",
        cache=isolated_cache,
    )


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("--engine-arg", "oops"),
        ("--engine-arg", "=3"),
        ("--engine-arg", "1x=2"),
        ("--sampling-arg", "ignore_eos"),
    ],
)
def test_invalid_key_value_argument(option: str, value: str, isolated_cache: Path) -> None:
    line = check(
        cli(*IMAGE, option, value, *DRY),
        EXIT_USAGE,
        f"{value!r}",
        "KEY=VALUE",
        cache=isolated_cache,
    )
    assert "invalid --" in line


# --- local files -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "fragments"),
    [
        ("missing.png", ["no such file", "check the path"]),
        ("blue.png/inside", ["no such file"]),  # a path through a file
        # A folder is a batch of the image files in it: an empty one is refused.
        ("a-folder.png", ["holds no image files", "mmrun looks for .jpg"]),
        ("fifo.png", ["is not a regular file"]),  # would block a plain read forever
        ("empty.png", ["is empty (0 bytes)"]),
        ("text.png", ["is not an image"]),
        ("truncated.jpg", ["is not a readable image", "truncated"]),
        ("bomb.png", ["more than the 178,956,970 pixels", "downscale"]),
    ],
)
def test_bad_image_file(bad: Path, name: str, fragments: list[str], isolated_cache: Path) -> None:
    check(cli(*IMAGE, "-i", str(bad / name), *DRY), EXIT_USAGE, *fragments, cache=isolated_cache)


def test_pixel_limit_holds_whatever_pillow_is_told(
    bad: Path, isolated_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Code that shares the process may lift Pillow's global limit (to read big scans, say);
    mmrun's own check still refuses the bomb, before decoding it."""
    from PIL import Image

    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", None)
    check(
        cli(*IMAGE, "-i", str(bad / "bomb.png"), *DRY),
        EXIT_USAGE,
        "bomb.png is 20000x10000 pixels: more than the 178,956,970",
        cache=isolated_cache,
    )


def test_a_device_is_not_read_forever(isolated_cache: Path) -> None:
    check(
        cli(*IMAGE, "-i", "/dev/zero", *DRY),
        EXIT_USAGE,
        "/dev/zero is not a regular file",
        cache=isolated_cache,
    )


def test_a_local_file_over_the_size_cap_is_not_read(tmp_path: Path, isolated_cache: Path) -> None:
    """Local files have a cap, as downloads do: a 3 GB (sparse) file is refused from its size,
    before a byte of it is read into memory."""
    big = tmp_path / "huge.png"
    with open(big, "wb") as file:
        file.truncate(3 << 30)
    start = time.monotonic()
    check(
        cli(*IMAGE, "-i", str(big), *DRY),
        EXIT_USAGE,
        "huge.png is 3,072.0 MB: more than the 200 MB that mmrun reads from a local file",
        "MMRUN_MAX_FILE_MB",
        cache=isolated_cache,
    )
    assert time.monotonic() - start < 5
    check(
        cli(*IMAGE, "-i", str(big), *DRY, env={"MMRUN_MAX_FILE_MB": "0.001"}),
        EXIT_USAGE,
        "more than the 0.001 MB that mmrun reads",
        cache=isolated_cache,
    )
    (tmp_path / "small.png").write_bytes(PNG)
    assert (
        cli(*IMAGE, "-i", str(tmp_path / "small.png"), *DRY, env={"MMRUN_MAX_FILE_MB": "1"}).code
        == 0
    )


def test_control_characters_in_a_source_stay_escaped_on_one_line(isolated_cache: Path) -> None:
    """A newline would split the one line; an escape sequence would reach the terminal raw."""
    check(
        cli(*IMAGE, "-i", "two\nlines\x1b[2J.png", *DRY),
        EXIT_USAGE,
        "no such file: two\\nlines\\x1b[2J.png",
        cache=isolated_cache,
    )


@pytest.mark.parametrize("source", ["", "   ", "nul\x00byte.png"])
def test_empty_or_impossible_source(source: str, isolated_cache: Path) -> None:
    fragment = "is not a valid path" if "\x00" in source else "empty media source"
    check(cli(*IMAGE, "-i", source, *DRY), EXIT_USAGE, fragment, cache=isolated_cache)


def _without_read_permission() -> None:  # runs in the child, between fork and exec
    """Drop the capabilities that let root read any file (DAC override and read-search) from
    the bounding set: the child, still root, then meets file permissions like anyone."""
    libc = ctypes.CDLL(None, use_errno=True)
    pr_capbset_drop, cap_dac_override, cap_dac_read_search = 24, 1, 2
    for cap in (cap_dac_override, cap_dac_read_search):
        if libc.prctl(pr_capbset_drop, cap, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


@pytest.mark.parametrize("where", ["file", "folder"])
def test_unreadable_file(tmp_path: Path, where: str, isolated_cache: Path) -> None:
    """chmod 000 on the file, or on its folder. Root reads through permissions, so as root the
    process runs without CAP_DAC_OVERRIDE / CAP_DAC_READ_SEARCH (a real EACCES, no mock)."""
    folder = tmp_path / "private"
    folder.mkdir()
    image = folder / "secret.png"
    image.write_bytes(PNG)
    locked = image if where == "file" else folder
    locked.chmod(0)
    popen: dict[str, Any] = {}
    try:
        if os.geteuid() == 0:
            popen["preexec_fn"] = _without_read_permission
        outcome = mmrun(*IMAGE, "-i", str(image), *DRY, **popen)
    except subprocess.SubprocessError as exc:
        pytest.skip(f"cannot drop root's read-any-file capabilities here: {exc}")
    finally:
        locked.chmod(0o700)
    check(
        outcome,
        EXIT_USAGE,
        f"cannot read {image}: permission denied",
        "check its permissions",
        cache=isolated_cache,
    )


# --- data: URIs and URLs ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("uri", "fragments"),
    [
        ("data:image/png;base64", ["malformed data: URI (no comma)"]),
        ("data:image/png;base64,!!!not-base64!!!", ["malformed data: URI (bad base64)"]),
        ("data:image/png;base64,", ["data: URI is empty"]),
        ("data:text/plain,hello", ["the data: URI is not an image"]),
        (
            "data:image/png;base64," + base64.b64encode(b"GIF89a garbage").decode(),
            ["the data: URI is not"],
        ),
    ],
)
def test_malformed_data_uri(uri: str, fragments: list[str], isolated_cache: Path) -> None:
    check(cli(*IMAGE, "-i", uri, *DRY), EXIT_USAGE, *fragments, cache=isolated_cache)


@pytest.mark.parametrize(
    ("url", "fragments"),
    [
        ("ftp://example.com/a.png", ["unsupported URL scheme 'ftp'"]),
        ("gopher://example.com/a.png", ["unsupported URL scheme 'gopher'"]),
        ("file://example.com/a.png", ["names host 'example.com': only local files are read"]),
        ("file:///nonexistent/a.png", ["no such file: file:///nonexistent/a.png"]),
        ("http://[::1/a.png", ["malformed URL", "check the URL"]),
        ("http://", ["malformed URL", "names no host"]),
        ("http://a:port/a.png", ["malformed URL"]),
    ],
)
def test_unusable_url(url: str, fragments: list[str], isolated_cache: Path) -> None:
    check(cli(*IMAGE, "-i", url, *DRY), EXIT_USAGE, *fragments, cache=isolated_cache)


def test_http_404_is_one_request(server: ScriptedServer, isolated_cache: Path) -> None:
    check(
        cli(*IMAGE, "-i", server.url("/missing.png"), *DRY),
        EXIT_FAILURE,
        "HTTP 404",
        "check the URL",
        cache=isolated_cache,
    )
    assert server.count("/missing.png") == 1


def test_http_500_is_retried_then_fails(
    server: ScriptedServer, fast_retries: None, isolated_cache: Path
) -> None:
    server.routes["/x.png"] = lambda h: reply(h, 500, b"oops")
    check(
        cli(*IMAGE, "-i", server.url("/x.png"), *DRY),
        EXIT_FAILURE,
        "HTTP 500",
        "try again later",
        cache=isolated_cache,
    )
    assert server.count("/x.png") == download.RETRIES


def test_connection_refused(fast_retries: None, isolated_cache: Path) -> None:
    import socket

    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    check(
        cli(*IMAGE, "-i", f"http://127.0.0.1:{port}/x.png", *DRY),
        EXIT_FAILURE,
        "Connection refused",
        "check the network",
        cache=isolated_cache,
    )


def test_server_stalls_past_the_timeout(
    server: ScriptedServer, fast_retries: None, isolated_cache: Path
) -> None:
    def stalls(h: http.server.BaseHTTPRequestHandler) -> None:
        server.stall(30)
        reply(h, 200, PNG)

    server.routes["/slow.png"] = stalls
    check(
        cli(*IMAGE, "-i", server.url("/slow.png"), *DRY, env={"MMRUN_DOWNLOAD_TIMEOUT": "1"}),
        EXIT_FAILURE,
        "timed out",
        "the timeout is 1 s (MMRUN_DOWNLOAD_TIMEOUT)",
        cache=isolated_cache,
    )


def test_redirect_loop(server: ScriptedServer, isolated_cache: Path) -> None:
    server.routes["/loop.png"] = lambda h: reply(h, 302, headers={"Location": "/loop.png"})
    check(
        cli(*IMAGE, "-i", server.url("/loop.png"), *DRY),
        EXIT_FAILURE,
        "too many redirects",
        cache=isolated_cache,
    )


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "no-content-length"])
def test_download_over_the_size_cap(
    server: ScriptedServer, chunked: bool, isolated_cache: Path
) -> None:
    server.routes["/big.png"] = lambda h: reply(h, 200, b"\0" * (2 << 20), chunked=chunked)
    check(
        cli(*IMAGE, "-i", server.url("/big.png"), *DRY, env={"MMRUN_MAX_DOWNLOAD_MB": "1"}),
        EXIT_FAILURE,
        "larger than the 1 MB cap",
        "MMRUN_MAX_DOWNLOAD_MB",
        cache=isolated_cache,
    )


def test_downloaded_bytes_that_are_not_an_image_are_not_kept(
    server: ScriptedServer, isolated_cache: Path
) -> None:
    server.routes["/page.png"] = lambda h: reply(h, 200, b"<html>sign in first</html>")
    for attempt in (1, 2):
        check(
            cli(*IMAGE, "-i", server.url("/page.png"), *DRY),
            EXIT_USAGE,
            "is not an image",
            cache=isolated_cache,
        )
        assert server.count("/page.png") == attempt  # fetched again: nothing cached to trust


def test_cache_folder_not_writable(tmp_path: Path, server: ScriptedServer) -> None:
    not_a_folder = tmp_path / "cache-is-a-file"
    not_a_folder.write_text("")
    line = check(
        cli(
            *IMAGE, "-i", server.url("/blue.png"), *DRY, env={"MMRUN_CACHE_DIR": str(not_a_folder)}
        ),
        EXIT_FAILURE,
        "cannot write to the cache folder",
        "MMRUN_CACHE_DIR",
        cache=None,
    )
    assert str(not_a_folder) in line


# --- audio ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "fragments"),
    [
        ("not-audio.wav", ["is not audio in a format mmrun reads", "MP3, Ogg (Vorbis or Opus)"]),
        ("corrupt.ogg", ["is a damaged or truncated Ogg Vorbis file", "export it again"]),
        ("blue.png", ["is not audio in a format mmrun reads"]),
    ],
)
def test_bad_audio_file(bad: Path, name: str, fragments: list[str], isolated_cache: Path) -> None:
    line = check(
        cli("audio", "-m", "qwen2_audio", "-a", str(bad / name), *DRY),
        EXIT_USAGE,
        *fragments,
        cache=isolated_cache,
    )
    assert "BytesIO" not in line  # mmrun's words, not Python's object repr
    assert "." not in line.split(str(bad / name))[1]  # nor libsndfile's sentences


def test_audio_longer_than_the_model_takes(bad: Path, isolated_cache: Path) -> None:
    check(
        cli("audio", "-m", "whisper", "-a", str(bad / "long.ogg"), *DRY),
        EXIT_USAGE,
        "long.ogg is 31.0 s long; whisper takes at most 30 s",
        "trim it to 30 s",
        "long-form model",
        cache=isolated_cache,
    )


def test_audio_too_long_fails_before_the_engine_starts(
    bad: Path, isolated_cache: Path, engine_env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mmrun import engine

    def must_not_start(engine_args: Any) -> Any:
        raise AssertionError("the engine was started for a clip the model cannot take")

    monkeypatch.setattr(engine, "start", must_not_start)
    check(
        cli("audio", "-m", "whisper", "-a", str(bad / "long.ogg"), "--quiet"),
        EXIT_USAGE,
        "whisper takes at most 30 s",
        cache=isolated_cache,
    )


# --- the model and vLLM --------------------------------------------------------------------------


def test_remote_code_not_allowed(isolated_cache: Path) -> None:
    check(
        cli("image", "-m", "phi3_v", *DRY),
        EXIT_USAGE,
        "phi3_v runs Python code from the model repository microsoft/Phi-3.5-vision-instruct",
        "pass --trust-remote-code",
        cache=isolated_cache,
    )


def test_model_not_supported_by_the_installed_vllm(
    bad: Path, isolated_cache: Path, engine_env: None
) -> None:
    from mmrun.support import vllm_info

    line = check(
        cli("image", "-m", "aya_vision", "-i", str(bad / "blue.png"), "--quiet"),
        EXIT_USAGE,
        f"the installed vLLM {vllm_info().version} does not support aya_vision",
        cache=isolated_cache,
    )
    last = vllm_info().removed["AyaVisionForConditionalGeneration"]
    assert f"vLLM {last} and earlier support it" in line and f"vllm<={last}" in line


SHIM_NO_VLLM = """\
# Makes vLLM look absent to this interpreter without uninstalling it: `import vllm` fails
# and importlib.util.find_spec("vllm") answers None.
import sys
sys.modules["vllm"] = None
"""


def test_vllm_not_installed(tmp_path: Path, bad: Path, isolated_cache: Path) -> None:
    (tmp_path / "sitecustomize.py").write_text(SHIM_NO_VLLM)
    pythonpath = os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")]))
    outcome = mmrun(*IMAGE, "-i", str(bad / "blue.png"), "--quiet", env={"PYTHONPATH": pythonpath})
    check(
        outcome,
        EXIT_USAGE,
        "vLLM is not installed",
        "make install",
        "pip install vllm",
        cache=isolated_cache,
    )
    # A dry run does not need vLLM at all.
    dry = mmrun(*IMAGE, "-i", str(bad / "blue.png"), *DRY, env={"PYTHONPATH": pythonpath})
    assert dry.code == 0, dry.stderr


def test_vllm_that_cannot_be_imported(monkeypatch: pytest.MonkeyPatch) -> None:
    from mmrun import engine
    from mmrun.errors import MissingDependencyError

    monkeypatch.setitem(sys.modules, "vllm", None)
    with pytest.raises(MissingDependencyError, match="vLLM is not installed or cannot be imported"):
        engine.start({"model": "x"})


# --- engine failures, with vLLM's and torch's own words ---------------------------------------


# vllm/v1/worker/cpu_worker.py's start-up check, as logged in a worker process.
MEMORY_REASON = (
    "Available memory on node 0 (18.44/20.21 GiB) on startup is less than desired "
    "CPU memory utilization (0.92, 18.6 GiB)."
)


class OutOfMemoryError(RuntimeError):
    """Stands in for torch.OutOfMemoryError (same name, same base)."""


# Messages copied from vLLM 0.32 (v1/core/kv_cache_utils.py, v1/worker/utils.py,
# v1/worker/cpu_worker.py, v1/worker/gpu_model_runner.py) and from torch's CUDA allocator.
OOM_FAILURES: list[BaseException] = [
    ValueError(
        "No available memory for the cache blocks. Try increasing `gpu_memory_utilization` "
        "when initializing the engine (this flag also controls CPU memory reservation on the "
        "CPU backend, despite its name). See "
        "https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details."
    ),
    ValueError(
        "To serve at least one request with the model's max seq len (128000), (15.62 GiB KV "
        "cache is needed, which is larger than the available KV cache memory (4.10 GiB). Based "
        "on the available memory, the estimated maximum model length is 33584. Try increasing "
        "`gpu_memory_utilization` (which also controls CPU memory on the CPU backend) or "
        "decreasing `max_model_len` when initializing the engine. See "
        "https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details."
    ),
    ValueError(
        "Available memory on node 0 (1.20/23.47 GiB) on kv cache allocation is less than "
        "requested memory for kv (4.00 GiB). Decrease --kv-cache-memory-bytes, "
        "VLLM_CPU_KVCACHE_SPACE, or reduce CPU memory used by other processes."
    ),
    OutOfMemoryError(
        "CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.19 "
        "GiB of which 1.06 GiB is free. Including non-PyTorch memory, this process has 78.12 "
        "GiB memory in use."
    ),
    RuntimeError(
        "CUDA out of memory occurred when warming up sampler with 256 dummy requests. Please "
        "try lowering `max_num_seqs` or `gpu_memory_utilization` when initializing the "
        "engine."
    ),
    MemoryError(),
]
OOM_IDS = [
    "no-cache-blocks",
    "kv-cache-too-small",
    "cpu-kv-memory",
    "torch-oom",
    "sampler-warmup",
    "memoryerror",
]


def run_with_fake_engine(bad: Path) -> Outcome:
    return cli(*IMAGE, "-i", str(bad / "blue.png"), "--quiet")


@pytest.mark.parametrize(
    "failure",
    [
        ValueError(
            "Free memory on device cuda:0 (10.53/79.19 GiB) on startup is less than desired GPU "
            "memory utilization (0.9, 71.27 GiB). Decrease GPU memory utilization or reduce GPU "
            "memory used by other processes."
        ),
        ValueError(MEMORY_REASON),
    ],
    ids=["gpu", "cpu"],
)
def test_too_little_free_memory_for_the_share_asked(
    fake_vllm: Any, bad: Path, failure: BaseException, isolated_cache: Path
) -> None:
    """vLLM's start-up check that the share of memory it was given is free: the knob is
    gpu_memory_utilization, not the model's size."""
    fake_vllm.fail_start = failure
    check(
        run_with_fake_engine(bad),
        EXIT_FAILURE,
        "not enough free memory for the engine: ",
        "less than desired",
        "gpu_memory_utilization",
        cache=isolated_cache,
    )


@pytest.mark.parametrize("failure", OOM_FAILURES, ids=OOM_IDS)
@pytest.mark.parametrize("when", ["start", "step"])
def test_out_of_memory_names_the_knobs(
    fake_vllm: Any, bad: Path, when: str, failure: BaseException, isolated_cache: Path
) -> None:
    setattr(fake_vllm, f"fail_{when}", failure)
    if "requested memory for kv" in str(failure):  # the cache size the user set: its knob
        fragments = ("not enough free memory for the KV cache", "VLLM_CPU_KVCACHE_SPACE")
    else:
        fragments = ("the engine ran out of memory", "max_model_len", "max_num_seqs", "-tp")
    line = check(run_with_fake_engine(bad), EXIT_FAILURE, *fragments, cache=isolated_cache)
    # vLLM's reason whole (it used to be cut mid-word at 300 characters), then the hint.
    assert str(failure).split(". ")[0] in line or isinstance(failure, MemoryError)
    assert fake_vllm.shutdowns == (1 if when == "step" else 0)


@pytest.mark.parametrize(
    ("failure", "code", "fragments"),
    [
        (
            TypeError("EngineArgs.__init__() got an unexpected keyword argument 'not_a_field'"),
            EXIT_USAGE,
            ["vLLM rejected an engine argument", "not_a_field", "--engine-arg"],
        ),
        (
            ValueError("max_model_len (99999999) is greater than the derived max_model_len"),
            EXIT_USAGE,
            ["vLLM rejected the engine arguments"],
        ),
        (
            ValueError(
                "1 validation error for VllmConfig\n  Value error, Tensor parallel size (4) "
                "is larger than the number of devices [type=value_error, input_value=...]\n"
                "    For further information visit https://errors.pydantic.dev"
            ),
            EXIT_USAGE,
            [
                "vLLM rejected the engine arguments: 1 validation error for VllmConfig: "
                "Tensor parallel size (4) is larger than the number of devices ("
            ],
        ),
        (
            RuntimeError(
                "Engine core initialization failed. See root cause above. "
                "Failed core proc(s): {'EngineCore_DP0': 1}"
            ),
            EXIT_FAILURE,
            ["vLLM failed: RuntimeError: Engine core initialization failed", "-v"],
        ),
    ],
)
def test_other_engine_start_failures(
    fake_vllm: Any,
    bad: Path,
    failure: BaseException,
    code: int,
    fragments: Sequence[str],
    isolated_cache: Path,
) -> None:
    fake_vllm.fail_start = failure
    check(run_with_fake_engine(bad), code, *fragments, cache=isolated_cache)


def _engine_core(seconds: float) -> None:
    time.sleep(seconds)


class SlowStartLLM:
    """Starts like vLLM: a child process (the engine core) that takes ``start_s`` to come up;
    if it dies first, the start fails as vLLM's does."""

    start_s = 60.0

    def __init__(self, **engine_args: Any) -> None:
        core = multiprocessing.get_context("spawn").Process(
            target=_engine_core, args=(self.start_s,), name="EngineCore", daemon=True
        )
        core.start()
        core.join(timeout=120)
        if core.exitcode != 0:
            raise RuntimeError("Engine core initialization failed. See root cause above.")
        raise AssertionError("the start was meant to be stopped")


def _failing_engine_core(reason: str) -> None:
    """Fails as vLLM's engine core does: the reason goes to vLLM's log stream (which mmrun
    points at mmrun.engine.log_stream.STREAM) in this process, not to the process that started it."""
    import logging

    from mmrun.engine import log_stream

    handler = logging.StreamHandler(log_stream.STREAM)
    handler.setFormatter(logging.Formatter("(EngineCore pid=%(process)d) ERROR %(message)s"))
    log = logging.getLogger("fake-engine-core")
    log.addHandler(handler)
    try:
        raise ValueError(reason)
    except ValueError:
        log.exception("EngineCore failed to start.")
    sys.exit(1)


class FailingStartLLM:
    def __init__(self, **engine_args: Any) -> None:
        core = multiprocessing.get_context("spawn").Process(
            target=_failing_engine_core, args=(MEMORY_REASON,), name="EngineCore"
        )
        core.start()
        core.join(timeout=120)
        raise RuntimeError(
            "Engine core initialization failed. See root cause above. "
            "Failed core proc(s): {'EngineCore': 1}"
        )


def test_a_failed_start_names_the_reason_the_engine_process_logged(
    fake_vllm: Any, bad: Path, isolated_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys.modules["vllm"], "LLM", FailingStartLLM)
    check(
        run_with_fake_engine(bad),
        EXIT_FAILURE,
        f"not enough free memory for the engine: ValueError: {MEMORY_REASON}",
        "gpu_memory_utilization",
        "VLLM_CPU_KVCACHE_SPACE",
        cache=isolated_cache,
    )


def test_a_download_that_fails_while_the_engine_starts_stops_the_start(
    fake_vllm: Any,
    server: ScriptedServer,
    isolated_cache: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The engine starts while media download: a 404 ends the run at once with the download's
    error (not vLLM's), instead of after the engine start (tens of seconds on a real one)."""
    monkeypatch.setattr(sys.modules["vllm"], "LLM", SlowStartLLM)

    def late_404(handler: http.server.BaseHTTPRequestHandler) -> None:
        time.sleep(1.0)  # the engine core is up by then
        reply(handler, 404, b"gone")

    server.routes["/late.png"] = late_404
    started = time.monotonic()
    check(
        cli(*IMAGE, "-i", server.url("/late.png"), "--quiet"),
        EXIT_FAILURE,
        "HTTP 404",
        cache=isolated_cache,
    )
    assert time.monotonic() - started < 15  # SlowStartLLM alone takes 60 s
    assert multiprocessing.active_children() == []  # the engine core was killed


def test_engine_is_shut_down_when_a_media_item_fails_after_it_started(
    fake_vllm: Any, server: ScriptedServer, fast_retries: None, isolated_cache: Path
) -> None:
    """Media download overlaps engine start: a download that fails then must not leave the
    engine's processes to the interpreter's exit."""

    def late_503(handler: http.server.BaseHTTPRequestHandler) -> None:
        time.sleep(0.5)  # after the (instant) fake engine start
        reply(handler, 503, b"busy")

    server.routes["/x.png"] = late_503
    check(
        cli(*IMAGE, "-i", server.url("/x.png"), "--quiet"),
        EXIT_FAILURE,
        "HTTP 503",
        cache=isolated_cache,
    )
    assert fake_vllm.shutdowns == 1


class RecordingRenderer:
    def __init__(self, events: list[str]) -> None:
        self.events = events

    def render(self, messages: Any, *, source: Any, chat_template: str | None = None) -> str:
        self.events.append("render")
        return "<|im_start|>user\nPROMPT<|im_end|>\n"

    def token_id(self, token: str) -> int:
        return 0

    def eos_token_id(self) -> int:
        return 0


def blue_image_plan(bad: Path) -> Any:
    """The plan of one qwen2_5_vl prompt on the blue test image."""
    from mmrun.planning import RunOptions, plan
    from mmrun.plugins import get_registry
    from mmrun.support import vllm_info

    opts = RunOptions(
        modality="image", key="qwen2_5_vl", model="x", sources=(str(bad / "blue.png"),)
    )
    return plan(opts, get_registry(), vllm_info())


def test_the_prompt_is_not_rendered_while_vllms_frontend_imports(
    fake_vllm: Any, bad: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rendering imports transformers, and so does vLLM's start. Both at once, from two
    threads, broke vLLM's start on the H200 ("cannot import name 'PretrainedConfig' from
    'transformers'", in every run). The first prompt is built during the start only once vLLM's
    engine core process exists (see test_batch); an engine without one (this fake) renders
    after ``vllm.LLM`` has returned, still before the engine is handed over."""
    from mmrun import engine, runner

    events: list[str] = []
    real_start, construct = engine.start, fake_vllm.__init__

    def start(*args: Any, **kwargs: Any) -> Any:
        llm = real_start(*args, **kwargs)
        events.append("started")
        return llm

    def slow_construct(self: Any, **engine_args: Any) -> None:
        time.sleep(0.3)  # time enough for a thread that does not wait to render first
        construct(self, **engine_args)
        events.append("constructed")

    monkeypatch.setattr(engine, "start", start)
    monkeypatch.setattr(fake_vllm, "__init__", slow_construct)
    the_plan = blue_image_plan(bad)
    result, handle = runner.run_named(the_plan, lambda model, trust: RecordingRenderer(events))
    handle.close()
    assert events == ["constructed", "render", "started"]
    assert len(result.outputs) == 1


def test_a_failed_start_builds_no_prompt(
    fake_vllm: Any, bad: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mmrun import runner
    from mmrun.errors import MmrunError

    events: list[str] = []
    monkeypatch.setattr(fake_vllm, "fail_start", ValueError("no room"))
    the_plan = blue_image_plan(bad)
    with pytest.raises(MmrunError, match="no room"):
        runner.run_named(the_plan, lambda model, trust: RecordingRenderer(events))
    time.sleep(0.2)  # a warm-up thread left behind would have rendered by now
    assert events == []


# --- an image with each clip (mmrun video --image) ------------------------------------------------


@pytest.fixture(scope="module")
def clip_and_image(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    from tests.helpers.media import write_clip

    root = tmp_path_factory.mktemp("clip-and-image")
    image = root / "photo.png"
    image.write_bytes(PNG)
    return write_clip(root / "clip.mp4"), image


def test_an_image_with_a_clip_plans_both(clip_and_image: tuple[Path, Path]) -> None:
    clip, image = clip_and_image
    outcome = cli("video", "--video", str(clip), "--image", str(image), "--dry-run", "--json")
    assert outcome.code == 0, outcome.stderr
    doc = json.loads(outcome.stdout)
    assert doc["request"]["engine_args"]["limit_mm_per_prompt"]["image"] == 1
    assert doc["request"]["with_media"] == {"image": [str(image)]}
    assert doc["question"] == "What is shown in the image? What happens in the video?"
    assert doc["prompt"].index("<|image_pad|>") < doc["prompt"].index("<|video_pad|>")


@pytest.mark.parametrize(
    ("extra", "code", "fragments"),
    [
        (["-m", "gemma4"], EXIT_USAGE, ["gemma4 takes no image with its video", "qwen2_5_vl"]),
        (["--image", "{image}"], EXIT_USAGE, ["--image takes one image", "got 2"]),
        (["--image", "{folder}"], EXIT_USAGE, ["--image takes one image", "a folder or pattern"]),
        (["--backend", "ray"], EXIT_USAGE, ["--image runs on the local backend"]),
    ],
)
def test_an_image_a_clip_model_cannot_take_is_refused(
    extra: list[str],
    code: int,
    fragments: list[str],
    clip_and_image: tuple[Path, Path],
    isolated_cache: Path,
) -> None:
    clip, image = clip_and_image
    extra = [e.format(image=image, folder=image.parent) for e in extra]
    args = ["video", "--video", str(clip), "--image", str(image), *extra, "--dry-run"]
    check(cli(*args), code, *fragments, cache=isolated_cache)


def test_an_unreadable_image_with_a_clip_is_one_line(
    clip_and_image: tuple[Path, Path], tmp_path: Path, isolated_cache: Path
) -> None:
    clip, _ = clip_and_image
    not_an_image = tmp_path / "notes.png"
    not_an_image.write_text("not an image")
    args = ["video", "--video", str(clip), "--image", str(not_an_image), "--dry-run"]
    check(cli(*args), EXIT_USAGE, "is not an image", cache=isolated_cache)


def test_an_openai_batch_file_takes_no_image(
    clip_and_image: tuple[Path, Path], tmp_path: Path, isolated_cache: Path
) -> None:
    clip, image = clip_and_image
    batch = tmp_path / "batch.jsonl"
    body = {
        "model": "m",
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "What happens?"},
                    {"type": "video_url", "video_url": {"url": str(clip)}},
                ],
            }
        ],
    }
    line = {"custom_id": "a", "method": "POST", "url": "/v1/chat/completions", "body": body}
    batch.write_text(json.dumps(line) + "\n")
    args = ["video", "--input", str(batch), "--image", str(image), "-o", str(tmp_path / "o.jsonl")]
    check(cli(*args, "--dry-run"), EXIT_USAGE, "OpenAI batch file", cache=isolated_cache)
