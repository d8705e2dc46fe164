"""Where mmrun keeps what it downloads.

The cache folder is ``$MMRUN_CACHE_DIR`` if set, else ``mmrun`` under the XDG cache folder
(``$XDG_CACHE_HOME``, default ``~/.cache``), as platformdirs resolves it.
"""

from __future__ import annotations

import os
from pathlib import Path

CACHE_ENV = "MMRUN_CACHE_DIR"


def cache_dir() -> Path:
    override = os.environ.get(CACHE_ENV)
    if override:
        return Path(override).expanduser()
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("mmrun", appauthor=False))


def media_cache_dir() -> Path:
    return cache_dir() / "media"
