"""`helpers/figures/` draws; the chapter's `Result` computes (STYLE.md: "Figures draw; results compute"). A mean,
median, standard deviation, variance or quantile taken in a figure module is a number the page shows that no
claims test can reach: it belongs in the chapter's `Result`, as a method the figure calls."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIGURES = ROOT / "helpers" / "figures"

#: the reductions a figure module may not take (as `np.<name>(...)` or a method `x.<name>(...)`)
STATISTICS = {"mean", "nanmean", "median", "nanmedian", "percentile", "nanpercentile", "quantile", "nanquantile",
              "std", "nanstd", "var", "nanvar", "average"}

#: (module, function) → why the reduction there only draws, and how many it may take
ALLOWED = {
    ("common.py", "layer_curves"): (2, "the plot type itself: the mean line and ±1 sd band of the per-trial curves it "
                                       "is handed, as seaborn's lineplot draws them; no number leaves the axes"),
    ("qk.py", "scatter_panels"): (2, "a cross marking the centroid of the points drawn in the panel, a marker"),
}
#: modules other work is moving their statistics out of at the same time: allowed until it lands
BEING_MOVED: dict[str, str] = {}


def statistics_in(source: str) -> list[tuple[str | None, int, str]]:
    """(enclosing function, line, call) for every call of a `STATISTICS` reduction in `source`."""
    found: list[tuple[str | None, int, str]] = []

    def visit(node: ast.AST, function: str | None) -> None:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            function = node.name
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in STATISTICS:
            found.append((function, node.lineno, ast.unparse(node.func)))
        for child in ast.iter_child_nodes(node):
            visit(child, function)

    visit(ast.parse(source), None)
    return found


def test_the_finder_sees_numpy_methods_and_pandas():
    planted = ("import numpy as np\n\ndef publish(res, df):\n    a = np.median(res.z)\n    b = res.x.mean(0)\n"
               "    c = df.groupby('t').std()\n    d = np.nanpercentile(res.z, 95)\n    return np.max(res.z)\n")
    assert [(f, n) for f, n, _ in statistics_in(planted)] == [("publish", 4), ("publish", 5), ("publish", 6),
                                                              ("publish", 7)]


def test_no_statistics_in_figures():
    problems, used = [], {}
    for path in sorted(FIGURES.glob("*.py")):
        if path.name in BEING_MOVED:
            continue
        for function, line, call in statistics_in(path.read_text(encoding="utf-8")):
            key = (path.name, function)
            used[key] = used.get(key, 0) + 1
            if key not in ALLOWED:
                problems.append(f"helpers/figures/{path.name}:{line} ({function}): {call}(...)")
    assert not problems, ("statistics computed in helpers/figures/ (move them to the chapter's Result as a method): "
                          + "; ".join(problems))
    over = {k: n for k, n in used.items() if k in ALLOWED and n > ALLOWED[k][0]}
    assert not over, f"more reductions than allowed (each allowed one is counted): {over}"


def test_the_allow_list_is_short_and_every_entry_is_used():
    assert len(ALLOWED) <= 3
    for (module, function), (count, why) in ALLOWED.items():
        found = [f for f, _, _ in statistics_in((FIGURES / module).read_text(encoding="utf-8")) if f == function]
        assert len(found) == count, f"{module}: {function} allowed {count}, takes {len(found)}: update ALLOWED"
        assert len(why.split()) >= 5
