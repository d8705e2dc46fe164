"""`mmrun report` and `mmrun compare` pages in a real browser, offline: no request but the
page's own file, no console error, the filters, the search, the paging and the audio work,
and a page of 100,000 items opens in bounded time with a bounded number of DOM nodes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import Tab
from tests.helpers.results import answer, batch_lines, media_files, write_jsonl

pytestmark = pytest.mark.browser

PAGE_SIZE = 50  # the cards the page shows at once


def mmrun(*args: str, cwd: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "mmrun", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=600,
        env={**os.environ, "NO_COLOR": "1"},
    )
    assert proc.returncode == 0, proc.stderr


@pytest.fixture(scope="module")
def run_1000(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict[str, Any]]]:
    """A report of 1,000 items: images, audio clips, failed items, some with `parsed`,
    scored with `exact` against `meta.answer`."""
    folder = tmp_path_factory.mktemp("run1000")
    pngs, wavs = media_files(folder / "media")
    rows = batch_lines(1000, pngs, wavs, folder)
    results = write_jsonl(folder / "out.jsonl", rows)
    mmrun("score", results.name, "-r", "meta.answer", "--metric", "exact", "--in-place", cwd=folder)
    mmrun("report", results.name, "-o", "report.html", cwd=folder)
    return folder / "report.html", rows


def open_page(tab: Tab, page: Path) -> tuple[float, int]:
    """Seconds until the first card is drawn, and the page's DOM element count then."""
    started = time.monotonic()
    tab.page.goto(page.as_uri())
    tab.page.wait_for_selector("article.card", timeout=120_000)
    seconds = time.monotonic() - started
    nodes: int = tab.page.evaluate("document.getElementsByTagName('*').length")
    return seconds, nodes


def shown_ids(tab: Tab) -> list[str]:
    ids: list[str] = tab.page.eval_on_selector_all(
        "article.card", "cards => cards.map(c => c.dataset.id)"
    )
    return ids


def all_pages(tab: Tab) -> list[str]:
    ids = shown_ids(tab)
    while tab.page.is_enabled("#next"):
        tab.page.click("#next")
        ids += shown_ids(tab)
    return ids


def record(artifacts: Path, name: str, figures: dict[str, float]) -> None:
    path = artifacts / "report-figures.json"
    known = json.loads(path.read_text()) if path.exists() else {}
    known[name] = figures
    path.write_text(json.dumps(known, indent=2) + "\n")
    print(name, figures)


def test_a_1000_item_report_opens_offline_without_errors(
    tab: Tab, run_1000: tuple[Path, list[dict[str, Any]]], artifacts: Path
) -> None:
    page, _ = run_1000
    seconds, nodes = open_page(tab, page)
    record(artifacts, "1000 items", {"load_s": round(seconds, 3), "dom_elements": nodes})
    assert tab.requests == [page.as_uri()] and tab.blocked == []
    assert tab.errors == []
    assert tab.page.inner_text("#count") == "1000 items"
    assert len(shown_ids(tab)) == PAGE_SIZE and nodes < 3000
    assert tab.page.locator("svg").count() >= 3  # throughput, output lengths, scores
    tab.page.screenshot(
        path=str(artifacts / "report.png"),
        full_page=True,
        clip={"x": 0, "y": 0, "width": 1280, "height": 1300},
    )


def test_the_failed_filter_shows_exactly_the_failed_ids(
    tab: Tab, run_1000: tuple[Path, list[dict[str, Any]]]
) -> None:
    page, rows = run_1000
    open_page(tab, page)
    tab.page.select_option("#status", "failed")
    failed = [r["id"] for r in rows if r["error"] is not None]
    assert tab.page.inner_text("#count") == f"{len(failed)} of 1000 items"
    assert all_pages(tab) == failed
    assert tab.page.locator("article.card .error").count() > 0


def test_search_finds_a_known_answer(tab: Tab, run_1000: tuple[Path, list[dict[str, Any]]]) -> None:
    page, _ = run_1000
    open_page(tab, page)
    tab.page.fill("#search", answer(512))
    expect(tab.page.locator("#count")).to_have_text("1 of 1000 items")
    assert shown_ids(tab) == ["item000512"]
    assert answer(512) in tab.page.inner_text("article.card .text >> nth=1")


