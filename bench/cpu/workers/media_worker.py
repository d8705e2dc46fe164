"""Figure 2, in fresh processes: the 12 default images through mmrun's MediaResolver (cold
cache, then warm) vs one after the other with urllib.request and Pillow (the seed's way).

argv[1]: a JSON file {"base_url", "cold_reps", "warm_reps", "tmp"}; argv[2]: the mode.
- "suite": in this one process, after one untimed round of each (imports, Pillow's JPEG
  plugin, an SSL context), alternate baseline and mmrun cold (a fresh cache folder each),
  then warm runs on the last cache folder. Prints one JSON line.
- "first-baseline" / "first-mmrun": one cold round in this fresh process, timed from before
  its imports (urllib.request + Pillow, or mmrun.media): what a run pays once.
"""

import time

T0 = time.perf_counter()

import json  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

CONFIG = json.loads(Path(sys.argv[1]).read_text())
BASE = CONFIG["base_url"]
TMP = Path(CONFIG["tmp"])
NAMES = [
    "duck",
    "lion",
    "flycatcher",
    "somefish",
    "starfish",
    "snail",
    "thistle",
    "husky",
    "orangetabbycat",
    "guineapig",
    "rabbit",
    "horsepony",
]
FILES = [
    "duck.jpg",
    "lion.jpg",
    "flycatcher.jpeg",
    "somefish.jpg",
    "starfish.jpg",
    "snail.jpg",
    "thistle.jpg",
    "husky.jpg",
    "orangetabbycat.jpg",
    "guineapig.jpg",
    "rabbit.jpg",
    "horsepony.jpg",
]
os.environ["MMRUN_ASSETS_BASE_URL"] = BASE


def sequential() -> None:
    """The seed's way: fetch each image, decode it, then the next."""
    import io
    import urllib.request

    from PIL import Image

    for name in FILES:
        with urllib.request.urlopen(f"{BASE}/{name}", timeout=30) as response:
            data = response.read()
        Image.open(io.BytesIO(data)).convert("RGB")


def resolve(cache: Path, shared_client: bool = False) -> None:
    """mmrun's way: submit the 12 asset names to one MediaResolver, wait for all.

    shared_client (a what-if, not what mmrun does): create the HTTP client before submitting,
    so the workers share one instead of each building its own while none exists yet.
    """
    from mmrun.media import MediaResolver
    from mmrun.modalities.image import IMAGE

    os.environ["MMRUN_CACHE_DIR"] = str(cache)
    resolver = MediaResolver(IMAGE)
    if shared_client:
        resolver.downloader._http()
    try:
        items = [f.result() for f in resolver.submit(NAMES)]
    finally:
        resolver.close()
    assert [i.source for i in items] == NAMES and all(i.info["width"] > 0 for i in items)


def requests() -> int:
    import urllib.request

    with urllib.request.urlopen(f"{BASE}/_stats", timeout=10) as response:
        return int(json.load(response)["requests"])


def timed(fn, *args, **kwargs) -> float:  # type: ignore[no-untyped-def]
    start = time.perf_counter()
    fn(*args, **kwargs)
    return time.perf_counter() - start


def clients_built(cache: Path) -> int:
    """How many httpx.Client objects one default cold resolve builds."""
    import httpx

    built = [0]
    original = httpx.Client.__init__

    def counting(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        built[0] += 1
        original(self, *args, **kwargs)

    httpx.Client.__init__ = counting
    try:
        resolve(cache)
    finally:
        httpx.Client.__init__ = original
    return built[0]


def suite() -> dict:
    import hashlib

    from mmrun.media import download, resolver
    from mmrun.modalities.image.decode import decode_image

    counter = [0]

    def fresh() -> Path:
        counter[0] += 1
        return TMP / f"suite-cache-{counter[0]}"

    sequential()
    clients = clients_built(fresh())
    default_workers = resolver.DOWNLOAD_WORKERS
    baseline, cold, cold_requests = [], [], []
    # What-ifs, run only where mmrun's code differs from them: one HTTP client built before
    # the workers start (when one resolve builds several), one worker per image (when there
    # are fewer workers than the 12 images), both; no fsync of each downloaded file.
    what_if: dict[str, list[float]] = {}
    if clients > 1:
        what_if["shared_client"] = []
    if default_workers < len(NAMES):
        what_if["12_workers"] = []
        if clients > 1:
            what_if["shared_client_12_workers"] = []
    if "os.fsync(" in Path(download.__file__).read_text():
        what_if["no_fsync"] = []  # each downloaded file is not forced to disk before use
    cache = fresh()
    for _ in range(CONFIG["cold_reps"]):
        baseline.append(timed(sequential))
        cache = fresh()
        before = requests()
        cold.append(timed(resolve, cache))
        cold_requests.append(requests() - before)
        if "shared_client" in what_if:
            what_if["shared_client"].append(timed(resolve, fresh(), shared_client=True))
        if "no_fsync" in what_if:
            fsync = download.os.fsync
            download.os.fsync = lambda fd: None
            try:
                what_if["no_fsync"].append(timed(resolve, fresh()))
            finally:
                download.os.fsync = fsync
        if "12_workers" in what_if:
            resolver.DOWNLOAD_WORKERS = len(NAMES)
            try:
                what_if["12_workers"].append(timed(resolve, fresh()))
                if "shared_client_12_workers" in what_if:
                    what_if["shared_client_12_workers"].append(
                        timed(resolve, fresh(), shared_client=True)
                    )
            finally:
                resolver.DOWNLOAD_WORKERS = default_workers
    warm, warm_requests = [], []
    for _ in range(CONFIG["warm_reps"]):
        before = requests()
        warm.append(timed(resolve, cache))
        warm_requests.append(requests() - before)

    # Where warm time goes: the same 12 cached files, one after the other, in this thread.
    files = sorted(p for p in cache.rglob("*") if p.is_file() and not p.name.startswith("."))
    start = time.perf_counter()
    blobs = [p.read_bytes() for p in files]
    for blob in blobs:
        hashlib.sha256(blob).hexdigest()
    read_hash = time.perf_counter() - start
    start = time.perf_counter()
    for blob in blobs:
        decode_image(blob, "x")
    decode = time.perf_counter() - start
    return {
        "download_workers": default_workers,
        "http_clients_built_per_cold_resolve": clients,
        "baseline_s": baseline,
        "cold_s": cold,
        "cold_requests": cold_requests,
        "what_if_cold_s": what_if,
        "warm_s": warm,
        "warm_requests": warm_requests,
        "warm_sequential_breakdown_s": {
            "read_and_sha256": read_hash,
            "decode": decode,
            "files": len(files),
            "bytes": sum(len(b) for b in blobs),
        },
    }


def main() -> None:
    mode = sys.argv[2]
    if mode == "suite":
        print(json.dumps(suite()), flush=True)
        return
    if mode == "first-baseline":
        sequential()
    else:
        resolve(TMP / f"first-cache-{os.getpid()}")
    print(json.dumps({"s": time.perf_counter() - T0}), flush=True)


if __name__ == "__main__":
    main()
