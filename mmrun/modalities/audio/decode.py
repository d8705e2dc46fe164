"""Audio decoding (libsndfile, through soundfile) and its checks: the container sniffed
from the first bytes for a clear message, damaged headers (sample rate, frame count), the
decoding memory budget; the clip mixed down to mono float32."""

from __future__ import annotations

import numbers
from typing import Any

from mmrun.capture import Captured, library_output
from mmrun.errors import MediaError, UsageError
from mmrun.media.budget import forget_locals, memory_ticket, reserve

AUDIO_HINT = "give a WAV, FLAC, MP3, Ogg (Vorbis or Opus) or AIFF file"
_CONVERT_HINT = "convert it to WAV or FLAC first, e.g. `ffmpeg -i <file> out.wav`"
# Sample rates outside this range are a damaged header, not a recording (libsndfile reads an
# AIFF rate of 0 as 1 Hz, and accepts 800 MHz).
MIN_SAMPLE_RATE = 1_000
MAX_SAMPLE_RATE = 768_000
# Frames read at a time once a file holds more than its header declared.
_AUDIO_BLOCK = 1 << 20
# More frames per byte than any encoding gives (FLAC's constant blocks of silence come closest,
# at a few thousand): a header that declares more describes another file.
_MAX_FRAMES_PER_BYTE = 1 << 16
_UNKNOWN_FRAMES = (1 << 63) - 1  # libsndfile's SF_COUNT_MAX: a length it could not find


def _sniff_audio(data: bytes) -> tuple[str | None, bool]:
    """The container a file's first bytes name, and whether libsndfile decodes it."""
    head = data[:64]
    if head[:4] in (b"RIFF", b"RIFX") and head[8:12] == b"WAVE":
        return "WAV", True
    if head[:4] == b"RF64":
        return "RF64 WAV", True
    if head[:4] == b"riff":
        return "Wave64", True
    if head[:4] == b"FORM" and head[8:12] in (b"AIFF", b"AIFC"):
        return "AIFF", True
    if head[:4] == b"fLaC":
        return "FLAC", True
    if head[:4] == b"OggS":
        for marker, name, decodes in (
            (b"OpusHead", "Ogg Opus", True),
            (b"\x01vorbis", "Ogg Vorbis", True),
            (b"\x7fFLAC", "Ogg FLAC", True),
            (b"Speex   ", "Ogg Speex", False),
            (b"\x80theora", "Ogg Theora video", False),
        ):
            if marker in head:
                return name, decodes
        return "Ogg", True
    if head[:4] == b".snd":
        return "AU", True
    if head[:4] == b"caff":
        return "CAF", True
    if head[4:8] == b"ftyp":
        return "MP4/M4A (AAC or ALAC)", False
    if head[:5] == b"#!AMR":
        return "AMR", False
    if head[:4] == b"wvpk":
        return "WavPack", False
    if head[:4] == b"MAC ":
        return "Monkey's Audio", False
    if head[:4] == b"\x30\x26\xb2\x75":
        return "WMA/ASF", False
    if head[:4] == b"\x1a\x45\xdf\xa3":
        return "Matroska/WebM", False
    if head[:4] == b"MThd":
        return "MIDI (notes, not sound)", False
    if head[:4] == b"ADIF" or (len(head) > 1 and head[0] == 0xFF and head[1] & 0xF6 == 0xF0):
        return "AAC", False
    if head[:3] == b"ID3" or (len(head) > 1 and head[0] == 0xFF and head[1] & 0xE0 == 0xE0):
        return "MP3", True
    return None, False


# libsndfile's words for what is wrong with a file it knows, in mmrun's. Its own messages are
# sometimes wrong for a file held in memory ("File does not exist or is not a regular file
# (possibly a pipe?)" for an MP3 without a decodable frame; "Unspecified internal error." for
# a header that points past the end).
_LIBSNDFILE_REASONS = (
    ("data' chunk", "it has no audio data chunk"),
    ("channel", "its header gives an invalid number of channels"),
    ("fmt ' chunk", "its format header is malformed"),
    ("SF_INFO struct incomplete", "its header gives no usable sample rate or channel count"),
    ("flac decoder", "its FLAC stream is corrupt"),
    ("psf_fseek", "its header and its data disagree"),
    ("not a regular file", "no audio frame in it can be decoded"),
)


