"""The system Chromium, driven by Playwright, offline: every request that is not the page's
own file is logged and aborted, and the console's errors are collected."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = Path(os.environ.get("MMRUN_TEST_CHROMIUM", "/usr/bin/chromium"))
# Screenshots and figures of the browser tests, kept after the run (CI's artifacts).
ARTIFACTS = Path(__file__).resolve().parents[2] / "build" / "test-artifacts"


@dataclass
class Tab:
    """A page and what it did: the requests it made, its console errors and exceptions."""

    page: Any
    requests: list[str] = field(default_factory=list)
    blocked: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


@pytest.fixture(scope="session")
def chromium() -> Iterator[Any]:
    if not CHROMIUM.is_file():
        pytest.fail(
            f"{CHROMIUM} is missing: `make chromium` installs it (apt-get install chromium)"
        )
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture
def tab(chromium: Any) -> Iterator[Tab]:
    context = chromium.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    opened = Tab(page)

    def route(request_route: Any) -> None:
        url = request_route.request.url
        if url.startswith("file://"):
            request_route.continue_()
        else:
            opened.blocked.append(url)
            request_route.abort()

    context.route("**/*", route)
    page.on("request", lambda request: opened.requests.append(request.url))
    page.on("console", lambda m: m.type == "error" and opened.errors.append(m.text))
    page.on("pageerror", lambda exc: opened.errors.append(str(exc)))
    try:
        yield opened
    finally:
        context.close()


@pytest.fixture(scope="session")
def artifacts() -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS
