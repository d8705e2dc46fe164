"""mmrun against vLLM's current multimodal examples, key by key.

The examples (vLLM VERSION / COMMIT in tools/upstream.py) are fetched from PyPI by
``make install`` into .cache/upstream/ (third-party code: not committed). The oracle
(tests/helpers/upstream_oracle.py) runs each example's own command line, ``parse_args`` then
``main``, with stand-ins that record what it hands to vLLM; mmrun plans the same run
(``plan`` with the same key, media count and method) and its loader renders with the same
stand-in renderer. For every key both have, the engine arguments, prompt, media, sampling, stop
tokens, chat template and LoRA must be equal, for several media counts and both methods,
except the deliberate deviations listed in DEVIATIONS, each with its reason. Keys upstream no
longer has are listed in MMRUN_ONLY; an upstream key mmrun lacks fails the test.

Normalisations, applied to both sides (deliberate too, and the same for every key):
- ``limit_mm_per_prompt``: mmrun sets the media kinds a model is not asked to take to 0, as
  upstream's chat path and audio example do; upstream's image ``generate`` path leaves them to
  vLLM's defaults, which reserve memory for media that never come.
- The engine seed is compared once, in test_cli_defaults_match_upstream (it is a CLI default).
- qwen2_vl, qwen2_5_vl: upstream resizes images (and sets max_model_len 4096) only when the
  optional ``qwen_vl_utils`` package is installed, else it runs unresized images with
  max_model_len 32768. mmrun always takes the resize branch (its own resize rule, no extra
  package); the oracle installs a stand-in ``qwen_vl_utils`` so that this branch is compared.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from mmrun.builder import PromptSettings
from mmrun.engine import chat_input
from mmrun.errors import UsageError
from mmrun.planning import RunOptions, compose_engine_args, plan
from mmrun.plugins import builtin_registry
from mmrun.registry import CHANGED_UPSTREAM, UPSTREAM, version_key
from mmrun.request import LoaderContext
from mmrun.support import VllmInfo
from tests.helpers import original_examples
from tests.helpers import upstream_oracle as oracle
from tools import upstream

# The kinds of media vLLM receives from the built-in modalities.
ENGINE_KEYS = builtin_registry().engine_keys()

REGISTRY = builtin_registry()
NO_VLLM = VllmInfo(None, frozenset(), {})
# Every pinned version whose files are here, by version; the first pin is the base of the
# lists that do not depend on the version.
PINS = {pin.version: pin for pin in oracle.PINS if not oracle.missing(pin)}
BASE = oracle.PINS[0]


def examples(version: str) -> dict[str, Any]:
    pin = PINS[version]
    return {"image": pin.image_example, "audio": pin.audio_example}


def for_vllm(version: str) -> VllmInfo:
    """A dry run's view of that vLLM version (the row's version rule applies)."""
    return VllmInfo(version, frozenset(), {})


FIELDS = (
    "counts",
    "engine_args",
    "prompt",
    "media",
    "sampling",
    "stop_token_ids",
    "lora",
    "chat_template",
    "messages",
)


@dataclass(frozen=True)
class Deviation:
    """Fields of a key's request that differ from upstream on purpose (with these methods), and
    why."""

    fields: frozenset[str]
    reason: str
    methods: frozenset[str] = frozenset({"generate", "chat"})
    until: str | None = None  # the last pinned version it applies to; None: every one

    def applies(self, version: str) -> bool:
        return self.until is None or version_key(version) <= version_key(self.until)


def _deviation(
    reason: str, *fields: str, methods: tuple[str, ...] = (), until: str | None = None
) -> Deviation:
    return Deviation(frozenset(fields), reason, frozenset(methods or ("generate", "chat")), until)


DEVIATIONS: dict[tuple[str, str], Deviation] = {
    ("audio", "gemma3n"): _deviation(
        "upstream's prompt ends after the question (its last line is a stray expression, not "
        "part of the string) and carries one <audio_soft_token> whatever the clip count; "
        "mmrun writes one token per clip and the end of turn",
        "prompt",
    ),
    ("audio", "audioflamingo3"): _deviation(
        "mmrun takes one clip per prompt (vLLM 0.32's AudioFlamingo3 processor takes one); "
        "upstream lets the example ask for two",
        "counts",
    ),
    ("image", "deepseek_ocr"): _deviation(
        "DeepSeek-OCR's own sampling settings (the n-gram guard's arguments, max_tokens 8192, "
        "special tokens kept) apply to both methods; upstream's generate path ignores them "
        "(only its chat path reads ModelRequestData.sampling_params), which leaves the n-gram "
        "logits processor it loads switched off",
        "sampling",
        methods=("generate",),
        until="0.33.0",  # 0.34's generate path sends a row's own sampling
    ),
    ("audio", "granite_speech"): _deviation(
        "mmrun takes one clip per prompt: vLLM 0.32 reports {'audio': 1} as granite_speech's "
        "supported limit; upstream lets the example ask for two",
        "counts",
    ),
    ("audio", "kimi_audio"): _deviation(
        "mmrun takes one clip per prompt: vLLM 0.32 reports {'audio': 1} as kimi_audio's "
        "supported limit; upstream lets the example ask for two. mmrun runs one prompt at a "
        "time (max_num_seqs=1): vLLM 0.32's Kimi-Audio fails on a batch of clips of different "
        "lengths (tests/e2e/test_first_run_e2e.py runs such a batch)",
        "counts",
        "engine_args",
    ),
    ("audio", "glmasr"): _deviation(
        "mmrun takes one clip per prompt (GLM-ASR transcribes one recording); upstream lets "
        "the example ask for two",
        "counts",
    ),
}

# Keys whose upstream function cannot run offline, and why (the comparison happens elsewhere).
NOT_RUNNABLE: dict[tuple[str, str], str] = {
    ("audio", "voxtral"): "upstream tokenizes with MistralTokenizer.from_hf_hub (the Hub); "
    "mmrun tokenizes with the tokenizer of the model run (tests/golden/test_audio_deviations.py)",
}

# Keys mmrun keeps that upstream dropped: they run on the vLLM versions that still have them.
MMRUN_ONLY: dict[tuple[str, str], str] = {
    ("image", "aya_vision"): "dropped upstream with the AyaVision architecture (last: vLLM 0.24)",
    ("image", "hyperclovax_seed_vision"): "dropped upstream with HCXVision (last: vLLM 0.28)",
    ("image", "phi4_multimodal"): "dropped upstream with Phi4Multimodal (last: vLLM 0.12)",
    ("image", "qwen_vl_chat"): "dropped upstream with QwenVL (last: vLLM 0.23)",
    ("image", "tarsier"): "dropped upstream with Tarsier (last: vLLM 0.24)",
    ("image", "tarsier2"): "dropped upstream with Tarsier2 (last: vLLM 0.23)",
    ("audio", "musicflamingo"): "dropped upstream with MusicFlamingo (last: vLLM 0.24)",
}

# What mmrun does not yet do as upstream does: each is an expected failure, strictly (the
# test fails once the gap is closed, so the entry must then go).
GAPS: dict[tuple[str, str], frozenset[str]] = {}


def _upstream_keys(version: str) -> list[tuple[str, str]]:
    return [(m, k) for m, path in examples(version).items() for k in oracle.keys(path)]


KEYS_BY_VERSION = {version: _upstream_keys(version) for version in PINS}
# Every key of every pinned version's examples.
UPSTREAM_KEYS = list(dict.fromkeys(c for keys in KEYS_BY_VERSION.values() for c in keys))
SHARED = [
    (version, *c)
    for version, keys in KEYS_BY_VERSION.items()
    for c in keys
    if c not in NOT_RUNNABLE and c[1] in REGISTRY.loaders.get(c[0], {})
]


def _runs_on(version: str) -> set[tuple[str, str]]:
    """mmrun's multi-image and audio rows that this vLLM version has (as the rows declare)."""
    return {
        (s.modality, s.key)
        for m in ("image", "audio")
        for s in REGISTRY.specs(m)
        if s.runs_on(version)
    }


