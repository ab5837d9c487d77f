"""Figures and tables of the STS chapter, drawn from `experiments.sts.Result` (every statistic is a
Result method; this module draws and formats)."""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import torch
from matplotlib.text import Text
from matplotlib.transforms import Bbox

from ..core.softdecay import softdecay
from ..core.stats import Interval
from ..core.sts import FLIP_FREE, METHODS
from ..experiments import WIDTH, about
from ..experiments.findings import corrected
from ..experiments.sts import (
    ALPHA_MARGIN,
    BOOK_BERT,
    CROSSFIT_SPLITS,
    MPNET,
    PLANT_METHODS,
    POOLING_LABEL,
    SMOL,
    Result,
)
from . import common

#: what each of our rows is, said in the tables
LABELS = {"vanilla": "raw model", "whitening": "whitening (fitted on the test pairs, WhiteBERT-style)",
          "whitening-256": "whitening, first 256 directions", "de-escalation": "mean removed (Yu & Zhang eq. 21)",
          "SoftDecay (sentence)": "SoftDecay of the sentence matrix (the paper's)",
          "SoftDecay (token)": "SoftDecay of each sentence's tokens (ours)",
          "SoftDecay (σ/√N)": "SoftDecay of σ/√N (ours)", "SoftDecay (σ/σ_max)": "SoftDecay of σ/max σ (ours)",
          "SoftDecay (clamped)": "SoftDecay, σ clamped at |α| (flip-free, ours)",
          "SoftDecay (rescaled)": "SoftDecay, σ_min scaled to |α| (flip-free, ours)"}
#: the short column names of the readings tables
SHORT = {"vanilla": "raw", "whitening": "whitening", "whitening-256": "whitening-256", "de-escalation": "mean removed",
         "SoftDecay (sentence)": "SoftDecay", "SoftDecay (clamped)": "clamped", "SoftDecay (rescaled)": "rescaled",
         "SoftDecay (σ/√N)": "SoftDecay of σ/√N"}
#: the per-set interval tables show these methods (the others are in the averages table)
SET_METHODS = ("whitening", "de-escalation", "SoftDecay (sentence)", "SoftDecay (token)")
#: the paper's row that matches each of ours (whitening: WhiteBERT fits on the test set like ours; the
#: paper's "whitening (NLI)" rows fit on NLI, which we do not have)
PAPER_MATCH = {"vanilla": "vanilla", "whitening": "WhiteBERT", "SoftDecay (sentence)": "SoftDecay"}
#: our model name -> the paper's model label in data/yan_2022_table1.csv
PAPER_MODEL = {"bert-base-cased": "bert-base-cased", "distilbert-base-uncased": "distilbert-base-uncased",
               "albert-base-v2": "albert-base", "roberta-base": "roberta-base"}
#: the encoders the figures show where their runs hold the data: the in-scope ones first, MiniLM beside
FIGURE_MODELS = (BOOK_BERT, SMOL, "all-MiniLM-L6-v2")
#: their names in a table's first column, where a long name would wrap onto three lines
TABLE_NAME = {BOOK_BERT: "book MLM BERT", SMOL: "SmolLM2-135M", "all-MiniLM-L6-v2": "MiniLM", MPNET: "mpnet"}
#: the singular-value CDFs (the paper's Fig. 3, about BERT) show the encoders in the claims' scope only
CDF_MODELS = (BOOK_BERT, SMOL)
#: their names in panel titles
SHORT_NAME = {BOOK_BERT: "the book's MLM BERT", SMOL: "SmolLM2-135M", "all-MiniLM-L6-v2": "MiniLM (out of scope)",
              MPNET: "mpnet (out of scope)"}


LEGEND = 9          # legend and small text, pt (common.figure raises any text that would show under 11 px)


def _iv(iv: Interval | None, digits: int = 2) -> str:
    """An interval as the tables and prose print it, ✱ when it excludes 0; '–' when not run."""
    if iv is None or not math.isfinite(iv.estimate):
        return "–"
    return iv.text(digits) + ("" if iv.covers(0.0) else " ✱")


_scroll = common.scroll


def averages_table(res: Result, models: list[str] | None = None):
    """Per encoder and method: the mean over the sets under the paper's protocol and pooled, and the
    difference from the raw model with its paired bootstrap interval (✱: it excludes 0)."""
    models = list(res.extras) if models is None else models
    rows = []
    for m in models:
        avg = res.averages[m]
        for method in METHODS:
            if not np.isfinite(avg["subset-mean"].get(method, np.nan) or np.nan):
                continue
            rows.append({"encoder": m, "method": LABELS[method], "Avg": avg["subset-mean"][method],
                         "Δ vs raw [95 %]": "" if method == "vanilla" else _iv(res.run_of(m).vs_raw(method)),
                         "Avg, pooled": avg["pooled"][method]})
    if not rows:
        return None          # nothing to show at this scale (the prose says what was run)
    return common.table(pd.DataFrame(rows), digits=2)


def intervals_table(res: Result, model: str):
    """Per set: the main methods minus the raw model, with the 95 % paired bootstrap interval."""
    if model not in res.all_runs():
        return None          # nothing to show at this scale (the prose says what was run)
    df = pd.DataFrame({LABELS[m]: {d: _iv(res.run_of(model).vs_raw(m, dataset=d)) for d in res.datasets}
                       for m in SET_METHODS})
    df.index.name = "set"
    return common.table(df.reset_index())


def paper_rows(res: Result, model: str) -> tuple[str, list[dict]]:
    """The paper's Table 1 rows to set beside `model`: its own when the paper ran it, else BERT-base's
    as a labelled reference. Returns (the paper's model label, rows)."""
    label = PAPER_MODEL.get(model, "bert-base-cased")
    return label, [r for r in res.paper_table1 if r["model"] == label]


#: Table 1's short row names, explained in the legend beneath it (`TABLE1_LEGEND`)
TABLE1_ROWS = {"vanilla": "raw", "whitening": "whitening", "whitening-256": "whitening-256",
               "de-escalation": "mean removed", "SoftDecay (sentence)": "SoftDecay",
               "SoftDecay (token)": "SoftDecay, tokens", "SoftDecay (σ/√N)": "SoftDecay σ/√N",
               "SoftDecay (σ/σ_max)": "SoftDecay σ/max σ", "SoftDecay (clamped)": "SoftDecay, clamped",
               "SoftDecay (rescaled)": "SoftDecay, rescaled"}
#: what each short row name of Table 1 stands for
TABLE1_NOTES = {"whitening": "fitted on the test pairs, WhiteBERT-style", "whitening-256": "its first 256 directions",
                "de-escalation": "Yu & Zhang eq. (21)", "SoftDecay (sentence)": "of the sentence matrix (the paper's)",
                "SoftDecay (token)": "of each sentence's tokens (ours)",
                "SoftDecay (σ/√N)": "of the singular values divided by √N (ours)",
                "SoftDecay (σ/σ_max)": "of the singular values divided by the largest (ours)",
                "SoftDecay (clamped)": "σ clamped at |α| (flip-free, ours)",
                "SoftDecay (rescaled)": "σ_min scaled to |α| (flip-free, ours)"}


