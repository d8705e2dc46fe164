"""The default media: where they come from, what happens when that source fails, and a cache
that never fetches the same photo twice because its source changed.

The default images come from vLLM's public asset bucket (as vLLM's current examples), with the
Wikimedia originals (the URLs of vLLM's original examples) as the fallback. Real HTTP on
127.0.0.1 stands in for both: a ScriptedServer with a ``/bucket/`` and a ``/wiki/`` route per
photo.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from mmrun.errors import DownloadError
from mmrun.media import MediaItem, MediaResolver, parse_source
from mmrun.media.download import asset_path, cache_path
from mmrun.modalities.audio import AUDIO
from mmrun.modalities.image import IMAGE, VLLM_ASSETS
from mmrun.registry import Asset, Modality
from tests.helpers import original_examples
from tests.helpers.http import PNG, ScriptedServer, png_bytes, reply, trusted_files

NAMES = ("duck", "lion")


def test_default_images_come_from_vllms_bucket_then_wikimedia() -> None:
    example_urls = original_examples.load_example(original_examples.IMAGE_EXAMPLE)["IMAGE_URLS"]
    assert [a.url for a in IMAGE.assets] == [f"{VLLM_ASSETS}/{a.mirror_name}" for a in IMAGE.assets]
    assert [a.fallbacks for a in IMAGE.assets] == [(url,) for url in example_urls]
    assert all(a.url.startswith(VLLM_ASSETS) and not a.fallbacks for a in AUDIO.assets)


def test_a_mirror_replaces_every_source_and_keeps_the_cache_key(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MMRUN_ASSETS_BASE_URL", "http://mirror.test/files/")
    source = parse_source("flycatcher", IMAGE)
    assert (source.location, source.fallbacks) == ("http://mirror.test/files/flycatcher.jpeg", ())
    assert source.cache_name == "flycatcher.jpeg"
    monkeypatch.delenv("MMRUN_ASSETS_BASE_URL")
    assert parse_source("flycatcher", IMAGE).cache_name == "flycatcher.jpeg"


def _photos() -> dict[str, bytes]:
    return {name: png_bytes(40 + 8 * i, 30) for i, name in enumerate(NAMES)}


def _modality(server: ScriptedServer) -> Modality:
    """The image modality with its first photos served by the local stand-ins."""
    assets = tuple(
        Asset(n, server.url(f"/bucket/{n}.png"), f"{n}.png", (server.url(f"/wiki/{n}.png"),))
        for n in NAMES
    )
    return dataclasses.replace(IMAGE, assets=assets)


def _serve(server: ScriptedServer, where: str, status: int = 200) -> None:
    for name, body in _photos().items():
        server.routes[f"/{where}/{name}.png"] = lambda h, b=body: reply(  # type: ignore[misc]
            h, status, b if status == 200 else b"nope"
        )


@pytest.fixture
def resolve(server: ScriptedServer) -> Iterator[Callable[[], list[MediaItem]]]:
    resolvers: list[MediaResolver] = []

    def run() -> list[MediaItem]:
        resolver = MediaResolver(_modality(server))
        resolvers.append(resolver)
        return [f.result() for f in resolver.submit(list(NAMES))]

    yield run
    for resolver in resolvers:
        resolver.close()


def _check(items: list[MediaItem]) -> None:
    photos = _photos()
    for name, item in zip(NAMES, items, strict=True):
        assert Path(item.path or "").read_bytes() == photos[name]
        assert Path(item.path or "") == asset_path(f"{name}.png")


def test_the_bucket_answers_first(
    server: ScriptedServer, resolve: Callable[[], list[MediaItem]]
) -> None:
    _serve(server, "bucket")
    _serve(server, "wiki")
    _check(resolve())
    assert sorted(h.path for h in server.hits) == ["/bucket/duck.png", "/bucket/lion.png"]


@pytest.mark.parametrize("status", [404, 403, 503])
def test_a_failing_bucket_falls_back_to_wikimedia(
    server: ScriptedServer,
    resolve: Callable[[], list[MediaItem]],
    status: int,
    fast_retries: None,
) -> None:
    _serve(server, "bucket", status)
    _serve(server, "wiki")
    _check(resolve())
    assert server.count("/wiki/duck.png") == server.count("/wiki/lion.png") == 1


def test_an_unreachable_bucket_falls_back_to_wikimedia(
    server: ScriptedServer, fast_retries: None
) -> None:
    _serve(server, "wiki")
    closed = ScriptedServer()
    dead = closed.url("/bucket/duck.png")
    closed.close()  # nothing listens there any more: connection refused
    modality = dataclasses.replace(
        IMAGE, assets=(Asset("duck", dead, "duck.png", (server.url("/wiki/duck.png"),)),)
    )
    resolver = MediaResolver(modality)
    try:
        (item,) = [f.result() for f in resolver.submit(["duck"])]
    finally:
        resolver.close()
    assert Path(item.path or "").read_bytes() == _photos()["duck"]


def test_a_warm_cache_makes_no_request_whichever_source_filled_it(
    server: ScriptedServer, resolve: Callable[[], list[MediaItem]], fast_retries: None
) -> None:
    _serve(server, "bucket", 404)  # first run: only the fallback answers
    _serve(server, "wiki")
    _check(resolve())
    server.hits.clear()
    _serve(server, "bucket")  # the bucket is back: the cached photos are still the ones used
    _check(resolve())
    assert server.hits == []


def test_a_cache_keyed_by_url_still_serves(
    server: ScriptedServer, resolve: Callable[[], list[MediaItem]], isolated_cache: Path
) -> None:
    """Caches written before assets were keyed by name hold them under their (then) URL."""
    photos = _photos()
    for name in NAMES:
        old = cache_path(server.url(f"/wiki/{name}.png"))
        old.parent.mkdir(parents=True)
        old.write_bytes(photos[name])
    items = resolve()
    assert server.hits == []
    assert [Path(i.path or "").read_bytes() for i in items] == [photos[n] for n in NAMES]


def test_both_sources_failing_names_both(
    server: ScriptedServer, resolve: Callable[[], list[MediaItem]], isolated_cache: Path
) -> None:
    _serve(server, "bucket", 404)
    _serve(server, "wiki", 404)
    with pytest.raises(DownloadError) as caught:
        resolve()
    message = str(caught.value)
    assert "HTTP 404" in message and "/bucket/" in message and "fallback" in message
    assert "/wiki/" in message
    assert trusted_files(isolated_cache) == []


def test_a_mirror_download_serves_the_default_source_later(
    server: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A photo fetched from MMRUN_ASSETS_BASE_URL is the same photo: not fetched again."""
    server.routes["/mirror/duck.jpg"] = lambda h: reply(h, 200, PNG)
    monkeypatch.setenv("MMRUN_ASSETS_BASE_URL", server.url("/mirror"))
    for _ in range(2):
        resolver = MediaResolver(IMAGE)
        try:
            (item,) = [f.result() for f in resolver.submit(["duck"])]
        finally:
            resolver.close()
        monkeypatch.delenv("MMRUN_ASSETS_BASE_URL", raising=False)  # now the bucket's URL
    assert Path(item.path or "") == asset_path("duck.jpg")
    assert server.count("/mirror/duck.jpg") == 1
