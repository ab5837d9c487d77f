"""Figures, tables and glued numbers of the queries-and-keys chapter (Godey et al. §5, App. C–D)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from ..core.stats import interval_text, moving_average, verdict
from ..experiments.qk import Result, recipe_probes
from . import common

UNIFORM_MLM_LOSS = float(np.log(30522))          # nats: uniform over BERT's WordPiece vocabulary


def scatter_panels(axes, head: dict, basis: str, steps: list[int], shown: list[int], lim: float | None = None) -> None:
    """Figs. 11, 19, 20: the display tokens' Q_s (blue) and K_s (orange) projected on the first two
    directions of `basis` (union | K | Q), one panel per step in `shown`; crosses mark the means."""
    blue, orange = sns.color_palette("colorblind")[:2]
    q, k = np.asarray(head[basis]["q"]), np.asarray(head[basis]["k"])               # (S', n, 2)
    at = list(head.get("steps", steps))                                             # the steps stored
    if lim is None:
        lim = 1.05 * float(np.abs(np.concatenate([q[[at.index(s) for s in shown]],
                                                  k[[at.index(s) for s in shown]]])).max())
    for ax, s in zip(axes, shown, strict=True):
        i = at.index(s)
        ax.scatter(q[i, :, 0], q[i, :, 1], s=4, alpha=0.45, color=blue, label="queries Q_s")
        ax.scatter(k[i, :, 0], k[i, :, 1], s=4, alpha=0.45, color=orange, label="keys K_s")
        ax.scatter(*q[i].mean(0), marker="X", s=70, color=blue, edgecolor="k")
        ax.scatter(*k[i].mean(0), marker="X", s=70, color=orange, edgecolor="k")
        ax.axhline(0, color="grey", lw=0.5)
        ax.axvline(0, color="grey", lw=0.5)
        ax.set_xlim(-lim, lim)
        ax.set_ylim(-lim, lim)
        ax.set_title(f"step {s}")
        ax.set_xlabel("SVD dim 1")
    axes[0].set_ylabel("SVD dim 2")
    axes[0].legend(fontsize=7, loc="lower left", markerscale=3)


def mean_arrows(ax, q: np.ndarray, k: np.ndarray, title: str = "") -> None:
    """Figs. 12, 21, 22: the trajectories of Q̄_s and K̄_s (S, 2), one arrow per checkpoint."""
    blue, orange = sns.color_palette("colorblind")[:2]
    for pts, color, label in ((np.asarray(q), blue, "mean query Q̄_s"), (np.asarray(k), orange, "mean key K̄_s")):
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
    ax.set_title(title)
    ax.legend(fontsize=7)


def _symlog(res: Result) -> float:
    return max(1, res.steps[1])


def pretraining(res: Result) -> plt.Figure:
    """MLM loss along pretraining: training loss (running mean) and held-out loss at the checkpoints."""
    common.set_theme()
    fig, ax = plt.subplots(figsize=(10, 4))
    for s in res.seeds:
        r = res.runs[str(s)]
        tl = np.asarray(r["train_loss"], dtype=float)
        if tl.size:
            w = max(1, len(tl) // 100)
            ax.plot(np.arange(w, len(tl) + 1), moving_average(tl, w), label=f"seed {s} (train)")
        ev = {int(k): v for k, v in r["eval_loss"].items()}
        if ev:
            ax.scatter(list(ev), list(ev.values()), s=14, marker="s", label=f"seed {s} (held-out, test split)")
    if res.source != "pretrain":
        ax.text(0.5, 0.5, "MultiBERT checkpoints: no pretraining run here", ha="center", transform=ax.transAxes)
    uni = res.first.get("unigram_nats")
    if uni:
        ax.axhline(uni, color="grey", ls="--", lw=1, label=f"unigram predictor ({uni:.2f})")
        ax.axhline(uni - TARGET_BELOW_UNIGRAM, color="grey", ls=":", lw=1,
                   label=f"unigram − {TARGET_BELOW_UNIGRAM} nats")
    ax.set_xscale("symlog", linthresh=_symlog(res))
    ax.set_xlabel("step")
    ax.set_ylabel("MLM loss (nats)")
    ax.set_title(f"MLM pretraining of {res.what}, batch {res.batch_size}×{res.seq_len}")
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8)
    return common.figure("qk-pretraining", fig)


#: how far below the unigram predictor the held-out loss must go for "a model that has learned" (issue 16)
TARGET_BELOW_UNIGRAM = 1.5


def ablation_figure(res: Result) -> plt.Figure:
    """The centring ablation: held-out MLM loss, mean attention entropy (over layers and heads) and the
    mean key's norm ‖K̄‖ in layers 1 and up (where centring makes K̄ = b_K) along pretraining, plain
    against centred blocks (mean over seeds, thin lines per seed)."""
    common.set_theme()
    a = res.ablation_summary
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.9))
    pal = common.sns.color_palette()
    labels = ("held-out MLM loss (nats)", "attention entropy (nats)", "mean ‖K̄‖, layers 1 and up")
    for ax, key, label in zip(axes, ("eval", "entropy", "k_norm_later"), labels, strict=True):
        for i, name in enumerate(("plain", "centred")):
            arr = np.asarray(a[name][key], dtype=float)
            for row in arr:
                ax.plot(res.steps, row, color=pal[i], lw=0.6, alpha=0.5)
            ax.plot(res.steps, arr.mean(0), color=pal[i], marker="o", ms=3,
                    label=f"{name} blocks" + (" (token mean removed)" if name == "centred" else ""))
        ax.set_xscale("symlog", linthresh=_symlog(res))
        ax.set_xlabel("step")
        ax.set_title(label)
    axes[2].set_yscale("symlog", linthresh=0.01)
    if a.get("unigram_nats"):
        axes[0].axhline(a["unigram_nats"], color="grey", ls="--", lw=1, label="unigram predictor")
    axes[1].axhline(np.log(tokens_per_sample(res)), color="grey", ls=":", lw=1, label="log(mean length)")
    for ax in axes[:2]:
        ax.legend(fontsize=7)
    n = len(a["seeds"])
    fig.suptitle(f"Centring ablation — {n} seed{'' if n == 1 else 's'}, every block output's token mean removed during "
                 "pretraining and analysis")
    return common.figure("qk-ablation", fig)


def ablation_numbers(res: Result) -> dict[str, object]:
    """The ablation's glued numbers (NaN / 'not run' where the run has no ablation)."""
    a = res.ablation_summary
    out: dict[str, object] = {"abl-seeds": len(a.get("seeds", [])) or "no"}
    for name in ("plain", "centred"):
        for k in ("eval_final", "eval_best", "entropy_first", "entropy_lowest", "entropy_final", "entropy_drop",
                  "abs_cos_final"):
            out[f"abl-{name}-{k.replace('_', '-')}"] = float(a[name][k]) if a else np.nan
    d = a.get("diff_eval_final", [])
    out["abl-diff-eval"] = ", ".join(f"{x:+.2f}" for x in d) if d else "not run"
    for key, name in (("diff_eval_final", "eval"), ("diff_entropy_drop", "entropy-drop"),
                      ("diff_abs_cos_final", "abs-cos")):
        iv = a.get("intervals", {}).get(key)
        out[f"abl-diff-{name}-ci"] = (interval_text(iv, 2) + ("" if iv["n"] > 1 else " (one seed: no interval)")
                                      if iv else "not run")
        out[f"abl-diff-{name}-verdict"] = _verdict(iv)
    out["abl-entropy-layers"] = "; ".join(
        f"layer {li}: {p:.2f} plain, {c:.2f} centred" for li, (p, c) in enumerate(zip(
            a["plain"]["entropy_final_layer"], a["centred"]["entropy_final_layer"], strict=True))) if a else "not run"
    for name in ("plain", "centred"):                 # layer 0 (reads the embeddings) apart from the later layers
        for k in ("abs_cos", "abs_dot", "q_norm", "k_norm"):
            v = np.asarray(a[name][f"{k}_final_layer"]) if a else np.full(2, np.nan)
            out[f"abl-{name}-{k.replace('_', '-')}-layer0"] = float(v[0])
            out[f"abl-{name}-{k.replace('_', '-')}-later"] = float(v[1:].mean())
    gap = float(a["unigram_nats"]) - float(a["centred"]["eval_final"]) if a and a.get("unigram_nats") else np.nan
    out["abl-vs-unigram"] = (f"{abs(gap):.2f} nats {'below' if gap > 0 else 'above'}" if np.isfinite(gap)
                             else "(no unigram baseline)")
    tail = late_loss_change(a) if a else {"from": "(none)", "to": "(none)", "plain": np.nan, "centred": np.nan}
    out.update({"abl-tail-from": tail["from"], "abl-tail-to": tail["to"],
                "abl-plain-eval-tail": tail["plain"], "abl-centred-eval-tail": tail["centred"]})
    out.update(later_entropy_numbers(a))
    return out