def table1(res: Result, model: str | None = None):
    """Table 1 for one encoder (paper protocol): a row per method (short names, explained beneath) with its Avg
    and the seven sets, the paper's matching rows below (for a model the paper did not run, BERT-base-cased's,
    labelled). The differences from the raw model, with their intervals, are the averages table's."""
    from html import escape

    from IPython.display import HTML

    model = model or res.models[0]
    rows, shown = [], []
    for method in METHODS:
        if method not in res.run_of(model).spearman["subset-mean"][res.datasets[0]]:
            continue
        shown.append(method)
        rows.append({"method": TABLE1_ROWS[method], "Avg": res.averages[model]["subset-mean"][method],
                     **dict(zip(res.datasets, res.run_of(model).set_scores(method), strict=True))})
    label, paper = paper_rows(res, model)
    for r in paper:
        if r["method"] in PAPER_MATCH.values():
            rows.append({"method": f"paper: {r['method']}", "Avg": r["Avg"],
                         **{d: r.get(d, np.nan) for d in res.datasets}})
    other = "" if label == PAPER_MODEL.get(model) else f" (the paper did not run {model})"
    legend = "; ".join(f"{escape(TABLE1_ROWS[m])}: {escape(TABLE1_NOTES[m])}" for m in shown if m in TABLE1_NOTES)
    legend += f"; paper: the paper's rows for {escape(label)}{escape(other)}" if paper else ""
    html = common.table(pd.DataFrame(rows), digits=2, compact=True).to_html()
    return HTML(common.SCROLL_BOX.format(html + f'<p class="table-legend"><small>{legend}.</small></p>'))


def _read_models(res: Result) -> list[str]:
    return [m for m in res.all_runs() if res.read(m) is not None]


#: the pooling table's two halves: the paper's rows, and the book's own
POOLING_PARTS = {"paper": ("vanilla", "whitening", "SoftDecay (sentence)"),
                 "ours": ("whitening-256", "de-escalation", "SoftDecay (clamped)", "SoftDecay (rescaled)")}


def pooling_table(res: Result, part: str = "paper"):
    """Table 1 Avg (paper protocol, mean over the sets) under both readings of the authors' pooling, per
    encoder (the paper-comparison reading first): the paper's rows (`part="paper"`) or the book's own
    (`part="ours"`)."""
    rows = []
    for m in _read_models(res):
        for q in sorted(res.poolings, key=lambda q: q != res.paper_pooling):
            rd = res.readings[m]
            rows.append({"encoder, pooling": f"{m}, {POOLING_LABEL[q]}" + (" (paper default)"
                                                                          if q == res.paper_pooling else ""),
                         **{SHORT[k]: rd.avg(k, q) for k in POOLING_PARTS[part] if k in rd.scores(q)}})
    if not rows:
        return None          # nothing to show at this scale (the prose says what was run)
    return common.table(pd.DataFrame(rows), digits=2)


def _other_pooling(res: Result) -> str:
    return next((q for q in res.poolings if q != res.paper_pooling), res.paper_pooling)


def full_summary_table(res: Result):
    """Table 1 on every pair, per encoder read so (`full_readings`) and pooling (the paper-comparison one
    first): the raw model's Avg, SoftDecay − raw and whitening − raw (paired bootstrap, transforms fitted once),
    and whitening − SoftDecay cross-fitted (the paper-comparison pooling only; '–' where that run is not here)."""
    rows = []
    order = [*FIGURE_MODELS, MPNET]          # the encoders in the claims' scope first
    for m in sorted(res.full_readings, key=lambda m: order.index(m) if m in order else len(order)):
        for q in sorted(res.poolings, key=lambda q: q != res.paper_pooling):
            full = res.full_readings[m]
            rows.append({"encoder": TABLE_NAME.get(m, m), "pooling": POOLING_LABEL[q],
                         "raw": full.avg("vanilla", q),
                         "SoftDecay − raw": _iv(full.vs_raw("SoftDecay (sentence)", q)),
                         "whitening − raw": _iv(full.vs_raw("whitening", q)),
                         "whitening − SoftDecay": (_iv(res.samefit[m].iv() if m in res.samefit else None)
                                                   if q == res.paper_pooling else "–")})
    if not rows:
        return None          # nothing read on every pair at this scale (the prose says so)
    return common.table(pd.DataFrame(rows), digits=2, compact=True)


def full_table(res: Result, model: str):
    """Table 1 on every pair for one encoder: per set (and their mean, `Avg`) the raw model, whitening and
    SoftDecay under the paper-comparison pooling, then the raw model and SoftDecay under the other one."""
    if model not in res.full_readings:
        return None          # not read on every pair at this scale (the prose says so)
    q, other = res.paper_pooling, _other_pooling(res)
    a, b = res.full_readings[model].scores(q), res.full_readings[model].scores(other)
    short = {q: "1 + L", other: "emb. + L"}
    columns = [("raw", q, "vanilla"), ("whitening", q, "whitening"), ("SoftDecay", q, "SoftDecay (sentence)"),
               ("raw", other, "vanilla"), ("SoftDecay", other, "SoftDecay (sentence)")]
    df = pd.DataFrame({f"{name}, {short[pooling]}": (a if pooling == q else b)[method]
                       for name, pooling, method in columns})
    df.loc["Avg"] = [res.full_readings[model].avg(method, pooling) for _, pooling, method in columns]
    df.index.name = "set"
    return common.table(df.reset_index(), digits=2)


def _text_if_full(res: Result, model: str, get) -> str:
    """An interval read on every pair, or '–' where `model` was not read on every pair at this scale."""
    return _iv(get()) if model in res.full_readings else "–"


def _full_number(res: Result, model: str, get) -> float:
    """A number read on every pair, or NaN where `model` was not read on every pair at this scale."""
    return float(get()) if model in res.full_readings else float("nan")


def _draws_iv(res: Result, model: str, method: str, against: str, pooling: str | None = None) -> str:
    """`method` − `against` as the t interval over the subsample draws of a re-read encoder ('–' with one draw
    or none)."""
    if res.read(model) is None or res.readings[model].n_draws < 2:
        return "–"
    return f"{_iv(res.readings[model].over_draws(method, against, pooling))} ({res.readings[model].n_draws} draws)"


#: the procedure `Result.white_sd_procedures` names the paired bootstrap that refits both transforms on every
#: resample: its resamples repeat pairs, which handicaps whitening, so its draws are not centred on its estimate
#: (an estimate outside its own interval); it decides nothing and the table leaves it out (the prose says why)
REFITTED = "bootstrap refitted"


def white_sd_table(res: Result):
    """whitening − SoftDecay per encoder under the procedures that take estimate and interval from the same fits
    (`Result.white_sd_procedures`, less the refitted bootstrap), the subsample draws and the fit on all pairs (a
    point): the interval, and whether a finding reads it."""
    rows = [{"encoder": c["encoder"], "procedure": c["procedure"],
             "whitening − SoftDecay [95 %]": _iv(c["effect"]) if c["effect"].has_interval
             else f"{c['effect'].estimate:+.2f}",
             "read by the finding": "yes" if c["decides"] else ""}
            for c in res.white_sd_procedures() if not c["procedure"].startswith(REFITTED)]
    if not rows:
        return None          # nothing to show at this scale (the prose says what was run)
    return _scroll(common.table(pd.DataFrame(rows)))


def flipfree_table(res: Result, pooling: str | None = None):
    """Per encoder: SoftDecay and its flip-free variants minus the raw model (paired bootstrap, draw 0; and
    the t interval over the subsample draws where there are several), and the directions each turns around
    (most over the sets and draws, of the live directions). An encoder read on every pair only
    (`Result.full_only`) follows, from that reading."""
    rows = []
    every = [(m, True) for m in res.full_only()]
    for m, full in [(m, False) for m in _read_models(res)] + every:
        reading = "every pair" if full else "draws"
        for method in ("SoftDecay (sentence)", *FLIP_FREE):
            diff = res.full_readings[m].vs_raw(method, pooling) if full else res.readings[m].vs_raw(method, pooling)
            rows.append({"encoder": f"{m} (every pair)" if full else m, "method": SHORT[method],
                         "Δ vs raw [95 %]": _iv(diff),
                         "over subsample draws [95 %]": "–" if full else _draws_iv(res, m, method, "vanilla", pooling),
                         "flipped (most per set)": int(res.flips_over_sets(m, method, "max", reading, pooling)),
                         "live directions (fewest per set)": int(res.flips_over_sets(m, "directions", "min", reading,
                                                                                     pooling))})
    if not rows:
        return None          # nothing to show at this scale (the prose says what was run)
    return common.table(pd.DataFrame(rows))


