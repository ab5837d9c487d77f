"""Figures, tables and glued numbers of the queries-and-keys chapter (Godey et al. §5, App. C–D). Every
number is computed by `helpers.experiments.qk.Result`; this module draws and formats."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.ticker import MaxNLocator

from ..core.stats import Interval, moving_average
from ..experiments.anisotropy import BYTE_MLM
from ..experiments.findings import corrected
from ..experiments.qk import (
    ALMOST_ALL,
    BERT_VOCAB,
    FIRST_RUN_STEPS,
    MULTIBERT_CHECKPOINT_MB,
    MULTIBERT_TOKENS,
    PAPER_CHECKPOINTS,
    TARGET_BELOW_UNIGRAM,
    Result,
)
from . import common

Q_S, K_S = r"$Q_s$", r"$K_s$"
QBAR, KBAR = r"$\bar Q_s$", r"$\bar K_s$"
COS = r"$\cos(\bar Q_s, \bar K_s)$"
DOT = r"$\bar Q_s \cdot \bar K_s$"


def scatter_panels(axes, head: dict, basis: str, steps: list[int], shown: list[int], lim: float | None = None) -> None:
    """The paper's Figs. 11, 19, 20: the display tokens' Q_s (blue) and K_s (orange) projected on the first
    two directions of `basis` (union | K | Q), one panel per step in `shown`; crosses mark the means."""
    blue, orange = sns.color_palette("colorblind")[:2]
    q, k = np.asarray(head[basis]["q"]), np.asarray(head[basis]["k"])               # (S', n, 2)
    at = list(head.get("steps", steps))                                             # the steps stored
    if lim is None:
        lim = 1.05 * float(np.abs(np.concatenate([q[[at.index(s) for s in shown]],
                                                  k[[at.index(s) for s in shown]]])).max())
    for ax, s in zip(axes, shown, strict=True):
        i = at.index(s)
        ax.scatter(q[i, :, 0], q[i, :, 1], s=4, alpha=0.45, color=blue, label=f"queries {Q_S}")
        ax.scatter(k[i, :, 0], k[i, :, 1], s=4, alpha=0.45, color=orange, label=f"keys {K_S}")
        ax.scatter(*q[i].mean(0), marker="X", s=70, color=blue, edgecolor="k")
        ax.scatter(*k[i].mean(0), marker="X", s=70, color=orange, edgecolor="k")
        ax.axhline(0, color="grey", lw=0.5)
        ax.axvline(0, color="grey", lw=0.5)
        ax.set_xlim(-lim, lim)
        ax.set_ylim(-lim, lim)
        ax.set_title(f"step {s:,}")
        ax.set_xlabel("SVD dim 1")
    axes[0].set_ylabel("SVD dim 2")
    axes[0].legend(fontsize=9, loc="lower left", markerscale=3)


def mean_arrows(ax, q: np.ndarray, k: np.ndarray, title: str = "") -> None:
    """The paper's Figs. 12, 21, 22: the trajectories of Q̄_s and K̄_s (S, 2), one arrow per checkpoint."""
    blue, orange = sns.color_palette("colorblind")[:2]
    for pts, color, label in ((np.asarray(q), blue, f"mean query {QBAR}"), (np.asarray(k), orange, f"mean key {KBAR}")):
        for a, b in zip(pts[:-1], pts[1:], strict=True):
            ax.annotate("", xy=b, xytext=a, arrowprops=dict(arrowstyle="->", color=color, lw=1.4))
        ax.scatter(*pts[0], color=color, s=25, marker="o", label=f"{label} (step 0 = dot)")
    allp = np.concatenate([q, k])
    lim = 1.15 * float(np.abs(allp).max()) + 1e-9
    ax.set_xlim(-lim, lim)
    ax.set_ylim(-lim, lim)
    ax.axhline(0, color="grey", lw=0.5)
    ax.axvline(0, color="grey", lw=0.5)
    ax.set_xlabel("SVD dim 1")
    ax.set_ylabel("SVD dim 2")
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=9)


def _symlog(res: Result) -> float:
    return max(1, res.steps[1])


def pretraining(res: Result) -> plt.Figure:
    """MLM loss along pretraining: training loss (running mean) and held-out loss at the checkpoints."""
    common.set_theme()
    fig, ax = plt.subplots(figsize=(8, 3.8))
    for s in res.seeds:
        r = res.runs[str(s)]
        tl = r.array("train_loss")
        if tl.size:
            w = max(1, len(tl) // 100)
            ax.plot(np.arange(w, len(tl) + 1), moving_average(tl, w), label=f"seed {s} (train)")
        ev = {int(k): v for k, v in r.eval_loss.items()}
        if ev:
            ax.scatter(list(ev), list(ev.values()), s=14, marker="s", label=f"seed {s} (held-out, test split)")
    if res.source != "pretrain":
        ax.text(0.5, 0.5, "MultiBERT checkpoints: no pretraining run here", ha="center", transform=ax.transAxes)
    uni = res.first.unigram_nats
    if uni:
        ax.axhline(uni, color="grey", ls="--", lw=1, label=f"unigram predictor ({uni:.2f})")
        ax.axhline(uni - TARGET_BELOW_UNIGRAM, color="grey", ls=":", lw=1,
                   label=f"unigram − {TARGET_BELOW_UNIGRAM} nats")
    ax.set_xscale("symlog", linthresh=_symlog(res))
    ax.set_xlabel("step")
    ax.set_ylabel("MLM loss (nats)")
    ax.set_title(f"MLM pretraining of {res.what}, batch {res.batch_size}×{res.seq_len}")
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=9)
    return common.figure("qk-pretraining", fig)


