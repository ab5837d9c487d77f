"""The findings page: per paper, its claims counted by setting and verdict, one row per tested claim (the
deciding test's verdict in words, the effect with its interval and the paper's value; how it was tested a click
away) and a line per claim no test decides (why, and the command that would test it); a forest figure of every
tested claim, a panel per paper, each row on its yardstick; then the book's own questions and the commands of what
needs a GPU or the hub. Draws and formats only: claims, findings and verdicts come from
`helpers.experiments.findings.collect` and `core.findings.judge`."""

from __future__ import annotations

import html
import math
import re

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.ticker import FixedLocator, FuncFormatter, MaxNLocator
from matplotlib.transforms import blended_transform_factory

from ..core.findings import CLAIM_VERDICTS, PAPERS, Finding, Judged, group_name
from ..core.scale import num
from ..experiments.findings import Collected
from . import common

#: the paper's short name, as the page's headings and tables say it
SHORT = {p: PAPERS[p].split(" (")[0] for p in PAPERS}
SETTING_TEXT = {"paper": "at the paper's setting", "reduced": "at a reduced setting", "untested": "not tested"}


def _esc(text: str) -> str:
    return html.escape(str(text), quote=False)



def _link(f: Finding, prefix: str = "") -> str:
    href = f"{prefix}{f.chapter}.html" + (f"#{f.section}" if f.section else "")
    return f'<a href="{href}">{f.chapter}</a>'


def _finding_line(f: Finding) -> str:
    """One test in the details of a claim: its verdict in words, what it measured, its effect (and its other
    procedures), why the rule set it aside, its stand-in's distance from the paper's model, its chapter."""
    eff = f.effect_text() if f.effect is not None else f"needs {_esc(f.needs)}: <code>{_esc(f.command)}</code>"
    if f.corrected_text():
        eff += f" (read at the family's level: {f.corrected_text()})"
    if f.n_units is not None and f.effect is not None and f.effect.method not in ("exact", "range"):
        eff += f", over {f.n_units:,} {_esc(f.unit_name)}"
    if f.excludes() and f.verdict in ("not detected", "inconclusive"):
        eff += f" ({f.excludes()})"
    alt = "".join(f"; {_esc(n)}: {iv.text(f.digits)}" for n, iv in f.alternatives)
    why = f" — {_esc(f.cannot_test)}" if f.cannot_test else ""
    far = "; ".join(d.text() for d in f.distance)
    at_paper = f.paper_scale_text() if f.reduced and f.verdict != "not testable here" else ""
    notes = "".join(f" <i>{_esc(x)}.</i>" for x in (*f.flags(), f.standin and f"Stand-in: {f.standin}", f.caveat,
                                                     far and f"Distance from the paper's setting: {far}",
                                                     at_paper and f"At the paper's setting: {at_paper}") if x)
    return (f"<li>{common.verdict_html(f.verdict, f.verdict_text())}{why}: {_esc(f.claim)} "
            f"<i>{_esc(f.quantity)}</i> {eff}{alt}. Measured: {_esc(f.measured)}"
            + (f" ({_esc(f.scale)})" if f.scale else "") + f".{notes} {_link(f)}</li>")


