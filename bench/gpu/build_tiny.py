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
from typing import Any, ClassVar

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


class ImportCheck:
    """Which names vLLM 0.26's model code imports at module level from transformers, and
    whether transformers 5.17 (the device's) has them: read from both sources, nothing run.
    An ImportError there fails the row on the device before the model loads (vLLM 0.26's
    pixtral.py, under llava and mistral3, did on 2026-11-29)."""

    def __init__(self, vllm_src: Path, tf_src: Path) -> None:
        self.vllm = vllm_src
        self.tf = tf_src
        self.arch_module: dict[str, str] = {}
        tree = ast.parse((vllm_src / "model_executor" / "models" / "registry.py").read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Dict):
                for key, value in zip(node.keys, node.values, strict=True):
                    if (
                        isinstance(key, ast.Constant)
                        and isinstance(value, ast.Tuple)
                        and value.elts
                        and isinstance(value.elts[0], ast.Constant)
                    ):
                        self.arch_module.setdefault(str(key.value), str(value.elts[0].value))
        self._names: dict[Path, set[str]] = {}
        self._all_names: set[str] | None = None

    def _defined(self, path: Path) -> set[str]:
        if path not in self._names:
            names: set[str] = set()
            try:
                tree = ast.parse(path.read_text())
            except (OSError, SyntaxError):
                self._names[path] = names
                return names
            for node in ast.walk(tree):
                if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                    names.add(node.name)
                elif isinstance(node, ast.Assign):
                    for t in node.targets:
                        if isinstance(t, ast.Name):
                            names.add(t.id)
                        if (
                            isinstance(t, ast.Name)
                            and t.id == "__all__"
                            and isinstance(node.value, ast.List | ast.Tuple)
                        ):
                            names |= {
                                e.value for e in node.value.elts if isinstance(e, ast.Constant)
                            }
                elif isinstance(node, ast.ImportFrom | ast.Import):
                    names |= {a.asname or a.name.split(".")[0] for a in node.names}
                elif (
                    isinstance(node, ast.Constant)
                    and isinstance(node.value, str)
                    and node.value.isidentifier()
                ):
                    names.add(node.value)  # _import_structure's lists of names
            self._names[path] = names
        return self._names[path]

    # transformers 5's aliases for module paths of 4.x (transformers/__init__.py)
    _MODULE_ALIASES: ClassVar[dict[str, str]] = {
        "transformers.tokenization_utils_fast": "transformers.tokenization_utils_tokenizers",
        "transformers.tokenization_utils": "transformers.tokenization_utils_sentencepiece",
        "transformers.image_processing_utils_fast": "transformers.image_processing_backends",
    }

    def _tf_has(self, module: str, name: str) -> bool:
        module = self._MODULE_ALIASES.get(module, module)
        last = module.rsplit(".", 1)[-1]
        if last.startswith("image_processing_") and last.endswith("_fast"):
            module = module[: -len("_fast")]  # models.X.image_processing_Y_fast: an alias
        if self._tf_has_exact(module, name):
            return True
        # *ImageProcessorFast / *TokenizerFast resolve to the name without "Fast"
        return name.endswith(("ImageProcessorFast", "TokenizerFast")) and self._tf_has_exact(
            module, name[: -len("Fast")]
        )

    def _tf_has_exact(self, module: str, name: str) -> bool:
        parts = module.split(".")[1:]
        base = self.tf.joinpath(*parts) if parts else self.tf
        if base.with_suffix(".py").exists():
            return name in self._defined(base.with_suffix(".py"))
        if base.is_dir():
            if (base / f"{name}.py").exists() or (base / name).is_dir():
                return True
            if not parts:  # `from transformers import X`: anywhere in the package
                if self._all_names is None:
                    self._all_names = set()
                    for f in self.tf.rglob("*.py"):
                        self._all_names |= self._defined(f)
                return name in self._all_names
            return any(name in self._defined(f) for f in base.glob("*.py"))
        return False

    def problems(self, architecture: str) -> str | None:
        module = self.arch_module.get(architecture)
        if module is None:
            return None
        missing: list[str] = []
        seen: set[Path] = set()
        todo = [self.vllm / "model_executor" / "models" / f"{module}.py"]
        while todo:
            path = todo.pop()
            if path in seen or not path.exists():
                continue
            seen.add(path)
            tree = ast.parse(path.read_text())
            for node in tree.body:  # module level only: lazy imports in functions may never run
                if not isinstance(node, ast.ImportFrom):
                    continue
                mod = node.module or ""
                if node.level == 1:  # from .x import ...: models/x.py
                    todo.append(path.parent / f"{mod}.py")
                elif mod.startswith(("vllm.model_executor.models", "vllm.transformers_utils")):
                    target = self.vllm.joinpath(*mod.split(".")[1:])
                    todo.append(
                        target.with_suffix(".py")
                        if target.with_suffix(".py").exists()
                        else target / "__init__.py"
                    )
                elif mod == "transformers" or mod.startswith("transformers."):
                    for alias in node.names:
                        if alias.name != "*" and not self._tf_has(mod, alias.name):
                            rel = path.relative_to(self.vllm.parent)
                            missing.append(f"{rel} imports {alias.name} from {mod}")
        if not missing:
            return None
        return "transformers 5.17 lacks what vLLM 0.26 imports: " + "; ".join(missing[:3])


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
    ap.add_argument("--vllm-src", default="", help="vLLM 0.26.0's unpacked vllm/ folder")
    ap.add_argument(
        "--transformers-src", default="", help="transformers 5.17's transformers/ folder"
    )
    args = ap.parse_args()
    repo = Path(args.repo).resolve()
    sys.path.insert(0, str(repo))
    import tests.tiny as tiny
    from mmrun.plugins import builtin_registry

    registry = builtin_registry()
    arches = vllm_architectures(Path(args.registry))
    imports = (
        ImportCheck(Path(args.vllm_src), Path(args.transformers_src))
        if args.vllm_src and args.transformers_src
        else None
    )
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
        # as tests/e2e/test_cli_e2e.py items_per_prompt: at most 2 (the default assets)
        entry["count"] = 2 if spec.max_items is None else min(2, spec.max_items)
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
        if entry["runnable"] and imports is not None:
            problem = imports.problems(spec.architecture)
            if problem:  # still run: the device confirms it (or shows the check wrong)
                entry["expect_fail"] = problem
        missing = [m for m in spec.requires if m not in DEVICE_MODULES]
        if entry["runnable"] and missing:
            entry.update(runnable=False, reason=f"needs {', '.join(missing)} (not on the device)")
        if not entry["runnable"]:  # not built: nothing on the device would run it
            entries.append(entry)
            print(f"skipped {modality}/{key}: {entry['reason']}", flush=True)
            continue
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
        elif e.get("expect_fail"):
            print(f"  expected to fail: {e['row']}: {e['expect_fail']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
