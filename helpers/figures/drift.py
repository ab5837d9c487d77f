"""Figures, tables and published numbers of the drift chapter (Godey et al. Figures 6-10)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from ..experiments.drift import Result
from . import common

VARIANT_LABELS = {"table": "rows of E", "embedding-layer": "BERT embedding layer"}


def seed_note(res: Result) -> str:
    """What each input variant's numbers are taken over: 'rows of E: 3 seeds; BERT embedding layer: one
    seed' (a figure's or table's caption)."""
    return "; ".join(f"{VARIANT_LABELS[v]}: {common.seeds_text(res.seeds_of(v))}" for v in res.variants())


def _versus_n(res: Result, ax, curves: dict[str, str | tuple[str, str]], ylabel: str, title: str,
              logy: bool = False) -> None:
    """Statistics against the bias norm N: mean over seeds, min–max band, symlog N axis. A curve is a
    statistic name (inputs: rows of E) or a (name, variant) pair."""
    def arr(spec):
        return res.stat(spec) if isinstance(spec, str) else res.stat(*spec)
    common.layer_curves(ax, {label: arr(spec) for label, spec in curves.items()}, x=np.asarray(res.norms),
                        spread="minmax", xlabel="bias norm N", ylabel=ylabel, title=title, logy=logy, markers=False,
                        symlog_x=res.norm_min)
    ax.set_xlim(0, 1.3 * max(res.norms))


def fig6(res: Result) -> plt.Figure:
    """Figure 6: average cosine and average norm of the block's input and output against N."""
    fig, axes = plt.subplots(1, 2, figsize=(8, 3.8))
    _versus_n(res, axes[0], {"input x + b": "in_cos", "output T(x + b)": "out_cos"}, "average cosine",
              "(a) cosine similarity")
    _versus_n(res, axes[1], {"input E‖x + b‖": "in_norm", "output E‖T(x + b)‖": "out_norm",
                             "input ‖E(x + b)‖": "in_mean_norm", "output ‖E T(x + b)‖": "out_mean_norm"},
              "norm", "(b) average norm and norm of the mean", logy=True)
    fig.suptitle(f"Untrained BERT block, {res.n_seq}×{res.seq_len} tokens, "
                 f"{common.seeds_text(len(res.seeds))}" + (" (band: min–max)" if len(res.seeds) > 1 else ""))
    return fig


def fig7(res: Result, max_seeds: int = 3) -> plt.Figure:
    """Figure 7: histograms of the pre-softmax scores at each `hist_norms` N (first seeds)."""
    n = len(res.hist_norms)
    fig, axes = plt.subplots(1, n, figsize=(max(8, 2.0 * n), 3.4), squeeze=False)
    for j, (ax, hn) in enumerate(zip(axes[0], res.hist_norms, strict=True)):
        for s, seed in enumerate(res.seeds[:max_seeds]):
            h = res.hists[s][j]
            ax.stairs(h.density, h.edges, label=f"seed {seed}")
        ax.set_title(f"N = {hn:g}")
        ax.set_xlabel(r"$QK^\top/\sqrt{d_k}$")
    axes[0][0].set_ylabel("density")
    axes[0][0].legend(fontsize=8)
    fig.suptitle("Pre-softmax attention scores as the input bias norm grows")
    return fig


def fig8(res: Result) -> plt.Figure:
    """Figure 8: cosine and norm of the queries and keys (heads concatenated) against N, for inputs
    drawn from E and (cosine) for inputs through BERT's embedding layer."""
    fig, axes = plt.subplots(1, 2, figsize=(8, 3.8))
    n = common.seeds_text(res.seeds_of())
    curves: dict[str, str | tuple[str, str]] = {f"Q (rows of E, {n})": "q_cos", f"K (rows of E, {n})": "k_cos"}
    if "embedding-layer" in res.variant_stats:
        ne = common.seeds_text(res.seeds_of("embedding-layer"))
        curves |= {f"Q (embedding layer, {ne})": ("q_cos", "embedding-layer"),
                   f"K (embedding layer, {ne})": ("k_cos", "embedding-layer")}
    _versus_n(res, axes[0], curves, "average cosine", "(a) cosine similarity of Q and K")
    _versus_n(res, axes[1], {"Q": "q_norm", "K": "k_norm"}, "average norm", "(b) norm of Q and K", logy=True)
    fig.suptitle("Queries and keys (heads concatenated)")
    return fig


def fig9_10(res: Result) -> plt.Figure:
    """Figures 9 and 10: softmax row max / median / min and the sequence max and min against N;
    the dotted line is the uniform attention 1/L."""
    fig, axes = plt.subplots(1, 3, figsize=(8.2, 3.6))
    _versus_n(res, axes[0], {"row max": "row_max", "row median": "row_median", "row min": "row_min"},
              "softmax value", "(a) per-row max / median / min", logy=True)
    _versus_n(res, axes[1], {"sequence max": "seq_max"}, "softmax value", "(b) maximum over a sequence",
              logy=True)
    _versus_n(res, axes[2], {"sequence min": "seq_min"}, "softmax value", "(c) minimum over a sequence",
              logy=True)
    for ax in axes:
        ax.axhline(1 / res.seq_len, color="k", lw=0.7, ls=":")
    fig.suptitle("The softmax as the drift grows (dotted: uniform attention 1/L)")
    return fig


