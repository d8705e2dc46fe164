"""Third-party plugins found through a real entry point (a dist-info folder on sys.path): a
model plugin, a modality plugin (a new command, its own decoding and its own chat parts),
broken ones, and the listing of what each registered."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

PLUGIN = """
from mmrun import LoaderContext, Prompt, Register, loader

@loader("toy_vl", "image", repo_id="acme/toy-vl", architecture="LlavaForConditionalGeneration")
def toy_vl(ctx: LoaderContext) -> Prompt:
    return Prompt(text="USER: " + "<image>" * ctx.num_items + ctx.question + " ASSISTANT:")

def register(register: Register) -> None:
    register.model(toy_vl)
"""

# A modality of its own: thermal camera frames written as text (rows of temperatures), shown
# to a vision-language model as grey images. It owns its command (`mmrun thermal -t FILE`),
# its decoding, its check of each frame against the model, its chat part, and what vLLM
# receives (an image).
MODALITY_PLUGIN = """
from mmrun import LoaderContext, MediaError, Modality, Prompt, Register, chatml, loader


def decode(data, label):
    from PIL import Image

    try:
        rows = [[float(v) for v in line.split(",")] for line in data.decode().splitlines() if line]
    except ValueError as exc:
        raise MediaError(f"{label} is not a thermal frame ({exc})", hint="rows of numbers") from exc
    low = min(min(r) for r in rows)
    high = max(max(r) for r in rows)
    image = Image.new("L", (len(rows[0]), len(rows)))
    image.putdata([int(255 * (v - low) / ((high - low) or 1)) for r in rows for v in r])
    return image.convert("RGB"), {"width": len(rows[0]), "height": len(rows), "max_c": high}


# Each frame against the model: no hotter than what the model was calibrated for.
def calibrated_range(spec):
    limit = (spec.media_options or {}).get("max_c")
    if limit is None:
        return None

    def check(source, info):
        if info["max_c"] > limit:
            return f"{source} reads {info['max_c']} C; {spec.key} knows frames up to {limit} C"
        return None

    return check


THERMAL = Modality(
    name="thermal",
    assets=(),
    questions={1: "Where is the hottest spot?"},
    default_count=1,
    min_count=1,
    temperature=0.0,
    max_tokens=32,
    seed=None,
    default_model="toy_thermal",
    decode=decode,
    chat_part=lambda image, spec: {"type": "image_pil", "image_pil": image},
    short_option="-t",
    extensions=(".thermal",),
    describe=lambda info: f"{info['width']}x{info['height']}, max {info['max_c']} C",
    item_check=calibrated_range,
    summary="Run a model on thermal camera frames.",
    vllm_modality="image",
)


@loader(
    "toy_thermal",
    "thermal",
    repo_id="acme/thermal-vl",
    architecture="Mistral3ForConditionalGeneration",
    media_options={"max_c": 100.0},
)
def toy_thermal(ctx: LoaderContext) -> Prompt:
    return Prompt(text=chatml("[IMG]" * ctx.num_items + ctx.question))


def register(register: Register) -> None:
    register.modality(THERMAL)
    register.model(toy_thermal)
"""

BROKEN = """
raise RuntimeError("boom at import")
"""

DUPLICATE = """
from mmrun.plugins import builtin_registry

def register(register):
    register.model(builtin_registry().get("image", "llava"))
