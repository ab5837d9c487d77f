"""Figures, tables and glued numbers of the ViT chapter (Yu & Zhang §3.3, Figure 6). Every interval, gap
and depth they show comes from `experiments.vit.Result`; this module draws and formats."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.ticker import MaxNLocator

from ..core.vit import FFN_SCALES
from ..experiments.vit import (
    ALIKE,
    CHANCE_MARGIN,
    CURVE,
    CURVE_EPOCHS,
    CURVE_GAPS,
    CURVE_WINDOW,
    FFN_SCALE_BASE,
    LEVEL_MARGIN,
    LR_DECAY,
    LR_DECAY_AT,
    RECIPES,
    Result,
    block_cost,
    side,
)
from . import common

#: the figures are drawn at the page's width, so their text is read at the size it is set in
WIDTH = 7.5
#: how the tables name the chapter's variants
NAMES = {"post-norm": "post-norm (5e-5)", "post-norm-full-lr": "post-norm (1e-4)", "pre-norm": "pre-norm",
         "de-escalated": "de-escalated"}
#: the block ablation's rows: what each block is, against the standard block
ABLATION_LABELS = {
    "standard": "standard block",
    "standard-scalar-ln": "standard, scalar-γ LN (Alg. 1's)",
    "standard-no-bias": "standard, no biases",
    "standard-no-proj": "standard, no output projection",
    "standard-relu": "standard, ReLU FFN",
    "standard-all-four": "standard, all four (PyTorch init)",
    "algorithm1-torch-ffn-init": "Algorithm 1, PyTorch's FFN init",
    "algorithm1-torch-v-init": "Algorithm 1, PyTorch's value-map init",
    "algorithm1-torch-ffn-init-x0.5": "Algorithm 1, PyTorch's FFN init, variance ×0.5",
    "algorithm1-torch-ffn-init-x2": "Algorithm 1, PyTorch's FFN init, variance ×2",
    "algorithm1-torch-ffn-init-x4": "Algorithm 1, PyTorch's FFN init, variance ×4",
    "algorithm1-torch-ffn-steps": "Algorithm 1, Xavier FFN, PyTorch-sized relative steps",
    "algorithm1": "Algorithm 1 block (all four + its init)",
}


def _blocks(res: Result) -> list[tuple[str, Result]]:
    """(label, Result) of Algorithm 1's blocks and, when run, the standard blocks."""
    std = res.standard_result()
    return [("Algorithm 1 blocks", res)] + ([("standard blocks", std)] if std is not None else [])


def _interval(iv, digits: int = 3) -> str:
    """An interval with ↑ when it lies above 0 and ↓ when below (`experiments.vit.side`)."""
    return iv.text(digits) + {1: " ↑", -1: " ↓", 0: ""}[side(iv)]


def _legend_below(fig: plt.Figure, ax, ncol: int = 4) -> None:
    """One legend for the whole figure, under its panels (so it covers no data)."""
    handles, labels = ax.get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=ncol, fontsize=9, frameon=False)


def fig6(res: Result) -> plt.Figure:
    """The paper's Fig. 6 at the main depth: training and test loss per epoch of every variant (mean ±
    1 sd over seeds), one row per block type."""
    common.set_theme()
    blocks = _blocks(res)
    fig, axes = plt.subplots(len(blocks), 2, figsize=(WIDTH, 3.0 * len(blocks) + 0.6), squeeze=False, sharex=True,
                             layout="constrained")
    for row, (label, r) in zip(axes, blocks, strict=True):
        for ax, key in zip(row, ("train_loss", "test_loss"), strict=True):
            common.layer_curves(ax, {NAMES.get(v, v): c for v, c in r.curves(key).items()}, x0=1, xlabel="epoch",
                                ylabel=key.replace("_", " "), title=f"{label}: {key.replace('_', ' ')}")
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
            ax.get_legend().remove()
    _legend_below(fig, axes[0, 0])
    fig.suptitle(f"ViT depth {res.depth}, {res.steps:,} optimiser steps, {common.seeds_text(len(res.seeds))} "
                 f"({res.scale} scale)")
    return common.figure("vit-fig6", fig)


def _gap_name(a: str, b: str) -> str:
    return f"{a} − {b}"