def late_loss_change(a: dict) -> dict:
    """The held-out loss change over the last checkpoint interval (mean over seeds, last minus the one
    before) of each variant: is either still learning at the end?"""
    steps = a["steps"]
    ev = {name: np.asarray(a[name]["eval"], dtype=float) for name in ("plain", "centred")}
    return {"from": f"{steps[-2]:,}", "to": f"{steps[-1]:,}",
            **{name: float(np.mean(e[:, -1] - e[:, -2])) for name, e in ev.items()}}


def _drop_verdict(iv: dict) -> str:
    """One variant's entropy drop (first − last step) over seeds: does attention sharpen?"""
    return verdict(iv, above="a fall detected", below="a rise detected", none="no change detected",
                   one="one seed: not tested")


def flat_layer_text(a: dict, later: dict) -> str:
    """Where centring takes sharpening away: the plain model's sharpest later layer (after layer 0), its
    final entropy with centred blocks, how that ranks among the centred model's later layers, and the
    seed-paired difference of that layer (centred − plain) with its interval and verdict."""
    pl = np.asarray(a["plain"]["entropy_final_layer"], dtype=float)
    ce = np.asarray(a["centred"]["entropy_final_layer"], dtype=float)
    layers = later["layers"]
    lp = layers[int(np.argmin(pl[layers]))]
    by_flatness = sorted(layers, key=lambda li: -ce[li])
    if by_flatness[0] == lp:
        others = [li for li in by_flatness if li != lp]
        rank = "the flattest of the centred model's layers" + (
            f" (next: layer {others[0]}, {ce[others[0]]:.2f})" if others else "")
    else:
        rank = f"where the centred model's flattest layer is layer {by_flatness[0]} ({ce[by_flatness[0]]:.2f})"
    iv = later["layer_intervals"][layers.index(lp)]
    return (f"Layer {lp}, the plain model's sharpest after layer 0 ({pl[lp]:.2f} nats), ends at {ce[lp]:.2f} with "
            f"centred blocks, {rank}; its final entropy, centred − plain seed by seed, is {interval_text(iv, 2)} "
            f"nats: {_verdict(iv)}.")