def ablation_figure(res: Result) -> plt.Figure:
    """The centring ablation: held-out MLM loss, mean attention entropy (over layers and heads) and the
    mean key's norm ‖K̄‖ in layers 1 and up (where centring makes K̄ = b_K) along pretraining, plain
    against centred blocks (mean over seeds, thin lines per seed)."""
    common.set_theme()
    a = res.ablation_summary
    fig, axes = plt.subplots(1, 3, figsize=(8.5, 3.6))
    pal = common.sns.color_palette()
    labels = ("held-out MLM loss (nats)", "attention entropy (nats)", r"mean $\|\bar K\|$, layers 1 and up")
    for ax, key, label in zip(axes, ("eval", "entropy", "k_norm_later"), labels, strict=True):
        for i, name in enumerate(("plain", "centred")):
            per_seed, mean = res.ablation_curve(name, key)
            for row in per_seed:
                ax.plot(res.steps, row, color=pal[i], lw=0.6, alpha=0.5)
            ax.plot(res.steps, mean, color=pal[i], marker="o", ms=3, label=f"{name} blocks")
        ax.set_xscale("symlog", linthresh=_symlog(res))
        ax.set_xlabel("step")
        ax.set_title(label, fontsize=10)
    axes[2].set_yscale("symlog", linthresh=0.01)
    if a.unigram_nats:
        axes[0].axhline(a.unigram_nats, color="grey", ls="--", lw=1, label="unigram predictor")
    axes[1].axhline(np.log(res.tokens_per_sample), color="grey", ls=":", lw=1, label="log(mean length)")
    for ax in axes[:2]:
        ax.legend(fontsize=9)
    fig.suptitle(f"Plain against centred blocks (token mean removed), {common.seeds_text(len(a.seeds))}")
    return common.figure("qk-ablation", fig)


def _legend_below(fig: plt.Figure, axes) -> None:
    """One legend of the scatter panels beneath the grid, in place of one inside each row's first panel."""
    handles, labels = axes[0, 0].get_legend_handles_labels()
    for ax in axes[:, 0]:
        if ax.get_legend() is not None:
            ax.get_legend().remove()
    fig.legend(handles, labels, loc="lower center", ncol=2, markerscale=3, frameon=False)
    fig.tight_layout(rect=(0, 0.06, 1, 1))


def fig11(res: Result) -> plt.Figure:
    """The paper's Fig. 11: display tokens' Q_s and K_s of the two example heads on the common SVD."""
    common.set_theme()
    R, shown = res.first, res.shown
    fig, axes = plt.subplots(2, len(shown), figsize=(1.75 * len(shown) + 1.2, 5.6), squeeze=False)
    for row, key in zip(axes, ("similar", "opposite"), strict=True):
        ex = R.example(key)
        scatter_panels(row, ex, "union", res.steps, shown)
        row[0].set_ylabel(f"{res.example_label(key)}:\nlayer {ex['layer']} head {ex['head']} "
                          f"(cos {ex['cos_final']:+.2f})\nSVD dim 2", fontsize=9)
    fig.suptitle(f"{Q_S} and {K_S}, seed {res.seeds[0]}, on one SVD of their union over all steps")
    _legend_below(fig, axes)
    return common.figure("qk-fig11", fig)


def _arrows(res: Result, basis: str, axes, label_fmt: str) -> None:
    R = res.first
    for ax, key in zip(axes, ("similar", "opposite"), strict=True):
        e = R.example(key)
        m = R.means[basis]
        mean_arrows(ax, np.asarray(m["q"])[:, e["layer"], e["head"]], np.asarray(m["k"])[:, e["layer"], e["head"]],
                    title=label_fmt.format(label=res.example_label(key), layer=e["layer"], head=e["head"],
                                           cos=e["cos_final"]))


def fig12(res: Result) -> plt.Figure:
    """The paper's Fig. 12: the trajectories of the mean query and key of the two example heads (common SVD)."""
    common.set_theme()
    fig, axes = plt.subplots(1, 2, figsize=(8, 4.4))
    _arrows(res, "union", axes, "{label}: layer {layer}, head {head} (final cos {cos:+.2f})")
    fig.suptitle(f"Mean query and key along training, common SVD (seed {res.seeds[0]})")
    return common.figure("qk-fig12", fig)


