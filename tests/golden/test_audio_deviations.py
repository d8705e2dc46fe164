"""The audio rows of vLLM's original examples that mmrun builds differently on purpose
(DEVIATIONS in test_original_examples_parity.py).

gemma3n: the example's prompt loses its closing ``<end_of_turn>\\n<start_of_turn>model\\n`` (a
stray string statement) and holds one ``<audio_soft_token>`` whatever the count; mmrun
emits one per clip and closes the turn. Engine arguments stay the example's.

voxtral: the example tokenizes with mistral_common's tokenizer fetched from the Hub and the
vLLM asset files; mmrun tokenizes the prompt's decoded clips with the tokenizer of the model
it runs. Tested offline with a small tekken tokenizer written here: the token ids follow
the example's order, and the example's function itself, pointed at the same tokenizer and
clips, gives the same token ids, audio and engine arguments.
"""

from __future__ import annotations

import base64
import json
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from mmrun.errors import MediaError
from mmrun.modalities.audio.voxtral import _mistral_tokenizer
from mmrun.planning import compose_engine_args
from mmrun.plugins import builtin_registry
from mmrun.request import LoaderContext, Prompt
from tests.helpers import original_examples as oracle

# The kinds of media vLLM receives from the built-in modalities.
ENGINE_KEYS = builtin_registry().engine_keys()

REGISTRY = builtin_registry()
AUDIO = REGISTRY.modalities["audio"]


def _expected_engine_args(example: oracle.ExampleRequest) -> dict[str, Any]:
    expected = dict(example.engine_args)
    expected["limit_mm_per_prompt"] = {m: 0 for m in ENGINE_KEYS} | expected.get(
        "limit_mm_per_prompt", {}
    )
    return expected


def _engine_args(key: str, model: str, count: int) -> dict[str, Any]:
    spec = REGISTRY.get("audio", key)
    return compose_engine_args(
        spec, model=model, num_items=count, seed=None, engine_keys=ENGINE_KEYS
    )


# --- gemma3n -----------------------------------------------------------------------------

GEMMA3N_PROMPTS = {
    0: "<start_of_turn>user\nWhat is 1+1?<end_of_turn>\n<start_of_turn>model\n",
    1: (
        "<start_of_turn>user\n<audio_soft_token>What is recited in the audio?"
        "<end_of_turn>\n<start_of_turn>model\n"
    ),
    2: (
        "<start_of_turn>user\n<audio_soft_token><audio_soft_token>"
        "What sport and what nursery rhyme are referenced?"
        "<end_of_turn>\n<start_of_turn>model\n"
    ),
}


@pytest.mark.parametrize("count", [0, 1, 2])
def test_gemma3n_prompt_has_one_audio_token_per_clip_and_closes_the_turn(count: int) -> None:
    question = AUDIO.question(count)
    spec = REGISTRY.get("audio", "gemma3n")
    ctx = LoaderContext(
        question=question, num_items=count, model=spec.repo_id, templates=oracle.RecordingRenderer()
    )
    prompt = spec(ctx)
    assert prompt.text == GEMMA3N_PROMPTS[count]
    assert prompt.stop_token_ids == ()
    assert spec.lora is None and spec.chat_template is None


@pytest.mark.parametrize("count", [0, 1, 2])
def test_gemma3n_engine_args_are_the_examples(count: int) -> None:
    question = AUDIO.question(count)
    example = oracle.audio_request("gemma3n", question, count)
    model = example.engine_args["model"]
    assert _engine_args("gemma3n", model, count) == _expected_engine_args(example)
    # The example's bug this deviation fixes, pinned so a corrected example shows up here.
    assert example.prompt == f"<start_of_turn>user\n<audio_soft_token>{question}"


# --- voxtral -----------------------------------------------------------------------------

VOXTRAL_REPO = "mistralai/Voxtral-Mini-3B-2507"
NUM_SPECIAL = 64
SAMPLE_RATE = 16_000
# 30 s chunks at 12.5 frames per second, as Voxtral's tokenizer has.
AUDIO_TOKENS_PER_CLIP = 375


@pytest.fixture
def mistral() -> Iterator[Any]:
    module = pytest.importorskip("mistral_common")
    # The loader keeps one tokenizer per model id; each test brings its own tokenizer.
    _mistral_tokenizer.cache_clear()
    yield module
    _mistral_tokenizer.cache_clear()


def _special_tokens() -> list[str]:
    from mistral_common.tokens.tokenizers.base import SpecialTokens

    return [token.value for token in SpecialTokens]