def later_entropy_numbers(a: dict) -> dict[str, object]:
    """The glued reading of `ablation_summary["later"]` (attention entropy of layers 1.., where centring
    acts): each variant's first and final mean, its drop with interval and verdict, the seed-paired
    centred − plain drop (per seed, interval, verdict), the per-layer final differences, and
    `flat_layer_text`."""
    later = a.get("later") if a else None
    if not later:
        return {**{f"abl-{n}-{k}-later": np.nan for n in ("plain", "centred")
                   for k in ("entropy-first", "entropy-final")},
                **{f"abl-{n}-drop-later-{k}": "not run" for n in ("plain", "centred") for k in ("ci", "verdict")},
                "abl-diff-drop-later": "not run", "abl-diff-drop-later-ci": "not run",
                "abl-diff-drop-later-verdict": "not run", "abl-layer-diffs": "not run", "abl-flat-layer": ""}
    out: dict[str, object] = {}
    for name in ("plain", "centred"):
        out[f"abl-{name}-entropy-first-later"] = later[name]["first_mean"]
        out[f"abl-{name}-entropy-final-later"] = later[name]["final_mean"]
        out[f"abl-{name}-drop-later-ci"] = interval_text(later[name]["drop_interval"], 2)
        out[f"abl-{name}-drop-later-verdict"] = _drop_verdict(later[name]["drop_interval"])
    iv = later["intervals"]["diff_drop"]
    out["abl-diff-drop-later"] = ", ".join(f"{x:+.2f}" for x in later["diff_drop"])
    out["abl-diff-drop-later-ci"] = interval_text(iv, 2) + ("" if iv["n"] > 1 else " (one seed: no interval)")
    out["abl-diff-drop-later-verdict"] = _verdict(iv)
    out["abl-layer-diffs"] = "; ".join(f"layer {li}: {interval_text(liv, 2)}, {_verdict(liv)}"
                                       for li, liv in zip(later["layers"], later["layer_intervals"], strict=True))
    out["abl-flat-layer"] = flat_layer_text(a, later)
    return out


def example_label(res: Result, key: str) -> str:
    """How the figures name the example head `key` ("similar": the largest final cos(Q̄, K̄); "opposite":
    the smallest): by the paper's name only when the head is aligned that way (|cos| ≥ `res.threshold`),
    otherwise as what it is — the most positive / most negative head, unaligned."""
    cos = res.first["display"][key]["cos_final"]
    if key == "similar":
        return "similar" if cos >= res.threshold else "most positive (unaligned)"
    return "opposite" if cos <= -res.threshold else "most negative (unaligned)"


def example_heads_text(res: Result) -> str:
    """The reading of the two example heads against the threshold (glued `qk-examples`): which is aligned,
    and, when the most positive head is not, that the figures set it beside the opposite one as an
    unaligned head, not as a 'similar' one."""
    t = res.threshold
    sim, opp = (res.first["display"][k]["cos_final"] for k in ("similar", "opposite"))
    n_common = int(np.sum(np.asarray(res.first["cos"], dtype=float)[-1] >= t))
    first = (f"The most negative is an opposite-direction head (cos ≤ −{t})" if opp <= -t else
             f"Even the most negative is not aligned (cos > −{t})")
    if sim >= t:
        return f"{first}, and the most positive a common-direction head (cos ≥ {t}), as in the paper's pair."
    return (f"{first}; the most positive is below the {t} threshold of a common-direction head "
            f"({'no head of this seed reaches it' if n_common == 0 else f'{n_common} heads of this seed do'}), so it "
            "is the least opposite head, not an aligned one, and the figures label it 'most positive (unaligned)': "
            "they set " + ("an opposite-direction" if opp <= -t else "an unaligned") + " head beside an unaligned "
            "one, not the paper's contrast of two aligned heads.")


