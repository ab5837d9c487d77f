"""The findings page: per paper, its claims counted by setting and verdict, one row per claim (the deciding
test's verdict in words, the effect with its interval and the paper's value; how it was tested a click away),
a forest figure of the tested claims; then the book's own questions and the commands of what needs a GPU or the
hub. Draws and formats only: claims, findings and verdicts come from `helpers.experiments.findings.collect` and
`core.findings.judge`."""

from __future__ import annotations

import html
import textwrap

import matplotlib.pyplot as plt
import pandas as pd

from ..core.findings import CLAIM_VERDICTS, PAPERS, Finding, Judged
from ..experiments.findings import Collected
from . import common

#: the paper's short name, as the page's headings and tables say it
SHORT = {p: PAPERS[p].split(" (")[0] for p in PAPERS}
SETTING_TEXT = {"paper": "at the paper's setting", "reduced": "at a reduced setting", "untested": "not tested"}


def _esc(text: str) -> str:
    return html.escape(str(text), quote=False)


def _small(text: str) -> str:
    return f'<br><small style="color:#555">{text}</small>'


def _link(f: Finding, prefix: str = "") -> str:
    href = f"{prefix}{f.chapter}.html" + (f"#{f.section}" if f.section else "")
    return f'<a href="{href}">{f.chapter}</a>'


def _finding_line(f: Finding) -> str:
    """One test in the details of a claim: its verdict in words, what it measured, its effect (and its other
    procedures), why the rule set it aside, its stand-in's distance from the paper's model, its chapter."""
    eff = f.effect_text() if f.effect is not None else f"needs {_esc(f.needs)}: <code>{_esc(f.command)}</code>"
    if f.excludes() and f.verdict in ("not detected", "inconclusive"):
        eff += f" ({f.excludes()})"
    alt = "".join(f"; {_esc(n)}: {iv.text(f.digits)}" for n, iv in f.alternatives)
    why = f" — {_esc(f.cannot_test)}" if f.cannot_test else ""
    notes = "".join(f" <i>{_esc(x)}.</i>" for x in (*f.flags(), f.standin and f"Stand-in: {f.standin}", f.caveat)
                    if x)
    return (f"<li>{common.verdict_html(f.verdict, f.verdict_text())}{why}: {_esc(f.claim)} "
            f"<i>{_esc(f.quantity)}</i> {eff}{alt}. Measured: {_esc(f.measured)}"
            + (f" ({_esc(f.scale)})" if f.scale else "") + f".{notes} {_link(f)}</li>")


def _details(j: Judged) -> str:
    """What a reader opens to see how a claim was tested: the predicate and scope, the deciding tests, the other
    in-scope tests, the evidence outside the claim's scope, the controls, the command."""
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
    if not j.findings:
        why = j.claim.untested or "no chapter of the book tests it yet"
        parts.append(f"<p><b>Not tested here:</b> {_esc(why)}"
                     + (f" <code>{_esc(j.claim.command)}</code>" if j.claim.command else "") + "</p>")
    return "".join(parts)


def _verdict_cell(j: Judged) -> str:
    d = j.lead
    if d is None:
        cell = common.verdict_html(j.verdict)
        if j.findings:
            cell += _small(_esc(j.findings[0].needs or "its run cannot test it"))
        return cell
    if j.verdict in ("mixed", "on one model") or len(j.deciding) > 1:
        cell = common.verdict_html(j.verdict, _esc(j.verdict_text()))
    else:
        cell = common.verdict_html(j.verdict, _esc(d.verdict_words()))
    settings = sorted({f.reduced or "at the paper's setting" for f in j.deciding})
    return cell + _small(_esc("; ".join(settings)))


def _effect_cell(j: Judged) -> str:
    d = j.lead
    if d is None:
        return "—"
    cell = f'<span style="white-space:nowrap">{d.effect_text()}</span>'
    if len(j.deciding) > 1:
        cell = "<br>".join(f'<span style="white-space:nowrap">{_esc(f.name())}: {f.effect_text()}</span>'
                           for f in j.deciding)
    ref = f"reference {_esc(d.reference_label)}"
    if d.paper_value is not None:
        ref += f"; paper {d.paper_value:+.{d.digits}f}"
    elif j.claim.paper_value:
        ref += f"; paper {_esc(j.claim.paper_value)}"
    n = len(j.others) + len(j.out_of_scope)
    if n:
        ref += f"; {n} more test{'s' if n > 1 else ''}"
    notes = [x for x in (d.standin and f"stand-in: {d.standin}", d.caveat, *d.flags()) if x]
    return cell + _small(f"{_esc(d.quantity)}; {ref}" + "".join(f"; {_esc(x)}" for x in notes))