@pytest.mark.parametrize("pin", oracle.PINS, ids=[pin.version for pin in oracle.PINS])
def test_upstream_examples_are_fetched(pin: upstream.Pin) -> None:
    """The examples must be there (in CI too): a missing file fails, it never skips."""
    missing = oracle.missing(pin)
    assert not missing, (
        f"vLLM {pin.version}'s example files are missing ({', '.join(map(str, missing))}): "
        "run `make install` (it runs `python -m tools.upstream`, which fetches them from PyPI)"
    )
    assert upstream.present(pin), "the example files differ from their pinned sha256"


def test_each_pins_new_keys_are_those_its_examples_added() -> None:
    """tools/upstream.py names the keys each version added (the docs' "source" column)."""
    previous: set[str] = set()
    for version, pin in PINS.items():
        keys = {k for _, k in KEYS_BY_VERSION[version]} | {k for _, k in VISION_KEYS[version]}
        if previous:
            assert set(pin.new_keys) == keys - previous, version
        previous = keys


@pytest.mark.parametrize("version", list(PINS))
def test_every_upstream_key_is_registered(version: str) -> None:
    keys = set(KEYS_BY_VERSION[version])
    ours = _runs_on(version)
    assert keys - ours == set(), "upstream keys mmrun lacks (or declares absent there)"
    # Image keys that only the single-image example has, in any pinned version (compared
    # below; openvla's architecture is older than its key there); Kimi K2.5's images are its
    # "vision_chunk" items.
    single_image = {
        ("image", k)
        for keys in VISION_KEYS.values()
        for m, k in keys
        if m in ("image", "vision_chunk")
    }
    only_ours = ours - keys - single_image
    assert only_ours == set(MMRUN_ONLY), "mmrun-only keys must be listed"


