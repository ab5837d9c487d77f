"""Generate notebooks/<chapter>.ipynb from book/<chapter>.md (the notebooks each chapter's Colab link opens)
and point those links at the repository named in _config.yml.

    python scripts/make_notebooks.py            # run every chapter at `book` scale, rewrite its values and notebook
    python scripts/make_notebooks.py vit qk     # only these chapters
    python scripts/make_notebooks.py --no-run   # rewrite the notebooks from the committed values (text edits)
    python scripts/make_notebooks.py --check    # exit 1 if any is out of step (tests/test_notebooks.py does this)

The notebooks are generated, never edited by hand: a setup cell, then the chapter's cells without outputs,
its Markdown as plain Jupyter Markdown with the numbers of the book's committed run. Those numbers come from
running the chapter at `book` scale as the book build does (`helpers.machinery.notebooks.capture_values`: it reads
the committed results back and never trains) and are kept in notebooks/glue-values.json, so a notebook is
regenerated, and checked, from its chapter and that file alone.
"""

import argparse
import json
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from helpers.machinery.mystmd import Converter, book_index  # noqa: E402
from helpers.machinery.notebooks import (  # noqa: E402
    GLUE_VALUES,
    capture_values,
    colab_notebook,
    notebook_path,
    update_colab_link,
    write_colab_notebook,
)


def chapters() -> list[Path]:
    """The executable pages that are chapters: a page with a kernel whose name is an experiment module with
    `Params` (the findings page, which collects the chapters, has no notebook of its own)."""
    def is_chapter(p: Path) -> bool:
        experiments = ROOT / "helpers" / "experiments"
        # a chapter module, or a chapter package whose Params lives in its `params` module
        module = next((m for m in (experiments / f"{p.stem}.py", experiments / p.stem / "params.py") if m.is_file()),
                      None)
        return ("kernelspec:" in p.read_text(encoding="utf-8")[:600] and module is not None
                and "class Params(" in module.read_text(encoding="utf-8"))
    return sorted(p for p in (ROOT / "book").glob("*.md") if is_chapter(p))


def used_keys(md: Path) -> set[str]:
    """The glue keys a chapter's text prints (`{glue:text}` and the like; figures aside)."""
    import jupytext

    conv = Converter(md.stem, _AnyValue(), book_index())
    for cell in jupytext.read(str(md)).cells:
        if cell.cell_type == "markdown":
            conv.cells(cell.source)
    return conv.used


class _AnyValue(dict):
    """Values that are all there (to list the keys a text uses without them)."""
    def __contains__(self, key):
        return True

    def __getitem__(self, key):
        return "0"


def figures_shown_too_early(md: Path, drawn: dict[str, int]) -> list[str]:
    """The glued figures whose `{glue:figure}` comes before the code cell that draws them (`drawn`: name ->
    index of that code cell among the chapter's code cells), or that no cell drew."""
    import jupytext

    early, n_code = [], 0
    for cell in jupytext.read(str(md)).cells:
        if cell.cell_type == "code":
            n_code += 1
            continue
        for name in re.findall(r"^(?:`{3,}|:{3,})\{glue:figure\}\s*(\S+)", cell.source, re.M):
            if drawn.get(name, n_code) >= n_code:
                early.append(name)
    return early


def update_values(md: Path) -> float:
    """Run the chapter at `book` scale and write the values it published into GLUE_VALUES; seconds taken."""
    t = time.time()
    values, drawn, errors = capture_values(md)
    for e in errors:
        print(f"  {md.stem}: a cell raised (its values may be missing): {e[:300]}", file=sys.stderr)
    missing = sorted(used_keys(md) - set(values))
    if missing:
        raise SystemExit(f"{md.stem}: no value published at `book` scale for {', '.join(missing)}")
    early = figures_shown_too_early(md, drawn)
    if early:
        raise SystemExit(f"{md.stem}: the page shows {', '.join(early)} above the code cell that draws it: the "
                         "notebook's `figures.common.show` cell would run before it")
    data = json.loads(GLUE_VALUES.read_text(encoding="utf-8")) if GLUE_VALUES.is_file() else {}
    data[md.stem] = dict(sorted(values.items()))
    GLUE_VALUES.parent.mkdir(exist_ok=True)
    GLUE_VALUES.write_text(json.dumps(dict(sorted(data.items())), indent=1, ensure_ascii=False) + "\n",
                           encoding="utf-8")
    return time.time() - t


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="only check that the notebooks are in step")
    ap.add_argument("--no-run", action="store_true", help="use the committed values (notebooks/glue-values.json)")
    ap.add_argument("only", nargs="*", help="chapter names (default: every chapter)")
    args = ap.parse_args()
    import nbformat

    stale = []
    for md in chapters():
        if args.only and md.stem not in args.only:
            continue
        if args.check:
            nb = notebook_path(md)
            if not nb.is_file() or nb.read_text(encoding="utf-8") != nbformat.writes(colab_notebook(md)) + "\n":
                stale.append(nb.name)
            continue
        if not args.no_run:
            print(f"{md.stem}: values of the `book` run in {update_values(md):.0f} s")
        update_colab_link(md)
        print(write_colab_notebook(md).relative_to(ROOT))
    if stale:
        print("out of step (run `make notebooks`):", ", ".join(stale))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
