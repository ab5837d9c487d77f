"""Dead code: every function, method, class and property of `helpers/` and `scripts/` that nothing calls.

`make test` runs it beside ruff. What counts as a caller: the package itself, `scripts/`, `tests/`, the code cells of
the chapters (`book/*.md`, read as the notebooks are) and the functions a chapter shows by name (`:pyobject:`), and
the whitelist (`scripts/dead_code_whitelist.py`: what a framework calls by name, each with its caller). Variables and
attributes are left out: a stored record's fields are read back from its JSON, not by name in the code.

    python scripts/dead_code.py            # exit 1 and one line per dead name
"""

from __future__ import annotations

import re
import sys
import tempfile
from pathlib import Path
from runpy import run_path

import vulture

ROOT = Path(__file__).resolve().parent.parent

#: what is searched for dead code, and what else may call it
CHECKED = ("helpers", "scripts")
CALLERS = ("tests", "conftest.py")
#: the kinds of unused code that fail the check
KINDS = ("function", "method", "class", "property")


def book_code(root: Path = ROOT) -> str:
    """The code cells of every chapter with a parameters cell, and the names each shows with `:pyobject:`, as one
    Python source: what the pages call."""
    sys.path.insert(0, str(ROOT))
    from helpers.machinery.notebooks import read_chapter

    parts = []
    for md in sorted((root / "book").glob("*.md")):
        text = md.read_text(encoding="utf-8")
        try:
            nb = read_chapter(md)
        except ValueError:      # a page without a parameters cell runs no code
            continue
        parts += [c.source for c in nb.cells if c.cell_type == "code"]
        parts += [name.replace(".", "\n") for name in re.findall(r"^:pyobject:\s*(\S+)", text, re.M)]
    return "\n\n".join(parts) + "\n"


def dead(root: Path = ROOT, checked: tuple[str, ...] = CHECKED) -> list[str]:
    """One line per unused function, method, class or property under `checked`, as vulture words it."""
    with tempfile.TemporaryDirectory() as tmp:
        pages = Path(tmp) / "book_cells.py"
        pages.write_text(book_code(root), encoding="utf-8")
        whitelist = root / "scripts" / "dead_code_whitelist.py"
        v = vulture.Vulture(ignore_names=sorted(run_path(str(whitelist))["CALLED_BY_NAME"]))
        v.scavenge([str(root / p) for p in (*checked, *CALLERS) if (root / p).exists()] + [str(pages)],
                   exclude=[str(whitelist)])
        items = v.get_unused_code(min_confidence=60)
    under = tuple(str(root / p) for p in checked)
    return [item.get_report().replace(str(root) + "/", "") for item in items
            if item.typ in KINDS and str(item.filename).startswith(under)]


def main() -> int:
    lines = dead()
    for line in lines:
        print(line)
    if lines:
        print(f"{len(lines)} dead: delete them, or (where a framework calls them by name) add them to "
              "scripts/dead_code_whitelist.py with their caller", file=sys.stderr)
    return 1 if lines else 0


if __name__ == "__main__":
    sys.exit(main())