def budget_figure(res: Result) -> plt.Figure:
    """Each gap at the main depth against the training steps of the constant-rate runs (log axis): each seed's gap
    (faint), their mean, each form fitted to the means and carried to the paper's steps with the band there
    (`common.trend_panel`), the step-decay runs' gap at their own steps beside the last budget, and 0."""
    common.set_theme()
    fig, axes = plt.subplots(1, len(CURVE_GAPS), figsize=(WIDTH, 3.6), sharex=True, layout="constrained")
    fs = res.curve_findings()
    for ax, (a, b) in zip(axes, CURVE_GAPS, strict=True):
        t = fs[(a, b)].at_scale if (a, b) in fs else None
        common.trend_panel(ax, t, res.curve_steps, res.curve_gaps(a, b), mean_label="constant rate, mean over seeds")
        step = res.gap(a, b)
        ax.errorbar([res.steps * 1.25], [step.estimate], yerr=[[step.estimate - step.low], [step.high - step.estimate]],
                    fmt="D", color="C3", mfc="white", capsize=3, ms=5, label="step decay (the chapter's runs)")
        ax.axhline(0, color="grey", lw=1)
        ax.set_xlabel("optimiser steps")
        ax.set_title(_gap_name(a, b), fontsize=10)
        if t is None:
            ax.text(0.5, 0.95, "no trend:\nruns missing", transform=ax.transAxes, ha="center", va="top", fontsize=10)
    axes[0].set_ylabel("final training loss gap (nats)")
    handles, labels = common.legend_entries(axes)
    fig.legend(handles, labels, loc="outside lower center", ncol=3, fontsize=9, frameon=False)
    return common.figure("vit-budget", fig)


def budget_table(res: Result):
    """A column per gap: the constant-rate runs' gap at the curve's last budget beside the step-decay runs' (the
    finding's), and the trend's band at the paper's steps with the finding's verdict there."""
    fs = res.curve_findings()
    last = res.curve_steps[-1] if res.curve_steps else 0
    cols = {}
    for a, b in CURVE_GAPS:
        const, f = res.curve_at(a, b), fs.get((a, b))
        t = f.at_scale if f else None
        cols[_gap_name(a, b)] = {f"constant rate, {last:,} steps": const.text() if const else "—",
                                 f"step decay, {res.steps:,} steps": res.gap(a, b).text(),
                                 f"band at {res.paper_steps:,} steps": t.band.text() if t else "—",
                                 "verdict there": f.paper_scale_verdict if f else "—"}
    return common.table(pd.DataFrame(cols), index=True)


def tsim(res: Result) -> plt.Figure:
    """t_sim of every block's input on a fixed test batch after each epoch, one panel per variant; for
    the de-escalated model also t_sim just before each de-escalation step (dashed, last epoch)."""
    common.set_theme()
    n = len(res.variants)
    cols = 2 if n > 1 else 1
    rows = -(-n // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(WIDTH, 2.8 * rows + 0.6), sharey=True, squeeze=False,
                             layout="constrained")
    for ax, v in zip(axes.ravel(), res.variants, strict=False):
        common.layer_curves(ax, {f"epoch {e}": s for e, s in res.t_sim(v).items()}, ylabel=r"$t_\mathrm{sim}$",
                            title=NAMES.get(v, v), markers=False)
        before = res.histories[v][0].get("t_sim_before_deescalation")
        if before:
            last = max(before, key=int)
            ax.plot(np.arange(1, len(before[last]) + 1), before[last], ls="--", color="k", lw=1,
                    label=f"before de-escalation, epoch {last}")
            ax.legend(handles=ax.get_lines()[-1:], fontsize=9, loc="center right")
        elif ax.get_legend() is not None:
            ax.get_legend().remove()
    for ax in axes.ravel()[n:]:
        ax.axis("off")
    _legend_below(fig, axes[0, 0], ncol=max(1, len(res.t_sim(res.variants[0]))))
    fig.suptitle(r"$t_\mathrm{sim}$ per block (block 0 = patch embeddings + positions) along training")
    return common.figure("vit-tsim", fig)