def claims_table(col: Collected, paper: str):
    """One row per claim of `paper`, in the paper's order: verdict (the setting beneath), the claim (where, and
    how it was tested a click away), the deciding test's effect (its quantity, reference and the paper's value
    beneath). Three columns that fit the text column."""
    from IPython.display import HTML

    rows = []
    for j in col.judged(paper):
        claim = (f"<b>{_esc(j.claim.where)}</b> {_esc(j.claim.claim)}"
                 f"<details><summary>how it was tested</summary>{_details(j)}</details>")
        rows.append(f"<tr><td>{_verdict_cell(j)}</td><td>{claim}</td><td>{_effect_cell(j)}</td></tr>")
    head = "<tr><th>verdict</th><th>claim</th><th>effect [95 % interval]</th></tr>"
    return HTML(f'<div class="claims-scroll" style="overflow-x:auto;max-width:100%"><table class="claims-table">'
                f"<thead>{head}</thead><tbody>{''.join(rows)}</tbody></table></div>")


def counts(col: Collected, paper: str):
    """`paper`'s claims counted once each: a row per verdict, a column per setting (the paper's, a reduced one,
    not tested), and a last row with each column's number of claims."""
    c = col.claim_counts()[paper]
    names = {"paper": "at the paper's setting", "reduced": "at a reduced setting", "untested": "not tested"}
    rows = [{"verdict": v, **{names[s]: c["verdicts"][s][v] for s in names}} for v in CLAIM_VERDICTS]
    df = pd.DataFrame(rows)
    df = df[df[list(names.values())].sum(axis=1) > 0]
    df = pd.concat([df, pd.DataFrame([{"verdict": "claims", **{names[s]: c[s] for s in names}}])],
                   ignore_index=True)
    return common.table(df, digits=0)


def extensions_table(col: Collected):
    """The book's own questions, a row each: verdict with its setting, the question, the effect."""
    from IPython.display import HTML

    rows = []
    for f in col.extensions():
        eff = f.effect_text() + _small(f"{_esc(f.quantity)}; reference {_esc(f.reference_label)}")
        q = (f"{_esc(f.claim)}<details><summary>how it was tested</summary><ul>{_finding_line(f)}</ul>"
             f"</details>")
        rows.append(f"<tr><td>{common.verdict_html(f.verdict, f.verdict_text())}"
                    f"{_small(SHORT[f.paper] + ', ' + _esc(f.where))}</td><td>{q}</td><td>{eff}</td></tr>")
    head = "<tr><th>verdict</th><th>question</th><th>effect [95 % interval]</th></tr>"
    return HTML(f'<div class="claims-scroll" style="overflow-x:auto;max-width:100%"><table class="claims-table">'
                f"<thead>{head}</thead><tbody>{''.join(rows)}</tbody></table></div>")


def _label(j: Judged, width: int = 44) -> str:
    return "\n".join(textwrap.wrap(f"{j.claim.where}: {j.claim.claim}", width, max_lines=2, placeholder=" …"))


