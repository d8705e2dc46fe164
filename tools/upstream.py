"""Fetch vLLM's current multimodal examples, the upstream that mmrun's image and audio rows
follow, from PyPI: ``python -m tools.upstream`` (``make install`` runs it).

The three example scripts (multi-image, single-image and video, audio) are third-party code, so they are not committed. The vllm source
distribution on PyPI ships them (``examples/``), so this script downloads the sdist of the
pinned version, checks it against the pinned sha256, and extracts only the three example files
(and the sdist's ``vllm/_version.py``, to check the commit) into ``.cache/upstream/<version>/``,
which git ignores. Each extracted file is checked against its own pinned sha256. When the files
are already there and match, nothing is downloaded.

tests/golden/test_upstream_parity.py executes the three files with stand-ins and compares every
shared key's request with mmrun's. To move to a newer vLLM: change VERSION, SDIST_SHA256 and
COMMIT, run this script (its error names each new file hash), pin those, and go through the
parity test's failures.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import tarfile
import tempfile
import urllib.parse
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# vllm 0.33.0 on PyPI (uploaded 2026-11-02), built from vLLM commit 4ba787ec9. Its multi-image and audio example
# files are byte-identical to vllm 0.32.0's (the vLLM mmrun installs) and to the rendered
# docs page docs.vllm.ai/en/latest/examples/generate/multimodal/ (lastmod 2026-09-24).
VERSION = "0.33.0"
COMMIT = "4ba787ec9"
DATE = "2026-11-02"
SDIST_SHA256 = "f4c33c2503d52bb411146afa9618a4f48bed68912f617e6803ac8d76e4c74112"
EXAMPLES = "examples/generate/multimodal"
FILES = {
    f"{EXAMPLES}/vision_language_multi_image_offline.py": (
        "faaa26d796429c1c7f566cc6b49296570f96b1c90ea49ae8f7dd0e2bb9dcd129"
    ),
    f"{EXAMPLES}/audio_language_offline.py": (
        "583a53f980fd03815862770bf5c5f448889f3e77b88252f706f2d6a2c3243a21"
    ),
    f"{EXAMPLES}/vision_language_offline.py": (
        "8298a17f70fcefe8df86bbf0a5b43ade212e7f71473aceb44f99d5b39fc032d7"
    ),
}
VERSION_FILE = "vllm/_version.py"
DEST = ROOT / ".cache" / "upstream" / VERSION
IMAGE_EXAMPLE = DEST / f"{EXAMPLES}/vision_language_multi_image_offline.py"
AUDIO_EXAMPLE = DEST / f"{EXAMPLES}/audio_language_offline.py"
VISION_EXAMPLE = DEST / f"{EXAMPLES}/vision_language_offline.py"
# PyPI's simple index (PEP 691 JSON); a mirror can be named with MMRUN_PYPI_SIMPLE_URL.
INDEX_ENV = "MMRUN_PYPI_SIMPLE_URL"
DEFAULT_INDEX = "https://pypi.org/simple"
TIMEOUT_S = 120


class UpstreamError(Exception):
    pass


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        for chunk in iter(lambda: file.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def present() -> bool:
    """The pinned example files are in DEST, with the pinned contents."""
    return all(
        (DEST / name).is_file() and _sha256(DEST / name) == sha for name, sha in FILES.items()
    )


def _sdist_url() -> str:
    index = os.environ.get(INDEX_ENV, DEFAULT_INDEX).rstrip("/")
    request = urllib.request.Request(
        f"{index}/vllm/", headers={"Accept": "application/vnd.pypi.simple.v1+json"}
    )
    with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
        listing = json.load(response)
    name = f"vllm-{VERSION}.tar.gz"
    for entry in listing.get("files", []):
        if entry.get("filename") == name:
            if entry.get("hashes", {}).get("sha256") not in (None, SDIST_SHA256):
                raise UpstreamError(f"the index lists {name} with another sha256 than pinned")
            return urllib.parse.urljoin(f"{index}/vllm/", str(entry["url"]))
    raise UpstreamError(f"{index} lists no {name}")


def _download(url: str, target: Path) -> None:
    digest = hashlib.sha256()
    with urllib.request.urlopen(url, timeout=TIMEOUT_S) as response, open(target, "wb") as out:
        for chunk in iter(lambda: response.read(1 << 20), b""):
            digest.update(chunk)
            out.write(chunk)
    if digest.hexdigest() != SDIST_SHA256:
        raise UpstreamError(f"{url} does not have the pinned sha256 {SDIST_SHA256}")


def _extract(sdist: Path, into: Path) -> None:
    prefix = f"vllm-{VERSION}/"
    wanted = {prefix + name: name for name in [*FILES, VERSION_FILE]}
    with tarfile.open(sdist, "r:gz") as archive:
        for member in archive:
            name = wanted.pop(member.name, None)
            if name is None or not member.isfile():
                continue
            source = archive.extractfile(member)
            assert source is not None
            target = into / name
            target.parent.mkdir(parents=True, exist_ok=True)
            with source, open(target, "wb") as out:
                shutil.copyfileobj(source, out)
    if wanted:
        raise UpstreamError(f"the sdist lacks {', '.join(sorted(wanted))}")
    version_text = (into / VERSION_FILE).read_text()
    if f"commit_id = 'g{COMMIT}" not in version_text.replace('"', "'"):
        raise UpstreamError(f"the sdist's {VERSION_FILE} does not name commit {COMMIT}")
    for name, sha in FILES.items():
        got = _sha256(into / name)
        if got != sha:
            raise UpstreamError(f"{name} has sha256 {got}, pinned {sha}")


def fetch() -> None:
    """Download and extract the pinned example files into DEST (atomically)."""
    DEST.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=DEST.parent) as tmp:
        sdist = Path(tmp) / f"vllm-{VERSION}.tar.gz"
        _download(_sdist_url(), sdist)
        staged = Path(tmp) / "files"
        _extract(sdist, staged)
        sdist.unlink()
        if DEST.exists():
            shutil.rmtree(DEST)
        staged.rename(DEST)


def main(argv: list[str]) -> int:
    if present():
        return 0
    try:
        fetch()
    except (OSError, UpstreamError, ValueError, tarfile.TarError) as exc:
        print(f"tools.upstream: cannot fetch vLLM {VERSION}'s examples: {exc}", file=sys.stderr)
        return 1
    print(f"tools.upstream: vLLM {VERSION} ({COMMIT}) examples in {DEST}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
