"""The image modality: ``mmrun image``. Defaults follow vLLM's multi-image example."""

from __future__ import annotations

from importlib import import_module

from mmrun.registry import Asset, Modality, Registry

_WIKI = "https://upload.wikimedia.org/wikipedia/commons"

IMAGE = Modality(
    name="image",
    assets=(
        Asset(
            "duck", f"{_WIKI}/d/da/2015_Kaczka_krzy%C5%BCowka_w_wodzie_%28samiec%29.jpg", "duck.jpg"
        ),
        Asset(
            "lion",
            f"{_WIKI}/7/77/002_The_lion_king_Snyggve_in_the_Serengeti_National_Park_Photo_by_Giles_Laurent.jpg",
            "lion.jpg",
        ),
        Asset(
            "flycatcher",
            f"{_WIKI}/2/26/Ultramarine_Flycatcher_%28Ficedula_superciliaris%29_Naggar%2C_Himachal_Pradesh%2C_2013_%28cropped%29.JPG",
            "flycatcher.jpeg",
        ),
        Asset(
            "somefish",
            f"{_WIKI}/thumb/e/e5/Anim1754_-_Flickr_-_NOAA_Photo_Library_%281%29.jpg/2560px-Anim1754_-_Flickr_-_NOAA_Photo_Library_%281%29.jpg",
            "somefish.jpg",
        ),
        Asset(
            "starfish",
            f"{_WIKI}/d/d4/Starfish%2C_Caswell_Bay_-_geograph.org.uk_-_409413.jpg",
            "starfish.jpg",
        ),
        Asset("snail", f"{_WIKI}/6/69/Grapevinesnail_01.jpg", "snail.jpg"),
        Asset(
            "thistle",
            f"{_WIKI}/thumb/0/0b/Texas_invasive_Musk_Thistle_1.jpg/1920px-Texas_invasive_Musk_Thistle_1.jpg",
            "thistle.jpg",
        ),
        Asset(
            "husky", f"{_WIKI}/thumb/7/7a/Huskiesatrest.jpg/2880px-Huskiesatrest.jpg", "husky.jpg"
        ),
        Asset(
            "orangetabbycat",
            f"{_WIKI}/thumb/6/68/Orange_tabby_cat_sitting_on_fallen_leaves-Hisashi-01A.jpg/1920px-Orange_tabby_cat_sitting_on_fallen_leaves-Hisashi-01A.jpg",
            "orangetabbycat.jpg",
        ),
        Asset("guineapig", f"{_WIKI}/3/30/George_the_amazing_guinea_pig.jpg", "guineapig.jpg"),
        Asset(
            "rabbit",
            f"{_WIKI}/thumb/1/1f/Oryctolagus_cuniculus_Rcdo.jpg/1920px-Oryctolagus_cuniculus_Rcdo.jpg",
            "rabbit.jpg",
        ),
        Asset("horsepony", f"{_WIKI}/9/98/Horse-and-pony.jpg", "horsepony.jpg"),
    ),
    questions={1: "What is the content of each image?"},
    default_count=2,
    min_count=1,
    temperature=0.0,
    max_tokens=256,
    seed=None,
    default_model="phi3_v",
)

FAMILIES = (
    "aria",
    "cohere",
    "deepseek",
    "gemma",
    "glm",
    "hyperclova",
    "idefics",
    "intern",
    "keye",
    "kimi",
    "llama4",
    "llava",
    "mistral",
    "ovis",
    "phi",
    "qwen",
    "rvl",
    "step",
    "tarsier",
)


def register(registry: Registry) -> None:
    registry.add_modality(IMAGE)
    for family in FAMILIES:
        registry.add_module(import_module(f"{__name__}.{family}"))