@pytest.mark.parametrize("version", list(PINS))
def test_cli_defaults_match_upstream(version: str) -> None:
    """Default model, media count, engine seed and sampling of each command."""
    for modality, path in examples(version).items():
        args = oracle.defaults(path)
        mod = REGISTRY.modalities[modality]
        count = args.num_images if modality == "image" else args.num_audios
        assert (mod.default_model, mod.default_count) == (args.model_type, count)
        call = oracle.run(path, [])
        options = RunOptions(modality=modality, trust_remote_code=True, dry_run=True)
        ours = plan(options, REGISTRY, for_vllm(version))
        assert ours.engine_args.get("seed") == call.engine_args["seed"] == args.seed, modality
        expected = {k: v for k, v in call.sampling.items() if k != "stop_token_ids"}
        assert ours.sampling == expected, modality


@pytest.mark.parametrize("version", list(PINS))
def test_default_images_are_upstreams(version: str) -> None:
    from mmrun.modalities.image import IMAGE

    urls = oracle.load(PINS[version].image_example)["IMAGE_URLS"]
    assert [asset.url for asset in IMAGE.assets] == urls


def _counts(modality: str) -> list[int]:
    return [1, 2, 3] if modality == "image" else [0, 1, 2]


def _argv(modality: str, key: str, count: int, method: str) -> list[str]:
    if modality == "image":
        return ["-m", key, "-n", str(count), "--method", method]
    argv = ["-m", key, "--num-audios", str(count), "--num-prompts", "2"]
    if REGISTRY.get(modality, key).needs_model:
        argv += ["--model", key]
    return argv


def _limits(engine_args: dict[str, Any]) -> dict[str, Any]:
    limits = {m: 0 for m in ENGINE_KEYS} | dict(engine_args.get("limit_mm_per_prompt", {}))
    return {k: v for k, v in engine_args.items() if k != "seed"} | {"limit_mm_per_prompt": limits}


def _media_name(modality: str, item: Any) -> str:
    if modality == "image":
        return os.path.basename(item.url)
    return str(item).removeprefix("audio:")


def _parts(messages: Any) -> list[Any]:
    (turn,) = messages
    kinds = {"image_url": "image", "image_pil": "image", "image": "image"}
    return [
        turn["role"],
        *(p.get("text", kinds.get(p["type"], p["type"])) for p in turn["content"]),
    ]


def upstream_request(
    version: str, modality: str, key: str, count: int, method: str
) -> dict[str, Any]:
    call = oracle.run(examples(version)[modality], _argv(modality, key, count, method))
    sampling = oracle.plain(call.sampling)
    stop = sampling.pop("stop_token_ids", None) or []
    prompts = call.prompts
    return {
        "engine_args": oracle.plain(_limits(call.engine_args)),
        "prompt": [p.get("prompt", p.get("prompt_token_ids")) for p in prompts] or None,
        "media": [
            [_media_name(modality, i) for i in p.get("multi_modal_data", {}).get(modality, [])]
            for p in prompts
        ]
        or None,
        "sampling": sampling,
        "stop_token_ids": list(stop),
        # One adapter for every prompt (the audio example repeats it per prompt).
        "lora": [list(r) for r in dict.fromkeys(call.lora)] if call.lora else None,
        "chat_template": call.chat_template,
        "messages": _parts(call.messages) if call.messages is not None else None,
    }


