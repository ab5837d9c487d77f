"""Figures, tables and glued numbers of the subspace chapter (Yan et al. §3, Appendix A), drawn from
its Result."""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.ticker import NullFormatter

from ..experiments.subspace import Result
from . import common

CHECK_COLUMNS = {"worst_slack": "worst slack", "worst_slack_rel": "worst slack / λ₁", "max_ratio": "max ratio",
                 "median_ratio": "median ratio"}
STAT_COLUMNS = {"model": "model", "layer": "layer", "median": "median", "skewness": "skewness",
                "token_uni": "token uniformity", "cls_uni": "[CLS] uniformity", "ev1": "EV₁"}


def tightness(res: Result) -> plt.Figure:
    """max_i ‖x_i − x_i′‖ / λ_{k+1} per cut k for each kind of random matrix (the bound is 1)."""
    common.set_theme()
    fig, ax = plt.subplots(figsize=(8, 4))
    common.layer_curves(ax, res.tightness, xlabel="cut k", ylabel="max_i ‖x_i − x_i′‖ / λ_{k+1}",
                        title=f"Tightness of the bound, m = {res.tightness_m} tokens", markers=False)
    ax.axhline(1, color="k", lw=0.8, ls="--")
    return fig


def _radius(res: Result) -> float:
    radii = res.settings["radii"]
    return radii[len(radii) // 2]


def case_study(res: Result) -> plt.Figure:
    """Eq. (8) against the exact ℓ2 probability and the ℓ1 Monte Carlo, per sphere dimension, at the
    middle radius."""
    common.set_theme()
    dims, d = res.settings["sphere_dims"], _radius(res)
    case = pd.DataFrame(res.appendix_a)
    fig, axes = plt.subplots(1, len(dims), figsize=(11, 3.8), sharey=True)
    axes = np.atleast_1d(axes)
    for ax, n in zip(axes, dims, strict=True):
        sub = case[(case.d == d) & (case.n == n)]
        ax.plot(sub.k, sub["bound"], "k--", label="eq. 8 bound")
        ax.plot(sub.k, sub["exact_l2"], "o-", label="exact (ℓ2)")
        ax.plot(sub.k, sub["mc_l1"].clip(lower=1e-300), "s:", label="MC (ℓ1)")
        ax.set(xscale="log", yscale="log", ylim=(1e-12, 10), title=f"n = {n}", xlabel="k coordinates")
        ax.set_xticks(list(sub.k), [str(k) for k in sub.k])
        ax.xaxis.set_minor_formatter(NullFormatter())
    axes[0].set_ylabel("probability")
    axes[0].legend(fontsize=8)
    fig.suptitle(f"Appendix A: P(‖u₁..ₖ‖ ≤ d) for u uniform on the sphere, d = {d}")
    return fig


def cdfs(res: Result) -> plt.Figure:
    """Empirical CDFs of the normalised singular values, layer by layer, pretrained and untrained twin."""
    common.set_theme()
    s = res.settings
    fig, axes = plt.subplots(1, len(res.cdf_values), figsize=(10 if len(res.cdf_values) > 1 else 6, 4), sharey=True)
    for ax, (label, values) in zip(np.atleast_1d(axes), res.cdf_values.items(), strict=True):
        common.spectrum_cdfs(ax, [(f"layer {i}", v) for i, v in enumerate(values)],
                             title=f"{s['model']} ({label}), {s['task']}")
    return fig


def fig2_histograms(res: Result) -> plt.Figure:
    """Figure 2: histograms of the normalised singular values of the first, a middle and the last
    hidden state on the second task, with median and skewness."""
    common.set_theme()
    vals = res.second_task_values
    fig, axes = plt.subplots(len(vals), 1, figsize=(8, 2.2 * max(len(vals), 1)), sharex=True, squeeze=False)
    for ax, (label, v) in zip(axes[:, 0], vals.items(), strict=True):
        v = np.asarray(v)
        ax.hist(v, bins=60, range=(0, 1), color="tab:blue", alpha=0.8)
        med, sk = float(np.median(v)), float(pd.Series(v).skew())
        ax.axvline(med, color="k", ls="--", lw=0.8)
        ax.set_ylabel("count")
        ax.set_title(f"{label}: median {med:.3f}, skewness {sk:.2f}", fontsize=10)
    axes[-1, 0].set_xlabel("normalised singular value")
    fig.suptitle(f"Figure 2 — {res.settings['model']}, {res.settings['second_task']} validation")
    return fig


def gamma_table(res: Result):
    """Appendix A's Γ-step: the constant of the line before eq. (8), eq. (8)'s constant, their ratio."""
    df = pd.DataFrame([{"n": r["n"], "k": r["k"], "line before (8)": math.exp(r["log_printed_line"]),
                        "eq. (8)'s 2/(k(n−k)B)": math.exp(r["log_printed_next"]),
                        "8/(k(n−k)B)": math.exp(r["log_corrected"]), "ratio": r["ratio"]}
                       for r in res.gamma_steps])
    return common.table(df, digits=4)


def max_ratio_by_m(res: Result) -> dict[int, float]:
    """The largest ‖x_i − x_i′‖/λ_{k+1} over kinds of random matrix, per number of tokens m."""
    out: dict[int, float] = {}
    for r in res.random:
        out[r["m"]] = max(out.get(r["m"], 0.0), r["max_ratio"])
    return out


def cliff(res: Result, n: int = 384) -> dict[str, float]:
    """Exact P(‖u_{1..k}‖ ≤ d) at the middle radius for n: at k = 16, n/4 and n/2."""
    case = pd.DataFrame(res.appendix_a)
    d = _radius(res)
    sub = case[(case.n == n) & (case.d == d)].set_index("k")["exact_l2"]
    return {"n": n, "d": d, **{f"k{k}": float(sub.get(k, math.nan)) for k in (16, n // 4, n // 2)}}


def random_table(res: Result):
    """The theorem check on random matrices."""
    df = pd.DataFrame(res.random).rename(columns={"m": "m tokens", **CHECK_COLUMNS})
    return common.table(df, digits=4)


def real_table(res: Result):
    """The theorem check on every hidden state of the pretrained model."""
    df = pd.DataFrame(res.real_model).rename(columns={**CHECK_COLUMNS, "mean_cut_ratio": "mean max-ratio over cuts"})
    return common.table(df, digits=4)


def case_summary_table(res: Result):
    """Appendix A: how many (n, k, d) cases violate eq. (8), per sphere dimension n."""
    case = pd.DataFrame(res.appendix_a)
    df = case.groupby("n").agg(cases=("k", "size"), l2_violations=("l2_violates", "sum"),
                               l1_violations=("l1_violates", "sum")).reset_index()
    return common.table(df.rename(columns={"l2_violations": "ℓ2 violations", "l1_violations": "ℓ1 violations"}))


def case_table(res: Result, rows: int = 12):
    """The first `rows` cases at the middle radius: bound, exact, Monte Carlo."""
    case = pd.DataFrame(res.appendix_a)
    df = case[case.d == _radius(res)].head(rows).rename(columns={
        "bound": "eq. 8 bound", "exact_l2": "exact ℓ2", "mc_l2": "MC ℓ2", "mc_l1": "MC ℓ1",
        "l2_violates": "ℓ2 violates", "l1_violates": "ℓ1 violates"})
    return common.table(df)


def cdf_table(res: Result):
    """Median and skewness of the normalised singular values, token and [CLS] uniformity and EV₁,
    per layer, pretrained and untrained twin."""
    return common.table(pd.DataFrame(res.cdf_stats).rename(columns=STAT_COLUMNS), digits=4)


def comparison_table(res: Result):
    """The pretrained model on the second task against the paper's BERT-base on MRPC."""
    first, last = res.second_task_stats[0], res.second_task_stats[-1]
    ours = f"ours: {res.settings['model']}, {res.settings['second_task']}"
    arrow = lambda key, digits: f"{first[key]:.{digits}f} → {last[key]:.{digits}f}"  # noqa: E731
    rows = [("median, first layer (embeddings)", res.paper_medians[0], first["median"]),
            (f"median, last layer ({len(res.second_task_stats) - 1})", res.paper_medians[-1], last["median"]),
            ("skewness, first → last", "increases", arrow("skewness", 2)),
            ("token uniformity, first → last", "increases", arrow("token_uni", 3)),
            ("[CLS] uniformity, first → last", "increases", arrow("cls_uni", 3))]
    return common.table(pd.DataFrame(rows, columns=["", "paper: BERT-base, MRPC", ours]), digits=4)


def publish(res: Result) -> None:
    """Glue the figures (`subspace-tightness`, `subspace-case-study`, `subspace-cdfs`) and every number
    the prose quotes."""
    for name, draw in (("tightness", tightness), ("case-study", case_study), ("cdfs", cdfs), ("fig2", fig2_histograms)):
        common.figure(f"subspace-{name}", draw(res))
    summ, worst = res.appendix_a_summary, res.appendix_a_summary["worst"] or {}
    med, twin = res.medians("pretrained"), res.medians("untrained twin") or [math.nan, math.nan]
    common.publish("subspace", {
        "model": res.model_description, "n-sentences": res.n_sentences, "n-real-tokens": res.n_real_tokens,
        "n-hidden-states": res.n_hidden_states, "task": res.settings["task"],
        "random-worst-slack-rel": max(r["worst_slack_rel"] for r in res.random),
        "random-max-ratio": max(r["max_ratio"] for r in res.random),
        "real-worst-slack-rel": max(r["worst_slack_rel"] for r in res.real_model),
        "real-max-ratio": max(r["max_ratio"] for r in res.real_model),
        "real-median-ratio": max(r["median_ratio"] for r in res.real_model),
        "cases": summ["cases"], "l2-violations": summ["l2_violations"], "l1-violations": summ["l1_violations"],
        "median-looseness": summ["median_looseness"],
        **{f"worst-{k.replace('_', '-')}": float(worst.get(k, math.nan)) for k in ("n", "k", "d", "bound", "exact_l2")},
        "median-first": med[0], "median-last": med[-1], "last-layer": len(med) - 1,
        "twin-median-first": twin[0], "twin-median-last": twin[-1],
        "l2-violations-x4": summ.get("l2_violations_x4", 0), "quarter-cases": summ.get("quarter_cases", 0),
        "quarter-violations": summ.get("quarter_violations", 0),
        "gamma-ratio-min": min((r["ratio"] for r in res.gamma_steps), default=math.nan),
        "gamma-ratio-max": max((r["ratio"] for r in res.gamma_steps), default=math.nan),
        **{f"random-max-ratio-m{m}": v for m, v in max_ratio_by_m(res).items()},
        "random-max-ratio-min": min(max_ratio_by_m(res).values()),
        **{f"cliff-{k}": v for k, v in cliff(res).items()},
        "second-task": res.settings["second_task"],
        **cls_uniformity(res),
    })


def cls_uniformity(res: Result) -> dict[str, float]:
    """[CLS] uniformity of the pretrained model on the second task: at the embeddings (`cls-first`;
    trivially 1 — the [CLS] input is the same vector for every sentence), its lowest value over the
    layers between (`cls-mid-min`, NaN with no layer between) and at the last layer (`cls-last`)."""
    cls = [r["cls_uni"] for r in res.second_task_stats]
    return {"cls-first": cls[0], "cls-mid-min": min(cls[1:-1]) if len(cls) > 2 else math.nan,
            "cls-last": cls[-1], "cls-last-mid": len(cls) - 2}


__all__ = ["tightness", "case_study", "cdfs", "fig2_histograms", "gamma_table", "max_ratio_by_m", "cliff",
           "cls_uniformity", "random_table", "real_table", "case_summary_table", "case_table", "cdf_table",
           "comparison_table", "publish"]
