"""Figures, tables and glued numbers of the subspace chapter (Yan et al. §3, Appendix A), drawn from
its Result."""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.ticker import NullFormatter

from ..experiments.subspace import BOOTSTRAP, EXACT_TOLERANCE, QUANTILES, Result
from . import common

CHECK_COLUMNS = {"worst_slack": "worst slack", "worst_slack_rel": "worst slack / λ₁", "max_ratio": "max ratio",
                 "median_ratio": "median ratio"}
STAT_COLUMNS = {"model": "model", "layer": "layer", "median": "median", "skewness": "skewness",
                "token_uni": "token uni.", "cls_uni": "[CLS] uni.", "ev1": "EV₁"}
#: figure width (inches) and the smallest font (points) used at it: text stays >= ~8 pt at a 7-inch page
WIDTH, FONT = 8.0, 9.5


def _legible(fig: plt.Figure) -> plt.Figure:
    """Every tick, label, title and legend text of `fig` at least `FONT` points."""
    for text in fig.findobj(plt.Text):
        if text.get_fontsize() < FONT:
            text.set_fontsize(FONT)
    return fig


def tightness(res: Result) -> plt.Figure:
    """max_i ‖x_i − x_i′‖ / λ_{k+1} per cut k for each kind of random matrix (the bound is 1)."""
    common.set_theme()
    fig, ax = plt.subplots(figsize=(WIDTH, 3.6))
    common.layer_curves(ax, res.tightness, xlabel="cut $k$", ylabel=r"$\max_i \|x_i - x_i'\| \,/\, \lambda_{k+1}$",
                        title=f"$m$ = {res.tightness_m} tokens", markers=False)
    ax.axhline(1, color="k", lw=0.8, ls="--")
    return _legible(fig)


def case_study(res: Result) -> plt.Figure:
    """Eq. (8) against the exact ℓ2 probability and the ℓ1 Monte Carlo, per sphere dimension, at the
    middle radius."""
    common.set_theme()
    dims, d = res.settings.sphere_dims, res.middle_radius()
    case = pd.DataFrame(res.appendix_a)
    cols = 2 if len(dims) > 2 else len(dims)
    rows = math.ceil(len(dims) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(WIDTH, 2.9 * rows + 0.5), sharey=True, squeeze=False)
    for ax in axes.flat[len(dims):]:
        ax.set_axis_off()
    for ax, n in zip(axes.flat, dims, strict=False):
        sub = case[(case.d == d) & (case.n == n)]
        ax.plot(sub.k, sub["bound"], "k--", label="eq. (8)")
        ax.plot(sub.k, sub["exact_l2"], "o-", label=r"exact ($\ell_2$)")
        ax.plot(sub.k, sub["mc_l1"].clip(lower=1e-300), "s:", label=r"Monte Carlo ($\ell_1$)")
        ax.set(xscale="log", yscale="log", ylim=(1e-12, 10), title=f"$n$ = {n}", xlabel="$k$ coordinates")
        ax.set_xticks(list(sub.k), [str(k) for k in sub.k])
        ax.xaxis.set_minor_formatter(NullFormatter())
    for ax in axes[:, 0]:
        ax.set_ylabel("probability")
    axes[0, 0].legend(loc="lower left")
    fig.suptitle(rf"$P(\|u_{{1..k}}\| \leq d)$ for $u$ uniform on the sphere, $d$ = {d}")
    fig.tight_layout()
    return _legible(fig)


def cdfs(res: Result) -> plt.Figure:
    """Empirical CDFs of the normalised singular values, layer by layer, pretrained and untrained twin."""
    common.set_theme()
    s = res.settings
    fig, axes = plt.subplots(1, len(res.cdf_values), figsize=(WIDTH, 3.8), sharey=True, squeeze=False)
    for ax, (label, values) in zip(axes[0], res.cdf_values.items(), strict=True):
        common.spectrum_cdfs(ax, [(f"layer {i}", v) for i, v in enumerate(values)], title=f"{label}, {s.task}",
                             xlabel="normalised singular value")
        if ax is not axes[0, 0] and ax.get_legend() is not None:
            ax.get_legend().remove()
    axes[0, 0].legend(loc="lower right")
    return _legible(fig)