@contextlib.contextmanager
def _beside(folder: str | None) -> Iterator[str]:
    """Upstream's placeholder model name of a row without a public checkpoint is a relative
    path: plan it where a folder of that name is there, as upstream's user would (mmrun makes
    it absolute; relative to what this yields, it reads as upstream's)."""
    if folder is None:
        yield os.getcwd()
        return
    here = os.getcwd()
    with tempfile.TemporaryDirectory() as tmp:
        os.mkdir(os.path.join(tmp, folder))
        os.chdir(tmp)
        try:
            yield os.path.realpath(tmp)
        finally:
            os.chdir(here)


def mmrun_request(version: str, modality: str, key: str, count: int, method: str) -> dict[str, Any]:
    spec = REGISTRY.get(modality, key).for_vllm(version)
    options = RunOptions(
        modality=modality,
        key=key,
        count=count,
        method=method,  # type: ignore[arg-type]
        num_prompts=1 if modality == "image" else 2,
        model=key if spec.needs_model else None,
        trust_remote_code=True,
        dry_run=True,
    )
    with _beside(key if spec.needs_model else None) as base:
        run = plan(options, REGISTRY, for_vllm(version))
    model = os.path.relpath(run.model, base) if spec.needs_model else run.model
    engine_args = {**run.engine_args, "model": model}
    mod = run.modality
    question = PromptSettings(run).question_for(next(iter(run.items)))
    ctx = LoaderContext(
        question=question,
        num_items=count,
        model=model,
        templates=original_examples.RecordingRenderer(),
    )
    prompt = spec(ctx)
    # Upstream names images by URL (compared by file name) and audio by asset name.
    names = {a.name: a.mirror_name if modality == "image" else a.name for a in mod.assets}
    media = [[names[source] for source in item.sources] for item in run.items]
    lora = None
    if spec.lora is not None:
        sub = spec.lora.subfolder
        path = os.path.join(model, sub) if sub else model
        lora = [[spec.lora.name, spec.lora.int_id, path]]
    text = prompt.text if prompt.text is not None else list(prompt.token_ids or [])
    chat = method == "chat"
    return {
        "engine_args": oracle.plain(_limits(engine_args)),
        "prompt": None if chat else [text] * len(media),
        "media": None if chat else media,
        "sampling": oracle.plain(run.sampling),
        "stop_token_ids": list(prompt.stop_token_ids),
        "lora": lora,
        "chat_template": spec.chat_template if chat else None,
        "messages": _parts(chat_input(question, [{"type": "image"}] * count)) if chat else None,
    }


def _runs(modality: str, key: str) -> Iterator[tuple[int, str]]:
    methods = ["generate"]
    if modality == "image" and "chat" in REGISTRY.get(modality, key).methods:
        methods.append("chat")
    for method in methods:
        for count in _counts(modality) if method == "generate" else [2]:
            yield count, method


def differences(version: str, modality: str, key: str) -> dict[tuple[str, str], list[str]]:
    """Each differing (field, method), with where it differs and both values."""
    found: dict[tuple[str, str], list[str]] = {}
    for count, method in _runs(modality, key):
        where = f"n={count} {method}"
        try:
            theirs = upstream_request(version, modality, key, count, method)
        except AssertionError:  # upstream asserts its own count rules (whisper: exactly 1)
            continue
        try:
            ours = mmrun_request(version, modality, key, count, method)
        except UsageError as exc:
            found.setdefault(("counts", method), []).append(f"{where}: mmrun refuses: {exc}")
            continue
        for name in FIELDS[1:]:
            if theirs[name] != ours[name]:
                found.setdefault((name, method), []).append(
                    f"{where}:\n  upstream {theirs[name]!r}\n  mmrun    {ours[name]!r}"
                )
    return found