def _details(j: Judged, untested: bool = True) -> str:
    """What a reader opens to see how a claim was tested: the predicate and scope, the deciding tests, the other
    in-scope tests, the evidence outside the claim's scope, the controls, the command (`untested`: for a claim no
    test meets, why and the command, where the reader has not been told already)."""
    parts = [f"<p><b>Predicate.</b> {_esc(j.claim.predicate)}</p>"]
    if j.claim.scope:
        parts.append(f"<p><b>Scope.</b> {_esc(j.claim.scope)}</p>")
    if j.claim.class_of:
        parts.append(f"<p><b>A claim about a class</b> ({_esc(j.claim.class_of)}): a verdict for the class needs "
                     "at least two of its members.</p>")
    if j.deciding:
        head = ("Deciding test" if len(j.deciding) == 1 else "Deciding tests (a claim's verdict comes from all of "
                "them: they " + ("disagree" if j.split else "agree") + ")")
        if j.claim.decides:
            head = f"Deciding test (the registry: {_esc(j.claim.decides_why)})"
        parts.append(f"<p><b>{head}:</b></p><ul>" + "".join(_finding_line(f) for f in j.deciding) + "</ul>")
    if j.others:
        parts.append("<p><b>Other tests</b> (" + ("the paper's setting decides before a reduced one"
                                                  if j.deciding and j.setting == "paper" else "not deciding")
                     + "):</p><ul>" + "".join(_finding_line(f) for f in j.others) + "</ul>")
    if j.out_of_scope:
        parts.append("<p><b>Evidence outside the claim's scope</b> (shown, neither deciding nor counted):</p><ul>"
                     + "".join(f"{_finding_line(f)[:-5]} <i>Outside the scope: {_esc(f.out_of_scope)}.</i></li>"
                               for f in j.out_of_scope) + "</ul>")
    if j.controls:
        parts.append("<p><b>Controls</b> (checks of the method, not counted):</p><ul>"
                     + "".join(_finding_line(f) for f in j.controls) + "</ul>")
    if not j.findings and untested:
        why = j.claim.untested or "no chapter of the book tests it yet"
        parts.append(f"<p><b>Not tested here:</b> {_esc(why)}"
                     + (f" <code>{_esc(j.claim.command)}</code>" if j.claim.command else "") + "</p>")
    return "".join(parts)


def _result_line(j: Judged) -> str:
    """A tested claim's first line: its verdict in words, the deciding test's effect with its interval (each
    deciding test's, named, where there are several; once for the readings of one test, `Judged.readings`), the
    paper's value in the sign of the row's difference, which the row names (`Judged.sign_convention`), and whether it
    was reached
    at the paper's setting; what the effect is, the full setting and the notes are in the claim's details."""
    d = j.lead
    words = j.verdict_text() if j.verdict in ("mixed", "on one model") or len(j.deciding) > 1 else d.verdict_words()
    groups = j.readings
    if len(groups) > 1:
        effect = "; ".join(f"{_esc(group_name(g))}: {g[0].effect_text()}" for g in groups)
    elif len(groups[0]) > 1:
        effect = f"{_esc(group_name(groups[0]))}: {d.effect_text()}"
    else:
        effect = d.effect_text()
    sign = j.sign_convention() if d.paper_value is not None else ""
    if sign:
        effect = f'<i class="sign">{_esc(sign)}</i> {effect}'
    paper = (f"paper {d.paper_value:+.{d.digits}f}" if d.paper_value is not None
             else f"paper {_esc(j.claim.paper_value)}" if j.claim.paper_value else "")
    setting = "at the paper's setting" if j.setting == "paper" else "at a reduced setting"
    return (f"{common.verdict_html(j.verdict, _esc(words))} <span class=\"effect\">{effect}</span> "
            f'<small style="color:#555">{"; ".join(x for x in (paper, setting) if x)}</small>')


def _effect_note(j: Judged) -> str:
    """What the row's effect is: its quantity, reference and the paper's value, the other tests, the notes of the
    deciding test (a stand-in's distance from the paper's model, a caveat, why the rule set it aside)."""
    d = j.lead
    ref = f"reference {_esc(d.reference_label)}"
    if d.paper_value is not None:
        ref += f"; paper {d.paper_value:+.{d.digits}f}"
    elif j.claim.paper_value:
        ref += f"; paper {_esc(j.claim.paper_value)}"
    n = len(j.others) + len(j.out_of_scope)
    if n:
        ref += f"; {n} more test{'s' if n > 1 else ''} below"
    notes = [x for x in (d.standin and f"stand-in: {d.standin}", d.caveat, *d.flags()) if x]
    return f"<p><b>The effect.</b> {_esc(d.quantity)}; {ref}" + "".join(f"; {_esc(x)}" for x in notes) + ".</p>"