def _audio_error(exc: Exception, data: bytes, label: str, said: Captured) -> MediaError:
    import soundfile

    if isinstance(exc, MediaError):
        return exc
    if isinstance(exc, MemoryError):
        return MediaError(
            f"{label} is too long to decode in the memory available", hint="trim it first"
        )
    container, decodes = _sniff_audio(data)
    if container is not None and not decodes:
        return MediaError(f"{label} is {container}, which mmrun cannot decode", hint=_CONVERT_HINT)
    code = exc.code if isinstance(exc, soundfile.LibsndfileError) else None
    words = exc.error_string if isinstance(exc, soundfile.LibsndfileError) else str(exc)
    if code == 1 or container is None:  # SF_ERR_UNRECOGNISED_FORMAT
        return MediaError(f"{label} is not audio in a format mmrun reads", hint=AUDIO_HINT)
    if "unimplemented format" in words:
        return MediaError(
            f"{label} is {container} that mmrun cannot decode: an encoding libsndfile does "
            "not implement, or a damaged file",
            hint=_CONVERT_HINT,
        )
    if said.failure is not None:  # libsndfile asked its file for a position before the start
        reason = "its header and its data disagree"
    else:
        reason = next(
            (mine for theirs, mine in _LIBSNDFILE_REASONS if theirs.lower() in words.lower()),
            "its header or data cannot be read",
        )
    return MediaError(
        f"{label} is a damaged or truncated {container} file: {reason}",
        hint="check the file, or export it again",
    )


class _AudioBytes:
    """The file object soundfile reads through libsndfile's virtual I/O.

    On some malformed headers libsndfile asks to seek before the start; a BytesIO raises
    there, inside a C callback where nothing can catch it, and Python prints the traceback.
    This one stays where it is, which libsndfile reads as a failed seek."""

    def __init__(self, data: bytes) -> None:
        import io

        self._file = io.BytesIO(data)

    def seek(self, offset: int, whence: int = 0) -> int:
        try:
            return self._file.seek(offset, whence)
        except (ValueError, OverflowError):
            return self._file.tell()

    def tell(self) -> int:
        return self._file.tell()

    def read(self, size: int = -1) -> bytes:
        return self._file.read(size)

    def readinto(self, buffer: Any) -> int:
        return self._file.readinto(buffer)


def decode_audio(data: bytes, label: str) -> tuple[Any, dict[str, Any]]:
    with memory_ticket(len(data)):
        failure: Exception | None = None
        with library_output() as said:
            try:
                waveform, sample_rate = _decode_audio(data, label)
            except Exception as exc:
                failure = exc
    if failure is not None:
        raise _audio_error(failure, data, label, said) from forget_locals(failure)
    return (waveform, sample_rate), {
        "duration_s": round(waveform.shape[0] / sample_rate, 3),
        "sample_rate": sample_rate,
    }


