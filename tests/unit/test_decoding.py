"""Decoding real-world media: what the libraries print stays out of mmrun's output, no file
can raise a traceback, a few bytes cannot take gigabytes, and audio errors are mmrun's own
words.

Real files come from Pillow's test suite (tests/fixtures/pillow, see its README); the rest are
built here: declared-huge images (the header of a tall BLP, DDS or FLI on a few hundred bytes),
malformed audio headers, MP3s with a damaged frame. Where the process matters (C libraries
write to the C stream ``stderr``, peak memory), each case runs ``python -m mmrun``.
"""

from __future__ import annotations

import io
import os
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import soundfile

from mmrun.capture import library_output
from mmrun.errors import MediaError
from mmrun.media import budget as decoding_budget
from mmrun.modalities.audio import decode as audio_decode
from mmrun.modalities.image import decode as image_decode
from tests.helpers.memory import peak_rss

FIXTURES = Path(__file__).parent.parent / "fixtures" / "pillow"
GIB = 1 << 30


def mmrun(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mmrun", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=120,
    )


def audio_bytes(fmt: str, subtype: str, seconds: float = 1.0, rate: int = 16000) -> bytes:
    t = np.linspace(0, seconds, int(rate * seconds), dtype=np.float32)
    buffer = io.BytesIO()
    soundfile.write(buffer, 0.3 * np.sin(2 * np.pi * 440 * t), rate, format=fmt, subtype=subtype)
    return buffer.getvalue()


