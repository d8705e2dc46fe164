"""Score results against references, with the metrics of the libraries the field uses.

| metric | per item | library |
|---|---|---|
| ``wer``, ``cer`` | word / character error rate (lower is better) | jiwer |
| ``exact`` | 1 if the normalized answer equals a normalized reference | jiwer's transforms |
| ``contains`` | 1 if a normalized reference occurs, as whole words, in the answer | jiwer's transforms |
| ``choice`` | 1 if the option letter the answer starts with is the reference's | |
| ``anls`` | 1 - normalized Levenshtein distance when below 0.5, else 0 (best reference) | rapidfuzz |
| ``bleu``, ``chrf`` | sentence BLEU / chrF, 0-100; the summary adds the corpus score | sacrebleu |

An item that failed, that answered blank (empty, or only whitespace: no answer), or that has
no reference, is counted as such and never scored.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mmrun.errors import MissingDependencyError, UsageError
from mmrun.review.load import Results, is_blank, scores_path

METRICS = ("wer", "cer", "exact", "contains", "choice", "anls", "bleu", "chrf")
LOWER_IS_BETTER = frozenset({"wer", "cer"})
# ANLS's threshold (Biten et al., 2019, the DocVQA metric): a distance at or above it scores 0.
ANLS_THRESHOLD = 0.5
NORMALIZERS = ("whisper", "basic", "none")

Reference = str | list[str]


def _need(module: str) -> Any:
    from importlib import import_module

    try:
        return import_module(module)
    except ImportError:
        raise MissingDependencyError(
            f"scoring needs {module.split('.')[0]}", hint="pip install 'mmrun[review]'"
        ) from None


def basic_normalizer() -> Callable[[str], str]:
    """Lowercase, punctuation removed, runs of spaces made one, ends stripped (jiwer)."""
    jiwer = _need("jiwer")
    compose = jiwer.Compose(
        [
            jiwer.ToLowerCase(),
            jiwer.RemovePunctuation(),
            jiwer.RemoveMultipleSpaces(),
            jiwer.Strip(),
        ]
    )

    def normalize(text: str) -> str:
        return str(compose(text))

    return normalize


def whisper_normalizer() -> Callable[[str], str] | None:
    """Whisper's English normalizer (numbers, spellings, contractions), or None when the
    whisper-normalizer package is not installed."""
    try:
        from whisper_normalizer.english import EnglishTextNormalizer
    except ImportError:
        return None
    normalizer = EnglishTextNormalizer()

    def normalize(text: str) -> str:
        return " ".join(str(normalizer(text)).split())

    return normalize


def normalizer(name: str) -> tuple[Callable[[str], str], str]:
    """The transform named by ``--normalize`` and the name of the one used."""
    if name == "none":
        return (lambda text: text), "none"
    if name == "whisper":
        found = whisper_normalizer()
        if found is not None:
            return found, "whisper"
    return basic_normalizer(), "basic"


def _references(reference: Reference) -> list[str]:
    return [reference] if isinstance(reference, str) else list(reference)


_CHOICE = re.compile(r"^\W*(?:answer\W*(?:is\W*)?)?\(?([A-Za-z])(?:[\s).:,]|$)", re.IGNORECASE)
# An option line of a question: "A. a cat", "(B) green", "C) red", "D: blue".
_OPTION = re.compile(r"^\s*\(?([A-Z])(?:[.:]|\))\s+(\S.*?)\s*$")


def choice_letter(text: str) -> str | None:
    """The option letter an answer opens with: ``B``, ``(B) a cat``, ``b.``, ``Answer: B``."""
    match = _CHOICE.match(text.strip())
    return match.group(1).upper() if match else None


def options_of(row: Mapping[str, Any]) -> dict[str, str]:
    """A result line's options, letter -> text: its kept columns named A, B, C, ... (a
    benchmark table's), else the option lines of its question (``A. a cat``)."""
    meta = row.get("meta")
    if isinstance(meta, Mapping):
        kept = {
            str(k): str(v)
            for k, v in meta.items()
            if len(str(k)) == 1 and str(k).isupper() and v is not None and str(v).strip()
        }
        if kept:
            return kept
    found: dict[str, str] = {}
    for line in str(row.get("question") or "").splitlines():
        match = _OPTION.match(line)
        if match and match.group(1) not in found:
            found[match.group(1)] = match.group(2)
    return found


def _plain(text: str) -> str:
    return " ".join(re.sub(r"[^\w\s]", " ", text.lower()).split())


