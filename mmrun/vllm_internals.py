"""What mmrun reads from vLLM beyond its public API, in one place: the renderer of an engine
that is starting (found by walking the starting thread's frames), the engine core client's
processes and output queue, vLLM's EngineDeadError, the request ids ``LLM.enqueue`` answers
with, and the private tables of vLLM's model registry.

Each function names the vLLM versions it was checked on (among 0.23, 0.24, 0.26, 0.27, 0.28
and 0.32). On another vLLM, what a function reads may have moved: it then answers "nothing
here" (None, an empty list, False) and a warning on this module's logger says, once per
process, what mmrun goes without (a warm-up, a watchdog, a quick stop). None of these
functions raises for a vLLM it does not know, and none imports vLLM: the objects come from
mmrun.engine.handle, the modules from ``sys.modules``.
"""

from __future__ import annotations

import ast
import logging
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

FRONTEND_CHECKED = "0.26, 0.27, 0.28 and 0.32"
ENGINE_CORE_CHECKED = "0.32"
ENQUEUE_CHECKED = "0.23, 0.24, 0.28 and 0.32"
REGISTRY_CHECKED = "0.32"

_noted: set[str] = set()
_ABSENT = object()


def note_once(what: str, checked: str, without: str) -> None:
    """Warn, once per process, that the installed vLLM has no ``what`` (found on the vLLM
    versions ``checked``), and what mmrun does ``without`` it."""
    if what in _noted:
        return
    _noted.add(what)
    # vLLM is imported wherever its internals are read: its own version, not the package's
    version = getattr(sys.modules.get("vllm"), "__version__", None)
    logger.warning(
        "mmrun: vLLM %s has no %s (checked on vLLM %s): %s",
        version or "(version unknown)",
        what,
        checked,
        without,
    )


# --- the frontend of an engine that is starting -------------------------------------------


def starting_renderer(starter: int) -> Any | None:
    """The renderer (vLLM's frontend: tokenizer and multimodal processor) of the engine that
    thread ``starter`` is starting: vLLM's ``LLMEngine.__init__`` builds it, then starts its
    engine core process and waits there until the engine is ready. None if that thread is
    not inside such a constructor. Checked on vLLM 0.26, 0.27, 0.28 and 0.32."""
    frame = sys._current_frames().get(starter)
    while frame is not None:
        if frame.f_code.co_name == "__init__":
            owner = frame.f_locals.get("self")
            if type(owner).__name__ == "LLMEngine":
                renderer = getattr(owner, "renderer", None)
                if renderer is None:
                    note_once(
                        "LLMEngine.renderer",
                        FRONTEND_CHECKED,
                        "the model's processor loads on the first request",
                    )
                return renderer
        frame = frame.f_back
    return None


def frontend_processor_loader(starter: int) -> Callable[[], object] | None:
    """vLLM's call that loads the model's Hugging Face processor into the cache its first
    multimodal request reads (``mm_processor.info.get_hf_processor``, the call that request
    makes first, with the same arguments), for the engine thread ``starter`` is starting.
    None where there is nothing to load: a model without media, a thread not starting an
    engine, or a vLLM that loads it itself while its engine core starts (a renderer with
    ``start_mm_warmup_in_background``, vLLM 0.32). Checked on vLLM 0.26, 0.27 and 0.28, which
    load it on the first request or once the engine is ready, and 0.32."""
    renderer = starting_renderer(starter)
    if renderer is None or hasattr(renderer, "start_mm_warmup_in_background"):
        return None
    processor = getattr(renderer, "mm_processor", None)
    if processor is None:
        return None
    load: Callable[[], object] | None = getattr(
        getattr(processor, "info", None), "get_hf_processor", None
    )
    if not callable(load):
        note_once(
            "renderer.mm_processor.info.get_hf_processor",
            FRONTEND_CHECKED,
            "the model's processor loads on the first request",
        )
        return None
    return load


# --- the engine core ------------------------------------------------------------------------


def engine_core(llm: Any) -> Any | None:
    """The engine core client of a started ``vllm.LLM`` (``llm.llm_engine.engine_core``), or
    None. Checked on vLLM 0.23, 0.24, 0.28 and 0.32."""
    engine = getattr(llm, "llm_engine", None)
    core = getattr(engine, "engine_core", None)
    if engine is not None and core is None:
        note_once(
            "LLMEngine.engine_core",
            ENQUEUE_CHECKED,
            "the engine stops at vLLM's own pace, and a dead engine core is left to vLLM",
        )
    return core


def engine_core_processes(core: Any) -> list[Any]:
    """The engine core processes of an engine core client (vLLM's CoreEngineProcManager,
    ``core.resources.engine_manager.processes``). An engine run in this process
    (VLLM_ENABLE_V1_MULTIPROCESSING=0: a client without ``resources``) has none. Checked on
    vLLM 0.32."""
    resources = getattr(core, "resources", None)
    if resources is None:
        return []
    manager = getattr(resources, "engine_manager", _ABSENT)
    if manager is None:  # engine cores that another process started
        return []
    processes = getattr(manager, "processes", None)
    if isinstance(processes, list):
        return list(processes)
    note_once(
        "engine_core.resources.engine_manager.processes",
        ENGINE_CORE_CHECKED,
        "the engine stops at vLLM's own pace, and a dead engine core is left to vLLM",
    )
    return []


