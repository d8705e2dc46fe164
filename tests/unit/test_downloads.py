"""Downloads that cannot hurt: bounded in time, size, redirects and retries, and never a cached
file that is incomplete. Everything runs over real HTTP on 127.0.0.1.

``ScriptedServer`` (also used by test_bad_inputs.py) is a real HTTP/1.1 server whose routes
are Python functions: a route can stall, drip, lie about its length, or close mid-body.
"""

from __future__ import annotations

import hashlib
import http.server
import itertools
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from mmrun.errors import DownloadError, MediaError
from mmrun.media import download
from mmrun.media import pool as media_pool
from mmrun.media.download import Downloader, cache_path
from tests.helpers.http import (
    PNG,
    Route,
    ScriptedServer,
    partial_files,
    reply,
    trusted_files,
)


def fetch(url: str) -> Path:
    downloader = Downloader()
    try:
        return downloader.fetch(url)
    finally:
        downloader.close()


# --- success, and the cache ------------------------------------------------------------------


def test_download_lands_complete_in_the_cache_and_is_reused(
    server: ScriptedServer, isolated_cache: Path
) -> None:
    server.routes["/a.png"] = lambda h: reply(h, 200, PNG)
    path = fetch(server.url("/a.png"))
    assert path.read_bytes() == PNG and path == cache_path(server.url("/a.png"))
    assert partial_files(isolated_cache) == []
    assert fetch(server.url("/a.png")) == path
    assert server.count("/a.png") == 1


def test_stale_partial_file_of_a_killed_run_is_removed(
    server: ScriptedServer, isolated_cache: Path
) -> None:
    server.routes["/a.png"] = lambda h: reply(h, 200, PNG)
    target = cache_path(server.url("/a.png"))
    target.parent.mkdir(parents=True)
    stale = target.with_name(f".{target.name}.99999.1.part")
    stale.write_bytes(PNG[:10])
    assert fetch(server.url("/a.png")).read_bytes() == PNG
    assert not stale.exists() and partial_files(isolated_cache) == []


# --- retries: transient errors only, bounded, with backoff -----------------------------------


@pytest.mark.parametrize("status", [400, 403, 404, 410])
def test_client_errors_are_not_retried(
    server: ScriptedServer, status: int, isolated_cache: Path
) -> None:
    server.routes["/x.png"] = lambda h: reply(h, status, b"no")
    with pytest.raises(DownloadError, match=f"HTTP {status}"):
        fetch(server.url("/x.png"))
    assert server.count("/x.png") == 1
    assert trusted_files(isolated_cache) == [] and partial_files(isolated_cache) == []


@pytest.mark.parametrize("status", [429, 500, 502, 503])
def test_transient_errors_are_retried_a_bounded_number_of_times(
    server: ScriptedServer, status: int, fast_retries: None, isolated_cache: Path
) -> None:
    server.routes["/x.png"] = lambda h: reply(h, status, b"busy")
    with pytest.raises(DownloadError, match=f"HTTP {status}"):
        fetch(server.url("/x.png"))
    assert server.count("/x.png") == download.RETRIES == 3
    assert trusted_files(isolated_cache) == []