def drivers_table(res: Result, model: str | None = None, pooling: str | None = None):
    """Per set: SoftDecay − raw and whitening − raw (paper protocol): which sets drive the means."""
    model = model or res.models[0]
    if res.read(model) is None:
        return None          # nothing to show at this scale (the prose says what was run)
    df = pd.DataFrame({f"{SHORT[m]} − raw": res.readings[model].diffs(m, pooling)
                       for m in ("SoftDecay (sentence)", "whitening")})
    return common.table(df.reset_index(), digits=2)


def anisotropy_table(res: Result):
    """Per encoder and pooling, means over the sets: EV₁ (eq. 5) before and after whitening, EV₁ of the
    centred rows (a dominant variance direction) and the common mean's share of the second moment. An encoder
    read on every pair only (`Result.full_only`) follows, from that reading."""
    names = {"EV1": "EV₁", "EV1_whitened": "EV₁ whitened", "EV1_centred": "EV₁ centred", "mean_share": "mean's share"}
    rows = [{"encoder": m, "pooling": POOLING_LABEL[q],
             **{v: res.readings[m].anisotropy(k, q) for k, v in names.items()}}
            for m in _read_models(res) for q in res.poolings]
    rows += [{"encoder": f"{m} (every pair)", "pooling": POOLING_LABEL[q],
              **{v: res.full_readings[m].anisotropy(k, q) for k, v in names.items()}}
             for m in res.full_only() for q in res.poolings]
    if not rows:
        return None          # nothing to show at this scale (the prose says what was run)
    return common.table(pd.DataFrame(rows), digits=4)


def planted_dirs_table(res: Result):
    """The planted experiment over random directions: each method's change from the raw score at the
    largest size, and the share of the raw model's loss it wins back, each with its t-interval over
    the directions."""
    rows = [{"planted": {"mean": "a common vector", "spike": "a dominant direction"}[k], "method": SHORT[m],
             "score − raw at the largest size": _iv(res.planted_change(k, m)),
             "share of the loss won back": _iv(res.recovered_iv(k, m))}
            for k in ("mean", "spike") for m in PLANT_METHODS[1:]]
    return common.table(pd.DataFrame(rows))


def lsds_readings_table(res: Result):
    """LSDS of SoftDecay − of whitening per set under the three readings of eq. (6)."""
    df = res.lsds_readings()
    if df.empty:
        return None          # nothing to show at this scale (the prose says what was run)
    return common.table(df.rename(columns={"authors": "authors' code"}).reset_index(), digits=3)


def _shown(res: Result, has) -> list[str]:
    """The encoders of `FIGURE_MODELS` whose run holds what a figure draws (`has(run)`), in that order."""
    runs = res.all_runs()
    return [m for m in FIGURE_MODELS if m in runs and has(runs[m])]


def alpha_sweep_figure(res: Result) -> plt.Figure:
    """Spearman ×100 of sentence-level SoftDecay against α, one panel per encoder (in-scope first), one curve per
    set; one legend of the sets beneath."""
    models = _shown(res, lambda r: bool(r.alpha_sweep)) or [res.models[0]]
    fig, axes = plt.subplots(1, len(models), figsize=(2.6 * len(models) + 0.3, 3.6), squeeze=False)
    for ax, m in zip(axes[0], models, strict=True):
        df = res.run_of(m).alpha_scores()
        for d in df.columns:
            ax.plot(df.index, df[d], marker="o", ms=3, label=d)
        ax.set_xlabel("α")
        ax.set_title(SHORT_NAME.get(m, m))
    axes[0, 0].set_ylabel("Spearman ×100")
    fig.legend(*axes[0, 0].get_legend_handles_labels(), loc="lower center", ncol=4, frameon=False,
               bbox_to_anchor=(0.5, -0.02))
    fig.tight_layout(rect=(0, 0.14, 1, 1))
    return fig


def alpha_sweep_table(res: Result):
    """Spearman ×100 of sentence-level SoftDecay per set (rows) and α (columns)."""
    df = res.run_of(res.models[0]).alpha_scores().T
    df.columns = [f"α = {a:g}" for a in df.columns]
    df.index.name = "set"
    return common.table(df.reset_index(), digits=2)


#: the flips table's columns: every count is summed over the two sentence matrices of a set (first and
#: second sentences, N × d each, transformed separately), so a rank can reach 2d
FLIP_COLUMNS = {"rank": "rank", "sigma_min": "σ min", "sigma_max": "σ max", "raw": "flipped: σ",
                "sqrt_n": "flipped: σ/√N", "max": "flipped: σ/max σ"}


def flips_table(res: Result):
    """Per encoder and set: SoftDecay's sign-flipped directions under each scaling, out of the rank
    (both summed over the set's two sentence matrices), with the smallest and largest singular value."""
    parts = [res.run_of(m).flips().reset_index().assign(encoder=m) for m in res.all_runs()]
    df = pd.concat(parts)
    out = pd.DataFrame({"encoder, set": [f"{e}, {d}" for e, d in zip(df.encoder, df.set, strict=True)],
                        "rank": df["rank"],
                        "σ min – max": [f"{a:.3g} – {b:.3g}" for a, b in zip(df.sigma_min, df.sigma_max, strict=True)],
                        **{FLIP_COLUMNS[k]: df[k] for k in ("raw", "sqrt_n", "max")}})
    return common.table(out, digits=3)


def table4(res: Result):
    """Table 4: EV₁, log RBF_dis and TokenUni per set (rows) of the raw, whitened and SoftDecay
    embeddings, the paper's BERT columns beside."""
    t4 = res.runs[res.models[0]].table4
    name = {"EV1": "EV₁", "RBF_dis": "RBF_dis", "TokenUni": "TokenUni"}
    rows = [{"set, measure": f"{d}, {name[metric]}",
             **{k: t4[d][k][metric] for k in ("vanilla", "whitening", "SoftDecay")},
             "paper: BERT → +SoftDecay": (f"{res.paper_table4_value(d, metric, 'BERT'):.4g} → "
                                          f"{res.paper_table4_value(d, metric, 'BERT+SoftDecay'):.4g}")}
            for metric in ("EV1", "RBF_dis", "TokenUni") for d in res.datasets]
    return common.table(pd.DataFrame(rows).rename(columns={"vanilla": "raw"}), digits=3)


def control_table(res: Result):
    """Table 4's control: the measures of structureless sets (columns shuffled; Gaussian) before and
    after SoftDecay, beside the real embeddings'."""
    rows = []
    run = res.runs[res.models[0]]
    short = {"EV1": "EV₁", "RBF_dis": "RBF", "TokenUni": "TokenUni"}
    for d in res.datasets:
        t = run.table4[d]
        inputs = {"sentence embeddings": {"before": t["vanilla"], "after": t["SoftDecay"]},
                  **run.control.get(d, {})}
        for kind, c in inputs.items():
            rows.append({"set, input": f"{d}, {kind}",
                         **{f"{short[k]}: before → after": f"{c['before'][k]:.3f} → {c['after'][k]:.3f}"
                            for k in c["before"]}})
    return common.table(pd.DataFrame(rows), digits=3)