def sharpness(res: Result) -> plt.Figure:
    """Attention sharpness against the *input* cosine (a: row maximum × L, b: normalised entropy), one
    curve per input variant, with the reference model's range of layer-wise average cosine shaded;
    and (c) the spread of the scores against N: all scores pooled (Figure 7) and within rows (what
    the softmax sees)."""
    fig, axes = plt.subplots(2, 2, figsize=(8, 7.6))
    axes[1, 1].axis("off")            # (c) has the second row to itself, its legend beside it
    axes = [axes[0, 0], axes[0, 1], axes[1, 0], axes[1, 1]]
    cos_ref = res.reference.layer_cos
    for v in res.variants():
        x = 1 - res.seed_mean("in_cos", v)
        axes[0].plot(x, res.seed_mean("row_max", v) * res.seq_len, marker="o", ms=3, label=VARIANT_LABELS[v])
        axes[1].plot(x, res.seed_mean("entropy_norm", v), marker="o", ms=3, label=VARIANT_LABELS[v])
    for ax in axes[:2]:
        ax.set_xscale("log")
        ax.invert_xaxis()
        ax.set_xlabel("1 − average cosine of the input x + b")
        if cos_ref:
            ax.axvspan(1 - max(cos_ref), 1 - min(cos_ref), color="0.85", zorder=0,
                       label=f"{res.reference.model} layers")
    axes[0].legend(fontsize=8, loc="center right")
    axes[1].legend(fontsize=8, loc="lower left")
    axes[0].set_yscale("log")
    axes[0].axhline(1, color="k", lw=0.7, ls=":")
    axes[0].set_ylabel("mean row maximum × L (1 = uniform)")
    axes[0].set_title("(a) row maximum against\ninput alignment")
    axes[1].set_ylabel("mean row entropy / log L")
    axes[1].set_title("(b) entropy against\ninput alignment")
    curves: dict[str, str | tuple[str, str]] = {"all scores, rows of E": "score_std",
                                                "within rows, rows of E": "score_row_sd"}
    for v in res.variant_stats:
        curves |= {f"all scores, {VARIANT_LABELS[v]}": ("score_std", v),
                   f"within rows, {VARIANT_LABELS[v]}": ("score_row_sd", v)}
    _versus_n(res, axes[2], curves, r"sd of $QK^\top/\sqrt{d_k}$", "(c) score spread: pooled vs within rows", logy=True)
    handles, labels = axes[2].get_legend_handles_labels()
    if axes[2].get_legend() is not None:
        axes[2].get_legend().remove()
    axes[3].legend(handles, labels, loc="center left", fontsize=8, frameon=False)
    fig.suptitle(f"Sharpness of the softmax and what of the score spread it sees\n({seed_note(res)})")
    fig.tight_layout()
    return fig


def variants_table(res: Result):
    """The two input variants at N = 0 and at the largest N: a column each, a row per quantity (eight quantities
    side by side would not fit the page)."""
    cols = {}
    for v in res.variants():
        for j in (0, len(res.norms) - 1):
            cols[f"{VARIANT_LABELS[v]}, N = {res.norms[j]:g}"] = {
                q: float(res.seed_mean(name, v)[j]) * (res.seq_len if name == "row_max" else 1)
                for q, name in (("input cos", "in_cos"), ("Q cos", "q_cos"), ("K cos", "k_cos"),
                                ("E‖x + b‖", "in_norm"), ("row max × L", "row_max"),
                                ("entropy / log L", "entropy_norm"))}
    df = pd.DataFrame(cols).rename_axis(columns="inputs, bias norm N")
    return common.table(df, digits=3, index=True).set_caption(
        f"Rows of E against BERT's embedding layer as inputs ({seed_note(res)})")


def reference_table(res: Result):
    """Mean norm and average cosine of the reference model's real-token hidden states per layer."""
    ref = res.reference
    df = pd.DataFrame({"layer": range(len(ref.layer_norms)), "mean ‖h‖ of real tokens": ref.layer_norms})
    if ref.layer_cos:
        df["average cosine of real tokens"] = ref.layer_cos
    return common.table(df.set_index("layer").T, digits=2, index=True).set_caption(
        f"Hidden-state norms per layer of {ref.model} on {ref.sentences} MRPC sentences")