@pytest.mark.parametrize(
    ("version", "modality", "key"), SHARED, ids=[f"{v}-{m}-{k}" for v, m, k in SHARED]
)
def test_request_matches_upstream(version: str, modality: str, key: str) -> None:
    differing = differences(version, modality, key)
    deviation = DEVIATIONS.get((modality, key), Deviation(frozenset(), ""))
    if not deviation.applies(version):
        deviation = Deviation(frozenset(), "")
    found = {field for field, _ in differing}
    unexpected = {
        field: lines
        for (field, method), lines in differing.items()
        if field not in deviation.fields or method not in deviation.methods
    }
    gap = GAPS.get((modality, key), frozenset())
    if gap:
        assert set(unexpected) == gap, unexpected
        pytest.xfail(f"known gap: {', '.join(sorted(gap))}")
    detail = "\n".join(f"{f}: {line}" for f, lines in unexpected.items() for line in lines)
    assert not unexpected, f"{modality}/{key} differs from upstream:\n{detail}"
    stale = deviation.fields - found
    assert not stale, f"listed deviation no longer differs: {sorted(stale)}; remove it"


def test_deviations_and_lists_name_real_keys() -> None:
    assert UPSTREAM_KEYS, "no upstream examples: see test_upstream_examples_are_fetched"
    for modality, key in [*DEVIATIONS, *NOT_RUNNABLE, *GAPS]:
        assert (modality, key) in UPSTREAM_KEYS
        REGISTRY.get(modality, key)
    for modality, key in MMRUN_ONLY:
        assert (modality, key) not in UPSTREAM_KEYS
        REGISTRY.get(modality, key)
    for deviation in DEVIATIONS.values():
        assert deviation.fields <= set(FIELDS) and deviation.reason


@pytest.mark.parametrize(("modality", "key"), list(NOT_RUNNABLE))
def test_not_runnable_keys_still_fail_offline(
    modality: str, key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """If one becomes runnable offline, it belongs in the comparison above.

    Offline as a user is with ``HF_HUB_OFFLINE=1``: the Hub client refuses at once instead of
    retrying an unreachable host (about 23 s). The real Hub client and mistral_common are
    imported first, so the example reaches them (not the stand-ins of the original examples'
    oracle), whatever ran before in this process."""
    import huggingface_hub.constants
    import huggingface_hub.hf_api
    import mistral_common.tokens.tokenizers.mistral  # noqa: F401

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)  # read at import
    with pytest.raises(Exception, match=r"(?i)hugging ?face"):  # needs the Hub
        upstream_request(BASE.version, modality, key, 1, "generate")


class _NoTemplates(original_examples.RecordingRenderer):
    def render(self, messages: Any, *, source: str, chat_template: str | None = None) -> str:
        raise AssertionError("this prompt must not go through the model's chat template")


@pytest.mark.parametrize("count", [1, 2, 3])
def test_ovis2_5_prompt_has_an_image_placeholder_per_image(count: int) -> None:
    """Ovis2.5's chat template drops "<image>" from plain-text content, so a prompt rendered
    through it reaches vLLM with no placeholder ("Expected there to be 2 prompt updates ...
    found 0"): the generate prompt is written by hand."""
    spec = REGISTRY.get("image", "ovis2_5")
    ctx = LoaderContext(
        question="Q?", num_items=count, model=spec.repo_id, templates=_NoTemplates()
    )
    text = spec(ctx).text
    assert text is not None
    assert text.count("<image>") == count
    assert text.startswith("<|im_start|>user\n") and text.endswith("<|im_start|>assistant\n")


def test_the_rows_sources_name_what_upstream_added_and_changed() -> None:
    """docs/models.md's "source" column (each LoaderSpec's ``source``) tells the truth."""
    assert UPSTREAM_KEYS, "no upstream examples: see test_upstream_examples_are_fetched"
    in_original = {
        (modality, key)
        for modality, path in (
            ("image", original_examples.IMAGE_EXAMPLE),
            ("audio", original_examples.AUDIO_EXAMPLE),
        )
        for key in original_examples.example_keys(path)
    }
    added = {row for row in UPSTREAM_KEYS if row not in in_original}
    sources = {(spec.modality, spec.key): spec.source for spec in REGISTRY.specs()}
    assert {row for row, source in sources.items() if source == UPSTREAM} == added
    changed = {row for row, source in sources.items() if source == CHANGED_UPSTREAM}
    assert changed == set(oracle.CHANGED_SINCE_ORIGINAL)


