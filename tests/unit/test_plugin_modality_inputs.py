"""A fourth modality, registered by a plugin's hook, is read by every input reader through what
it declares (its media field, column names, ``datasets`` feature type and OpenAI content parts),
with no edit to the readers."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from mmrun.errors import UsageError
from mmrun.inputs import InputOptions, Item, open_input
from mmrun.inputs.openai_batch import fill_media
from mmrun.plugins import Register, get_registry
from mmrun.registry import Modality, openai_url


def _file_source(part: Mapping[str, Any]) -> str | None:
    """OpenAI's ``file`` part carries a document inline, as a data URI in ``file_data``."""
    payload = part.get("file")
    if isinstance(payload, Mapping) and isinstance(payload.get("file_data"), str):
        return str(payload["file_data"]) or None
    return openai_url(part)


# Scanned documents: the command is `mmrun document`, but the media field is "page".
DOCUMENT = Modality(
    name="document",
    assets=(),
    questions={1: "What is the title?"},
    default_count=1,
    min_count=1,
    temperature=0.0,
    max_tokens=32,
    seed=None,
    default_model="toy_document",
    decode=lambda data, label: (data, {"bytes": len(data)}),
    chat_part=lambda item, spec: {"type": "file", "file": {"file_data": "data:,page"}},
    short_option="-d",
    extensions=(".pdf",),
    vllm_modality="image",
    media_field="page",
    column_names=("page", "pages", "scan"),
    feature_type="Pdf",
    openai_parts=("file",),
    openai_source=_file_source,
)


def register(register: Register) -> None:
    register.modality(DOCUMENT)


@pytest.fixture
def document() -> Iterator[Modality]:
    """DOCUMENT, registered by its plugin's hook in the registry mmrun uses, and removed again
    however the test ends."""
    registry = get_registry()
    before = registry.copy()
    try:
        register(registry.registrar("documentplugin"))
        yield registry.modality("document")
    finally:
        registry.modalities = before.modalities
        registry.loaders = before.loaders
        registry.origins = before.origins
    assert "document" not in get_registry().modalities


def read(source: Path, modality: Modality, **options: Any) -> list[Item]:
    reader = open_input(str(source), modality, InputOptions(**options))
    reader.check()
    return list(reader)


def test_a_manifest_names_its_media_by_the_modalitys_field(
    document: Modality, tmp_path: Path
) -> None:
    manifest = tmp_path / "pages.jsonl"
    lines = [
        {"id": "a", "page": "scan.pdf", "question": "Who signed?"},
        {"page": ["1.pdf", "2.pdf"]},
    ]
    manifest.write_text("".join(json.dumps(line) + "\n" for line in lines))
    items = read(manifest, document)
    assert [(i.id, i.sources, i.question) for i in items] == [
        ("a", (str(tmp_path / "scan.pdf"),), "Who signed?"),
        ("2", (str(tmp_path / "1.pdf"), str(tmp_path / "2.pdf")), None),
    ]
    manifest.write_text(json.dumps({"document": "scan.pdf"}) + "\n")
    with pytest.raises(UsageError, match="unknown field 'document'") as error:
        read(manifest, document)
    assert "use id, page, question" in (error.value.hint or "")


def test_a_table_finds_its_media_by_feature_type_or_column_name(
    document: Modality, tmp_path: Path
) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.table({"page_id": ["p1"], "doc": ["one.pdf"], "prompt": ["Title?"]})
    features = {"info": {"features": {"doc": {"_type": "Pdf"}}}}
    pq.write_table(
        table.replace_schema_metadata({"huggingface": json.dumps(features)}),
        tmp_path / "typed.parquet",
    )
    [typed] = read(tmp_path / "typed.parquet", document)
    assert (typed.id, typed.sources, typed.question) == (
        "p1",
        (str(tmp_path / "one.pdf"),),
        "Title?",
    )

    (tmp_path / "named.csv").write_text("Scan,other\ntwo.pdf,x\n")
    [named] = read(tmp_path / "named.csv", document)
    assert named.sources == (str(tmp_path / "two.pdf"),)
    [mapped] = read(tmp_path / "named.csv", document, columns="page=other")
    assert mapped.sources == (str(tmp_path / "x"),)
    with pytest.raises(UsageError, match="invalid --columns entry 'document=other'"):
        read(tmp_path / "named.csv", document, columns="document=other")


def test_an_openai_batch_line_reads_and_refills_the_modalitys_own_parts(
    document: Modality, tmp_path: Path
) -> None:
    pdf = "data:application/pdf;base64," + base64.b64encode(b"%PDF-1.4").decode()
    own = [
        {"type": "text", "text": "Title?"},
        {"type": "file", "file": {"file_data": pdf, "filename": "a.pdf"}},
    ]
    other = [{"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}]
    batch = tmp_path / "batch.jsonl"
    batch.write_text(
        "".join(
            json.dumps({"custom_id": ident, "body": {"messages": [{"role": "user", "content": c}]}})
            + "\n"
            for ident, c in (("r1", own), ("r2", [*own, *other]))
        )
    )
    first, second = read(batch, document)
    assert (first.sources, first.question, first.problem) == ((pdf,), "Title?", None)
    assert first.media_names == ("r1 document 0",)
    assert second.problem == "request r2 carries image: this run is `mmrun document`"

    assert first.messages is not None
    filled = fill_media(first.messages, "document", [{"type": "file", "file": "decoded"}])
    assert filled[0]["content"] == [own[0], {"type": "file", "file": "decoded"}]