def claims_table(col: Collected, paper: str):
    """One item per tested claim of `paper` (a claim with a deciding test), in the paper's order: its verdict, the
    deciding test's effect, the paper's value and the setting, then the claim where the paper makes it, in one
    paragraph that opens on how it was tested, what the effect is and the full setting. The claims no test
    decides are listed apart (`untested_list`)."""
    from IPython.display import HTML

    items = []
    for j in col.judged(paper):
        if j.lead is None:
            continue
        items.append(f"<li><details><summary>{_result_line(j)} <b>{_esc(j.claim.where)}</b> "
                     f"{_esc(j.claim.claim)}</summary>{_effect_note(j)}{_details(j)}</details></li>")
    head = (f'<p class="claims-head"><b>Tested:</b> {common.plural(len(items), "claim")}, each with its verdict, '
            "its effect [95 % interval] and the paper's value (click a claim: how it was tested).</p>")
    return HTML(f'<div class="claims">{head}<ul class="claims-list">{"".join(items)}</ul></div>')


def _short(text: str, most: int = 90) -> str:
    """A claim cut to its first `most` characters at a word, with an ellipsis (whole where it is short enough)."""
    text = text.strip()
    return text if len(text) <= most else text[:most].rsplit(" ", 1)[0].rstrip(",;:") + " …"


#: the verdicts at the paper's setting as the headline screen's column says them (its heading names the setting)
SCALE_SHORT = {"inconclusive at the paper's scale": "inconclusive", "no trend to the paper's scale": "no trend"}


def headlines_table(col: Collected, paper: str):
    """`paper`'s headline claims (its abstract's and its conclusion's), one row each: the claim where the paper makes
    it; its verdict at the book's setting; its verdict at the paper's setting, read from the measured trends
    (`Finding.paper_scale_verdict`); how each was reached (its own tests, or the claims it sums up, each with its two
    verdicts, by `core.findings.synthesis`) and the deciding test's words at each setting a click away."""
    from IPython.display import HTML

    rows = []
    for h in col.headlines(paper):
        c = h.claim
        scale_words = h.own.paper_scale_text() if not h.parts and h.own.setting == "reduced" else ""
        scale_words = "" if scale_words == h.paper_scale_verdict else scale_words
        book_words = h.own.verdict_text() if not h.parts else ""
        book_words = "" if book_words == h.verdict else book_words
        how = "".join(f"<p>{_esc(x)}</p>" for x in (f"The claim: {c.claim}", f"How it is judged: {h.basis()}.",
                                                     book_words and f"At the book's setting: {book_words}.",
                                                     scale_words and f"At the paper's setting: {scale_words}.") if x)
        rows.append(
            f"<tr><td><details><summary><b>{_esc(c.where)}</b> {_esc(_short(c.claim))}</summary>"
            f'<div style="color:#555;font-size:0.9em">{how}</div></details></td>'
            f'<td style="white-space:nowrap">{common.verdict_html(h.verdict)}</td>'
            f'<td style="white-space:nowrap">'
            f"{common.verdict_html(h.paper_scale_verdict, SCALE_SHORT.get(h.paper_scale_verdict))}"
            "</td></tr>")
    nowrap = '<th style="white-space:nowrap">'
    head = (f"<tr><th>headline claim (click: the claim in full, how it is judged)</th>{nowrap}book's setting</th>"
            f"{nowrap}paper's setting</th></tr>")
    return HTML(f'<table class="headlines" style="width:100%"><thead>{head}</thead><tbody>{"".join(rows)}'
                "</tbody></table>")


def _why_untested(j: Judged) -> tuple[str, str]:
    """Why no test decides claim `j`, and the command that would test it ('' where none would here)."""
    if j.findings:
        f = j.findings[0]
        why = f.cannot_test or (f"needs {f.needs}" if f.needs else "its run cannot test it")
        return why, f.command or j.claim.command
    return j.claim.untested or "no chapter of the book tests it yet", j.claim.command


def _first_clause(text: str) -> str:
    """The reason's first clause, up to its first colon, semicolon or parenthesis ("needs MultiBERT's
    checkpoints"), for a one-line list; the whole reason is in the claim's details."""
    return re.split(r": |; | \(", text.strip().rstrip("."), maxsplit=1)[0]


