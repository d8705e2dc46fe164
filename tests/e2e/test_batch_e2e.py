"""Batch mode on the real vLLM engine and the tiny checkpoints: a manifest of mixed prompts,
a folder of clips, bad items among good ones, SIGKILL at random moments and a resume, and
memory that does not grow with the data set.

Texts are compared with a plain ``LLM.generate`` call on the same prompts (the prompts are
mmrun's own, from a dry run of the same manifest): the engine's greedy answers do not depend
on how mmrun streams the prompts in. Both sides run with ``max_num_seqs=1``, so that no
answer depends on which other prompt shared its batch either (random tiny weights give
near-tied logits, where a different matrix blocking could flip a token).
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from mmrun.errors import EXIT_PARTIAL
from mmrun.tiny import TinyCheckpoint
from tests.helpers.memory import peak_rss

pytestmark = pytest.mark.e2e

Factory = Callable[[str, str], TinyCheckpoint]


def images(folder: Path, count: int, size: tuple[int, int] = (56, 56)) -> list[Path]:
    from PIL import Image

    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(count):
        path = folder / f"img{i:05d}.png"
        Image.new("RGB", size, ((37 * i) % 256, (91 * i) % 256, (13 * i) % 256)).save(path)
        paths.append(path)
    return paths


def mmrun(
    modality: str,
    key: str,
    checkpoint: TinyCheckpoint,
    *args: str,
    env: dict[str, str] | None = None,
    timeout: float = 900,
) -> subprocess.CompletedProcess[str]:
    engine_args = {**checkpoint.engine_args, "enforce_eager": True, "max_num_seqs": 1}
    flags = [f"--engine-arg={k}={json.dumps(v)}" for k, v in engine_args.items()]
    command = [sys.executable, "-m", "mmrun", modality, "-m", key, "--model", str(checkpoint.path)]
    return subprocess.run(
        [*command, "-tp", "1", "--max-tokens", "6", *flags, *args],
        capture_output=True,
        text=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1", **(env or {})},
        timeout=timeout,
    )


def rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


PLAIN_BATCH = """
import json, sys
from PIL import Image
from vllm import LLM, SamplingParams

