"""A checkpoint given with --model and no -m: the key its config.json's architecture names,
else the checkpoint with its own chat template (-m auto), else one line before anything
starts. The checkpoints here are folders holding a config.json alone; the installed vLLM is
a VllmInfo of the test's own, so that what it runs is the test's to say."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from mmrun import support
from mmrun.checkpoint import generic_spec, own_template_messages, parse_config
from mmrun.errors import EXIT_FAILURE, EXIT_USAGE, PluginError, UnsupportedModelError, UsageError
from mmrun.planning import RunOptions, plan
from mmrun.plugins import builtin_registry
from mmrun.registry import GENERIC_KEY, LoaderSpec
from mmrun.request import LoaderContext, Message, Prompt
from mmrun.support import VllmInfo
from mmrun.vllm_internals import REGISTRY_FILE, model_registry
from tests.helpers.cli import in_process

QWEN = "Qwen2_5_VLForConditionalGeneration"
# An architecture this test's vLLM runs as multimodal, which no mmrun key describes.
KEYLESS = "Lfm3VlForConditionalGeneration"
VLLM = VllmInfo(
    version="0.32.0",
    architectures=frozenset({QWEN, KEYLESS, "LlamaForCausalLM", "WhisperForConditionalGeneration"}),
    removed={"OldVlForConditionalGeneration": "0.10.2"},
    device="cpu",
    multimodal=frozenset({QWEN, KEYLESS, "WhisperForConditionalGeneration"}),
)


def checkpoint(folder: Path, *architectures: str, **fields: Any) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    config = {"architectures": list(architectures), **fields}
    (folder / "config.json").write_text(json.dumps(config))
    return folder


def planned(model: Path | str, key: str | None = None, **options: Any) -> Any:
    opts = RunOptions(
        modality=options.pop("modality", "image"),
        key=key,
        model=str(model),
        dry_run=True,
        sources=("a.png",),
        **options,
    )
    return plan(opts, builtin_registry(), VLLM)


@pytest.fixture
def vllm(monkeypatch: pytest.MonkeyPatch) -> None:
    """The command line sees the test's vLLM."""
    monkeypatch.setattr(support, "vllm_info", lambda: VLLM)


def cli(*args: str) -> tuple[int, str, str]:
    result = in_process(list(args))
    return result.exit_code, result.stdout, result.stderr


# --- a key matched ---------------------------------------------------------------------------


def test_the_key_of_the_checkpoints_architecture_is_used(tmp_path: Path) -> None:
    folder = checkpoint(tmp_path / "my-qwen", QWEN, model_type="qwen2_5_vl")
    the_plan = planned(folder)
    assert the_plan.spec.key == "qwen2_5_vl"
    assert the_plan.method == "generate"
    assert the_plan.model_choice == f"--model {folder} is a {QWEN}: using -m qwen2_5_vl"
    assert the_plan.engine_args["max_model_len"] == 4096  # the key's own engine arguments


def test_a_keys_own_repo_id_needs_no_config(tmp_path: Path) -> None:
    # Offline (HF_HUB_OFFLINE=1 in every test) and not cached: the repo id alone says it.
    the_plan = planned("Qwen/Qwen2.5-VL-3B-Instruct")
    assert the_plan.spec.key == "qwen2_5_vl"
    assert the_plan.model_choice == (
        "--model Qwen/Qwen2.5-VL-3B-Instruct is the checkpoint of -m qwen2_5_vl: using it"
    )


def test_a_named_key_reads_no_config(tmp_path: Path) -> None:
    # No config.json: -m says everything, as before.
    the_plan = planned(tmp_path, key="qwen2_5_vl")
    assert the_plan.spec.key == "qwen2_5_vl" and the_plan.model_choice is None


def test_the_command_line_says_which_key_on_stderr_and_in_the_dry_run(
    tmp_path: Path, media_dir: Path, vllm: None
) -> None:
    folder = checkpoint(tmp_path / "ckpt", QWEN)
    image = str(media_dir / "blue.png")
    code, out, err = cli("image", "--model", str(folder), "-i", image, "--dry-run", "--json")
    assert code == 0, err
    line = f"--model {folder} is a {QWEN}: using -m qwen2_5_vl"
    assert err.splitlines() == [f"mmrun: {line}"]
    doc = json.loads(out)
    assert doc["model"] == {
        "key": "qwen2_5_vl",
        "repo_id": "Qwen/Qwen2.5-VL-3B-Instruct",
        "model": str(folder),
        "architecture": QWEN,
        "choice": line,
    }
    quiet = ("--dry-run", "--json", "--quiet")
    code, out, err = cli("image", "--model", str(folder), "-i", image, *quiet)
    assert code == 0 and err == ""  # --quiet: nothing on stderr but an error


