"""Figures, table and glued numbers of the ViT chapter (Yu & Zhang §3.3, Figure 6)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.ticker import MaxNLocator

from ..core.blocks import ffn_weight_variances
from ..core.stats import interval_text, t_interval, verdict
from ..experiments.vit import ABLATION_VARIANTS, VARIANTS, Result, block_cost
from . import common


def fig6(res: Result, name: str = "vit-fig6", blocks: str = "") -> plt.Figure:
    """Figure 6: training and test loss of the variants per epoch (mean ± 1 sd over seeds); `blocks`
    names the block type in the title, `name` is the glue name."""
    common.set_theme()
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for ax, key in zip(axes, ("train_loss", "test_loss"), strict=True):
        common.layer_curves(ax, res.curves(key), x0=1, xlabel="epoch", ylabel=key.replace("_", " "),
                            title=key.replace("_", " "))
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    fig.suptitle(f"Figure 6 — ViT depth {res.depth}{blocks}, {res.train_images:,} training images, {res.epochs} "
                 f"epochs, {common.seeds_text(len(res.seeds))} ({res.scale} scale)")
    return common.figure(name, fig)


def tsim(res: Result) -> plt.Figure:
    """t_sim of every block's input on a fixed test batch after each epoch, one panel per variant; for
    the de-escalated model also t_sim just before each de-escalation step (dashed, last epoch)."""
    common.set_theme()
    n = len(res.variants)
    fig, axes = plt.subplots(1, n, figsize=(max(10, 3.4 * n), 3.8), sharey=True, squeeze=False)
    for ax, v in zip(axes[0], res.variants, strict=True):
        common.layer_curves(ax, {f"epoch {e}": s for e, s in res.t_sim(v).items()}, ylabel="t_sim", title=v,
                            markers=False)
        before = res.histories[v][0].get("t_sim_before_deescalation")
        if before:
            last = max(before, key=int)
            ax.plot(np.arange(1, len(before[last]) + 1), before[last], ls="--", color="k", lw=1,
                    label=f"before de-escalation, epoch {last}")
            ax.legend(fontsize=7)
    fig.suptitle("t_sim per block (block 0 = patch embeddings + positions) along training")
    return common.figure("vit-tsim", fig)


def _depth_panel(ax, depths: list[int], finals: dict[str, np.ndarray]) -> None:
    """One panel of a value against depth: per variant (`finals[v]`: (depths, seeds)) the mean ± 1 sd over
    seeds with each seed a dot, dodged sideways, on a log depth axis."""
    pal = common.sns.color_palette()
    for i, (v, a) in enumerate(finals.items()):
        x = np.asarray(depths, dtype=float) * (1 + 0.04 * (i - 1.5))                   # dodge
        ax.errorbar(x, a.mean(1), yerr=a.std(1, ddof=1) if a.shape[1] > 1 else None, color=pal[i], marker="o",
                    ms=4, capsize=3, label=v)
        ax.scatter(np.repeat(x, a.shape[1]), a.ravel(), color=pal[i], s=8, alpha=0.5)
    ax.set_xscale("log")
    ax.minorticks_off()
    ax.set_xticks(depths, [str(d) for d in depths])
    ax.set_xlabel("depth (blocks)")


def sweep_figure(res: Result) -> plt.Figure:
    """The depth sweep: final training loss and test accuracy against depth, per variant (mean ± 1 sd
    over seeds, each seed a dot), at a fixed budget of optimiser steps."""
    common.set_theme()
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for ax, key, label in zip(axes, ("train_loss", "test_acc"), ("final training loss", "final test accuracy"),
                              strict=True):
        _depth_panel(ax, res.depths, res.sweep_final(key))
        ax.set_ylabel(label)
        ax.set_title(label)
    axes[1].axhline(0.1, color="grey", lw=0.8, ls=":", label="chance")
    axes[0].legend(fontsize=8)
    fig.suptitle(f"Depth sweep — {res.steps:,} optimiser steps of batch {res.batch_size} per run, "
                 f"{common.seeds_text(len(res.seeds))} ({res.scale} scale)")
    return common.figure("vit-sweep", fig)


def block_figure(res: Result) -> plt.Figure | None:
    """The block comparison: final training loss against depth per variant, Algorithm 1's blocks (left)
    and standard blocks (right) at the depths both were run, on one y axis (mean ± 1 sd over seeds,
    each seed a dot). None when no standard-block run was made."""
    std = res.standard_result()
    if std is None:
        return None
    common.set_theme()
    fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharey=True)
    panels = (("Algorithm 1 blocks (scalar-γ LN, no biases)", res),
              ("standard blocks (per-channel LN, biases, output projection)", std))
    for ax, (title, r) in zip(axes, panels, strict=True):
        depths = [d for d in std.depths if str(d) in r.sweep or (not r.sweep and d == r.depth)]
        runs = r.sweep or {str(r.depth): r.histories}
        _depth_panel(ax, depths, {v: np.array([[h["train_loss"][-1] for h in runs[str(d)][v]] for d in depths],
                                              dtype=float) for v in r.variants})
        ax.set_title(title, fontsize=10)
    axes[0].set_ylabel("final training loss")
    axes[0].axhline(np.log(10), color="grey", lw=0.8, ls=":", label="chance (ln 10)")
    axes[1].axhline(np.log(10), color="grey", lw=0.8, ls=":")
    axes[0].legend(fontsize=8)
    fig.suptitle(f"Algorithm 1 vs standard blocks — {res.steps:,} optimiser steps of batch {res.batch_size} per run, "
                 f"{common.seeds_text(len(res.seeds))} ({res.scale} scale)")
    return common.figure("vit-blocks", fig)


def sweep_difference(res: Result, a: str, b: str, depth: int, key: str = "train_loss") -> dict[str, float]:
    """Final `key` of variant `a` minus variant `b` at `depth`, per run seed (the two runs of a seed share
    the data order and augmentation), with the mean and a 95 % t-interval over seeds (NaN with one seed)."""
    fin = res.sweep_final(key)
    i = res.depths.index(depth)
    return t_interval(fin[a][i] - fin[b][i])


def sweep_table(res: Result):
    """The depth sweep as a table: per depth and variant, the final training loss and test accuracy
    (mean ± sd over seeds) and the last block's t_sim after training (first seed; for the de-escalated
    model the state just before its de-escalation step — after it, t_sim is 0 by construction)."""
    import pandas as pd

    if not res.sweep:
        return common.table(pd.DataFrame({"depth sweep": ["not run (set `depths`)"]}))
    loss, acc = res.sweep_final("train_loss"), res.sweep_final("test_acc")
    rows = []
    for i, d in enumerate(res.depths):
        for v in res.variants:
            h = res.sweep[str(d)][v][0]
            rows.append({"depth": d, "variant": v, "lr": h["lr"],
                         "final train loss": _pm(loss[v][i]), "final test acc": _pm(acc[v][i]),
                         "last-block t_sim (seed 0)": _run_tsim(h)})
    return common.table(pd.DataFrame(rows), digits=3)


def block_table(res: Result):
    """The block comparison as a table: per depth (those with standard-block runs) and variant, the final
    training loss and test accuracy (means over seeds) and the last block's t_sim (first seed; for the
    de-escalated model just before its de-escalation step), Algorithm 1's blocks (A1) and standard blocks
    (std) side by side."""
    import pandas as pd

    std = res.standard_result()
    if std is None:
        return common.table(pd.DataFrame({"block comparison": ["not run (set `standard_depths`)"]}))
    runs = res.sweep or {str(res.depth): res.histories}
    rows = []
    for d in std.depths:
        for v in res.variants:
            row: dict[str, object] = {"depth": d, "variant": v}
            for what in ("loss", "acc", "t_sim"):           # means over seeds (the spread is in the figure)
                for tag, r in (("A1", runs.get(str(d))), ("std", std.sweep[str(d)])):
                    hs = r[v] if r is not None else None
                    row[f"{what} {tag}"] = (np.nan if hs is None else
                                            float(np.mean([h["train_loss"][-1] for h in hs])) if what == "loss" else
                                            float(np.mean([h["test_acc"][-1] for h in hs])) if what == "acc" else
                                            _run_tsim(hs[0]))
            rows.append(row)
    return common.table(pd.DataFrame(rows), digits=3)


def standard_gap_table(res: Result):
    """`gap_table` of the standard-block runs (a 'not run' table when there are none)."""
    import pandas as pd

    std = res.standard_result()
    if std is None:
        return common.table(pd.DataFrame({"gap": ["no standard-block runs (set `standard_depths`)"]}))
    return gap_table(std)


def _last_tsim(t_sim: dict) -> float:
    """The last block's t_sim at the last measured epoch; float round-off (|t_sim| < 1e-9, what a
    centred state gives) is shown as 0."""
    v = float(t_sim[max(t_sim, key=int)][-1])
    return 0.0 if abs(v) < 1e-9 else v


def _run_tsim(hist: dict) -> float:
    """A run's last-block t_sim after training: for a de-escalated run the state just before its last
    de-escalation step (after it t_sim is 0 by construction), otherwise the block output's."""
    return _last_tsim(hist.get("t_sim_before_deescalation") or hist["t_sim"])


