"""Data sets in the layouts their communities publish (tests/helpers/published.py builds
small ones): a VLMEvalKit benchmark TSV with base64 images and a question built from its
columns, LLaVA conversation JSON beside its image folder, Common Voice's test.tsv with its
clips/ and LibriSpeech's folders with their transcripts, each run (dry, and on the stand-in
vLLM) and scored as docs/usage.md's "Published data sets" recipes say, with no
preprocessing; and the bad cells of each failing alone, in a short line."""

from __future__ import annotations

import base64
import io
import json
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jiwer
import pytest
from whisper_normalizer.english import EnglishTextNormalizer

from mmrun.errors import EXIT_PARTIAL, EXIT_USAGE, shown
from mmrun.inputs import InputOptions, open_input
from mmrun.media.inline import inline_uri, looks_like_base64, sniff
from mmrun.modalities.image import IMAGE
from mmrun.review.score import option_letter, options_of
from tests.helpers import published
from tests.helpers.cli import in_process
from tests.helpers.media import write_clip
from tests.helpers.published import b64_jpeg, jpeg

TEMPLATE = (
    "Hint: {hint}\\nQuestion: {question}\\nOptions:\\nA. {A}\\nB. {B}\\nC. {C}\\nD. {D}\\n"
    "Answer with the option's letter."
)
IMAGE_RUN = ("image", "-m", "mistral3")  # writes its own prompt: no processor, runs offline
AUDIO_RUN = ("audio", "-m", "whisper")


def mmrun(*args: str) -> Any:
    return in_process(list(args))


def lines(text: str) -> dict[str, dict[str, Any]]:
    rows = [json.loads(line) for line in text.splitlines() if line.strip()]
    return {r["id"]: r for r in rows}


def score(results: Path, *args: str) -> dict[str, Any]:
    done = mmrun("score", str(results), *args, "--json")
    assert done.exit_code == 0, done.stderr
    document: dict[str, Any] = json.loads(done.stdout)
    return document


def one_line_error(result: Any, fragment: str) -> str:
    assert result.exit_code == EXIT_USAGE, result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert fragment in line, line
    return str(line)


# --- benchmark TSVs ------------------------------------------------------------------------


def test_an_mmbench_tsv_dry_run_decodes_its_base64_and_asks_each_rows_options(
    tmp_path: Path,
) -> None:
    tsv = published.mmbench_tsv(tmp_path)
    done = mmrun(
        *IMAGE_RUN, "--input", str(tsv), "--columns", "id=index", "--question-template",
        TEMPLATE, "--keep-columns", "answer", "--dry-run", "--json",
    )  # fmt: skip
    assert done.exit_code == 0, done.stderr
    rows = lines(done.stdout)
    assert sorted(rows) == ["1000", "1001", "1002", "1003"]
    assert all(r["error"] is None for r in rows.values())
    first, bare, again, pair = (rows[k] for k in ("1000", "1001", "1002", "1003"))
    assert first["question"] == (
        "Hint: The square fills the picture.\nQuestion: What colour is the square?\nOptions:\n"
        "A. red\nB. green\nC. blue\nD. yellow\nAnswer with the option's letter."
    )
    assert first["prompt"] == f"<s>[INST]{first['question']}\n[IMG][/INST]"
    # No hint and two options: those lines are left out, the rest kept in order.
    assert bare["question"] == (
        "Question: Is the picture dark?\nOptions:\nA. yes\nB. no\nAnswer with the option's letter."
    )
    # The row that names row 1000 for its picture asks about that picture.
    assert again["media"] == ["row 2 image"] and "A. green\nB. red" in again["question"]
    assert pair["media"] == ["row 3 image[0]", "row 3 image[1]"]
    assert pair["prompt"].endswith("[IMG][IMG][/INST]")
    assert first["meta"] == {"answer": "B"}