# --- no key: the checkpoint's own chat template ----------------------------------------------


def test_a_checkpoint_without_a_key_runs_chat_with_what_vllm_infers(tmp_path: Path) -> None:
    folder = checkpoint(tmp_path / "lfm3", KEYLESS, model_type="lfm3_vl")
    the_plan = planned(folder, count=None)
    assert the_plan.spec.key == GENERIC_KEY
    assert the_plan.spec.architecture == KEYLESS
    assert the_plan.method == "chat"
    # The model and the media per prompt; the modality's seed; nothing of a key's own.
    assert the_plan.engine_args == {
        "model": str(folder),
        "limit_mm_per_prompt": {"image": 1, "audio": 0, "video": 0},
        "seed": 0,
    }
    assert the_plan.model_choice == (
        f"no mmrun key describes --model {folder} (a {KEYLESS}): it runs with its own chat "
        "template (--method chat), engine arguments from vLLM; the closest key is lfm2_vl"
    )


def test_the_media_limit_follows_the_prompts(tmp_path: Path) -> None:
    folder = checkpoint(tmp_path / "lfm3", KEYLESS)
    opts = RunOptions(modality="image", model=str(folder), dry_run=True, sources=("a", "b", "c"))
    the_plan = plan(opts, builtin_registry(), VLLM)
    assert the_plan.engine_args["limit_mm_per_prompt"]["image"] == 3


def test_m_auto_runs_a_keyed_architecture_with_its_own_template(tmp_path: Path) -> None:
    folder = checkpoint(tmp_path / "my-qwen", QWEN)
    the_plan = planned(folder, key=GENERIC_KEY)
    assert (the_plan.spec.key, the_plan.method) == (GENERIC_KEY, "chat")
    assert "max_model_len" not in the_plan.engine_args
    assert the_plan.model_choice == (
        f"-m auto: {folder} (a {QWEN}) runs with its own chat template (--method chat), "
        "engine arguments from vLLM; mmrun's key for it is qwen2_5_vl"
    )


@pytest.mark.parametrize("modality", ["audio", "video"])
def test_m_auto_takes_each_modalitys_media(tmp_path: Path, modality: str) -> None:
    folder = checkpoint(tmp_path / "ckpt", KEYLESS)
    the_plan = planned(folder, key=GENERIC_KEY, modality=modality)
    assert the_plan.spec.modality == modality
    assert the_plan.engine_args["limit_mm_per_prompt"][modality] == 1


def test_the_prompt_is_the_checkpoints_own_template_over_the_chat_message() -> None:
    class Renderer:
        def __init__(self) -> None:
            self.calls: list[tuple[Sequence[Message], str]] = []

        def render(
            self, messages: Sequence[Message], *, source: str, chat_template: str | None = None
        ) -> str:
            self.calls.append((messages, source))
            return "rendered"

        def token_id(self, token: str) -> int:
            raise AssertionError("no token looked up")

        def eos_token_id(self) -> int:
            raise AssertionError("no token looked up")

    registry = builtin_registry()
    spec = generic_spec(registry.modality("audio"), "ckpt", KEYLESS)
    renderer = Renderer()
    prompt = spec(LoaderContext(question="Q?", num_items=2, model="ckpt", templates=renderer))
    assert prompt == Prompt(text="rendered")
    expected = [
        {
            "role": "user",
            "content": [{"type": "text", "text": "Q?"}, {"type": "audio"}, {"type": "audio"}],
        }
    ]
    assert renderer.calls == [(expected, "processor")]
    assert own_template_messages("audio", "Q?", 2) == expected
    assert spec.methods == ("chat",) and spec.engine_args == {}


def test_a_checkpoint_with_its_own_code_needs_trust_remote_code(tmp_path: Path) -> None:
    folder = checkpoint(tmp_path / "ckpt", KEYLESS, auto_map={"AutoConfig": "x.Config"})
    with pytest.raises(UsageError, match="runs Python code from the model repository"):
        planned(folder)
    the_plan = planned(folder, trust_remote_code=True)
    assert the_plan.engine_args["trust_remote_code"] is True


def test_a_replica_rebuilds_the_spec_of_a_checkpoint_without_a_key(tmp_path: Path) -> None:
    folder = checkpoint(tmp_path / "ckpt", KEYLESS)
    the_plan = planned(folder)
    rebuilt = the_plan.recipe().plan(builtin_registry(), VLLM)
    assert (rebuilt.spec.key, rebuilt.spec.architecture) == (GENERIC_KEY, KEYLESS)
    assert rebuilt.spec.methods == ("chat",) and rebuilt.engine_args == the_plan.engine_args


