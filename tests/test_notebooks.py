"""The Colab/Binder notebooks: generated from the chapters and in step with them, and a setup cell
that does nothing inside a clone and clones + installs the book elsewhere."""

import builtins
import subprocess
import sys
from pathlib import Path
from unittest import mock

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
import make_notebooks  # noqa: E402

from helpers.book.notebooks import SETUP_TAG, colab_notebook, colab_url, notebook_path, repository  # noqa: E402

CHAPTERS = make_notebooks.chapters()


def test_there_are_chapters():
    assert len(CHAPTERS) >= 8


@pytest.mark.parametrize("md", CHAPTERS, ids=lambda p: p.stem)
def test_notebook_exists_and_is_in_step(md):
    """What the chapter's Colab link opens (notebooks/<name>.ipynb) is exactly the generated notebook:
    `make notebooks` after editing a chapter."""
    import nbformat

    nb = notebook_path(md)
    assert nb.is_file(), f"{nb.name} missing: run `make notebooks`"
    assert nb.read_text(encoding="utf-8") == nbformat.writes(colab_notebook(md)) + "\n", \
        f"{nb.name} is out of step with {md.name}: run `make notebooks`"


def test_generated_notebook_has_setup_first_and_no_outputs():
    nb = colab_notebook(CHAPTERS[0])
    assert SETUP_TAG in nb.cells[0].metadata["tags"]
    assert any("parameters" in c.metadata.get("tags", []) for c in nb.cells[1:])
    assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code")


@pytest.mark.parametrize("md", CHAPTERS, ids=lambda p: p.stem)
def test_colab_link_points_at_the_generated_notebook(md):
    """Each chapter's "Open on Colab" link names the repository and branch of _config.yml and the
    chapter's own generated notebook, which exists at that path in the repository."""
    url = colab_url(md)
    repo, branch = repository()
    assert f"[Open this chapter on Colab]({url})" in md.read_text(encoding="utf-8")
    assert repo.split("github.com/")[-1] in url and f"/blob/{branch}/notebooks/{md.stem}.ipynb" in url
    assert (ROOT / "notebooks" / f"{md.stem}.ipynb").is_file()


def test_book_build_ignores_the_notebooks():
    """The notebooks stay out of the book (book/ holds only jupytext sources); the theme's own Colab
    button is off (it would open the .md, which Colab cannot read)."""
    cfg = yaml.safe_load((ROOT / "_config.yml").read_text())
    assert "notebooks" in cfg["exclude_patterns"]
    assert "colab_url" not in cfg["launch_buttons"]
    assert not list((ROOT / "book").glob("*.ipynb"))


def _run_setup(tmp_path, helpers_importable: bool, env: dict | None = None):
    source = colab_notebook(CHAPTERS[0]).cells[0].source
    calls, real_import = [], builtins.__import__

    def fake_import(name, *a, **k):
        if name == "helpers" and not helpers_importable:
            raise ImportError(name)
        return real_import(name, *a, **k)

    with mock.patch.object(builtins, "__import__", fake_import), \
            mock.patch.object(subprocess, "run", lambda cmd, **k: calls.append(cmd)), \
            mock.patch("os.chdir", lambda d: calls.append(["chdir", d])), \
            mock.patch.dict("os.environ", env or {}, clear=False), mock.patch.object(sys, "path", list(sys.path)):
        cwd = Path.cwd()
        try:
            exec(compile(source, "setup", "exec"), {"__name__": "setup_cell"})
        finally:
            assert Path.cwd() == cwd
    return calls


def test_setup_cell_is_a_no_op_inside_the_book(tmp_path):
    assert _run_setup(tmp_path, helpers_importable=True) == []


def test_setup_cell_clones_and_installs_elsewhere(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)                   # no ../helpers here
    monkeypatch.delenv("TOKUNI_BOOK_REPO", raising=False)
    monkeypatch.delenv("TOKUNI_BOOK_BRANCH", raising=False)
    calls = _run_setup(tmp_path, helpers_importable=False)
    url, branch = repository()
    assert calls[0][:2] == ["git", "clone"] and url in calls[0] and branch in calls[0]
    assert calls[1][-2:] == ["-e", str(tmp_path / "token-uniformity-book")]
    assert calls[2][-3:] == ["--no-deps", "-r", str(tmp_path / "token-uniformity-book" / "weights.txt")]
    assert calls[3] == ["chdir", str(tmp_path / "token-uniformity-book" / "book")]


def test_setup_cell_clones_the_repository_named_by_the_environment(tmp_path, monkeypatch):
    """TOKUNI_BOOK_REPO / TOKUNI_BOOK_BRANCH (a fork, or a local clone as tests/test_fresh_notebooks.py
    uses) take precedence over the repository of _config.yml."""
    monkeypatch.chdir(tmp_path)
    fork = str(tmp_path / "my-fork")
    calls = _run_setup(tmp_path, helpers_importable=False,
                       env={"TOKUNI_BOOK_REPO": fork, "TOKUNI_BOOK_BRANCH": "dev"})
    url, branch = repository()
    assert calls[0] == ["git", "clone", "--depth", "1", "--branch", "dev", fork,
                        str(tmp_path / "token-uniformity-book")]
    assert url not in calls[0]


def test_setup_cell_is_short_and_names_its_overrides():
    """The setup cell stays readable: a few dozen lines, the fork override documented in it."""
    source = colab_notebook(CHAPTERS[0]).cells[0].source
    assert len(source.splitlines()) <= 30
    assert "TOKUNI_BOOK_REPO" in source and "TOKUNI_BOOK_BRANCH" in source