def test_retries_back_off_exponentially(
    server: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(download, "RETRY_BACKOFF_S", 0.15)
    server.routes["/x.png"] = lambda h: reply(h, 500, b"busy")
    with pytest.raises(DownloadError):
        fetch(server.url("/x.png"))
    times = [hit.at for hit in server.hits]
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert len(gaps) == 2
    assert gaps[0] >= 0.15 and gaps[1] >= 0.3  # 0.15 s, then doubled


def test_a_transient_error_then_success(server: ScriptedServer, fast_retries: None) -> None:
    def flaky(h: http.server.BaseHTTPRequestHandler) -> None:
        if server.count("/x.png") < 3:
            reply(h, 503, b"busy")
        else:
            reply(h, 200, PNG)

    server.routes["/x.png"] = flaky
    assert fetch(server.url("/x.png")).read_bytes() == PNG
    assert server.count("/x.png") == 3


# --- timeouts --------------------------------------------------------------------------------


def test_read_timeout(
    server: ScriptedServer,
    fast_retries: None,
    isolated_cache: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MMRUN_DOWNLOAD_TIMEOUT", "0.3")

    def stalls(h: http.server.BaseHTTPRequestHandler) -> None:
        h.send_response(200)
        h.send_header("Content-Length", str(len(PNG)))
        h.end_headers()
        h.wfile.write(PNG[:10])
        h.wfile.flush()
        server.stall(30)  # never sends the rest while the client waits

    server.routes["/x.png"] = stalls
    start = time.monotonic()
    with pytest.raises(DownloadError, match=r"timed out \(waiting for data\)") as info:
        fetch(server.url("/x.png"))
    assert time.monotonic() - start < 5
    assert "MMRUN_DOWNLOAD_TIMEOUT" in str(info.value)
    assert server.count("/x.png") == download.RETRIES  # a timeout is transient
    assert trusted_files(isolated_cache) == [] and partial_files(isolated_cache) == []


def test_connect_timeout(fast_retries: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """A server whose accept queue is full: the kernel drops the SYN, connect() hangs."""
    monkeypatch.setenv("MMRUN_DOWNLOAD_TIMEOUT", "0.3")
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = listener.getsockname()[1]
    fillers: list[socket.socket] = []
    try:
        for _ in range(8):  # fill the accept queue until a connect hangs
            filler = socket.socket()
            filler.settimeout(0.2)
            fillers.append(filler)
            try:
                filler.connect(("127.0.0.1", port))
            except OSError:
                break
        else:
            pytest.skip("this kernel accepts every connection; no way to make connect() hang")
        start = time.monotonic()
        with pytest.raises(DownloadError, match=r"timed out \(connecting\)"):
            fetch(f"http://127.0.0.1:{port}/x.png")
        assert time.monotonic() - start < 5
    finally:
        for filler in fillers:
            filler.close()
        listener.close()


def test_connection_refused_is_retried_then_fails(fast_retries: None) -> None:
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()  # nothing listens there now
    with pytest.raises(DownloadError, match="failed"):
        fetch(f"http://127.0.0.1:{port}/x.png")


def _trickles(server: ScriptedServer, every_s: float) -> Route:
    """A server that sends one byte of a long body just within every read timeout."""

    def route(h: http.server.BaseHTTPRequestHandler) -> None:
        h.send_response(200)
        h.send_header("Content-Length", str(1 << 20))
        h.end_headers()
        try:
            while not server.release.is_set():
                h.wfile.write(b"\0")
                h.wfile.flush()
                server.stall(every_s)
        except OSError:
            pass  # the client gave up: that is the point

    return route


def test_a_trickling_server_meets_the_overall_deadline(
    server: ScriptedServer, monkeypatch: pytest.MonkeyPatch, isolated_cache: Path
) -> None:
    monkeypatch.setenv("MMRUN_DOWNLOAD_TIMEOUT", "1")  # each byte arrives within it...
    monkeypatch.setenv("MMRUN_DOWNLOAD_DEADLINE", "2")  # ...the whole body never does
    server.routes["/slow.png"] = _trickles(server, 0.2)
    start = time.monotonic()
    with pytest.raises(DownloadError, match=r"did not finish within 2 s") as info:
        fetch(server.url("/slow.png"))
    assert time.monotonic() - start < 4
    assert "MMRUN_DOWNLOAD_DEADLINE" in str(info.value)
    assert server.count("/slow.png") == 1  # no retry past the deadline
    assert trusted_files(isolated_cache) == [] and partial_files(isolated_cache) == []


def test_retries_stop_at_the_deadline(
    server: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each try fails late; the deadline, not the number of tries, ends them."""
    monkeypatch.setenv("MMRUN_DOWNLOAD_TIMEOUT", "0.6")
    monkeypatch.setenv("MMRUN_DOWNLOAD_DEADLINE", "1")
    monkeypatch.setattr(download, "RETRY_BACKOFF_S", 0.01)

    def stalls(h: http.server.BaseHTTPRequestHandler) -> None:
        h.send_response(200)
        h.send_header("Content-Length", "10")
        h.end_headers()
        h.wfile.flush()
        server.stall(30)

    server.routes["/x.png"] = stalls
    start = time.monotonic()
    with pytest.raises(DownloadError):
        fetch(server.url("/x.png"))
    assert time.monotonic() - start < 2.5
    assert server.count("/x.png") < download.RETRIES


@pytest.mark.parametrize("name", ["MMRUN_DOWNLOAD_DEADLINE", "MMRUN_MAX_DOWNLOAD_MB"])
@pytest.mark.parametrize("value", ["soon", "0", "-5", "inf", "nan"])
def test_limits_must_be_positive_numbers(
    server: ScriptedServer, monkeypatch: pytest.MonkeyPatch, name: str, value: str
) -> None:
    monkeypatch.setenv(name, value)
    server.routes["/a.png"] = lambda h: reply(h, 200, PNG)
    with pytest.raises(MediaError, match=f"{name}=.* is not a positive number"):
        fetch(server.url("/a.png"))


# --- size cap ----------------------------------------------------------------------------------


def test_size_cap_from_content_length_stops_before_the_body(
    server: ScriptedServer, monkeypatch: pytest.MonkeyPatch, isolated_cache: Path
) -> None:
    monkeypatch.setenv("MMRUN_MAX_DOWNLOAD_MB", "0.5")
    server.routes["/big.png"] = lambda h: reply(h, 200, b"\0" * (1 << 20))
    with pytest.raises(DownloadError, match=r"larger than the 0.5 MB cap") as info:
        fetch(server.url("/big.png"))
    assert "MMRUN_MAX_DOWNLOAD_MB" in str(info.value)
    assert server.count("/big.png") == 1  # not retried
    assert trusted_files(isolated_cache) == [] and partial_files(isolated_cache) == []


@pytest.mark.parametrize("how", ["chunked", "understated"])
def test_size_cap_counts_the_bytes_themselves(
    server: ScriptedServer, how: str, monkeypatch: pytest.MonkeyPatch, isolated_cache: Path
) -> None:
    """Without a Content-Length (chunked), the cap is enforced while reading. A server that
    understates its length gets the body cut at the stated length by the HTTP parser."""
    monkeypatch.setenv("MMRUN_MAX_DOWNLOAD_MB", "1")
    body = b"\0" * (3 << 20)
    if how == "chunked":
        server.routes["/big.png"] = lambda h: reply(h, 200, body, chunked=True)
        with pytest.raises(DownloadError, match="larger than the 1 MB cap"):
            fetch(server.url("/big.png"))
    else:
        server.routes["/big.png"] = lambda h: reply(h, 200, body, length=100, close=True)
        assert fetch(server.url("/big.png")).stat().st_size == 100
    assert server.count("/big.png") == 1
    assert partial_files(isolated_cache) == []


# --- redirects -------------------------------------------------------------------------------


def test_redirects_are_followed_up_to_the_limit(server: ScriptedServer) -> None:
    hops = download.MAX_REDIRECTS
    for i in range(hops):
        server.routes[f"/r{i}"] = lambda h, i=i: reply(h, 302, headers={"Location": f"/r{i + 1}"})
    server.routes[f"/r{hops}"] = lambda h: reply(h, 200, PNG)
    assert fetch(server.url("/r0")).read_bytes() == PNG


def test_redirect_loop_is_bounded_and_not_retried(
    server: ScriptedServer, isolated_cache: Path
) -> None:
    server.routes["/loop"] = lambda h: reply(h, 302, headers={"Location": "/loop"})
    with pytest.raises(DownloadError, match="too many redirects"):
        fetch(server.url("/loop"))
    assert server.count("/loop") == download.MAX_REDIRECTS + 1
    assert trusted_files(isolated_cache) == []


@pytest.mark.parametrize("location", ["file:///etc/passwd", "ftp://127.0.0.1/x.png"])
def test_redirect_to_another_scheme_is_refused_at_once(
    server: ScriptedServer, location: str
) -> None:
    server.routes["/x.png"] = lambda h: reply(h, 302, headers={"Location": location})
    with pytest.raises(DownloadError, match="cannot fetch"):
        fetch(server.url("/x.png"))
    assert server.count("/x.png") == 1


# --- incomplete bodies -----------------------------------------------------------------------


def test_connection_closed_mid_body_leaves_no_cached_file(
    server: ScriptedServer, fast_retries: None, isolated_cache: Path
) -> None:
    server.routes["/x.png"] = lambda h: reply(h, 200, PNG[:20], length=len(PNG), close=True)
    with pytest.raises(DownloadError):
        fetch(server.url("/x.png"))
    assert server.count("/x.png") == download.RETRIES  # a cut body is worth another try
    assert trusted_files(isolated_cache) == [] and partial_files(isolated_cache) == []
    assert not cache_path(server.url("/x.png")).exists()


def test_closing_the_downloader_stops_a_dripping_download(
    server: ScriptedServer, isolated_cache: Path
) -> None:
    """What a run does on Ctrl-C or on another item's error: downloads give up at once."""

    def drips(h: http.server.BaseHTTPRequestHandler) -> None:
        h.send_response(200)
        h.send_header("Content-Length", "100000")
        h.end_headers()
        for _ in range(1000):
            if server.release.is_set():
                return
            try:
                h.wfile.write(b"x" * 100)
                h.wfile.flush()
            except OSError:
                return
            time.sleep(0.02)

    server.routes["/drip.png"] = drips
    downloader = Downloader()
    errors: list[BaseException] = []

    def run() -> None:
        try:
            downloader.fetch(server.url("/drip.png"))
        except BaseException as exc:
            errors.append(exc)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    wait_for(lambda: bool(partial_files(isolated_cache)), timeout=10)
    downloader.close()
    worker.join(timeout=3)
    assert not worker.is_alive()
    assert len(errors) == 1 and isinstance(errors[0], DownloadError)
    assert trusted_files(isolated_cache) == [] and partial_files(isolated_cache) == []


# --- processes: killed mid-download, and two at once -----------------------------------------


def mmrun_proc(url: str, cache: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "MMRUN_CACHE_DIR": str(cache), "HF_HUB_OFFLINE": "1"}
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "mmrun",
            "image",
            "-m",
            "mistral3",
            "-i",
            url,
            "--dry-run",
            "--json",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def wait_for(condition: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.02)


def test_sigkill_mid_download_leaves_nothing_a_later_run_trusts(
    server: ScriptedServer, isolated_cache: Path
) -> None:
    def half_then_stall(h: http.server.BaseHTTPRequestHandler) -> None:
        if server.count("/k.png") > 1:  # the second run: the whole file
            reply(h, 200, PNG)
            return
        h.send_response(200)
        h.send_header("Content-Length", str(len(PNG)))
        h.end_headers()
        h.wfile.write(PNG[: len(PNG) // 2])
        h.wfile.flush()
        server.stall(60)

    server.routes["/k.png"] = half_then_stall
    url = server.url("/k.png")
    first = mmrun_proc(url, isolated_cache)
    try:
        wait_for(lambda: bool(partial_files(isolated_cache)))  # the body has started
        time.sleep(0.2)
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=10)
    finally:
        if first.poll() is None:
            first.kill()
        first.communicate(timeout=30)
    assert first.returncode == -signal.SIGKILL
    assert trusted_files(isolated_cache) == []  # only the partial file and the lock are left

    second = mmrun_proc(url, isolated_cache)
    out, err = second.communicate(timeout=60)
    assert second.returncode == 0, err
    assert server.count("/k.png") == 2  # downloaded again, not trusted from the partial file
    assert json.loads(out)["media"][0]["sha256"] == hashlib.sha256(PNG).hexdigest()
    assert cache_path(url).read_bytes() == PNG
    assert partial_files(isolated_cache) == []  # the killed run's leftover is gone


def test_two_processes_fetching_one_url_make_one_request(
    server: ScriptedServer, isolated_cache: Path
) -> None:
    go = threading.Event()

    def slow(h: http.server.BaseHTTPRequestHandler) -> None:
        go.wait(30)
        reply(h, 200, PNG)

    server.routes["/shared.png"] = slow
    url = server.url("/shared.png")
    first = mmrun_proc(url, isolated_cache)
    second: subprocess.Popen[str] | None = None
    try:
        wait_for(lambda: server.count("/shared.png") == 1)
        second = mmrun_proc(url, isolated_cache)
        time.sleep(1.5)  # long enough for it to start and reach the download
        # It cannot have finished (the file is not there yet) and it made no request of its
        # own: it is waiting on the first one's lock.
        assert second.poll() is None and server.count("/shared.png") == 1
        go.set()
        results = [proc.communicate(timeout=60) for proc in (first, second)]
    finally:
        go.set()
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.communicate(timeout=30)
    assert first.returncode == 0 and second.returncode == 0, [err for _, err in results]
    digests = {json.loads(out)["media"][0]["sha256"] for out, _ in results}
    assert digests == {hashlib.sha256(PNG).hexdigest()}
    assert server.count("/shared.png") == 1
    assert partial_files(isolated_cache) == []


def test_concurrent_downloads_share_one_http_client(media_server) -> None:  # type: ignore[no-untyped-def]
    """The twelve default images start together; they must share one connection pool."""
    import httpx

    from mmrun.media import MediaResolver
    from mmrun.modalities.image import IMAGE

    built: list[object] = []
    original = httpx.Client.__init__

    def counting(self: object, *args: object, **kwargs: object) -> None:
        built.append(self)
        original(self, *args, **kwargs)  # type: ignore[arg-type]

    os.environ["MMRUN_ASSETS_BASE_URL"] = media_server.url
    try:
        httpx.Client.__init__ = counting  # type: ignore[method-assign]
        resolver = MediaResolver(IMAGE)
        futures = resolver.submit([asset.name for asset in IMAGE.assets])
        assert all(f.result().size_bytes > 0 for f in futures)
        resolver.close()
    finally:
        httpx.Client.__init__ = original  # type: ignore[method-assign]
        del os.environ["MMRUN_ASSETS_BASE_URL"]
    assert len(built) == 1
    assert len(media_server.requests) == 12


def test_the_media_pool_runs_every_job_on_a_few_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    """A run of 256 images started 256 threads before the engine could start (0.7 s on 2 busy
    cores): the pool now starts at most ``workers`` threads, and never runs more jobs at once."""
    pool = media_pool.DaemonPool(3, "test-pool")
    lock = threading.Lock()
    running, most = [0], [0]
    threads: set[str] = set()

    def job(i: int) -> int:
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
            threads.add(threading.current_thread().name)
        time.sleep(0.002)
        with lock:
            running[0] -= 1
        if i == 7:
            raise ValueError("job 7")
        return i * i

    futures = [pool.submit(job, i) for i in range(100)]
    assert [f.exception(timeout=30) is not None for f in futures].count(True) == 1
    assert [f.result() for i, f in enumerate(futures) if i != 7] == [
        i * i for i in range(100) if i != 7
    ]
    assert most[0] <= 3
    assert 1 <= len(threads) <= 3
    assert all(t.daemon for t in threading.enumerate() if t.name.startswith("test-pool"))


def test_the_media_pool_cancels_queued_jobs_and_lets_idle_threads_end(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(media_pool.DaemonPool, "IDLE_S", 0.2)
    pool = media_pool.DaemonPool(1, "test-idle")
    started, gate = threading.Event(), threading.Event()

    def hold() -> bool:
        started.set()
        return gate.wait(30)

    first = pool.submit(hold)
    # the worker must have taken the first job before the shutdown, or it is cancelled too
    assert started.wait(30)
    queued = [pool.submit(lambda: "ran") for _ in range(5)]
    pool.shutdown()
    gate.set()
    assert first.result(timeout=30) is True  # running: left to end
    assert all(f.cancelled() for f in queued)
    deadline = time.monotonic() + 10
    while any(t.name.startswith("test-idle") for t in threading.enumerate()):
        assert time.monotonic() < deadline, "an idle worker never ended"
        time.sleep(0.05)
    assert pool.submit(lambda: "again").result(timeout=30) == "again"  # a new worker
