"""The model repositories' files vendored under tests/fixtures/remote (the real remote classes
that tests/tiny/public.py puts into tiny checkpoints) say where they come from and under
which licence, and name every file they hold."""

from __future__ import annotations

from pathlib import Path

import pytest

REMOTE = Path(__file__).resolve().parents[1] / "fixtures" / "remote"
FOLDERS = sorted(p for p in REMOTE.iterdir() if p.is_dir())


def test_there_are_vendored_models() -> None:
    assert FOLDERS


@pytest.mark.parametrize("folder", FOLDERS, ids=[p.name for p in FOLDERS])
def test_each_folder_names_its_source_licence_and_files(folder: Path) -> None:
    readme = (folder / "README.md").read_text()
    assert "Source: https://github.com/" in readme
    assert "Licence: " in readme
    for path in folder.iterdir():
        if path.name != "README.md":
            assert path.name in readme, f"{folder.name}/README.md does not name {path.name}"