def option_letter(text: str, options: Mapping[str, str]) -> str | None:
    """The option an answer picks: ``B``, ``(B)``, ``B. green``, ``Answer: B``, or, given the
    options, the text of one of them (``green``), alone or as the only option it names."""
    letter = choice_letter(text)
    if not options:
        return letter
    answer = _plain(text)
    for key, option in options.items():
        if answer and _plain(option) == answer:
            return key
    if letter in options:
        return letter
    named = [k for k, o in options.items() if _plain(o) and f" {_plain(o)} " in f" {answer} "]
    return named[0] if len(named) == 1 else None


@dataclass(frozen=True)
class Scorer:
    """Per-item scores of one metric; ``corpus`` where the library has a corpus score.

    item: (answer, references, the result line) -> the score (the line gives ``choice`` the
        question's options).
    """

    name: str
    item: Callable[[str, list[str], Mapping[str, Any]], float]
    corpus: Callable[[list[str], list[list[str]]], float] | None = None


def scorer(metric: str, normalize: Callable[[str], str]) -> Scorer:
    """The scorer of ``metric``; ``normalize`` applies to wer, cer, exact, contains."""
    if metric in ("wer", "cer"):
        jiwer = _need("jiwer")
        measure = jiwer.wer if metric == "wer" else jiwer.cer

        def error_rate(hyp: str, refs: list[str], _row: Mapping[str, Any]) -> float:
            return float(measure(normalize(refs[0]), normalize(hyp)))

        def corpus_rate(hyps: list[str], refs: list[list[str]]) -> float:
            return float(measure([normalize(r[0]) for r in refs], [normalize(h) for h in hyps]))

        return Scorer(metric, error_rate, corpus_rate)
    if metric == "exact":
        return Scorer(
            metric, lambda h, refs, _: float(any(normalize(h) == normalize(r) for r in refs))
        )
    if metric == "contains":
        return Scorer(
            metric,
            lambda h, refs, _: float(any(f" {normalize(r)} " in f" {normalize(h)} " for r in refs)),
        )
    if metric == "choice":

        def choice(hyp: str, refs: list[str], row: Mapping[str, Any]) -> float:
            options = options_of(row)
            letter = option_letter(hyp, options)
            wanted = {option_letter(r, options) or r.strip().upper() for r in refs}
            return float(letter is not None and letter in wanted)

        return Scorer(metric, choice)
    if metric == "anls":
        levenshtein = _need("rapidfuzz.distance").Levenshtein

        def anls(hyp: str, refs: list[str], _row: Mapping[str, Any]) -> float:
            answer = " ".join(hyp.lower().split())
            best = 0.0
            for ref in refs:
                distance = levenshtein.normalized_distance(answer, " ".join(ref.lower().split()))
                best = max(best, 1.0 - distance if distance < ANLS_THRESHOLD else 0.0)
            return best

        return Scorer(metric, anls)
    if metric in ("bleu", "chrf"):
        sacrebleu = _need("sacrebleu")
        sentence = sacrebleu.sentence_bleu if metric == "bleu" else sacrebleu.sentence_chrf
        corpus = sacrebleu.corpus_bleu if metric == "bleu" else sacrebleu.corpus_chrf

        def corpus_score(hyps: list[str], refs: list[list[str]]) -> float:
            width = max(len(r) for r in refs)
            # sacrebleu takes one stream per reference position; a shorter list repeats its last.
            streams = [[r[min(i, len(r) - 1)] for r in refs] for i in range(width)]
            return float(corpus(hyps, streams).score)

        return Scorer(metric, lambda h, refs, _: float(sentence(h, refs).score), corpus_score)
    raise UsageError(f"unknown metric {metric!r}", hint=f"choose from {', '.join(METRICS)}")


# --- references ---------------------------------------------------------------------------

_FILE_SUFFIXES = (".jsonl", ".json", ".csv", ".tsv", ".parquet")
# LibriSpeech's transcripts: one file per chapter, a line "ID TEXT" per utterance.
TRANSCRIPT_SUFFIX = ".trans.txt"


def dotted(record: Mapping[str, Any], path: str) -> Any:
    """``record["meta"]["answer"]`` for ``meta.answer``; None where any step is missing."""
    value: Any = record
    for part in path.split("."):
        if not isinstance(value, Mapping):
            return None
        value = value.get(part)
    return value


def _as_reference(value: Any) -> Reference | None:
    if value is None:
        return None
    if isinstance(value, list | tuple):
        texts = [str(v) for v in value if v is not None and str(v).strip()]
        return texts or None
    text = str(value)
    return text if text.strip() else None