def test_the_dry_run_says_no_key_describes_it(tmp_path: Path, media_dir: Path, vllm: None) -> None:
    folder = checkpoint(tmp_path / "ckpt", KEYLESS, model_type="lfm3_vl")
    image = str(media_dir / "blue.png")
    code, out, err = cli("image", "--model", str(folder), "-i", image, "--dry-run", "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert (doc["model"]["key"], doc["method"]) == (GENERIC_KEY, "chat")
    assert doc["model"]["choice"].startswith(f"no mmrun key describes --model {folder}")
    assert err.splitlines() == [f"mmrun: {doc['model']['choice']}"]


# --- refused, in one line, before anything starts --------------------------------------------


def refusal(code: int, out: str, err: str) -> str:
    assert out == "" and len(err.splitlines()) == 1, err
    return err.strip()


def test_an_architecture_vllm_runs_as_text_only_is_refused(
    tmp_path: Path, media_dir: Path, vllm: None
) -> None:
    folder = checkpoint(tmp_path / "llama", "LlamaForCausalLM")
    image = str(media_dir / "blue.png")
    for extra in ((), ("-m", GENERIC_KEY)):
        code, out, err = cli("image", "--model", str(folder), "-i", image, *extra)
        assert code == EXIT_USAGE
        assert refusal(code, out, err) == (
            f"mmrun: error: --model {folder} is a LlamaForCausalLM, which the installed vLLM "
            "0.32.0 does not run as a multimodal model (it runs it as a text-only model) "
            "(choose one that takes image: `mmrun models image` lists them)"
        )


def test_an_architecture_vllm_lacks_or_removed_is_refused(tmp_path: Path) -> None:
    unknown = checkpoint(tmp_path / "new", "NewVlForConditionalGeneration")
    with pytest.raises(UnsupportedModelError, match="it does not have this architecture"):
        planned(unknown)
    old = checkpoint(tmp_path / "old", "OldVlForConditionalGeneration")
    with pytest.raises(UnsupportedModelError, match=r"vLLM 0\.10\.2 and earlier ran it") as err:
        planned(old, key=GENERIC_KEY)
    assert err.value.hint == "pip install 'vllm<=0.10.2'"


def test_without_vllm_the_dry_run_goes_on(tmp_path: Path) -> None:
    folder = checkpoint(tmp_path / "new", "NewVlForConditionalGeneration")
    opts = RunOptions(modality="image", model=str(folder), dry_run=True, sources=("a.png",))
    the_plan = plan(opts, builtin_registry(), VllmInfo(None, frozenset(), {}))
    assert the_plan.spec.key == GENERIC_KEY


def test_several_keys_of_one_architecture_are_named(
    tmp_path: Path, media_dir: Path, vllm: None
) -> None:
    folder = checkpoint(tmp_path / "my-llava", "LlavaForConditionalGeneration")
    code, out, err = cli("image", "--model", str(folder), "-i", str(media_dir / "blue.png"))
    assert code == EXIT_USAGE
    assert refusal(code, out, err) == (
        f"mmrun: error: --model {folder} is a LlavaForConditionalGeneration, which several "
        "image keys run with different prompts: llava, pixtral_hf and llava-interleave "
        "(name one with -m, or run it with its own chat template: -m auto)"
    )


def test_a_checkpoint_of_another_modality_names_its_command(tmp_path: Path) -> None:
    folder = checkpoint(tmp_path / "whisper", "WhisperForConditionalGeneration")
    with pytest.raises(UsageError) as err:
        planned(folder)
    assert str(err.value) == (
        f"--model {folder} is a WhisperForConditionalGeneration, which mmrun runs as audio "
        f"(-m whisper), not as image (run `mmrun audio --model {folder}`, or -m auto to try "
        "its own chat template on image)"
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ("-m", GENERIC_KEY),
            "-m auto runs the checkpoint that --model names (add --model ORG/NAME or a local "
            "checkpoint folder)",
        ),
        (
            ("--model", "{lfm3}", "--method", "generate"),
            "{lfm3} runs with its own chat template (--method chat): no mmrun key writes its "
            "prompt for --method generate (drop --method generate, or name a key with -m)",
        ),
        (
            ("--model", "{empty}"),
            "{empty} has no config.json, which names the model's architecture (name the "
            "model's mmrun key with -m; `mmrun models` lists them)",
        ),
        (
            ("--model", "{noarch}"),
            "config.json of {noarch} names no architecture (name the model's key with -m; "
            "`mmrun models image` lists them)",
        ),
        (
            ("--model", "{png}"),
            "--model {png} is a file, not a checkpoint folder (pass the folder that holds the "
            "checkpoint's config.json, or a Hub repo id)",
        ),
    ],
)
def test_usage_errors(
    tmp_path: Path, media_dir: Path, vllm: None, args: tuple[str, ...], message: str
) -> None:
    paths = {
        "lfm3": str(checkpoint(tmp_path / "lfm3", KEYLESS)),
        "empty": str(tmp_path),
        "noarch": str(checkpoint(tmp_path / "noarch")),
        "png": str(media_dir / "blue.png"),
    }
    args = tuple(a.format(**paths) for a in args)
    code, out, err = cli("image", *args, "-i", paths["png"], "--dry-run")
    assert code == EXIT_USAGE
    assert refusal(code, out, err) == f"mmrun: error: {message.format(**paths)}"


