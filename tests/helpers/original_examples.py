"""Run vLLM's original examples' own loader functions as an oracle, with nothing heavy behind
them.

vLLM's original examples (its multi-image and audio examples as mmrun first took them, copied
verbatim into tests/golden/original_examples/) define one function per model that returns the
engine arguments, prompt, stop tokens, chat template and LoRA request. This module executes
those files with stand-ins for vllm, transformers, huggingface_hub and PIL, so each example's
function runs offline and returns plain data that the tests compare with what mmrun's loaders
build. (tests/helpers/upstream_oracle.py runs vLLM's current examples.)

The stand-ins render a chat template as a deterministic string of the messages it was given
and map a token to a deterministic id, exactly as the fake renderer used for mmrun does, so
equal inputs give equal prompts and stop ids.
"""

from __future__ import annotations

import json
import sys
import types
import zlib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

EXAMPLES = Path(__file__).parent.parent / "golden" / "original_examples"
IMAGE_EXAMPLE = EXAMPLES / "vision_language_multi_image.txt"
AUDIO_EXAMPLE = EXAMPLES / "audio_language.txt"
EOS_TOKEN_ID = 2


def fake_token_id(token: str) -> int:
    return zlib.crc32(token.encode()) % 1_000_000


def render(source: str, messages: Sequence[Any], chat_template: str | None) -> str:
    """The stand-in for apply_chat_template: the messages, with media URLs dropped."""
    cleaned = []
    for message in messages:
        content = message["content"]
        if isinstance(content, list):
            content = [
                {k: v for k, v in part.items() if k != part["type"] or k == "text"}
                for part in content
            ]
        cleaned.append({"role": message["role"], "content": content})
    template = "own" if chat_template is None else f"override:{zlib.crc32(chat_template.encode())}"
    return f"[{source} template={template}]" + json.dumps(cleaned, sort_keys=True)


class RecordingRenderer:
    """mmrun's TemplateRenderer protocol, answered with the same stand-in rendering."""

    def __init__(self) -> None:
        self.lookups: list[str] = []

    def render(
        self, messages: Sequence[Any], *, source: str, chat_template: str | None = None
    ) -> str:
        return render(source, messages, chat_template)

    def token_id(self, token: str) -> int:
        self.lookups.append(token)
        return fake_token_id(token)

    def eos_token_id(self) -> int:
        return EOS_TOKEN_ID


@dataclass
class ExampleRequest:
    engine_args: dict[str, Any]
    prompt: str | None
    prompt_token_ids: list[int] | None
    stop_token_ids: list[int] | None
    chat_template: str | None
    lora: tuple[str, int, str] | None


class _FakeEngineArgs:
    def __init__(self, **kwargs: Any) -> None:
        self.__dict__.update(kwargs)


class _FakeTemplates:
    def __init__(self, source: str) -> None:
        self.source = source
        self.eos_token_id = EOS_TOKEN_ID
        self.bos_token = "<s>"

    def apply_chat_template(
        self,
        messages: Any,
        tokenize: bool = False,
        add_generation_prompt: bool = True,
        chat_template: str | None = None,
    ) -> str:
        assert tokenize is False and add_generation_prompt is True
        if messages and isinstance(messages[0], list):  # a batch of conversations
            return [render(self.source, m, chat_template) for m in messages]  # type: ignore[return-value]
        return render(self.source, messages, chat_template)

    def convert_tokens_to_ids(self, token: str) -> int:
        return fake_token_id(token)


def _fake_auto(source: str) -> type:
    class Auto:
        @staticmethod
        def from_pretrained(name: str, **kwargs: Any) -> _FakeTemplates:
            return _FakeTemplates(source)

    return Auto


def _module(name: str, **attrs: Any) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__dict__.update(attrs)
    return module


class _LoRARequest(tuple):  # type: ignore[type-arg]
    def __new__(cls, name: str, int_id: int, path: str) -> _LoRARequest:
        return super().__new__(cls, (name, int_id, path))


class _FakeImage:
    size = (640, 480)

    def resize(self, size: tuple[int, int]) -> _FakeImage:
        return self


def _smart_resize(height: int, width: int, max_pixels: int) -> tuple[int, int]:
    return height, width


@contextmanager
def _stand_ins() -> Iterator[None]:
    fakes = {
        "vllm": _module("vllm", LLM=object, EngineArgs=_FakeEngineArgs, SamplingParams=object),
        "vllm.lora": _module("vllm.lora"),
        "vllm.lora.request": _module("vllm.lora.request", LoRARequest=_LoRARequest),
        "vllm.multimodal": _module("vllm.multimodal"),
        "vllm.multimodal.utils": _module(
            "vllm.multimodal.utils", fetch_image=lambda url: _FakeImage()
        ),
        "vllm.utils": _module("vllm.utils", FlexibleArgumentParser=object),
        "vllm.utils.argparse_utils": _module(
            "vllm.utils.argparse_utils", FlexibleArgumentParser=object
        ),
        "vllm.assets": _module("vllm.assets"),
        "vllm.assets.audio": _module("vllm.assets.audio", AudioAsset=lambda name: name),
        "transformers": _module(
            "transformers",
            AutoProcessor=_fake_auto("processor"),
            AutoTokenizer=_fake_auto("tokenizer"),
        ),
        "huggingface_hub": _module("huggingface_hub", snapshot_download=lambda repo, **kw: repo),
        "PIL": _module("PIL"),
        "PIL.Image": _module("PIL.Image", Image=object),
        # With qwen_vl_utils importable the example takes its resize path: mmrun's fixed choice.
        "qwen_vl_utils": _module("qwen_vl_utils", smart_resize=_smart_resize),
    }
    saved = {name: sys.modules.get(name) for name in fakes}
    sys.modules.update(fakes)
    try:
        yield
    finally:
        for name, module in saved.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module


def load_example(path: Path) -> dict[str, Any]:
    """Execute an example (its ``__main__`` block does not run) and return its globals."""
    source = path.read_text().split("\n", 1)[1]  # first line is the example's path
    namespace: dict[str, Any] = {"__name__": "example"}
    with _stand_ins():
        exec(compile(source, str(path), "exec"), namespace)
    return namespace


def _as_request(data: Any) -> ExampleRequest:
    lora = data.lora_requests[0] if data.lora_requests else None
    return ExampleRequest(
        engine_args=dict(vars(data.engine_args)),
        prompt=data.prompt,
        prompt_token_ids=getattr(data, "prompt_token_ids", None),
        stop_token_ids=data.stop_token_ids,
        chat_template=getattr(data, "chat_template", None),
        lora=tuple(lora) if lora else None,
    )


def image_request(key: str, question: str, count: int) -> ExampleRequest:
    namespace = load_example(IMAGE_EXAMPLE)
    urls = [f"image-{i}" for i in range(count)]
    with _stand_ins():
        return _as_request(namespace["model_example_map"][key](question, urls))


def audio_request(key: str, question: str, count: int) -> ExampleRequest:
    namespace = load_example(AUDIO_EXAMPLE)
    with _stand_ins():
        return _as_request(namespace["model_example_map"][key](question, count))


def example_keys(path: Path) -> list[str]:
    return list(load_example(path)["model_example_map"])