def fig2_histograms(res: Result) -> plt.Figure:
    """The paper's Fig. 2: histograms of the normalised singular values of the first, a middle and the
    last hidden state on the second task, with the median and skewness of every value."""
    common.set_theme()
    vals = res.second_task_values
    stats = {f"layer {r['layer']}": r for r in res.second_task_stats}
    fig, axes = plt.subplots(len(vals), 1, figsize=(WIDTH, 2.1 * max(len(vals), 1)), sharex=True, squeeze=False)
    for ax, (label, v) in zip(axes[:, 0], vals.items(), strict=True):
        st = stats[label]
        ax.hist(np.asarray(v), bins=60, range=(0, 1), density=True, color="tab:blue", alpha=0.8)
        ax.axvline(st["median"], color="k", ls="--", lw=0.8)
        ax.set_ylabel("density")
        ax.set_title(f"{label}: median {st['median']:.3f}, skewness {st['skewness']:.2f}")
    axes[-1, 0].set_xlabel("normalised singular value")
    fig.tight_layout()
    return _legible(fig)


def gamma_table(res: Result):
    """Appendix A's Γ-step: the constant of the line before eq. (8), eq. (8)'s constant, their ratio."""
    df = pd.DataFrame([{"n": r["n"], "k": r["k"], "line before (8)": math.exp(r["log_printed_line"]),
                        "eq. (8): 2/(k(n−k)B)": math.exp(r["log_printed_next"]), "ratio": f"{r['ratio']:.6f}"}
                       for r in res.gamma_steps])
    return common.table(df, digits=3)


def random_table(res: Result):
    """The theorem check on random matrices."""
    df = pd.DataFrame(res.random).drop(columns=["d", "worst_slack"]).rename(columns={"m": "m tokens", **CHECK_COLUMNS})
    return common.table(df, digits=3)


def real_table(res: Result):
    """The theorem check on every hidden state of the pretrained model."""
    df = pd.DataFrame(res.real_model).drop(columns=["worst_slack"]).rename(
        columns={**CHECK_COLUMNS, "mean_cut_ratio": "mean max ratio over cuts"})
    return common.table(df, digits=3)


def case_summary_table(res: Result):
    """Appendix A: how many (n, k, d) cases violate eq. (8), per sphere dimension n."""
    case = pd.DataFrame(res.appendix_a)
    df = case.groupby("n").agg(cases=("k", "size"), l2_violations=("l2_violates", "sum"),
                               l1_violations=("l1_violates", "sum")).reset_index()
    return common.table(df.rename(columns={"l2_violations": "ℓ2 violations", "l1_violations": "ℓ1 violations"}))


def case_table(res: Result, rows: int = 12):
    """The first `rows` cases at the middle radius: bound, exact, Monte Carlo, whether ℓ2 violates it."""
    case = pd.DataFrame(res.appendix_a)
    df = case[case.d == res.middle_radius()].head(rows)
    out = pd.DataFrame({"n, k, d": [f"{n}, {k}, {d:g}" for n, k, d in zip(df.n, df.k, df.d, strict=True)],
                        "eq. (8)": df.bound, "exact ℓ2": df.exact_l2, "MC ℓ1": df.mc_l1,
                        "ℓ2 above (8)": df.l2_violates.map({True: "yes", False: ""})})
    return common.table(out)


def cdf_table(res: Result):
    """Median and skewness of the normalised singular values, token and [CLS] uniformity and EV₁,
    per layer, pretrained and untrained twin."""
    df = pd.DataFrame(res.cdf_stats)
    df.insert(0, "hidden state", [f"{m}, layer {i}" for m, i in zip(df.pop("model"), df.pop("layer"), strict=True)])
    return common.table(df.rename(columns=STAT_COLUMNS), digits=3)


def comparison_table(res: Result):
    """The pretrained model on the second task against the paper's BERT-base on MRPC."""
    first, last = res.second_task_stats[0], res.second_task_stats[-1]
    ours = f"{res.settings.model}, {res.settings.second_task}"
    arrow = lambda key, digits: f"{first[key]:.{digits}f} → {last[key]:.{digits}f}"  # noqa: E731
    rows = [("median, first layer (embeddings)", f"{res.paper_medians[0]:g}", f"{first['median']:.4f}"),
            (f"median, last layer ({len(res.second_task_stats) - 1})", f"{res.paper_medians[-1]:g}",
             f"{last['median']:.4f}"),
            ("skewness, first → last", "increases", arrow("skewness", 2)),
            ("token uniformity, first → last", "increases", arrow("token_uni", 3)),
            ("[CLS] uniformity, first → last", "increases", arrow("cls_uni", 3))]
    return common.table(pd.DataFrame(rows, columns=["", "paper: BERT-base, MRPC", ours]))