def _depth_panel(ax, res: Result) -> None:
    """Final training loss against depth: per variant the mean ± 1 sd over seeds with each seed a dot,
    dodged sideways, on a log depth axis; dotted: chance."""
    pal = common.sns.color_palette()
    finals, spread = res.sweep_final("train_loss"), res.sweep_final_spread("train_loss")
    for i, (v, a) in enumerate(finals.items()):
        x = np.asarray(res.depths, dtype=float) * (1 + 0.04 * (i - 1.5))                   # dodge
        mean, sd = spread[v]
        ax.errorbar(x, mean, yerr=sd, color=pal[i], marker="o", ms=4, capsize=3, label=NAMES.get(v, v))
        ax.scatter(np.repeat(x, a.shape[1]), a.ravel(), color=pal[i], s=8, alpha=0.5)
    ax.axhline(np.log(10), color="grey", lw=0.8, ls=":")
    ax.set_xscale("log")
    ax.minorticks_off()
    ax.set_xticks(res.depths, [str(d) for d in res.depths])
    ax.set_xlabel("depth (blocks)")


def block_figure(res: Result) -> plt.Figure:
    """Final training loss against depth per variant, Algorithm 1's blocks and (when run) standard blocks,
    on one y axis (mean ± 1 sd over seeds, each seed a dot)."""
    common.set_theme()
    blocks = _blocks(res)
    fig, axes = plt.subplots(1, len(blocks), figsize=(WIDTH, 4.0), sharey=True, squeeze=False, layout="constrained")
    for ax, (label, r) in zip(axes[0], blocks, strict=True):
        _depth_panel(ax, r)
        ax.set_title(label)
    axes[0, 0].set_ylabel("final training loss")
    _legend_below(fig, axes[0, 0])
    fig.suptitle(f"{res.steps:,} optimiser steps of batch {res.batch_size} per run, "
                 f"{common.seeds_text(len(res.seeds))} ({res.scale} scale)")
    return common.figure("vit-blocks", fig)


def final_table(res: Result):
    """At the main depth, per variant: its learning rate, and per block type the final training loss and
    test accuracy (mean ± sd over seeds)."""
    rows = []
    for v in res.variants:
        row: dict[str, object] = {"variant": NAMES.get(v, v)}
        for _, r in _blocks(res):
            tag = "A1" if r is res else "std"
            for k, name in (("train_loss", "train loss"), ("test_acc", "test acc")):
                row[f"{name} {tag}"] = common.mean_sd(*r.final_spread(r.histories[v], k))
        rows.append(row)
    return common.table(pd.DataFrame(rows))


def gap_table(res: Result, block: str = "A1"):
    """Per depth, with Algorithm 1's blocks (`block="A1"`) or standard blocks ("std"), each variant's final
    training loss minus pre-norm's and de-escalated minus plain post-norm at the same rate (`Result.gap`:
    seed-paired mean [95 % t-interval], ↑ above 0, ↓ below)."""
    pairs = [("de-escalated", "pre-norm"), ("de-escalated", "post-norm-full-lr"), ("post-norm", "pre-norm"),
             ("post-norm-full-lr", "pre-norm")]
    rows = []
    for _, r in _blocks(res):
        if ("A1" if r is res else "std") != block:
            continue
        for d in r.depths:
            row: dict[str, object] = {"depth": d}
            for a, b in pairs:
                if a in r.variants and b in r.variants:
                    row[f"{NAMES[a]} − {NAMES[b]}"] = _interval(r.gap(a, b, d))
            rows.append(row)
    return common.table(pd.DataFrame(rows))


def block_table(res: Result, block: str = "A1"):
    """Per depth and variant, the final training loss and test accuracy (means over seeds) and the last block's
    t_sim (`Result.run_t_sim`, first seed), with Algorithm 1's blocks (`block="A1"`) or standard blocks ("std")."""
    r = dict(("A1" if b is res else "std", b) for _, b in _blocks(res)).get(block)
    rows = []
    for d in res.depths:
        if r is None or str(d) not in (r.sweep or {str(r.depth): 0}):
            continue
        for v in res.variants:
            hs = r.runs(d)[v]
            rows.append({"depth": d, "variant": NAMES.get(v, v),
                         "final train loss": r.final_spread(hs, "train_loss")[0],
                         "test accuracy": r.final_spread(hs, "test_acc")[0],
                         "last-block t_sim": r.run_t_sim(v, d)})
    return common.table(pd.DataFrame(rows), digits=3)