def untested_list(col: Collected, paper: str):
    """`paper`'s claims that no test decides (not tested here, or not testable here), one list a click away, a line
    each in the paper's order: the claim's id and where the paper makes it, why in a clause, and the command that
    would test it; the claim itself, the whole reason and what the book shows of it a click further. A list, not
    table rows: such a row has no effect to show."""
    from IPython.display import HTML

    items = []
    for j in col.judged(paper):
        if j.lead is not None:
            continue
        why, command = _why_untested(j)
        cmd = f" <code>{_esc(command)}</code>" if command else ""
        mark = "" if j.verdict == "not tested here" else f" ({common.verdict_html(j.verdict)})"
        items.append(f"<li><details><summary><code>{_esc(j.claim.id)}</code> <b>{_esc(j.claim.where)}</b>{mark}: "
                     f"{_esc(_first_clause(why))}.{cmd}</summary>"
                     f"<p><b>The claim.</b> {_esc(j.claim.claim)}</p><p><b>Why it is not tested here.</b> "
                     f"{_esc(why.rstrip('.'))}.</p>{_details(j, untested=False)}</details></li>")
    if not items:
        return HTML(f"<p>Every claim of {SHORT[paper]} is tested here.</p>")
    head = (f"<b>Not tested here:</b> {common.plural(len(items), 'claim')}, a line each with its id, where the paper "
            "makes it, why and the command that would test it (click to show; click a line for the claim)")
    return HTML(f'<details class="untested-claims"><summary>{head}</summary><ul class="untested-list">'
                f'{"".join(items)}</ul></details>')


#: the columns of a paper's count table: its verdicts by setting, then two sensitivity readings (never the verdicts)
COUNT_COLUMNS = {"paper": "at the paper's setting", "reduced": "at a reduced setting",
                 "all": "all claims", "uncorrected": "each test at 95 % alone",
                 "choice-free": "no scope, no deciding test named"}


def counts(col: Collected, paper: str):
    """`paper`'s claims counted once each, a row per verdict: at the paper's setting, at a reduced one, in all;
    then the two sensitivity readings the page shows beside the verdicts — every test read at its uncorrected 95 %
    (no family correction: `Collected.uncorrected_counts`), and every out-of-scope test counted with no registry
    entry naming a deciding test (`Collected.choice_free_counts`); a last row with the number of claims."""
    readings = {"verdicts": col.claim_counts()[paper], "uncorrected": col.uncorrected_counts()[paper],
                "choice-free": col.choice_free_counts()[paper]}

    def total(c: dict, v: str) -> int:
        return sum(c["verdicts"][s][v] for s in c["verdicts"])

    c = readings["verdicts"]
    rows = [{"verdict": v, COUNT_COLUMNS["paper"]: c["verdicts"]["paper"][v],
             COUNT_COLUMNS["reduced"]: c["verdicts"]["reduced"][v], COUNT_COLUMNS["all"]: total(c, v),
             COUNT_COLUMNS["uncorrected"]: total(readings["uncorrected"], v),
             COUNT_COLUMNS["choice-free"]: total(readings["choice-free"], v)} for v in CLAIM_VERDICTS]
    df = pd.DataFrame(rows)
    df = df[df[list(COUNT_COLUMNS.values())[2:]].sum(axis=1) > 0]
    df = pd.concat([df, pd.DataFrame([{"verdict": "claims", COUNT_COLUMNS["paper"]: c["paper"],
                                       COUNT_COLUMNS["reduced"]: c["reduced"],
                                       **{COUNT_COLUMNS[k]: readings.get(k, c)["claims"]
                                          for k in ("all", "uncorrected", "choice-free")}}])], ignore_index=True)
    return common.table(df, digits=0, compact=True)


def counts_folded(col: Collected, paper: str):
    """`counts` one click away: the claims counted by verdict and setting, with the two sensitivity readings."""
    from IPython.display import HTML

    c = col.claim_counts()[paper]
    head = (f"<b>Counted:</b> {common.plural(c['claims'], 'claim')} by verdict and setting, with the two sensitivity "
            "readings (click to show)")
    return HTML(f'<details class="claim-counts"><summary>{head}</summary>'
                f'{common.SCROLL_BOX.format(counts(col, paper).to_html())}</details>')