def forest(col: Collected, paper: str) -> plt.Figure:
    """One row per tested claim of `paper` (its deciding test): the effect measured from its reference and
    turned so that the paper's side is to the right. Where the paper gives a size the row is scaled so that it sits
    at 1 (rows are then comparable: 2 is twice the paper's effect); elsewhere the row is scaled to its own
    largest magnitude and its label ends with '(own scale)'. Diamonds: the paper's value; grey band: the margin
    of a claim of likeness. The effect in its own units is on the right."""
    common.set_theme()
    rows = [j for j in col.judged(paper) if j.lead is not None and j.lead.effect is not None]
    n = max(len(rows), 1)
    fig, ax = plt.subplots(figsize=(8, 0.46 * n + 1.4))
    reach = [2.2]
    for i, j in enumerate(rows):
        f, y = j.lead, n - 1 - i
        sign = -1.0 if f.direction == "below" else 1.0
        e = f.effect.shift(f.reference)
        tol = (f.tolerance or 0.0) if f.effect.method == "exact" else 0.0
        lo, hi = sorted((sign * (e.low - tol), sign * (e.high + tol)))
        est = sign * e.estimate
        pv = None if f.paper_value is None else sign * (f.paper_value - f.reference)
        if pv is not None and pv > 0:
            s, own = pv, False
        else:
            s, own = max(abs(lo), abs(hi), abs(est), f.margin or 0.0, 1e-12), True
        colour = common.VERDICT_COLOURS[f.verdict]
        if f.margin:
            ax.add_patch(plt.Rectangle((-f.margin / s, y - 0.3), 2 * f.margin / s, 0.6, color="0.85", lw=0))
        reach += [abs(x) / s for x in (lo, hi, est) if x == x]
        ax.plot([lo / s, hi / s], [y, y], color=colour, lw=2.6, solid_capstyle="butt")
        ax.plot(est / s, y, "o", color=colour, ms=5)
        if pv is not None:
            ax.plot(pv / s, y, "D", mfc="none", mec="0.25", ms=6)
        ax.text(1.02, y, f.effect_text(), va="center", fontsize=9, family="monospace",
                transform=ax.get_yaxis_transform())
        ax.text(-0.02, y, _label(j) + (" (own scale)" if own else ""), va="center", ha="right", fontsize=9,
                transform=ax.get_yaxis_transform())
    ax.axvline(0, color="0.3", lw=1)
    ax.axvline(1, color="0.6", lw=0.8, ls=":")
    lim = min(max(reach) * 1.05, 4.0)
    ax.set_xlim(-lim, lim)
    ax.set_ylim(-0.8, n - 0.2)
    ax.set_yticks([])
    ax.set_xlabel("effect ÷ the paper's size (0: the reference; 1: the paper's value; right: the paper's side)",
                  fontsize=9)
    handles = [plt.Line2D([], [], color=common.VERDICT_COLOURS[v], lw=3, label=v) for v in CLAIM_VERDICTS
               if any(j.verdict == v for j in rows)]
    handles.append(plt.Line2D([], [], marker="D", mfc="none", mec="0.25", ls="", label="the paper's value"))
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -1.1 / n - 0.08), ncol=3, fontsize=8.5,
              frameon=False)
    ax.grid(False)
    fig.subplots_adjust(left=0.40, right=0.76, bottom=min(0.35, 1.6 / (0.46 * n + 1.4)))
    return common.figure(f"findings-forest-{paper}", fig)


def untestable(col: Collected):
    """The tests that need a GPU or the hub: the claim, what it needs, the one command (a command a row, so the
    table stays narrow)."""
    rows = [{"claim": f"{_esc(f.claim)}<br><small>{SHORT[f.paper]}, {_esc(f.where)}; needs {_esc(f.needs)}; "
                      f"{_link(f)}</small>",
             "command": f"<code>{_esc(f.command)}</code>"}
            for f in col.untestable()]
    df = pd.DataFrame(rows, columns=["claim", "command"])
    return common.scroll(df.style.hide(axis="index"))