# vLLM's single-image and video example (vision_language_offline.py): one image, one video, or
# one of each per prompt, chosen with --modality. The oracle runs `-m KEY --modality M
# --num-prompts 1` and mmrun's row of the same key and modality builds one prompt with one item.
# Normalisations, besides those above (the same for every key):
# - sampling: the example's own default (temperature 0.2, so that a batch of identical prompts
#   differs; max_tokens 64) is a demo setting of its command line, like mmrun's per-command
#   defaults; only a model's own sampling_params are compared.
# - mm_processor_cache_gb: the example's --disable-mm-processor-cache switch (4 GiB otherwise);
#   mmrun leaves the cache to vLLM's default.
# - limit_mm_per_prompt: the example also zeroes "vision_chunk"; a zero there is dropped.
# - media: the example's own assets (one photo, one clip of 16 frames); compared by count.
VISION_SAMPLING_DEFAULT = {"temperature": 0.2, "max_tokens": 64}
VISION_MODALITIES = ("image", "video")

# The example's --modality vision_chunk (Kimi K2.5's images): mmrun's image row of the key,
# which sends its images as vision chunks (LoaderSpec.media_key).
VISION_CHUNK = "vision_chunk"
# --modality image+video (one image and one video in one prompt): mmrun's video row of the key
# with one companion image (``mmrun video --image``).
IMAGE_AND_VIDEO = "image+video"


def _vision(version: str) -> Any:
    return PINS[version].vision_example


def _vision_keys(version: str) -> list[tuple[str, str]]:
    """Every (modality, key) the single-image and video example runs."""
    vision = _vision(version)
    found = []
    for key in oracle.keys(vision):
        for modality in (*VISION_MODALITIES, IMAGE_AND_VIDEO, "vision_chunk"):
            try:
                oracle.run(vision, ["-m", key, "--modality", modality, "--num-prompts", "1"])
            except (AssertionError, NameError):  # the example's own modality checks
                continue
            found.append((modality, key))
    return found


VISION_KEYS = {version: _vision_keys(version) for version in PINS}
VISION_SHARED = [
    (version, m, k)
    for version, keys in VISION_KEYS.items()
    for m, k in keys
    if m in (*VISION_MODALITIES, VISION_CHUNK)
    and not (m == "image" and k in oracle.keys(PINS[version].image_example))
]


def vision_upstream(version: str, modality: str, key: str) -> dict[str, Any]:
    argv = ["-m", key, "--modality", modality, "--num-prompts", "1"]
    vision = _vision(version)
    call = oracle.run(vision, argv)
    args = oracle.run_args(vision, argv)
    engine = {
        k: v for k, v in call.engine_args.items() if k not in ("seed", "mm_processor_cache_gb")
    }
    limits = {k: v for k, v in engine["limit_mm_per_prompt"].items() if v or k in ENGINE_KEYS}
    engine["limit_mm_per_prompt"] = limits
    sampling = oracle.plain(call.sampling)
    stop = sampling.pop("stop_token_ids", None) or []
    if sampling == VISION_SAMPLING_DEFAULT:
        sampling = {}
    (prompt,) = call.prompts
    data = prompt.get("multi_modal_data", {})
    return {
        "question": oracle.load(vision)["get_multi_modal_input"](args)["questions"][0],
        "engine_args": oracle.plain(engine),
        "prompt": prompt.get("prompt"),
        "media": {m: 1 for m in data},
        "sampling": sampling,
        "stop_token_ids": list(stop),
        "lora": [list(r) for r in dict.fromkeys(call.lora)] if call.lora else None,
    }


def vision_mmrun(version: str, modality: str, key: str, question: str) -> dict[str, Any]:
    """mmrun's request for the example's ``--modality``: image+video is the video row with an
    image ahead of the clip."""
    companions = {"image": 1} if modality == IMAGE_AND_VIDEO else {}
    modality = {IMAGE_AND_VIDEO: "video", VISION_CHUNK: "image"}.get(modality, modality)
    spec = REGISTRY.get(modality, key).for_vllm(version)
    ctx = LoaderContext(
        question=question,
        num_items=1,
        model=spec.repo_id,
        templates=original_examples.RecordingRenderer(),
        companions=companions,
    )
    prompt = spec(ctx)
    lora = None
    if spec.lora is not None:
        sub = spec.lora.subfolder
        lora = [[spec.lora.name, spec.lora.int_id, os.path.join(spec.repo_id, sub or "")]]
    engine = compose_engine_args(
        spec,
        model=spec.repo_id,
        num_items=1,
        seed=None,
        engine_keys=ENGINE_KEYS,
        companions=companions,
    )
    return {
        "question": question,
        "engine_args": oracle.plain(engine),
        "prompt": prompt.text,
        "media": {**companions, spec.media_key or REGISTRY.modalities[modality].engine_key: 1},
        "sampling": oracle.plain(dict(spec.sampling)),
        "stop_token_ids": list(prompt.stop_token_ids),
        "lora": lora,
    }