def test_a_hub_checkpoint_offline_and_not_cached_is_one_line(media_dir: Path, vllm: None) -> None:
    code, out, err = cli("image", "--model", "org/name", "-i", str(media_dir / "blue.png"))
    assert code == EXIT_FAILURE
    assert refusal(code, out, err) == (
        "mmrun: error: config.json of org/name is not in the Hugging Face cache (HF_HUB_OFFLINE "
        "is set and org/name is not in the Hugging Face cache: download it once with network "
        "access (`hf download org/name`), or pass --model a local folder)"
    )


def test_a_hub_checkpoint_in_the_cache_is_read_offline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The Hugging Face cache's layout: a snapshot of the repo at a commit, that ref pointing at it.
    hub = tmp_path / "hub"
    repo = hub / "models--org--lfm3"
    checkpoint(repo / "snapshots" / "abc123", KEYLESS)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("abc123")
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(hub))
    the_plan = planned("org/lfm3")
    assert (the_plan.spec.key, the_plan.spec.architecture) == (GENERIC_KEY, KEYLESS)


# --- what the pieces read ----------------------------------------------------------------------


def test_config_fields() -> None:
    config = parse_config({"architectures": [QWEN, 3], "model_type": "qwen2_5_vl", "auto_map": {}})
    assert (config.architectures, config.model_type, config.remote_code) == (
        (QWEN,),
        "qwen2_5_vl",
        False,
    )
    assert parse_config({"architectures": "x"}).architectures == ()


def test_vllms_multimodal_architectures_are_read_from_its_registry(tmp_path: Path) -> None:
    registry = tmp_path / REGISTRY_FILE
    registry.parent.mkdir(parents=True)
    registry.write_text(
        "_TEXT = {'LlamaForCausalLM': ('llama', 'Llama')}\n"
        "_MULTIMODAL_MODELS = {'LlavaForConditionalGeneration': ('llava', 'Llava')}\n"
        "_TRANSFORMERS_SUPPORTED_MODELS = {\n"
        "    'OlmoForCausalLM': ('transformers', 'TransformersForCausalLM'),\n"
        "    'Emu3ForConditionalGeneration': ('transformers', 'TransformersMultiModalForCausalLM'),\n"
        "}\n"
        "_VLLM_MODELS = {**_TEXT, **_MULTIMODAL_MODELS, **_TRANSFORMERS_SUPPORTED_MODELS}\n"
    )
    found = model_registry(tmp_path)
    assert found.multimodal == {"LlavaForConditionalGeneration", "Emu3ForConditionalGeneration"}
    info = VllmInfo("0.32.0", found.architectures, {}, "cpu", found.multimodal)
    assert info.runs_multimodal("LlamaForCausalLM") is False
    assert info.runs_multimodal("Emu3ForConditionalGeneration") is True
    assert VllmInfo("0.32.0", found.architectures, {}).runs_multimodal("X") is None


def test_no_plugin_may_register_the_auto_key() -> None:
    registry = builtin_registry().copy()
    spec = LoaderSpec(
        key=GENERIC_KEY,
        modality="image",
        repo_id="org/x",
        architecture="X",
        load=lambda ctx: Prompt(text=""),
    )
    with pytest.raises(PluginError, match="model key 'auto' is mmrun's own"):
        registry.add_loader(spec, "plugin")


def test_the_python_api_takes_auto_for_one_modality(
    tmp_path: Path, media_dir: Path, vllm: None
) -> None:
    import mmrun

    folder = str(checkpoint(tmp_path / "lfm3", KEYLESS))
    image = str(media_dir / "blue.png")
    request = mmrun.request_for(GENERIC_KEY, "Q?", image, modality="image", model=folder)
    assert (request.key, request.method) == (GENERIC_KEY, "chat")
    assert request.engine_args["limit_mm_per_prompt"]["image"] == 1
    with pytest.raises(UsageError) as err:
        mmrun.request_for(GENERIC_KEY, "Q?", image, model=folder)
    assert str(err.value) == "'auto' runs a checkpoint on one kind of media (pass modality=)"
