"""Run vLLM's current multimodal examples (tools/upstream.py fetches them) as an oracle.

Unlike the oracle of vLLM's original examples, which calls each model's function, this one runs
the examples' own entry points, as a user would: ``parse_args()`` with a command line, then
``main(args)``. The stand-ins are that oracle's (tests/helpers/original_examples.py: templates
rendered as a deterministic string of their messages, tokens mapped to deterministic ids), plus
those the newer files import (``vllm.platforms``, the DeepSeek-OCR logits processor), and a
recording ``vllm.LLM``: every engine argument, prompt, media item, sampling parameter, chat
template and LoRA request that the example hands to vLLM is recorded as plain data, with nothing
heavy behind it.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any, ClassVar

from tests.helpers import original_examples
from tools import upstream

# The pinned vLLM versions whose example files are here (tests/golden/test_upstream_parity.py
# runs against each; a missing one fails there, it never skips).
PINS: tuple[upstream.Pin, ...] = upstream.PINS

# Rows of vLLM's original examples that its examples changed since, and that mmrun follows: they
# differ from the original example on purpose, and tests/golden/test_upstream_parity.py compares
# them instead.
CHANGED_SINCE_ORIGINAL: dict[tuple[str, str], str] = {
    ("image", "interns1"): "runs internlm/Intern-S1-mini (Intern-S1 has ~241B parameters)",
    ("image", "keye_vl1_5"): "max_model_len 32768 (was 8192) for multi-image prompts",
    ("image", "ovis2_5"): "a hand-written prompt (the chat template drops <image> from text)",
}


@dataclass
class Call:
    """What one run of an example handed to vLLM."""

    engine_args: dict[str, Any] = field(default_factory=dict)
    method: str = ""
    prompts: list[dict[str, Any]] = field(default_factory=list)  # generate inputs
    messages: list[Any] | None = None  # chat conversation
    sampling: dict[str, Any] = field(default_factory=dict)
    chat_template: str | None = None
    lora: list[tuple[str, int, str]] | None = None


class _SamplingParams:
    def __init__(self, **kwargs: Any) -> None:
        self.kwargs = kwargs


class _RecordingLLM:
    calls: ClassVar[list[Call]] = []

    def __init__(self, **engine_args: Any) -> None:
        self.call = Call(engine_args=dict(engine_args))
        _RecordingLLM.calls.append(self.call)

    @classmethod
    def from_engine_args(cls, engine_args: Any) -> _RecordingLLM:
        return cls(**vars(engine_args))

    def generate(
        self, inputs: Any, sampling_params: Any = None, lora_request: Any = None
    ) -> list[Any]:
        self.call.method = "generate"
        self.call.prompts = [dict(i) for i in (inputs if isinstance(inputs, list) else [inputs])]
        self._common(sampling_params, lora_request)
        return []

    def chat(
        self,
        messages: Any,
        sampling_params: Any = None,
        chat_template: str | None = None,
        lora_request: Any = None,
    ) -> list[Any]:
        self.call.method = "chat"
        self.call.messages = messages
        self.call.chat_template = chat_template
        self._common(sampling_params, lora_request)
        return []

    def _common(self, sampling_params: Any, lora_request: Any) -> None:
        if isinstance(sampling_params, list):  # one per prompt, all alike in the examples
            sampling_params = sampling_params[0]
        self.call.sampling = dict(sampling_params.kwargs) if sampling_params else {}
        if lora_request:
            self.call.lora = [tuple(r) for r in lora_request]


class NGramPerReqLogitsProcessor:
    """Stand-in for DeepSeek-OCR's logits processor; compared by its qualified name."""


NGramPerReqLogitsProcessor.__module__ = "vllm.model_executor.models.deepseek_ocr"


# vLLM 0.34's Ming3-ASR instruction (vllm/model_executor/models/ming_v3_asr.py), which its audio
# example imports.
ASR_INSTRUCTION = (
    "Please recognize the language of this speech and transcribe it, "
    "placing a `\t` between the identified language and the transcribe."
)


class _FallbackTemplate:
    """vLLM's own chat template for a model type (``get_chat_template_fallback_path``): read
    as its name, which the seed oracle's renderer records."""

    def __init__(self, model_type: str, model: str) -> None:
        self.name = f"template_{model_type}.jinja"

    def read_text(self) -> str:
        return self.name


class _Platform:
    @staticmethod
    def is_rocm() -> bool:
        return False


class _Image:
    """A fetched image: remembers its URL (the stand-in for PIL's)."""

    size = (640, 480)

    def __init__(self, url: str) -> None:
        self.url = url

    def resize(self, size: tuple[int, int]) -> _Image:
        return self