def fig11(res: Result) -> plt.Figure:
    """Figure 11: display tokens' Q_s and K_s of the two example heads on the common SVD."""
    common.set_theme()
    R, shown = res.first, res.shown
    fig, axes = plt.subplots(2, len(shown), figsize=(2.6 * len(shown) + 0.6, 5.6), squeeze=False)
    for row, key in zip(axes, ("similar", "opposite"), strict=True):
        ex = R["display"][key]
        scatter_panels(row, ex, "union", res.steps, shown)
        row[0].set_ylabel(f"{example_label(res, key)}:\nlayer {ex['layer']} head {ex['head']} "
                          f"(cos {ex['cos_final']:+.2f})\nSVD dim 2", fontsize=8)
    fig.suptitle(f"Figure 11 — Q_s and K_s, seed {res.seeds[0]}, on one SVD of Q∪K over all steps")
    return common.figure("qk-fig11", fig)


def _arrows(res: Result, basis: str, axes, label_fmt: str) -> None:
    R = res.first
    for ax, key in zip(axes, ("similar", "opposite"), strict=True):
        e = R["display"][key]
        m = R["means"][basis]
        mean_arrows(ax, np.asarray(m["q"])[:, e["layer"], e["head"]], np.asarray(m["k"])[:, e["layer"], e["head"]],
                    title=label_fmt.format(label=example_label(res, key), layer=e["layer"], head=e["head"],
                                           cos=e["cos_final"]))


def fig12(res: Result) -> plt.Figure:
    """Figure 12: the trajectories of the mean query and key of the two example heads (common SVD)."""
    common.set_theme()
    fig, axes = plt.subplots(1, 2, figsize=(10, 4.6))
    _arrows(res, "union", axes, "{label}: layer {layer}, head {head} (final cos {cos:+.2f})")
    fig.suptitle(f"Figure 12 — mean query and key along training, common SVD (seed {res.seeds[0]})")
    return common.figure("qk-fig12", fig)


def _layer_grid(n: int) -> tuple[plt.Figure, list[plt.Axes]]:
    """A figure with one panel per layer, at most four a row (unused panels hidden)."""
    cols = min(n, 4)
    rows = -(-n // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(10, 3.4 * rows), sharey=True, squeeze=False)
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    return fig, list(axes.flat[:n])


def fig13(res: Result) -> plt.Figure:
    """Figure 13: cos(Q̄_s, K̄_s) per head, one panel per layer (first seed)."""
    common.set_theme()
    cos = np.asarray(res.first["cos"], dtype=float)                                   # (S, layers, heads)
    fig, axes = _layer_grid(res.n_layers)
    for li, ax in enumerate(axes):
        common.layer_curves(ax, {f"head {h}": cos[:, li, h] for h in range(res.n_heads)}, x=np.array(res.steps),
                            symlog_x=_symlog(res), xlabel="step", ylabel="cos(Q̄_s, K̄_s)", title=f"layer {li}")
        ax.axhline(0, color="grey", lw=0.6)
        ax.set_ylim(-1.05, 1.05)
    fig.suptitle(f"Figure 13 — cos(Q̄_s, K̄_s) along training, seed {res.seeds[0]}")
    return common.figure("qk-fig13", fig)


def fig14(res: Result) -> plt.Figure:
    """Figure 14: Q̄_s·K̄_s of the two example heads, and |Q̄_s·K̄_s| per layer over heads and seeds."""
    common.set_theme()
    dot = np.asarray(res.first["dot"], dtype=float)
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.8))
    for ax, key in zip(axes[:2], ("similar", "opposite"), strict=True):
        ex = res.first["display"][key]
        common.layer_curves(ax, {f"layer {ex['layer']} head {ex['head']} (cos {ex['cos_final']:+.2f})":
                                 dot[:, ex["layer"], ex["head"]]},
                            x=np.array(res.steps), symlog_x=_symlog(res), xlabel="step", ylabel="Q̄_s · K̄_s",
                            title=example_label(res, key))
        ax.axhline(0, color="grey", lw=0.6)
    absdot = np.abs(res.stacked("dot"))                                               # (seeds, S, layers, heads)
    common.layer_curves(axes[2], {f"layer {li}": absdot[:, :, li].mean(-1) for li in range(res.n_layers)},
                        x=np.array(res.steps), symlog_x=_symlog(res), xlabel="step",
                        ylabel="|Q̄_s · K̄_s|, mean over heads", title=f"all heads, {len(res.seeds)} seeds (±1 sd)",
                        logy=True)
    axes[2].set_xlim(left=0)
    fig.suptitle("Figure 14 — scalar product of the mean query and key along training")
    return common.figure("qk-fig14", fig)