def _without_scales(grid: dict) -> dict:
    """An ablation grid without the FFN-scale sweep's blocks (`ffn_scale_table` and `ffn_scale_figure` show them)."""
    return {b: r for b, r in grid.items() if b not in FFN_SCALES}


def _loss(runs: dict, variant: str) -> str:
    """A block's final training loss of `variant` as mean ± sd over seeds."""
    return common.mean_sd(*Result.final_spread(runs[variant], "train_loss"))


def ablation_table(res: Result):
    """The block ablation (without the FFN-scale sweep): per depth and block, the final training loss of pre-norm
    and of de-escalated post-norm (mean ± sd over seeds) and their seed-paired gap (`Result.ablation_gaps`)."""
    rows = []
    for depth, grid in res.ablation_grids():
        gaps = res.ablation_gaps(depth)
        for block, runs in _without_scales(grid).items():
            row: dict[str, object] = {"depth": depth, "block": ABLATION_LABELS.get(block, block)}
            for v, name in (("pre-norm", "pre-norm loss"), ("de-escalated", "de-esc. loss")):
                row[name] = _loss(runs, v)
            row["de-esc. − pre-norm"] = _interval(gaps[block])
            rows.append(row)
    if not rows:
        return common.table(pd.DataFrame({"block ablation": ["not run (set `ablation_depth`)"]}))
    return common.table(pd.DataFrame(rows))


def ablation_figure(res: Result) -> plt.Figure | None:
    """De-escalated − pre-norm final training loss per block (seed-paired mean, 95 % t-interval, each seed
    a tick), one panel per depth on one x axis; left of 0, de-escalation ends ahead. None when not run."""
    grids = res.ablation_grids()
    if not grids:
        return None
    common.set_theme()
    grids = [(d, _without_scales(g)) for d, g in grids]
    heights = [len(g) for _, g in grids]
    fig, axes = plt.subplots(len(grids), 1, figsize=(WIDTH, 0.42 * sum(heights) + 1.6 * len(grids)), sharex=True,
                             gridspec_kw={"height_ratios": heights}, squeeze=False)
    for ax, (depth, grid) in zip(axes[:, 0], grids, strict=True):
        gaps, blocks = res.ablation_gaps(depth), list(grid)
        for i, block in enumerate(blocks):
            runs, g = grid[block], gaps[block]
            per_seed = [a["train_loss"][-1] - b["train_loss"][-1]
                        for a, b in zip(runs["de-escalated"], runs["pre-norm"], strict=True)]
            y = len(blocks) - 1 - i
            if g.has_interval:
                ax.plot([g.low, g.high], [y, y], color="C0", lw=3, alpha=0.6)
            ax.plot(g.estimate, y, "o", color="C0", ms=7)
            ax.plot(per_seed, [y] * len(per_seed), "|", color="k", ms=10)
        ax.axvline(0, color="grey", lw=0.8, ls=":")
        ax.set_yticks(range(len(blocks)), [ABLATION_LABELS.get(b, b) for b in reversed(blocks)])
        ax.set_title(f"depth {depth}", loc="left")
    axes[-1, 0].set_xlabel("de-escalated − pre-norm, final training loss (nats)")
    fig.suptitle(f"De-escalated − pre-norm per block, {common.seeds_text(len(res.seeds))} ({res.scale} scale)")
    return common.figure("vit-ablation", fig)


def _xavier_label(res: Result) -> str:
    """How the FFN-scale figure and table name Algorithm 1's own (Xavier) FFN initialisation."""
    r1, r2 = res.ffn_init_ratios()
    return f"Xavier (Algorithm 1): W₁ ×{r1:g}, W₂ ×{r2:g}"


