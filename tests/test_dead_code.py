"""The dead-code check `make test` runs beside ruff (scripts/dead_code.py): it finds a function nothing calls, and
counts as callers the package, the tests, a chapter's code cells and its `:pyobject:` listings, and the whitelist."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
from testutil import myst_chapter

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

import dead_code  # noqa: E402

CHAPTER = myst_chapter("ci") + """
```{code-cell} ipython3
from helpers import toy

toy.called_by_the_page()
```

```{literalinclude} ../helpers/toy.py
:pyobject: Shown.listed
```
"""

TOY = '''
def called_by_the_page():
    return helper_called_inside()


def helper_called_inside():
    return 1


def called_by_a_test():
    return 2


def nobody_calls_me():
    return 3


def pytest_configure(config):
    return config


class Shown:
    def listed(self):
        return 4

    def forgotten(self):
        return 5
'''


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    for d in ("helpers", "scripts", "tests", "book"):
        (tmp_path / d).mkdir()
    (tmp_path / "helpers" / "toy.py").write_text(TOY)
    (tmp_path / "tests" / "test_toy.py").write_text("from helpers import toy\n\n\ndef test_toy():\n"
                                                   "    assert toy.called_by_a_test() == 2\n")
    (tmp_path / "book" / "chapter.md").write_text(CHAPTER)
    shutil.copy(ROOT / "scripts" / "dead_code_whitelist.py", tmp_path / "scripts")
    return tmp_path


def test_finds_what_nothing_calls(tree: Path):
    found = dead_code.dead(tree)
    names = sorted(line.split("'")[1] for line in found)
    # the page's call, the call inside the package, the test's call, the listed method and the whitelisted pytest
    # hook all count; the two nobody calls do not
    assert names == ["forgotten", "nobody_calls_me"], found
    assert all(line.startswith("helpers/toy.py:") for line in found)


def test_the_pages_are_callers(tree: Path):
    (tree / "book" / "chapter.md").write_text(CHAPTER.replace("toy.called_by_the_page()", "pass"))
    names = {line.split("'")[1] for line in dead_code.dead(tree)}
    assert "called_by_the_page" in names


def test_the_whitelist_names_its_callers():
    from runpy import run_path

    names = run_path(str(ROOT / "scripts" / "dead_code_whitelist.py"))["CALLED_BY_NAME"]
    assert 0 < len(names) <= 10
    assert all(len(why.split()) >= 4 for why in names.values())
