"""The stand-in vLLM (tests/helpers/fake_vllm): where it is, and a fresh copy of its module."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

FAKE_VLLM = Path(__file__).parent / "fake_vllm"


def load_stand_in_vllm() -> ModuleType:
    """A new module object of the stand-in ``vllm`` package (its class attributes fresh),
    for the caller to put in ``sys.modules``."""
    spec = importlib.util.spec_from_file_location(
        "vllm",
        FAKE_VLLM / "vllm" / "__init__.py",
        submodule_search_locations=[str(FAKE_VLLM / "vllm")],
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