spec = json.load(open(sys.argv[1]))
llm = LLM(**spec["engine_args"])
prompts = [
    {"prompt": p["prompt"], "multi_modal_data": {"image": [Image.open(m).convert("RGB") for m in p["media"]]}}
    for p in spec["prompts"]
]
outputs = llm.generate(prompts, SamplingParams(temperature=0.0, max_tokens=6), use_tqdm=False)
print(json.dumps([o.outputs[0].text for o in outputs]))
"""


@pytest.fixture(scope="module")
def qwen(tiny_checkpoint: Factory) -> TinyCheckpoint:
    return tiny_checkpoint("image", "qwen2_5_vl")


def test_a_manifest_of_mixed_prompts_matches_one_plain_batch(
    qwen: TinyCheckpoint, tmp_path: Path, server: Any
) -> None:
    paths = images(tmp_path / "photos", 12)
    for path in paths[:4]:  # some prompts fetch their images over HTTP
        data = path.read_bytes()
        server.routes[f"/{path.name}"] = lambda h, data=data: _send(h, data)
    lines = []
    for i in range(42):
        count = 1 + i % 2
        chosen = [paths[(i + j) % len(paths)] for j in range(count)]
        sources = [server.url(f"/{p.name}") if p in paths[:4] else str(p) for p in chosen]
        row: dict[str, Any] = {"id": f"p{i}", "image": sources, "meta": {"n": i}}
        if i % 3 == 0:
            row["question"] = f"Describe picture set {i}."
        lines.append(json.dumps(row))
    manifest = tmp_path / "manifest.jsonl"
    manifest.write_text("\n".join(lines) + "\n")
    out = tmp_path / "out.jsonl"
    proc = mmrun("image", "qwen2_5_vl", qwen, "--input", str(manifest), "-o", str(out))
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = {r["id"]: r for r in rows(out)}
    assert sorted(got) == sorted(f"p{i}" for i in range(42))  # each id exactly once
    assert all(r["error"] is None and r["completion_tokens"] > 0 for r in got.values())
    assert got["p3"]["question"] == "Describe picture set 3." and got["p3"]["meta"] == {"n": 3}
    assert proc.stderr.strip().splitlines()[-1].startswith("42 done, 0 failed, 0 skipped in ")

    # The same prompts as one plain LLM.generate call: mmrun's prompts (a dry run of the
    # same manifest), the same images, the same engine arguments.
    dry = tmp_path / "dry.jsonl"
    assert (
        mmrun(
            "image", "qwen2_5_vl", qwen, "--input", str(manifest), "-o", str(dry), "--dry-run"
        ).returncode
        == 0
    )
    plan = json.loads(
        mmrun(
            "image",
            "qwen2_5_vl",
            qwen,
            "-i",
            str(paths[0]),
            "-i",
            str(paths[1]),
            "--dry-run",
            "--json",
        ).stdout
    )
    local = {f"/{p.name}": str(p) for p in paths[:4]}
    prompts = sorted(rows(dry), key=lambda r: r["index"])
    spec = {
        "engine_args": {**plan["request"]["engine_args"], "max_num_seqs": 1},
        "prompts": [
            {
                "prompt": r["prompt"],
                "media": [
                    local.get("/" + m.rsplit("/", 1)[-1], m) if m.startswith("http") else m
                    for m in r["media"]
                ],
            }
            for r in prompts
        ],
    }
    spec_file = tmp_path / "spec.json"
    spec_file.write_text(json.dumps(spec))
    plain = subprocess.run(
        [sys.executable, "-c", PLAIN_BATCH, str(spec_file)],
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "HF_HUB_OFFLINE": "1", "VLLM_LOGGING_LEVEL": "ERROR"},
    )
    assert plain.returncode == 0, plain.stderr[-3000:]
    texts = json.loads(plain.stdout.strip().splitlines()[-1])
    assert [got[r["id"]]["text"] for r in prompts] == texts


def _send(handler: Any, data: bytes) -> None:
    from tests.helpers.http import reply

    reply(handler, 200, data)


def test_a_folder_of_clips_on_whisper(tiny_checkpoint: Factory, tmp_path: Path) -> None:
    import numpy as np
    import soundfile

    whisper = tiny_checkpoint("audio", "whisper")
    folder = tmp_path / "calls"
    folder.mkdir()
    for i in range(20):
        t = np.linspace(0, 1 + i % 3, 16000 * (1 + i % 3), dtype=np.float32)
        soundfile.write(
            folder / f"call{i:02d}.wav", 0.3 * np.sin(2 * np.pi * (200 + 20 * i) * t), 16000
        )
    out = tmp_path / "transcripts.jsonl"
    proc = mmrun("audio", "whisper", whisper, "-a", str(folder), "-o", str(out))
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = rows(out)
    assert sorted(r["id"] for r in got) == sorted(str(p) for p in folder.iterdir())
    assert all(r["error"] is None and r["completion_tokens"] > 0 for r in got)


def test_bad_items_get_error_lines_with_their_stage(
    qwen: TinyCheckpoint, tiny_checkpoint: Factory, tmp_path: Path, server: Any
) -> None:
    paths = images(tmp_path / "photos", 3)
    truncated = tmp_path / "photos" / "truncated.jpg"
    from PIL import Image

    Image.new("RGB", (64, 64), (1, 2, 3)).save(truncated, format="JPEG")
    truncated.write_bytes(truncated.read_bytes()[:200])
    manifest = tmp_path / "m.jsonl"
    entries = [
        {"id": "ok1", "image": str(paths[0])},
        {"id": "404", "image": server.url("/nothing.png")},
        {"id": "truncated", "image": str(truncated)},
        {"id": "too-long", "image": str(paths[1]), "question": "why " * 3000},
        {"id": "ok2", "image": [str(paths[1]), str(paths[2])]},
    ]
    manifest.write_text("".join(json.dumps(e) + "\n" for e in entries))
    out = tmp_path / "out.jsonl"
    proc = mmrun("image", "qwen2_5_vl", qwen, "--input", str(manifest), "-o", str(out))
    assert proc.returncode == EXIT_PARTIAL, proc.stderr[-3000:]
    got = {r["id"]: r for r in rows(out)}
    assert got["ok1"]["error"] is None and got["ok2"]["error"] is None
    assert got["404"]["error"]["stage"] == "media" and "HTTP 404" in got["404"]["error"]["message"]
    assert got["truncated"]["error"]["stage"] == "media"
    assert got["too-long"]["error"]["stage"] == "request"
    assert "maximum context length is" in got["too-long"]["error"]["message"]
    assert proc.stderr.strip().splitlines()[-1].startswith("2 done, 3 failed, 0 skipped in ")

    # A clip longer than whisper takes (30 s), among good ones.
    import numpy as np
    import soundfile

    whisper = tiny_checkpoint("audio", "whisper")
    clips = tmp_path / "clips"
    clips.mkdir()
    for name, seconds in (("short.wav", 2), ("long.wav", 31)):
        t = np.linspace(0, seconds, 16000 * seconds, dtype=np.float32)
        soundfile.write(clips / name, 0.3 * np.sin(2 * np.pi * 300 * t), 16000)
    audio_out = tmp_path / "audio.jsonl"
    proc = mmrun("audio", "whisper", whisper, "-a", str(clips), "-o", str(audio_out))
    assert proc.returncode == EXIT_PARTIAL, proc.stderr[-3000:]
    got = {Path(r["id"]).name: r for r in rows(audio_out)}
    assert got["short.wav"]["error"] is None
    assert got["long.wav"]["error"]["stage"] == "media"
    assert "31.0 s long; whisper takes at most 30 s" in got["long.wav"]["error"]["message"]


def test_sigkill_at_random_moments_then_resume_writes_every_id_once(
    qwen: TinyCheckpoint, tmp_path: Path
) -> None:
    folder = tmp_path / "photos"
    images(folder, 240)
    out = tmp_path / "out.jsonl"
    args = ["-i", str(folder), "-o", str(out), "--quiet", "--max-tokens", "12"]
    engine_args = {**qwen.engine_args, "enforce_eager": True}
    flags = [f"--engine-arg={k}={json.dumps(v)}" for k, v in engine_args.items()]
    command = [
        sys.executable,
        "-m",
        "mmrun",
        "image",
        "-m",
        "qwen2_5_vl",
        "--model",
        str(qwen.path),
        "-tp",
        "1",
        *flags,
        *args,
    ]
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    rng = random.Random(1234)
    kills = 0
    for _ in range(3):
        before = out.read_bytes().count(b"\n") if out.exists() else 0
        proc = subprocess.Popen(command, env=env, start_new_session=True)
        # Wait until this run has written something, then kill it a random moment later.
        deadline = time.monotonic() + 600
        while proc.poll() is None and time.monotonic() < deadline:
            if out.exists() and out.read_bytes().count(b"\n") > before:
                break
            time.sleep(0.05)
        time.sleep(rng.uniform(0.0, 1.5))
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)  # mmrun and its engine processes, at once
            kills += 1
        proc.wait(timeout=60)
    assert kills >= 1, "every run finished before it could be killed; make the runs longer"
    final = subprocess.run(command, env=env, capture_output=True, text=True, timeout=900)
    assert final.returncode == 0, final.stderr[-3000:]
    text = out.read_text()
    assert text.endswith("\n")
    ids = [json.loads(line)["id"] for line in text.splitlines()]  # every line whole
    assert sorted(ids) == sorted(str(p) for p in folder.iterdir())  # each id exactly once


def peak_rss_mib(command: list[str], env: dict[str, str]) -> float:
    """Peak RSS of mmrun's own process, in MiB."""
    code, peak, stderr = peak_rss(command, env)
    assert code == 0, stderr
    return peak / 2**20