def fig15(res: Result) -> plt.Figure:
    """Figure 15: mean attention-row entropy per layer along training (mean ± sd over seeds)."""
    common.set_theme()
    ent = res.stacked("entropy_layer")                                                # (seeds, S, layers)
    fig, ax = plt.subplots(figsize=(10, 4))
    common.layer_curves(ax, {f"layer {li}": ent[:, :, li] for li in range(res.n_layers)}, x=np.array(res.steps),
                        symlog_x=_symlog(res), xlabel="step", ylabel="mean row entropy (nats)",
                        title=f"Figure 15 — attention entropy per layer, {len(res.seeds)} seeds (±1 sd)")
    ax.axhline(np.log(tokens_per_sample(res)), color="grey", ls=":", lw=1)
    return common.figure("qk-fig15", fig)


def fig19_20(res: Result) -> plt.Figure:
    """Figures 19-20: the 'opposite' example head on the SVD of the keys only and of the queries only."""
    common.set_theme()
    ex = res.first["display"]["opposite"]
    shown = res.shown
    fig, axes = plt.subplots(2, len(shown), figsize=(2.6 * len(shown) + 0.6, 5.6), squeeze=False)
    for row, basis, fig_no in zip(axes, ("K", "Q"), (19, 20), strict=True):
        scatter_panels(row, ex, basis, res.steps, shown)
        row[0].set_ylabel(f"Fig. {fig_no}: SVD of {basis}_s\nSVD dim 2")
    fig.suptitle(f"Figures 19–20 — {example_label(res, 'opposite')} head: layer {ex['layer']} head {ex['head']}, "
                 f"seed {res.seeds[0]}, on the SVD of the keys (top) or of the queries (bottom)")
    return common.figure("qk-fig19-20", fig)


def fig21_22(res: Result) -> plt.Figure:
    """Figures 21-22: the mean trajectories of the two example heads on the K-only and Q-only SVDs."""
    common.set_theme()
    fig, axes = plt.subplots(2, 2, figsize=(10, 9))
    for ax_row, basis, fig_no in zip(axes, ("K", "Q"), (21, 22), strict=True):
        _arrows(res, basis, ax_row, f"Fig. {fig_no} ({basis}-only SVD), {{label}}: layer {{layer}} head {{head}}")
    fig.suptitle(f"Figures 21–22 — mean query and key along training (seed {res.seeds[0]})")
    return common.figure("qk-fig21-22", fig)


def fig23(res: Result) -> plt.Figure:
    """Figure 23: cos(Q̄_s, K̄_s) with the heads of a layer concatenated, one curve per seed."""
    common.set_theme()
    cc = res.stacked("cos_concat")                                                    # (seeds, S, layers)
    fig, axes = _layer_grid(res.n_layers)
    for li, ax in enumerate(axes):
        common.layer_curves(ax, {f"seed {s}": cc[i, :, li] for i, s in enumerate(res.seeds)}, x=np.array(res.steps),
                            symlog_x=_symlog(res), xlabel="step", ylabel="cos, heads concatenated", title=f"layer {li}")
        ax.axhline(0, color="grey", lw=0.6)
        ax.set_ylim(-1.05, 1.05)
    fig.suptitle("Figure 23 — cos(Q̄_s, K̄_s) with the heads of a layer concatenated, per seed")
    return common.figure("qk-fig23", fig)


def tokens_per_sample(res: Result) -> float:
    return res.first["tokens"] / res.n_samples


def pretraining_frame(res: Result) -> pd.DataFrame:
    """Per seed: training loss early and late, held-out MLM loss at the first and last step, timings."""
    first, last = res.steps[0], res.steps[-1]
    rows = []
    for s in res.seeds:
        r = res.runs[str(s)]
        tl = np.asarray(r["train_loss"], dtype=float)
        wall = r["pretrain_wall_time_s"]
        rows.append({"seed": s, "train loss, first 20 steps": tl[:20].mean() if tl.size else np.nan,
                     "train loss, last 50 steps": tl[-50:].mean() if tl.size else np.nan,
                     f"held-out MLM loss, step {first}": r["eval_loss"].get(str(first), np.nan),
                     f"held-out MLM loss, step {last}": r["eval_loss"].get(str(last), np.nan),
                     "pretraining s": wall if wall is not None else np.nan,
                     "steps/s": len(tl) / wall if wall else np.nan, "analysis s": r["analysis_wall_time_s"]})
    return pd.DataFrame(rows)


def pretraining_table(res: Result):
    return common.table(pretraining_frame(res), digits=3)


def alignment_table(res: Result):
    """Per layer: the final cos(Q̄, K̄) of every head per seed, and the common / opposite / unaligned
    head counts over all seeds (threshold `res.threshold`)."""
    from ..core.qk import alignment_summary

    summ = {s: alignment_summary(np.asarray(res.runs[str(s)]["cos"]), res.steps, res.threshold) for s in res.seeds}
    df = pd.DataFrame({
        "layer": list(range(res.n_layers)),
        **{f"cos at step {res.steps[-1]} (seed {s})": [" ".join(f"{c:+.2f}" for c in row)
                                                      for row in summ[s]["final_cos"]] for s in res.seeds},
        **{f"{k} (all seeds)": [sum(summ[s][k][li] for s in res.seeds) for li in range(res.n_layers)]
           for k in ("common", "opposite", "unaligned")},
    })
    return common.table(df)


