"""Random command lines against the CLI in dry-run mode: whatever is thrown at it, mmrun ends
with 0, 1 or 2, never a traceback, and a failure of its own is one line on stderr.

Each example is a valid command line (a model key planned offline, media it takes) with zero
to three mutations: random keys (real and not), -n values, bogus engine and sampling
arguments, paths that exist or not, data: URIs, URLs to a real HTTP server on 127.0.0.1,
odd option values. So the runs that succeed go all the way through media and planning, and
the ones that fail, fail anywhere. In-process (tests.helpers.cli) for speed.
A second test mutates the bytes of real media files (see test_mutated_media_never_crash).
``MMRUN_FUZZ_EXAMPLES`` raises the number of examples for a longer hunt;
``--hypothesis-show-statistics`` shows which outcomes were reached.
"""

from __future__ import annotations

import base64
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from mmrun.media import download
from mmrun.plugins import builtin_registry
from tests.helpers.cli import in_process

REGISTRY = builtin_registry()
KEYS = {m: sorted(spec.key for spec in REGISTRY.specs(m)) for m in ("image", "audio")}
EXAMPLES = int(os.environ.get("MMRUN_FUZZ_EXAMPLES", "300"))
# Keys whose request is planned without the Hub (a written prompt, no template to fetch), so a
# dry run gets all the way through; the other keys fail early, offline.
OFFLINE = {
    "image": ["idefics3", "smolvlm", "mistral3", "pixtral_hf", "deepseek_vl_v2"],
    "audio": ["qwen2_audio", "whisper", "gemma3n", "qwen2_5_omni", "granite_speech"],
}

# Text that tends to break parsers: separators, quotes, unicode, control characters.
NASTY = st.text(alphabet=st.sampled_from("ab=_-.:/\\,;[]{}\"' \t\n\x00é🙂%0123456789"), max_size=12)


def sources(media_dir: Path, server: str) -> dict[str, list[str]]:
    png = base64.b64encode((media_dir / "blue.png").read_bytes()).decode()
    wav = base64.b64encode((media_dir / "tone.wav").read_bytes()).decode()
    return {
        "image": [
            str(media_dir / "blue.png"),
            str(media_dir / "duck.jpg"),
            "lion",
            f"data:image/png;base64,{png}",
            f"{server}/blue.png",
        ],
        "audio": [
            str(media_dir / "tone.wav"),
            str(media_dir / "mary_had_lamb.ogg"),
            "winning_call",
            f"data:audio/wav;base64,{wav}",
            f"{server}/tone.wav",
        ],
        "bad": [
            str(media_dir),
            str(media_dir / "missing.png"),
            "/dev/null",
            "/dev/zero",
            "",
            " ",
            "data:,",
            "data:image/png;base64,@@@",
            "data:",
            f"data:image/png;base64,{png[:40]}",
            f"{server}/missing.png",
            f"{server}/",
            "http://",
            "http://[::1",
            "https://127.0.0.1:1/x.png",
            "ftp://x/y.png",
            "file:///etc/passwd",
            "~/nothing-here.png",
            "-",
            "C:\\a.png",
            "duck",
            "mary_had_lamb",
        ],
    }


