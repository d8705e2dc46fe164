"""The plugin contract, and plugin loading.

A plugin is a module with a hook, ``register(register: Register) -> None``, named by an entry
point in the group ``mmrun.plugins``::

    [project.entry-points."mmrun.plugins"]
    acme = "acme_mmrun:register"

The hook registers through the three calls of :class:`Register`; mmrun's built-in modalities
(``BUILTIN_PLUGINS``) are loaded through the very same hook and calls. ``MMRUN_PLUGINS``
restricts which third-party plugins load (a comma-separated allow-list of entry-point names;
empty loads none). A plugin that fails to import or register is reported on stderr and
skipped, and leaves nothing half-registered behind; ``mmrun plugins`` lists what each
registered.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from functools import cache
from importlib import import_module
from importlib.metadata import entry_points
from types import ModuleType
from typing import Protocol

from mmrun.errors import MmrunError
from mmrun.registry import LoaderSpec, Modality, Registry


class Register(Protocol):
    """What a plugin's hook receives."""

    def modality(self, modality: Modality) -> None:
        """Add a kind of media: its command, its decoder, its checks, its defaults."""

    def model(self, spec: LoaderSpec) -> None:
        """Add a model key (a ``@loader`` function) to a registered modality."""

    def models(self, module: ModuleType) -> None:
        """Add every model key declared at the top level of ``module``, in file order."""


RegisterHook = Callable[[Register], None]


ENTRY_POINT_GROUP = "mmrun.plugins"
ALLOW_ENV = "MMRUN_PLUGINS"
# Loaded in this order, exactly as third-party plugins are (video after image: its loaders
# are the image models that also take video).
BUILTIN_PLUGINS = ("mmrun.modalities.image", "mmrun.modalities.audio", "mmrun.modalities.video")


def builtin_registry() -> Registry:
    """A registry holding only mmrun's own modalities and loaders."""
    registry = Registry()
    for name in BUILTIN_PLUGINS:
        registry = register_plugin(registry, name, import_module(name).register)
    return registry


def register_plugin(registry: Registry, name: str, hook: RegisterHook) -> Registry:
    """Run one plugin's hook against a copy of ``registry``: the copy if it succeeded; on
    failure, the registry unchanged (and a warning on stderr)."""
    scratch = registry.copy()
    try:
        hook(scratch.registrar(name))
    except Exception as exc:  # a broken plugin must not break mmrun
        reason = exc.message if isinstance(exc, MmrunError) else f"{type(exc).__name__}: {exc}"
        print(f"mmrun: warning: plugin {name!r} skipped: {reason}", file=sys.stderr)
        return registry
    return scratch


def load_entry_point_plugins(registry: Registry) -> Registry:
    """The registry with the allowed third-party plugins added."""
    allow = os.environ.get(ALLOW_ENV)
    allowed = None if allow is None else {n.strip() for n in allow.split(",") if n.strip()}
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if allowed is not None and ep.name not in allowed:
            continue
        try:
            hook = ep.load()
        except Exception as exc:
            print(
                f"mmrun: warning: plugin {ep.name!r} skipped: cannot import {ep.value}: "
                f"{type(exc).__name__}: {exc}",
                file=sys.stderr,
            )
            continue
        registry = register_plugin(registry, ep.name, hook)
    return registry


@cache
def get_registry() -> Registry:
    """The registry the CLI uses: built-ins, then the allowed third-party plugins, once."""
    return load_entry_point_plugins(builtin_registry())