def ffn_scale_table(res: Result):
    """The FFN-scale sweep at the ablation's depth: per factor of PyTorch's FFN variance, the final training loss
    of pre-norm and de-escalated post-norm (mean ± sd over seeds) and their seed-paired gap
    (`Result.ffn_scale_gaps`); a factor whose runs are not committed says so; Algorithm 1's Xavier FFN last."""
    grid, gaps, blocks = res.ablation_grid(), res.ffn_scale_gaps(), res.ffn_scale_blocks()
    rows = []
    for f in sorted({*blocks, *res.ffn_scale_missing()}):
        row: dict[str, object] = {"FFN variance": f"×{f:g} PyTorch's"}
        if f in blocks:
            row.update({"pre-norm loss": _loss(grid[blocks[f]], "pre-norm"),
                        "de-esc. loss": _loss(grid[blocks[f]], "de-escalated"),
                        "de-esc. − pre-norm": _interval(gaps[f])})
        else:
            row.update({"pre-norm loss": "not committed", "de-esc. loss": "not committed",
                        "de-esc. − pre-norm": "not committed"})
        rows.append(row)
    if "algorithm1" in grid:
        rows.append({"FFN variance": _xavier_label(res), "pre-norm loss": _loss(grid["algorithm1"], "pre-norm"),
                     "de-esc. loss": _loss(grid["algorithm1"], "de-escalated"),
                     "de-esc. − pre-norm": _interval(res.ablation_gaps()["algorithm1"])})
    return common.table(pd.DataFrame(rows))


def ffn_scale_figure(res: Result) -> plt.Figure | None:
    """De-escalated − pre-norm final training loss against the FFN's initial variance (× PyTorch's default, log
    axis) at the ablation's depth: seed-paired mean, 95 % t-interval, each seed a tick; Algorithm 1's Xavier FFN
    as a dashed line with its interval shaded; a factor not committed is marked on the axis. None when the
    ablation was not run."""
    grid = res.ablation_grid()
    if not grid:
        return None
    common.set_theme()
    fig, ax = plt.subplots(figsize=(WIDTH, 3.6), layout="constrained")
    gaps, blocks = res.ffn_scale_gaps(), res.ffn_scale_blocks()
    for f, b in blocks.items():
        g = gaps[f]
        per_seed = [a["train_loss"][-1] - p["train_loss"][-1]
                    for a, p in zip(grid[b]["de-escalated"], grid[b]["pre-norm"], strict=True)]
        if g.has_interval:
            ax.plot([f, f], [g.low, g.high], color="C0", lw=3, alpha=0.6)
        ax.plot(f, g.estimate, "o", color="C0", ms=7, label="PyTorch's FFN init, variance rescaled" if f == 1 else None)
        ax.plot([f] * len(per_seed), per_seed, "_", color="k", ms=12)
    if "algorithm1" in grid:
        x = res.ablation_gaps()["algorithm1"]
        ax.axhline(x.estimate, color="C1", ls="--", lw=1.2, label=_xavier_label(res))
        if x.has_interval:
            ax.axhspan(x.low, x.high, color="C1", alpha=0.15)
    ax.axhline(0, color="grey", lw=0.8, ls=":")
    factors = sorted({*blocks, *res.ffn_scale_missing()})
    ax.set_xscale("log", base=2)
    ax.minorticks_off()
    ax.set_xticks(factors, [f"×{f:g}" + ("" if f in blocks else "\n(not committed)") for f in factors])
    ax.set_xlim(min(factors) / 1.5, max(factors) * 1.5)
    ax.set_xlabel("initial variance of the FFN maps (× PyTorch's default)")
    ax.set_ylabel("de-escalated − pre-norm (nats)")
    ax.legend(fontsize=9, loc="best")
    fig.suptitle(f"FFN-scale sweep at depth {res.ablation_depth}, {common.seeds_text(len(res.seeds))} "
                 f"({res.scale} scale)")
    return common.figure("vit-ffn-scale", fig)


def _range(r: Result, variant: str) -> str:
    """The seeds' final training losses at the main depth as 'lowest–highest'."""
    a = np.array([h["train_loss"][-1] for h in r.histories[variant]])
    return f"{a.min():.2f}–{a.max():.2f}"