@st.composite
def command_lines(draw: st.DrawFn, media_dir: Path, server: str) -> list[str]:
    modality = draw(st.sampled_from(["image", "audio"]))
    other = "audio" if modality == "image" else "image"
    spec = REGISTRY.get(modality, draw(st.sampled_from(OFFLINE[modality])))
    known = sources(media_dir, server)
    flag = "-i" if modality == "image" else "-a"

    # A valid command line...
    key: str | None = spec.key
    items: list[str] = []
    count: int | None = None
    most = spec.max_items or 3
    if draw(st.booleans()):
        items = draw(
            st.lists(
                st.sampled_from(known[modality]),
                min_size=max(spec.min_items, 1),
                max_size=min(most, 3),
            )
        )
    elif draw(st.booleans()):
        count = draw(st.integers(max(spec.min_items, 1), min(most, 2)))
    options: list[str] = []
    if draw(st.booleans()):
        options += ["--num-prompts", str(draw(st.integers(1, 6)))]
    if draw(st.booleans()):
        options += [
            "--engine-arg",
            draw(
                st.sampled_from(
                    [
                        "max_model_len=4096",
                        "seed=3",
                        'mm_processor_kwargs={"a": [1, {"b": null}]}',
                        "enforce_eager=true",
                        "limit_mm_per_prompt=null",
                        "x={",
                        "a=b=c",
                    ]
                )
            ),
        ]
    if draw(st.booleans()):
        options += ["--sampling-arg", draw(st.sampled_from(["ignore_eos=true", "top_p=0.5"]))]
    switches = draw(st.sampled_from([[], ["--json"], ["--quiet"], ["--json", "-v"]]))

    # ...with a few mutations.
    mutations = draw(
        st.lists(
            st.sampled_from(
                [
                    "key",
                    "other-key",
                    "any-key",
                    "bad-source",
                    "random-source",
                    "count",
                    "prompts",
                    "engine-arg",
                    "sampling-arg",
                    "option",
                    "switches",
                ]
            ),
            max_size=3,
        )
    )
    for mutation in mutations:
        if mutation == "key":
            key = draw(st.one_of(st.none(), NASTY))
        elif mutation == "other-key":
            key = draw(st.sampled_from(KEYS[other]))
        elif mutation == "any-key":
            key = draw(st.sampled_from(KEYS[modality]))
        elif mutation == "bad-source":
            items.insert(
                draw(st.integers(0, len(items))), draw(st.sampled_from(known["bad"] + known[other]))
            )
        elif mutation == "random-source":
            items.append(
                draw(
                    st.one_of(
                        NASTY,
                        NASTY.map(lambda s: f"{server}/{s}"),
                        NASTY.map(lambda s: f"data:{s}"),
                    )
                )
            )
        elif mutation == "count":
            count = draw(st.integers(-3, 14))
        elif mutation == "prompts":
            options += ["--num-prompts", str(draw(st.integers(-1, 10**10)))]
        elif mutation in ("engine-arg", "sampling-arg"):
            options += [
                f"--{mutation}",
                draw(
                    st.one_of(
                        NASTY,
                        st.tuples(NASTY, NASTY).map("=".join),
                        st.sampled_from(["not_a_field=1", "=", "-x=1", "a.b=1"]),
                    )
                ),
            ]
        elif mutation == "option":
            option, value = draw(
                st.sampled_from(
                    [
                        ("--method", st.sampled_from(["chat", "beam", ""])),
                        ("--max-tokens", st.integers(-2, 10**12)),
                        ("--temperature", st.sampled_from(["-1", "inf", "nan", "1e999", "x", "2"])),
                        ("--seed", st.integers(-(2**70), 2**70)),
                        ("-q", NASTY),
                        ("-tp", st.integers(-1, 9)),
                        ("--model", st.sampled_from(["", str(media_dir), "/dev/null", "x/y"])),
                    ]
                )
            )
            options += [option, str(draw(value))]
        elif mutation == "switches":
            switches = draw(st.sampled_from([["--quiet", "--verbose"], ["--trust-remote-code"]]))

    args = [modality, "--dry-run"]
    if key is not None:
        args += ["-m", key]
    for item in items:
        args += [flag, item]
    if count is not None:
        args += ["-n", str(count)]
    if spec.trust_remote_code or draw(st.booleans()):
        args.append("--trust-remote-code")
    return args + options + switches


@pytest.fixture
def fuzz_env(monkeypatch: pytest.MonkeyPatch, media_server: Any) -> None:
    monkeypatch.setattr(download, "RETRY_BACKOFF_S", 0.0)
    monkeypatch.setenv("MMRUN_DOWNLOAD_TIMEOUT", "2")
    monkeypatch.setenv("MMRUN_ASSETS_BASE_URL", media_server.url)  # default media, locally


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_cli_never_crashes(
    data: st.DataObject, media_dir: Path, media_server: Any, fuzz_env: None
) -> None:
    args = data.draw(command_lines(media_dir, media_server.url), label="args")
    result = in_process(args)
    output = result.stdout + result.stderr
    # What was reached, for --hypothesis-show-statistics: the exit code and the error's kind.
    words = result.stderr.removeprefix("mmrun: error: ").split()[:3] if result.stderr else []
    event(f"exit {result.exit_code}: {' '.join(w for w in words if '/' not in w)[:40]}")

    assert "Traceback" not in output, (args, output)
    # 3: a batch (a folder among the sources) finished with some prompts failed.
    assert result.exit_code in (0, 1, 2, 3), (args, result.exit_code, output)
    if result.exit_code == 3 and "--quiet" not in args:
        assert " failed, " in result.stderr.splitlines()[-1], (args, result.stderr)
    if result.exit_code == 0:
        assert result.stdout, args
    if "mmrun: error:" in result.stderr:
        assert result.stderr.count("\n") == 1, (args, result.stderr)
        assert result.stdout == "", (args, result.stdout)
        # The catch-all's words: an exception mmrun did not expect is a bug to fix.
        assert "mmrun: error: unexpected" not in result.stderr, (args, result.stderr)


# --- mutated media bytes ---------------------------------------------------------------------
# Real files, generated here or from Pillow's test suite (tests/fixtures/pillow), with a few
# byte-level mutations: flipped bytes, header fields set to huge or zero values, cuts,
# insertions, repeated runs. Whatever the bytes, a dry run ends with 0 or 2, a refusal is one
# line, nothing else reaches stderr (not even C libraries' lines on file descriptor 2: capfd
# sees those), and no traceback.

