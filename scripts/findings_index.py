"""Write the findings index, `helpers/experiments/FINDINGS-INDEX.md`: the one place to grep first for a number of
the findings page. Each finding of the book (as the committed runs give them) with its chapter section, the
`file:line` where its key is written (its `Spec` row, or the table of keys a row names), and the `file:line` of
the function that computes its effect, found by running the row's `read` on the committed results and noting the
first function of `helpers/` that returned the effect (the interval constructors of `core.stats` aside); then the
route from the row to that line, one hop per function.

    python scripts/findings_index.py            (writes the index)
    python scripts/findings_index.py --check    (exit 1 when the index is not what the code gives)

`tests/test_findings_index.py` holds the index to the code and every route to at most `MAX_HOPS` hops.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from importlib import import_module
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
INDEX = REPO / "helpers" / "experiments" / "FINDINGS-INDEX.md"
#: the most hops from a finding's row to the line that computes its effect (the row itself the first)
MAX_HOPS = 3
#: the machinery a route passes through without a hop: the table's own code, the interval constructors
PLUMBING = ("helpers/core/findings.py", "helpers/core/stats.py")
#: frames that are no hop: a row's setting called as its reader (`sts.findings.On`), comprehensions
SKIPPED = ("__call__", "<listcomp>", "<genexpr>", "<dictcomp>", "<setcomp>")


def where(code) -> str:
    """'helpers/…/file.py:line' of a function's code object."""
    return f"{Path(code.co_filename).resolve().relative_to(REPO)}:{code.co_firstlineno}"


def ours(code) -> bool:
    path = Path(code.co_filename).resolve()
    return path.is_relative_to(REPO / "helpers") and not str(path.relative_to(REPO)).startswith(PLUMBING)


def key_lines() -> dict[str, str]:
    """{finding key: 'file:line'} of the line that writes each key, as a literal, in the code that makes findings
    (`helpers/` outside `helpers/figures/`)."""
    out: dict[str, str] = {}
    for path in sorted((REPO / "helpers").rglob("*.py")):
        if "figures" in path.parts:
            continue
        for i, line in enumerate(path.read_text().splitlines(), 1):
            for key in re.findall(r'"([a-z0-9]+(?:-[a-z0-9.]+)+)"', line):
                out.setdefault(key, f"{path.relative_to(REPO)}:{i}")
    return out


def traced(read, res) -> tuple[object, list[tuple[object, list]]]:
    """What `read(res)` returns, and for each Interval a function of `helpers/` returned while it ran, that function's
    code with the chain of functions of `helpers/` that called it (outermost first): [(interval, [code, …])]."""
    from helpers.core.stats import Interval

    seen: list[tuple[object, list]] = []

    def hook(frame, event, arg):
        if event != "return" or not ours(frame.f_code) or frame.f_code.co_name in SKIPPED:
            return
        made = [arg] if isinstance(arg, Interval) else [v for v in getattr(arg, "__dict__", {}).values()
                                                        if isinstance(v, Interval)]
        if made:                      # an interval, or a record that holds one (a test's `fisher`)
            chain, f = [], frame
            while f is not None:
                if ours(f.f_code) and f.f_code.co_name not in SKIPPED:
                    chain.append(f.f_code)
                f = f.f_back
            seen.extend((iv, chain[::-1]) for iv in made)

    sys.setprofile(hook)
    try:
        got = read(res)
    finally:
        sys.setprofile(None)
    return got, seen


def route(effect, seen, read) -> list:
    """The functions from the row's `read` to the one that computed `effect` (the first to return it)."""
    for iv, chain in seen:
        if iv is effect:
            start = next((i for i, c in enumerate(chain) if c.co_name in ("readings", "<lambda>")
                          or c is getattr(read, "__code__", None)), None)
            chain = chain[start:] if start is not None else chain
            return [c for c in chain if c.co_name != "readings"]
    reader = getattr(read, "reader", read)
    return [reader.__code__] if hasattr(reader, "__code__") else []


def hop_name(code) -> str:
    """A function's name on a route: "" for a lambda written on the row itself (no hop), the function that wrote
    it for a lambda a column helper makes (`vit.findings.main`: one hop, to that helper)."""
    if code.co_name != "<lambda>":
        return code.co_name
    outer = code.co_qualname.split(".<locals>")[0]
    return "" if outer == "<lambda>" else outer


def rows() -> list[dict[str, str]]:
    """One record per finding of the book's committed runs, in the chapters' order."""
    os.environ["TOKUNI_TRAIN_MISSING"] = "0"
    sys.path.insert(0, str(REPO))
    from helpers.core.findings import Partial, Spec
    from helpers.experiments.findings import chapter_order, collect

    col = collect("book")
    found = {f.key: f for f in col.findings}
    lines = key_lines()
    out = []
    for ch in chapter_order():
        module = import_module(f"helpers.experiments.{ch}")
        table = getattr(module, "FINDINGS", None) or import_module(f"helpers.experiments.{ch}.findings").FINDINGS
        res = module.run(module.Params.resolve("book"))
        for spec in table:
            if not isinstance(spec, Spec) or not spec.when(res):
                continue
            got, seen = traced(spec.read, res) if spec.read is not None else (Partial(None), [])
            parts = [got] if isinstance(got, Partial) else list(got or [])
            for p in parts:
                key = spec.key_of(p.case)
                if key not in found:
                    continue
                hops = route(p.effect, seen, spec.read) if p.effect is not None else []
                computes = f"{where(hops[-1])} `{hops[-1].co_name}`" if hops else "— (no effect: not testable here)"
                chain = " → ".join(["row"] + [hop_name(c) for c in hops if hop_name(c)])
                out.append({"key": key, "section": found[key].section or "—", "row": lines.get(key, "?"),
                            "computes": computes, "route": chain, "hops": str(chain.count("→") + 1)})
    return out


def text(records: list[dict[str, str]]) -> str:
    head = ("# Findings index\n\nGenerated by `scripts/findings_index.py` from the code and the committed results; "
            "`tests/test_findings_index.py` fails when it is out of date. Grep a key of the findings page here: its "
            "chapter section (the label in `book/<chapter>.md`), the line that writes the key (its `Spec` row, or "
            "the table of keys a row names), and the function that computes its effect, with the route from the "
            "row to it (one hop each: the row, the reader it names, the accessor that computes).\n\n"
            "| finding | section | written at | computed by | route (hops) |\n|---|---|---|---|---|\n")
    return head + "".join(f"| `{r['key']}` | `{r['section']}` | {r['row']} | {r['computes']} | {r['route']} "
                          f"({r['hops']}) |\n" for r in records)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="compare with the committed index instead of writing it")
    args = ap.parse_args(argv)
    now = text(rows())
    if args.check:
        same = INDEX.is_file() and INDEX.read_text() == now
        print("the index is current" if same else f"{INDEX.relative_to(REPO)} is out of date: "
                                                   "python scripts/findings_index.py")
        return 0 if same else 1
    INDEX.write_text(now)
    print(f"{now.count(chr(10)) - 6} findings -> {INDEX.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
