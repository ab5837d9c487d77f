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


def runs_table(res: Result):
    """Which encoder ran, on how many pairs, and whether it was read from the committed results."""
    df = pd.DataFrame([{"encoder": m, "pairs": res.run_of(m).n_pairs,
                        "results": "read from committed results" if res.from_cache[m] else "computed now"}
                       for m in res.all_runs()])
    return common.table(df)


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
            scores = res.readings[m].scores(q).mean()
            rows.append({"encoder, pooling": f"{m}, {POOLING_LABEL[q]}" + (" (paper default)"
                                                                          if q == res.paper_pooling else ""),
                         **{SHORT[k]: scores[k] for k in POOLING_PARTS[part] if k in scores}})
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
                         "raw": full.scores(q)["vanilla"].mean(),
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
    df = pd.DataFrame({f"raw, {short[q]}": a["vanilla"], f"whitening, {short[q]}": a["whitening"],
                       f"SoftDecay, {short[q]}": a["SoftDecay (sentence)"],
                       f"raw, {short[other]}": b["vanilla"], f"SoftDecay, {short[other]}": b["SoftDecay (sentence)"]})
    df.loc["Avg"] = df.mean()
    df.index.name = "set"
    return common.table(df.reset_index(), digits=2)


def _text_if_full(res: Result, model: str, get) -> str:
    """An interval read on every pair, or '–' where `model` was not read on every pair at this scale."""
    return _iv(get()) if model in res.full_readings else "–"


def _full_number(res: Result, model: str, get) -> float:
    """A number read on every pair, or NaN where `model` was not read on every pair at this scale."""
    return float(get()) if model in res.full_readings else float("nan")