def test_memory_does_not_grow_with_the_data_set(qwen: TinyCheckpoint, tmp_path: Path) -> None:
    """Dry runs over 2,000 and 20,000 distinct image files: mmrun's peak RSS must not grow
    more than 20% from 2,000 to 20,000; then 2,000 prompts through the tiny engine."""
    paths = images(tmp_path / "many", 20_000, size=(28, 28))
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    base = [sys.executable, "-m", "mmrun", "image", "-m", "qwen2_5_vl", "--model", str(qwen.path)]
    peaks = {}
    for size in (2_000, 20_000):
        manifest = tmp_path / f"m{size}.jsonl"
        manifest.write_text("".join(f"{p}\n" for p in paths[:size]))
        out = tmp_path / f"dry{size}.jsonl"
        peaks[size] = peak_rss_mib(
            [*base, "--input", str(manifest), "-o", str(out), "--dry-run", "--quiet"], env
        )
        assert out.read_text().count("\n") == size
    print(f"dry-run peak RSS (MiB): {peaks}")
    assert peaks[20_000] <= 1.2 * peaks[2_000], peaks
    engine_args = {**qwen.engine_args, "enforce_eager": True, "max_num_seqs": 16}
    flags = [f"--engine-arg={k}={json.dumps(v)}" for k, v in engine_args.items()]
    out = tmp_path / "engine.jsonl"
    manifest = tmp_path / "m2000.jsonl"
    engine_peak = peak_rss_mib(
        [
            *base,
            "-tp",
            "1",
            "--max-tokens",
            "2",
            *flags,
            "--input",
            str(manifest),
            "-o",
            str(out),
            "--quiet",
        ],
        env,
    )
    print(f"2,000 prompts through the engine: peak RSS of mmrun's process {engine_peak:.0f} MiB")
    assert sum(1 for r in rows(out) if r["error"] is None) == 2_000