def _special_id(token: str) -> int:
    return _special_tokens().index(token)


def _text_ids(text: str) -> list[int]:
    # The test vocabulary has the 256 single bytes and no merges, ranked after the specials.
    return [NUM_SPECIAL + byte for byte in text.encode()]


def _write_tekken(folder: Path) -> Path:
    """A byte-level tekken tokenizer with Voxtral's audio settings."""
    specials = _special_tokens()
    assert len(specials) <= NUM_SPECIAL
    data = {
        "config": {
            "pattern": r"[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s+",
            "num_vocab_tokens": 256,
            "default_vocab_size": 256 + NUM_SPECIAL,
            "default_num_special_tokens": NUM_SPECIAL,
            "version": "v7",
        },
        "vocab": [
            {"rank": i, "token_bytes": base64.b64encode(bytes([i])).decode(), "token_str": None}
            for i in range(256)
        ],
        "special_tokens": [
            {"rank": i, "token_str": token, "is_control": True} for i, token in enumerate(specials)
        ],
        "audio": {
            "sampling_rate": SAMPLE_RATE,
            "frame_rate": 12.5,
            "chunk_length_s": 30.0,
            "audio_encoding_config": {"num_mel_bins": 128, "hop_length": 160, "window_size": 400},
        },
    }
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "tekken.json"
    path.write_text(json.dumps(data))
    return path


def _clip_files(folder: Path, count: int) -> list[Path]:
    """Short tones written as WAV, decoded the way mmrun and mistral_common both read them."""
    import numpy as np
    import soundfile as sf

    paths = []
    for i in range(count):
        t = np.arange(int(SAMPLE_RATE * (0.5 + i / 2))) / SAMPLE_RATE
        path = folder / f"clip{i}.wav"
        sf.write(path, 0.3 * np.sin(2 * np.pi * 440 * (i + 1) * t), SAMPLE_RATE)
        paths.append(path)
    return paths


def _decoded(paths: list[Path]) -> list[tuple[Any, int]]:
    import soundfile as sf

    clips = []
    for path in paths:
        waveform, rate = sf.read(path, dtype="float32")
        clips.append((waveform, rate))
    return clips


def _patch_hub(monkeypatch: pytest.MonkeyPatch, tekken: Path) -> list[str]:
    """Answer MistralTokenizer.from_hf_hub with the local tokenizer; record the repo ids."""
    from mistral_common.tokens.tokenizers.mistral import MistralTokenizer

    asked: list[str] = []

    def from_hf_hub(cls: Any, /, repo_id: str, **kwargs: Any) -> Any:
        asked.append(repo_id)
        return MistralTokenizer.from_file(tekken)

    monkeypatch.setattr(MistralTokenizer, "from_hf_hub", classmethod(from_hf_hub))
    return asked


def _voxtral(model: str, count: int, clips: list[tuple[Any, int]]) -> Prompt:
    ctx = LoaderContext(
        question=AUDIO.question(count),
        num_items=count,
        model=model,
        templates=oracle.RecordingRenderer(),
        media=clips,
    )
    return REGISTRY.get("audio", "voxtral")(ctx)


class _Asset:
    def __init__(self, path: Path) -> None:
        self.path = path

    def get_local_path(self) -> Path:
        return self.path


def _example_voxtral(count: int, clip_paths: list[Path]) -> Any:
    """Run the example's own run_voxtral, its audio assets pointed at local clips."""
    namespace = oracle.load_example(oracle.AUDIO_EXAMPLE)
    namespace["audio_assets"] = [_Asset(path) for path in clip_paths]
    run: Callable[[str, int], Any] = namespace["model_example_map"]["voxtral"]
    with oracle._stand_ins(), warnings.catch_warnings():
        # The example imports Audio and RawAudio through paths mistral_common deprecates.
        warnings.simplefilter("ignore", DeprecationWarning)
        return run(AUDIO.question(count), count)