def lsds_figure(res: Result) -> plt.Figure:
    """LSDS of the identity, whitening and SoftDecay per set, a row per encoder (`Result.figure_models`: in the
    claims' scope first), with eq. (6)'s raw RBF weights (left) and weights normalised to sum to one (right); one
    legend above."""
    models = res.figure_models()
    fig, axes = plt.subplots(len(models), 2, figsize=(8.2, 3.1 * len(models) + 0.4), squeeze=False)
    for row, m in zip(axes, models, strict=True):
        ls = pd.DataFrame(res.lsds_of(m)).T
        for ax, w in zip(row, ("eq. 6", "normalised"), strict=True):
            ls[[c for c in ls.columns if c.endswith(f"({w})")]].rename(columns=lambda c: c.split(" (")[0]).plot.bar(
                ax=ax, rot=45, color=["0.6", "tab:blue", "tab:orange"], legend=False)
            ax.set_title(f"{SHORT_NAME.get(m, m)}: {w} weights", fontsize=LEGEND + 1)
            ax.set_xlabel("")
            ax.tick_params(labelsize=LEGEND + 1)
        row[0].set_ylabel("LSDS (12 neighbours)", fontsize=LEGEND + 1)
    handles, labels = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="upper center", ncol=3, fontsize=LEGEND + 1, frameon=False,
               bbox_to_anchor=(0.5, 1.0))
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.35 / fig.get_figheight()))
    return fig


#: the two Table 1 differences the path figure draws: (our method, against, the paper's method, against, label)
PATH_PANELS = (("SoftDecay (sentence)", "vanilla", "SoftDecay", "vanilla", "SoftDecay − raw model"),
               ("whitening", "SoftDecay (sentence)", "WhiteBERT", "SoftDecay", "whitening − SoftDecay"))
#: the finding each panel's band is read for
PATH_FINDINGS = ("sts-gain-bert", "sts-vs-whitening-bert")
#: the paper's models by their short names on the figure
PAPER_SHORT = {"bert-base-cased": "BERT", "distilbert-base-uncased": "DistilBERT", "albert-base": "ALBERT",
               "roberta-base": "RoBERTa"}


def _label_points(ax, points: list[tuple[str, float, float]], step: float = 1.25, avoid=()) -> list:
    """Name each point (name, x, y) without two names overlapping, nor a name and a box of `avoid` ((x0, y0, x1, y1)
    in data units): each name is set above and to the right of its point, and one that would overlap is raised by
    `step` lines of its type until it is clear, with a leader line back to its point. Points are named left to
    right. Returns the texts."""
    fig = ax.figure
    renderer = fig.canvas.get_renderer()
    placed = [Bbox(ax.transData.transform([(x0, y0), (x1, y1)])).expanded(1.0, 1.0) for x0, y0, x1, y1 in avoid]
    texts = []
    for name, x, y in sorted(points, key=lambda t: t[1]):
        for k in range(12):
            dy = 5 + k * step * LEGEND
            t = ax.annotate(name, (x, y), textcoords="offset points", xytext=(9, dy), fontsize=LEGEND,
                            arrowprops=dict(arrowstyle="-", color="0.4", lw=0.6, shrinkA=0, shrinkB=2) if k else None)
            t.update_positions(renderer)
            box = Text.get_window_extent(t, renderer).expanded(1.05, 1.1)      # the name alone, not its leader
            if k == 11 or not any(box.overlaps(b) for b in placed):
                break
            t.remove()
        placed.append(box)
        texts.append(t)
    return texts


def path_figure(res: Result) -> plt.Figure:
    """Table 1's axis, one panel per difference (SoftDecay − raw; whitening − SoftDecay), Spearman ×100 against the
    raw score: the paper's models (diamonds) with their straight line and its 95 % prediction band; the book MLM
    BERT's pretraining checkpoints, a line per seed; its own trend carried to BERT-base-cased's raw score, with the
    band there that the finding's verdict at the paper's setting is read from (the bar at the right: the family's
    level, `experiments.findings.corrected`); the encoders read on every pair (the in-scope stand-ins filled, the
    contrastive ones hollow)."""
    fig, axes = plt.subplots(1, 2, figsize=(8.2, 4.8))
    found = {f.key: f.at_scale for f in corrected(res.findings()) if f.key in PATH_FINDINGS}
    target = res.paper_value("vanilla", against=None)
    # per panel the paper's models (named once the layout is set) and what their names keep clear of (the band's bar)
    names: list[tuple[list[tuple[str, float, float]], list]] = []
    for ax, (ours, against, paper, paper_against, label), key in zip(axes, PATH_PANELS, PATH_FINDINGS, strict=True):
        trend = res.paper_trend(paper, paper_against)
        lo_x = min([*trend.x, *res.path_points(ours, against)["raw"].tolist(), target]) - 2
        xs = np.linspace(lo_x, max(trend.x) + 2, 80)
        band = [trend.predict(x) for x in xs]
        ax.fill_between(xs, [b.low for b in band], [b.high for b in band], color="0.88",
                        label="paper's models: 95 % band")
        ax.plot(xs, [trend.value(x) for x in xs], color="0.45", lw=1)
        ax.scatter(trend.x, trend.y, marker="D", color="k", s=28, zorder=4, label="paper's models")
        named, avoid = [], []
        for r in res.paper_table1:
            if r["method"] == "vanilla" and r["model"] in PAPER_SHORT:
                x = res.paper_value("vanilla", r["model"], None)
                if x in trend.x:
                    named.append((PAPER_SHORT[r["model"]], x, trend.y[trend.x.index(x)]))
        names.append((named, avoid))
        pts = res.path_points(ours, against)
        for seed, g in pts.groupby("seed"):
            ax.plot(g["raw"], g["effect"], marker="o", ms=3.5, lw=1.2,
                    label=f"book MLM BERT, seed {seed} (checkpoints)")
        t = found.get(key)
        if t is not None:
            a, b = t.fits[0].coefficients
            xx = np.linspace(min(t.x), target, 40)
            ax.plot(xx, a + b * xx, ls="--", color="tab:red", lw=1.2, label="its trend, carried to BERT-base's raw")
            ax.errorbar([target + 0.6], [t.band.estimate], yerr=[[t.band.estimate - t.band.low],
                                                                 [t.band.high - t.band.estimate]],
                        fmt="s", color="tab:red", capsize=3, ms=4, zorder=5)
            avoid.append((target, t.band.low, target + 1.2, t.band.high))
        for m in (SMOL, "all-MiniLM-L6-v2", MPNET):
            if m in res.full_readings:
                r = res.full_readings[m]
                y = r.avg(ours) - r.avg(against)
                out = m != SMOL
                ax.scatter([r.avg("vanilla")], [y], marker="s", s=30, zorder=4,
                           facecolors="none" if out else "tab:purple", edgecolors="tab:purple",
                           label="SmolLM2" if not out else ("contrastive encoders (out of scope)"
                                                            if m == "all-MiniLM-L6-v2" else None))
        ax.axhline(0, color="0.3", lw=0.8)
        ax.axvline(target, color="0.6", lw=0.8, ls=":")
        ax.set_xlabel("raw STS, Table 1 Avg (Spearman ×100)")
        ax.set_ylabel(f"{label} (×100)")
        ax.set_title(label, fontsize=LEGEND + 2)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=2, frameon=False, fontsize=LEGEND, bbox_to_anchor=(0.5, -0.02))
    fig.tight_layout(rect=(0, 0.2, 1, 1))
    for ax, (named, avoid) in zip(axes, names, strict=True):
        ax.set_xlim(ax.get_xlim())
        ax.set_ylim(ax.get_ylim())
        _label_points(ax, named, avoid=avoid)
    return fig