def _pm(a: np.ndarray) -> str:
    return common.mean_sd(a.mean(), a.std(ddof=1) if len(a) > 1 else float("nan"))


def compare_text(res: Result, a: str, b: str, depth: int, key: str = "train_loss") -> str:
    """One comparison read off the seeds: 'a ends lower/higher than b (Δ, 95 % interval)' when the
    t-interval excludes 0, 'no difference detected' when it does not, the bare difference with one seed."""
    d = sweep_difference(res, a, b, depth, key)
    what = "training loss" if key == "train_loss" else key.replace("_", " ")
    if d["n"] < 2:
        return f"{a} − {b}: {d['mean']:+.3f} in final {what} at depth {depth} (one seed: no interval)"
    iv = interval_text(d)
    v = verdict(d, above="higher", below="lower", none="")
    if v:
        return f"{a} ends **{v}** than {b} in {what} at depth {depth} ({iv})"
    return f"no difference detected between {a} and {b} in {what} at depth {depth} ({iv} includes 0)"


def depth_text(res: Result, variant: str, key: str = "train_loss") -> str:
    """How a variant's final training loss moves from the shallowest to the deepest depth of the sweep:
    the means, and the seed-by-seed change with its 95 % t-interval ('worse'/'better with depth' only
    when the interval excludes 0)."""
    fin = res.sweep_final(key)[variant]
    lo, hi = fin[0], fin[-1]
    d = t_interval(hi - lo)
    reading = verdict(d, above="worse with depth", below="better with depth", none="no change detected")
    return (f"{variant}: {lo.mean():.3f} at depth {res.depths[0]} → {hi.mean():.3f} at depth {res.depths[-1]} "
            f"(change {interval_text(d)}: {reading})")


