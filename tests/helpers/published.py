"""Small data sets in the layouts their communities publish, for the tests: a VLMEvalKit
benchmark TSV (MMBench's columns, base64 JPEGs, an image stored once for the rows that ask
about it again, a row of two images), LLaVA conversation JSON beside its image folder, a Common
Voice release (``test.tsv`` and ``clips/``) and a LibriSpeech split
(``SPEAKER/CHAPTER/*.flac`` with a ``.trans.txt`` per chapter), spoken by espeak-ng."""

from __future__ import annotations

import base64
import csv
import io
import json
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest

MMBENCH_COLUMNS = (
    "index",
    "question",
    "hint",
    "A",
    "B",
    "C",
    "D",
    "answer",
    "category",
    "image",
    "source",
    "l2-category",
    "comment",
    "split",
)
COLOURS = {
    "red": (220, 30, 30),
    "green": (30, 200, 60),
    "blue": (30, 60, 220),
    "white": (250, 250, 250),
}
# What each clip says, as the transcripts and Common Voice's sentence column hold it.
SENTENCES = (
    "THE QUICK BROWN FOX JUMPS OVER THE LAZY DOG",
    "SHE SELLS SEA SHELLS BY THE SEA SHORE",
    "A BIRD IN THE HAND IS WORTH TWO IN THE BUSH",
)


def jpeg(colour: str, size: tuple[int, int] = (64, 48)) -> bytes:
    from PIL import Image

    out = io.BytesIO()
    Image.new("RGB", size, COLOURS[colour]).save(out, format="JPEG")
    return out.getvalue()


def b64_jpeg(colour: str) -> str:
    return base64.b64encode(jpeg(colour)).decode("ascii")


def mmbench_tsv(folder: Path, *, several: bool = True) -> Path:
    """MMBench as VLMEvalKit publishes it: a row with a hint and four options; one with no
    hint and two; one whose image cell holds the first row's index (the same picture, the
    options in another order); with ``several``, one whose cell is a list of two images
    written as Python writes a list."""
    rows: list[dict[str, Any]] = [
        {
            "index": 1000,
            "question": "What colour is the square?",
            "hint": "The square fills the picture.",
            "A": "red",
            "B": "green",
            "C": "blue",
            "D": "yellow",
            "answer": "B",
            "category": "colour",
            "image": b64_jpeg("green"),
        },
        {
            "index": 1001,
            "question": "Is the picture dark?",
            "A": "yes",
            "B": "no",
            "answer": "B",
            "category": "brightness",
            "image": b64_jpeg("white"),
        },
        {
            "index": 1002,
            "question": "What colour is the square?",
            "hint": "The square fills the picture.",
            "A": "green",
            "B": "red",
            "C": "yellow",
            "D": "blue",
            "answer": "A",
            "category": "colour",
            "image": "1000",
        },
    ]
    if several:
        rows.append(
            {
                "index": 1003,
                "question": "Which two colours are shown?",
                "A": "red and blue",
                "B": "green and white",
                "answer": "A",
                "category": "colour",
                "image": str([b64_jpeg("red"), b64_jpeg("blue")]),
            }
        )
    path = folder / "MMBench_DEV_EN.tsv"
    with open(path, "w", encoding="utf-8", newline="") as out:
        writer = csv.DictWriter(out, MMBENCH_COLUMNS, delimiter="\t", lineterminator="\n")
        writer.writeheader()
        for row in rows:
            writer.writerow({"source": "synthetic", "split": "dev", **row})
    return path


def llava_json(folder: Path) -> Path:
    """LLaVA-Instruct's layout: ``llava.json`` (one array) beside ``images/``, whose paths
    the records give relative to it; a record of two turns, one whose marker follows the
    question, and one with no image."""
    images = folder / "images" / "coco" / "train2017"
    images.mkdir(parents=True)
    (images / "000000033471.jpg").write_bytes(jpeg("green"))
    (images / "000000052846.jpg").write_bytes(jpeg("red"))
    records = [
        {
            "id": "000000033471",
            "image": "coco/train2017/000000033471.jpg",
            "conversations": [
                {"from": "human", "value": "<image>\nWhat colour is the square?"},
                {"from": "gpt", "value": "The square is green."},
                {"from": "human", "value": "Is it bright?"},
                {"from": "gpt", "value": "Yes, it is a bright green."},
            ],
        },
        {
            "id": "000000052846",
            "image": "coco/train2017/000000052846.jpg",
            "conversations": [
                {"from": "human", "value": "Describe the picture.\n<image>"},
                {"from": "gpt", "value": "A red square."},
            ],
        },
    ]
    path = folder / "llava.json"
    path.write_text(json.dumps(records, indent=2))
    return path


def speech(text: str, rate: int = 16000) -> Any:
    """``text`` spoken by espeak-ng, as float32 samples at ``rate``."""
    import numpy as np
    import soundfile

    if shutil.which("espeak-ng") is None:
        pytest.skip("espeak-ng is not installed (make test installs it)")
    with tempfile.TemporaryDirectory() as tmp:
        wav = Path(tmp) / "s.wav"
        subprocess.run(["espeak-ng", "-w", str(wav), text.lower()], check=True)
        samples, own = soundfile.read(wav, dtype="float32")
    times = np.arange(int(len(samples) * rate / own)) / rate
    return np.interp(times, np.arange(len(samples)) / own, samples).astype(np.float32)


def common_voice(folder: Path) -> Path:
    """A Common Voice release's test split: ``test.tsv`` (its columns, unquoted) and the
    MP3 clips it names in ``clips/``. Returns the TSV."""
    import soundfile

    root = folder / "cv-corpus-en"
    (root / "clips").mkdir(parents=True)
    header = (
        "client_id\tpath\tsentence_id\tsentence\tsentence_domain\tup_votes\tdown_votes\tage\t"
        "gender\taccents\tvariant\tlocale\tsegment\n"
    )
    lines = []
    for i, sentence in enumerate(SENTENCES[:2]):
        name = f"common_voice_en_{4100 + i}.mp3"
        soundfile.write(root / "clips" / name, speech(sentence), 16000, format="MP3")
        said = sentence.capitalize() + "."
        lines.append(f"c{i:040x}\t{name}\ts{i}\t{said}\t\t2\t0\t\t\t\t\ten\t\n")
    path = root / "test.tsv"
    path.write_text(header + "".join(lines))
    return path


def librispeech(folder: Path) -> Path:
    """LibriSpeech's test-clean layout: two speakers, a chapter each, FLAC utterances and the
    chapter's ``SPEAKER-CHAPTER.trans.txt``. Returns the split's folder."""
    import soundfile

    split = folder / "LibriSpeech" / "test-clean"
    chapters = {("1089", "134686"): SENTENCES[:2], ("121", "127105"): SENTENCES[2:]}
    for (speaker, chapter), sentences in chapters.items():
        where = split / speaker / chapter
        where.mkdir(parents=True)
        lines = []
        for i, sentence in enumerate(sentences):
            utterance = f"{speaker}-{chapter}-{i:04d}"
            soundfile.write(where / f"{utterance}.flac", speech(sentence), 16000, format="FLAC")
            lines.append(f"{utterance} {sentence}\n")
        (where / f"{speaker}-{chapter}.trans.txt").write_text("".join(lines))
    return split
