"""The repository speaks of the product, not of how it was built: no work sessions or rounds,
no bare issue numbers, no borrowed machines' budgets or local paths, in any tracked file.

Upstream references ("vLLM #57473", "transformers#48105", a GitHub issue URL) are facts about
the product's dependencies and stay. Data fixtures under tests/ are left alone: they are the
inputs the tests compare against, copied from elsewhere.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
THIS_FILE = Path(__file__).resolve().relative_to(ROOT).as_posix()
DATA_FIXTURES = ("tests/fixtures/", "tests/golden/requests/", "tests/golden/original_examples/")

_ORDINAL = (
    r"(?:first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|eleventh|twelfth"
    r"|thirteenth|fourteenth|fifteenth|\d+(?:st|nd|rd|th)|next|previous|earlier|later|last)"
)

# Each pattern names what it catches. "session" alone is legitimate (an HTTP session, a
# process session from setsid, pytest's test session): only a work session is caught.
PATTERNS: dict[str, re.Pattern[str]] = {
    "a numbered work session": re.compile(
        rf"\b{_ORDINAL}\s+(?:GPU\s+|CPU\s+|device\s+)?sessions?\b", re.I
    ),
    "a GPU or device session": re.compile(r"\b(?:GPU|CUDA|H200|device|work)\s+sessions?\b", re.I),
    "this session": re.compile(r"\b(?:this|that) session\b", re.I),
    "the session as a time": re.compile(
        r"\b(?:after|before|during|since|until|of|in) (?:the|each|every) session\b(?!\s*[=(.])"
        r"|\bsession's (?:\d|budget|device|machine)",
        re.I,
    ),
    "a round of work": re.compile(rf"\bround \d+\b|\b{_ORDINAL} round\b", re.I),
    "a bare issue number": re.compile(r"\bissues? #?\d+\b", re.I),
    "device time": re.compile(r"\bdevice[ -]time\b", re.I),
    "a device budget": re.compile(r"\bbudget_left|\bdevice budget\b", re.I),
    "a local path": re.compile(r"(?<![\w.])/work/|\.\./shared\b"),
    "operating notes": re.compile(r"\bRUNBOOK\b"),
}

# Names of upstream projects: an issue number right after one of them is a product fact.
_UPSTREAM = re.compile(
    r"(?:vllm|transformers|torch|pytorch|ray|huggingface|hugging face|datasets|pillow|"
    r"github\.com/[\w.-]+/[\w.-]+)\W{0,3}$",
    re.I,
)


def tracked_files() -> list[str]:
    out = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True, timeout=60
    ).stdout.decode()
    return [
        path
        for path in out.split("\0")
        if path and path != THIS_FILE and not path.startswith(DATA_FIXTURES)
    ]


def narration(text: str) -> list[tuple[int, str, str]]:
    """(line number, what, the line) for every narration pattern found in ``text``. A phrase
    wrapped onto the next line (a comment, a Markdown paragraph) counts for the line it
    starts on. The docstring of a session-scoped pytest fixture speaks of pytest's session."""
    lines = text.splitlines()
    hits = []
    for index, line in enumerate(lines):
        following = lines[index + 1].lstrip(" \t#*>-\"'") if index + 1 < len(lines) else ""
        joined = f"{line} {following}"
        for what, pattern in PATTERNS.items():
            if "session" in what and any(
                'scope="session"' in before for before in lines[max(0, index - 3) : index]
            ):
                continue
            for match in pattern.finditer(joined):
                if match.start() >= len(line):
                    break
                if what == "a bare issue number" and _UPSTREAM.search(joined[: match.start()]):
                    continue
                hits.append((index + 1, what, line.strip()[:160]))
                break
    return hits


@pytest.mark.parametrize(
    "line",
    [
        "Measured in the tenth session on the H200.",
        '(docs/performance.md, "GPU, sixth\n# session")',
        "the GPU session ran out",
        "as this session showed",
        "Device time: 1,560 s of the session's 1,800",
        "round 2: 6.50 s",
        "the third round was slower",
        "closes issue 16",
        "Issue 15's goal",
        "see the team's ../shared/notes",
        "/work/main/.venv/bin/python",
        "(see the RUNBOOK)",
        "budget_left_s: 82",
    ],
)
def test_narration_is_caught(line: str) -> None:
    assert narration(line), line


@pytest.mark.parametrize(
    "line",
    [
        "client = httpx.Client()  # one HTTP session for every download",
        "os.setsid()  # the child leads a process session of its own",
        "removes variables the test session set",
        "vLLM's bug [#57473](https://github.com/vllm-project/vllm/issues/57473)",
        "removed by transformers#48105; vLLM issue #56484 tracks it",
        "3 rounds in rotating order; the same ratio within each round",
        "round(seconds, 2)",
        "an issue with the cache",
        "requests.Session() reuses connections",
        '@pytest.fixture(scope="session")\ndef worker():\n    """A worker of this session."""',
    ],
)
def test_product_words_pass(line: str) -> None:
    assert not narration(line), narration(line)


def test_no_narration_in_tracked_files() -> None:
    found = []
    for path in tracked_files():
        try:
            text = (ROOT / path).read_text(encoding="utf-8")
        except (UnicodeDecodeError, FileNotFoundError, IsADirectoryError):
            continue  # binary files; a symlink to a folder
        found += [f"{path}:{number}: {what}: {line}" for number, what, line in narration(text)]
    assert not found, f"{len(found)} lines narrate how the project was built:\n" + "\n".join(found)