def gap_by_depth(res: Result, variant: str, ref: str = "pre-norm", key: str = "train_loss") -> list[dict]:
    """`variant` − `ref` in final `key` at every depth of the sweep (seed-paired mean, 95 % t-interval)."""
    return [{"depth": d, **sweep_difference(res, variant, ref, d, key)} for d in res.depths]


#: a run "at chance": final training loss within this many nats of ln 10 (the loss of predicting the class
#: frequencies of CIFAR-10, whatever the image)
CHANCE_MARGIN = 0.01

#: "level": the seed-paired interval covers 0 and is narrower than ±LEVEL_MARGIN nats (a wide interval
#: that covers 0 only says the seeds disagree)
LEVEL_MARGIN = 0.1


def level_depths(res: Result, variant: str, ref: str = "pre-norm", key: str = "train_loss") -> list[int]:
    """The depths at which `variant` ends level with `ref`: the interval covers 0 and its half-width is
    below `LEVEL_MARGIN`."""
    return [g["depth"] for g in gap_by_depth(res, variant, ref, key)
            if g["n"] > 1 and g["lo"] <= 0 <= g["hi"] and (g["hi"] - g["lo"]) / 2 < LEVEL_MARGIN]


def fails_from(res: Result, variant: str, ref: str = "pre-norm", key: str = "train_loss") -> int | None:
    """The shallowest depth from which `variant` ends worse than `ref` (interval above 0) at that depth
    and at every deeper depth of the sweep; None if it does not at the deepest."""
    worse = [g["n"] > 1 and g["lo"] > 0 for g in gap_by_depth(res, variant, ref, key)]
    if not worse or not worse[-1]:
        return None
    i = len(worse) - 1
    while i > 0 and worse[i - 1]:
        i -= 1
    return res.depths[i]


