"""mmrun: run vision-language and audio-language models through vLLM in one command.

The public API (running models, docs/python.md; plugins, docs/writing-plugins.md) is what
``__all__`` lists; everything else is internal.
"""

from typing import TYPE_CHECKING, Any

from mmrun.errors import MediaError, MmrunError
from mmrun.item import Item
from mmrun.modalities.audio.checks import AudioLimits
from mmrun.modalities.image.resize import ImageResize
from mmrun.outcome import Hooks
from mmrun.plugins import Register
from mmrun.prompts import chatml, media_first_messages, numbered, template_prompt, text_messages
from mmrun.registry import Asset, LoaderSpec, MediaOption, Modality, loader
from mmrun.request import LoaderContext, LoraAdapter, Prompt, TemplateRenderer
from mmrun.version import __version__

if TYPE_CHECKING:
    from mmrun.api import Model, Request, Result, ResultError, request_for


# Running models (mmrun.api) is imported on first use: a plugin that imports mmrun for
# ``loader`` does not load the planning, runner and backends with it.
_API = ("Model", "Request", "Result", "ResultError", "request_for")


def __getattr__(name: str) -> Any:
    if name in _API:
        from mmrun import api

        return getattr(api, name)
    raise AttributeError(f"module 'mmrun' has no attribute {name!r}")


__all__ = [
    "Asset",
    "AudioLimits",
    "Hooks",
    "ImageResize",
    "Item",
    "LoaderContext",
    "LoaderSpec",
    "LoraAdapter",
    "MediaError",
    "MediaOption",
    "MmrunError",
    "Modality",
    "Model",
    "Prompt",
    "Register",
    "Request",
    "Result",
    "ResultError",
    "TemplateRenderer",
    "__version__",
    "chatml",
    "loader",
    "media_first_messages",
    "numbered",
    "request_for",
    "template_prompt",
    "text_messages",
]