def mean_abs_cos_random(d: int) -> float:
    """E|cos| of two independent uniformly random directions in ℝ^d: Γ(d/2) / (√π Γ((d+1)/2))
    (≈ √(2/(πd)); 1/√d is the root mean square, not the mean)."""
    from scipy.special import gammaln

    return float(np.exp(gammaln(d / 2) - gammaln((d + 1) / 2)) / np.sqrt(np.pi))


def _verdict(iv: dict | None) -> str:
    """'smaller with centred blocks' / 'larger with centred blocks' when the centred − plain interval
    excludes 0, 'no difference detected' when it covers 0."""
    if not iv:
        return "not run"
    return verdict(iv, above="larger with centred blocks", below="smaller with centred blocks",
                   one="one seed: not tested")


def seed_frame(res: Result) -> pd.DataFrame:
    """The timing claims seed by seed (`compare_runs`' `per_seed`): held-out loss, aligned head counts,
    median onsets, mean |cos(Q̄, K̄)|, and the attention entropy (mean over layers) at step 0, at its
    lowest point (and when) and at the end."""
    rows = []
    for r in res.comparison["per_seed"]:
        on = r["median_onset"]
        rows.append({"seed": r["seed"], "held-out MLM loss": r["eval_final"],
                     f"common heads (cos ≥ {res.threshold})": r["n_common"],
                     f"opposite heads (cos ≤ −{res.threshold})": r["n_opposite"],
                     "median onset, common": on["common"], "median onset, opposite": on["opposite"],
                     "mean |cos| at the end": r["abs_cos_final"], "entropy at step 0": r["entropy_first"],
                     "lowest entropy": r["entropy_lowest"], "lowest at step": r["entropy_lowest_step"],
                     "entropy at the end": r["entropy_final"],
                     "layers that flatten again": _layers_text(r["entropy_rebound_layers"])})
    return pd.DataFrame(rows)


def seed_table(res: Result):
    """`seed_frame` as the chapter's table, "—" where a seed has no median onset (no head settles)."""
    df = seed_frame(res)
    for col in ("median onset, common", "median onset, opposite"):
        df[col] = pd.Series([MISSING if v is None or pd.isna(v) else int(v) for v in df[col]], dtype=object)
    return common.table(df)


#: how the tables show a value that does not exist (a median onset when no head settles)
MISSING = "—"


def _spread(values, fmt: str = "{}") -> str:
    """'a, b, c' over seeds, '–' for a missing value."""
    return ", ".join("–" if v is None else fmt.format(v) for v in values)


def seed_spread_text(res: Result) -> str:
    """The timing claims with their spread across seeds, as one sentence per claim (glued `qk-seed-timing`)."""
    ps = res.comparison["per_seed"]
    if len(ps) < 2:
        return "With one seed so far there is no spread across seeds to state."
    h = res.n_layers * res.n_heads
    last = res.steps[-1]

    def onsets(kind: str) -> str:
        v = [r["median_onset"][kind] for r in ps]
        got = [x for x in v if x is not None]
        if not got:
            return f"no {kind}-direction head settles in any seed"
        rng = (f" ({min(got) / last:.0%}–{max(got) / last:.0%} of training)" if len(got) > 1 else "")
        return f"the median onset of the {kind}-direction heads is at step {_spread(v)}{rng}"
    return (f"Seed by seed ({_spread([r['seed'] for r in ps])}): opposite-direction heads "
            f"{_spread([r['n_opposite'] for r in ps])} and common-direction heads "
            f"{_spread([r['n_common'] for r in ps])} of {h}; {onsets('opposite')}; {onsets('common')}; the mean "
            f"attention entropy over layers is lowest at step {_spread([r['entropy_lowest_step'] for r in ps])} "
            f"({_spread([r['entropy_lowest'] for r in ps], '{:.2f}')} nats, against "
            f"{_spread([r['entropy_final'] for r in ps], '{:.2f}')} at step {last}).")


def entropy_table(res: Result):
    """Per layer: entropy at the first and last step (mean over seeds), change, lowest value and when."""
    c = res.comparison
    e0, e1 = np.array(c["entropy_first"]), np.array(c["entropy_final"])
    df = pd.DataFrame({"layer": range(res.n_layers), f"entropy at step {res.steps[0]}": e0,
                       f"entropy at step {res.steps[-1]}": e1, "change": e1 - e0, "lowest": c["entropy_lowest"],
                       "lowest at step": c["entropy_lowest_step"]})
    return common.table(df)


def _layers_text(ls: list[int]) -> str:
    return ", ".join(str(x) for x in ls) if ls else "none"


def _onset_text(res: Result, kind: str) -> str:
    o = res.comparison["onsets"][kind]
    if not o:
        return f"no head settles in the {kind} direction"
    return (f"{kind}-direction heads settle (|cos| ≥ {res.threshold} from then on) at a median step "
            f"{int(np.median(o))} ({np.median(o) / res.steps[-1]:.0%} of training; range {min(o)}–{max(o)})")