def gap_table(res: Result, ref: str = "pre-norm",
              extra: tuple[tuple[str, str], ...] = (("de-escalated", "post-norm-full-lr"),)):
    """Per depth, each variant's final training loss minus `ref`'s, and each `extra` pair a − b (by
    default de-escalated against plain post-norm at the same learning rate): seed-paired mean [95 %
    t-interval], marked ↑ where the interval lies above 0 and ↓ where it lies below."""
    import pandas as pd

    if not res.sweep or ref not in res.variants:
        return common.table(pd.DataFrame({"gap": ["no sweep (set `depths`)"]}))
    rows: list[dict[str, object]] = [{"depth": d} for d in res.depths]
    pairs = [(v, ref) for v in res.variants if v != ref]
    pairs += [(a, b) for a, b in extra if a in res.variants and b in res.variants]
    for a, b in pairs:
        for row, g in zip(rows, gap_by_depth(res, a, b), strict=True):
            mark = " ↑" if g["n"] > 1 and g["lo"] > 0 else " ↓" if g["n"] > 1 and g["hi"] < 0 else ""
            row[f"{a} − {b}"] = interval_text(g) + mark
    return common.table(pd.DataFrame(rows))


def ahead_depths(res: Result, a: str, b: str, key: str = "train_loss") -> list[int]:
    """The depths at which `a` ends below `b` in final `key` (seed-paired interval below 0)."""
    return [g["depth"] for g in gap_by_depth(res, a, b, key) if g["n"] > 1 and g["hi"] < 0]


def sweep_verdicts(res: Result) -> list[str]:
    """The sweep's readings, each computed from the runs: the de-escalated model against both post-norm
    runs and pre-norm at the deepest depth, the learning-rate effect on post-norm, and each variant's
    final training loss from the shallowest to the deepest depth."""
    if not res.sweep:
        return []
    deep = max(res.depths)
    pairs = [("de-escalated", "post-norm"), ("de-escalated", "post-norm-full-lr"), ("de-escalated", "pre-norm"),
             ("post-norm-full-lr", "post-norm"), ("pre-norm", "post-norm-full-lr")]
    out = [compare_text(res, a, b, deep) for a, b in pairs if a in res.variants and b in res.variants]
    out += [depth_text(res, v) for v in res.variants]
    return out


def final_table(res: Result):
    """The final numbers per variant (mean over seeds), formatted for reading (lr as 5.00e-05)."""
    return common.table(res.table(), digits=3)


def _depth_list(depths: list[int]) -> str:
    return ("no depth" if not depths else f"depth {depths[0]}" if len(depths) == 1 else
            "depths " + ", ".join(str(d) for d in depths[:-1]) + f" and {depths[-1]}")