def vision_differences(version: str, modality: str, key: str) -> dict[str, str]:
    theirs = vision_upstream(version, modality, key)
    ours = vision_mmrun(version, modality, key, theirs["question"])
    return {
        name: f"upstream {theirs[name]!r}\n  mmrun    {ours[name]!r}"
        for name in theirs
        if theirs[name] != ours[name]
    }


@pytest.mark.parametrize("version", list(PINS))
def test_every_single_image_and_video_key_is_registered(version: str) -> None:
    keys = VISION_KEYS[version]
    wanted = {(m, k) for m, k in keys if m in VISION_MODALITIES}
    ours = {
        (s.modality, s.key)
        for m in VISION_MODALITIES
        for s in REGISTRY.specs(m)
        if s.runs_on(version)
    }
    assert wanted - ours == set(), "upstream keys mmrun lacks"
    assert {(m, k) for m, k in ours if m == "video"} <= wanted, (
        "every video row comes from the single-image and video example"
    )
    chunks = {k for m, k in keys if m == VISION_CHUNK}
    assert chunks == {s.key for s in REGISTRY.specs("image") if s.media_key == VISION_CHUNK}


# Fields of a single-image request that differ from the example on purpose, and why; each is
# checked another way (named in its reason).
VISION_DEVIATIONS: dict[tuple[str, str], tuple[frozenset[str], str]] = {
    ("image", "openvla"): (
        frozenset({"prompt"}),
        "the example renders its fixed instruction through vLLM's own chat template for "
        "OpenVLA (inside vLLM, which mmrun's loaders do not import); mmrun writes the "
        "rendered text, which test_openvla_prompt_is_vllms_template_rendered checks",
    ),
}


@pytest.mark.parametrize(
    ("version", "modality", "key"),
    VISION_SHARED,
    ids=[f"{v}-{m}-{k}" for v, m, k in VISION_SHARED],
)
def test_single_image_and_video_request_matches_upstream(
    version: str, modality: str, key: str
) -> None:
    differing = vision_differences(version, modality, key)
    expected, _ = VISION_DEVIATIONS.get((modality, key), (frozenset(), ""))
    detail = "\n".join(
        f"{name}: {line}" for name, line in differing.items() if name not in expected
    )
    assert set(differing) == expected, f"{modality}/{key} differs from upstream:\n{detail}"


def test_openvla_prompt_is_vllms_template_rendered() -> None:
    """vLLM 0.34's template for OpenVLA, rendered as the example does (transformers' sandboxed
    Jinja environment, the BOS token taken off), gives mmrun's prompt."""
    import jinja2.sandbox

    from mmrun.modalities.image.openvla import OPENVLA_PROMPT

    pin = PINS["0.34.0"]
    template = (pin.dest / upstream.OPENVLA_TEMPLATE).read_text()
    env = jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    messages = [{"role": "user", "content": "pick up the red block"}]
    rendered = env.from_string(template).render(messages=messages, bos_token="<s>")
    assert rendered.removeprefix("<s>") == OPENVLA_PROMPT
    spec = REGISTRY.get("image", "openvla")
    ctx = LoaderContext(
        question="What is in the image?",
        num_items=1,
        model=spec.repo_id,
        templates=original_examples.RecordingRenderer(),
    )
    assert spec(ctx).text == OPENVLA_PROMPT


IMAGE_AND_VIDEO_KEYS = [
    (version, k) for version, keys in VISION_KEYS.items() for m, k in keys if m == IMAGE_AND_VIDEO
]