def _when(res: Result, kind: str) -> str:
    m = res.comparison["median_onset"][kind]
    return (f"at a median step {m} ({m / res.steps[-1]:.0%} of training)" if m is not None
            else "never (no head does)")


def numbers(res: Result) -> dict[str, object]:
    """Every number (and list read as text) the chapter's prose quotes, by glue key (without `qk-`)."""
    c = res.comparison
    R = res.first
    last = res.steps[-1]
    ex = R["display"]
    tokens = max(res.steps) * res.batch_size * res.seq_len
    available = R.get("train_tokens_available") or np.nan
    walls = [res.runs[str(s)]["pretrain_wall_time_s"] for s in res.seeds]
    pre = pretraining_frame(res)
    e0, e1 = np.array(c["entropy_first"]), np.array(c["entropy_final"])
    order = np.argsort(e1)
    lowest, lo_step = c["entropy_lowest"], c["entropy_lowest_step"]
    rebound = c["entropy_rebound_layers"]
    cc = np.asarray(c["concat_final"])                                                # (seeds, layers)
    other = [f"on the SVD of {basis}_s, the mean {who} moves away from the origin along the first direction in "
             f"{o['moved']} of {o['heads']} heads (|coordinate| {o['first']:.2f} → {o['final']:.2f} on average)"
             for (basis, o), who in zip(c["other_mean"].items(), ("query", "key"), strict=True)]
    return {
        "what": res.what, "n-seeds": len(res.seeds), "first-seed": res.seeds[0], "last-step": last,
        "batch": res.batch_size, "seq-len": res.seq_len, "mtokens": tokens / 1e6, "passes": tokens / available,
        "available-mtokens": available / 1e6,
        "pretrain-seconds": ", ".join(f"{w:.0f} s" for w in walls if w is not None) or "none (no pretraining)",
        "eval-first": float(pre.iloc[:, 3].mean()), "eval-final": float(pre.iloc[:, 4].mean()),
        "train-final": float(pre.iloc[:, 2].mean()),
        "seed-spread": (f"The spread across seeds at the last step is {c['concat_spread']:.2f} on average (sd over "
                        f"seeds); the sign is the same for every seed in {c['concat_same_sign_layers']} of "
                        f"{res.n_layers} layers." if len(res.seeds) > 1 else
                        "With one seed so far there is no spread across seeds to measure."),
        "uniform-loss": UNIFORM_MLM_LOSS,
        "unigram": float(R.get("unigram_nats") or np.nan),
        "below-unigram": float(R.get("unigram_nats") or np.nan) - float(pre.iloc[:, 4].mean()),
        "target-below": TARGET_BELOW_UNIGRAM,
        "corpus": ("the mixed corpus (WikiText-103 validation and test text minus the analysis and held-out "
                   "paragraphs, plus the mirror's GLUE and STS sentences)" if R.get("unigram_nats") else
                   "the WikiText-103 validation split"),
        "share-mean": c["union_share_mean"], "share-min": c["union_share_min"], "share-max": c["union_share_max"],
        "grow": c["union_grow"], "heads-per-seed": c["union_heads"], "same-sign": c["union_same_sign"],
        "opposite-sign": c["union_opposite_sign"],
        **{f"{k}-{f}": ex[k][g] for k in ("similar", "opposite")
           for f, g in (("layer", "layer"), ("head", "head"), ("cos", "cos_final"))},
        "examples": example_heads_text(res),
        "abs-cos-first": c["abs_cos_first"], "abs-cos-final": c["abs_cos_final"], "n-heads": c["n_heads"],
        "d-k": res.d_k, "chance": mean_abs_cos_random(res.d_k), "threshold": res.threshold, "n-common": c["n_common"],
        "n-opposite": c["n_opposite"], "n-between": c["n_heads"] - c["n_common"] - c["n_opposite"],
        "n-aligned": c["n_common"] + c["n_opposite"], "heads-per-layer": c["heads_per_layer"],
        "per-layer": "; ".join(f"layer {li}: {a} / {b}, {m:+.2f}" for li, (a, b, m) in enumerate(zip(
            c["common_per_layer"], c["opposite_per_layer"], c["mean_final_cos_per_layer"], strict=True))),
        "onset-common": _onset_text(res, "common").capitalize(), "onset-opposite": _onset_text(res, "opposite"),
        "common-layers": _layers_text(c["common_layers"]), "opposite-layers": _layers_text(c["opposite_layers"]),
        "when-common": _when(res, "common"), "when-opposite": _when(res, "opposite"),
        "abs-dot-first": c["abs_dot_first"], "abs-dot-final": c["abs_dot_final"], "abs-dot-growth": c["abs_dot_growth"],
        "tokens-per-sample": tokens_per_sample(res), "entropy-falls": c["entropy_falls"], "n-layers": res.n_layers,
        "entropy-first-mean": float(e0.mean()), "entropy-final-mean": float(e1.mean()),
        "sharpest-layer": int(order[0]), "sharpest": float(e1[order[0]]), "flattest-layer": int(order[-1]),
        "flattest": float(e1[order[-1]]), "entropy-first-layer": float(e1[0]), "entropy-last-layer": float(e1[-1]),
        "rebound": ("The decay is not monotonic: " + ", ".join(
            f"layer {li} is sharpest at step {lo_step[li]} ({lowest[li]:.2f})" for li in rebound)
            + f" and flattens again by step {last}.") if rebound
        else "No layer flattens again by more than 0.1 nats after its sharpest point.",
        "other-mean": "; ".join(other),
        "concat-final": "; ".join(f"layer {li}: " + ", ".join(f"{x:+.2f}" for x in cc[:, li])
                                  for li in range(cc.shape[1])),
        "concat-spread": c["concat_spread"], "concat-same-sign": c["concat_same_sign_layers"],
        "seed-timing": seed_spread_text(res),
    }


