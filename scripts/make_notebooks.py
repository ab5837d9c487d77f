"""Generate notebooks/<chapter>.ipynb from book/<chapter>.md (the notebooks each chapter's Colab link opens)
and point those links at the repository named in _config.yml.

    python scripts/make_notebooks.py          # rewrite every chapter's notebook
    python scripts/make_notebooks.py vit qk   # only these chapters
    python scripts/make_notebooks.py --check  # exit 1 if any is out of step (tests/test_notebooks.py does this)

The notebooks are generated, never edited by hand: a setup cell, then the chapter's cells without outputs.
"""

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from helpers.book.notebooks import colab_notebook, notebook_path, update_colab_link, write_colab_notebook  # noqa: E402


def chapters() -> list[Path]:
    """The executable pages that are chapters: a page with a kernel whose name is an experiment module with
    `Params` (the findings page, which collects the chapters, has no notebook of its own)."""
    def is_chapter(p: Path) -> bool:
        module = ROOT / "helpers" / "experiments" / f"{p.stem}.py"
        return ("kernelspec:" in p.read_text(encoding="utf-8")[:600] and module.is_file()
                and "class Params(" in module.read_text(encoding="utf-8"))
    return sorted(p for p in (ROOT / "book").glob("*.md") if is_chapter(p))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="only check that the notebooks are in step")
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
        else:
            update_colab_link(md)
            print(write_colab_notebook(md).relative_to(ROOT))
    if stale:
        print("out of step (run `make notebooks`):", ", ".join(stale))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