@pytest.mark.parametrize("version", list(PINS))
def test_the_video_rows_that_take_an_image_are_upstreams(version: str) -> None:
    """A video row takes a companion image exactly where the example runs the key on an image
    and a video in one prompt."""
    wanted = sorted(k for v, k in IMAGE_AND_VIDEO_KEYS if v == version)
    assert wanted, "no upstream examples: see test_upstream_examples_are_fetched"
    ours = sorted(
        s.key for s in REGISTRY.specs("video") if "image" in s.companions and s.runs_on(version)
    )
    assert ours == wanted


@pytest.mark.parametrize(
    ("version", "key"), IMAGE_AND_VIDEO_KEYS, ids=[f"{v}-{k}" for v, k in IMAGE_AND_VIDEO_KEYS]
)
def test_image_and_video_request_matches_upstream(version: str, key: str) -> None:
    differing = vision_differences(version, IMAGE_AND_VIDEO, key)
    detail = "\n".join(f"{name}: {line}" for name, line in differing.items())
    assert not differing, f"image+video/{key} differs from upstream:\n{detail}"


# The single-image example's image requests for keys the multi-image example also has: mmrun's
# one image row per key follows the multi-image example (an engine sized for several images,
# numbered placeholders, that example's checkpoint), so these fields differ from the
# single-image example's one-image request, on purpose. Pinned, so that a change shows.
SINGLE_IMAGE_FOLLOWS_MULTI_IMAGE: dict[str, frozenset[str]] = {
    "aria": frozenset({"engine_args", "prompt"}),
    "bee": frozenset({"engine_args", "prompt"}),
    "command_a_vision": frozenset({"prompt"}),
    "deepseek_vl_v2": frozenset({"prompt"}),
    "deepseek_ocr": frozenset({"engine_args"}),
    "exaone4_5": frozenset({"engine_args", "prompt"}),
    "gemma3": frozenset({"engine_args", "prompt"}),
    "glm4_1v": frozenset({"engine_args", "prompt"}),
    "glm4_5v": frozenset({"engine_args", "prompt"}),
    "glm4_5v_fp8": frozenset({"engine_args", "prompt"}),
    "h2ovl_chat": frozenset({"engine_args", "prompt"}),
    "idefics3": frozenset({"engine_args", "prompt"}),
    "interns1": frozenset({"engine_args", "prompt"}),
    "internvl_chat": frozenset({"engine_args", "prompt"}),
    "keye_vl": frozenset({"engine_args", "prompt"}),
    "keye_vl1_5": frozenset({"engine_args", "prompt"}),
    "kimi_vl": frozenset({"engine_args", "prompt"}),
    "llama4": frozenset({"engine_args", "prompt"}),
    "llava": frozenset({"engine_args", "prompt"}),
    "llava-next": frozenset({"engine_args", "prompt"}),
    "llava-onevision": frozenset({"engine_args", "prompt"}),
    "molmo2": frozenset({"prompt"}),
    "NVLM_D": frozenset({"engine_args", "prompt"}),
    "openpangu_vl": frozenset({"engine_args", "prompt"}),
    "ovis": frozenset({"engine_args", "prompt"}),
    "ovis2_5": frozenset({"engine_args", "prompt"}),
    "paddleocr_vl": frozenset({"engine_args"}),
    "phi3_v": frozenset({"engine_args"}),
    "phi4_mm": frozenset({"engine_args"}),
    "pixtral_hf": frozenset({"engine_args"}),
    "qwen2_vl": frozenset({"engine_args", "prompt"}),
    "qwen2_5_vl": frozenset({"engine_args", "prompt"}),
    "rvl": frozenset({"engine_args", "prompt"}),
    "smolvlm": frozenset({"engine_args", "prompt"}),
    "stepvl": frozenset({"engine_args", "prompt"}),
}


@pytest.mark.parametrize("version", list(PINS))
def test_single_image_requests_of_multi_image_keys_differ_only_as_listed(version: str) -> None:
    multi_image = set(oracle.keys(PINS[version].image_example))
    found = {}
    for modality, key in VISION_KEYS[version]:
        if modality == "image" and key in multi_image:
            differing = frozenset(vision_differences(version, modality, key))
            if differing:
                found[key] = differing
    expected = {k: v for k, v in SINGLE_IMAGE_FOLLOWS_MULTI_IMAGE.items() if k in multi_image}
    assert found == expected