def extensions_table(col: Collected):
    """The book's own questions, one list a click away, an item each as the claims are listed: the verdict with the
    effect, the paper and where it starts from, then the question (how it was tested a click further)."""
    from IPython.display import HTML

    items = []
    for f in col.extensions():
        line = (f"{common.verdict_html(f.verdict, _esc(f.verdict_words()))} <span class=\"effect\">"
                f'{f.effect_text()}</span> <small style="color:#555">{SHORT[f.paper]}, {_esc(f.where)}</small>')
        items.append(f"<li><details><summary>{line} {_esc(f.claim)}</summary>"
                     f"<p><b>The effect.</b> {_esc(f.quantity)}; reference {_esc(f.reference_label)}.</p>"
                     f"<ul>{_finding_line(f)}</ul></details></li>")
    head = (f"<b>The {len(items)} questions</b>, each with its verdict and effect [95 % interval] (click to show; "
            "click a question: how it was tested)")
    return HTML(f'<details class="untested-claims"><summary>{head}</summary><ul class="claims-list">'
                f'{"".join(items)}</ul></details>')


#: the text column the book's figures are shown in at a 1280 px wide window (px), and the smallest type a reader is
#: given there (px): the forest's fonts are sized from them
PAGE_PX, READING_PX = 688, 11
FOREST_WIDTH = 8.0                                              # inches
FOREST_FONT = math.ceil(READING_PX * 72 * FOREST_WIDTH / PAGE_PX)   # pt: ≥ 11 px once scaled to the column
#: a row's height in lines of the forest's type, and the most characters of a claim's label (at `FOREST_FONT`, in
#: the left half of the figure)
ROW_LINES, LABEL_CHARS = 1.2, 46
#: past this reach (in yardsticks) a panel's axis turns logarithmic beyond ±1, so that every interval fits uncut
LINEAR_REACH = 4.0


def forest_rows(col: Collected) -> dict[str, list[tuple[Judged, Finding]]]:
    """Every tested claim's deciding tests with an effect, per paper in the paper's order: the forest draws them
    all, each on its own yardstick (`yardstick`)."""
    out: dict[str, list[tuple[Judged, Finding]]] = {p: [] for p in PAPERS}
    for j in col.judged():
        out[j.claim.paper] += [(j, f) for f in j.deciding if f.effect is not None]
    return {p: rows for p, rows in out.items() if rows}


#: the side a claim predicts, as the forest turns it: +1 where the paper's side is above the reference, −1 where it
#: is below (a bound, "at most", holds below its limit), +1 for a likeness or no change
SIDE = {"above": 1.0, "below": -1.0, "at most": -1.0, "equal": 1.0, "none": 1.0}


def yardstick(f: Finding) -> tuple[str, float]:
    """What a test's effect is divided by in the forest, and its kind: the paper's size ("paper": the paper's value
    measured from the reference, where the paper gives it on the side it predicts), else the margin of a claim of
    likeness or of a bound ("margin"), else the smallest effect of interest the finding states ("smallest"), else
    the farther end of its own interval from the reference ("interval": the row shows on which side it lies and
    whether it reaches the reference, not a size)."""
    side = SIDE[f.direction]
    if f.paper_value is not None and f.direction in ("above", "below") and side * (f.paper_value - f.reference) > 0:
        return "paper", side * (f.paper_value - f.reference)
    if f.margin:
        return "margin", abs(f.margin)
    if f.smallest:
        return "smallest", abs(f.smallest)
    lo, hi = _ends(f)
    far = max(abs(lo - f.reference), abs(hi - f.reference), abs(f.effect.estimate - f.reference))
    return "interval", far if far > 0 and far == far else 1.0


def _ends(f: Finding) -> tuple[float, float]:
    """A test's interval, widened by its tolerance where it is exact."""
    tol = (f.tolerance or 0.0) if f.effect.method == "exact" else 0.0
    lo, hi = f.effect.low, f.effect.high
    if lo != lo or hi != hi:                                   # no interval: the estimate alone
        lo = hi = f.effect.estimate
    return lo - tol, hi + tol


def forest_position(f: Finding) -> tuple[float, float, float]:
    """A test's interval and estimate on the forest's scale: measured from the reference, turned so that the
    paper's side is to the right (`SIDE`) and divided by its `yardstick`; (low, estimate, high)."""
    side, (_, s) = SIDE[f.direction], yardstick(f)
    lo, hi = _ends(f)
    a, b = sorted((side * (lo - f.reference) / s, side * (hi - f.reference) / s))
    return a, side * (f.effect.estimate - f.reference) / s, b