def _curve_values(res: Result) -> dict[str, object]:
    """The budget curve's numbers the prose quotes: its runs, budgets and cost, and each gap's band and verdict at
    the paper's steps."""
    steps = res.curve_steps or [0]
    secs = [v for vs in res.curve_seconds().values() for v in vs if v is not None]
    held = len(secs)
    out: dict[str, object] = {
        "vit-curve-epochs": CURVE["epochs"], "vit-curve-images": f"{CURVE['train_images']:,}",
        "vit-curve-budgets": len(CURVE_EPOCHS), "vit-curve-first": f"{steps[0]:,}", "vit-curve-last": f"{steps[-1]:,}",
        "vit-curve-span": steps[-1] / steps[0] if steps[0] else np.nan,
        "vit-curve-reach": res.paper_steps / steps[-1] if steps[-1] else np.nan,
        "vit-curve-window": f"{100 * CURVE_WINDOW:.0f} %",
        "vit-curve-held": held, "vit-curve-runs": held + len(res.curve_missing),
        "vit-curve-cpu-h": sum(secs) / 3600 if secs else np.nan,          # wall time of one thread each
        "vit-curve-run-min": f"{min(secs) / 60:.0f}–{max(secs) / 60:.0f}" if secs else "(none run)",
    }
    fs = res.curve_findings()
    keys = {("post-norm", "pre-norm"): ("vit-curve-post-pre-first", "vit-curve-post-pre-last",
                                        "vit-curve-post-pre-band", "vit-curve-post-pre-verdict"),
            ("de-escalated", "post-norm"): ("vit-curve-deesc-post-first", "vit-curve-deesc-post-last",
                                            "vit-curve-deesc-post-band", "vit-curve-deesc-post-verdict"),
            ("de-escalated", "pre-norm"): ("vit-curve-deesc-pre-first", "vit-curve-deesc-pre-last",
                                           "vit-curve-deesc-pre-band", "vit-curve-deesc-pre-verdict")}
    for (a, b), (k_first, k_last, k_band, k_verdict) in keys.items():
        f, last, first = fs.get((a, b)), res.curve_at(a, b), res.curve_at(a, b, steps[0])
        t = f.at_scale if f else None
        out[k_first] = first.text() if first else "(not held)"
        out[k_last] = last.text() if last else "(not held)"
        out[k_band] = t.band.text() if t else "(no trend)"
        out[k_verdict] = f.paper_scale_verdict if f else "(no finding)"
    return out


def publish(res: Result) -> None:
    """Draw and glue the figures, and glue every number the prose quotes (literal dicts of full keys, one per
    section of the chapter)."""
    fig6(res)
    tsim(res)
    block_figure(res)
    ablation_figure(res)
    ffn_scale_figure(res)
    budget_figure(res)
    common.publish({**_setup(res), **_curve_values(res), **_depths(res), **_similarity(res), **_ablation(res),
                    **_ffn_scale(res), **_costs(res)})