def output_queue(core: Any) -> Any | None:
    """The queue that vLLM's output thread fills and ``LLMEngine.step()`` waits on (the
    engine core client's ``outputs_queue``); None for an engine run in this process. Checked
    on vLLM 0.32."""
    queue = getattr(core, "outputs_queue", None)
    if queue is None and getattr(core, "resources", None) is not None:
        note_once(
            "engine_core.outputs_queue",
            ENGINE_CORE_CHECKED,
            "a dead engine core is left to vLLM to notice",
        )
    return queue


class EngineDeadErrorStandIn(Exception):
    """The engine core process died (where vLLM has no EngineDeadError of its own)."""

    def __init__(self) -> None:
        super().__init__("the engine core process died")


def engine_dead_error() -> Exception:
    """vLLM's EngineDeadError (``vllm.v1.engine.exceptions``, imported by the running
    engine), or mmrun's stand-in where that module has none: ``LLMEngine.step()`` raises
    either, and mmrun reports both alike, so nothing is lost and nothing is said. Checked on
    vLLM 0.32."""
    exceptions = sys.modules.get("vllm.v1.engine.exceptions")
    dead = getattr(exceptions, "EngineDeadError", None)
    if isinstance(dead, type) and issubclass(dead, Exception):
        return dead()
    return EngineDeadErrorStandIn()


# --- requests -------------------------------------------------------------------------------


def streams_requests(llm: Any) -> bool:
    """Whether ``llm`` takes requests one at a time (``LLM.enqueue``, ``LLM.enqueue_chat``)
    and runs its engine a step at a time (``llm_engine.step()``), so that each result comes
    as soon as it is finished. Checked on vLLM 0.23, 0.24, 0.28 and 0.32."""
    if hasattr(llm, "enqueue") and hasattr(llm, "llm_engine"):
        return True
    note_once(
        "LLM.enqueue",
        ENQUEUE_CHECKED,
        "requests go in batched LLM.generate and LLM.chat calls, and each call's results "
        "come when the call ends",
    )
    return False


def output_request_id(enqueued: str) -> str:
    """The id a request's outputs carry, from the id ``LLM.enqueue`` answered with. vLLM 0.32
    answers with its internal id, the counter's id and 8 random characters ("12-1f3a9c0e",
    ``assign_request_id`` in vllm/v1/engine/input_processor.py), and its outputs carry the
    counter's id alone; an id without that suffix is already the outputs'. Checked on vLLM
    0.23, 0.24, 0.28 and 0.32."""
    head, sep, _ = enqueued.partition("-")
    return head if sep and head.isdigit() else enqueued


# --- the model registry ---------------------------------------------------------------------

REGISTRY_FILE = Path("model_executor", "models", "registry.py")


@dataclass(frozen=True)
class ModelRegistry:
    """The architectures vLLM supports, the removed ones with the last vLLM version that
    supported each, and those it runs as multimodal generative models (``multimodal``)."""

    architectures: frozenset[str]
    removed: dict[str, str]
    multimodal: frozenset[str] = frozenset()


def model_registry(package: Path) -> ModelRegistry:
    """The tables of vLLM's model registry, read with ``ast`` from the installed files
    (``<package>/model_executor/models/registry.py``) without importing vLLM: ``import vllm``
    takes seconds, which ``mmrun models`` must not pay. Its private ``_VLLM_MODELS`` (with the
    tables it splats in) lists the architectures, ``_PREVIOUSLY_SUPPORTED_MODELS`` the removed
    ones. The multimodal ones are ``_MULTIMODAL_MODELS``'s and those that vLLM runs with its
    Transformers backend's multimodal generation class. Empty where the file or the table is
    not there. Checked on vLLM 0.32."""
    try:
        tree = ast.parse((package / REGISTRY_FILE).read_text())
    except (OSError, SyntaxError):
        tree = None
    dicts = _dict_literals(tree) if tree is not None else {}
    if "_VLLM_MODELS" not in dicts:
        note_once(
            f"_VLLM_MODELS in {REGISTRY_FILE.as_posix()}",
            REGISTRY_CHECKED,
            "the architectures it supports are unknown to mmrun",
        )
        return ModelRegistry(frozenset(), {})
    removed: dict[str, str] = {}
    removed_node = dicts.get("_PREVIOUSLY_SUPPORTED_MODELS")
    if removed_node is not None:
        for key, value in zip(removed_node.keys, removed_node.values, strict=True):
            if isinstance(key, ast.Constant) and isinstance(value, ast.Constant):
                removed[str(key.value)] = str(value.value)
    multimodal = _keys("_MULTIMODAL_MODELS", dicts) | _transformers_multimodal(dicts)
    return ModelRegistry(frozenset(_keys("_VLLM_MODELS", dicts)), removed, frozenset(multimodal))


# The classes of vLLM's Transformers backend that generate text from media.
TRANSFORMERS_MULTIMODAL = frozenset(
    {"TransformersMultiModalForCausalLM", "TransformersMultiModalMoEForCausalLM"}
)


def _transformers_multimodal(dicts: dict[str, ast.Dict]) -> set[str]:
    """The architectures of any table that vLLM maps to ``("transformers", <a multimodal
    generation class>)`` (``_TRANSFORMERS_SUPPORTED_MODELS``'s "Multimodal models")."""
    found: set[str] = set()
    for node in dicts.values():
        for key, value in zip(node.keys, node.values, strict=True):
            if not (isinstance(key, ast.Constant) and isinstance(value, ast.Tuple)):
                continue
            names = [e.value for e in value.elts if isinstance(e, ast.Constant)]
            if len(names) == 2 and names[1] in TRANSFORMERS_MULTIMODAL:
                found.add(str(key.value))
    return found


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