def _sweep_values(res: Result, prefix: str = "") -> dict[str, object]:
    """The glued readings of one sweep (Algorithm 1's blocks, or with `prefix` "std-" the standard
    blocks'): final loss and accuracy per variant and depth, the verdict sentences, from which depth each
    post-norm variant is behind pre-norm, where the de-escalated model is ahead of plain post-norm at the
    same rate and of pre-norm, and the deepest depth's seed-paired differences."""
    from IPython.display import Markdown

    values: dict[str, object] = {}
    fin_train = res.sweep_final("train_loss")
    for key, tag in (("train_loss", "train"), ("test_acc", "acc")):
        fin = res.sweep_final(key)
        for v in VARIANTS:
            for i, d in enumerate(res.depths):
                values[f"{prefix}sweep-{tag}-{v}-d{d}"] = float(fin[v][i].mean()) if v in fin else np.nan
            # the shallowest and the deepest depth, whatever they are (the prose reads these)
            values[f"{prefix}sweep-{tag}-{v}-shallow"] = float(fin[v][0].mean()) if v in fin else np.nan
            values[f"{prefix}sweep-{tag}-{v}-deep"] = float(fin[v][-1].mean()) if v in fin else np.nan
    for v in VARIANTS:             # the last block's t_sim (first seed; de-escalated: before its last step)
        for d in res.depths:
            hist = res.sweep[str(d)].get(v) if v in res.variants else None
            values[f"{prefix}tsim-{v}-d{d}"] = _run_tsim(hist[0]) if hist else np.nan
        values[f"{prefix}tsim-{v}-deep"] = values[f"{prefix}tsim-{v}-d{max(res.depths)}"]
    for v in VARIANTS:             # how many seeds end at chance at the deepest depth (a constant prediction)
        values[f"{prefix}chance-{v}-deep"] = (int(np.sum(np.abs(fin_train[v][-1] - np.log(10)) < CHANCE_MARGIN))
                                              if v in fin_train else np.nan)
    for v in VARIANTS:             # the seeds' spread at the deepest depth, "1.88–1.91"
        values[f"{prefix}range-{v}-deep"] = (f"{fin_train[v][-1].min():.2f}–{fin_train[v][-1].max():.2f}"
                                             if v in fin_train else "(not run)")
    values[f"{prefix}verdicts"] = Markdown("; ".join(sweep_verdicts(res)) + ".")
    for v in ("post-norm", "post-norm-full-lr", "de-escalated"):
        if v in res.variants and "pre-norm" in res.variants:
            first = fails_from(res, v)
            values[f"{prefix}fails-from-{v}"] = Markdown(f"depth {first}" if first else "no depth of the sweep")
    if "de-escalated" in res.variants and "post-norm-full-lr" in res.variants:
        values[f"{prefix}deesc-ahead-depths"] = Markdown(_depth_list(ahead_depths(res, "de-escalated",
                                                                                   "post-norm-full-lr")))
    if "de-escalated" in res.variants and "pre-norm" in res.variants:
        values[f"{prefix}deesc-ahead-pre-depths"] = Markdown(_depth_list(ahead_depths(res, "de-escalated",
                                                                                       "pre-norm")))
        values[f"{prefix}deesc-behind-pre-depths"] = Markdown(_depth_list(ahead_depths(res, "pre-norm",
                                                                                        "de-escalated")))
    for v in ("post-norm", "post-norm-full-lr"):    # where plain post-norm is level with pre-norm
        if v in res.variants and "pre-norm" in res.variants:
            level = level_depths(res, v)
            values[f"{prefix}level-{v}-depths"] = Markdown(_depth_list(level))
            if v == "post-norm-full-lr":   # the deepest such depth (else the deepest), and t_sim there
                d = max(level) if level else max(res.depths)
                values[f"{prefix}level-depth"] = d
                for w in VARIANTS:
                    values[f"{prefix}tsim-{w}-level"] = values[f"{prefix}tsim-{w}-d{d}"]
    deep = max(res.depths)
    for a, b in (("de-escalated", "post-norm-full-lr"), ("de-escalated", "pre-norm"),
                 ("post-norm-full-lr", "post-norm"), ("post-norm-full-lr", "pre-norm")):
        if a in res.variants and b in res.variants:
            values[f"{prefix}diff-{a}-{b}"] = interval_text(sweep_difference(res, a, b, deep))
    return values


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
    "algorithm1": "Algorithm 1 block (all four + its init)",
}


