from __future__ import annotations

import pytest

from mmrun.errors import PluginError, UnknownModelError
from mmrun.plugins import builtin_registry
from mmrun.registry import Registry, loader
from mmrun.request import LoaderContext, Prompt


@loader("toy", "image", repo_id="acme/toy", architecture="ToyForCausalLM")
def toy(ctx: LoaderContext) -> Prompt:
    return Prompt(text=f"<image>{ctx.question}")


def test_builtin_registry_has_every_key_of_vllms_examples_once() -> None:
    registry = builtin_registry()
    # The 35 image keys of vLLM's original multi-image example, the 12 that its examples of
    # 0.33 and 0.34 added and the 29 that only their single-image and video example has; the
    # 17 of its original audio example and 0.34's ming_v3_asr; 26 video.
    assert len(list(registry.specs("image"))) == 76
    assert len(list(registry.specs("audio"))) == 18
    assert len(list(registry.specs("video"))) == 26


def test_duplicate_key_is_an_error() -> None:
    registry = builtin_registry()
    with pytest.raises(PluginError, match="registered twice"):
        registry.registrar("again").model(registry.get("image", "llava"))


def test_unknown_modality_is_an_error() -> None:
    with pytest.raises(PluginError, match="unknown modality"):
        Registry().registrar("toy").model(toy)


def test_anything_else_registered_is_an_error() -> None:
    register = builtin_registry().registrar("odd")
    with pytest.raises(PluginError, match=r"register.model\(\) was given 'str'"):
        register.model("qwen2_vl")  # type: ignore[arg-type]
    with pytest.raises(PluginError, match=r"register.modality\(\) was given 'LoaderSpec'"):
        register.modality(toy)  # type: ignore[arg-type]


def test_each_plugin_s_registrations_are_recorded() -> None:
    registry = builtin_registry()
    assert registry.origins["mmrun.modalities.image"][0] == "image"
    assert "image/qwen2_5_vl" in registry.origins["mmrun.modalities.image"]
    assert registry.origins["mmrun.modalities.video"][:2] == ["video", "video/ernie45_vl"]
    assert registry.plugin_of(registry.get("audio", "whisper")) == "mmrun.modalities.audio"


def test_engine_args_are_declared_data_and_each_run_gets_its_own_copy() -> None:
    from mmrun.planning import compose_engine_args

    spec = builtin_registry().get("image", "idefics3")
    assert spec.engine_args["mm_processor_kwargs"] == {"size": {"longest_edge": 728}}
    args = compose_engine_args(spec, model="m", num_items=2, seed=None)
    args["mm_processor_kwargs"]["size"]["longest_edge"] = 1
    assert spec.engine_args["mm_processor_kwargs"] == {"size": {"longest_edge": 728}}


def test_unknown_key_suggests_close_match() -> None:
    registry = builtin_registry()
    with pytest.raises(UnknownModelError) as info:
        registry.get("image", "qwen25_vl")
    assert "did you mean 'qwen2_5_vl'" in str(info.value)


def test_key_of_other_modality_names_the_right_command() -> None:
    registry = builtin_registry()
    with pytest.raises(UnknownModelError) as info:
        registry.get("image", "whisper")
    assert "mmrun audio -m whisper" in str(info.value)


def test_unrelated_key_points_to_models_list() -> None:
    with pytest.raises(UnknownModelError) as info:
        builtin_registry().get("audio", "zzzzzz")
    assert "mmrun models audio" in str(info.value)


def test_loader_decorator_records_spec() -> None:
    assert toy.key == "toy" and toy.family == "test_registry"
    assert toy.methods == ("generate", "chat") and toy.max_items is None
    assert toy(LoaderContext("Q", 1, "m", templates=None)).text == "<image>Q"  # type: ignore[arg-type]


def test_modality_question_by_count() -> None:
    audio = builtin_registry().modalities["audio"]
    assert audio.question(0) == "What is 1+1?"
    assert audio.question(1) == "What is recited in the audio?"
    assert audio.question(5) == "What sport and what nursery rhyme are referenced?"


def test_importing_registry_and_listing_is_light() -> None:
    import subprocess
    import sys

    code = (
        "import sys; from mmrun.plugins import get_registry; r = get_registry();"
        "list(r.specs()); heavy = [m for m in ('vllm','torch','transformers','numpy','PIL') if m in sys.modules];"
        "print(heavy)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == "[]"