def test_score_range_and_sorting(tab: Tab, run_1000: tuple[Path, list[dict[str, Any]]]) -> None:
    page, rows = run_1000
    open_page(tab, page)
    tab.page.fill("#smax", "0")
    tab.page.dispatch_event("#smax", "change")
    wrong = [
        r["id"] for r in rows if r["error"] is None and r["meta"]["answer"] != r["text"]
    ]  # exact is 0 exactly where the answer differs from meta.answer
    assert all_pages(tab) == wrong
    tab.page.fill("#smax", "")
    tab.page.dispatch_event("#smax", "change")
    tab.page.select_option("#sort", "len-desc")
    lengths = [len(r["text"] or "") for r in rows]
    first = shown_ids(tab)[0]
    assert len(next(r["text"] for r in rows if r["id"] == first)) == max(lengths)


def test_paging_reaches_the_last_item(
    tab: Tab, run_1000: tuple[Path, list[dict[str, Any]]]
) -> None:
    page, rows = run_1000
    open_page(tab, page)
    tab.page.click("#last")
    assert shown_ids(tab)[-1] == rows[-1]["id"]
    assert tab.page.input_value("#page") == tab.page.inner_text("#pages") == "20"
    tab.page.fill("#page", "7")
    tab.page.dispatch_event("#page", "change")
    assert shown_ids(tab)[0] == rows[6 * PAGE_SIZE]["id"]


def test_an_audio_card_has_a_playable_source(
    tab: Tab, run_1000: tuple[Path, list[dict[str, Any]]]
) -> None:
    page, _ = run_1000
    open_page(tab, page)
    audio = tab.page.locator("audio").first
    assert audio.evaluate("a => a.canPlayType('audio/ogg; codecs=vorbis')") in ("probably", "maybe")
    duration = audio.evaluate(
        """a => new Promise((done, fail) => {
            if (a.readyState >= 1) return done(a.duration);
            a.addEventListener('loadedmetadata', () => done(a.duration));
            a.addEventListener('error', () => fail(String(a.error && a.error.message)));
            a.load();
        })"""
    )
    assert duration == pytest.approx(0.5, abs=0.05)  # the tone clips are 0.5 s
    assert tab.errors == []


def test_the_compare_page_shows_both_answers(
    tab: Tab, run_1000: tuple[Path, list[dict[str, Any]]], artifacts: Path
) -> None:
    page, rows = run_1000
    folder = page.parent
    other = [
        {**r, "text": f"{r['text']} Indeed." if r["text"] and r["index"] % 2 else r["text"]}
        for r in rows
    ]
    write_jsonl(folder / "other.jsonl", other)
    mmrun("compare", "out.jsonl", "other.jsonl", "-o", "compare.html", cwd=folder)
    open_page(tab, folder / "compare.html")
    assert tab.errors == [] and tab.blocked == []
    first = tab.page.locator("article.card").first
    assert first.locator(".pair > div").count() == 2
    texts = first.locator(".pair .text").all_inner_texts()
    assert texts[1] == f"{texts[0]} Indeed."
    tab.page.screenshot(path=str(artifacts / "compare.png"))


@pytest.mark.alone
def test_a_100000_item_report_opens_in_bounded_time_and_dom(
    tab: Tab, tmp_path: Path, artifacts: Path
) -> None:
    pngs, wavs = media_files(tmp_path / "media")
    rows = batch_lines(100_000, pngs, wavs, tmp_path)
    results = write_jsonl(tmp_path / "big.jsonl", rows)
    started = time.monotonic()
    mmrun("report", str(results), "-o", "big.html", cwd=tmp_path)
    build_s = time.monotonic() - started
    seconds, nodes = open_page(tab, tmp_path / "big.html")
    clock = time.monotonic()
    tab.page.click("#last")
    last_s = time.monotonic() - clock
    assert shown_ids(tab)[-1] == "item099999"
    clock = time.monotonic()
    tab.page.fill("#search", answer(99_998))  # the first search reads every item's text
    expect(tab.page.locator("#count")).to_have_text("1 of 100000 items", timeout=60_000)
    search_s = time.monotonic() - clock
    assert shown_ids(tab) == ["item099998"]
    tab.page.fill("#search", "")
    clock = time.monotonic()
    tab.page.select_option("#status", "failed")
    failed = sum(r["error"] is not None for r in rows)
    expect(tab.page.locator("#count")).to_have_text(f"{failed} of 100000 items")
    failed_s = time.monotonic() - clock
    record(
        artifacts,
        "100000 items",
        {
            "report_command_s": round(build_s, 2),
            "page_mib": round((tmp_path / "big.html").stat().st_size / 2**20, 1),
            "load_s": round(seconds, 3),
            "dom_elements": nodes,
            "last_page_s": round(last_s, 3),
            "search_s": round(search_s, 3),
            "failed_filter_s": round(failed_s, 3),
        },
    )
    assert tab.errors == []
    assert nodes < 3000  # the page draws one page of cards, not 100,000
    assert seconds < 30