def path_numbers(res: Result) -> dict:
    """The numbers the prose quotes about Table 1's axis (`sts-axis-*`, `sts-path-*`): the paper's models' trend read
    at the book BERT's raw score, and the book BERT's own path carried to BERT-base-cased's raw score, with the
    verdicts its two findings take there."""
    from ..core.stats import against_trend

    nan = float("nan")
    out: dict = {"sts-axis-n-models": res.paper_trend("SoftDecay").n, "sts-axis-paper-at-bert": "–",
                 "sts-axis-bert-reading": "–", "sts-path-n": 0, "sts-path-seeds": 0, "sts-path-last-steps": "–",
                 "sts-path-raw-lo": nan, "sts-path-raw-hi": nan, "sts-path-sd-lo": nan, "sts-path-sd-hi": nan,
                 "sts-path-target": res.paper_value("vanilla", against=None), "sts-path-sd-band": "–",
                 "sts-path-white-band": "–", "sts-path-sd-verdict": "–", "sts-path-white-verdict": "–",
                 "sts-path-forms": "–", "sts-path-end-raw": nan}
    if BOOK_BERT in res.full_readings:
        raw = res.full_readings[BOOK_BERT].avg("vanilla")
        trend = res.paper_trend("SoftDecay")
        out.update({"sts-axis-n-models": trend.n, "sts-axis-paper-at-bert": trend.predict(raw).text(2),
                    "sts-axis-bert-reading": against_trend(res.full_readings[BOOK_BERT].vs_raw(), trend, raw)})
    path = res.path_summary()
    if not path:
        return out
    found = {f.key: f for f in corrected(res.findings()) if f.key in PATH_FINDINGS}
    t_sd, t_white = (found[k].at_scale if k in found else None for k in PATH_FINDINGS)
    out.update({
        "sts-path-n": path["n"], "sts-path-seeds": path["seeds"],
        "sts-path-last-steps": " and ".join(f"{int(v):,}" for v in path["last_steps"]),
        "sts-path-raw-lo": path["raw_lo"], "sts-path-raw-hi": path["raw_hi"],
        "sts-path-sd-lo": path["sd_lo"], "sts-path-sd-hi": path["sd_hi"],
        "sts-path-target": res.paper_value("vanilla", against=None),
        "sts-path-sd-band": t_sd.band.text(2) if t_sd else "–",
        "sts-path-white-band": t_white.band.text(2) if t_white else "–",
        "sts-path-sd-verdict": found["sts-gain-bert"].paper_scale_verdict if "sts-gain-bert" in found else "–",
        "sts-path-white-verdict": (found["sts-vs-whitening-bert"].paper_scale_verdict
                                   if "sts-vs-whitening-bert" in found else "–"),
        "sts-path-forms": " and ".join(t_sd.forms) if t_sd else "–",
        "sts-path-end-raw": path["end_raw"],
    })
    return out


def _missing(what: str, why: str = "was not among the datasets run") -> plt.Figure:
    fig, ax = plt.subplots(figsize=(8, 1.5))
    ax.text(0.5, 0.5, f"{what} {why}", ha="center", va="center")
    ax.set_axis_off()
    return fig


#: line styles that tell the layers apart beside their colours
STYLES = ("-", "--", "-.", ":", (0, (5, 1)), (0, (3, 1, 1, 1, 1, 1)), (0, (1, 1)))


def _cdf(ax, values, title: str) -> None:
    """One empirical CDF per layer, each in its own colour and line style (the last layer darkest)."""
    colors = plt.get_cmap("viridis_r")(np.linspace(0.25, 1.0, len(values)))
    for i, ((label, v), c) in enumerate(zip(values, colors, strict=True)):
        v = np.sort(np.asarray(v, float).ravel())
        ax.plot(v, np.arange(1, v.size + 1) / v.size, label=label, color=c, lw=1.8, ls=STYLES[i % len(STYLES)])
    ax.set_xlabel(r"$\sigma/\sigma_{\max}$", fontsize=LEGEND + 1)
    ax.set_title(title, fontsize=LEGEND + 1)
    ax.tick_params(labelsize=LEGEND)


def ordinal(n: int) -> str:
    """'second', 'fifth', …: how a stride is said in a caption ('every fifth layer'); '12th' past twelve."""
    words = ("", "", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth", "eleventh",
             "twelfth")
    return words[n] if 2 <= n < len(words) else ("" if n == 1 else f"{n}th")


def cdf_stride(n_layers: int) -> int:
    """Which layers a row of the CDF figure draws: every `cdf_stride`-th (and the last), at most about seven."""
    return max(1, n_layers // 6)


def cdf_figure(res: Result) -> plt.Figure:
    """CDFs of the normalised singular values of each layer's sentence-embedding matrix (STS-B), a row per encoder
    (in-scope first): before SoftDecay; after it on the last layer only (as the paper's Fig. 3), and on every layer.
    The legend in each row's first panel names its layers (colour and line style)."""
    models = [m for m in _shown(res, lambda r: bool(r.cdf)) if m in CDF_MODELS] or _shown(res, lambda r: bool(r.cdf))
    if not models:
        return _missing("STS-B")
    fig, axes = plt.subplots(len(models), 3, figsize=(8.5, 2.8 * len(models) + 0.2), sharey=True, squeeze=False)
    for row, m in zip(axes, models, strict=True):
        cdf = res.run_of(m).cdf
        layers = range(len(cdf["before"]))
        every = cdf_stride(len(cdf["before"]))
        shown = [i for i in layers if i % every == 0 or i == len(cdf["before"]) - 1]
        before = [(f"layer {i}", np.asarray(cdf["before"][i]) / max(cdf["before"][i])) for i in shown]
        last = shown[-1]
        _cdf(row[0], before, f"{SHORT_NAME.get(m, m)}: before")
        _cdf(row[1], before[:-1] + [(f"layer {last}, after", np.asarray(cdf["after"][-1]) / max(cdf["after"][-1]))],
             "last layer transformed")
        _cdf(row[2], [(f"layer {i}", np.asarray(cdf["after"][i]) / max(cdf["after"][i])) for i in shown],
             "every layer transformed")
        row[0].set_ylabel("F(x)", fontsize=LEGEND + 1)
        row[1].legend(fontsize=LEGEND, loc="lower right", frameon=True, handlelength=2.4)
    fig.tight_layout()
    return fig


def planted_figure(res: Result) -> plt.Figure:
    """Spearman ×100 (mean over the sets) against the planted size, a row per encoder (`Result.figure_models`: in
    the claims' scope first): left a common vector, right a common direction with a random coefficient per sentence;
    one legend of the methods beneath."""
    models = res.figure_models()
    fig, axes = plt.subplots(len(models), 2, figsize=(8.2, 2.6 * len(models) + 0.7), sharey="row", squeeze=False)
    for row, m in zip(axes, models, strict=True):
        for ax, kind in zip(row, ("mean", "spike"), strict=True):
            df = res.planted_of(m, kind)
            for method in df.columns:
                ax.plot(df.index, df[method], marker="o", ms=4, label=SHORT.get(method, method))
            ax.set_title(f"{SHORT_NAME.get(m, m)}: " + {"mean": "a common vector", "spike": "a common direction"}[kind],
                         fontsize=LEGEND + 1)
        row[0].set_ylabel("Spearman ×100")
    for ax in axes[-1]:
        ax.set_xlabel("planted size (× RMS row norm)")
    fig.legend(*axes[0, 0].get_legend_handles_labels(), loc="lower center", ncol=5, frameon=False,
               fontsize=LEGEND + 1, bbox_to_anchor=(0.5, 0.0))
    fig.tight_layout(rect=(0, 0.35 / fig.get_figheight(), 1, 1))
    return fig



def _tsne_axes(axes, panels: dict, with_titles: bool = True) -> None:
    for ax, (method, p) in zip(axes, panels.items(), strict=True):
        xy, k = np.asarray(p["xy"]), p["n"]
        ax.scatter(xy[:k, 0], xy[:k, 1], s=5, c="k", label="sentence 1")
        ax.scatter(xy[k:, 0], xy[k:, 1], s=5, c="tab:red", label="sentence 2")
        if with_titles:
            ax.set_title(method.replace(" (sentence)", ""), fontsize=LEGEND + 2)
            ax.set_xlabel(f"EV₁ {p['EV1']:.3f} · TokenUni {p['TokenUni']:.3f}\n"
                          f"RBF {p['RBF_dis']:.2f} · LSDS {p['LSDS']:.3f}", fontsize=LEGEND + 1)
        ax.set_xticks([])
        ax.set_yticks([])



def tsne_figure(res: Result) -> plt.Figure:
    """t-SNE of a sample of STS-15 pairs under vanilla, whitening and SoftDecay fitted on the whole set, a row per
    encoder (`Result.figure_models`: in the claims' scope first), with the measures of the whole set as scored
    (beneath each map)."""
    models = [m for m in res.figure_models() if "STS15" in res.maps_of(m)]
    if not models:
        return _missing("STS15")
    fig, axes = plt.subplots(len(models), 3, figsize=(8.2, 3.5 * len(models) + 0.3), squeeze=False)
    for row, m in zip(axes, models, strict=True):
        _tsne_axes(row, res.maps_of(m)["STS15"])
        row[0].set_ylabel(SHORT_NAME.get(m, m), fontsize=LEGEND + 2)
    fig.legend(*axes[0, 0].get_legend_handles_labels(), loc="upper center", ncol=2, fontsize=LEGEND + 1,
               frameon=False, markerscale=3, bbox_to_anchor=(0.5, 1.0))
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.35 / fig.get_figheight()))
    return fig