class _ImageAsset:
    """The single-image example's image: remembers its name."""

    def __init__(self, name: str) -> None:
        self.pil_image = f"image:{name}"


class _VideoAsset:
    """The single-image example's video: its name and frame count, and its metadata."""

    def __init__(self, name: str, num_frames: int = -1) -> None:
        self.np_ndarrays = f"video:{name}:{num_frames}"
        self.metadata = {"video": name, "num_frames": num_frames}


class _AudioAsset:
    def __init__(self, name: str) -> None:
        self.name = name
        self.audio_and_sample_rate = f"audio:{name}"

    def get_local_path(self) -> str:
        return self.name


@contextmanager
def _stand_ins() -> Iterator[None]:
    module = original_examples._module
    extra = {
        "vllm.platforms": module("vllm.platforms", current_platform=_Platform()),
        "vllm.model_executor": module("vllm.model_executor"),
        "vllm.model_executor.models": module("vllm.model_executor.models"),
        "vllm.model_executor.models.deepseek_ocr": module(
            "vllm.model_executor.models.deepseek_ocr",
            NGramPerReqLogitsProcessor=NGramPerReqLogitsProcessor,
        ),
        "vllm.model_executor.models.ming_v3_asr": module(
            "vllm.model_executor.models.ming_v3_asr", ASR_INSTRUCTION=ASR_INSTRUCTION
        ),
        "vllm.transformers_utils": module("vllm.transformers_utils"),
        "vllm.transformers_utils.chat_templates": module(
            "vllm.transformers_utils.chat_templates",
            get_chat_template_fallback_path=_FallbackTemplate,
        ),
        "vllm.assets.image": module("vllm.assets.image", ImageAsset=_ImageAsset),
        "vllm.assets.video": module("vllm.assets.video", VideoAsset=_VideoAsset),
        "vllm.multimodal.image": module(
            "vllm.multimodal.image", convert_image_mode=lambda image, mode: image
        ),
    }
    with original_examples._stand_ins():
        vllm = sys.modules["vllm"]
        vllm.LLM = _RecordingLLM  # type: ignore[attr-defined]
        vllm.SamplingParams = _SamplingParams  # type: ignore[attr-defined]
        sys.modules["vllm.multimodal.utils"].fetch_image = _Image  # type: ignore[attr-defined]
        sys.modules["vllm.assets.audio"].AudioAsset = _AudioAsset  # type: ignore[attr-defined]
        for name in ("vllm.utils", "vllm.utils.argparse_utils"):
            sys.modules[name].FlexibleArgumentParser = argparse.ArgumentParser  # type: ignore[attr-defined]
        saved = {name: sys.modules.get(name) for name in extra}
        sys.modules.update(extra)
        try:
            yield
        finally:
            for name, old in saved.items():
                if old is None:
                    sys.modules.pop(name, None)
                else:
                    sys.modules[name] = old


def missing(pin: upstream.Pin) -> list[Path]:
    paths = (pin.image_example, pin.audio_example, pin.vision_example)
    return [path for path in paths if not path.is_file()]


@cache
def load(path: Path) -> dict[str, Any]:
    """Execute an example file (its ``__main__`` block does not run); return its globals."""
    namespace: dict[str, Any] = {"__name__": "upstream_example"}
    with _stand_ins():
        exec(compile(path.read_text(), str(path), "exec"), namespace)
    return namespace


def keys(path: Path) -> list[str]:
    return list(load(path)["model_example_map"])


def defaults(path: Path) -> argparse.Namespace:
    """The example's command-line defaults."""
    return run_args(path, [])


def run_args(path: Path, argv: Sequence[str]) -> argparse.Namespace:
    namespace = load(path)
    saved = sys.argv
    sys.argv = ["example", *argv]
    try:
        with _stand_ins():
            return namespace["parse_args"]()  # type: ignore[no-any-return]
    finally:
        sys.argv = saved


def run(path: Path, argv: Sequence[str]) -> Call:
    """Run the example's ``main`` with this command line; return what it handed to vLLM."""
    namespace = load(path)
    args = run_args(path, argv)
    _RecordingLLM.calls = []
    with _stand_ins(), contextlib.redirect_stdout(io.StringIO()):  # its "-----" lines
        namespace["main"](args)
    (call,) = _RecordingLLM.calls
    return call


def plain(value: Any) -> Any:
    """Recorded values as comparable data: sets as sorted lists, classes as ``module:name``."""
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if isinstance(value, set | frozenset):
        return sorted(plain(v) for v in value)
    if isinstance(value, type):
        return f"{value.__module__}:{value.__qualname__}"
    return value