@pytest.mark.parametrize("count", [0, 1, 2])
def test_voxtral_tokens_follow_the_examples_order(
    mistral: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, count: int
) -> None:
    tekken = _write_tekken(tmp_path / "tokenizer")
    asked = _patch_hub(monkeypatch, tekken)
    clips = _decoded(_clip_files(tmp_path, count))

    prompt = _voxtral(VOXTRAL_REPO, count, clips)

    audio = [_special_id("[BEGIN_AUDIO]"), *[_special_id("[AUDIO]")] * AUDIO_TOKENS_PER_CLIP]
    expected = [
        _special_id("<s>"),
        _special_id("[INST]"),
        *audio * count,
        *_text_ids(AUDIO.question(count)),
        _special_id("[/INST]"),
    ]
    assert prompt.text is None
    assert list(prompt.token_ids or ()) == expected
    assert asked == [VOXTRAL_REPO]
    assert prompt.multi_modal_data is not None
    assert len(prompt.multi_modal_data) == count
    for array, rate in prompt.multi_modal_data:
        assert rate == SAMPLE_RATE
        assert array.shape == (30 * SAMPLE_RATE,)  # padded to whole 30 s chunks


@pytest.mark.parametrize("count", [0, 1, 2])
def test_voxtral_matches_the_examples_function_on_the_same_tokenizer_and_clips(
    mistral: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, count: int
) -> None:
    import numpy as np

    tekken = _write_tekken(tmp_path / "tokenizer")
    _patch_hub(monkeypatch, tekken)
    paths = _clip_files(tmp_path, count)

    example = _example_voxtral(count, paths)
    prompt = _voxtral(VOXTRAL_REPO, count, _decoded(paths))

    assert list(prompt.token_ids or ()) == list(example.prompt_token_ids)
    example_audio = example.multi_modal_data["audio"]
    assert prompt.multi_modal_data is not None
    assert len(prompt.multi_modal_data) == len(example_audio) == count
    for (array, rate), (example_array, example_rate) in zip(
        prompt.multi_modal_data, example_audio, strict=True
    ):
        assert rate == example_rate
        np.testing.assert_array_equal(array, example_array)
    expected = oracle.ExampleRequest(
        engine_args=dict(vars(example.engine_args)),
        prompt=None,
        prompt_token_ids=None,
        stop_token_ids=None,
        chat_template=None,
        lora=None,
    )
    assert _engine_args("voxtral", VOXTRAL_REPO, count) == _expected_engine_args(expected)
    assert prompt.stop_token_ids == () and REGISTRY.get("audio", "voxtral").lora is None


def test_voxtral_loads_the_tokenizer_of_a_local_model_folder(
    mistral: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model_dir = tmp_path / "voxtral-local"
    _write_tekken(model_dir)
    asked = _patch_hub(monkeypatch, tmp_path / "unused.json")

    prompt = _voxtral(str(model_dir), 1, _decoded(_clip_files(tmp_path, 1)))

    assert asked == []
    assert prompt.token_ids is not None
    assert prompt.token_ids.count(_special_id("[AUDIO]")) == AUDIO_TOKENS_PER_CLIP


def test_voxtral_loads_the_tokenizer_once_per_model(
    mistral: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked = _patch_hub(monkeypatch, _write_tekken(tmp_path / "tokenizer"))
    clips = _decoded(_clip_files(tmp_path, 2))

    one = _voxtral(VOXTRAL_REPO, 1, clips[:1])
    two = _voxtral(VOXTRAL_REPO, 2, clips)
    other = _voxtral("someone/voxtral-finetune", 1, clips[:1])

    assert asked == [VOXTRAL_REPO, "someone/voxtral-finetune"]
    assert one.token_ids is not None and two.token_ids is not None
    assert len(two.token_ids) > len(one.token_ids)
    assert other.token_ids == one.token_ids


def test_voxtral_downmixes_multichannel_clips(
    mistral: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import numpy as np

    _patch_hub(monkeypatch, _write_tekken(tmp_path / "tokenizer"))
    mono = np.linspace(-0.5, 0.5, SAMPLE_RATE, dtype=np.float32)
    stereo = np.stack([mono, mono], axis=1)  # (frames, channels)

    from_mono = _voxtral(VOXTRAL_REPO, 1, [(mono, SAMPLE_RATE)])
    from_stereo = _voxtral(VOXTRAL_REPO, 1, [(stereo, SAMPLE_RATE)])

    assert from_stereo.token_ids == from_mono.token_ids
    assert from_stereo.multi_modal_data is not None and from_mono.multi_modal_data is not None
    np.testing.assert_array_equal(
        from_stereo.multi_modal_data[0][0], from_mono.multi_modal_data[0][0]
    )


def test_voxtral_refuses_a_prompt_without_its_decoded_clips(mistral: Any) -> None:
    with pytest.raises(MediaError):
        _voxtral(VOXTRAL_REPO, 2, [])