def tsne_grid(res: Result, model: str) -> plt.Figure:
    """t-SNE of every set but STS15 for one encoder, rows vanilla / whitening / SoftDecay (as `tsne_figure`), tall
    enough that the measures beneath each map stay legible at page width."""
    tsne = res.maps_of(model)
    sets = [d for d in res.datasets if d != "STS15" and d in tsne]
    if not sets:
        return _missing("a set other than STS15")
    fig, axes = plt.subplots(3, len(sets), figsize=(8.2, 7.2), squeeze=False)
    for j, d in enumerate(sets):
        panels = tsne[d]
        _tsne_axes(axes[:, j], panels, with_titles=False)
        axes[0, j].set_title(d, fontsize=LEGEND + 2)
        for i, (method, p) in enumerate(panels.items()):
            axes[i, j].set_xlabel(f"EV₁ {p['EV1']:.2f}\nLSDS {p['LSDS']:.2f}", fontsize=LEGEND + 1)
            if j == 0:
                axes[i, j].set_ylabel(method.replace(" (sentence)", ""), fontsize=LEGEND + 2)
    fig.tight_layout()
    return fig



def encoder_table(res: Result):
    """Cosine similarities of the three demo sentences under `SoftDecayEncoder(mode="token")`."""
    d = res.encoder_demo
    return common.table(pd.DataFrame(d["cosine"], index=d["labels"], columns=d["labels"]), index=True)


def _nan_if_missing(res: Result, model: str, f) -> object:
    return f() if model in res.all_runs() else float("nan")


def _text_if_run(res: Result, model: str, f) -> str:
    return _iv(f()) if model in res.all_runs() else "–"


def _text_if_draws(res: Result, model: str, method: str, against: str = "vanilla") -> str:
    """`method` − `against` over the subsample draws of a re-read encoder ('–' with fewer than two draws)."""
    rd = res.read(model)
    return _iv(rd.over_draws(method, against)) if rd and rd.n_draws > 1 else "–"


def _f_at_zero(alpha: float) -> float:
    """Eq. (2) at λ = 0, the value SoftDecay gives the smallest directions (−inf at α = −1)."""
    return float(softdecay(torch.zeros((), dtype=torch.float64), alpha)) if alpha > -1 else -math.inf


def publish(res: Result) -> None:
    """Glue the figures and every number the prose quotes (`sts-*`): numbers and intervals only, one literal dict
    per part of the chapter."""
    common.set_theme()
    _publish_setting(res)
    _publish_full(res)
    _publish_anisotropic(res)
    _publish_minilm(res)
    _publish_planted(res)
    _publish_sweep_table4_lsds(res)
    _publish_flips(res)
    common.publish(path_numbers(res))
    _publish_figures(res)


def _publish_setting(res: Result) -> None:
    """What is run: the settings the prose states, what each encoder is (`hf.models.DESCRIPTIONS`), how many sets,
    pairs and draws, and the paper's values the chapter measures against."""
    m = res.models[0]
    common.publish({
        "sts-alpha": res.alpha, "sts-alpha-abs": abs(res.alpha), "sts-f0": _f_at_zero(res.alpha),
        "sts-about-bert": about(BOOK_BERT), "sts-about-smol": about(SMOL), "sts-about-minilm": about(m),
        "sts-about-mpnet": about(MPNET), "sts-smol-width": WIDTH[SMOL], "sts-minilm-width": WIDTH[m],
        "sts-fig3-smol-stride": (ordinal(cdf_stride(len(res.run_of(SMOL).cdf["before"])))
                                 if SMOL in res.all_runs() and res.run_of(SMOL).cdf else "–"),
        "sts-n-sets": len(res.datasets), "sts-n-other-sets": len(res.datasets) - 1,
        "sts-crossfit-splits": next((s.settings["splits"] for s in res.samefit.values()), CROSSFIT_SPLITS),
        "sts-extra-pairs": res.extra_max_pairs,
        "sts-minilm-pairs": res.run_of(m).n_pairs,
        "sts-reading-pairs": res.reading_pairs,
        "sts-full-pairs": res.full_readings[m].n_pairs if m in res.full_readings else 0,
        "sts-smol-draws": res.readings[SMOL].n_draws if res.read(SMOL) else 0,
        "sts-bert-draws": res.readings[BOOK_BERT].n_draws if res.read(BOOK_BERT) else 0,
        "sts-plant-dirs": res.plant_directions,
        "sts-map-pairs": res.map_pairs(),
        "sts-paper-raw": res.paper_value("vanilla", against=None),
        "sts-paper-white-sd": res.paper_value("WhiteBERT", against="SoftDecay"),
        "sts-paper-ev1-change": res.paper_table4_change("EV1"),
        "sts-paper-sts14-ev1-bert-sd": res.paper_table4_value("STS14", "EV1", "BERT+SoftDecay"),
        "sts-paper-sts14-ev1-albert": res.paper_table4_value("STS14", "EV1", "ALBERT"),
    })


