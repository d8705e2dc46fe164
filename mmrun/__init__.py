"""mmrun: run vision-language and audio-language models through vLLM in one command.

The public plugin API is what ``__all__`` lists; everything else is internal.
"""

from mmrun.errors import MmrunError
from mmrun.registry import Asset, LoaderSpec, Modality, Registry, loader
from mmrun.request import ImageResize, LoaderContext, LoraAdapter, ModelRequest, TemplateRenderer

__version__ = "0.1.0"

__all__ = [
    "Asset",
    "ImageResize",
    "LoaderContext",
    "LoaderSpec",
    "LoraAdapter",
    "MmrunError",
    "Modality",
    "ModelRequest",
    "Registry",
    "TemplateRenderer",
    "__version__",
    "loader",
]
