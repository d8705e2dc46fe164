"""Plugin loading: the built-in modality packages and third-party ``mmrun.plugins`` entry points.

Built-in plugins register exactly as third-party ones do: each is a callable
``register(registry)``. Third-party plugins are found through the entry-point group
``mmrun.plugins``; ``MMRUN_PLUGINS`` restricts which load (a comma-separated allow-list of
entry-point names; empty loads none). A plugin that fails to import or register is reported
on stderr and skipped, and leaves no half-registered loaders behind.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from functools import cache
from importlib import import_module
from importlib.metadata import entry_points

from mmrun.errors import MmrunError
from mmrun.registry import Registry

ENTRY_POINT_GROUP = "mmrun.plugins"
ALLOW_ENV = "MMRUN_PLUGINS"
BUILTIN_PLUGINS = ("mmrun.modalities.image", "mmrun.modalities.audio")

RegisterFn = Callable[[Registry], None]


def builtin_registry() -> Registry:
    """A registry holding only mmrun's own modalities and loaders."""
    registry = Registry()
    for name in BUILTIN_PLUGINS:
        import_module(name).register(registry)
    return registry


def _register_isolated(registry: Registry, name: str, register: RegisterFn) -> None:
    """Run one plugin's register function; on failure, undo what it added and report it."""
    scratch = Registry(
        modalities=dict(registry.modalities),
        loaders={m: dict(specs) for m, specs in registry.loaders.items()},
    )
    try:
        register(scratch)
    except Exception as exc:  # a broken plugin must not break mmrun
        reason = exc.message if isinstance(exc, MmrunError) else f"{type(exc).__name__}: {exc}"
        print(f"mmrun: warning: plugin {name!r} skipped: {reason}", file=sys.stderr)
        return
    registry.modalities, registry.loaders = scratch.modalities, scratch.loaders


def load_entry_point_plugins(registry: Registry) -> list[str]:
    """Register the allowed third-party plugins; return the names that loaded."""
    allow = os.environ.get(ALLOW_ENV)
    allowed = None if allow is None else {n.strip() for n in allow.split(",") if n.strip()}
    loaded = []
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if allowed is not None and ep.name not in allowed:
            continue
        try:
            register = ep.load()
        except Exception as exc:
            print(
                f"mmrun: warning: plugin {ep.name!r} skipped: cannot import {ep.value}: "
                f"{type(exc).__name__}: {exc}",
                file=sys.stderr,
            )
            continue
        before = sum(len(v) for v in registry.loaders.values())
        _register_isolated(registry, ep.name, register)
        if sum(len(v) for v in registry.loaders.values()) > before:
            loaded.append(ep.name)
    return loaded


@cache
def get_registry() -> Registry:
    """The registry the CLI uses: built-ins, then the allowed third-party plugins, once."""
    registry = builtin_registry()
    load_entry_point_plugins(registry)
    return registry