def test_the_base64_cells_are_the_images_they_encode(tmp_path: Path) -> None:
    tsv = published.mmbench_tsv(tmp_path)
    got = {
        i.id: i
        for i in _items(tsv, columns="id=index", question_template=TEMPLATE, keep_columns="answer")
    }
    assert got["1000"].sources == (f"data:image/jpeg;base64,{b64_jpeg('green')}",)
    assert got["1002"].sources == got["1000"].sources  # stored once, in row 1000
    assert got["1003"].sources == tuple(
        f"data:image/jpeg;base64,{b64_jpeg(c)}" for c in ("red", "blue")
    )


def test_an_mmbench_run_is_scored_by_choice_from_the_kept_answer(
    tmp_path: Path, fake_vllm: Any
) -> None:
    tsv = published.mmbench_tsv(tmp_path)
    out = tmp_path / "mmbench.jsonl"
    # The stand-in engine answers a --choice constraint's first option: "A" every time.
    done = mmrun(
        *IMAGE_RUN, "--input", str(tsv), "--columns", "id=index", "--question-template",
        TEMPLATE, "--keep-columns", "answer,category", "--choice", "A,B,C,D", "-o", str(out),
    )  # fmt: skip
    assert done.exit_code == 0, done.stderr
    document = score(out, "-r", "meta.answer", "--metric", "choice", "-o", str(tmp_path / "s"))
    assert document["metrics"]["choice"]["mean"] == 0.5  # rows 1002 and 1003 answer A
    scored = lines((tmp_path / "s").read_text())
    assert {k: r["score"]["choice"] for k, r in scored.items()} == {
        "1000": 0.0,
        "1001": 0.0,
        "1002": 1.0,
        "1003": 1.0,
    }


@pytest.mark.parametrize(
    ("template", "fragment"),
    [
        ("{question}\\nE. {E}", "has no column 'E' (--question-template) (its columns: index,"),
        ("{question", "invalid --question-template (expected '}' before end of string)"),
        ("{}\\n{question}", "invalid --question-template: a {} names no field"),
        (" ", "--question-template is empty"),
    ],
)
def test_a_bad_question_template_is_one_line_before_the_run(
    tmp_path: Path, template: str, fragment: str
) -> None:
    tsv = published.mmbench_tsv(tmp_path)
    done = mmrun(*IMAGE_RUN, "--input", str(tsv), "--question-template", template, "--dry-run")
    one_line_error(done, fragment)


def test_a_row_the_template_leaves_no_text_fails_alone(tmp_path: Path, fake_vllm: Any) -> None:
    csv = tmp_path / "t.csv"
    csv.write_text(
        f"id,image,hint\na,{tmp_path / 'p.jpg'},Look closely.\nb,{tmp_path / 'p.jpg'},\n"
    )
    (tmp_path / "p.jpg").write_bytes(jpeg("red"))
    out = tmp_path / "out.jsonl"
    done = mmrun(*IMAGE_RUN, "--input", str(csv), "--question-template", "{hint}", "-o", str(out))
    assert done.exit_code == EXIT_PARTIAL, done.stderr
    rows = lines(out.read_text())
    assert rows["a"]["error"] is None and rows["a"]["question"] == "Look closely."
    assert rows["b"]["error"]["message"] == (
        "--question-template gives no text here: each of its lines has an empty field"
    )


def test_bad_cells_fail_alone_in_a_short_line(tmp_path: Path, fake_vllm: Any) -> None:
    good = b64_jpeg("green")
    broken = good[:100] + "!!" + good[102:]
    cells = {
        "good": good,
        "cut": good[:-3],
        "list": str([good, broken]),
        "noise": "QUJD" * 300,  # base64 of text, no media format
        "path": "deep/" * 60 + "x.jpg",
        "truncated": base64.b64encode(jpeg("red")[:200]).decode(),
    }
    tsv = tmp_path / "bad.tsv"
    tsv.write_text("index\timage\n" + "".join(f"{k}\t{v}\n" for k, v in cells.items()))
    out = tmp_path / "out.jsonl"
    done = mmrun(*IMAGE_RUN, "--input", str(tsv), "--columns", "id=index", "-o", str(out))
    assert done.exit_code == EXIT_PARTIAL, done.stderr
    errors = {k: r["error"] and r["error"]["message"] for k, r in lines(out.read_text()).items()}
    where = str(tmp_path / ("deep/" * 60 + "x.jpg"))
    assert errors == {
        "good": None,
        "cut": "row 1 image holds broken base64 (cut short: its length is not a multiple of 4)",
        "list": "row 2 image[1] holds broken base64 (a character outside base64's alphabet)",
        "noise": "row 3 image holds base64 of 900 bytes that are no image, audio or video "
        "format mmrun knows (they start 41 42 43 41 42 43 41 42)",
        "path": f"no such file: {where[:40]}…{where[-20:]} ({len(where):,} characters) "
        "(check the path)",
        "truncated": "the data: URI is not a readable image (Truncated File Read) "
        "(give a PNG, JPEG, WebP or other Pillow-readable file)",
    }
    assert max(len(e or "") for e in errors.values()) < 160