def _value_text(f: Finding) -> str:
    """A row's numbers on the right, in the test's own units and sign: its effect [interval], and the paper's value
    or the reference or margin its yardstick is."""
    kind, s = yardstick(f)
    own = f.effect.text(f.digits) + (" exact" if f.effect.method == "exact" else
                                     " range" if f.effect.method == "range" else "")
    if f.paper_value is not None:
        return f"{own}; paper {f.paper_value:+.{f.digits}f}"
    if kind == "margin":
        ref = f"ref {f.reference:.3g} " if f.reference else ""
        return f"{own}; {ref}±{s:.2g}"
    if f.reference:
        return f"{own}; ref {f.reference:.3g}"
    return own


def _labels(rows: list[tuple[Judged, Finding]], most: int = LABEL_CHARS) -> list[tuple[str, bool]]:
    """The lines of a panel's labels, each with whether it carries a test: a claim with one deciding test is one
    line (where the paper makes it and the claim, cut at a word to `most` characters: the whole claim is in the
    list above), a claim with several is its line and then a line per test with the test's name."""
    out, last = [], None
    for j, f in rows:
        many = len(j.deciding) > 1
        if j is not last:
            out.append((_short(f"{j.claim.where}: {j.claim.claim}", most), not many))
            last = j
        if many:
            out.append((f"   – {_short(f.name(), most - 5)}", True))
    return out


def forest(col: Collected) -> plt.Figure:
    """Every tested claim of the three papers, a panel per paper and a row per deciding test
    (`forest_rows`): its effect measured from its reference, turned so that the paper's side is to the right and
    divided by its `yardstick` — the paper's size (its value at 1, a diamond), the margin of a claim of likeness or
    of a bound (grey: where the claim holds), or its own interval's farther end (a hollow dot: side and reach, not a
    size). Each panel's axis fits every interval, so none is cut. The claim, where the paper makes it, on the left;
    the effect in its own units and sign on the right. Every text is at least `READING_PX` px tall once the figure
    is scaled to the text column."""
    common.set_theme()
    panels = forest_rows(col)
    line_in = FOREST_FONT * 1.2 / 72
    head, foot = 2.0, 2.0                                # lines above a panel (its title) and below (its ticks)
    layout = {p: _labels(rows) for p, rows in panels.items()}
    lines = sum(len(lab) * ROW_LINES + head + foot for lab in layout.values()) + 1.4 or 4.0
    legend = 3.0
    fig_h = (lines + legend) * line_in + 0.3
    fig = plt.figure(figsize=(FOREST_WIDTH, fig_h), layout="none")        # placed by hand: labels, plot, effects
    top = fig_h - 0.15
    for paper, rows in panels.items():
        labels = layout[paper]
        n = len(labels)
        h_in = n * ROW_LINES * line_in
        top -= head * line_in
        ax = fig.add_axes((0.385, (top - h_in) / fig_h, 0.19, h_in / fig_h))
        top -= h_in + foot * line_in + (1.4 * line_in if paper == list(panels)[-1] else 0.0)
        at_left = blended_transform_factory(fig.transFigure, ax.transData)
        ax.set_title(f"{SHORT[paper]}: {common.plural(len({id(j) for j, _ in rows}), 'tested claim')}",
                     fontsize=FOREST_FONT + 1, loc="left", x=-0.385 / 0.19, ha="left", fontweight="bold")
        reach = [1.25]
        tests = iter(rows)
        last = None
        for i, (lab, has_test) in enumerate(labels):
            y = i + 0.5
            ax.text(0.005, y, lab, va="center", ha="left", fontsize=FOREST_FONT, transform=at_left)
            if not has_test:
                continue
            j, f = next(tests)
            if last is not None and j is not last:
                start = i - (0 if len(j.deciding) == 1 else 1)
                ax.axhline(start, color="0.88", lw=0.8)
            last = j
            reach += _forest_row(ax, y, f)
        lim = max(reach) * 1.08
        if lim > LINEAR_REACH:                   # a scale that fits: linear within ±1, logarithmic beyond
            ax.set_xscale("symlog", linthresh=1.0, linscale=1.0)
            ax.xaxis.set_major_locator(FixedLocator([t for t in (-100, -10, -1, 0, 1, 10, 100)
                                                     if abs(t) <= lim]))
            ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}".replace("-", "−")))
        else:
            ax.xaxis.set_major_locator(MaxNLocator(5, integer=True))
        ax.set_xlim(-lim, lim)
        ax.axvline(0, color="0.3", lw=1)
        ax.set_ylim(n, 0)
        ax.set_yticks([])
        ax.tick_params(axis="x", labelsize=FOREST_FONT)
        if paper == list(panels)[-1]:
            ax.set_xlabel("effect ÷ yardstick (the paper's side →)", fontsize=FOREST_FONT)
        ax.grid(False)
    if not panels:
        fig.text(0.5, 0.5, "no tested claim", ha="center", va="center", fontsize=FOREST_FONT)
    _forest_legend(fig, {f.verdict for rows in panels.values() for _, f in rows})
    return common.figure("findings-forest", fig)


