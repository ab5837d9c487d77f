"""The findings page: every finding of the book in one table, the verdicts counted per paper, a forest
figure of the effects that have intervals, and what needs a GPU or the hub. Draws and formats only: the
findings (numbers and verdicts) come from `helpers.experiments.findings.collect`."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd

from ..core.findings import PAPERS, VERDICTS
from ..experiments.findings import Collected
from . import common


def table(col: Collected):
    """Every finding: verdict, paper and where, the claim, the effect with its interval against its
    reference, what was measured at which scale, and a link to the chapter section that shows it."""
    df = common.findings_frame(col.findings)
    if df.empty:
        return df
    df["where"] = df["paper"] + ", " + df["where"]
    df = df[["verdict", "claim", "where", "effect", "reference", "measured", "chapter"]]
    return (df.style.hide(axis="index")
            .set_table_attributes('class="findings-table"')
            .set_properties(subset=["claim"], **{"min-width": "18em"})
            .set_properties(subset=["effect"], **{"min-width": "14em"})
            .set_properties(subset=["measured"], **{"min-width": "12em", "font-size": "85%"}))


def counts(col: Collected):
    """Verdicts counted per paper: a row per verdict, a column per paper and one for all (narrow enough for the
    page), and a last row with each column's number of findings."""
    c = col.counts()
    names = {p: PAPERS[p].split(" (")[0] for p in PAPERS}
    df = pd.DataFrame([{"verdict": v, **{names[p]: c[p][v] for p in PAPERS}} for v in VERDICTS])
    df["all"] = df[list(names.values())].sum(axis=1)
    total = {"verdict": "findings", **{k: int(df[k].sum()) for k in [*names.values(), "all"]}}
    df = pd.concat([df, pd.DataFrame([total])], ignore_index=True)
    return common.table(df, digits=0)


def _short(text: str, n: int = 58) -> str:
    return text if len(text) <= n else text[: n - 1].rstrip() + "…"


def forest(col: Collected) -> plt.Figure:
    """One row per finding with an interval: the effect measured from its reference and turned so that
    the paper's side is to the right, each row scaled by its largest magnitude (interval ends, the paper's
    value, the margin); the paper's value as a diamond, a likeness margin as a band. The real numbers are
    on the right of each row."""
    common.set_theme()
    rows = [f for f in col.findings if f.effect is not None and (f.effect.has_interval or f.effect.method == "exact")]
    n = max(len(rows), 1)
    fig, ax = plt.subplots(figsize=(8, 0.3 * n + 1.3))
    for i, f in enumerate(rows):
        y = n - 1 - i
        sign = -1.0 if f.direction == "below" else 1.0
        e = f.effect.shift(f.reference)
        lo, hi = sorted((sign * e.low, sign * e.high))
        est = sign * e.estimate
        ends = [abs(lo), abs(hi), abs(est)]
        pv = None if f.paper_value is None else sign * (f.paper_value - f.reference)
        if pv is not None:
            ends.append(abs(pv))
        if f.margin:
            ends.append(f.margin)
        s = max(max(ends), 1e-12)
        colour = common.VERDICT_COLOURS[f.verdict]
        if f.margin:
            ax.add_patch(plt.Rectangle((-f.margin / s, y - 0.3), 2 * f.margin / s, 0.6, color="0.85", lw=0))
        ax.plot([lo / s, hi / s], [y, y], color=colour, lw=2.4, solid_capstyle="butt")
        ax.plot(est / s, y, "o", color=colour, ms=5)
        if pv is not None:
            ax.plot(pv / s, y, "D", mfc="none", mec="0.25", ms=6)
        ax.text(1.08, y, f.effect_text(), va="center", fontsize=9, family="monospace")
        ax.text(-1.1, y, _short(f"{f.chapter} · {f.where} · {f.claim}", 44), va="center", ha="right", fontsize=9)
        if i and rows[i - 1].chapter != f.chapter:
            ax.axhline(y + 0.5, color="0.85", lw=0.8)
    ax.axvline(0, color="0.3", lw=1)
    ax.set_xlim(-1.05, 1.05)
    ax.set_ylim(-0.8, n - 0.2)
    ax.set_yticks([])
    ax.set_xticks([-1, 0, 1])
    ax.set_xticklabels(["against the paper", "reference", "the paper's side"], fontsize=9)
    handles = [plt.Line2D([], [], color=common.VERDICT_COLOURS[v], lw=3, label=v) for v in VERDICTS
               if any(f.verdict == v for f in rows)]
    handles.append(plt.Line2D([], [], marker="D", mfc="none", mec="0.25", ls="", label="the paper's value"))
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.5 / n - 0.02), ncol=4, fontsize=8.5,
              frameon=False)
    ax.grid(False)
    fig.subplots_adjust(left=0.44, right=0.74)
    return common.figure("findings-forest", fig)


def untestable(col: Collected):
    """The findings that need a GPU or the hub: the claim, what it needs, the one command."""
    rows = [{"claim": f"{f.claim} ({PAPERS[f.paper].split(' (')[0]}, {f.where})", "needs": f.needs,
             "command": f"<code>{f.command}</code>", "chapter": f'<a href="{f.chapter}.html">{f.chapter}</a>'}
            for f in col.untestable()]
    df = pd.DataFrame(rows, columns=["claim", "needs", "command", "chapter"])
    return df.style.hide(axis="index")


def publish(col: Collected) -> None:
    """Draw the forest figure and hand the page its few numbers."""
    forest(col)
    c = col.counts()
    common.publish({
        "findings-total": len(col.findings),
        "findings-with-interval": sum(f.effect is not None and f.effect.has_interval for f in col.findings),
        "findings-untestable": len(col.untestable()),
        "findings-reproduced": sum(c[p]["reproduced"] for p in c),
        "findings-contradicted": sum(c[p]["contradicted"] for p in c),
        "findings-scale": col.scale,
    })


__all__ = ["table", "counts", "forest", "untestable", "publish"]