def test_a_source_in_an_error_is_cut_to_about_60_characters_with_its_length() -> None:
    assert shown("photos/cat.jpg") == "photos/cat.jpg"
    assert shown("p" * 100) == "p" * 100  # a deep folder's path stays whole
    text = "/9j/" + "A" * 950
    assert shown(text) == f"/9j/{'A' * 36}…{'A' * 20} (954 characters)"
    done = mmrun(*IMAGE_RUN, "-i", "/9j/" + "B" * 200, "--dry-run")
    line = one_line_error(done, "no such file: /9j/BBBB")
    assert line.endswith("BBBBBBBBBBBBBBBBBBBB (204 characters) (check the path)")
    assert len(line) < 140


def test_formats_are_told_by_their_magic_bytes(tmp_path: Path) -> None:
    import numpy as np
    import soundfile
    from PIL import Image

    picture = Image.new("RGB", (32, 24), (10, 200, 30))
    found = {}
    for form in ("JPEG", "PNG", "GIF", "WEBP", "BMP", "TIFF"):
        out = io.BytesIO()
        picture.save(out, format=form)
        found[form] = sniff(out.getvalue())
    tone = (np.sin(np.arange(8000) / 5) * 0.2).astype("float32")
    for form in ("WAV", "FLAC", "OGG", "MP3"):
        out = io.BytesIO()
        soundfile.write(out, tone, 16000, format=form)
        found[form] = sniff(out.getvalue())
    found["MP4"] = sniff(write_clip(tmp_path / "c.mp4").read_bytes())
    assert found == {
        "JPEG": "image/jpeg",
        "PNG": "image/png",
        "GIF": "image/gif",
        "WEBP": "image/webp",
        "BMP": "image/bmp",
        "TIFF": "image/tiff",
        "WAV": "audio/wav",
        "FLAC": "audio/flac",
        "OGG": "audio/ogg",
        "MP3": "audio/mpeg",
        "MP4": "video/mp4",
    }
    assert sniff(b"plain text, not media") is None
    for path in ("images/cat.jpg", "coco/train2017/000000033471.jpg", "BMlikeAname", "1000"):
        assert not looks_like_base64(path), path
    assert looks_like_base64(b64_jpeg("red")) and looks_like_base64("QUJD" * 100)
    assert inline_uri(b64_jpeg("red")[:76] + "\n" + b64_jpeg("red")[76:]).startswith(
        "data:image/jpeg;base64,/9j/"
    )  # wrapped base64 (MIME's lines) reads the same


def test_a_manifest_field_of_base64_is_the_image_it_encodes(tmp_path: Path) -> None:
    manifest = tmp_path / "m.jsonl"
    manifest.write_text(
        json.dumps({"id": "a", "image": b64_jpeg("blue")})
        + "\n"
        + json.dumps({"id": "b", "image": [b64_jpeg("red"), b64_jpeg("red")[:-2]]})
        + "\n"
    )
    first, second = _items(manifest)
    assert first.sources == (f"data:image/jpeg;base64,{b64_jpeg('blue')}",)
    assert first.media_names == ("line 1 image",)
    assert second.problem == (
        "line 2 image[1] holds broken base64 (cut short: its length is not a multiple of 4)"
    )


