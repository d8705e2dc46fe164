"""The example third-party plugin (examples/mmrun-example-plugin), installed as a real
distribution by `make install`: mmrun finds it, runs it, and it needs only the public API."""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from importlib.metadata import distribution, entry_points
from pathlib import Path

import mmrun

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "mmrun-example-plugin"
TUTORIAL = ROOT / "docs" / "writing-plugins.md"
EXAMPLE_FILES = ("pyproject.toml", "mmrun_example_plugin/__init__.py")


def mmrun_cli(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mmrun", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=60,
    )


def test_installed_as_a_distribution_with_an_entry_point() -> None:
    dist = distribution("mmrun-example-plugin")  # missing: run `make install`
    assert [(ep.name, ep.value) for ep in dist.entry_points if ep.group == "mmrun.plugins"] == [
        ("example", "mmrun_example_plugin:register")
    ]
    assert "example" in entry_points(group="mmrun.plugins").names


def test_models_lists_it_and_the_allow_list_hides_it() -> None:
    proc = mmrun_cli("models", "--json")
    assert proc.returncode == 0 and proc.stderr == ""
    rows = {row["key"]: row for row in json.loads(proc.stdout)["models"]}
    assert rows["llava-interleave"] | {"vllm_supported": None} == {
        "key": "llava-interleave",
        "modality": "image",
        "repo_id": "llava-hf/llava-interleave-qwen-0.5b-hf",
        "architecture": "LlavaForConditionalGeneration",
        "family": "mmrun_example_plugin",
        "min_items": 0,
        "max_items": None,
        "companions": [],
        "methods": ["generate", "chat"],
        "trust_remote_code": False,
        "needs_model": False,
        "requires": [],
        "vllm_supported": None,
        "vllm_last_supported": None,
        "gpus_per_replica": 1,
        "note": "from the example plugin (examples/mmrun-example-plugin)",
        "plugin": "example",
        "proof": None,
        "vllm_since": None,
        "vllm_until": None,
        "vllm_changes": [],
    }
    hidden = mmrun_cli("models", "--json", MMRUN_PLUGINS="")
    assert "llava-interleave" not in [row["key"] for row in json.loads(hidden.stdout)["models"]]


def test_dry_run_prints_its_exact_prompt(media_dir: Path) -> None:
    blue, duck = str(media_dir / "blue.png"), str(media_dir / "duck.jpg")
    proc = mmrun_cli("image", "-m", "llava-interleave", "-i", blue, "--dry-run", "--json")
    assert proc.returncode == 0, proc.stderr
    document = json.loads(proc.stdout)
    assert document["prompt"] == (
        "<|im_start|>user\n<image>\nWhat is the content of each image?<|im_end|>\n"
        "<|im_start|>assistant\n"
    )
    assert document["request"]["engine_args"] == {
        "model": "llava-hf/llava-interleave-qwen-0.5b-hf",
        "max_model_len": 16384,
        "limit_mm_per_prompt": {"image": 1, "video": 0, "audio": 0},
        "seed": 0,
    }
    two = mmrun_cli(
        "image",
        "-m",
        "llava-interleave",
        "-i",
        blue,
        "-i",
        duck,
        "-q",
        "Same?",
        "--dry-run",
        "--quiet",
    )
    assert two.returncode == 0 and two.stderr == ""
    assert (
        two.stdout == "<|im_start|>user\n<image><image>\nSame?<|im_end|>\n<|im_start|>assistant\n\n"
    )


def test_it_imports_only_the_public_api() -> None:
    source = EXAMPLE / "mmrun_example_plugin" / "__init__.py"
    imported: list[tuple[str, str]] = []
    for node in ast.walk(ast.parse(source.read_text())):
        if isinstance(node, ast.Import):
            imported += [(alias.name, "") for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            imported += [(node.module or "", alias.name) for alias in node.names]
    assert imported, "the plugin imports nothing from mmrun?"
    for module, name in imported:
        if module == "__future__":
            continue
        assert module == "mmrun" and name in mmrun.__all__, f"{module}.{name} is not public API"


def test_the_tutorial_shows_the_example_files_exactly() -> None:
    blocks = re.findall(r"```[a-z]*\n(.*?)```", TUTORIAL.read_text(), flags=re.DOTALL)
    for name in EXAMPLE_FILES:
        assert (EXAMPLE / name).read_text() in blocks, (
            f"{name} differs from docs/writing-plugins.md"
        )


def test_the_tutorial_test_snippet_passes(tmp_path: Path) -> None:
    blocks = re.findall(r"```python\n(.*?)```", TUTORIAL.read_text(), flags=re.DOTALL)
    snippet = next(block for block in blocks if "def test_" in block)
    (tmp_path / "test_llava_interleave.py").write_text(snippet)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "test_llava_interleave.py",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 passed" in proc.stdout