def _decode_audio(data: bytes, label: str) -> tuple[Any, int]:
    import numpy as np
    import soundfile

    with soundfile.SoundFile(_AudioBytes(data)) as audio:
        rate, channels = int(audio.samplerate), int(audio.channels)
        if not MIN_SAMPLE_RATE <= rate <= MAX_SAMPLE_RATE:
            container = _sniff_audio(data)[0] or "audio"
            raise MediaError(
                f"{label} is a damaged {container} file: its header gives a sample rate of "
                f"{rate:,} Hz",
                hint=f"mmrun reads {MIN_SAMPLE_RATE:,} to {MAX_SAMPLE_RATE:,} Hz; check the file",
            )
        # The frame count comes from the header, and a damaged one can declare 2^36 frames:
        # read what the file holds, never more than what it could hold at 1 bit a frame.
        declared = max(0, int(audio.frames))
        if declared >= _UNKNOWN_FRAMES:  # libsndfile does not know: blocks until the end
            declared = 0
        elif declared > _MAX_FRAMES_PER_BYTE * len(data):
            container = _sniff_audio(data)[0] or "audio"
            raise MediaError(
                f"{label} is a damaged {container} file: its header declares {declared:,} "
                f"frames, more than {len(data):,} bytes can hold",
                hint="check the file, or export it again",
            )
        first = min(declared, 8 * len(data) // max(channels, 1)) or _AUDIO_BLOCK
        reserve(first * channels * 4 * 2)  # the samples, and their mono mix
        pieces = [audio.read(first, dtype="float32", always_2d=True)]
        while len(pieces[-1]) == (first if len(pieces) == 1 else _AUDIO_BLOCK):
            reserve(_AUDIO_BLOCK * channels * 4 * 2)
            pieces.append(audio.read(_AUDIO_BLOCK, dtype="float32", always_2d=True))
    frames = pieces[0] if len(pieces) == 1 else np.concatenate(pieces)
    # Mixed down to mono, as the loader of vLLM's example (librosa) does.
    waveform = frames[:, 0] if channels == 1 else frames.mean(axis=1, dtype=np.float32)
    if waveform.size == 0:
        raise MediaError(f"{label} holds no audio samples", hint="give a non-empty recording")
    if not np.isfinite(waveform).all():
        raise MediaError(
            f"{label} holds invalid samples (not-a-number or infinite values)",
            hint="check the file, or export it again",
        )
    return np.ascontiguousarray(waveform), rate


# Integer samples as libsndfile reads PCM: full scale is 1.0.
_PCM_SCALE = {"int16": 32768.0, "int32": 2147483648.0}


def audio_from_object(value: Any, label: str) -> tuple[Any, dict[str, Any]] | None:
    """A clip given as a Python object (``Modality.from_object``): ``(samples, sample_rate)``,
    as vLLM's own examples pass audio, the samples a 1-D array (mono) of floats, or of int16
    or int32 PCM; a float32 copy, as ``decode_audio`` returns a file's. None for anything else
    (a list of clips is several items)."""
    from mmrun.media.objects import is_array

    if is_array(value):
        raise UsageError(
            f"{label}: audio samples need their sample rate",
            hint="give (samples, sample_rate), e.g. (waveform, 16000)",
        )
    if not (isinstance(value, tuple | list) and len(value) == 2 and is_array(value[0])):
        return None
    samples, given = value
    if isinstance(given, bool) or not isinstance(given, numbers.Real):
        raise UsageError(
            f"{label}: the sample rate of (samples, sample_rate) is a {type(given).__name__}",
            hint="give the rate in Hz as a number, e.g. (waveform, 16000)",
        )
    hz = float(given)
    if not (MIN_SAMPLE_RATE <= hz <= MAX_SAMPLE_RATE and hz.is_integer()):
        raise UsageError(
            f"{label}: a sample rate of {hz:,g} Hz",
            hint=f"give a whole number of Hz from {MIN_SAMPLE_RATE:,} to {MAX_SAMPLE_RATE:,}",
        )
    waveform = _waveform(samples, label)
    rate = int(hz)
    return (waveform, rate), {
        "duration_s": round(waveform.shape[0] / rate, 3),
        "sample_rate": rate,
    }


def _waveform(samples: Any, label: str) -> Any:
    import numpy as np

    from mmrun.media.objects import described

    array = np.asarray(samples)
    floats = np.issubdtype(array.dtype, np.floating)
    if array.ndim != 1 or not (floats or array.dtype.name in _PCM_SCALE):
        raise UsageError(
            f"{label}: audio samples are a 1-D array (mono) of floats, int16 or int32, "
            f"not {described(array)}",
            hint="mix it down to mono first: the mean over its channel axis"
            if array.ndim == 2
            else "give the clip's samples as a numpy array",
        )
    if array.size == 0:
        raise UsageError(f"{label}: the audio array holds no samples", hint="give a non-empty clip")
    if floats:
        waveform = array.astype(np.float32)  # a copy: the caller's array may change
        if not np.isfinite(waveform).all():
            raise UsageError(
                f"{label}: the audio samples hold not-a-number or infinite values",
                hint="check the samples",
            )
    else:
        waveform = (array / _PCM_SCALE[array.dtype.name]).astype(np.float32)
    return np.ascontiguousarray(waveform)
