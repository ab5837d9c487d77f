"""Reading the book's jupytext chapters as notebooks, and injecting parameters as papermill does."""

from __future__ import annotations

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