def _ablations(res: Result) -> list[tuple[int, dict[str, dict[str, list[dict]]]]]:
    """The ablation's grids as (depth, {block: {variant: [history per seed]}}): the full one, then the
    confirmations at deeper depths (each only when run)."""
    grids = [(res.ablation_depth, res.ablation)] if res.ablation else []
    return grids + [(int(d), runs) for d, runs in sorted(res.confirm.items(), key=lambda kv: int(kv[0])) if runs]


#: how the confirmation sentence names its blocks
CONFIRM_NAMES = {"algorithm1": "Algorithm 1's block (Xavier FFN)", "standard": "standard blocks",
                 "algorithm1-torch-ffn-init": "Algorithm 1's block with PyTorch's FFN initialisation"}


def ablation_gaps(runs: dict[str, dict[str, list[dict]]], a: str = "de-escalated",
                  b: str = "pre-norm") -> dict[str, dict[str, float]]:
    """Per block of an ablation grid (`res.ablation` or one depth of `res.confirm`), `a` − `b` in final training loss
    (seed-paired mean and 95 % t-interval): how far de-escalated post-norm ends ahead of (< 0) or behind
    (> 0) pre-norm."""
    out = {}
    for block, r in runs.items():
        fa = np.array([h["train_loss"][-1] for h in r[a]])
        fb = np.array([h["train_loss"][-1] for h in r[b]])
        out[block] = t_interval(fa - fb)
    return out


def ablation_table(res: Result):
    """The block ablation as a table: per depth and block, the final training loss of pre-norm and of
    de-escalated post-norm (mean ± sd over seeds), the de-escalated test accuracy, and the seed-paired gap."""
    import pandas as pd

    if not _ablations(res):
        return common.table(pd.DataFrame({"block ablation": ["not run (set `ablation_depth`)"]}))
    rows = []
    for depth, grid in _ablations(res):
        gaps = ablation_gaps(grid)
        for block, runs in grid.items():
            loss = {v: np.array([h["train_loss"][-1] for h in runs[v]]) for v in ABLATION_VARIANTS}
            acc = np.array([h["test_acc"][-1] for h in runs["de-escalated"]])
            g = gaps[block]
            mark = " ↑" if g["n"] > 1 and g["lo"] > 0 else " ↓" if g["n"] > 1 and g["hi"] < 0 else ""
            rows.append({"depth": depth, "block": ABLATION_LABELS.get(block, block),
                         "pre-norm loss": _pm(loss["pre-norm"]), "de-esc. loss": _pm(loss["de-escalated"]),
                         "de-esc. test acc": _pm(acc), "de-esc. − pre-norm": interval_text(g) + mark})
    return common.table(pd.DataFrame(rows))


