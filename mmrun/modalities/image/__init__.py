"""The image modality: ``mmrun image``. Defaults follow vLLM's multi-image example."""

from __future__ import annotations

from collections.abc import Mapping
from importlib import import_module
from pathlib import Path
from typing import Any

from mmrun.modalities.image.decode import decode_image, image_from_object
from mmrun.modalities.image.resize import ImageResize
from mmrun.plugins import Register
from mmrun.registry import Asset, LoaderSpec, Modality

# vLLM's public asset bucket, where vLLM's examples fetch the default photos since Wikimedia
# rate-limited them; the Wikimedia originals (the examples' earlier URLs) remain the fallback.
VLLM_ASSETS = "https://vllm-public-assets.s3.us-west-2.amazonaws.com/multimodal_asset"
_WIKI = "https://upload.wikimedia.org/wikipedia/commons"


def _asset(name: str, mirror_name: str, wikimedia_path: str) -> Asset:
    return Asset(name, f"{VLLM_ASSETS}/{mirror_name}", mirror_name, (f"{_WIKI}/{wikimedia_path}",))


def _chat_part(image: Any, spec: LoaderSpec) -> dict[str, Any]:
    return {"type": "image_pil", "image_pil": _resized(image, spec)}


def _resized(image: Any, spec: LoaderSpec) -> Any:
    rule = spec.media_options
    if not isinstance(rule, ImageResize):
        return image
    size = smart_resize_size(
        image.width, image.height, rule.factor, rule.min_pixels, rule.max_pixels
    )
    return image if size == image.size else image.resize(size)


def _describe(info: Mapping[str, Any]) -> str:
    return f"{info['width']}x{info['height']}"


def _write_samples(folder: Path) -> list[str]:
    """Two small plain PNGs, red and green."""
    from PIL import Image

    paths = []
    for i, color in enumerate(((200, 30, 30), (30, 200, 30))):
        path = folder / f"image{i}.png"
        Image.new("RGB", (96, 64), color).save(path)
        paths.append(str(path))
    return paths


def smart_resize_size(
    width: int, height: int, factor: int, min_pixels: int, max_pixels: int
) -> tuple[int, int]:
    """Qwen-VL's resize rule: sides rounded to ``factor``, area within [min, max] pixels."""
    import math

    h = max(factor, round(height / factor) * factor)
    w = max(factor, round(width / factor) * factor)
    if h * w > max_pixels:
        beta = math.sqrt((height * width) / max_pixels)
        h = max(factor, math.floor(height / beta / factor) * factor)
        w = max(factor, math.floor(width / beta / factor) * factor)
    elif h * w < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h = math.ceil(height * beta / factor) * factor
        w = math.ceil(width * beta / factor) * factor
    return w, h


IMAGE = Modality(
    name="image",
    assets=(
        _asset("duck", "duck.jpg", "d/da/2015_Kaczka_krzy%C5%BCowka_w_wodzie_%28samiec%29.jpg"),
        _asset(
            "lion",
            "lion.jpg",
            "7/77/002_The_lion_king_Snyggve_in_the_Serengeti_National_Park_Photo_by_Giles_Laurent.jpg",
        ),
        _asset(
            "flycatcher",
            "flycatcher.jpeg",
            "2/26/Ultramarine_Flycatcher_%28Ficedula_superciliaris%29_Naggar%2C_Himachal_Pradesh%2C_2013_%28cropped%29.JPG",
        ),
        _asset(
            "somefish",
            "somefish.jpg",
            "thumb/e/e5/Anim1754_-_Flickr_-_NOAA_Photo_Library_%281%29.jpg/2560px-Anim1754_-_Flickr_-_NOAA_Photo_Library_%281%29.jpg",
        ),
        _asset(
            "starfish",
            "starfish.jpg",
            "d/d4/Starfish%2C_Caswell_Bay_-_geograph.org.uk_-_409413.jpg",
        ),
        _asset("snail", "snail.jpg", "6/69/Grapevinesnail_01.jpg"),
        _asset(
            "thistle",
            "thistle.jpg",
            "thumb/0/0b/Texas_invasive_Musk_Thistle_1.jpg/1920px-Texas_invasive_Musk_Thistle_1.jpg",
        ),
        _asset("husky", "husky.jpg", "thumb/7/7a/Huskiesatrest.jpg/2880px-Huskiesatrest.jpg"),
        _asset(
            "orangetabbycat",
            "orangetabbycat.jpg",
            "thumb/6/68/Orange_tabby_cat_sitting_on_fallen_leaves-Hisashi-01A.jpg/1920px-Orange_tabby_cat_sitting_on_fallen_leaves-Hisashi-01A.jpg",
        ),
        _asset("guineapig", "guineapig.jpg", "3/30/George_the_amazing_guinea_pig.jpg"),
        _asset(
            "rabbit",
            "rabbit.jpg",
            "thumb/1/1f/Oryctolagus_cuniculus_Rcdo.jpg/1920px-Oryctolagus_cuniculus_Rcdo.jpg",
        ),
        _asset("horsepony", "horsepony.jpg", "9/98/Horse-and-pony.jpg"),
    ),
    questions={1: "What is the content of each image?"},
    default_count=2,
    min_count=1,
    temperature=0.0,
    max_tokens=256,
    # vLLM's current example (its first version had None). vLLM 0.32's own default is 0 too, so runs do
    # not change; an explicit 0 shows in dry runs and does not depend on vLLM's default.
    seed=0,
    default_model="phi3_v",
    decode=decode_image,
    from_object=image_from_object,
    chat_part=_chat_part,
    short_option="-i",
    extensions=(".jpg", ".jpeg", ".png", ".webp", ".gif", ".bmp", ".tif", ".tiff"),
    column_names=("image", "images", "img", "picture", "photo", "jpg", "jpeg", "png", "webp"),
    feature_type="Image",
    openai_parts=("image_url",),
    to_engine=_resized,
    describe=_describe,
    write_samples=_write_samples,
    summary="Run an image-language model on images through vLLM.",
    examples=(
        "mmrun image -m qwen2_5_vl -n 4",
        "mmrun image -m idefics3 -i a.png -i b.png --dry-run --json",
        "mmrun image -m qwen2_5_vl -i 'photos/**/*.jpg' -o captions.jsonl",
    ),
)

FAMILIES = (
    "aria",
    "bagel",
    "bee",
    "blip",
    "cohere",
    "deepseek",
    "dots",
    "eagle",
    "ernie",
    "exaone",
    "gemma",
    "glm",
    "granite",
    "hunyuan",
    "hyperclova",
    "idefics",
    "intern",
    "kanana",
    "keye",
    "kimi",
    "lfm",
    "lighton",
    "llama4",
    "llava",
    "minicpm",
    "mistral",
    "molmo",
    "nemotron",
    "openvla",
    "ovis",
    "paddle",
    "pangu",
    "phi",
    "qwen",
    "rvl",
    "skywork",
    "step",
    "tarsier",
    "unlimited",
)


def register(register: Register) -> None:
    """The built-in plugin's hook, called as any third-party plugin's is."""
    register.modality(IMAGE)
    for family in FAMILIES:
        register.models(import_module(f"{__name__}.{family}"))
