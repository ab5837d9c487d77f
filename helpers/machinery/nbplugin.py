"""pytest plugin: nbval over the book's jupytext chapters (`book/*.md`), executed at `ci` scale.

Loaded by the repository's `conftest.py`. Set TOKUNI_BOOK_DIR to collect chapters from another
folder (the plugin's own test does), TOKUNI_NB_SCALE to run them at another scale.

nbval only collects `.ipynb` and jupytext ships no pytest plugin, so we read each chapter with
`jupytext.read`, inject `scale = "ci"` after the cell tagged `parameters` exactly as papermill
would, and hand the notebook to nbval's collector in lax mode (a cell fails on error; outputs
are not compared). The kernel runs in the chapter's folder with the current environment.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from unittest import mock

import nbval.plugin
import pytest
from nbval.plugin import IPyNbFile

from helpers.machinery.notebooks import read_chapter, with_parameters

BOOK = Path(os.environ.get("TOKUNI_BOOK_DIR", Path(__file__).resolve().parents[2] / "book")).resolve()
NB_SCALE = os.environ.get("TOKUNI_NB_SCALE", "ci")


#: a chapter's companion page (`book/<chapter>-tables.md`: the tables a reader consults) runs the chapter's
#: experiment again; under nbval that would be a second `ci` run of it, so its cells are run instead on the
#: chapter's saved Result (`tests/test_page_keys.py`)
COMPANION_SUFFIX = "-tables"


def _is_chapter(path: Path) -> bool:
    path = path.resolve()
    if path.suffix != ".md" or BOOK not in path.parents or "_build" in path.parts:
        return False
    if path.stem.endswith(COMPANION_SUFFIX):
        return False
    head = path.read_text(encoding="utf-8")[:600]
    return head.startswith("---") and "kernelspec:" in head


class ChapterNotebook(IPyNbFile):
    """An nbval collector for one jupytext chapter."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.compare_outputs = False   # lax: errors fail, outputs are not compared

    def collect(self):
        prepared = with_parameters(read_chapter(self.fspath), {"scale": NB_SCALE})
        # nbval's collect() reads the file with nbformat.read; hand it our prepared notebook instead
        with mock.patch.object(nbval.plugin.nbformat, "read", lambda *a, **k: prepared):
            items = list(super().collect())
        yield from items


def pytest_configure(config):
    """Chapters save their Result (`res.save(p)`); the findings page reads back those this session wrote
    (`helpers.experiments.findings`) instead of running every chapter a second time."""
    os.environ.setdefault("TOKUNI_RESULTS_SINCE", str(time.time()))


def pytest_collection_modifyitems(session, config, items):
    """The findings page (`book/findings.md`) runs after every chapter, whose saved Results it reads."""
    last = [i for i in items if Path(str(i.fspath)).name == "findings.md"]
    if last:
        items[:] = [i for i in items if i not in last] + last


def pytest_collect_file(file_path: Path, parent):
    if _is_chapter(file_path):
        return ChapterNotebook.from_parent(parent, path=file_path)
    return None


@pytest.fixture(autouse=True)
def _offline_env(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")