def probe_frame(probes: list[dict]) -> pd.DataFrame:
    """The recipe probes as rows: recipe, tokens seen, held-out MLM loss at the last checkpoint and how far
    below the unigram predictor that is."""
    rows = []
    for r in probes:
        last = max(r["eval_loss"], key=int)
        recipe = (f"lr {r['lr']:g}, batch {r['batch']}" + (", WikiText x3, no SST-2 phrases" if r["wiki_weighted"]
                                                          else "") + (f", dropout {r['dropout']:g}" if r["dropout"]
                                                                      else ""))
        rows.append({"probe": r["name"], "recipe": recipe, "steps": int(last),
                     "tokens seen (M)": int(last) * r["batch"] * 128 / 1e6,
                     "held-out MLM loss": r["eval_loss"][last],
                     "below unigram": r["unigram_nats"] - r["eval_loss"][last]})
    return pd.DataFrame(rows)


def probe_table(probes: list[dict]):
    """`probe_frame` for reading (a 'none committed' table when there are no probes)."""
    if not probes:
        return common.table(pd.DataFrame({"recipe probes": ["none committed (scripts/qk_recipe_probe.py)"]}))
    return common.table(probe_frame(probes), digits=3)


def publish_probes(probes: list[dict], res: Result) -> None:
    """Glue what the prose says of the probes: the spread of the final held-out loss of the probes that see
    the same number of tokens (the most common budget), that budget, and the corpus-weighting probe's
    held-out loss minus the first book run's (run seed 0, the probes' seed) at its last common step."""
    values: dict[str, object] = {"probe-spread": np.nan, "probe-mtokens": np.nan, "probe-range": "(none)",
                                 "probe-n": 0, "probe-book-gain": np.nan,
                                 "probe-weighting-diff": np.nan, "probe-weighting-step": "(none)"}
    if probes:
        f = probe_frame(probes)
        plain = f[~f["recipe"].str.contains("WikiText")]
        budget = plain["tokens seen (M)"].mode().iloc[0]
        same = plain[plain["tokens seen (M)"] == budget]["held-out MLM loss"]
        values.update({"probe-spread": float(same.max() - same.min()), "probe-mtokens": float(budget),
                       "probe-range": f"{same.min():.2f}–{same.max():.2f}", "probe-n": len(same)})
        if res.source == "pretrain":      # the book runs' final held-out loss below the probes' mean
            finals = [float(r["eval_loss"][max(r["eval_loss"], key=int)]) for r in res.runs.values()]
            values["probe-book-gain"] = float(same.mean() - np.mean(finals))
        weighted = [r for r in probes if r["wiki_weighted"]]
        book = res.first.get("eval_loss", {}) if res.source == "pretrain" and res.seeds[0] == 0 else {}
        if weighted and book:
            w = weighted[0]["eval_loss"]
            step = max((k for k in w if k in book), key=int)
            values.update({"probe-weighting-diff": w[step] - book[step], "probe-weighting-step": f"{int(step):,}"})
    common.publish("qk", values)


def publish(res: Result) -> None:
    """Draw and glue every figure and glue every number the prose quotes (`qk-<key>`)."""
    for draw in (pretraining, fig11, fig12, fig13, fig14, fig15, fig19_20, fig21_22, fig23):
        draw(res)
    publish_probes(recipe_probes(), res)
    if res.ablation_summary:
        ablation_figure(res)
    values = {**numbers(res), **ablation_numbers(res)}
    common.publish("qk", {k: (float(v) if isinstance(v, np.floating) else v) for k, v in values.items()})


__all__ = ["pretraining", "ablation_figure", "ablation_numbers", "later_entropy_numbers", "flat_layer_text",
           "late_loss_change", "example_label", "example_heads_text",
           "fig11", "fig12", "fig13", "fig14", "fig15", "fig19_20", "fig21_22", "fig23",
           "pretraining_table", "alignment_table", "entropy_table", "seed_frame", "seed_table", "seed_spread_text",
           "numbers", "publish", "scatter_panels", "mean_abs_cos_random",
           "mean_arrows", "probe_frame", "probe_table", "publish_probes"]
