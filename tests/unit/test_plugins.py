"""Third-party plugins found through a real entry point (a dist-info folder on sys.path)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

PLUGIN = """
from mmrun import LoaderContext, ModelRequest, loader

@loader("toy_vl", "image", repo_id="acme/toy-vl", architecture="LlavaForConditionalGeneration")
def toy_vl(ctx: LoaderContext) -> ModelRequest:
    return ModelRequest(prompt="USER: " + "<image>" * ctx.num_items + ctx.question + " ASSISTANT:")

def register(registry):
    registry.add(toy_vl)
"""

BROKEN = """
raise RuntimeError("boom at import")
"""

DUPLICATE = """
from mmrun.plugins import builtin_registry

def register(registry):
    registry.add(builtin_registry().get("image", "llava"))
"""


FIXTURE_PLUGINS = {"toyplugin": PLUGIN, "brokenplugin": BROKEN, "dupplugin": DUPLICATE}


@pytest.fixture
def plugin_path(tmp_path: Path) -> Path:
    """A folder with three installed-looking distributions, each with an mmrun.plugins entry point."""
    for name, source in FIXTURE_PLUGINS.items():
        (tmp_path / f"{name}.py").write_text(textwrap.dedent(source))
        info = tmp_path / f"{name}-1.0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
        (info / "entry_points.txt").write_text(f"[mmrun.plugins]\n{name} = {name}:register\n")
    return tmp_path


def _mmrun(args: list[str], plugin_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    # Only the plugins under test: others installed here (the example plugin) change the counts.
    allow = ",".join(FIXTURE_PLUGINS)
    environ = {**os.environ, "PYTHONPATH": str(plugin_path), "MMRUN_PLUGINS": allow, **env}
    return subprocess.run(
        [sys.executable, "-m", "mmrun", *args],
        capture_output=True,
        text=True,
        env=environ,
        timeout=60,
    )


def test_plugin_loader_is_listed_and_runs_dry(plugin_path: Path, media_dir: Path) -> None:
    listed = _mmrun(["models", "image", "--json"], plugin_path)
    assert listed.returncode == 0, listed.stderr
    keys = [row["key"] for row in json.loads(listed.stdout)["models"]]
    assert "toy_vl" in keys and len(keys) == 36
    run = _mmrun(
        ["image", "-m", "toy_vl", "-i", str(media_dir / "blue.png"), "--dry-run", "--json"],
        plugin_path,
    )
    assert run.returncode == 0, run.stderr
    assert (
        json.loads(run.stdout)["prompt"]
        == "USER: <image>What is the content of each image? ASSISTANT:"
    )


def test_broken_and_duplicate_plugins_are_reported_and_skipped(plugin_path: Path) -> None:
    listed = _mmrun(["models", "--json"], plugin_path)
    assert listed.returncode == 0
    assert "plugin 'brokenplugin' skipped: cannot import" in listed.stderr
    assert "plugin 'dupplugin' skipped: model key 'llava' is registered twice" in listed.stderr
    assert "Traceback" not in listed.stderr
    assert len(json.loads(listed.stdout)["models"]) == 53


def test_allow_list_restricts_plugins(plugin_path: Path) -> None:
    listed = _mmrun(["models", "--json"], plugin_path, MMRUN_PLUGINS="")
    assert listed.returncode == 0 and listed.stderr == ""
    assert "toy_vl" not in [row["key"] for row in json.loads(listed.stdout)["models"]]
    only = _mmrun(["models", "--json"], plugin_path, MMRUN_PLUGINS="toyplugin")
    assert only.stderr == "" and "toy_vl" in only.stdout