def references(
    results: Results, source: str, field_name: str = "reference", id_field: str = "id"
) -> dict[str, Reference]:
    """Each id's reference: from a file of references keyed by id (JSONL, CSV, TSV, Parquet:
    ``field_name`` and ``id_field`` name its columns), from LibriSpeech's transcripts (a
    ``*.trans.txt`` file, or a folder holding them), or, when ``source`` is no file, from the
    results' own field ``source`` (a dotted path such as ``meta.answer``; a kept column's
    name alone is looked for in ``meta`` too). A reference file's ids may be the results'
    ids or their media files' names without extension (``1089-134686-0000``)."""
    path = Path(source).expanduser()
    if path.is_dir() or source.endswith(TRANSCRIPT_SUFFIX):
        return _by_stem(results, _transcripts(path, source))
    if path.is_file():
        return _by_stem(results, _keyed(path, source, field_name, id_field))
    if source.endswith(_FILE_SUFFIXES) or os.sep in source:
        raise UsageError(f"no such reference file: {source}", hint="check the path")
    found = _from_results(results, source)
    if not found and "." not in source:
        found = _from_results(results, f"meta.{source}")
    if not found:
        raise UsageError(
            f"no result line of {results.path.name} has the field {source!r}",
            hint="check the field's name, or give a JSONL or CSV file of references keyed by id",
        )
    return found


def _from_results(results: Results, field_name: str) -> dict[str, Reference]:
    found: dict[str, Reference] = {}
    for row in results.rows:
        reference = _as_reference(dotted(row, field_name))
        if reference is not None:
            found[row["id"]] = reference
    return found


def _by_stem(results: Results, found: dict[str, Reference]) -> dict[str, Reference]:
    """``found`` keyed by the results' ids: an id that has no reference of its own takes
    the one of its file's name without extension (a folder run's ids are its files' paths),
    or of its first media's."""
    keyed = dict(found)
    for row in results.rows:
        ident = row["id"]
        if ident in found:
            continue
        media = row.get("media") or []
        for name in (ident, *(media[:1] if isinstance(media, list) else [])):
            stem = _stem(str(name))
            if stem in found:
                keyed[ident] = found[stem]
                break
    return keyed


def _stem(name: str) -> str:
    return os.path.splitext(os.path.basename(name.rstrip("/")))[0]


def _transcripts(path: Path, source: str) -> dict[str, Reference]:
    """LibriSpeech's transcripts: ``ID TEXT`` lines in each chapter's ``*.trans.txt``."""
    files = sorted(path.rglob(f"*{TRANSCRIPT_SUFFIX}")) if path.is_dir() else [path]
    if not files:
        raise UsageError(
            f"the folder {source} holds no *{TRANSCRIPT_SUFFIX} file (LibriSpeech's transcripts)",
            hint="give that folder, or a file of references keyed by id",
        )
    found: dict[str, Reference] = {}
    for file in files:
        try:
            text = file.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise UsageError(f"no such reference file: {source}", hint="check the path") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise UsageError(f"cannot read {file}: {exc}", hint="give a UTF-8 file") from None
        for number, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            ident, _, sentence = line.strip().partition(" ")
            if not sentence.strip():
                raise UsageError(
                    f"{file}:{number} is not an ID TEXT line", hint="check the transcript file"
                )
            found[ident] = sentence.strip()
    return found


def _keyed(path: Path, source: str, field_name: str, id_field: str) -> dict[str, Reference]:
    """The references of a file of records keyed by id."""
    records = _reference_records(path)
    found: dict[str, Reference] = {}
    for number, record in enumerate(records, 1):
        key = dotted(record, id_field)
        if key is None:
            raise UsageError(
                f"{source}: record {number} has no {id_field!r}",
                hint="name the id column with --reference-id",
            )
        reference = _as_reference(dotted(record, field_name))
        if reference is not None:
            found[str(key)] = reference
    if records and not any(dotted(r, field_name) is not None for r in records):
        raise UsageError(
            f"{source} has no field {field_name!r}",
            hint="name the reference column with --reference-field",
        )
    return found


def _reference_records(path: Path) -> list[dict[str, Any]]:
    if path.suffix == ".parquet":
        try:
            import pyarrow.parquet as pq
        except ImportError:
            raise MissingDependencyError(
                f"reading {path.name} needs pyarrow", hint="pip install 'mmrun[review]'"
            ) from None
        rows: list[dict[str, Any]] = pq.read_table(path).to_pylist()
        return rows
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read {path}: {exc}", hint="give a UTF-8 file") from None
    if path.suffix in (".csv", ".tsv"):
        import csv
        import io

        delimiter = "\t" if path.suffix == ".tsv" else ","
        return list(csv.DictReader(io.StringIO(text, newline=""), delimiter=delimiter))
    if path.suffix == ".json":
        try:
            data = json.loads(text)
        except ValueError:
            raise UsageError(f"{path} is not JSON", hint="give a JSON list or JSONL") from None
        if isinstance(data, dict):  # {"id": "reference", ...}
            return [{"id": k, "reference": v} for k, v in data.items()]
        if isinstance(data, list) and all(isinstance(r, dict) for r in data):
            return data
        raise UsageError(f"{path} is not a list of records", hint="give a JSON list or JSONL")
    records = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError:
            raise UsageError(f"{path}:{number} is not a JSON line", hint="fix the line") from None
        if not isinstance(record, dict):
            raise UsageError(f"{path}:{number} is not a JSON object", hint="fix the line")
        records.append(record)
    return records