FIXTURES = Path(__file__).parent.parent / "fixtures" / "pillow"


def _image_seeds() -> dict[str, bytes]:
    import io

    from PIL import Image

    seeds = {
        path.name: path.read_bytes() for path in sorted(FIXTURES.glob("*")) if path.suffix != ".md"
    }
    image = Image.new("RGB", (24, 16), (200, 40, 90))
    for fmt, mode, options in (
        ("PNG", "RGB", {}),
        ("JPEG", "RGB", {"progressive": True}),
        ("GIF", "P", {}),
        ("BMP", "RGB", {}),
        ("TIFF", "RGB", {"compression": "tiff_adobe_deflate"}),
        ("WEBP", "RGB", {"lossless": True}),
        ("ICO", "RGB", {}),
        ("DDS", "RGB", {}),
        ("BLP", "P", {}),
        ("TGA", "RGB", {"compression": "tga_rle"}),
        ("PPM", "RGB", {}),
    ):
        buffer = io.BytesIO()
        image.convert(mode).save(buffer, format=fmt, **options)
        seeds[f"seed.{fmt.lower()}"] = buffer.getvalue()
    return seeds


def _audio_seeds() -> dict[str, bytes]:
    import io

    import numpy as np
    import soundfile

    t = np.linspace(0, 0.5, 8000, dtype=np.float32)
    tone = 0.3 * np.sin(2 * np.pi * 440 * t)
    seeds = {}
    for fmt, subtype, ext in (
        ("WAV", "PCM_16", "wav"),
        ("WAV", "FLOAT", "wav"),
        ("FLAC", "PCM_16", "flac"),
        ("OGG", "VORBIS", "ogg"),
        ("OGG", "OPUS", "opus"),
        ("MP3", "MPEG_LAYER_III", "mp3"),
        ("AIFF", "PCM_16", "aiff"),
        ("AU", "PCM_16", "au"),
        ("CAF", "PCM_16", "caf"),
    ):
        buffer = io.BytesIO()
        soundfile.write(buffer, tone, 16000, format=fmt, subtype=subtype)
        seeds[f"seed-{subtype.lower()}.{ext}"] = buffer.getvalue()
    return seeds


SEEDS = {"image": _image_seeds(), "audio": _audio_seeds()}


@st.composite
def mutated_media(draw: st.DrawFn) -> tuple[str, str, bytes]:
    modality = draw(st.sampled_from(["image", "audio"]))
    name = draw(st.sampled_from(sorted(SEEDS[modality])))
    data = bytearray(SEEDS[modality][name])
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["flip", "field", "cut", "insert", "repeat", "zero"]))
        if not data:
            break
        # Most mutations hit the header, where sizes are declared.
        end = min(len(data), 256) if draw(st.booleans()) else len(data)
        at = draw(st.integers(0, end - 1))
        if kind == "flip":
            data[at] ^= draw(st.integers(1, 255))
        elif kind == "field":
            value = draw(st.sampled_from([0, 1, 0x7F, 0xFF, 0xFFFF, 0x7FFFFFFF, 0xFFFFFFFF]))
            size = draw(st.sampled_from([1, 2, 4]))
            field = value & ((1 << (8 * size)) - 1)
            big = draw(st.booleans())
            data[at : at + size] = field.to_bytes(size, "big" if big else "little")
        elif kind == "cut":
            del data[at:]
        elif kind == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=64))
        elif kind == "repeat":
            data[at:at] = data[at : at + draw(st.integers(1, 64))] * draw(st.integers(2, 50))
        else:
            data[at : at + draw(st.integers(1, 128))] = b""
    return modality, name, bytes(data)


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(case=mutated_media())
def test_mutated_media_never_crash(
    case: tuple[str, str, bytes], tmp_path: Path, capfd: Any
) -> None:
    modality, name, data = case
    path = tmp_path / f"mutated-{name}"
    path.write_bytes(data)
    key, flag = ("mistral3", "-i") if modality == "image" else ("whisper", "-a")
    capfd.readouterr()
    result = in_process([modality, "-m", key, flag, str(path), "--dry-run", "--json"])
    c_level = capfd.readouterr().err  # what reached file descriptor 2 around Python's stderr
    words = result.stderr.removeprefix("mmrun: error: ").split(str(path))[-1].split()[:4]
    event(f"{modality} exit {result.exit_code}: {' '.join(words)[:40]}")

    assert result.exit_code in (0, 2), (name, result.exit_code, result.stderr)
    assert "Traceback" not in result.stderr + c_level
    assert c_level == "", (name, c_level)
    if result.exit_code == 0:
        assert result.stderr == "", (name, result.stderr)
    else:
        assert result.stderr.count("\n") == 1, (name, result.stderr)
        assert result.stderr.startswith("mmrun: error: ")
        assert "mmrun: error: unexpected" not in result.stderr