def _layer_grid(n: int) -> tuple[plt.Figure, list[plt.Axes]]:
    """A figure with one panel per layer, at most four a row (unused panels hidden)."""
    cols = 2 if n <= 4 else 4
    rows = -(-n // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(8 if cols == 2 else 9, 3.0 * rows), sharey=True, squeeze=False)
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    return fig, list(axes.flat[:n])


def fig13(res: Result) -> plt.Figure:
    """The paper's Fig. 13: cos(Q̄_s, K̄_s) per head, one panel per layer (first seed)."""
    common.set_theme()
    cos = res.first.array("cos")                                                      # (S, layers, heads)
    fig, axes = _layer_grid(res.n_layers)
    for li, ax in enumerate(axes):
        common.layer_curves(ax, {f"head {h}": cos[:, li, h] for h in range(res.n_heads)}, x=np.array(res.steps),
                            symlog_x=_symlog(res), xlabel="step", ylabel=COS, title=f"layer {li}")
        ax.axhline(0, color="grey", lw=0.6)
        ax.set_ylim(-1.05, 1.05)
        ax.legend(fontsize=9, ncol=2)
    fig.suptitle(f"{COS} along training, seed {res.seeds[0]}")
    return common.figure("qk-fig13", fig)


def aligned_trend(res: Result) -> plt.Figure:
    """The share of aligned heads against the tokens seen (log axis): each seed's checkpoints (faint; hollow
    before the end of warm-up, outside the fit), the mean over seeds at the fitted checkpoints, each fitted form
    carried to MultiBERT's tokens and the band there; the end-state models with a stated budget, apart."""
    common.set_theme()
    fig, ax = plt.subplots(figsize=(8, 4.8))
    aligned = res.trend_finding("aligned")
    t = aligned.at_scale if aligned else None
    pal = sns.color_palette("colorblind")
    tokens, share = res.checkpoint_tokens(), res.per_checkpoint("aligned")
    used = np.isin(res.steps, res.trend_steps())
    on = np.asarray(res.steps) > 0
    for i in range(len(res.seeds)):
        ax.plot(tokens[on], share[i, on], color="grey", alpha=0.35, lw=1, label="each seed" if i == 0 else None)
        ax.scatter(tokens[on & ~used], share[i, on & ~used], s=16, facecolors="none", edgecolors="grey", alpha=0.6,
                   label="before the end of warm-up (not fitted)" if i == 0 else None)
    if t is not None:
        common.trend_panel(ax, t, colour=pal[0], mean_label=f"mean over {common.seeds_text(t.units)}, fitted",
                           band_label="band at MultiBERT's tokens")
        b = t.band
        beyond = "\n(beyond the axis)" if b.low < 0 or b.high > 1 else ""
        ax.annotate(f"MultiBERT: band\n{b.low:+.2f} to {b.high:+.2f}{beyond}", (t.target, 0.65), xytext=(-8, 0),
                    textcoords="offset points", ha="right", va="center", fontsize=9, color=pal[0])
    for r in res.end_state_budgets():
        ax.scatter([r["tokens"]], [r["aligned"]], marker="D", s=50, color=pal[2], zorder=4,
                   label=f"{r['model']}, end state (its tokens are bytes; not fitted)")
    ax.axhline(ALMOST_ALL, color="grey", ls="-.", lw=1, label=f"almost all ({ALMOST_ALL:g})")
    ax.set_xscale("log")
    ax.set_xlim(right=3 * MULTIBERT_TOKENS)
    ax.set_ylim(0, 1)
    ax.set_xlabel("training tokens per seed")
    ax.set_ylabel(rf"share of heads, $|\cos(\bar Q, \bar K)| \geq {res.threshold:g}$")
    ax.set_title("Aligned heads along pretraining, carried to MultiBERT's tokens")
    fig.legend(*ax.get_legend_handles_labels(), loc="lower center", ncol=2, fontsize=9, frameon=False)
    fig.tight_layout(rect=(0, 0.2, 1, 1))
    return common.figure("qk-aligned-trend", fig)


def fig14(res: Result) -> plt.Figure:
    """The paper's Fig. 14: Q̄_s·K̄_s of the two example heads, and |Q̄_s·K̄_s| per layer over heads and seeds."""
    common.set_theme()
    dot = res.first.array("dot")
    fig, axes = plt.subplots(1, 3, figsize=(8.5, 3.8))
    for ax, key in zip(axes[:2], ("similar", "opposite"), strict=True):
        ex = res.first.example(key)
        common.layer_curves(ax, {f"layer {ex['layer']} head {ex['head']} (cos {ex['cos_final']:+.2f})":
                                 dot[:, ex["layer"], ex["head"]]},
                            x=np.array(res.steps), symlog_x=_symlog(res), xlabel="step", ylabel=DOT,
                            title=res.example_label(key))
        ax.axhline(0, color="grey", lw=0.6)
        ax.legend(fontsize=9)
    common.layer_curves(axes[2], {f"layer {li}": v for li, v in enumerate(res.abs_dot_over_heads())},
                        x=np.array(res.steps), symlog_x=_symlog(res), xlabel="step",
                        ylabel=f"|{DOT}|, mean over heads", title=f"all heads, {common.seeds_text(len(res.seeds))}",
                        logy=True)
    axes[2].set_xlim(left=0)
    axes[2].legend(fontsize=9)
    fig.suptitle("Scalar product of the mean query and the mean key along training")
    return common.figure("qk-fig14", fig)


def fig15(res: Result) -> plt.Figure:
    """The paper's Fig. 15: mean attention-row entropy per layer along training (mean ± sd over seeds)."""
    common.set_theme()
    ent = res.stacked("entropy_layer")                                                # (seeds, S, layers)
    fig, ax = plt.subplots(figsize=(8, 3.6))
    common.layer_curves(ax, {f"layer {li}": ent[:, :, li] for li in range(res.n_layers)}, x=np.array(res.steps),
                        symlog_x=_symlog(res), xlabel="step", ylabel="mean row entropy (nats)",
                        title=f"Attention entropy per layer, {common.seeds_text(len(res.seeds))} (±1 sd)")
    ax.axhline(np.log(res.tokens_per_sample), color="grey", ls=":", lw=1)
    ax.legend(fontsize=9)
    return common.figure("qk-fig15", fig)


def fig19_20(res: Result) -> plt.Figure:
    """The paper's Figs. 19-20: the 'opposite' example head on the SVD of the keys only and of the queries only."""
    common.set_theme()
    ex = res.first.example("opposite")
    shown = res.shown
    fig, axes = plt.subplots(2, len(shown), figsize=(1.75 * len(shown) + 1.2, 5.6), squeeze=False)
    for row, basis in zip(axes, ("K", "Q"), strict=True):
        scatter_panels(row, ex, basis, res.steps, shown)
        row[0].set_ylabel(f"SVD of ${basis}_s$ only\nSVD dim 2")
    fig.suptitle(f"{res.example_label('opposite')} head (layer {ex['layer']} head {ex['head']}, seed "
                 f"{res.seeds[0]})\non the SVD of the keys (top) or of the queries (bottom)")
    _legend_below(fig, axes)
    return common.figure("qk-fig19-20", fig)


def fig21_22(res: Result) -> plt.Figure:
    """The paper's Figs. 21-22: the mean trajectories of the two example heads on the K-only and Q-only SVDs."""
    common.set_theme()
    fig, axes = plt.subplots(2, 2, figsize=(8.2, 8))
    for ax_row, basis in zip(axes, ("K", "Q"), strict=True):
        _arrows(res, basis, ax_row, f"${basis}_s$-only SVD, {{label}}: layer {{layer}} head {{head}}")
    fig.suptitle(f"Mean query and key along training (seed {res.seeds[0]})")
    return common.figure("qk-fig21-22", fig)


def fig23(res: Result) -> plt.Figure:
    """The paper's Fig. 23: cos(Q̄_s, K̄_s) with the heads of a layer concatenated, one curve per seed."""
    common.set_theme()
    cc = res.stacked("cos_concat")                                                    # (seeds, S, layers)
    fig, axes = _layer_grid(res.n_layers)
    for li, ax in enumerate(axes):
        common.layer_curves(ax, {f"seed {s}": cc[i, :, li] for i, s in enumerate(res.seeds)}, x=np.array(res.steps),
                            symlog_x=_symlog(res), xlabel="step", ylabel="cos, heads concatenated", title=f"layer {li}")
        ax.axhline(0, color="grey", lw=0.6)
        ax.set_ylim(-1.05, 1.05)
        ax.legend(fontsize=9)
    fig.suptitle(f"{COS} with the heads of a layer concatenated, per seed")
    return common.figure("qk-fig23", fig)


# --- tables -----------------------------------------------------------------------------------------

#: how the tables show a value that does not exist (a median onset when no head settles)
MISSING = "—"


def _iv(iv: Interval, digits: int) -> str:
    """An interval over seeds for a table: the value alone when every seed gives the same one."""
    if iv.has_interval and iv.low == iv.high:
        return f"{iv.estimate:.{digits}f}, every seed"
    return iv.text(digits, signed=False)


def alignment_table(res: Result):
    """Per layer (`Result.layer_rows`): aligned heads per seed and the final mean |cos(Q̄, K̄)| with their
    intervals over seeds, opposite- and common-direction heads over all seeds, the mean final cosine."""
    n = len(res.seeds)
    df = pd.DataFrame([{"layer": r["layer"],
                        f"aligned heads per seed (of {r['heads']}), 95 % interval": _iv(r["aligned"], 1),
                        f"opposite / common, {n} seeds": f"{r['opposite']} / {r['common']}",
                        "mean |cos| at the end": _iv(r["abs_cos"], 2), "mean cos": f"{r['cos']:+.2f}"}
                       for r in res.layer_rows()])
    return common.table(df)


#: how the trend table heads each form's value at MultiBERT's tokens
FORM_NAMES = {"log": "log form", "inverse square root": "1/√x form", "linear": "linear form"}


def trend_table(res: Result):
    """Per trajectory finding with a trend (`Finding.at_scale`): its mean over seeds at the last step, each form's
    value at MultiBERT's tokens, the band there, how far along the tokens the band still decides, and the verdict
    it gives at the paper's setting."""
    rows = []
    for f in corrected(res.findings()):
        t = f.at_scale
        if t is None:
            continue
        where = f.decides_to()
        rows.append({"finding": f.key, "last step": f.effect.estimate,
                     **{FORM_NAMES[fit.form]: fit.at_target.estimate for fit in t.fits},
                     "band at MultiBERT's tokens": f"{t.band.low:+.2f} to {t.band.high:+.2f}",
                     "decides up to (M tokens)": where / 1e6 if where is not None else MISSING,
                     "verdict there": f.paper_scale_verdict})
    return common.table(pd.DataFrame(rows), digits=2, compact=True)


def scalar_product_table(res: Result):
    """Per layer: mean |Q̄·K̄| at step 0 and at the last step, the growth factor (and the centred model's at the
    last step)."""
    last = f"{res.steps[-1]:,}"
    rows = []
    for r in res.layer_rows():
        row = {"layer": r["layer"], "|Q̄·K̄| at step 0": r["abs_dot_first"], f"at step {last}": r["abs_dot_final"],
               "growth (×)": f"{r['abs_dot_growth']:,.0f}"}
        if np.isfinite(r["abs_dot_centred"]):
            row[f"at step {last}, centred blocks"] = r["abs_dot_centred"]
        rows.append(row)
    return common.table(pd.DataFrame(rows), digits=2)


def entropy_table(res: Result):
    """Per layer: attention entropy at the first and last step (mean over seeds), its lowest value and when."""
    df = pd.DataFrame([{"layer": r["layer"], f"entropy at step {res.steps[0]}": r["entropy_first"],
                        f"at step {res.steps[-1]:,}": r["entropy_final"], "lowest": r["entropy_lowest"],
                        "lowest at step": f"{r['entropy_lowest_step']:,}"} for r in res.layer_rows()])
    return common.table(df, digits=2)


def centring_layer_table(res: Result):
    """Per layer from 1: final attention entropy, plain and centred, and centred − plain over seeds."""
    df = pd.DataFrame([{"layer": r["layer"], "final entropy, plain": r["plain"], "centred": r["centred"],
                        "centred − plain, 95 % interval": r["diff"].text(2)}
                       for r in (res.ablation_summary.later_layer_rows() if res.ablation_summary else [])])
    return common.table(df, digits=2)


def seed_frame(res: Result) -> pd.DataFrame:
    """The timing claims seed by seed (`compare_runs`' `per_seed`): held-out loss, aligned head counts, median
    onset of the opposite-direction heads, mean |cos(Q̄, K̄)|, and the attention entropy (mean over layers) at
    its lowest point, when, and at the end."""
    rows = []
    for r in res.comparison.per_seed:
        onset = r["median_onset"]["opposite"]
        rows.append({"seed": r["seed"], "held-out loss": r["eval_final"],
                     "opposite / common heads": f"{r['n_opposite']} / {r['n_common']}",
                     "median onset, opposite": MISSING if onset is None else f"{onset:,}",
                     "mean |cos| at the end": r["abs_cos_final"], "lowest entropy": r["entropy_lowest"],
                     "at step": f"{r['entropy_lowest_step']:,}", "entropy at the end": r["entropy_final"]})
    return pd.DataFrame(rows)


#: the seed table's two halves (five columns at most each, so that both fit the page)
SEED_ALIGNMENT = ["seed", "held-out loss", "opposite / common heads", "median onset, opposite", "mean |cos| at the end"]
SEED_ENTROPY = ["seed", "lowest entropy", "at step", "entropy at the end"]


def seed_table(res: Result):
    """Per seed: held-out loss and the alignment (heads, onset, mean |cos|)."""
    return common.table(seed_frame(res)[SEED_ALIGNMENT], digits=2)


def seed_entropy_table(res: Result):
    """Per seed: the attention entropy (mean over layers) at its lowest point, when, and at the end."""
    return common.table(seed_frame(res)[SEED_ENTROPY], digits=2)


def pretraining_table(res: Result):
    """Per seed: training loss early and late, held-out MLM loss at the first and last step, timings."""
    first, last = res.steps[0], f"{res.steps[-1]:,}"
    df = pd.DataFrame([{"seed": r["seed"],
                        "train loss, first 20 → last 50 steps": f"{r['train_first']:.2f} → {r['train_last']:.2f}",
                        f"held-out loss, step {first} → {last}": f"{r['eval_first']:.2f} → {r['eval_final']:.2f}",
                        "pretraining (min)": r["pretrain_s"] / 60, "steps/s": r["steps_per_s"]}
                       for r in res.pretraining_rows()])
    return common.table(df, digits=2)


def probe_table(res: Result):
    """The recipe probes (`Probe.row`): recipe, tokens seen, final held-out loss, gap to unigram."""
    rows = [p.row() for p in res.probes]
    if not rows:
        return common.table(pd.DataFrame({"recipe probes": ["none committed (scripts/qk_recipe_probe.py)"]}))
    df = pd.DataFrame([{"probe": r["probe"],
                        "recipe": f"lr {r['lr']:g}, batch {r['batch']}"
                                  + (", WikiText ×3, no SST-2 phrases" if r["wiki_weighted"] else "")
                                  + (f", dropout {r['dropout']:g}" if r["dropout"] else ""),
                        "tokens seen (M)": r["mtokens"], "held-out loss": r["eval_final"],
                        "below unigram": r["below_unigram"]} for r in rows])
    return common.table(df, digits=2)


# --- the end state of real pretraining ---------------------------------------------------------------

def end_state_figure(res: Result) -> plt.Figure:
    """Per measured model (one panel each): mean |cos(Q̄, K̄)| over the heads of every layer, pretrained
    (each head a dot) against the untrained twin, and the chance level E|cos| in R^{d_k}."""
    common.set_theme()
    rows = res.end_state_rows()
    n = len(rows)
    if not n:
        fig, ax = plt.subplots(figsize=(6, 1.5))
        ax.axis("off")
        ax.text(0.5, 0.5, "no pretrained model measured here", ha="center")
        return common.figure("qk-end-state", fig)
    cols = min(n, 2)
    fig, axes = plt.subplots(-(-n // cols), cols, figsize=(3.6 * cols, 3.1 * -(-n // cols)), squeeze=False)
    pal = common.sns.color_palette()
    for ax, row in zip(axes.flat, rows, strict=False):
        name = row["model"]
        lr = res.end_state[name].layer_rows(res.threshold)
        x = np.arange(len(lr))
        h = res.end_state[name].heads("trained")["cos"]
        ax.scatter(np.repeat(x, h.shape[1]), h.ravel(), s=6, alpha=0.35, color=pal[0])
        ax.plot(x, [r["trained_cos"] for r in lr], color=pal[0], marker="o", ms=3, label="pretrained (mean)")
        ax.plot(x, [r["twin_cos"] for r in lr], color=pal[1], ls="--", marker="s", ms=3, label="untrained twin")
        ax.axhline(row["chance"], color="grey", ls=":", lw=1, label="chance at the head's $d_k$")
        ax.axhline(res.threshold, color="grey", lw=0.5)
        ax.set_ylim(0, 1.02)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel("layer" + (" (query and key after the rotary embedding)" if row["rotary"] else ""))
        ax.set_ylabel(r"$|\cos(\bar Q, \bar K)|$")
        ax.set_title(name, fontsize=10)
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    handles, labels = axes.flat[0].get_legend_handles_labels()
    if n < axes.size:                  # the legend in the empty panel, where it has room at the text's size
        spare = axes.flat[n]
        spare.set_visible(True)
        spare.axis("off")
        spare.legend(handles, labels, loc="center", fontsize=11, frameon=False)
    else:
        axes.flat[0].legend(fontsize=10, loc="upper right")
    fig.suptitle("The mean query and key at the end of real pretraining, per layer")
    fig.tight_layout()
    return common.figure("qk-end-state", fig)


def end_state_table(res: Result):
    """Per model (`Result.end_state_rows`): heads, aligned heads pretrained / twin, mean |cos(Q̄, K̄)| pretrained
    (bootstrap over heads) and twin, the chance level."""
    df = pd.DataFrame([{"model": r["model"], "layers × heads": f"{r['layers']} × {r['heads']}",
                        "aligned: pretrained (opposite / common) / twin":
                            f"{r['trained']['aligned']} ({r['trained']['opposite']} / {r['trained']['common']}) / "
                            f"{r['twin']['aligned']}",
                        "mean |cos|, pretrained": r["trained"]["abs_cos"].text(2, signed=False),
                        "mean |cos|, twin / chance": f"{r['twin']['abs_cos'].estimate:.2f} / {r['chance']:.2f}"}
                       for r in res.end_state_rows()])
    return common.scroll(common.table(df).set_caption(f"A head is aligned when |cos(Q̄, K̄)| ≥ {res.threshold}"))


def end_state_score_table(res: Result):
    """Per model, medians over heads, pretrained / twin: |Q̄·K̄|, the mean's share of the score and the mean
    query's share of what the softmax sees (`core.qk.score_parts`)."""
    df = pd.DataFrame([{"model": r["model"],
                        "|Q̄·K̄|, pretrained / twin": f"{r['trained']['abs_dot']:.3g} / {r['twin']['abs_dot']:.3g}",
                        "mean's share of the score":
                            f"{r['trained']['mean_share']:.2f} / {r['twin']['mean_share']:.2f}",
                        "Q̄'s share of what the softmax sees":
                            f"{r['trained']['drift_share']:.2f} / {r['twin']['drift_share']:.2f}"}
                       for r in res.end_state_rows()])
    return common.scroll(common.table(df))


# --- the page ----------------------------------------------------------------------------------------

def _num(v) -> float:
    """A glued number: NaN for a missing one (a ci run without it), so a format spec never fails."""
    return float("nan") if v is None else float(v)


def _layers(layers: list[int]) -> str:
    """A list of layers (or steps) as the prose names it: "0", "0 and 2", "1, 2 and 3", "200 and 2,000" ("none"
    when empty)."""
    if not layers:
        return "none"
    return f"{layers[0]:,}" if len(layers) == 1 else ", ".join(f"{v:,}" for v in layers[:-1]) + f" and {layers[-1]:,}"


def _span(first: int, last: int) -> str:
    """Layers `first` to `last` as the prose names them: "1–3", "1" (one layer)."""
    return str(first) if last <= first else f"{first}–{last}"


#: how the prose names the pretraining's precision (`Params.precision`)
PRECISION = {"bf16": "bf16 autocast with fp32 weights", "fp32": "fp32 throughout",
             "auto": "bf16 autocast with fp32 weights where the CPU computes bf16 natively, fp32 elsewhere"}


def publish(res: Result) -> None:
    """Draw and glue every figure and glue every number the prose quotes (literal dicts of full keys, one per
    section of the chapter)."""
    for draw in (pretraining, fig11, fig12, fig13, aligned_trend, fig14, fig15, fig19_20, fig21_22, fig23,
                 end_state_figure):
        draw(res)
    if res.ablation_summary:
        ablation_figure(res)
    common.publish({**_setup(res), **_alignment(res), **_trend(res), **_products(res), **_centring(res),
                    **_examples(res), **_learning(res), **_end_state(res)})


def _setup(res: Result) -> dict[str, object]:
    """The run: the model, its pretraining and what is read from it."""
    pre = res.pretraining_reading()
    return {
        "qk-n-layers": res.n_layers, "qk-d-k": res.d_k, "qk-d-model": res.d_k * res.n_heads,
        "qk-n-seeds": len(res.seeds), "qk-first-seed": res.seeds[0], "qk-last-step": f"{res.steps[-1]:,}",
        "qk-batch": res.batch_size, "qk-seq-len": res.seq_len, "qk-n-samples": res.n_samples,
        "qk-max-length": res.max_length, "qk-n-display": res.n_display,
        "qk-available-mtokens": pre["available"] / 1e6, "qk-mtokens": res.tokens_seen / 1e6, "qk-passes": pre["passes"],
        "qk-later-layers": _span(1, res.n_layers - 1), "qk-n-shown": len(res.shown),
        "qk-shown-steps": _layers(res.shown),
        "qk-mask-prob": res.mask_prob, "qk-dropout": res.dropout, "qk-precision": PRECISION[res.precision],
        "qk-svd-fraction": res.svd_fraction, "qk-vocab": BERT_VOCAB, "qk-paper-checkpoints": PAPER_CHECKPOINTS,
        "qk-checkpoint-mb": MULTIBERT_CHECKPOINT_MB, "qk-paper-gb": PAPER_CHECKPOINTS * MULTIBERT_CHECKPOINT_MB / 1000,
        "qk-first-run-n": len(FIRST_RUN_STEPS), "qk-byte-mlm-layers": BYTE_MLM.layers,
        "qk-first-run-gb": len(FIRST_RUN_STEPS) * MULTIBERT_CHECKPOINT_MB / 1000,
    }


def _alignment(res: Result) -> dict[str, object]:
    """Fig. 13: how many heads align their queries and keys, in which layers, from which step."""
    c, rows, by_layer = res.comparison, res.layer_rows(), res.alignment_by_layer()
    onset = c.median_onset["opposite"]
    return {
        "qk-chance": res.chance, "qk-threshold": res.threshold, "qk-chance-one-in": 1 / res.chance_share,
        "qk-abs-cos-first": c.abs_cos_first, "qk-abs-cos-final": c.abs_cos_final,
        "qk-n-aligned": c.n_common + c.n_opposite, "qk-n-heads": c.n_heads,
        "qk-almost-all": ALMOST_ALL, "qk-cos-layer0": rows[0]["cos"],
        "qk-aligned-layers": _layers(by_layer["layers"]), "qk-aligned-in-layers": by_layer["aligned"],
        "qk-heads-in-layers": by_layer["heads"], "qk-layers-at-chance": _layers(by_layer["at_chance"]),
        "qk-onset-opposite": _num(onset), "qk-onset-opposite-share": _num(onset) / res.steps[-1],
    }


def _trend(res: Result) -> dict[str, object]:
    """The aligned share carried to MultiBERT's tokens, and the longer budget run."""
    nan = float("nan")
    aligned = res.trend_finding("aligned")
    trend, reach = (aligned.at_scale, aligned.decides_to()) if aligned else (None, None)
    isqrt = next((fit.at_target for fit in trend.fits if fit.form == "inverse square root"), None) if trend else None
    budget = next(iter(res.end_state_budgets()), None)
    return {
        "qk-warmup-steps": f"{res.warmup_steps:,}", "qk-trend-n": len(res.trend_steps()),
        "qk-trend-first-step": f"{res.trend_steps()[0]:,}" if trend else MISSING,
        "qk-multibert-gtokens": MULTIBERT_TOKENS / 1e9, "qk-multibert-factor": MULTIBERT_TOKENS / res.tokens_seen,
        "qk-trend-low": trend.band.low if trend else nan, "qk-trend-high": trend.band.high if trend else nan,
        "qk-trend-isqrt-low": isqrt.low if isqrt else nan, "qk-trend-isqrt-high": isqrt.high if isqrt else nan,
        "qk-trend-reach-mtokens": reach / 1e6 if reach else nan,
        "qk-trend-reach-factor": reach / res.tokens_seen if reach else nan,
        "qk-budget-mtokens": budget["tokens"] / 1e6 if budget else nan,
        "qk-budget-aligned": budget["aligned"] if budget else nan,
    }


def _products(res: Result) -> dict[str, object]:
    """Figs. 14 and 15: the scalar products of queries and keys, and the attention's entropy."""
    c, rows = res.comparison, res.layer_rows()
    first_mean, final_mean = res.entropy_means()
    return {
        "qk-dot-layer0-first": rows[0]["abs_dot_first"], "qk-dot-layer0-final": rows[0]["abs_dot_final"],
        "qk-dot-layer0-centred": rows[0]["abs_dot_centred"],
        "qk-abs-dot-first": c.abs_dot_first, "qk-abs-dot-final": c.abs_dot_final,
        "qk-dot-later-min": min(r["abs_dot_final"] for r in rows[1:]),
        "qk-dot-later-max": max(r["abs_dot_final"] for r in rows[1:]),
        "qk-tokens-per-sample": res.tokens_per_sample, "qk-entropy-falls": c.entropy_falls,
        "qk-entropy-first-mean": first_mean, "qk-entropy-final-mean": final_mean,
        "qk-entropy-first-layer": float(c.entropy_final[0]), "qk-entropy-last-layer": float(c.entropy_final[-1]),
    }


def _centring(res: Result) -> dict[str, object]:
    """The centring test: pretraining with centred keys beside the plain run (NaN where it was not run)."""
    a, nan = res.ablation_summary, float("nan")
    if a:
        later, tail, last_layers = a.later, a.late_loss_change(), a.later_layers_final
    return {
        "qk-abl-plain-eval-final": a.plain["eval_final"] if a else nan,
        "qk-abl-centred-eval-final": a.centred["eval_final"] if a else nan,
        "qk-abl-plain-entropy-first-later": later["plain"]["first_mean"] if a else nan,
        "qk-abl-centred-entropy-first-later": later["centred"]["first_mean"] if a else nan,
        "qk-abl-plain-entropy-final-later": later["plain"]["final_mean"] if a else nan,
        "qk-abl-centred-entropy-final-later": later["centred"]["final_mean"] if a else nan,
        "qk-abl-plain-drop-later": a.later_interval("plain_drop").text(2) if a else MISSING,
        "qk-abl-centred-drop-later": a.later_interval("centred_drop").text(2) if a else MISSING,
        "qk-abl-diff-drop-later": a.later_interval("diff_drop").text(2) if a else MISSING,
        "qk-abl-plain-q-norm-later": last_layers("plain", "q_norm") if a else nan,
        "qk-abl-centred-q-norm-later": last_layers("centred", "q_norm") if a else nan,
        "qk-abl-plain-k-norm-later": last_layers("plain", "k_norm") if a else nan,
        "qk-abl-centred-k-norm-later": last_layers("centred", "k_norm") if a else nan,
        "qk-abl-plain-abs-dot-later": last_layers("plain", "abs_dot") if a else nan,
        "qk-abl-centred-abs-dot-later": last_layers("centred", "abs_dot") if a else nan,
        "qk-abl-diff-eval": a.interval("diff_eval_final").text(2) if a else MISSING,
        "qk-abl-centred-above-unigram": (a.centred["eval_final"] - _num(a.unigram_nats)) if a else nan,
        "qk-abl-centred-eval-tail": tail["centred"] if a else nan,
        "qk-abl-plain-eval-tail": tail["plain"] if a else nan,
        "qk-abl-tail-steps": int(tail["to"] - tail["from"]) if a else 0,
    }


def _examples(res: Result) -> dict[str, object]:
    """Figs. 11-12 and 19-23: the heads the figures show (first seed) and the directions queries and keys share."""
    c, ex = res.comparison, res.first.display
    return {
        "qk-opposite-layer": ex["opposite"]["layer"], "qk-opposite-head": ex["opposite"]["head"],
        "qk-opposite-cos": ex["opposite"]["cos_final"], "qk-similar-layer": ex["similar"]["layer"],
        "qk-similar-head": ex["similar"]["head"], "qk-similar-cos": ex["similar"]["cos_final"],
        "qk-share-mean": c.union_share_mean, "qk-grow": c.union_grow, "qk-heads-per-seed": c.union_heads,
        "qk-other-k-moved": c.other_mean["K"]["moved"], "qk-other-q-moved": c.other_mean["Q"]["moved"],
        "qk-concat-same-sign": c.concat_same_sign_layers, "qk-concat-spread": c.concat_spread,
    }


def _learning(res: Result) -> dict[str, object]:
    """How far the model learned: its losses against the unigram baseline, and the probe of longer runs."""
    pre, probe = res.pretraining_reading(), res.probe_reading()
    return {
        "qk-eval-first": pre["eval_first"], "qk-eval-final": pre["eval_final"], "qk-train-final": pre["train_final"],
        "qk-uniform-loss": pre["uniform"], "qk-unigram": pre["unigram"], "qk-below-unigram": pre["below_unigram"],
        "qk-target-below": TARGET_BELOW_UNIGRAM, "qk-long-factor": res.long_run_factor(),
        "qk-probe-n": probe["n"], "qk-probe-mtokens": probe["mtokens"], "qk-probe-spread": probe["spread"],
        "qk-probe-weighting-diff": probe["weighting_diff"], "qk-probe-weighting-step": probe["weighting_step"],
        "qk-probe-book-gain": probe["book_gain"], "qk-probe-book-factor": res.tokens_seen / 1e6 / probe["mtokens"],
    }


def _end_state(res: Result) -> dict[str, object]:
    """The end state of real pretraining: the published models' heads, the rotary model before and after its
    rotation."""
    nan = float("nan")
    ends, end_sum = res.end_state, res.end_state_summary()
    rope = next((m for m, r in ends.items() if r.rotary), None)
    end_rows = {r["model"]: r for r in res.end_state_rows()}
    return {
        "qk-end-n-models": len(ends), "qk-end-n-heads": end_sum["n_heads"],
        "qk-end-samples": max((r.n_sequences for r in ends.values()), default=0),
        "qk-end-length": max((r.max_length for r in ends.values()), default=0),
        "qk-end-aligned": res.end_state_aligned().text(2, signed=False) if ends else MISSING,
        "qk-end-twin-aligned": _num(res.end_state_aligned("twin").estimate) if ends else nan,
        "qk-end-chance-share": res.end_state_chance_share() if ends else nan,
        "qk-end-missing": ", ".join(res.end_state_missing) or "none",
        "qk-end-rope-post-cos": end_rows[rope]["trained"]["abs_cos"].estimate if rope else nan,
        "qk-end-rope-pre-cos": end_sum[rope]["pre_rotary_abs_cos"] if rope else nan,
        "qk-end-rope-post-aligned": end_rows[rope]["trained"]["aligned"] if rope else 0,
        "qk-end-rope-pre-aligned": end_sum[rope]["pre_rotary_aligned"] if rope else 0,
    }


__all__ = ["pretraining", "ablation_figure", "aligned_trend", "fig11", "fig12", "fig13", "fig14", "fig15", "fig19_20",
           "fig21_22", "fig23", "end_state_figure", "end_state_table", "trend_table", "end_state_score_table",
           "alignment_table", "scalar_product_table", "entropy_table", "centring_layer_table",
           "seed_frame", "seed_table", "seed_entropy_table", "pretraining_table", "probe_table", "publish",
           "scatter_panels",
           "mean_arrows", "MISSING"]
