"""Whisper's tiny checkpoint (mmrun.tiny's, which ``mmrun selftest`` builds) as the audio
row's proof (see tests/tiny/__init__.py).
"""

from __future__ import annotations

from mmrun.tiny.whisper import build_whisper
from tests.tiny import Proof

PROOFS: dict[tuple[str, str], Proof] = {("audio", "whisper"): Proof(build_whisper)}
