"""Figures, tables and published numbers of the drift chapter (Godey et al. Figures 6-10)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from ..experiments.drift import Result
from . import common


def _versus_n(res: Result, ax, curves: dict[str, str], ylabel: str, title: str, logy: bool = False) -> None:
    """Statistics against the bias norm N: mean over seeds, min–max band, symlog N axis."""
    common.layer_curves(ax, {label: res.stat(name) for label, name in curves.items()}, x=np.asarray(res.norms),
                        spread="minmax", xlabel="bias norm N", ylabel=ylabel, title=title, logy=logy, markers=False,
                        symlog_x=res.norm_min)
    ax.set_xlim(0, 1.3 * max(res.norms))


def fig6(res: Result) -> plt.Figure:
    """Figure 6: average cosine and average norm of the block's input and output against N."""
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    _versus_n(res, axes[0], {"input x + b": "in_cos", "output T(x + b)": "out_cos"}, "average cosine",
              "(a) cosine similarity")
    _versus_n(res, axes[1], {"input E‖x + b‖": "in_norm", "output E‖T(x + b)‖": "out_norm",
                             "input ‖E(x + b)‖": "in_mean_norm", "output ‖E T(x + b)‖": "out_mean_norm"},
              "norm", "(b) average norm and norm of the mean", logy=True)
    fig.suptitle(f"Figure 6 — untrained BERT block, {res.n_seq}×{res.seq_len} tokens, {len(res.seeds)} seeds "
                 "(band: min–max)")
    return fig


def fig7(res: Result, max_seeds: int = 3) -> plt.Figure:
    """Figure 7: histograms of the pre-softmax scores at each `hist_norms` N (first seeds)."""
    n = len(res.hist_norms)
    fig, axes = plt.subplots(1, n, figsize=(max(10, 2.6 * n), 3.6), squeeze=False)
    for j, (ax, hn) in enumerate(zip(axes[0], res.hist_norms, strict=True)):
        for s, seed in enumerate(res.seeds[:max_seeds]):
            h = res.hists[s][j]
            ax.stairs(h["density"], h["edges"], label=f"seed {seed}")
        ax.set_title(f"N = {hn:g}")
        ax.set_xlabel("QKᵀ/√d_k")
    axes[0][0].set_ylabel("density")
    axes[0][0].legend(fontsize=8)
    fig.suptitle("Figure 7 — pre-softmax attention scores as the input bias norm grows")
    return fig


def fig8(res: Result) -> plt.Figure:
    """Figure 8: cosine and norm of the queries and keys (heads concatenated) against N."""
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    _versus_n(res, axes[0], {"Q": "q_cos", "K": "k_cos"}, "average cosine", "(a) cosine similarity of Q and K")
    _versus_n(res, axes[1], {"Q": "q_norm", "K": "k_norm"}, "average norm", "(b) norm of Q and K", logy=True)
    fig.suptitle("Figure 8 — query and key distributions (heads concatenated)")
    return fig


def fig9_10(res: Result) -> plt.Figure:
    """Figures 9 and 10: softmax row max / median / min and the sequence max and min against N;
    the dotted line is the uniform attention 1/L."""
    fig, axes = plt.subplots(1, 3, figsize=(12, 4))
    _versus_n(res, axes[0], {"row max": "row_max", "row median": "row_median", "row min": "row_min"},
              "softmax value", "Figure 9 — per-row max / median / min", logy=True)
    _versus_n(res, axes[1], {"sequence max": "seq_max"}, "softmax value", "Figure 10a — maximum over a sequence",
              logy=True)
    _versus_n(res, axes[2], {"sequence min": "seq_min"}, "softmax value", "Figure 10b — minimum over a sequence",
              logy=True)
    for ax in axes:
        ax.axhline(1 / res.seq_len, color="k", lw=0.7, ls=":")
    fig.suptitle("Figures 9 and 10 — the softmax sharpens as the drift grows")
    return fig


def reference_table(res: Result):
    """Mean norm of the reference model's real-token hidden states per layer, beside √d."""
    ref = res.reference
    df = pd.DataFrame({"layer": range(len(ref["layer_norms"])), "mean ‖h‖ of real tokens": ref["layer_norms"],
                       "√d of that model": np.sqrt(ref["d"])})
    return common.table(df.set_index("layer").T, digits=2, index=True).set_caption(
        f"Hidden-state norms per layer of {ref['model']} on {ref['sentences']} MRPC sentences")


def scores_table(res: Result, rows: int = 8):
    """Mean and sd of the pre-softmax scores over seeds, at about `rows` bias norms."""
    m, sd = res.stat("score_mean"), res.stat("score_std")
    df = pd.DataFrame({"N": res.norms, "score mean (seed-avg)": m.mean(0), "min over seeds": m.min(0),
                       "max over seeds": m.max(0), "score sd (seed-avg)": sd.mean(0)})
    return common.table(df.iloc[:: max(1, len(df) // rows)], digits=4).set_caption(
        "Pre-softmax scores QKᵀ/√d_k against the bias norm N")


def numbers(res: Result) -> dict[str, object]:
    """Every number the chapter's prose quotes."""
    per_seed = [v for v in res.fixed_point_per_seed if v is not None]
    out_norm = res.stat("out_norm")
    last = res.stat("score_mean")[:, -1]
    row_max = res.stat("row_max")
    ref = res.reference
    return {
        "n-star": res.fixed_point_refined if res.fixed_point_refined is not None else float("nan"),
        "n-star-min": min(per_seed) if per_seed else float("nan"),
        "n-star-max": max(per_seed) if per_seed else float("nan"),
        "out-norm": float(out_norm.mean()), "sqrt-d": float(np.sqrt(res.hidden)), "hidden": res.hidden,
        "seeds": len(res.seeds), "n-seq": res.n_seq, "seq-len": res.seq_len,
        "ref-model": ref["model"], "ref-description": ref["description"], "ref-sentences": ref["sentences"],
        "ref-norm-min": min(ref["layer_norms"]), "ref-norm-max": max(ref["layer_norms"]), "ref-d": ref["d"],
        "ref-sqrt-d": float(np.sqrt(ref["d"])),
        "n-last": res.norms[-1], "pos-last": int((last > 0).sum()), "neg-last": int((last < 0).sum()),
        "n-small": res.norms[0], "rowmax-small": float(row_max[:, 0].mean()), "inv-len": 1 / res.seq_len,
        "n-big": res.norms[-1], "rowmax-big": float(row_max[:, -1].mean()),
        "rowmax-big-min": float(row_max[:, -1].min()), "rowmax-big-max": float(row_max[:, -1].max()),
        "seqmin-big": float(res.stat("seq_min")[:, -1].mean()),
    }


def publish(res: Result) -> None:
    """Glue the chapter's figures (`drift-fig6`, `-fig7`, `-fig8`, `-fig9-10`) and numbers."""
    common.set_theme()
    for name, make in (("fig6", fig6), ("fig7", fig7), ("fig8", fig8), ("fig9-10", fig9_10)):
        common.figure(f"drift-{name}", make(res))
    common.publish("drift", numbers(res))