# --- scoring and the summary --------------------------------------------------------------


@dataclass
class Summary:
    """One metric over a run: the mean of the items scored, its bootstrap interval, counts."""

    metric: str
    mean: float | None
    low: float | None
    high: float | None
    corpus: float | None
    scored: int
    missing_reference: int
    failed: int
    blank: int = 0
    values: dict[str, float] = field(default_factory=dict, repr=False)

    def json(self) -> dict[str, Any]:
        return {
            "mean": self.mean,
            "ci95": None if self.low is None else [self.low, self.high],
            "corpus": self.corpus,
            "scored": self.scored,
            "missing_reference": self.missing_reference,
            "failed": self.failed,
            "blank": self.blank,
            "lower_is_better": self.metric in LOWER_IS_BETTER,
        }


def bootstrap(
    values: Sequence[float], *, seed: int, resamples: int = 1000
) -> tuple[float, float] | None:
    """The percentile bootstrap 95% interval of the mean (None for fewer than 2 values)."""
    if len(values) < 2:
        return None
    import numpy as np

    data = np.asarray(values, dtype=float)
    rng = np.random.default_rng(seed)
    means = data[rng.integers(0, len(data), size=(resamples, len(data)))].mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    return float(low), float(high)


def score(
    results: Results,
    refs: Mapping[str, Reference],
    metrics: Sequence[str],
    *,
    normalize: Callable[[str], str],
    seed: int,
    resamples: int = 1000,
) -> list[Summary]:
    """Score each row in place (``row["score"][metric]``, ``row["reference"]``) and summarize."""
    unknown = [m for m in metrics if m not in METRICS]
    if unknown:
        raise UsageError(f"unknown metric {unknown[0]!r}", hint=f"choose from {', '.join(METRICS)}")
    if not set(refs) & {row["id"] for row in results.rows}:
        raise UsageError(
            f"no id of {results.path.name} has a reference",
            hint="check that the references' ids are the results' ids (--reference-id)",
        )
    scorers = [scorer(m, normalize) for m in metrics]
    summaries = []
    for one in scorers:
        values: dict[str, float] = {}
        hyps, paired = [], []
        missing = failed = blank = 0
        for row in results.rows:
            reference = refs.get(row["id"])
            row["score"] = dict(row["score"] or {})
            row["score"][one.name] = None
            if row["error"] is not None or row["text"] is None:
                failed += 1
                continue
            if is_blank(row):
                blank += 1
                continue
            if reference is None:
                missing += 1
                continue
            row["reference"] = reference
            value = one.item(row["text"], _references(reference), row)
            row["score"][one.name] = values[row["id"]] = value
            hyps.append(row["text"])
            paired.append(_references(reference))
        numbers = list(values.values())
        interval = bootstrap(numbers, seed=seed, resamples=resamples)
        summaries.append(
            Summary(
                metric=one.name,
                mean=math.fsum(numbers) / len(numbers) if numbers else None,
                low=interval[0] if interval else None,
                high=interval[1] if interval else None,
                corpus=one.corpus(hyps, paired) if one.corpus and hyps else None,
                scored=len(numbers),
                missing_reference=missing,
                failed=failed,
                blank=blank,
                values=values,
            )
        )
    return summaries


def write_scored(results: Results, target: Path) -> None:
    """Every line of ``results`` with its ``reference`` and ``score``, written whole, atomically."""
    _write_lines(target, results.rows)


def write_sidecar(results: Results) -> Path:
    """The scores beside the ledger (``FILE.scores.jsonl``): id, reference, score."""
    target = scores_path(results.path)
    _write_lines(
        target,
        [{"id": r["id"], "reference": r["reference"], "score": r["score"]} for r in results.rows],
    )
    return target


def _write_lines(target: Path, rows: Sequence[Mapping[str, Any]]) -> None:
    partial = target.with_name(f".{target.name}.{os.getpid()}.part")
    try:
        with open(partial, "w", encoding="utf-8") as out:
            for row in rows:
                out.write(json.dumps(row, ensure_ascii=False, default=str) + "\n")
        os.replace(partial, target)
    except OSError as exc:
        partial.unlink(missing_ok=True)
        raise UsageError(
            f"cannot write {target}: {exc.strerror or exc}", hint="choose a writable path"
        ) from None