# --- conversation records ------------------------------------------------------------------


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    """A folder whose paths stay short enough to be shown whole in an error message (a test
    worker's tmp_path may be longer than mmrun.errors.shown keeps)."""
    folder = Path(tempfile.mkdtemp(prefix="published-"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def test_llava_json_asks_the_first_question_without_its_marker_and_keeps_the_answer(
    short_tmp: Path,
) -> None:
    path = published.llava_json(short_tmp)
    done = mmrun(
        *IMAGE_RUN, "--input", str(path), "--media-root", str(short_tmp / "images"), "--dry-run",
        "--json",
    )  # fmt: skip
    assert done.exit_code == 0, done.stderr
    rows = lines(done.stdout)
    two_turns, marker_after = rows["000000033471"], rows["000000052846"]
    assert two_turns["question"] == "What colour is the square?"
    assert two_turns["prompt"] == "<s>[INST]What colour is the square?\n[IMG][/INST]"
    assert two_turns["meta"] == {"reference": "The square is green.", "turns": 2}
    assert two_turns["media"] == [str(short_tmp / "images/coco/train2017/000000033471.jpg")]
    assert marker_after["question"] == "Describe the picture."
    assert marker_after["error"] is None and two_turns["error"] is None
    # Without the image folder, the paths are the JSON file's folder's: each record fails.
    alone = mmrun(*IMAGE_RUN, "--input", str(path), "--dry-run", "--json")
    assert alone.exit_code == EXIT_PARTIAL
    assert lines(alone.stdout)["000000052846"]["error"]["message"] == (
        f"no such file: {short_tmp / 'coco/train2017/000000052846.jpg'} (check the path)"
    )


def test_llava_json_runs_and_its_answers_are_scored_beside_the_reference(
    tmp_path: Path, fake_vllm: Any
) -> None:
    path = published.llava_json(tmp_path)
    out = tmp_path / "llava.jsonl"
    done = mmrun(*IMAGE_RUN, "--input", str(path), "--media-root", str(tmp_path / "images"),
                 "-o", str(out))  # fmt: skip
    assert done.exit_code == 0, done.stderr
    document = score(out, "-r", "meta.reference", "--metric", "chrf", "--in-place")
    assert document["metrics"]["chrf"]["scored"] == 2
    beside = lines(Path(f"{out}.scores.jsonl").read_text())
    assert beside["000000052846"]["reference"] == "A red square."


def test_sharegpt_messages_jsonl_and_records_that_cannot_run(tmp_path: Path) -> None:
    (tmp_path / "a.png").write_bytes(jpeg("red"))
    records = [
        {"id": "ok", "images": ["a.png"], "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "<image>What is it?"},
            {"role": "assistant", "content": "A red square."},
        ]},
        {"id": "two", "image": "a.png", "conversations": [
            {"from": "human", "value": "<image>\n<image>\nCompare them."},
            {"from": "gpt", "value": "They are equal."},
        ]},
        {"id": "later", "image": "a.png", "conversations": [
            {"from": "human", "value": "Hello."},
            {"from": "gpt", "value": "Hi."},
            {"from": "human", "value": "<image>\nAnd this?"},
        ]},
        {"id": "text", "conversations": [{"from": "gpt", "value": "Hi."}]},
    ]  # fmt: skip
    path = tmp_path / "sharegpt.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    got = {i.id: i for i in _items(path)}
    assert got["ok"].question == "What is it?" and got["ok"].sources == (str(tmp_path / "a.png"),)
    assert got["ok"].meta == {"reference": "A red square.", "turns": 1}
    assert got["two"].problem == "line 2: its first question has 2 <image> marker(s) for 1 image(s)"
    assert got["later"].problem == (
        "line 3: its <image> marker is in human turn 2, and mmrun runs a record's first turn only"
    )
    assert got["text"].problem == "line 4 has no human turn"


def test_a_json_array_is_read_a_record_at_a_time_across_chunks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mmrun.inputs import conversations

    path = published.llava_json(tmp_path)
    whole = [(i.id, i.question, i.meta) for i in _items(path)]
    for size in (1, 7, 64):
        monkeypatch.setattr(conversations, "_CHUNK", size)
        assert [(i.id, i.question, i.meta) for i in _items(path)] == whole
    assert len(whole) == 2


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ('[{"id": 1, "conversations": []},\n {"id": 2 "x": 1}]', "record 1 is not valid JSON"),
        ('[{"id": 1, "conversations": []} {"id": 2}]', "record 0 is followed by '{', not , or ]"),
        ('[{"id": 1, "image": "a.jpg"}]', "record 0 has no conversations or messages list"),
        (
            '[{"id": 1, "conversations": [{"from": "human", "value": "?"}]}, '
            '{"id": 1, "conversations": []}]',
            "record 1 has the id '1' of record 0",
        ),
    ],
)
def test_a_bad_conversation_file_is_one_line(tmp_path: Path, text: str, fragment: str) -> None:
    path = tmp_path / "c.json"
    path.write_text(text)
    one_line_error(mmrun(*IMAGE_RUN, "--input", str(path), "--dry-run"), fragment)