def _full_flips(res: Result, model: str, column: str, how: str) -> int | float:
    """The fewest (`how="min"`) or most (`"max"`) of a flip-count column over the sets on every pair (NaN where
    `model` was not read on every pair)."""
    if model not in res.full_readings:
        return float("nan")
    return int(getattr(res.full_readings[model].flip_counts()[column], how)())


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
        fl = res.full_readings[m].flip_counts(pooling) if full else res.readings[m].flip_counts(pooling)
        for method in ("SoftDecay (sentence)", *FLIP_FREE):
            diff = res.full_readings[m].vs_raw(method, pooling) if full else res.readings[m].vs_raw(method, pooling)
            rows.append({"encoder": f"{m} (every pair)" if full else m, "method": SHORT[method],
                         "Δ vs raw [95 %]": _iv(diff),
                         "over subsample draws [95 %]": "–" if full else _draws_iv(res, m, method, "vanilla", pooling),
                         "flipped (most per set)": int(fl[method].max()),
                         "live directions (fewest per set)": int(fl["directions"].min())})
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
    """LSDS of the identity, whitening and SoftDecay per set, with eq. (6)'s raw RBF weights (left) and
    weights normalised to sum to one (right); one legend above both panels."""
    ls = pd.DataFrame(res.runs[res.models[0]].lsds).T
    fig, axes = plt.subplots(1, 2, figsize=(8.2, 3.8))
    for ax, w in zip(axes, ("eq. 6", "normalised"), strict=True):
        ls[[c for c in ls.columns if c.endswith(f"({w})")]].rename(columns=lambda c: c.split(" (")[0]).plot.bar(
            ax=ax, rot=45, color=["0.6", "tab:blue", "tab:orange"], legend=False)
        ax.set_ylabel("LSDS (12 neighbours)", fontsize=LEGEND + 1)
        ax.set_title(f"{w} weights", fontsize=LEGEND + 2)
        ax.tick_params(labelsize=LEGEND + 1)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="upper center", ncol=3, fontsize=LEGEND + 1, frameon=False,
               bbox_to_anchor=(0.5, 1.06))
    fig.tight_layout()
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
    pts = res.path_points()
    if pts.empty:
        return out
    found = {f.key: f for f in corrected(res.findings()) if f.key in PATH_FINDINGS}
    t_sd, t_white = (found[k].at_scale if k in found else None for k in PATH_FINDINGS)
    last = pts.groupby("seed")["step"].max()
    out.update({
        "sts-path-n": len(pts), "sts-path-seeds": pts["seed"].nunique(),
        "sts-path-last-steps": " and ".join(f"{int(v):,}" for v in sorted(last.unique(), reverse=True)),
        "sts-path-raw-lo": float(pts["raw"].min()), "sts-path-raw-hi": float(pts["raw"].max()),
        "sts-path-sd-lo": float(pts["effect"].min()), "sts-path-sd-hi": float(pts["effect"].max()),
        "sts-path-target": res.paper_value("vanilla", against=None),
        "sts-path-sd-band": t_sd.band.text(2) if t_sd else "–",
        "sts-path-white-band": t_white.band.text(2) if t_white else "–",
        "sts-path-sd-verdict": found["sts-gain-bert"].paper_scale_verdict if "sts-gain-bert" in found else "–",
        "sts-path-white-verdict": (found["sts-vs-whitening-bert"].paper_scale_verdict
                                   if "sts-vs-whitening-bert" in found else "–"),
        "sts-path-forms": " and ".join(t_sd.forms) if t_sd else "–",
        "sts-path-end-raw": float(pts[pts["seed"] == pts["seed"].min()].iloc[-1]["raw"]),
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
    fig, axes = plt.subplots(len(models), 3, figsize=(8.5, 3.1 * len(models) + 0.2), sharey=True, squeeze=False)
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
    fig, axes = plt.subplots(1, 2, figsize=(8.2, 3.6), sharey=True)
    for ax, kind in zip(axes, ("mean", "spike"), strict=True):
        df = res.planted(kind)
        for m in df.columns:
            ax.plot(df.index, df[m], marker="o", label=m)
        ax.set_xlabel("planted size (× RMS row norm)")
        ax.set_title({"mean": "a common vector", "spike": "a common direction, random coefficient"}[kind])
    axes[0].set_ylabel("Spearman ×100, mean over sets")
    axes[1].legend(fontsize=LEGEND)
    return fig


def planted_table(res: Result):
    parts = [res.planted(k).rename(columns=lambda c, k=k: f"{k}: {c}") for k in ("mean", "spike")]
    return _scroll(common.table(pd.concat(parts, axis=1).reset_index(), digits=2))


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
    """t-SNE of a sample of STS-15 pairs under vanilla, whitening and SoftDecay fitted on the whole set, with
    the measures of the whole set as scored (beneath each map)."""
    panels = res.maps.get("sets", {}).get("STS15")
    if panels is None:
        return _missing("STS15")
    fig, axes = plt.subplots(1, 3, figsize=(8.2, 3.8))
    _tsne_axes(axes, panels)
    fig.legend(*axes[0].get_legend_handles_labels(), loc="upper center", ncol=2, fontsize=LEGEND + 1,
               frameon=False, markerscale=3, bbox_to_anchor=(0.5, 1.07))
    fig.tight_layout()
    return fig


def tsne_grid(res: Result) -> plt.Figure:
    """t-SNE of every other set, rows vanilla / whitening / SoftDecay (as `tsne_figure`), tall enough that the
    measures beneath each map stay legible at page width."""
    tsne = res.maps.get("sets", {})
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
    """Glue the figures and every number the prose quotes (`sts-*`): numbers and intervals only."""
    common.set_theme()
    m = res.models[0]
    flips = res.run_of(m).flips()
    bert_flips = res.run_of(BOOK_BERT).flips()["raw"] if BOOK_BERT in res.all_runs() else pd.Series([np.nan])
    common.publish({
        # the settings the prose states, and what each encoder is (`hf.models.DESCRIPTIONS`)
        "sts-alpha": res.alpha, "sts-alpha-abs": abs(res.alpha), "sts-f0": _f_at_zero(res.alpha),
        "sts-about-bert": about(BOOK_BERT), "sts-about-smol": about(SMOL), "sts-about-minilm": about(m),
        "sts-about-mpnet": about(MPNET), "sts-smol-width": WIDTH[SMOL], "sts-minilm-width": WIDTH[m],
        "sts-fig3-smol-stride": (ordinal(cdf_stride(len(res.run_of(SMOL).cdf["before"])))
                                 if SMOL in res.all_runs() and res.run_of(SMOL).cdf else "–"),
        "sts-n-sets": len(res.datasets), "sts-n-other-sets": len(res.datasets) - 1,
        "sts-crossfit-splits": next((s.settings["splits"] for s in res.samefit.values()), CROSSFIT_SPLITS),
        # anisotropic encoders
        "sts-extra-pairs": res.extra_max_pairs,
        "sts-bert-ev1": _nan_if_missing(res, BOOK_BERT, lambda: res.run_of(BOOK_BERT).mean_metric("vanilla")),
        "sts-bert-gain": _text_if_run(res, BOOK_BERT, lambda: res.run_of(BOOK_BERT).vs_raw("SoftDecay (sentence)")),
        "sts-bert-white": _text_if_run(res, BOOK_BERT, lambda: res.run_of(BOOK_BERT).vs_raw("whitening")),
        "sts-bert-sd-token": _text_if_run(res, BOOK_BERT, lambda: res.run_of(BOOK_BERT).vs_raw("SoftDecay (token)")),
        "sts-bert-deesc": _text_if_run(res, BOOK_BERT, lambda: res.run_of(BOOK_BERT).vs_raw("de-escalation")),
        "sts-bert-flips-min": int(bert_flips.min()) if bert_flips.notna().all() else float("nan"),
        "sts-bert-flips-max": int(bert_flips.max()) if bert_flips.notna().all() else float("nan"),
        "sts-bert-rank": (int(res.run_of(BOOK_BERT).flips()["rank"].min()) if BOOK_BERT in res.all_runs()
                          else float("nan")),
        "sts-smol-ev1": _nan_if_missing(res, SMOL, lambda: res.run_of(SMOL).mean_metric("vanilla")),
        "sts-smol-gain": _text_if_run(res, SMOL, lambda: res.run_of(SMOL).vs_raw("SoftDecay (sentence)")),
        "sts-smol-white": _text_if_run(res, SMOL, lambda: res.run_of(SMOL).vs_raw("whitening")),
        "sts-smol-white-256": _text_if_run(res, SMOL, lambda: res.run_of(SMOL).vs_raw("whitening-256")),
        # whitening − SoftDecay under the same-fit procedures
        "sts-paper-white-sd": -res.paper_value("SoftDecay", against="WhiteBERT"),
        "sts-minilm-white-sd": _iv(res.white_minus_sd(m)[0]),
        "sts-smol-white-sd": _text_if_run(res, SMOL, lambda: res.white_minus_sd(SMOL)[0]),
        "sts-smol-white-sd-half": _iv(res.samefit[SMOL].iv(how="halfsample")) if SMOL in res.samefit else "–",
        "sts-mpnet-white-sd": _iv(res.samefit[MPNET].iv()) if MPNET in res.samefit else "–",
        "sts-mpnet-white-sd-half": _iv(res.samefit[MPNET].iv(how="halfsample")) if MPNET in res.samefit else "–",
        "sts-smol-draws": res.readings[SMOL].n_draws if res.read(SMOL) else 0,
        "sts-smol-flips-max": (int(res.readings[SMOL].flip_counts()["SoftDecay (sentence)"].max())
                               if res.read(SMOL) else 0),
        "sts-smol-live-min": int(res.readings[SMOL].flip_counts()["directions"].min()) if res.read(SMOL) else 0,
        "sts-smol-sd-draws": _text_if_draws(res, SMOL, "SoftDecay (sentence)"),
        "sts-smol-clamped-draws": _text_if_draws(res, SMOL, "SoftDecay (clamped)"),
        "sts-bert-white-sd": _text_if_run(res, BOOK_BERT, lambda: res.white_minus_sd(BOOK_BERT)[0]),
        "sts-bert-white-sd-half": (_iv(res.samefit[BOOK_BERT].iv(how="halfsample")) if BOOK_BERT in res.samefit
                                   else "–"),
        "sts-bert-white-sd-point": res.samefit[BOOK_BERT].point() if BOOK_BERT in res.samefit else float("nan"),
        "sts-bert-white-sd-draws": _text_if_draws(res, BOOK_BERT, "whitening", "SoftDecay (sentence)"),
        "sts-bert-draws": res.readings[BOOK_BERT].n_draws if res.read(BOOK_BERT) else 0,
        "sts-bert-sd-draws": _text_if_draws(res, BOOK_BERT, "SoftDecay (sentence)"),
        "sts-bert-clamped-draws": _text_if_draws(res, BOOK_BERT, "SoftDecay (clamped)"),
        "sts-bert-deesc-draws": _text_if_draws(res, BOOK_BERT, "de-escalation"),
        "sts-bert-flips-reread-min": (int(res.readings[BOOK_BERT].flip_counts()["SoftDecay (sentence)"].min())
                                      if res.read(BOOK_BERT) else 0),
        "sts-bert-flips-reread-max": (int(res.readings[BOOK_BERT].flip_counts()["SoftDecay (sentence)"].max())
                                      if res.read(BOOK_BERT) else 0),
        "sts-bert-mean-share": (res.readings[BOOK_BERT].anisotropy("mean_share") if res.read(BOOK_BERT)
                                else float("nan")),
        "sts-bert-ev1-paper": res.readings[BOOK_BERT].anisotropy("EV1") if res.read(BOOK_BERT) else float("nan"),
        "sts-bert-ev1-centred": (res.readings[BOOK_BERT].anisotropy("EV1_centred") if res.read(BOOK_BERT)
                                 else float("nan")),
        "sts-minilm-refit-shift": abs(res.readings[m].refit_shift()) if res.read(m) else float("nan"),
        "sts-smol-refit-shift": abs(res.readings[SMOL].refit_shift()) if res.read(SMOL) else float("nan"),
        "sts-minilm-flips-reread": int(res.readings[m].flip_counts()["SoftDecay (sentence)"].max()),
        "sts-minilm-clamped": _iv(res.readings[m].vs_raw("SoftDecay (clamped)")),
        "sts-minilm-mean-share": res.readings[m].anisotropy("mean_share"),
        "sts-minilm-ev1-centred": res.readings[m].anisotropy("EV1_centred"),
        "sts-minilm-sd-sick-all": (_iv(res.run_of(m).vs_raw("SoftDecay (sentence)", dataset="SICK-R"))
                                   if "SICK-R" in res.datasets else "–"),
        "sts-minilm-sd-rest-all": (res.run_of(m).drop_one_set("SoftDecay (sentence)", "SICK-R")
                                   if "SICK-R" in res.datasets else float("nan")),
        # Table 1 on every pair (`full_readings`)
        "sts-full-minilm-sd": _text_if_full(res, m, lambda: res.full_readings[m].vs_raw()),
        "sts-full-minilm-sd-emb": _text_if_full(
            res, m, lambda: res.full_readings[m].vs_raw(pooling=_other_pooling(res))),
        "sts-full-minilm-white-sd": _text_if_full(res, m, lambda: res.samefit[m].iv() if m in res.samefit else None),
        "sts-full-minilm-raw": (res.full_readings[m].scores()["vanilla"].mean() if m in res.full_readings
                                else float("nan")),
        "sts-full-pairs": res.full_readings[m].n_pairs if m in res.full_readings else 0,
        "sts-full-minilm-ev1": _full_number(res, m, lambda: res.full_readings[m].anisotropy()),
        "sts-full-smol-ev1": _full_number(res, SMOL, lambda: res.full_readings[SMOL].anisotropy()),
        "sts-full-smol-sd": _text_if_full(res, SMOL, lambda: res.full_readings[SMOL].vs_raw()),
        # the book's MLM BERT on every pair (its weights remade by scripts/export_book_model.py --train)
        "sts-paper-raw": res.paper_value("vanilla", against=None),
        "sts-full-bert-raw": _full_number(res, BOOK_BERT,
                                          lambda: res.full_readings[BOOK_BERT].scores()["vanilla"].mean()),
        "sts-full-bert-sd": _text_if_full(res, BOOK_BERT, lambda: res.full_readings[BOOK_BERT].vs_raw()),
        "sts-full-bert-sd-emb": _text_if_full(
            res, BOOK_BERT, lambda: res.full_readings[BOOK_BERT].vs_raw(pooling=_other_pooling(res))),
        "sts-full-bert-white": _text_if_full(
            res, BOOK_BERT, lambda: res.full_readings[BOOK_BERT].vs_raw("whitening")),
        "sts-full-bert-clamped": _text_if_full(
            res, BOOK_BERT, lambda: res.full_readings[BOOK_BERT].vs_raw("SoftDecay (clamped)")),
        "sts-full-bert-ev1": _full_number(res, BOOK_BERT, lambda: res.full_readings[BOOK_BERT].anisotropy()),
        "sts-full-bert-flips-max": _full_flips(res, BOOK_BERT, "SoftDecay (sentence)", "max"),
        # all-mpnet-base-v2, read on every pair only (a contrastive sentence encoder of BERT-base's size)
        "sts-full-mpnet-raw": _full_number(res, MPNET, lambda: res.full_readings[MPNET].scores()["vanilla"].mean()),
        "sts-full-mpnet-raw-emb": _full_number(
            res, MPNET, lambda: res.full_readings[MPNET].scores(_other_pooling(res))["vanilla"].mean()),
        "sts-full-mpnet-sd": _text_if_full(res, MPNET, lambda: res.full_readings[MPNET].vs_raw()),
        "sts-full-mpnet-sd-emb": _text_if_full(
            res, MPNET, lambda: res.full_readings[MPNET].vs_raw(pooling=_other_pooling(res))),
        "sts-full-mpnet-white": _text_if_full(res, MPNET, lambda: res.full_readings[MPNET].vs_raw("whitening")),
        "sts-full-mpnet-clamped": _text_if_full(
            res, MPNET, lambda: res.full_readings[MPNET].vs_raw("SoftDecay (clamped)")),
        "sts-mpnet-ev1": _full_number(res, MPNET, lambda: res.full_readings[MPNET].anisotropy()),
        "sts-mpnet-ev1-emb": _full_number(
            res, MPNET, lambda: res.full_readings[MPNET].anisotropy(pooling=_other_pooling(res))),
        "sts-mpnet-flips-min": _full_flips(res, MPNET, "SoftDecay (sentence)", "min"),
        "sts-mpnet-flips-max": _full_flips(res, MPNET, "SoftDecay (sentence)", "max"),
        "sts-mpnet-live": _full_flips(res, MPNET, "directions", "min"),
        # the contrastive encoder, under the authors' pooling (the re-reading) and the other reading
        "sts-minilm-pairs": res.run_of(m).n_pairs,
        "sts-reading-pairs": res.reading_pairs,
        "sts-minilm-raw": res.readings[m].avg("vanilla"),
        "sts-minilm-sd": _iv(res.readings[m].vs_raw("SoftDecay (sentence)")),
        "sts-minilm-white": _iv(res.readings[m].vs_raw("whitening")),
        "sts-minilm-sd-sick": (float(res.readings[m].diffs("SoftDecay (sentence)")["SICK-R"])
                               if "SICK-R" in res.datasets else float("nan")),
        "sts-minilm-sd-rest": (res.readings[m].rest("SoftDecay (sentence)", "SICK-R") if "SICK-R" in res.datasets
                               else float("nan")),
        "sts-minilm-ev1": res.readings[m].anisotropy("EV1"),
        "sts-minilm-ev1-white": res.readings[m].anisotropy("EV1_whitened"),
        "sts-minilm-sd-token": _iv(res.run_of(m).vs_raw("SoftDecay (token)")),
        "sts-minilm-white-pooled": _iv(res.run_of(m).vs_raw("whitening", "pooled")),
        # planted anisotropy
        "sts-plant-top": float(res.plant_sizes[-1]),
        "sts-plant-mean-raw-0": float(res.planted("mean")["vanilla"].iloc[0]),
        "sts-plant-mean-raw-top": float(res.planted("mean")["vanilla"].iloc[-1]),
        "sts-plant-spike-raw-top": float(res.planted("spike")["vanilla"].iloc[-1]),
        "sts-plant-dirs": res.plant_directions,
        "sts-plant-spike-sd-won": _iv(res.recovered_iv("spike", "SoftDecay (sentence)")),
        "sts-plant-spike-white-won": _iv(res.recovered_iv("spike", "whitening")),
        "sts-plant-mean-deesc-won": _iv(res.recovered_iv("mean", "de-escalation")),
        "sts-plant-mean-sd-won": _iv(res.recovered_iv("mean", "SoftDecay (sentence)")),
        # the α sweep
        "sts-alpha-effect": _iv(res.run_of(m).alpha_effect()),
        "sts-alpha-margin": ALPHA_MARGIN,
        # Table 4 and LSDS
        "sts-ev1-change": _iv(res.run_of(m).metric_change("EV1"), 3),
        "sts-bert-ev1-change": _text_if_run(res, BOOK_BERT, lambda: res.run_of(BOOK_BERT).metric_change("EV1")),
        "sts-paper-ev1-change": res.paper_table4_change("EV1"),
        "sts-paper-sts14-ev1-bert-sd": res.paper_table4_value("STS14", "EV1", "BERT+SoftDecay"),
        "sts-paper-sts14-ev1-albert": res.paper_table4_value("STS14", "EV1", "ALBERT"),
        "sts-lsds-wins": res.run_of(m).lsds_count("normalised"),
        "sts-lsds-wins-eq6": res.run_of(m).lsds_count("eq. 6"),
        "sts-lsds-sets": len(res.runs[m].lsds),
        "sts-lsds-gap": _iv(res.run_of(m).lsds_gap("normalised"), 3),
        "sts-lsds-gap-eq6": _iv(res.run_of(m).lsds_gap("eq. 6"), 3),
        "sts-lsds-wins-authors": int((res.lsds_readings()["authors"] < 0).sum()),
        "sts-lsds-gap-authors": _iv(res.lsds_reading_gap("authors"), 3),
        # sign flips
        "sts-sigma-min": float(flips["sigma_min"].min()),
        "sts-sigma-max": float(flips["sigma_max"].max()),
        "sts-flips-raw-max": int(flips["raw"].max()),
        "sts-flips-sqrtn-min": int(flips["sqrt_n"].min()),
        "sts-flips-max-min": int(flips["max"].min()),
        "sts-rank-min": int(flips["rank"].min()),
        # the t-SNE maps
        "sts-map-pairs": min((pn["n"] for panels in res.maps.get("sets", {}).values() for pn in panels.values()),
                             default=float("nan")),
    })
    common.publish(path_numbers(res))
    common.figure("sts-alpha-sweep", alpha_sweep_figure(res))
    common.figure("sts-fig6", lsds_figure(res))
    common.figure("sts-fig3", cdf_figure(res))
    common.figure("sts-fig4", tsne_figure(res))
    common.figure("sts-fig7", tsne_grid(res))
    common.figure("sts-planted", planted_figure(res))
    common.figure("sts-path", path_figure(res) if res.path else _missing("the book MLM BERT's pretraining path",
                                                                                "was not read at this scale"))