def ablation_figure(res: Result) -> plt.Figure | None:
    """The block ablation: de-escalated − pre-norm final training loss per block (seed-paired mean,
    95 % t-interval, each seed a tick), one panel per depth on one x axis; left of 0, de-escalation ends
    ahead. None when not run."""
    grids = _ablations(res)
    if not grids:
        return None
    common.set_theme()
    heights = [len(g) for _, g in grids]
    fig, axes = plt.subplots(len(grids), 1, figsize=(8, 0.42 * sum(heights) + 1.6 * len(grids)), sharex=True,
                             gridspec_kw={"height_ratios": heights}, squeeze=False)
    for ax, (depth, grid) in zip(axes[:, 0], grids, strict=True):
        gaps, blocks = ablation_gaps(grid), list(grid)
        for i, block in enumerate(blocks):
            runs, g = grid[block], gaps[block]
            per_seed = [a["train_loss"][-1] - b["train_loss"][-1]
                        for a, b in zip(runs["de-escalated"], runs["pre-norm"], strict=True)]
            y = len(blocks) - 1 - i
            if g["n"] > 1:
                ax.plot([g["lo"], g["hi"]], [y, y], color="C0", lw=3, alpha=0.6)
            ax.plot(g["mean"], y, "o", color="C0", ms=7)
            ax.plot(per_seed, [y] * len(per_seed), "|", color="k", ms=10)
        ax.axvline(0, color="grey", lw=0.8, ls=":")
        ax.set_yticks(range(len(blocks)), [ABLATION_LABELS.get(b, b) for b in reversed(blocks)])
        ax.set_title(f"depth {depth}", fontsize=10, loc="left")
    axes[-1, 0].set_xlabel("de-escalated − pre-norm, final training loss (nats; < 0: de-escalation ahead)")
    fig.suptitle(f"Which part of the block puts de-escalation ahead of pre-norm? {common.seeds_text(len(res.seeds))} "
                 f"({res.scale} scale)", fontsize=11)
    return common.figure("vit-ablation", fig)


def ffn_init_text(d: int, q: int) -> tuple[str, str]:
    """How PyTorch's FFN initialisation compares with Xavier's at width `d`, FFN width `q`
    (`core.blocks.ffn_weight_variances`): ('2× and 4×' — how many times smaller PyTorch's variance of W₁
    and of W₂ is — and the sentence giving the variances as fractions, in plain text: glued Markdown gets no math)."""
    (x1, x2), (t1, t2) = ffn_weight_variances(d, q, "xavier"), ffn_weight_variances(d, q, "torch")

    def times(r: float) -> str:
        return f"{r:.0f}×" if abs(r - round(r)) < 1e-9 else f"{r:.2f}×"
    ratios = f"{times(x1 / t1)} and {times(x2 / t2)}"
    return ratios, (f"a variance of 1/(3·{d}) for *W*₁ and 1/(3·{q}) for *W*₂ at our width, "
                    f"against Xavier's 2/({d} + {q}) for both — {ratios} smaller")


def _ablation_values(res: Result) -> dict[str, object]:
    """The glued readings of the block ablation: the depths, each block's gap, the reverted parts whose
    revert keeps de-escalation ahead of pre-norm and those whose revert does not, the parts of Algorithm
    1's initialisation whose PyTorch version puts it ahead, and a sentence per confirmation depth."""
    from IPython.display import Markdown

    depths = sorted(int(d) for d in res.confirm)
    values: dict[str, object] = {"abl-depth": res.ablation_depth or "(not run)",
                                 "abl-confirm-depths": Markdown(_depth_list(depths) if depths else "no depth")}
    gaps = ablation_gaps(res.ablation)
    for block in ABLATION_LABELS:
        values[f"abl-gap-{block}"] = interval_text(gaps[block]) if block in gaps else "(not run)"

    def names(blocks: list[str], ahead: bool) -> Markdown:
        picked = [ABLATION_LABELS[b].split(", ", 1)[-1] for b in blocks if (gaps[b]["hi"] < 0) == ahead]
        return Markdown(", ".join(picked) if picked else "none of them")

    reverts = [b for b in gaps if b.startswith("standard-")]          # does the lead survive the revert?
    inits = [b for b in gaps if b.startswith("algorithm1-")]          # does PyTorch's init part bring it?
    values.update({"abl-keep": names(reverts, True), "abl-lose": names(reverts, False),
                   "abl-init-ahead": names(inits, True), "abl-init-not-ahead": names(inits, False)})
    for block in ABLATION_LABELS:              # mean final training loss per block and variant at the ablation depth
        for v in ABLATION_VARIANTS:
            runs = res.ablation.get(block, {}).get(v)
            values[f"abl-loss-{v}-{block}"] = (float(np.mean([h["train_loss"][-1] for h in runs])) if runs
                                               else np.nan)
    parts = []                                 # "at depth 48 the gap is … with <block>, … with <block>"
    for d in depths:
        g = ablation_gaps(res.confirm[str(d)])
        parts.append(f"at depth {d}, " + ", ".join(f"{interval_text(g[b])} with {CONFIRM_NAMES.get(b, b)}"
                                                    for b in g))
    values["abl-confirm-reading"] = Markdown("; ".join(parts) if parts else "(no confirmation run)")
    ratios, sentence = ffn_init_text(res.d_model, res.d_ff)
    values.update({"abl-ffn-ratios": ratios, "abl-ffn-variances": Markdown(sentence)})
    return values