def _setup(res: Result) -> dict[str, object]:
    """The run: data, model, steps against the paper's, the margins the findings use, the learning-rate budget."""
    low, high = res.final_loss_range()
    return {
        "vit-steps": f"{res.steps:,}", "vit-batch": res.batch_size, "vit-epochs": res.epochs,
        "vit-train-images": f"{res.train_images:,}", "vit-test-images": f"{res.test_images:,}",
        "vit-seeds": len(res.seeds), "vit-depths": ", ".join(str(d) for d in res.depths), "vit-depth": res.depth,
        "vit-width": res.d_model, "vit-heads": res.n_heads, "vit-head-width": res.d_model // res.n_heads,
        "vit-ffn": res.d_ff, "vit-patch": res.patch, "vit-patch-tokens": (res.image // res.patch) ** 2,
        "vit-paper-steps": f"{res.paper_steps:,}", "vit-step-share": f"{100 * res.steps / res.paper_steps:.1f} %",
        "vit-loss-low": low, "vit-loss-high": high, "vit-level-margin": LEVEL_MARGIN,
        "vit-chance-margin": CHANCE_MARGIN, "vit-alike-threshold": ALIKE,
        # the budget: whether an epoch's end is a run of its own
        "vit-lr-decay": LR_DECAY, "vit-lr-decay-at": " and ".join(f"{100 * f:.0f} %" for f in LR_DECAY_AT),
        "vit-lr-decay-steps": " and ".join(f"{s:,}" for s in res.lr_decay_steps()) or "(none within the run)",
        "vit-budget-epochs": " and ".join(str(k) for k in res.budget_epochs()),
    }


def _depths(res: Result) -> dict[str, object]:
    """The main depth and the depth sweep, with Algorithm 1's blocks and standard ones (without standard-block runs
    the std keys read the main grid)."""
    std, nan_text = res.standard_result() or res, "(not run)"
    return {
        "vit-a1-chance-post-norm-full-lr": res.at_chance("post-norm-full-lr", res.depth),
        "vit-gap-a1-deesc-post": res.gap("de-escalated", "post-norm").text(),
        "vit-gap-a1-deesc-pre": res.gap("de-escalated", "pre-norm").text(),
        "vit-gap-std-deesc-pre": std.gap("de-escalated", "pre-norm").text(),
        "vit-a1-fails-from-post-norm": res.fails_from("post-norm") or nan_text,
        "vit-a1-fails-from-post-norm-full-lr": res.fails_from("post-norm-full-lr") or nan_text,
        "vit-a1-fails-from-de-escalated": res.fails_from("de-escalated") or nan_text,
        "vit-a1-deesc-ahead-pre-depths": " and ".join(str(d) for d in res.ahead_depths("de-escalated", "pre-norm"))
                                         or nan_text,
        "vit-std-deesc-ahead-from": std.ahead_from("de-escalated", "pre-norm") or nan_text,
        "vit-std-shallow": std.depths[0],
        "vit-std-gap-deesc-pre-shallow": std.gap("de-escalated", "pre-norm", std.depths[0]).text(),
        "vit-std-level-depths": ", ".join(str(d) for d in std.level_depths("post-norm-full-lr")) or nan_text,
        "vit-std-range-post-norm-full-lr": _range(std, "post-norm-full-lr"),
        "vit-std-range-pre-norm": _range(std, "pre-norm"),
    }


def _similarity(res: Result) -> dict[str, object]:
    """Token similarity: t_sim before de-escalation and where post-norm and pre-norm end alike."""
    std = res.standard_result() or res
    alike, a1_alike = std.alike_depth(), res.alike_depth()
    return {
        "vit-before-tsim": res.before_t_sim().get("de-escalated", np.nan),
        "vit-a1-tsim-pre-norm": res.run_t_sim("pre-norm", res.depth),
        "vit-alike-depth": alike,
        "vit-alike-tsim-post": std.run_t_sim("post-norm-full-lr", alike),
        "vit-alike-tsim-pre": std.run_t_sim("pre-norm", alike),
        "vit-alike-gap": std.gap("post-norm-full-lr", "pre-norm", alike).text(),
        "vit-a1-alike-depth": a1_alike,
        "vit-a1-alike-gap": res.gap("post-norm-full-lr", "pre-norm", a1_alike).text(),
    }


def _ablation(res: Result) -> dict[str, object]:
    """The block ablation: de-escalated − pre-norm per block at its depth and the confirming depth."""
    gabl, c, nan_text = res.ablation_gaps(), res.confirm_depth, "(not run)"
    gconf = res.ablation_gaps(c) if c is not None else {}
    r1, r2 = res.ffn_init_ratios()
    s1, s2 = res.ffn_step_scales()
    return {
        "vit-abl-depth": res.ablation_depth or nan_text,
        "vit-abl-confirm-depth": c or nan_text,
        "vit-abl-ffn-ratio-w1": r1, "vit-abl-ffn-ratio-w2": r2,
        "vit-abl-gap-standard": gabl["standard"].text() if "standard" in gabl else nan_text,
        "vit-abl-gap-algorithm1": gabl["algorithm1"].text() if "algorithm1" in gabl else nan_text,
        "vit-abl-gap-standard-all-four": gabl["standard-all-four"].text() if "standard-all-four" in gabl
        else nan_text,
        "vit-abl-gap-algorithm1-torch-ffn-init": gabl["algorithm1-torch-ffn-init"].text()
        if "algorithm1-torch-ffn-init" in gabl else nan_text,
        "vit-abl-gap-algorithm1-torch-v-init": gabl["algorithm1-torch-v-init"].text()
        if "algorithm1-torch-v-init" in gabl else nan_text,
        "vit-abl-loss-de-escalated-algorithm1": res.ablation_loss("algorithm1", "de-escalated"),
        "vit-abl-loss-de-escalated-algorithm1-torch-ffn-init": res.ablation_loss("algorithm1-torch-ffn-init",
                                                                                  "de-escalated"),
        "vit-abl-loss-pre-norm-algorithm1": res.ablation_loss("algorithm1", "pre-norm"),
        "vit-abl-loss-pre-norm-algorithm1-torch-ffn-init": res.ablation_loss("algorithm1-torch-ffn-init",
                                                                              "pre-norm"),
        "vit-abl-confirm-gap-algorithm1": gconf["algorithm1"].text() if "algorithm1" in gconf else nan_text,
        "vit-abl-confirm-gap-algorithm1-torch-ffn-init": gconf["algorithm1-torch-ffn-init"].text()
        if "algorithm1-torch-ffn-init" in gconf else nan_text,
        "vit-abl-confirm-gap-standard": gconf["standard"].text() if "standard" in gconf else nan_text,
        "vit-abl-step-w1": s1, "vit-abl-step-w2": s2,
        "vit-abl-move-init": res.ablation_contrast("algorithm1-torch-ffn-init", "algorithm1").text(),
        "vit-abl-move-steps": res.ablation_contrast("algorithm1-torch-ffn-steps", "algorithm1").text(),
        "vit-abl-move-scale": res.ablation_contrast("algorithm1-torch-ffn-init", "algorithm1-torch-ffn-steps").text(),
    }


def _ffn_scale(res: Result) -> dict[str, object]:
    """The FFN-scale sweep: the gap's slope over the factors, the largest factor run, and ×0.5."""
    nan_text = "(not run)"
    scales = res.ffn_scale_blocks()
    top = max(scales) if scales else 1.0
    top_block = scales.get(top, FFN_SCALE_BASE)
    half = res.ablation_contrast(scales.get(0.5, "(not run)"), FFN_SCALE_BASE)
    return {
        "vit-ffn-scale-slope": res.ffn_scale_slope().text() if len(res.ffn_scale_blocks()) > 1 else nan_text,
        "vit-ffn-scale-factors": ", ".join(f"×{f:g}" for f in res.ffn_scale_blocks()) or nan_text,
        "vit-ffn-scale-missing": ", ".join(f"×{f:g}" for f in res.ffn_scale_missing()) or "none",
        "vit-ffn-scale-move-half": half.text(), "vit-ffn-scale-move-half-widest": -half.low,
        "vit-ffn-scale-top": f"×{top:g}", "vit-ffn-scale-gap-top": res.ffn_scale_gaps()[top].text() if scales
        else nan_text,
        "vit-ffn-scale-de-move-top": res.ablation_contrast(top_block, FFN_SCALE_BASE, variant="de-escalated").text(),
        "vit-ffn-scale-pre-move-top": res.ablation_contrast(top_block, FFN_SCALE_BASE, variant="pre-norm").text(),
    }


def _costs(res: Result) -> dict[str, object]:
    """What the runs not made would cost (RECIPES, estimated from the committed runs' times), and the block cost."""
    cost = block_cost() or {"algorithm1_s": np.nan, "standard_s": np.nan, "ratio": np.nan}
    costs = {name: res.recipe_costs.get(name, {"runs": 0, "hours": np.nan}) for name in RECIPES}
    return {
        "vit-cost-ffn-scale-runs": costs["ffn-scale"]["runs"], "vit-cost-ffn-scale-hours": costs["ffn-scale"]["hours"],
        "vit-cost-depth80-runs": costs["depth80-ffn"]["runs"],
        "vit-cost-depth80-hours": costs["depth80-ffn"]["hours"],
        "vit-cost-long-runs": costs["long"]["runs"], "vit-cost-long-hours": costs["long"]["hours"],
        "vit-total-hours": res.total_hours(),
        "vit-block-alg1-s": cost["algorithm1_s"], "vit-block-standard-s": cost["standard_s"],
        "vit-block-ratio": cost["ratio"],
    }


__all__ = ["fig6", "tsim", "block_figure", "final_table", "gap_table", "block_table", "ablation_table",
           "ablation_figure", "ffn_scale_table", "ffn_scale_figure", "ABLATION_LABELS", "NAMES", "publish"]
