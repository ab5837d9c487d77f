"""The nbval-over-MyST plugin: a chapter whose cell raises must fail, one that runs must pass,
and the injected `scale` must reach the notebook."""

import os
import subprocess
import sys
from pathlib import Path

from testutil import myst_chapter

ROOT = Path(__file__).resolve().parent.parent

HEADER = myst_chapter("book")


def _run(tmp_path: Path, body: str) -> subprocess.CompletedProcess:
    book = tmp_path / "book"
    book.mkdir()
    (book / "chapter.md").write_text(HEADER + "\n```{code-cell} ipython3\n" + body + "\n```\n")
    env = {**os.environ, "TOKUNI_BOOK_DIR": str(book)}
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "helpers.machinery.nbplugin",
                           "--nbval-current-env", "-p", "no:cacheprovider", "--rootdir", str(tmp_path), str(book)],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)


def test_failing_cell_fails(tmp_path):
    r = _run(tmp_path, 'raise RuntimeError("boom")')
    assert r.returncode != 0, r.stdout
    assert "1 failed" in r.stdout


def test_passing_chapter_runs_at_ci_scale(tmp_path):
    r = _run(tmp_path, 'assert scale == "ci", scale')
    assert r.returncode == 0, r.stdout + r.stderr
    assert "passed" in r.stdout
