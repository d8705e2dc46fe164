"""Build the tiny checkpoints the GPU proofs run, with the checkout's own builders, and index them.

Every row the CPU offline proof covers (tests/tiny: ``proofs()`` where it exists, else
``builders()``) becomes one entry of index.json: how to run it through the CLI (modality,
key, media per prompt, methods, the checkpoint's extra engine and sampling arguments) and
whether the device can run it at all (vLLM 0.26.0 and transformers 5.17 there; rows proven on
another vLLM, or whose architecture vLLM 0.26 lacks, are listed as not runnable, with why).
The media the CLI proof serves (the seed assets' mirror names, as tests/conftest.py writes
them) and a small clip for the video rows go to --media.

usage (from the checkout's root, with its .venv):
  .venv/bin/python bench/gpu/build_tiny.py --repo . --registry VLLM_0_26_REGISTRY_PY \
      --out BUILD_DIR --index .gpu/t/index.json --media .gpu/t/media [--only KEY,KEY]
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
import time
import traceback
from pathlib import Path
from typing import Any

# The CLI proof's rules (tests/e2e/test_cli_e2e.py): 3 prompts, the most media the model
# takes per prompt (2 where unlimited), chat where the spec has it and the checkpoint has a
# chat template.
ENCODER_DECODER = {"WhisperForConditionalGeneration", "CohereAsrForConditionalGeneration"}
# Python modules a spec may require that the device has or that the carried wheels add
# (KINDS.md's package list; .gpu/b/whl).
DEVICE_MODULES = {
    "num2words",
    "mistral_common",
    "timm",
    "torchaudio",
    "librosa",
    "scipy",
    "cv2",
    "soundfile",
    "einops",
    "sentencepiece",
    "tiktoken",
}
# librosa is not in KINDS.md's list: drop it from the set above if a row needs it and fails.
DEVICE_MODULES.discard("librosa")


def vllm_architectures(registry_py: Path) -> set[str]:
    """The architectures a vLLM registry.py registers (its dict literals, splats followed)."""
    tree = ast.parse(registry_py.read_text())
    dicts: dict[str, ast.Dict] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign | ast.AnnAssign) and isinstance(node.value, ast.Dict):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Name):
                    dicts[target.id] = node.value

    def keys(name: str) -> set[str]:
        node = dicts.get(name)
        found: set[str] = set()
        if node is None:
            return found
        for key, value in zip(node.keys, node.values, strict=True):
            if key is None and isinstance(value, ast.Name):
                found |= keys(value.id)
            elif isinstance(key, ast.Constant) and isinstance(key.value, str):
                found.add(key.value)
        return found

    return keys("_VLLM_MODELS")


def has_chat_template(path: Path) -> bool:
    if (path / "chat_template.jinja").exists() or (path / "chat_template.json").exists():
        return True
    config = path / "tokenizer_config.json"
    return config.exists() and bool(json.loads(config.read_text()).get("chat_template"))


def write_media(folder: Path, repo: Path) -> None:
    """The seed assets under their mirror names (as tests/conftest.py's media_dir writes them),
    and the video test's clip (tests/helpers/media.py)."""
    import numpy as np
    import soundfile
    from PIL import Image

    from mmrun.modalities.audio import AUDIO
    from mmrun.modalities.image import IMAGE

    folder.mkdir(parents=True, exist_ok=True)
    for i, asset in enumerate(IMAGE.assets):
        image = Image.new("RGB", (64 + 8 * i, 48), (20 * i, 255 - 20 * i, 128))
        image.save(
            folder / asset.mirror_name,
            format="JPEG" if asset.mirror_name.endswith(("jpg", "jpeg")) else "PNG",
        )
    for i, asset in enumerate(AUDIO.assets):
        t = np.linspace(0, 1.5 + i, int(16000 * (1.5 + i)), dtype=np.float32)
        soundfile.write(
            folder / asset.mirror_name,
            0.3 * np.sin(2 * np.pi * (220 + 110 * i) * t),
            16000,
            format="OGG",
            subtype="VORBIS",
        )
    try:
        from tests.helpers.media import write_clip
    except ImportError:
        write_clip = None
    if write_clip is not None:
        write_clip(folder / "clip.mp4")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repo", required=True)
    ap.add_argument(
        "--registry", required=True, help="vLLM 0.26.0's model_executor/models/registry.py"
    )
    ap.add_argument("--out", required=True)
    ap.add_argument("--index", required=True)
    ap.add_argument("--media", required=True)
    ap.add_argument("--only", default="", help="comma-separated keys (a quick local test)")
    args = ap.parse_args()
    repo = Path(args.repo).resolve()
    sys.path.insert(0, str(repo))
    import tests.tiny as tiny
    from mmrun.plugins import builtin_registry

    registry = builtin_registry()
    arches = vllm_architectures(Path(args.registry))
    if hasattr(tiny, "proofs"):
        rows: dict[tuple[str, str], Any] = dict(tiny.proofs())
    else:
        rows = {row: None for row in tiny.builders()}
    all_builders = tiny.builders()
    only = {k for k in args.only.split(",") if k}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    entries: list[dict[str, Any]] = []
    built: dict[str, dict[str, Any]] = {}  # image key -> its entry (the video rows reuse it)
    order = sorted(rows, key=lambda r: (r[0] == "video", r))  # the video rows last
    for modality, key in order:
        if only and key not in only:
            continue
        proof = rows[(modality, key)]
        env = getattr(proof, "env", "main") if proof is not None else "main"
        entry: dict[str, Any] = {
            "row": f"{modality}/{key}",
            "modality": modality,
            "key": key,
            "env": env,
            "standin": getattr(proof, "standin", "") if proof is not None else "",
            "real_prompt": getattr(proof, "real_prompt", True) if proof is not None else True,
            "runnable": True,
            "reason": "",
        }
        try:
            spec = registry.get(modality, key)
        except Exception as exc:  # a row whose loader the checkout does not register
            entry.update(runnable=False, reason=f"no loader: {exc}")
            entries.append(entry)
            continue
        entry.update(
            architecture=spec.architecture,
            methods=list(spec.methods),
            trust_remote_code=bool(spec.trust_remote_code),
            encoder_decoder=spec.architecture in ENCODER_DECODER,
            requires=list(spec.requires),
        )
        if modality == "video":
            base = built.get(key)
            entry.update(count=1, source="clip.mp4")
            if base is None or not base["runnable"]:
                entry.update(runnable=False, reason=f"the image row {key} is not runnable")
            else:
                entry.update(
                    dir=base["dir"],
                    engine_args=base["engine_args"],
                    sampling_args=base["sampling_args"],
                    chat="chat" in spec.methods and base["chat_template"],
                    chat_template=base["chat_template"],
                )
            entries.append(entry)
            continue
        entry["count"] = 2 if spec.max_items is None else spec.max_items
        if env != "main":
            version = ""
            if hasattr(tiny, "env_vllm_version"):
                try:
                    version = tiny.env_vllm_version(env)
                except Exception:
                    version = env
            entry.update(
                runnable=False,
                reason=f"proven on vLLM {version or env} (its own environment), not 0.26.0",
            )
        elif spec.architecture not in arches:
            entry.update(runnable=False, reason=f"vLLM 0.26.0 has no {spec.architecture}")
        missing = [m for m in spec.requires if m not in DEVICE_MODULES]
        if entry["runnable"] and missing:
            entry.update(runnable=False, reason=f"needs {', '.join(missing)} (not on the device)")
        builder = getattr(proof, "builder", None) or all_builders.get((modality, key))
        folder = f"{modality}__{key}"
        t0 = time.time()
        try:
            checkpoint = builder(out / folder)
        except Exception as exc:
            traceback.print_exc()
            entry.update(
                runnable=False, reason=f"build failed here: {type(exc).__name__}: {exc}"[:300]
            )
            entries.append(entry)
            continue
        path = Path(checkpoint.path)
        if path.resolve() != (out / folder).resolve():  # a builder that wrote elsewhere
            import shutil

            shutil.copytree(path, out / folder, dirs_exist_ok=True)
        chat_template = has_chat_template(out / folder)
        entry.update(
            dir=folder,
            engine_args=dict(checkpoint.engine_args),
            sampling_args=dict(getattr(checkpoint, "sampling_args", {}) or {}),
            chat_template=chat_template,
            chat="chat" in spec.methods and chat_template,
            build_s=round(time.time() - t0, 1),
        )
        built[key] = entry
        entries.append(entry)
        print(
            f"built {modality}/{key} ({entry['build_s']} s) runnable={entry['runnable']} {entry['reason']}",
            flush=True,
        )
    write_media(Path(args.media), repo)
    Path(args.index).parent.mkdir(parents=True, exist_ok=True)
    Path(args.index).write_text(json.dumps({"rows": entries}, indent=1, default=str))
    runnable = [e for e in entries if e["runnable"]]
    runs = sum(1 + bool(e.get("chat")) for e in runnable)
    print(f"{len(entries)} rows, {len(runnable)} runnable on the device, {runs} CLI runs")
    for e in entries:
        if not e["runnable"]:
            print(f"  not runnable: {e['row']}: {e['reason']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