def _publish_full(res: Result) -> None:
    """Table 1 on every pair (`full_readings`), per encoder under both poolings: raw scores, differences from the
    raw model, whitening − SoftDecay cross-fitted, EV₁."""
    m, other = res.models[0], _other_pooling(res)
    full = res.full_readings
    common.publish({
        "sts-full-minilm-raw": _full_number(res, m, lambda: full[m].avg("vanilla")),
        "sts-full-minilm-sd": _text_if_full(res, m, lambda: full[m].vs_raw()),
        "sts-full-minilm-sd-emb": _text_if_full(res, m, lambda: full[m].vs_raw(pooling=other)),
        "sts-full-minilm-white-sd": _text_if_full(res, m, lambda: res.samefit[m].iv() if m in res.samefit else None),
        "sts-full-minilm-ev1": _full_number(res, m, lambda: full[m].anisotropy()),
        "sts-full-smol-ev1": _full_number(res, SMOL, lambda: full[SMOL].anisotropy()),
        "sts-full-smol-sd": _text_if_full(res, SMOL, lambda: full[SMOL].vs_raw()),
        # the book's MLM BERT on every pair (its weights remade by scripts/export_book_model.py --train)
        "sts-full-bert-raw": _full_number(res, BOOK_BERT, lambda: full[BOOK_BERT].avg("vanilla")),
        "sts-full-bert-sd": _text_if_full(res, BOOK_BERT, lambda: full[BOOK_BERT].vs_raw()),
        "sts-full-bert-sd-emb": _text_if_full(res, BOOK_BERT, lambda: full[BOOK_BERT].vs_raw(pooling=other)),
        "sts-full-bert-white": _text_if_full(res, BOOK_BERT, lambda: full[BOOK_BERT].vs_raw("whitening")),
        "sts-full-bert-clamped": _text_if_full(res, BOOK_BERT, lambda: full[BOOK_BERT].vs_raw("SoftDecay (clamped)")),
        "sts-full-bert-ev1": _full_number(res, BOOK_BERT, lambda: full[BOOK_BERT].anisotropy()),
        # all-mpnet-base-v2, read on every pair only (a contrastive sentence encoder of BERT-base's size)
        "sts-full-mpnet-raw": _full_number(res, MPNET, lambda: full[MPNET].avg("vanilla")),
        "sts-full-mpnet-raw-emb": _full_number(res, MPNET, lambda: full[MPNET].avg("vanilla", other)),
        "sts-full-mpnet-sd": _text_if_full(res, MPNET, lambda: full[MPNET].vs_raw()),
        "sts-full-mpnet-sd-emb": _text_if_full(res, MPNET, lambda: full[MPNET].vs_raw(pooling=other)),
        "sts-full-mpnet-white": _text_if_full(res, MPNET, lambda: full[MPNET].vs_raw("whitening")),
        "sts-full-mpnet-clamped": _text_if_full(res, MPNET, lambda: full[MPNET].vs_raw("SoftDecay (clamped)")),
        "sts-mpnet-ev1": _full_number(res, MPNET, lambda: full[MPNET].anisotropy()),
        "sts-mpnet-ev1-emb": _full_number(res, MPNET, lambda: full[MPNET].anisotropy(pooling=other)),
    })


def _publish_anisotropic(res: Result) -> None:
    """The anisotropic encoders (the book's MLM BERT, SmolLM2): their main runs, their readings over subsample
    draws, whitening − SoftDecay under the same-fit procedures, and what their anisotropy is made of."""
    bert, smol = res.read(BOOK_BERT), res.read(SMOL)
    same = res.samefit
    common.publish({
        "sts-bert-ev1": _nan_if_missing(res, BOOK_BERT, lambda: res.run_of(BOOK_BERT).mean_metric("vanilla")),
        "sts-bert-gain": _text_if_run(res, BOOK_BERT, lambda: res.run_of(BOOK_BERT).vs_raw("SoftDecay (sentence)")),
        "sts-bert-white": _text_if_run(res, BOOK_BERT, lambda: res.run_of(BOOK_BERT).vs_raw("whitening")),
        "sts-bert-sd-token": _text_if_run(res, BOOK_BERT, lambda: res.run_of(BOOK_BERT).vs_raw("SoftDecay (token)")),
        "sts-bert-deesc": _text_if_run(res, BOOK_BERT, lambda: res.run_of(BOOK_BERT).vs_raw("de-escalation")),
        "sts-smol-ev1": _nan_if_missing(res, SMOL, lambda: res.run_of(SMOL).mean_metric("vanilla")),
        "sts-smol-gain": _text_if_run(res, SMOL, lambda: res.run_of(SMOL).vs_raw("SoftDecay (sentence)")),
        "sts-smol-white": _text_if_run(res, SMOL, lambda: res.run_of(SMOL).vs_raw("whitening")),
        "sts-smol-white-256": _text_if_run(res, SMOL, lambda: res.run_of(SMOL).vs_raw("whitening-256")),
        # whitening − SoftDecay under the same-fit procedures
        "sts-smol-white-sd": _text_if_run(res, SMOL, lambda: res.white_minus_sd(SMOL)[0]),
        "sts-smol-white-sd-half": _iv(same[SMOL].iv(how="halfsample")) if SMOL in same else "–",
        "sts-mpnet-white-sd": _iv(same[MPNET].iv()) if MPNET in same else "–",
        "sts-mpnet-white-sd-half": _iv(same[MPNET].iv(how="halfsample")) if MPNET in same else "–",
        "sts-bert-white-sd": _text_if_run(res, BOOK_BERT, lambda: res.white_minus_sd(BOOK_BERT)[0]),
        "sts-bert-white-sd-half": _iv(same[BOOK_BERT].iv(how="halfsample")) if BOOK_BERT in same else "–",
        "sts-bert-white-sd-point": same[BOOK_BERT].point() if BOOK_BERT in same else float("nan"),
        "sts-bert-white-sd-draws": _text_if_draws(res, BOOK_BERT, "whitening", "SoftDecay (sentence)"),
        "sts-smol-refit-shift": abs(smol.refit_shift()) if smol else float("nan"),
        # over the subsample draws
        "sts-smol-sd-draws": _text_if_draws(res, SMOL, "SoftDecay (sentence)"),
        "sts-smol-clamped-draws": _text_if_draws(res, SMOL, "SoftDecay (clamped)"),
        "sts-bert-sd-draws": _text_if_draws(res, BOOK_BERT, "SoftDecay (sentence)"),
        "sts-bert-clamped-draws": _text_if_draws(res, BOOK_BERT, "SoftDecay (clamped)"),
        "sts-bert-deesc-draws": _text_if_draws(res, BOOK_BERT, "de-escalation"),
        # what the book BERT's anisotropy is made of (the authors' pooling)
        "sts-bert-mean-share": bert.anisotropy("mean_share") if bert else float("nan"),
        "sts-bert-ev1-paper": bert.anisotropy("EV1") if bert else float("nan"),
        "sts-bert-ev1-centred": bert.anisotropy("EV1_centred") if bert else float("nan"),
    })