def publish(res: Result) -> None:
    """Draw and glue the figures, and glue every number the prose quotes (variants not run: NaN)."""
    fig6(res)
    tsim(res)
    if res.sweep:
        sweep_figure(res)
    train, test_acc, last = res.final("train_loss"), res.final("test_acc"), res.last_t_sim()
    values: dict[str, object] = {
        "epochs": res.epochs, "train-images": f"{res.train_images:,}", "seeds": len(res.seeds), "depth": res.depth,
        "order": " < ".join(sorted(train, key=train.get)),
    }
    for v in VARIANTS:
        values[f"final-train-{v}"] = train.get(v, np.nan)
        values[f"final-acc-{v}"] = test_acc.get(v, np.nan)
        values[f"last-tsim-{v}"] = last.get(v, np.nan)
    values["steps"] = f"{res.steps:,}"
    values.update({"batch": res.batch_size, "width": res.d_model, "heads": res.n_heads, "ffn": res.d_ff,
                   "test-images": f"{res.test_images:,}",
                   "before-tsim-de-escalated": res.before_t_sim().get("de-escalated", np.nan)})
    values["depths"] = ", ".join(str(d) for d in res.depths)
    values["level-margin"] = LEVEL_MARGIN
    cost = block_cost()
    values.update({"block-alg1-s": cost["algorithm1_s"], "block-standard-s": cost["standard_s"],
                   "block-ratio": cost["ratio"]} if cost else
                  {"block-alg1-s": np.nan, "block-standard-s": np.nan, "block-ratio": np.nan})
    if res.sweep:
        values.update(_sweep_values(res))
        values["shallow"] = res.depths[0]
    std = res.standard_result()
    block_figure(res)
    if std is not None:
        fig6(std, name="vit-fig6-standard", blocks=", standard blocks")
        values.update(_sweep_values(std, "std-"))
        std_train = std.final("train_loss")
        values["std-order"] = " < ".join(sorted(std_train, key=std_train.get))
        values["std-depths"] = ", ".join(str(d) for d in std.depths)
        values["std-deep"] = max(std.depths)
    elif res.sweep:                   # no standard-block run (`standard_depths=()`): the prose reads "not run"
        from IPython.display import Markdown

        values.update({f"std-{k}": (np.nan if isinstance(v, float | int) else Markdown("(not run)"))
                       for k, v in _sweep_values(res).items()})
        values.update({"std-depths": "(none: not run)", "std-deep": "(not run)", "std-order": "(not run)"})
    ablation_figure(res)
    values.update(_ablation_values(res))
    common.publish("vit", values)


__all__ = ["fig6", "tsim", "sweep_figure", "block_figure", "block_table", "standard_gap_table", "sweep_table",
           "sweep_difference", "sweep_verdicts", "compare_text", "gap_by_depth", "fails_from", "level_depths",
           "gap_table", "LEVEL_MARGIN", "ablation_gaps", "ablation_table", "ablation_figure", "ABLATION_LABELS",
           "ahead_depths", "final_table", "ffn_init_text", "publish"]