# --- speech: Common Voice and LibriSpeech ---------------------------------------------------


def test_common_voice_clips_are_found_under_the_media_root_and_scored_by_wer(
    short_tmp: Path, fake_vllm: Any
) -> None:
    tsv = published.common_voice(short_tmp)
    clips = tsv.parent / "clips"
    args = (*AUDIO_RUN, "--input", str(tsv), "--columns", "audio=path", "--keep-columns",
            "sentence")  # fmt: skip
    alone = mmrun(*args, "--dry-run", "--json")
    assert alone.exit_code == EXIT_PARTIAL  # the clips are not beside test.tsv
    assert lines(alone.stdout)["0"]["error"]["message"] == (
        f"no such file: {tsv.parent / 'common_voice_en_4100.mp3'} (check the path)"
    )
    dry = mmrun(*args, "--media-root", str(clips), "--dry-run", "--json")
    assert dry.exit_code == 0, dry.stderr
    assert lines(dry.stdout)["0"]["media"] == [str(clips / "common_voice_en_4100.mp3")]
    out = short_tmp / "cv.jsonl"
    done = mmrun(*args, "--media-root", str(clips), "-o", str(out))
    assert done.exit_code == 0, done.stderr
    rows = lines(out.read_text())
    document = score(out, "-r", "meta.sentence", "--metric", "wer")
    wer = document["metrics"]["wer"]
    assert wer["scored"] == 2
    assert wer["corpus"] == pytest.approx(
        _wer(rows, {k: r["meta"]["sentence"] for k, r in rows.items()})
    )
    # A kept column's name alone is looked for in meta.
    assert score(out, "-r", "sentence", "--metric", "wer")["metrics"]["wer"] == wer


def test_librispeech_runs_as_a_folder_and_is_scored_by_its_transcripts(
    tmp_path: Path, fake_vllm: Any
) -> None:
    split = published.librispeech(tmp_path)
    out = tmp_path / "test-clean.jsonl"
    done = mmrun(*AUDIO_RUN, "--audio", str(split), "-o", str(out))
    assert done.exit_code == 0, done.stderr
    rows = lines(out.read_text())
    assert sorted(Path(k).name for k in rows) == [
        "1089-134686-0000.flac",
        "1089-134686-0001.flac",
        "121-127105-0000.flac",
    ]
    truth = {
        k: dict(zip(("1089-134686-0000", "1089-134686-0001", "121-127105-0000"),
                    published.SENTENCES, strict=True))[Path(k).stem]
        for k in rows
    }  # fmt: skip
    wer = score(out, "-r", str(split), "--metric", "wer")["metrics"]["wer"]
    assert (wer["scored"], wer["missing_reference"]) == (3, 0)
    assert wer["corpus"] == pytest.approx(_wer(rows, truth))
    # The same answers written right but one word: the WER says so, to the word.
    exact = tmp_path / "exact.jsonl"
    exact.write_text(
        "".join(
            json.dumps({**r, "text": truth[k].lower().replace("fox", "box")}) + "\n"
            for k, r in rows.items()
        )
    )
    wer = score(exact, "-r", str(split), "--metric", "wer")["metrics"]["wer"]
    assert wer["corpus"] == pytest.approx(1 / 28)  # one word of 9 + 8 + 11
    chapter = split / "1089" / "134686" / "1089-134686.trans.txt"
    wer = score(exact, "-r", str(chapter), "--metric", "wer")["metrics"]["wer"]
    assert (wer["scored"], wer["missing_reference"]) == (2, 1)
    one_line_error(
        mmrun(
            "score", str(exact), "-r", str(tmp_path / "LibriSpeech" / "empty"), "--metric", "wer"
        ),
        "no such reference file",
    )
    (tmp_path / "none").mkdir()
    one_line_error(
        mmrun("score", str(exact), "-r", str(tmp_path / "none"), "--metric", "wer"),
        "holds no *.trans.txt file (LibriSpeech's transcripts)",
    )


