"""Figures, tables and published numbers of the drift chapter (Godey et al. Figures 6-10)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from IPython.display import Markdown

from ..experiments.drift import Result
from . import common

VARIANT_LABELS = {"table": "rows of E", "embedding-layer": "BERT embedding layer"}


def _seeds(res: Result, v: str = "table") -> int:
    """How many seeds the inputs of variant `v` were run on."""
    return len(res.seeds) if v == "table" else len(res.variant_stats[v]["row_max"])


def _over(res: Result, v: str = "table") -> str:
    """'mean over 3 seeds' / 'one seed'."""
    n = _seeds(res, v)
    return f"mean over {common.seeds_text(n)}" if n > 1 else "one seed"


def seed_note(res: Result) -> str:
    """What each input variant's numbers are taken over: 'rows of E: mean over 3 seeds; BERT embedding
    layer: one seed' (one clause when every variant ran on the same seeds)."""
    counts = {v: _seeds(res, v) for v in _variants(res)}
    if len(set(counts.values())) == 1:
        return _over(res)
    return "; ".join(f"{VARIANT_LABELS[v]}: {_over(res, v)}" for v in counts)


def variant_seeds_clause(res: Result) -> str:
    """The chapter's parenthesis on the seeds of the embedding-layer inputs."""
    n, total = min((_seeds(res, v) for v in res.variant_stats), default=0), len(res.seeds)
    if not res.variant_stats:
        return "(not run at this scale)"
    if n >= total:
        return f"(on the same {common.seeds_text(total)})"
    first = "the first" if n == 1 else f"the first {n}"
    return f"(on {first} of the {common.seeds_text(total)} only, to keep the cold run short)"


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
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    _versus_n(res, axes[0], {"input x + b": "in_cos", "output T(x + b)": "out_cos"}, "average cosine",
              "(a) cosine similarity")
    _versus_n(res, axes[1], {"input E‖x + b‖": "in_norm", "output E‖T(x + b)‖": "out_norm",
                             "input ‖E(x + b)‖": "in_mean_norm", "output ‖E T(x + b)‖": "out_mean_norm"},
              "norm", "(b) average norm and norm of the mean", logy=True)
    fig.suptitle(f"Figure 6 — untrained BERT block, {res.n_seq}×{res.seq_len} tokens, "
                 f"{common.seeds_text(len(res.seeds))}" + (" (band: min–max)" if len(res.seeds) > 1 else ""))
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
    """Figure 8: cosine and norm of the queries and keys (heads concatenated) against N, for inputs
    drawn from E and (cosine) for inputs through BERT's embedding layer."""
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    n = common.seeds_text(_seeds(res))
    curves: dict[str, str | tuple[str, str]] = {f"Q (rows of E, {n})": "q_cos", f"K (rows of E, {n})": "k_cos"}
    if "embedding-layer" in res.variant_stats:
        ne = common.seeds_text(_seeds(res, "embedding-layer"))
        curves |= {f"Q (embedding layer, {ne})": ("q_cos", "embedding-layer"),
                   f"K (embedding layer, {ne})": ("k_cos", "embedding-layer")}
    _versus_n(res, axes[0], curves, "average cosine", "(a) cosine similarity of Q and K")
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


def _variants(res: Result) -> list[str]:
    return ["table", *res.variant_stats]


def sharpness(res: Result) -> plt.Figure:
    """Attention sharpness against the *input* cosine (a: row maximum × L, b: normalised entropy), one
    curve per input variant, with the reference model's range of layer-wise average cosine shaded;
    and (c) the spread of the scores against N: all scores pooled (Figure 7) and within rows (what
    the softmax sees)."""
    fig, axes = plt.subplots(1, 3, figsize=(14, 4))
    cos_ref = res.reference.get("layer_cos", [])
    for v in _variants(res):
        x = 1 - res.stat("in_cos", v).mean(0)
        axes[0].plot(x, res.stat("row_max", v).mean(0) * res.seq_len, marker="o", ms=3, label=VARIANT_LABELS[v])
        axes[1].plot(x, res.stat("entropy_norm", v).mean(0), marker="o", ms=3, label=VARIANT_LABELS[v])
    for ax in axes[:2]:
        ax.set_xscale("log")
        ax.invert_xaxis()
        ax.set_xlabel("1 − average cosine of the input x + b")
        if cos_ref:
            ax.axvspan(1 - max(cos_ref), 1 - min(cos_ref), color="0.85", zorder=0,
                       label=f"{res.reference['model']} layers")
        ax.legend(fontsize=8)
    axes[0].set_yscale("log")
    axes[0].axhline(1, color="k", lw=0.7, ls=":")
    axes[0].set_ylabel("mean row maximum × L (1 = uniform)")
    axes[0].set_title("(a) row maximum against input alignment")
    axes[1].set_ylabel("mean row entropy / log L")
    axes[1].set_title("(b) entropy against input alignment")
    curves: dict[str, str | tuple[str, str]] = {"all scores, rows of E": "score_std",
                                                "within rows, rows of E": "score_row_sd"}
    for v in res.variant_stats:
        curves |= {f"all scores, {VARIANT_LABELS[v]}": ("score_std", v),
                   f"within rows, {VARIANT_LABELS[v]}": ("score_row_sd", v)}
    _versus_n(res, axes[2], curves, "sd of QKᵀ/√d_k", "(c) score spread: pooled vs within rows", logy=True)
    fig.suptitle(f"Sharpness of the softmax and what of the score spread it sees ({seed_note(res)})")
    fig.tight_layout()
    return fig