def mp3_with_a_damaged_frame() -> bytes:
    """A real MP3 with zeros in the middle: libmpg123 resyncs, and says so on C's stderr."""
    mp3 = audio_bytes("MP3", "MPEG_LAYER_III", seconds=2.0)
    return mp3[: len(mp3) // 2] + b"\0" * 600 + mp3[len(mp3) // 2 :]


def ext80(exponent: int, mantissa: int) -> bytes:
    """An IEEE 754 80-bit extended number, as AIFF stores its sample rate."""
    return struct.pack(">HQ", exponent, mantissa)


RATE_16K = ext80(16383 + 13, 16000 << (63 - 13))


def aiff(rate: bytes = RATE_16K, frames: int = 100, sound: bool = True) -> bytes:
    comm = b"COMM" + struct.pack(">IhIh", 18, 1, frames, 16) + rate
    data = b"\x00\x01" * frames
    ssnd = b"SSND" + struct.pack(">III", 8 + len(data), 0, 0) + data if sound else b""
    body = b"AIFF" + comm + ssnd
    return b"FORM" + struct.pack(">I", len(body)) + body


def wav_header(data_len: int, fmt_tag: int = 1, bits: int = 16) -> bytes:
    block = bits // 8
    fmt = b"fmt " + struct.pack("<IHHIIHH", 16, fmt_tag, 1, 16000, 16000 * block, block, bits)
    riff = min(4 + len(fmt) + 8 + data_len, 0xFFFFFFFF)
    return b"RIFF" + struct.pack("<I", riff) + b"WAVE" + fmt + b"data" + struct.pack("<I", data_len)


# --- declared-huge images: a few hundred bytes each, every one under the pixel limit ----------


def tall_dds(height: int) -> bytes:
    """Pillow's own DDS of one pixel, its header made to declare 1 x ``height``."""
    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", (1, 1)).save(buffer, format="DDS")
    data = bytearray(buffer.getvalue()[:128])
    struct.pack_into("<II", data, 12, height, 1)
    return bytes(data)


def tall_blp(height: int) -> bytes:
    """Pillow's own BLP2 (paletted) of one pixel, its header made to declare 1 x ``height``."""
    from PIL import Image

    buffer = io.BytesIO()
    Image.new("P", (1, 1)).save(buffer, format="BLP")
    data = bytearray(buffer.getvalue()[:-1])
    struct.pack_into("<II", data, 12, 1, height)
    return bytes(data)


def black_fli(width: int, height: int) -> bytes:
    """An FLI frame whose first chunk clears the whole frame (BLACK) and whose second is cut
    short: the decoder touches every pixel, then fails."""
    frame = struct.pack("<IHH8x", 16 + 6 + 6 + 4, 0xF1FA, 2) + struct.pack("<IH", 6, 13)
    frame += struct.pack("<IH", 1000, 15) + b"\0" * 4
    head = bytearray(128)
    struct.pack_into("<IHHHHH", head, 0, 128 + len(frame), 0xAF12, 1, width, height, 8)
    return bytes(head) + frame


def declared_huge_set() -> dict[str, bytes]:
    files = {}
    for i, (w, h) in enumerate(((13_000, 13_000), (12_000, 14_000), (11_000, 16_000))):
        files[f"black{i}.fli"] = black_fli(w, h)
    for i in range(3):
        files[f"black{i + 3}.fli"] = black_fli(10_000 + 100 * i, 17_000)
    for i, height in enumerate((60, 70, 80)):
        files[f"tall{i}.blp"] = tall_blp(height * 1_000_000)
    for i, height in enumerate((40, 50, 60)):
        files[f"tall{i}.dds"] = tall_dds(height * 1_000_000)
    return files


def peak_rss_of(args: list[str]) -> tuple[int, int, str]:
    """Exit code, peak resident memory in bytes and stderr of ``python -m mmrun ARGS``."""
    return peak_rss([sys.executable, "-m", "mmrun", *args])


def test_twelve_declared_huge_images_stay_far_below_what_they_took(tmp_path: Path) -> None:
    """Each of these took 200-700 MB to refuse, all twelve at once 4.5 GB (measured before
    the decoding budget and the declared-size check). Now the peak is about 220 MB on a quiet
    machine; the budget lets one decode larger than it run alone, and a loaded CI machine once
    saw 1,035 MB, so the bound is 1.5 GiB: still a third of what it was."""
    paths = []
    for name, data in declared_huge_set().items():
        (tmp_path / name).write_bytes(data)
        paths += ["-i", str(tmp_path / name)]
    assert len(paths) == 24
    code, peak, stderr = peak_rss_of(["image", "-m", "mistral3", *paths, "--dry-run"])
    assert code == 2, stderr
    assert len(stderr.splitlines()) == 1 and stderr.startswith("mmrun: error: "), stderr
    assert peak < 1.5 * GIB, f"peak RSS {peak / 2**20:.0f} MiB"


@pytest.mark.parametrize(
    ("data", "fragments"),
    [
        (tall_dds(60_000_000), ["declares a 1x60000000 DDS image", "the file has 128"]),
        (tall_blp(80_000_000), ["declares a 1x80000000 BLP image", "needs at least"]),
    ],
    ids=["dds", "blp"],
)
def test_a_header_larger_than_its_file_is_refused_before_decoding(
    data: bytes, fragments: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    reserved: list[int] = []
    monkeypatch.setattr(image_decode, "reserve", reserved.append)
    with pytest.raises(MediaError) as info:
        image_decode.decode_image(data, "x")
    for fragment in fragments:
        assert fragment in str(info.value)
    assert reserved == []  # refused before anything was set aside for decoding


@pytest.mark.parametrize("fmt", ["DDS", "BLP", "PNG", "GIF", "TGA", "BMP", "TIFF"])
def test_valid_files_of_the_checked_formats_still_decode(fmt: str) -> None:
    from PIL import Image

    buffer = io.BytesIO()
    image = Image.new("RGB", (64, 48), (10, 200, 30))
    (image.convert("P") if fmt in ("GIF", "BLP") else image).save(buffer, format=fmt)
    rgb, info = image_decode.decode_image(buffer.getvalue(), "x")
    assert info == {"width": 64, "height": 48}
    assert rgb.getpixel((5, 5))[1] > 150


# --- the decoding budget -------------------------------------------------------------------------


def test_decodes_share_the_budget_and_an_oversized_one_runs_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Twelve threads reserve in two steps (file bytes, then decoding), as resolve does: what
    they hold at once stays within the budget, except one decode larger than the budget, which
    runs with nothing else running; and no thread waits forever."""
    monkeypatch.setenv("MMRUN_DECODE_MEMORY_MB", "100")
    budget = decoding_budget.MemoryBudget()
    mib = 1 << 20
    lock = threading.Lock()
    held = {"now": 0, "peak": 0, "running_with_big": 0}

    def job(first: int, second: int, reading_s: float) -> None:
        ticket = decoding_budget.Ticket()
        budget.reserve(ticket, first * mib)
        time.sleep(reading_s)  # reading the file, between the two steps
        budget.reserve(ticket, second * mib)
        with lock:
            held["now"] += first + second
            held["peak"] = max(held["peak"], held["now"])
            if first + second > 100 and held["now"] != first + second:
                held["running_with_big"] += 1
        time.sleep(0.05)
        with lock:
            held["now"] -= first + second
        budget.release(ticket)

    # Six decodes larger than the budget (as six declared-huge FLIs), six that fit, and both.
    oversized = [(1, 150, 0.01 * i) for i in range(6)]
    fitting = [(5, 40, 0.01 * i) for i in range(6)]
    for sizes in (oversized, fitting, oversized + fitting):
        threads = [threading.Thread(target=job, args=size, daemon=True) for size in sizes]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(10)
        assert not any(thread.is_alive() for thread in threads), "a reservation waited forever"
    assert held["running_with_big"] == 0
    assert held["peak"] <= 151  # one 151 MiB decode alone; the others within 100 MiB


# --- one line, and nothing extra: the library's own output ---------------------------------------

NOISY = [
    # (file, modality, expected exit code)
    ("syntax_num_frames_zero.png", "image", 2),
    ("crash-0c7e0e8e11ce787078f00b5b0ca409a167f070e0.tif", "image", 2),
    ("crash-2020-10-test.tif", "image", 2),
    ("oom-225817ca0f8c663be7ab4b9e717b02c661e66834.tif", "image", 2),
    ("crash-0da013a13571cc8eb457a39fee8db18f8a3c7127.tif", "image", 0),
    ("hopper_unexpected.ico", "image", 0),
    ("damaged-frame.mp3", "audio", 0),
    ("no-sound-chunk.aiff", "audio", 2),  # libsndfile seeks to -1: once a cffi traceback
]


@pytest.fixture(scope="module")
def noisy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("noisy")
    for path in FIXTURES.glob("*"):
        (folder / path.name).write_bytes(path.read_bytes())
    (folder / "damaged-frame.mp3").write_bytes(mp3_with_a_damaged_frame())
    (folder / "no-sound-chunk.aiff").write_bytes(aiff(sound=False))
    return folder


@pytest.mark.parametrize(("name", "modality", "code"), NOISY, ids=[n for n, _, _ in NOISY])
def test_what_decoders_print_never_reaches_the_user(
    noisy: Path, name: str, modality: str, code: int
) -> None:
    key, flag = ("mistral3", "-i") if modality == "image" else ("whisper", "-a")
    proc = mmrun(modality, "-m", key, flag, str(noisy / name), "--dry-run", "--json")
    assert proc.returncode == code, proc.stderr
    assert "Traceback" not in proc.stderr
    if code == 0:
        assert proc.stderr == ""
    else:
        assert len(proc.stderr.splitlines()) == 1, proc.stderr
        assert proc.stderr.startswith("mmrun: error: ")


def test_with_verbose_the_libraries_are_heard(noisy: Path) -> None:
    quiet = mmrun("audio", "-m", "whisper", "-a", str(noisy / "damaged-frame.mp3"), "--dry-run")
    loud = mmrun(
        "audio", "-m", "whisper", "-a", str(noisy / "damaged-frame.mp3"), "--dry-run", "-v"
    )
    assert quiet.returncode == loud.returncode == 0
    assert "Illegal Audio-MPEG-Header" not in quiet.stderr
    assert "Illegal Audio-MPEG-Header" in loud.stderr


def test_concurrent_decodes_leave_other_writers_alone(noisy: Path, capfd: Any) -> None:
    """Twelve decodes at once, in threads, while another thread writes to Python's stderr and
    a process started meanwhile writes to its own: every one of those lines arrives, and none
    of the libraries' does."""
    from PIL import Image

    tiff = (noisy / "crash-0c7e0e8e11ce787078f00b5b0ca409a167f070e0.tif").read_bytes()
    png = (noisy / "syntax_num_frames_zero.png").read_bytes()
    mp3 = (noisy / "damaged-frame.mp3").read_bytes()
    capfd.readouterr()
    stop = threading.Event()

    def decode(job: Callable[[], Any]) -> None:
        while not stop.is_set():
            with suppress(MediaError):
                job()

    def open_tiff() -> None:  # Pillow straight, inside a capture: libtiff's C lines
        with library_output(), Image.open(io.BytesIO(tiff)) as image, suppress(OSError):
            image.load()

    jobs: list[Callable[[], Any]] = [
        open_tiff,
        lambda: image_decode.decode_image(tiff, "t.tif"),
        lambda: image_decode.decode_image(png, "a.png"),
        lambda: audio_decode.decode_audio(mp3, "d.mp3"),
    ] * 3
    workers = [threading.Thread(target=decode, args=(job,), daemon=True) for job in jobs]
    for worker in workers:
        worker.start()
    children = []
    for i in range(20):
        # One write call per line: print() writes the text and the newline apart, and a
        # child's line could land between the two.
        sys.stderr.write(f"legit line {i}\n")
        sys.stderr.flush()
        children.append(
            subprocess.Popen(
                [sys.executable, "-c", f"import os; os.write(2, b'child line {i}\\n')"]
            )
        )
        time.sleep(0.02)
    for child in children:
        child.wait(30)
    stop.set()
    for worker in workers:
        worker.join(30)
    err = capfd.readouterr().err
    for i in range(20):
        assert f"legit line {i}\n" in err
        assert f"child line {i}\n" in err
    for noise in ("TIFF", "_tiffReadProc", "Warning", "Illegal Audio-MPEG-Header", "resync"):
        assert noise not in err, err


def test_a_process_forked_during_a_decode_writes_to_the_real_stderr(capfd: Any) -> None:
    """vLLM forks its engine core while mmrun's workers decode: what the child's C code
    writes to ``stderr`` reaches the real stderr, not the decode's capture."""
    import ctypes

    libc = ctypes.CDLL(None)
    libc.fputs.argtypes = [ctypes.c_char_p, ctypes.c_void_p]
    libc.fflush.argtypes = [ctypes.c_void_p]
    inside, leave = threading.Event(), threading.Event()

    def decode() -> None:
        with library_output():
            inside.set()
            leave.wait(30)

    worker = threading.Thread(target=decode, daemon=True)
    worker.start()
    assert inside.wait(30)
    capfd.readouterr()
    pid = os.fork()
    if pid == 0:  # the child: C's stderr, as CUDA or NCCL write to it
        code = 1
        try:
            stream = ctypes.c_void_p.in_dll(libc, "stderr").value
            libc.fputs(b"engine core line\n", stream)
            libc.fflush(stream)
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    leave.set()
    worker.join(30)
    assert os.waitstatus_to_exitcode(status) == 0
    assert "engine core line" in capfd.readouterr().err


def test_an_exception_in_a_c_callback_is_kept_with_the_decode(capfd: Any) -> None:
    """Python prints an exception that it cannot raise (in a C callback, in __del__) with a
    traceback; inside a decode it is taken as the reason the decode failed."""

    class Raises:
        def __del__(self) -> None:
            raise ValueError("negative seek value -1")

    with library_output() as said:
        Raises()
    assert said.failure == "ValueError: negative seek value -1"
    assert capfd.readouterr().err == ""


# --- audio: what is wrong, in mmrun's words ------------------------------------------------------

BAD_AUDIO = {
    "aiff-without-sound": (aiff(sound=False), "a damaged or truncated AIFF file"),
    "aiff-rate-zero": (aiff(rate=ext80(0, 0)), "its header gives a sample rate of 1 Hz"),
    "aiff-rate-infinite": (aiff(rate=ext80(0x7FFF, 0)), "a sample rate of 67,108,864 Hz"),
    "wav-without-data": (wav_header(0)[:-8], "damaged or truncated WAV file: it has no audio"),
    "wav-unknown-encoding": (wav_header(64, fmt_tag=0x1234) + b"\0" * 64, "WAV file"),
    "flac-declares-2^36-frames": (b"", "its header declares 68,719,476,735 frames"),
    "mp3-without-a-frame": (b"ID3\x03\x00\x00\x00\x00\x00\x00" + b"\xff\xfb" + b"\0" * 200, "MP3"),
    "m4a": (b"\0\0\0\x20ftypM4A \0\0\0\0M4A mp42isom" + b"\0" * 64, "MP4/M4A (AAC or ALAC)"),
    "text": (b"just some text, not a recording\n", "is not audio in a format mmrun reads"),
}


def flac_declaring_2_to_the_36_frames() -> bytes:
    flac = bytearray(audio_bytes("FLAC", "PCM_16"))
    flac[8 + 13] |= 0x0F  # STREAMINFO's 36-bit total: all ones
    flac[8 + 14 : 8 + 18] = b"\xff\xff\xff\xff"
    return bytes(flac)


@pytest.mark.parametrize("name", sorted(BAD_AUDIO))
def test_broken_audio_is_refused_in_mmruns_words(name: str, capfd: Any) -> None:
    data, fragment = BAD_AUDIO[name]
    if name == "flac-declares-2^36-frames":
        data = flac_declaring_2_to_the_36_frames()
    with pytest.raises(MediaError) as info:
        audio_decode.decode_audio(data, "clip")
    message = str(info.value)
    assert fragment in message, message
    for libsndfile_words in ("regular file", "pipe", "psf_fseek", "internal error", "SF_INFO"):
        assert libsndfile_words.lower() not in message.lower(), message
    assert capfd.readouterr().err == ""


@pytest.mark.parametrize(
    ("fmt", "subtype"),
    [
        ("WAV", "PCM_16"),
        ("FLAC", "PCM_16"),
        ("MP3", "MPEG_LAYER_III"),
        ("OGG", "VORBIS"),
        ("OGG", "OPUS"),
        ("AIFF", "PCM_16"),
    ],
)
def test_every_format_the_hint_names_decodes(fmt: str, subtype: str) -> None:
    assert fmt.replace("OGG", "Ogg") in audio_decode.AUDIO_HINT
    if fmt == "OGG":
        assert subtype.capitalize() in audio_decode.AUDIO_HINT
    (waveform, rate), info = audio_decode.decode_audio(audio_bytes(fmt, subtype, rate=48000), "x")
    assert rate == 48000 and 0.9 < info["duration_s"] < 1.2
    assert waveform.dtype == np.float32 and waveform.ndim == 1


def test_samples_that_are_not_numbers_are_refused() -> None:
    samples = np.zeros(1600, dtype=np.float32)
    samples[100] = np.nan
    buffer = io.BytesIO()
    soundfile.write(buffer, samples, 16000, format="WAV", subtype="FLOAT")
    with pytest.raises(MediaError, match="invalid samples"):
        audio_decode.decode_audio(buffer.getvalue(), "x")


def test_a_stereo_clip_is_mixed_to_mono() -> None:
    t = np.linspace(0, 1, 16000, dtype=np.float32)
    left, right = np.sin(2 * np.pi * 440 * t), np.zeros_like(t)
    buffer = io.BytesIO()
    soundfile.write(buffer, np.stack([left, right], axis=1), 16000, format="WAV")
    (waveform, _), _ = audio_decode.decode_audio(buffer.getvalue(), "x")
    assert waveform.shape == (16000,)
    assert np.allclose(waveform, (left + right) / 2, atol=1e-4)
