"""mmrun: run vision-language and audio-language models through vLLM in one command.

The public plugin API is what ``__all__`` lists; everything else is internal.
"""

from mmrun.errors import MediaError, MmrunError
from mmrun.modalities.audio.checks import AudioLimits
from mmrun.plugins import Register
from mmrun.prompts import chatml, media_first_messages, numbered, text_messages
from mmrun.registry import Asset, LoaderSpec, Modality, loader
from mmrun.request import ImageResize, LoaderContext, LoraAdapter, Prompt, TemplateRenderer

__version__ = "0.2.0"

__all__ = [
    "Asset",
    "AudioLimits",
    "ImageResize",
    "LoaderContext",
    "LoaderSpec",
    "LoraAdapter",
    "MediaError",
    "MmrunError",
    "Modality",
    "Prompt",
    "Register",
    "TemplateRenderer",
    "__version__",
    "chatml",
    "loader",
    "media_first_messages",
    "numbered",
    "text_messages",
]