def _forest_row(ax, y: float, f: Finding) -> list[float]:
    """One test's row of the forest at height `y`: the margin where its claim holds (grey), its interval and
    estimate in its verdict's colour, the paper's value (a diamond) and its numbers on the right; what it reaches on
    the axis."""
    kind, s = yardstick(f)
    lo, est, hi = forest_position(f)
    colour = common.VERDICT_COLOURS[f.verdict]
    if kind == "margin":                 # a likeness holds within ±1, a bound ("at most", turned) above −1
        ax.add_patch(plt.Rectangle((-1.0, y - 0.38), 2.0 if f.direction == "equal" else 1e3, 0.76,
                                   color="0.87", lw=0, zorder=0))
    ax.plot([lo, hi], [y, y], color=colour, lw=3, solid_capstyle="butt")
    ax.plot(est, y, "o", color=colour, ms=6, mfc=colour if kind != "interval" else "white", mew=1.5, clip_on=False)
    reach = [abs(lo), abs(hi)]
    if f.paper_value is not None:
        pv = SIDE[f.direction] * (f.paper_value - f.reference) / s
        ax.plot(pv, y, "D", mfc="none", mec="0.25", ms=7, clip_on=False)
        reach.insert(0, abs(pv))
    ax.text(1.04, y, _value_text(f), va="center", fontsize=FOREST_FONT, transform=ax.get_yaxis_transform())
    return reach


def _forest_legend(fig, verdicts: set[str]) -> None:
    """The forest's legend: the verdicts drawn, the paper's value, the margin, and a test with no size."""
    handles = [plt.Line2D([], [], color=common.VERDICT_COLOURS[v], lw=3, label=v) for v in CLAIM_VERDICTS
               if v in verdicts]
    handles += [plt.Line2D([], [], marker="D", mfc="none", mec="0.25", ls="", label="the paper's value (1)"),
                plt.Rectangle((0, 0), 1, 1, color="0.87", label="margin: where the claim holds"),
                plt.Line2D([], [], marker="o", mfc="white", mec="0.3", ls="", label="no size: ÷ its interval")]
    fig.legend(handles=handles, loc="lower left", ncol=3, fontsize=FOREST_FONT, frameon=False, borderaxespad=0.2,
               bbox_to_anchor=(0.0, 0.0), handlelength=1.5, columnspacing=1.0, labelspacing=0.3)


def untestable(col: Collected):
    """The tests that need a GPU or the hub, a line each: where, what it needs and the one command; the test
    itself a click away."""
    from IPython.display import HTML

    items = [f"<li><details><summary><b>{SHORT[f.paper]}, {_esc(f.where)}</b>: needs {_esc(f.needs)}. "
             f"<code>{_esc(f.command)}</code></summary><p>{_esc(f.claim)} ({_link(f)})</p></details></li>"
             for f in col.untestable()]
    return HTML(f'<ul class="untested-list">{"".join(items)}</ul>')


