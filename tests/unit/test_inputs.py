"""What a batch runs over: folders, glob patterns and JSONL manifests, read into prompts."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest

from mmrun.errors import UsageError
from mmrun.inputs import Manifest, expand_sources
from mmrun.modalities.audio import AUDIO
from mmrun.modalities.image import IMAGE


@pytest.fixture
def photos(tmp_path: Path) -> Path:
    for name in ("b.jpg", "a.PNG", "sub/c.webp", "sub/deeper/d.jpeg", "notes.txt", "sub/e.wav"):
        path = tmp_path / "photos" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"x")
    return tmp_path / "photos"


def test_a_folder_is_every_file_of_the_modality_in_it_recursively_sorted(photos: Path) -> None:
    found, expanded = expand_sources((str(photos),), IMAGE)
    assert expanded
    assert [Path(p).relative_to(photos).as_posix() for p in found] == [
        "a.PNG",
        "b.jpg",
        "sub/c.webp",
        "sub/deeper/d.jpeg",
    ]
    audio, _ = expand_sources((str(photos),), AUDIO)
    assert [Path(p).name for p in audio] == ["e.wav"]


def test_a_glob_pattern_expands_recursively_and_sorted(photos: Path) -> None:
    found, expanded = expand_sources((f"{photos}/**/*.jp*g",), IMAGE)
    assert expanded
    assert [Path(p).name for p in found] == ["b.jpg", "d.jpeg"]


def test_named_files_urls_and_assets_stay_as_they_are(photos: Path) -> None:
    sources = (
        str(photos / "b.jpg"),
        "https://example.com/x.png",
        "duck",
        "data:image/png;base64,AA",
    )
    assert expand_sources(sources, IMAGE) == (list(sources), False)


@pytest.mark.parametrize(
    ("source", "message"),
    [("{photos}/*.gif", "no file matches"), ("{photos}/sub/deeper/../../notes", "holds no")],
)
def test_a_pattern_or_folder_with_nothing_to_run(photos: Path, source: str, message: str) -> None:
    target = source.format(photos=photos)
    if "holds no" in message:
        (photos / "empty").mkdir()
        target = str(photos / "empty")
    with pytest.raises(UsageError, match=message):
        expand_sources((target,), IMAGE)


def test_a_missing_file_with_brackets_is_a_missing_file_not_a_pattern(tmp_path: Path) -> None:
    name = str(tmp_path / "photo[1].png")
    assert expand_sources((name,), IMAGE) == ([name], False)


def write(tmp_path: Path, *lines: str) -> Path:
    path = tmp_path / "manifest.jsonl"
    path.write_text("".join(line + "\n" for line in lines))
    return path


def read(path: Path | str, modality=IMAGE) -> list:  # type: ignore[no-untyped-def]
    manifest = Manifest(str(path), modality)
    manifest.check()
    return list(manifest)


def test_manifest_lines_ids_questions_meta_and_relative_paths(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        json.dumps(
            {"id": "x", "image": ["a.jpg", "https://h/b.png"], "question": "Q?", "meta": {"k": [1]}}
        ),
        "",
        json.dumps({"image": "sub/c.jpg"}),
        "plain/path.jpg",
        json.dumps({"id": 7, "image": ["duck", "/abs/d.jpg"]}),
    )
    items = read(path)
    assert [i.id for i in items] == ["x", "3", str(tmp_path / "plain/path.jpg"), "7"]
    assert [i.index for i in items] == [0, 1, 2, 3]
    assert items[0].sources == (str(tmp_path / "a.jpg"), "https://h/b.png")
    assert items[0].question == "Q?" and items[0].meta == {"k": [1]}
    assert items[1].sources == (str(tmp_path / "sub/c.jpg"),) and items[1].question is None
    assert items[3].sources == ("duck", "/abs/d.jpg")  # an asset name and an absolute path


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"id": "a", "image": ["x.jpg"]', "line 2 is not valid JSON"),
        ("[1, 2]", "line 2 is not a JSON object"),
        ('{"id": "a", "imgae": "x.jpg"}', "line 2 has unknown field 'imgae'"),
        ('{"id": "a", "audio": "x.wav"}', "line 2 has unknown field 'audio'"),
        ('{"id": "a", "image": 3}', "line 2: 'image' must be a source or a list"),
        ('{"id": "a", "image": ["x.jpg", ""]}', "line 2: 'image' must be a source or a list"),
        ('{"id": true, "image": "x.jpg"}', "line 2: 'id' must be a non-empty string"),
        ('{"id": "b", "image": "x.jpg", "question": 5}', "line 2: 'question' must be a string"),
        ('{"id": "b", "image": "x.jpg", "meta": [1]}', "line 2: 'meta' must be a JSON object"),
        ('{"id": "first", "image": "y.jpg"}', "line 2: id 'first' already used on line 1"),
    ],
)
def test_every_malformed_line_is_one_error_naming_its_line(
    tmp_path: Path, line: str, message: str
) -> None:
    path = write(tmp_path, '{"id": "first", "image": "x.jpg"}', line)
    with pytest.raises(UsageError) as caught:
        read(path)
    text = str(caught.value)
    assert message in text and "\n" not in text


def test_an_empty_manifest_and_a_missing_one(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="holds no prompts"):
        read(write(tmp_path, "", "  "))
    with pytest.raises(UsageError, match="no such manifest"):
        read(tmp_path / "missing.jsonl")
    (tmp_path / "latin1.jsonl").write_bytes(b'{"image": "caf\xe9.jpg"}\n')
    with pytest.raises(UsageError, match="is not UTF-8"):
        read(tmp_path / "latin1.jsonl")


def test_standard_input_is_read_once_and_kept_for_the_second_pass(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = "a.wav\nsub/b.wav\n"
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data.encode())))
    monkeypatch.chdir(tmp_path)
    manifest = Manifest("-", AUDIO)
    manifest.check()
    assert manifest.total == 2 and manifest.max_count == 1
    assert [i.sources for i in manifest] == [
        (str(tmp_path / "a.wav"),),
        (str(tmp_path / "sub/b.wav"),),
    ]
    assert [i.id for i in manifest] == [str(tmp_path / "a.wav"), str(tmp_path / "sub/b.wav")]