def scores_table(res: Result, rows: int = 8):
    """Mean and sd of the pre-softmax scores over seeds, at about `rows` bias norms."""
    m = res.stat("score_mean")
    df = pd.DataFrame({"N": res.norms, "mean": res.seed_mean("score_mean"), "min over seeds": m.min(0),
                       "max over seeds": m.max(0), "sd": res.seed_mean("score_std"),
                       "sd within rows": res.seed_mean("score_row_sd"),
                       "row-constant share of variance": res.seed_mean("score_rowconst_frac")})
    return common.table(df.iloc[:: max(1, len(df) // rows)], digits=3, compact=True).set_caption(
        "Pre-softmax scores QKᵀ/√d_k against the bias norm N (mean and sd: averaged over seeds)")


def fixed_point_table(res: Result):
    """The norm fixed point N* beside the output norm, √d and the reference model's hidden-state norms."""
    lo, hi = res.fixed_point_range()
    ref = res.reference
    rows = [("N* (first seed, refined by Brent's method)", res.fixed_point_refined),
            (f"N* per seed, interpolated on the grid ({common.seeds_text(len(res.seeds))}): smallest", lo),
            ("N* per seed: largest", hi),
            ("output norm E‖T(x + b)‖, mean over every N and seed", res.mean_out_norm()),
            (f"√d of the untrained block (d = {res.hidden})", float(np.sqrt(res.hidden))),
            (f"{ref.model}: smallest mean ‖h‖ over layers", min(ref.layer_norms)),
            (f"{ref.model}: largest mean ‖h‖ over layers", max(ref.layer_norms)),
            (f"{ref.model}: √d (d = {ref.d})", float(np.sqrt(ref.d)))]
    df = pd.DataFrame(rows, columns=["quantity", "value"])
    return common.table(df, digits=2).set_caption("The norm fixed point and the norms it is compared with")


def softmax_table(res: Result):
    """Per input variant, where the attention leaves uniform (`Result.softmax_rows`)."""
    cols = {"seeds": "seeds", "in_norm_0": "E‖x‖ at N = 0", "row_max_l_0": "row max × L at N = 0",
            "uniform_n": "uniform up to N", "uniform_cos": "input cos there", "onset_n": "row max doubles at N",
            "onset_1mcos": "1 − input cos there", "row_max_l_last": f"row max × L at N = {max(res.norms):g}",
            "entropy_last": f"entropy / log L at N = {max(res.norms):g}"}
    df = pd.DataFrame(res.softmax_rows())
    df.index = df.pop("variant").map(VARIANT_LABELS)
    # a column per input variant, a row per quantity (nine quantities side by side would not fit the page); as
    # objects, so that the seed counts stay integers
    df = df[list(cols)].rename(columns=cols).astype(object).T.rename_axis(columns="inputs")
    return common.table(df, digits=3, index=True).set_caption(
        f"Where the attention leaves uniform (mean over seeds; uniform: row max below {res.uniform_tol:g}/L)")


def publish(res: Result) -> None:
    """Glue the chapter's figures and the numbers its prose quotes (one literal dict of full keys)."""
    common.set_theme()
    common.figure("drift-fig6", fig6(res))
    common.figure("drift-fig7", fig7(res))
    common.figure("drift-fig8", fig8(res))
    common.figure("drift-fig9-10", fig9_10(res))
    common.figure("drift-sharpness", sharpness(res))
    table_row, *emb_rows = res.softmax_rows()
    emb = emb_rows[0] if emb_rows else {k: float("nan") for k in table_row}
    last = res.stat("score_mean")[:, -1]
    k = res.index_of(1000.0)
    cos_ref = res.reference.layer_cos or [float("nan")]
    common.publish({
        "drift-n-star": res.fixed_point_refined if res.fixed_point_refined is not None else float("nan"),
        "drift-sqrt-d": float(np.sqrt(res.hidden)),
        "drift-seeds": len(res.seeds), "drift-n-seq": res.n_seq, "drift-seq-len": res.seq_len,
        "drift-q-norm-growth": res.qk_norm_growth().text(2),
        "drift-cosine-gain": res.cosine_gain().text(6),
        "drift-q-cos0": res.qk_cos_at_zero().text(5),
        "drift-variant-seeds": min((res.seeds_of(v) for v in res.variant_stats), default=0),
        "drift-ref-description": res.reference.description,
        "drift-n-last": res.norms[-1],
        "drift-pos-last": int((last > 0).sum()),
        "drift-neg-last": int((last < 0).sum()),
        "drift-n-k": res.norms[k],
        "drift-score-sd-k": float(res.seed_mean("score_std")[k]),
        "drift-score-row-sd-k": float(res.seed_mean("score_row_sd")[k]),
        "drift-rowconst-k": float(res.seed_mean("score_rowconst_frac")[k]),
        "drift-emb-cos0": float(res.seed_mean("in_cos", "embedding-layer")[0])
        if "embedding-layer" in res.variant_stats else float("nan"),
        "drift-tab-onset-1mcos": table_row["onset_1mcos"],
        "drift-emb-onset-cos": emb["onset_cos"],
        "drift-ref-cos-max": float(max(cos_ref)),
    })