"""


FIXTURE_PLUGINS = {
    "toyplugin": PLUGIN,
    "thermalplugin": MODALITY_PLUGIN,
    "brokenplugin": BROKEN,
    "dupplugin": DUPLICATE,
}


@pytest.fixture
def plugin_path(tmp_path: Path) -> Path:
    """A folder of installed-looking distributions, each with an mmrun.plugins entry point."""
    for name, source in FIXTURE_PLUGINS.items():
        (tmp_path / f"{name}.py").write_text(textwrap.dedent(source))
        info = tmp_path / f"{name}-1.0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
        (info / "entry_points.txt").write_text(f"[mmrun.plugins]\n{name} = {name}:register\n")
    return tmp_path


def _mmrun(
    args: list[str], plugin_path: Path, *extra_path: str, **env: str
) -> subprocess.CompletedProcess[str]:
    # Only the plugins under test: others installed here (the example plugin) change the counts.
    allow = ",".join(FIXTURE_PLUGINS)
    path = os.pathsep.join([*extra_path, str(plugin_path)])
    environ = {**os.environ, "PYTHONPATH": path, "MMRUN_PLUGINS": allow, **env}
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
    rows = {row["key"]: row for row in json.loads(listed.stdout)["models"]}
    assert rows["toy_vl"]["plugin"] == "toyplugin" and len(rows) == 77  # 76 built-in + toy_vl
    assert rows["llava"]["plugin"] == "mmrun.modalities.image"
    run = _mmrun(
        ["image", "-m", "toy_vl", "-i", str(media_dir / "blue.png"), "--dry-run", "--json"],
        plugin_path,
    )
    assert run.returncode == 0, run.stderr
    assert (
        json.loads(run.stdout)["prompt"]
        == "USER: <image>What is the content of each image? ASSISTANT:"
    )


@pytest.fixture
def frames(tmp_path: Path) -> Path:
    folder = tmp_path / "frames"
    folder.mkdir()
    for i in range(3):
        (folder / f"f{i}.thermal").write_text("20,21,22,23\n20,35.5,22,23\n19,20,21,22\n")
    return folder


def test_a_modality_plugin_adds_its_command_and_runs_through_the_engine(
    plugin_path: Path, frames: Path, fake_vllm_env: dict[str, str]
) -> None:
    helped = _mmrun(["--help"], plugin_path)
    assert "thermal" in helped.stdout and "Run a model on thermal camera frames." in helped.stdout
    command_help = _mmrun(["thermal", "--help"], plugin_path)
    assert "--thermal" in command_help.stdout and "-t" in command_help.stdout
    dry = _mmrun(["thermal", "-t", str(frames / "f0.thermal"), "--dry-run", "--json"], plugin_path)
    assert dry.returncode == 0, dry.stderr
    doc = json.loads(dry.stdout)
    assert doc["media"][0]["max_c"] == 35.5 and doc["media"][0]["width"] == 4
    assert doc["request"]["engine_args"]["limit_mm_per_prompt"] == {
        "image": 1,
        "video": 0,
        "audio": 0,
    }
    # Through the stand-in engine: a batch over a folder of the modality's own files.
    run = _mmrun(
        ["thermal", "-t", str(frames), "--json"],
        plugin_path,
        fake_vllm_env["PYTHONPATH"],
        HF_HUB_OFFLINE="1",
    )
    assert run.returncode == 0, run.stderr
    rows = [json.loads(line) for line in run.stdout.splitlines()]
    assert len(rows) == 3 and all(r["error"] is None for r in rows), run.stderr
    assert all(r["prompt_tokens"] == 11 for r in rows)  # the stand-in counts one image each
    bad = frames / "bad.thermal"
    bad.write_text("hot,cold\n")
    refused = _mmrun(
        ["thermal", "-t", str(bad), "--dry-run"], plugin_path, MMRUN_PLUGINS="thermalplugin"
    )
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1
    assert "is not a thermal frame" in refused.stderr


def test_a_modality_plugin_checks_each_item_against_the_model(
    plugin_path: Path, frames: Path, fake_vllm_env: dict[str, str]
) -> None:
    """The plugin's item check (a frame hotter than the model's media_options allow) runs
    where the built-in audio length check runs: before the engine for named media, and as
    the item's own error line in a batch."""
    hot = frames / "f1.thermal"
    hot.write_text("20,21\n20,150.5\n")
    refused = _mmrun(
        ["thermal", "-t", str(hot), "--dry-run"], plugin_path, MMRUN_PLUGINS="thermalplugin"
    )
    assert refused.returncode == 2, refused.stderr
    assert refused.stderr.count("\n") == 1
    assert "reads 150.5 C; toy_thermal knows frames up to 100.0 C" in refused.stderr
    run = _mmrun(
        ["thermal", "-t", str(frames), "--json"],
        plugin_path,
        fake_vllm_env["PYTHONPATH"],
        HF_HUB_OFFLINE="1",
    )
    assert run.returncode == 3, run.stderr  # a batch with a failed item
    rows = {Path(r["media"][0]).name: r for r in map(json.loads, run.stdout.splitlines())}
    assert rows["f1.thermal"]["error"]["stage"] == "media"
    assert "knows frames up to 100.0 C" in rows["f1.thermal"]["error"]["message"]
    assert rows["f0.thermal"]["error"] is None and rows["f2.thermal"]["error"] is None


def test_plugins_lists_what_each_plugin_registered(plugin_path: Path) -> None:
    listed = _mmrun(["plugins", "--json"], plugin_path)
    assert listed.returncode == 0
    rows = {row["plugin"]: row for row in json.loads(listed.stdout)["plugins"]}
    assert rows["thermalplugin"] == {
        "plugin": "thermalplugin",
        "builtin": False,
        "modalities": ["thermal"],
        "models": ["thermal/toy_thermal"],
    }
    assert rows["toyplugin"]["models"] == ["image/toy_vl"]
    assert rows["mmrun.modalities.video"]["builtin"] is True
    assert "brokenplugin" not in rows and "dupplugin" not in rows
    table = _mmrun(["plugins"], plugin_path, COLUMNS="200")
    assert "thermalplugin" in table.stdout and "mmrun.modalities.audio (built-in)" in table.stdout


def test_broken_and_duplicate_plugins_are_reported_and_skipped(plugin_path: Path) -> None:
    listed = _mmrun(["models", "--json"], plugin_path)
    assert listed.returncode == 0
    assert "plugin 'brokenplugin' skipped: cannot import" in listed.stderr
    assert "plugin 'dupplugin' skipped: model key 'llava' is registered twice" in listed.stderr
    assert "Traceback" not in listed.stderr
    assert len(json.loads(listed.stdout)["models"]) == 122  # 120 built-in + toy_vl + toy_thermal


def test_allow_list_restricts_plugins(plugin_path: Path) -> None:
    listed = _mmrun(["models", "--json"], plugin_path, MMRUN_PLUGINS="")
    assert listed.returncode == 0 and listed.stderr == ""
    assert "toy_vl" not in [row["key"] for row in json.loads(listed.stdout)["models"]]
    only = _mmrun(["models", "--json"], plugin_path, MMRUN_PLUGINS="toyplugin")
    assert only.stderr == "" and "toy_vl" in only.stdout


def test_the_tutorial_shows_the_modality_plugin_exactly() -> None:
    docs = Path(__file__).resolve().parents[2] / "docs" / "writing-plugins.md"
    assert textwrap.dedent(MODALITY_PLUGIN).strip() in docs.read_text()