def variants_table(res: Result):
    """The two input variants at N = 0 and at the largest N."""
    rows = []
    for v in _variants(res):
        for j in (0, len(res.norms) - 1):
            rows.append({"inputs": VARIANT_LABELS[v], "N": res.norms[j],
                         **{col: float(res.stat(name, v)[:, j].mean()) for col, name in (
                             ("input cos", "in_cos"), ("Q cos", "q_cos"), ("K cos", "k_cos"),
                             ("E‖x + b‖", "in_norm"), ("row max × L", "row_max"),
                             ("entropy / log L", "entropy_norm"))}})
    df = pd.DataFrame(rows)
    df["row max × L"] *= res.seq_len
    return common.table(df, digits=3).set_caption(
        f"Rows of E against BERT's embedding layer as inputs ({seed_note(res)})")


def reference_table(res: Result):
    """Mean norm of the reference model's real-token hidden states per layer, beside √d."""
    ref = res.reference
    df = pd.DataFrame({"layer": range(len(ref["layer_norms"])), "mean ‖h‖ of real tokens": ref["layer_norms"],
                       "√d of that model": np.sqrt(ref["d"])})
    if "layer_cos" in ref:
        df["average cosine of real tokens"] = ref["layer_cos"]
    return common.table(df.set_index("layer").T, digits=2, index=True).set_caption(
        f"Hidden-state norms per layer of {ref['model']} on {ref['sentences']} MRPC sentences")


def scores_table(res: Result, rows: int = 8):
    """Mean and sd of the pre-softmax scores over seeds, at about `rows` bias norms."""
    m, sd = res.stat("score_mean"), res.stat("score_std")
    df = pd.DataFrame({"N": res.norms, "score mean (seed-avg)": m.mean(0), "min over seeds": m.min(0),
                       "max over seeds": m.max(0), "score sd (seed-avg)": sd.mean(0),
                       "within-row sd": res.stat("score_row_sd").mean(0),
                       "row-constant share of variance": res.stat("score_rowconst_frac").mean(0)})
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
        **_sharpness_numbers(res),
    }


def _onset(res: Result, v: str) -> int | None:
    """First bias norm index where the mean row maximum is twice its value without bias."""
    rm = res.stat("row_max", v).mean(0)
    idx = np.nonzero(rm > 2 * rm[0])[0]
    return int(idx[0]) if idx.size else None


def _sharpness_numbers(res: Result) -> dict[str, object]:
    out: dict[str, object] = {}
    u = res.last_uniform()
    in_cos = res.stat("in_cos").mean(0)
    out["uniform-tol"] = res.uniform_tol
    out["variant-seeds"] = min((len(v["row_max"]) for v in res.variant_stats.values()), default=0)
    out["variant-seeds-clause"] = Markdown(variant_seeds_clause(res))
    out["n-uniform"] = res.norms[u] if u >= 0 else float("nan")
    out["cos-uniform"] = float(in_cos[u]) if u >= 0 else float("nan")
    out["one-minus-cos-uniform"] = float(1 - in_cos[u]) if u >= 0 else float("nan")
    j = len(res.norms) - 1
    k = int(np.argmin(np.abs(np.asarray(res.norms) - 1000.0)))
    out["n-k"] = res.norms[k]
    out["rowconst-k"] = float(res.stat("score_rowconst_frac")[:, k].mean())
    out["score-sd-k"] = float(res.stat("score_std")[:, k].mean())
    out["score-row-sd-k"] = float(res.stat("score_row_sd")[:, k].mean())
    out["entropy-big"] = float(res.stat("entropy_norm")[:, j].mean())
    for v, tag in (("table", "tab"), ("embedding-layer", "emb")):
        if v != "table" and v not in res.variant_stats:
            continue
        o = _onset(res, v)
        cos = res.stat("in_cos", v).mean(0)
        out[f"{tag}-onset-n"] = res.norms[o] if o is not None else float("nan")
        out[f"{tag}-onset-cos"] = float(cos[o]) if o is not None else float("nan")
        out[f"{tag}-onset-1mcos"] = float(1 - cos[o]) if o is not None else float("nan")
        out[f"{tag}-cos0"] = float(cos[0])
        out[f"{tag}-qcos0"] = float(res.stat("q_cos", v)[:, 0].mean())
        out[f"{tag}-kcos0"] = float(res.stat("k_cos", v)[:, 0].mean())
        out[f"{tag}-rowmax0-l"] = float(res.stat("row_max", v)[:, 0].mean() * res.seq_len)
        out[f"{tag}-entropy0"] = float(res.stat("entropy_norm", v)[:, 0].mean())
        out[f"{tag}-in-norm0"] = float(res.stat("in_norm", v)[:, 0].mean())
    cos_ref = res.reference.get("layer_cos")
    if cos_ref:
        out["ref-cos-min"], out["ref-cos-max"] = float(min(cos_ref)), float(max(cos_ref))
    return out


def publish(res: Result) -> None:
    """Glue the chapter's figures (`drift-fig6`, `-fig7`, `-fig8`, `-fig9-10`, `-sharpness`) and numbers."""
    common.set_theme()
    for name, make in (("fig6", fig6), ("fig7", fig7), ("fig8", fig8), ("fig9-10", fig9_10),
                       ("sharpness", sharpness)):
        common.figure(f"drift-{name}", make(res))
    common.publish("drift", numbers(res))
