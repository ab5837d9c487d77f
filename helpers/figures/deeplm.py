"""Figures, tables and glued numbers of the deep causal LM chapter (Yu & Zhang §3.4, the paper's Fig. 7),
drawn from its Result (the statistics are the Result's: `paired`, `findings`, `steps_to`, ...)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from ..core.scale import MIN_POINTS
from ..core.stats import moving_average
from ..experiments.deeplm import CURVE_GAPS, FINAL_WINDOW, LEAKY, PLATEAU_TOL, Result, tau_arm
from . import common

#: the order of `common.layer_curves` (seaborn palette), so both figures colour the variants alike
COLOURS = {"post-norm": "C0", "pre-norm": "C1", "de-escalated": "C2", LEAKY: "C3", tau_arm(0.5): "C4"}
#: the pairs of arms the chapter compares (a − b): the three variants, then the leakage control and the control
#: τ against them
PAIRS = (("post-norm", "pre-norm"), ("de-escalated", "pre-norm"), ("de-escalated", "post-norm"),
         (LEAKY, "de-escalated"), (LEAKY, "pre-norm"), (tau_arm(0.5), "de-escalated"), (tau_arm(0.5), "pre-norm"))


def _legible(fig: plt.Figure, axes) -> None:
    """Text of at least ~8 pt when the figure is shown 7 inches wide (the page)."""
    for ax in np.atleast_1d(axes):
        ax.tick_params(labelsize=10)
        ax.xaxis.label.set_size(10.5)
        ax.yaxis.label.set_size(10.5)
        ax.title.set_size(11)
        if ax.get_legend() is not None:
            for t in ax.get_legend().get_texts():
                t.set_fontsize(10)


def fig7(res: Result) -> plt.Figure:
    """Training loss per step (moving average; one line per seed) and held-out loss per evaluation
    (mean, range over seeds shaded), with the uniform and unigram baselines."""
    common.set_theme()
    fig, axes = plt.subplots(1, 2, figsize=(8.5, 3.6))
    k = max(1, res.steps // 50)
    for v in res.arms:
        for i, h in enumerate(res.histories[v]):
            y = moving_average(h["loss"], k)
            axes[0].plot(np.arange(len(y)) + k, y, color=COLOURS.get(v), lw=1.2, alpha=0.8,
                         label=v if i == 0 else None)
        band = res.eval_band(v)
        if band is not None:
            steps, (mean, low, high) = res.histories[v][0]["eval_step"], band
            axes[1].plot(steps, mean, color=COLOURS.get(v), marker="o", ms=3, label=v)
            axes[1].fill_between(steps, low, high, color=COLOURS.get(v), alpha=0.2)
    for ax, title in zip(axes, ("training loss (moving average)", "held-out loss"), strict=True):
        ax.axhline(res.uniform_nats, color="grey", ls=":", lw=1, label="uniform")
        ax.axhline(res.unigram_nats, color="grey", ls="--", lw=1, label="unigram")
        ax.set_xlabel("optimiser step")
        ax.set_title(title)
    axes[0].set_ylabel("cross-entropy (nats per token)")
    axes[1].legend()
    _legible(fig, axes)
    return common.figure("deeplm-fig7", fig)


def tsim(res: Result) -> plt.Figure:
    """t_sim of every block's output on a held-out batch, at initialisation and after training."""
    common.set_theme()
    fig, axes = plt.subplots(1, 2, figsize=(8.5, 3.4), sharey=True)
    for ax, idx, title in zip(axes, (0, -1), ("at initialisation", "after training"), strict=True):
        curves = {v: np.array([h["t_sim"][idx] for h in res.histories[v]], dtype=float) for v in res.arms}
        common.layer_curves(ax, curves, ylabel=r"$t_{\rm sim}$", title=title, markers=False, xlabel="block")
    _legible(fig, axes)
    return common.figure("deeplm-tsim", fig)


def _gap_name(a: str, b: str | None) -> str:
    return f"{a} − {b or 'unigram'}"