def publish(col: Collected) -> None:
    """Draw the three forest figures and hand the page its numbers: per paper, claims and how many were tested at
    the paper's setting, at a reduced one, not at all, and the verdicts per setting; the extensions' count."""
    for p in PAPERS:
        forest(col, p)
    c = col.claim_counts()

    def n(p: str, verdict: str, settings: tuple[str, ...] = ("paper", "reduced")) -> int:
        """`p`'s tested claims with `verdict`, at the given settings."""
        return sum(c[p]["verdicts"][s][verdict] for s in settings)

    ext = col.extensions()
    by_key = {f.key: f for f in col.findings}

    def eff(key: str) -> str:
        """A finding's effect as the summary quotes it ('—' when the chapter gives no such finding at this scale)."""
        return by_key[key].effect_text() if key in by_key else "—"

    common.publish({
        "findings-yan2022-claims": c["yan2022"]["claims"],
        "findings-yan2022-paper": c["yan2022"]["paper"],
        "findings-yan2022-reduced": c["yan2022"]["reduced"],
        "findings-yan2022-untested": c["yan2022"]["untested"],
        "findings-yan2022-reproduced": n("yan2022", "reproduced"),
        "findings-yan2022-reproduced-paper": n("yan2022", "reproduced", ("paper",)),
        "findings-yan2022-contradicted": n("yan2022", "contradicted"),
        "findings-yan2022-mixed": n("yan2022", "mixed"),
        "findings-yan2022-one-model": n("yan2022", "on one model"),
        "findings-godey2024-claims": c["godey2024"]["claims"],
        "findings-godey2024-paper": c["godey2024"]["paper"],
        "findings-godey2024-reduced": c["godey2024"]["reduced"],
        "findings-godey2024-untested": c["godey2024"]["untested"],
        "findings-godey2024-reproduced": n("godey2024", "reproduced"),
        "findings-godey2024-reproduced-paper": n("godey2024", "reproduced", ("paper",)),
        "findings-godey2024-contradicted": n("godey2024", "contradicted"),
        "findings-godey2024-mixed": n("godey2024", "mixed"),
        "findings-godey2024-one-model": n("godey2024", "on one model"),
        "findings-yu2024-claims": c["yu2024"]["claims"],
        "findings-yu2024-paper": c["yu2024"]["paper"],
        "findings-yu2024-reduced": c["yu2024"]["reduced"],
        "findings-yu2024-untested": c["yu2024"]["untested"],
        "findings-yu2024-reproduced": n("yu2024", "reproduced"),
        "findings-yu2024-reproduced-paper": n("yu2024", "reproduced", ("paper",)),
        "findings-yu2024-contradicted": n("yu2024", "contradicted"),
        "findings-yu2024-mixed": n("yu2024", "mixed"),
        "findings-yu2024-one-model": n("yu2024", "on one model"),
        "findings-claims": sum(c[p]["claims"] for p in c),
        "findings-tests": sum(f.kind == "claim" for f in col.findings),
        "findings-controls": len(col.controls()),
        "findings-out-of-scope": sum(len(j.out_of_scope) for j in col.judged()),
        "findings-extensions": len(ext),
        "findings-extensions-reproduced": sum(f.verdict == "reproduced" for f in ext),
        # the effects the per-paper summaries quote (tests/test_findings_page.py pins the verdicts they state)
        "findings-eff-sts-ev1-bert": eff("sts-ev1-bert"),
        "findings-eff-sts-gain-bert": eff("sts-gain-bert"),
        "findings-eff-sts-gain-smollm2": eff("sts-gain-smollm2"),
        "findings-eff-sts-control-ev1": eff("sts-control-ev1"),
        "findings-eff-sts-vs-whitening-smollm2": eff("sts-vs-whitening-smollm2"),
        "findings-eff-glue-flatter-spectrum": eff("glue-flatter-spectrum"),
        "findings-eff-sts-vs-whitening-bert": eff("sts-vs-whitening-bert"),
        "findings-eff-sts-gain-minilm": eff("sts-gain-minilm"),
        "findings-eff-sts-gain-mpnet": eff("sts-gain-mpnet"),
        "findings-eff-sts-lsds-authors": eff("sts-lsds-authors"),
        "findings-eff-glue-softdecay-rte": eff("glue-softdecay-rte"),
        "findings-eff-glue-softdecay-rte-mpnet": eff("glue-softdecay-rte-mpnet"),
        "findings-eff-anisotropy-transformers": eff("anisotropy-transformers"),
        "findings-eff-anisotropy-drift-correlation": eff("anisotropy-drift-correlation"),
        "findings-eff-anisotropy-speech": eff("anisotropy-speech"),
        "findings-eff-anisotropy-speech-whisper-base": eff("anisotropy-speech-whisper-base"),
        "findings-eff-anisotropy-speech-drift": eff("anisotropy-speech-drift"),
        "findings-eff-anisotropy-cnn": eff("anisotropy-cnn"),
        "findings-eff-anisotropy-bytes-vs-smollm2": eff("anisotropy-bytes-vs-smollm2"),
        "findings-eff-drift-qk-norm": eff("drift-qk-norm"),
        "findings-eff-drift-sharper-softmax": eff("drift-sharper-softmax"),
        "findings-eff-qk-end-state": eff("qk-end-state"),
        "findings-eff-tse-fig1": eff("tse-fig1"),
        "findings-eff-tse-fig2-ratio": eff("tse-fig2-ratio"),
        "findings-eff-tse-remark28-rate": eff("tse-remark28-rate"),
        "findings-eff-tse-fig5-half": eff("tse-fig5-half"),
        "findings-eff-vit-post-behind-pre": eff("vit-post-behind-pre"),
        "findings-eff-vit-deesc-vs-pre": eff("vit-deesc-vs-pre"),
        "findings-eff-vit-deesc-vs-pre-standard": eff("vit-deesc-vs-pre-standard"),
        "findings-eff-deeplm-post-norm-fails": eff("deeplm-post-norm-fails"),
        "findings-eff-deeplm-deesc-rescues": eff("deeplm-deesc-rescues"),
    })


__all__ = ["claims_table", "counts", "extensions_table", "forest", "untestable", "publish", "SHORT"]