# --- the choice metric ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("answer", "letter"),
    [
        ("B", "B"),
        ("(B)", "B"),
        ("B. green", "B"),
        ("Answer: b", "B"),
        ("green", "B"),
        ("Green.", "B"),
        ("The square is green.", "B"),
        ("red or green", None),
        ("purple", None),
    ],
)
def test_choice_maps_an_answer_to_its_option_letter(answer: str, letter: str | None) -> None:
    row = {"question": "What colour?\nA. red\nB. green\nC) blue\n(D) yellow", "meta": None}
    options = options_of(row)
    assert options == {"A": "red", "B": "green", "C": "blue", "D": "yellow"}
    assert option_letter(answer, options) == letter
    assert options_of({"question": "x", "meta": {"A": "cat", "B": "dog", "C": None, "id": 3}}) == {
        "A": "cat",
        "B": "dog",
    }


def test_input_options_that_do_not_fit_are_one_line(tmp_path: Path) -> None:
    csv = tmp_path / "t.csv"
    csv.write_text("id,image\na,a.jpg\n")
    one_line_error(
        mmrun(*IMAGE_RUN, "--input", str(csv), "--media-root", str(tmp_path / "no"), "--dry-run"),
        f"--media-root {tmp_path / 'no'} is not a folder",
    )
    batch = tmp_path / "b.jsonl"
    batch.write_text(json.dumps({"custom_id": "r", "body": {"messages": []}}) + "\n")
    one_line_error(
        mmrun(*IMAGE_RUN, "--input", str(batch), "--question-template", "{q}", "--dry-run"),
        "--question-template builds mmrun's own question; an OpenAI batch file brings its",
    )


def test_a_manifest_and_an_openai_batch_take_the_media_root_and_a_manifest_the_template(
    tmp_path: Path,
) -> None:
    root = tmp_path / "media"
    root.mkdir()
    manifest = tmp_path / "m.jsonl"
    manifest.write_text(
        json.dumps({"id": "a", "image": "p.jpg", "meta": {"hint": "Look.", "A": "red"}}) + "\n"
    )
    (item,) = _items(
        manifest, media_root=str(root), question_template="{hint}\\n{question}\\nA. {A}"
    )
    assert item.sources == (str(root / "p.jpg"),) and item.question == "Look.\nA. red"
    with pytest.raises(Exception, match=r"has no field 'B' \(--question-template\)"):
        _items(manifest, question_template="{B}")
    batch = tmp_path / "b.jsonl"
    part = {"type": "image_url", "image_url": {"url": "p.jpg"}}
    body = {"messages": [{"role": "user", "content": [part]}]}
    batch.write_text(json.dumps({"custom_id": "r", "body": body}) + "\n")
    assert _items(batch, media_root=str(root))[0].sources == (str(root / "p.jpg"),)
    assert _items(batch)[0].sources == (str(tmp_path / "p.jpg"),)


def _items(path: Path, **options: Any) -> list[Any]:
    reader = open_input(str(path), IMAGE, InputOptions(**options))
    reader.check()
    return list(reader)


def _wer(rows: dict[str, dict[str, Any]], truth: dict[str, str]) -> float:
    normalizer = EnglishTextNormalizer()

    def norm(text: str) -> str:
        return " ".join(normalizer(text).split())

    keys = sorted(rows)
    return float(jiwer.wer([norm(truth[k]) for k in keys], [norm(rows[k]["text"]) for k in keys]))