def budget_curve(res: Result) -> plt.Figure:
    """Each gap of the findings against the training steps of the constant-rate runs (log axis): each seed's gap
    (faint), their mean, each form fitted to the means and carried to the paper's steps, the band there (error bar),
    the cosine run's gap at its own steps beside the constant-rate one, and 0; the likeness margin shaded where
    the claim is one of likeness."""
    common.set_theme()
    fig, axes = plt.subplots(1, len(CURVE_GAPS), figsize=(8.5, 3.6), sharex=True)
    fs = res.curve_findings()
    for ax, (a, b) in zip(axes, CURVE_GAPS, strict=True):
        t = fs[(a, b)].at_scale
        common.trend_panel(ax, t, res.curve_steps, res.curve_gaps(a, b), mean_label="constant rate, mean over seeds")
        cos = res.gap(a, b)
        if cos.has_interval:
            ax.errorbar([res.steps * 1.25], [cos.estimate], yerr=[[cos.estimate - cos.low], [cos.high - cos.estimate]],
                        fmt="D", color="C3", mfc="white", capsize=3, ms=5, label="cosine schedule")
        else:
            ax.plot([res.steps * 1.25], [cos.estimate], "D", color="C3", mfc="white", ms=5, label="cosine schedule")
        margin = fs[(a, b)].margin
        if margin:
            ax.axhspan(-margin, margin, color="grey", alpha=0.15, lw=0, label="likeness margin")
        ax.axhline(0, color="grey", lw=1)
        ax.set_xlabel("training steps")
        ax.set_title(_gap_name(a, b))
        if t is None:
            ax.text(0.5, 0.95, "no trend:\nseeds missing", transform=ax.transAxes, ha="center", va="top",
                    fontsize=10)
    axes[0].set_ylabel("gap (nats per token)")
    handles, labels = common.legend_entries(axes)
    fig.legend(handles, labels, loc="lower center", ncol=3, fontsize=10, frameon=False, bbox_to_anchor=(0.5, -0.02))
    fig.tight_layout(rect=(0, 0.16, 1, 1))
    _legible(fig, axes)
    return common.figure("deeplm-budget", fig)


def budget_table(res: Result):
    """A column per gap: the constant-rate runs' gap at the run's own steps beside the cosine runs' (the finding's),
    and the trend's band at the paper's steps with the finding's verdict there."""
    fs = res.curve_findings()
    paper = res.budget.get("paper", {}).get("steps", 0)
    cols = {}
    for a, b in CURVE_GAPS:
        const, f = res.curve_at(a, b), fs[(a, b)]
        t = f.at_scale
        cols[_gap_name(a, b)] = {f"constant rate, {res.steps:,} steps": const.text() if const else "—",
                                 f"cosine, {res.steps:,} steps": res.gap(a, b).text(),
                                 f"band at {paper:,} steps": t.band.text() if t else "—",
                                 "verdict there": f.paper_scale_verdict}
    return common.table(pd.DataFrame(cols), index=True)


def final_table(res: Result):
    """Per variant: final training loss (last 5 % of steps) with its range over seeds, held-out loss and t_sim of
    the last block, means over seeds (`runs_table` has each variant's runs: diverged, seconds per step)."""
    tr, ts = res.final_train(), res.last_t_sim()
    rows = []
    for v in res.arms:
        lo, hi = np.nanmin(tr[v]), np.nanmax(tr[v])
        rows.append({"variant": v, "final train loss": res.final_mean(v),
                     "range over seeds": f"{lo:.3f}" if f"{lo:.3f}" == f"{hi:.3f}" else f"{lo:.3f}–{hi:.3f}",
                     "held-out loss": res.final_mean(v, "eval"), "last-block t_sim": ts[v]})
    return common.table(pd.DataFrame(rows), digits=3)


def runs_table(res: Result):
    """Per variant: how many runs (seeds), how many diverged, and the mean seconds per training step."""
    secs = res.seconds_per_step()
    return common.table(pd.DataFrame([{"variant": v, "runs": len(res.histories[v]),
                                       "diverged runs": sum(bool(h.get("diverged")) for h in res.histories[v]),
                                       "s per step": secs[v]} for v in res.arms]), digits=2)


def differences_table(res: Result):
    """Same-seed differences of the final training loss: mean with its 95 % t-interval over seeds, and
    the smallest and largest single-seed difference."""
    rows = []
    for a, b in PAIRS:
        if a in res.arms and b in res.arms:
            d = res.differences(a, b)
            rows.append({"difference (nats per token)": f"{a} − {b}", "mean [95 % interval]": res.paired(a, b).text(),
                         "smallest seed": float(np.min(d)), "largest seed": float(np.max(d))})
    return common.table(pd.DataFrame(rows), digits=3)


def _span(values: list, empty: str) -> str:
    """'156–190' over seeds ('156' when all agree); `empty` when there is nothing."""
    values = [v for v in values if v is not None]
    if not values:
        return empty
    lo, hi = min(values), max(values)
    return f"{lo}" if lo == hi else f"{lo}–{hi}"


def _diff(res: Result, a: str, b: str) -> str:
    """The same-seed difference a − b with its interval, as text ('—' when an arm was not run)."""
    return res.paired(a, b).text() if a in res.arms and b in res.arms else "—"