def _publish_minilm(res: Result) -> None:
    """The contrastive encoder, under the authors' pooling (its re-reading) and the other reading (its main run)."""
    m = res.models[0]
    rd, run = res.readings[m], res.run_of(m)
    sick = "SICK-R" in res.datasets
    common.publish({
        "sts-minilm-raw": rd.avg("vanilla"),
        "sts-minilm-sd": _iv(rd.vs_raw("SoftDecay (sentence)")),
        "sts-minilm-white": _iv(rd.vs_raw("whitening")),
        "sts-minilm-white-sd": _iv(res.white_minus_sd(m)[0]),
        "sts-minilm-refit-shift": abs(rd.refit_shift()),
        "sts-minilm-sd-sick": float(rd.diffs("SoftDecay (sentence)")["SICK-R"]) if sick else float("nan"),
        "sts-minilm-sd-rest": rd.rest("SoftDecay (sentence)", "SICK-R") if sick else float("nan"),
        "sts-minilm-sd-sick-all": _iv(run.vs_raw("SoftDecay (sentence)", dataset="SICK-R")) if sick else "–",
        "sts-minilm-sd-rest-all": run.drop_one_set("SoftDecay (sentence)", "SICK-R") if sick else float("nan"),
        "sts-minilm-ev1": rd.anisotropy("EV1"),
        "sts-minilm-ev1-white": rd.anisotropy("EV1_whitened"),
        "sts-minilm-mean-share": rd.anisotropy("mean_share"),
        "sts-minilm-ev1-centred": rd.anisotropy("EV1_centred"),
        "sts-minilm-sd-token": _iv(run.vs_raw("SoftDecay (token)")),
        "sts-minilm-white-pooled": _iv(run.vs_raw("whitening", "pooled")),
        "sts-minilm-clamped": _iv(rd.vs_raw("SoftDecay (clamped)")),
    })


def _publish_planted(res: Result) -> None:
    """Planted anisotropy: the first model's curves (one direction), the share of the loss each method wins back
    over random directions, and the in-scope encoders' curves (`Result.planted_of`)."""
    curve = {k: res.planted(k) for k in ("mean", "spike")}
    smol = {k: res.planted_of(SMOL, k) for k in ("mean", "spike")} if SMOL in res.figure_runs else None
    common.publish({
        "sts-plant-top": float(res.plant_sizes[-1]),
        "sts-plant-mean-raw-0": float(curve["mean"]["vanilla"].iloc[0]),
        "sts-plant-mean-raw-top": float(curve["mean"]["vanilla"].iloc[-1]),
        "sts-plant-spike-raw-top": float(curve["spike"]["vanilla"].iloc[-1]),
        "sts-plant-spike-sd-won": _iv(res.recovered_iv("spike", "SoftDecay (sentence)")),
        "sts-plant-spike-white-won": _iv(res.recovered_iv("spike", "whitening")),
        "sts-plant-mean-deesc-won": _iv(res.recovered_iv("mean", "de-escalation")),
        "sts-plant-mean-sd-won": _iv(res.recovered_iv("mean", "SoftDecay (sentence)")),
        "sts-smol-plant-raw-0": float(smol["mean"]["vanilla"].iloc[0]) if smol else float("nan"),
        "sts-smol-plant-mean-raw-top": float(smol["mean"]["vanilla"].iloc[-1]) if smol else float("nan"),
        "sts-smol-plant-spike-raw-top": float(smol["spike"]["vanilla"].iloc[-1]) if smol else float("nan"),
    })


def _publish_sweep_table4_lsds(res: Result) -> None:
    """The α sweep, Table 4 and the LSDS (the paper's Fig. 6) under its three readings."""
    m = res.models[0]
    smol = SMOL in res.figure_runs
    common.publish({
        "sts-alpha-effect": _iv(res.run_of(m).alpha_effect()),
        "sts-alpha-margin": ALPHA_MARGIN,
        "sts-ev1-change": _iv(res.run_of(m).metric_change("EV1"), 3),
        "sts-bert-ev1-change": _text_if_run(res, BOOK_BERT, lambda: res.run_of(BOOK_BERT).metric_change("EV1")),
        "sts-lsds-wins": res.run_of(m).lsds_count("normalised"),
        "sts-lsds-wins-eq6": res.run_of(m).lsds_count("eq. 6"),
        "sts-lsds-sets": len(res.runs[m].lsds),
        "sts-lsds-gap": _iv(res.run_of(m).lsds_gap("normalised"), 3),
        "sts-lsds-gap-eq6": _iv(res.run_of(m).lsds_gap("eq. 6"), 3),
        "sts-lsds-wins-authors": res.lsds_reading_wins("authors"),
        "sts-lsds-gap-authors": _iv(res.lsds_reading_gap("authors"), 3),
        "sts-smol-lsds-wins": res.lsds_wins_of(SMOL, "normalised") if smol else 0,
        "sts-smol-lsds-wins-eq6": res.lsds_wins_of(SMOL, "eq. 6") if smol else 0,
        "sts-smol-lsds-gap": _iv(res.lsds_gap_of(SMOL, "normalised"), 3) if smol else "–",
    })


def _publish_flips(res: Result) -> None:
    """SoftDecay's sign flips: per encoder the fewest or most directions it reverses in a set (`Result.flips_over_sets`)
    in its main run, its readings over draws and on every pair, and the rank and singular values they are out of."""
    m = res.models[0]
    bert, smol = BOOK_BERT in res.all_runs(), res.read(SMOL) is not None
    bert_read, full = res.read(BOOK_BERT) is not None, res.full_readings

    def over(model, column, how, reading=None):
        return int(res.flips_over_sets(model, column, how, reading))

    common.publish({
        "sts-bert-flips-min": over(BOOK_BERT, "raw", "min") if bert else float("nan"),
        "sts-bert-flips-max": over(BOOK_BERT, "raw", "max") if bert else float("nan"),
        "sts-bert-rank": over(BOOK_BERT, "rank", "min") if bert else float("nan"),
        "sts-bert-flips-reread-min": over(BOOK_BERT, "SoftDecay (sentence)", "min", "draws") if bert_read else 0,
        "sts-bert-flips-reread-max": over(BOOK_BERT, "SoftDecay (sentence)", "max", "draws") if bert_read else 0,
        "sts-full-bert-flips-max": (over(BOOK_BERT, "SoftDecay (sentence)", "max", "every pair") if BOOK_BERT in full
                                    else float("nan")),
        "sts-smol-flips-max": over(SMOL, "SoftDecay (sentence)", "max", "draws") if smol else 0,
        "sts-smol-live-min": over(SMOL, "directions", "min", "draws") if smol else 0,
        "sts-minilm-flips-reread": over(m, "SoftDecay (sentence)", "max", "draws"),
        "sts-mpnet-flips-min": over(MPNET, "SoftDecay (sentence)", "min", "every pair") if MPNET in full else math.nan,
        "sts-mpnet-flips-max": over(MPNET, "SoftDecay (sentence)", "max", "every pair") if MPNET in full else math.nan,
        "sts-mpnet-live": over(MPNET, "directions", "min", "every pair") if MPNET in full else math.nan,
        "sts-sigma-min": float(res.flips_over_sets(m, "sigma_min", "min")),
        "sts-sigma-max": float(res.flips_over_sets(m, "sigma_max", "max")),
        "sts-flips-raw-max": over(m, "raw", "max"),
        "sts-flips-sqrtn-min": over(m, "sqrt_n", "min"),
        "sts-flips-max-min": over(m, "max", "min"),
        "sts-rank-min": over(m, "rank", "min"),
    })


def _publish_figures(res: Result) -> None:
    common.figure("sts-alpha-sweep", alpha_sweep_figure(res))
    common.figure("sts-fig6", lsds_figure(res))
    common.figure("sts-fig3", cdf_figure(res))
    common.figure("sts-fig4", tsne_figure(res))
    common.figure("sts-fig7", tsne_grid(res, res.models[0]))
    common.figure("sts-fig7-smol", tsne_grid(res, SMOL) if SMOL in res.figure_runs
                  else _missing("SmolLM2's t-SNE maps", "were not drawn at this scale"))
    common.figure("sts-planted", planted_figure(res))
    common.figure("sts-path", path_figure(res) if res.path else _missing("the book MLM BERT's pretraining path",
                                                                                "was not read at this scale"))