def publish(res: Result) -> None:
    """Glue the figures (`subspace-tightness`, `subspace-case-study`, `subspace-cdfs`, `subspace-fig2`)
    and every number the prose quotes (one literal dict)."""
    common.figure("subspace-tightness", tightness(res))
    common.figure("subspace-case-study", case_study(res))
    common.figure("subspace-cdfs", cdfs(res))
    common.figure("subspace-fig2", fig2_histograms(res))
    summ, worst = res.appendix_a_summary, res.appendix_a_summary.worst
    med, twin = res.medians("pretrained"), res.medians("untrained twin") or [math.nan, math.nan]
    by_m, cliff, cls = res.max_ratio_by_m(), res.cliff(), res.cls_uniformity()
    second = [r["median"] for r in res.second_task_stats]
    common.publish({
        "subspace-model": res.model_description, "subspace-n-sentences": res.n_sentences,
        "subspace-n-real-tokens": res.n_real_tokens, "subspace-n-hidden-states": res.n_hidden_states,
        "subspace-n-layers": res.n_hidden_states - 1,
        "subspace-task": res.settings.task, "subspace-second-task": res.settings.second_task,
        "subspace-random-worst-slack-rel": max(r["worst_slack_rel"] for r in res.random),
        "subspace-random-max-ratio-m16": by_m.get(16, math.nan),
        "subspace-random-max-ratio-m64": by_m.get(64, math.nan),
        "subspace-random-max-ratio-min": min(by_m.values()),
        "subspace-real-worst-slack-rel": max(r["worst_slack_rel"] for r in res.real_model),
        "subspace-real-max-ratio": max(r["max_ratio"] for r in res.real_model),
        "subspace-real-median-ratio": max(r["median_ratio"] for r in res.real_model),
        "subspace-cases": summ.cases, "subspace-l2-violations": summ.l2_violations,
        "subspace-l1-violations": summ.l1_violations, "subspace-l2-violations-x4": summ.l2_violations_x4,
        "subspace-quarter-cases": summ.quarter_cases, "subspace-quarter-violations": summ.quarter_violations,
        "subspace-median-looseness": summ.median_looseness,
        "subspace-worst-n": worst.n if worst else math.nan, "subspace-worst-k": worst.k if worst else math.nan,
        "subspace-worst-d": worst.d if worst else math.nan, "subspace-worst-bound": worst.bound if worst else math.nan,
        "subspace-worst-exact-l2": worst.exact_l2 if worst else math.nan,
        "subspace-gamma-ratio-min": min((r["ratio"] for r in res.gamma_steps), default=math.nan),
        "subspace-gamma-ratio-max": max((r["ratio"] for r in res.gamma_steps), default=math.nan),
        "subspace-cliff-n": cliff["n"], "subspace-cliff-d": cliff["d"], "subspace-cliff-k16": cliff["k16"],
        "subspace-cliff-quarter": cliff["quarter"], "subspace-cliff-half": cliff["half"],
        "subspace-median-first": med[0], "subspace-median-last": med[-1], "subspace-last-layer": len(med) - 1,
        "subspace-twin-median-first": twin[0], "subspace-twin-median-last": twin[-1],
        "subspace-second-median-first": second[0], "subspace-second-median-last": second[-1],
        "subspace-paper-median-first": res.paper_medians[0], "subspace-paper-median-last": res.paper_medians[-1],
        "subspace-cls-first": cls["first"], "subspace-cls-mid-min": cls["mid_min"], "subspace-cls-last": cls["last"],
        "subspace-cls-last-mid": cls["last_mid"], "subspace-quantiles": QUANTILES,
        "subspace-bootstrap": BOOTSTRAP, "subspace-exact-tolerance": EXACT_TOLERANCE,
        "subspace-median-trend": res.trend("median").text(3), "subspace-token-trend": res.trend("token_uni").text(3),
        "subspace-cls-trend": res.trend("cls_uni").text(3),
    })


__all__ = ["tightness", "case_study", "cdfs", "fig2_histograms", "gamma_table", "random_table", "real_table",
           "case_summary_table", "case_table", "cdf_table", "comparison_table", "publish"]