def publish(res: Result) -> None:
    """Draw and glue the figures, and glue every number the prose quotes (one literal dict)."""
    fig7(res)
    tsim(res)
    budget_curve(res)
    steps = res.curve_steps or [np.nan]
    held = sum(h is not None for hs in res.curve.values() for h in hs)
    bands = {g: (f.at_scale.band.text() if f.at_scale else "—") for g, f in res.curve_findings().items()}
    const = {g: (iv.text() if (iv := res.curve_at(*g)) else "—") for g in CURVE_GAPS}
    ts, tsim0 = res.last_t_sim(), res.first_t_sim()
    to3, near = res.steps_to(3.0), res.steps_near(res.unigram_nats, PLATEAU_TOL)
    ratio, ours, paper = res.token_ratio(), res.budget.get("ours", {}), res.budget.get("paper", {})
    fs = {f.key: f for f in res.findings()}
    tau = res.control_taus[0] if res.control_taus else float("nan")
    common.publish({
        "deeplm-depth": res.depth, "deeplm-steps": res.steps, "deeplm-seeds": len(res.seeds),
        "deeplm-params": f"{res.parameters:,}", "deeplm-tau": res.tau,
        "deeplm-train-post-norm": res.final_mean("post-norm"),
        "deeplm-tsim0-post-norm": tsim0["post-norm"], "deeplm-tsim0-pre-norm": tsim0["pre-norm"],
        "deeplm-tsim0-de-escalated": tsim0["de-escalated"],
        "deeplm-tsim-post-norm": ts["post-norm"], "deeplm-tsim-pre-norm": ts["pre-norm"],
        "deeplm-tsim-de-escalated": ts["de-escalated"],
        "deeplm-diff-de-escalated-post-norm": fs["deeplm-deesc-rescues"].effect_text(),
        "deeplm-diff-de-escalated-pre-norm": fs["deeplm-deesc-like-pre-norm"].effect_text(),
        "deeplm-diff-post-norm-pre-norm": res.paired("post-norm", "pre-norm").estimate,
        "deeplm-post-norm-below-unigram": -res.against_unigram("post-norm").estimate,
        "deeplm-similar-margin": fs["deeplm-deesc-like-pre-norm"].margin,
        "deeplm-plateau-tol": PLATEAU_TOL,
        "deeplm-plateau-post-norm": _span(near["post-norm"], "–"),
        "deeplm-plateau-pre-norm": _span(near["pre-norm"], "–"),
        "deeplm-plateau-de-escalated": _span(near["de-escalated"], "–"),
        "deeplm-steps-to-3-post-norm": _span(to3["post-norm"], "never"),
        "deeplm-steps-to-3-pre-norm": _span(to3["pre-norm"], "never"),
        "deeplm-steps-to-3-de-escalated": _span(to3["de-escalated"], "never"),
        "deeplm-first-position-cost": res.first_position_cost(),
        "deeplm-control-tau": tau, "deeplm-leak-seeds": len(res.histories.get(LEAKY, [])),
        "deeplm-tau-seeds": len(res.histories.get(tau_arm(tau), [])),
        "deeplm-diff-leak-de-escalated": _diff(res, LEAKY, "de-escalated"),
        "deeplm-diff-leak-post-norm": _diff(res, LEAKY, "post-norm"),
        "deeplm-diff-leak-pre-norm": _diff(res, LEAKY, "pre-norm"),
        "deeplm-diff-tau-de-escalated": _diff(res, tau_arm(tau), "de-escalated"),
        "deeplm-diff-tau-post-norm": _diff(res, tau_arm(tau), "post-norm"),
        "deeplm-diff-tau-pre-norm": _diff(res, tau_arm(tau), "pre-norm"),
        "deeplm-seq-len": ours.get("seq_len", 0), "deeplm-batch": ours.get("batch_size", 0),
        "deeplm-width": ours.get("d_model", 0),
        "deeplm-ffn-mult": ours.get("d_ff", np.nan) / ours.get("d_model", np.nan), "deeplm-lr": ours.get("lr", np.nan),
        "deeplm-paper-seq-len": paper.get("seq_len", 0), "deeplm-paper-batch": paper.get("batch_size", 0),
        "deeplm-step-ratio": ratio.get("steps", np.nan), "deeplm-token-ratio": ratio.get("tokens", np.nan),
        "deeplm-tokens-per-step": ratio.get("ours_per_step", 0),
        "deeplm-paper-tokens-per-step": ratio.get("paper_per_step", 0),
        "deeplm-paper-steps": paper.get("steps", 0), "deeplm-curve-budgets": len(res.curve_steps),
        "deeplm-curve-first": steps[0], "deeplm-curve-last": steps[-1], "deeplm-curve-span": steps[-1] / steps[0],
        "deeplm-window-pct": 100 * FINAL_WINDOW, "deeplm-min-budgets": MIN_POINTS,
        "deeplm-budget-band-post-norm": bands.get(("post-norm", None), "—"),
        "deeplm-budget-band-deesc-post": bands.get(("de-escalated", "post-norm"), "—"),
        "deeplm-budget-band-deesc-pre": bands.get(("de-escalated", "pre-norm"), "—"),
        "deeplm-budget-const-post-norm": const[("post-norm", None)],
        "deeplm-budget-const-deesc-post": const[("de-escalated", "post-norm")],
        "deeplm-curve-held": held, "deeplm-curve-runs": held + len(res.curve_missing),
        "deeplm-mtokens": ratio.get("ours", np.nan) / 1e6, "deeplm-paper-mtokens": ratio.get("paper", np.nan) / 1e6,
    })


__all__ = ["fig7", "tsim", "budget_curve", "budget_table", "final_table", "runs_table", "differences_table", "publish",
           "PAIRS"]