#: the findings whose effect the per-paper summaries quote, as `findings-eff-<key>` (tests/test_findings_page.py
#: checks the verdict words the summaries state against the findings)
EFFECT_QUOTED = ("sts-ev1-bert", "sts-gain-bert", "sts-gain-smollm2", "sts-control-ev1", "sts-vs-whitening-smollm2",
                 "glue-flatter-spectrum", "sts-vs-whitening-bert", "sts-gain-minilm", "sts-gain-mpnet",
                 "sts-lsds-authors", "glue-softdecay-rte", "glue-softdecay-rte-mpnet", "anisotropy-transformers",
                 "anisotropy-drift-correlation", "anisotropy-speech", "anisotropy-speech-whisper-base",
                 "anisotropy-speech-drift", "anisotropy-cnn", "anisotropy-bytes-vs-smollm2", "drift-qk-norm",
                 "drift-sharper-softmax", "qk-end-state", "tse-fig1", "tse-fig2-ratio", "tse-remark28-rate",
                 "tse-fig5-half", "vit-post-behind-pre", "vit-deesc-vs-pre", "vit-deesc-vs-pre-standard",
                 "deeplm-post-norm-fails", "deeplm-deesc-rescues")
#: the findings whose band at the paper's setting the per-paper summaries quote, as `findings-scale-<key>`
SCALE_QUOTED = ("sts-gain-bert", "sts-vs-whitening-bert", "qk-aligned-heads", "deeplm-post-norm-fails",
                "deeplm-deesc-rescues", "vit-post-behind-pre", "vit-deesc-vs-post",
                "vit-deesc-vs-pre")
#: what the page counts per paper, as `findings-<paper>-<count>` (`Collected.claim_counts`)
PAPER_COUNTS = ("claims", "paper", "reduced", "untested")


def quoted(col: Collected) -> dict[str, str]:
    """The numbers the per-paper summaries quote: each `EFFECT_QUOTED` finding's effect, each `SCALE_QUOTED`
    finding's band at the paper's setting, and the budgets of the two trends they cite ('—' for a finding this
    scale does not give, or without a trend)."""
    by_key = {f.key: f for f in col.findings}

    def budgets(key: str) -> str:
        """The points of a finding's trend in words ('5 budgets from 62 to 1,000 steps')."""
        t = by_key[key].at_scale if key in by_key else None
        if t is None:
            return "—"
        return f"{t.points} budgets from {num(min(t.x))} to {num(max(t.x))} {t.axis.removeprefix('training ')}"

    def band(key: str) -> str:
        f = by_key.get(key)
        return f.at_scale.band.text(f.digits) if f is not None and f.at_scale is not None else "—"

    return {**{f"findings-eff-{k}": by_key[k].effect_text() if k in by_key else "—" for k in EFFECT_QUOTED},
            **{f"findings-scale-{k}": band(k) for k in SCALE_QUOTED},
            "findings-scale-deeplm-budgets": budgets("deeplm-post-norm-fails"),
            "findings-scale-vit-budgets": budgets("vit-deesc-vs-pre")}


def publish(col: Collected) -> None:
    """Draw the forest figure and hand the page its numbers: per paper, its claims and how many were tested at
    the paper's setting, at a reduced one, not at all (`findings-<paper>-<count>`), and the size of its family of
    tests (`findings-family-<paper>`); the counts over the book; the extensions'; the numbers the summaries quote."""
    forest(col)
    c = col.claim_counts()
    ext = col.extensions()
    fam, levels = col.family_sizes(), col.family_levels()
    common.publish({
        **{f"findings-{p}-{n}": c[p][n] for p in PAPERS for n in PAPER_COUNTS},
        **{f"findings-family-{p}": fam[p] for p in PAPERS},
        "findings-family-level-min": f"{100 * levels[0]:.1f} %" if levels else "—",
        "findings-family-level-max": f"{100 * levels[1]:.2f} %" if levels else "—",
        "findings-claims": sum(c[p]["claims"] for p in c),
        "findings-tests": sum(f.kind == "claim" for f in col.findings),
        "findings-controls": len(col.controls()),
        "findings-out-of-scope": sum(len(j.out_of_scope) for j in col.judged()),
        "findings-extensions": len(ext),
        "findings-extensions-reproduced": sum(f.verdict == "reproduced" for f in ext),
        **quoted(col),
    })


__all__ = ["claims_table", "untested_list", "counts", "extensions_table", "forest", "forest_rows", "untestable",
           "publish", "SHORT"]
