"""Figures, tables and published numbers of the anisotropy chapter (Godey et al. Figures 1-5 and
16-18)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from ..core.anisotropy import isotropic_cosine_pdf, isotropic_cosine_quantile
from ..experiments.anisotropy import Result
from . import common

MARKERS = {"text": "o", "vision": "s", "audio": "^"}


def _colors(res: Result) -> list:
    return sns.color_palette("colorblind", len(res.models))


def fig_layers(res: Result) -> plt.Figure:
    """Figures 1-3: average cosine (all pairs) and drift norm ‖x̄‖₂ per layer against relative depth;
    solid lines pretrained, dotted their untrained twins."""
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.4))
    for m, c in zip(res.models, _colors(res), strict=True):
        depth = np.linspace(0, 1, len(m["cos_exact"]))
        ls = "-" if m["trained"] else ":"
        axes[0].plot(depth, m["cos_exact"], ls, color=c, marker="o", ms=3, label=m["label"])
        axes[1].plot(depth, m["mean_norm"], ls, color=c, marker="o", ms=3, label=m["label"])
    axes[0].set_ylabel("average cosine similarity")
    axes[1].set_ylabel("‖x̄‖₂ (drift norm)")
    axes[1].set_yscale("log")
    for ax in axes:
        ax.set_xlabel("relative depth (0 = embeddings, 1 = last layer)")
    axes[0].legend(fontsize=7)
    fig.suptitle("Anisotropy and drift per layer — solid: pretrained, dotted: untrained twin")
    return fig


def fig_correlation(res: Result) -> plt.Figure:
    """Figures 5 and 16: p-values of the Spearman and Pearson tests between ‖x̄‖₂ and the average
    cosine across layers, per model; red bars are not significant at 0.05."""
    labels = [m["label"] for m in res.models]
    fig, axes = plt.subplots(1, 2, figsize=(11, 2.6 + 0.3 * len(labels)), sharey=True)
    for ax, test in zip(axes, ("spearman", "pearson"), strict=True):
        pv = [m["correlation"][f"{test}_p"] for m in res.models]
        ax.barh(labels, pv, color=["C0" if v < 0.05 else "C3" for v in pv])
        ax.axvline(0.05, color="r", ls="--", lw=1)
        ax.set_xscale("log")
        ax.set_xlabel(f"{test.title()} p-value")
    fig.suptitle("Figures 5 and 16 — ‖x̄‖₂ vs average cosine across layers; right of the dashed line: p > 0.05")
    return fig


def fig_gaussian(res: Result) -> plt.Figure:
    """Figure 17: density of the cosine of isotropic Gaussians (exact lines, Monte Carlo steps);
    Figure 18: the measured layer averages against the isotropic 95th percentile of their width."""
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.4))
    c = np.linspace(-1, 1, 801)
    for i, g in enumerate(res.gaussian):
        axes[0].plot(c, isotropic_cosine_pdf(c, g["d"]), color=f"C{i}", label=f"d = {g['d']}")
        axes[0].stairs(g["hist_density"], g["hist_edges"], color=f"C{i}", alpha=0.5)
    axes[0].set_xlabel("cosine similarity")
    axes[0].set_ylabel("density")
    axes[0].set_yscale("log")
    axes[0].set_ylim(1e-3, 80)
    axes[0].legend(fontsize=8)
    axes[0].set_title("Figure 17 — density (lines exact, steps Monte Carlo)")
    ds = np.unique(np.geomspace(4, 8192, 60).astype(int))
    axes[1].plot(ds, [isotropic_cosine_quantile(0.95, d) for d in ds], "k-", label="95th percentile, isotropic")
    for m, col in zip(res.models, _colors(res), strict=True):
        axes[1].scatter(m["dims"], m["cos_exact"], marker=MARKERS[m["modality"]], s=14,
                        facecolors=col if m["trained"] else "none", edgecolors=col, label=m["label"])
    axes[1].set_xscale("log")
    axes[1].set_yscale("symlog", linthresh=1e-2)
    axes[1].set_xlabel("dimension d")
    axes[1].set_ylabel("cosine similarity")
    axes[1].legend(fontsize=7)
    axes[1].set_title("Figure 18 — layer averages vs isotropic 95th percentile")
    return fig


def models_table(res: Result):
    """What was measured: model, modality, vectors, layers and what the model really is."""
    df = pd.DataFrame([{"model": m["label"], "modality": m["modality"], "tokens / vectors": m["tokens"],
                        "layers": len(m["cos_exact"]) - 1, "what it is": m["description"]} for m in res.models])
    return common.table(df).set_caption("Models measured")


def layer_table(res: Result):
    """Average cosine (all pairs) per layer (rows) and model (columns)."""
    df = pd.DataFrame({m["label"]: pd.Series(m["cos_exact"]) for m in res.models})
    df.index.name = "layer"
    return common.table(df, index=True).set_caption("Average cosine similarity over all pairs, per layer")


def summary_table(res: Result):
    """Per model: the average cosine at the embeddings, its peak and the layer of the peak, at the
    last layer, and how many layers lie above the isotropic 95th percentile of their width."""
    above = res.above_isotropic()
    rows = []
    for m in res.models:
        cos = np.asarray(m["cos_exact"])
        a, n = above[m["label"]]
        rows.append({"model": m["label"], "embeddings": cos[0], "peak": cos.max(), "peak layer": int(cos.argmax()),
                     "last layer": cos[-1], "layers above isotropic 95th pct": f"{a} of {n}"})
    return common.table(pd.DataFrame(rows)).set_caption("Average cosine: embeddings, peak, last layer")


def correlation_table(res: Result):
    """Spearman and Pearson statistics and p-values per model."""
    df = pd.DataFrame([{"model": m["label"], **m["correlation"]} for m in res.models])
    return common.table(df, digits=4).set_caption("Drift norm ‖x̄‖₂ vs average cosine across layers")


def gaussian_table(res: Result):
    """Monte Carlo mean and 95th percentile of the isotropic cosine against the exact percentile and 1.645/√d."""
    df = pd.DataFrame([{"d": g["d"], "mean (MC)": g["mc_mean"], "95th pct (MC)": g["mc_q95"],
                        "95th pct (exact)": g["exact_q95"], "1.645/√d": g["asymptotic_q95"]} for g in res.gaussian])
    return common.table(df, digits=4).set_caption("Cosine of isotropic Gaussians: Monte Carlo against the exact law")


def numbers(res: Result) -> dict[str, object]:
    """Every number the chapter's prose quotes."""
    z = res.sampling_z()
    sig = [m["label"] for m in res.models if m["correlation"]["spearman_p"] < 0.05]
    points = [len(m["cos_exact"]) for m in res.models]
    return {"z-median": float(np.median(z)), "z-max": float(z.max()), "z-layers": int(z.size),
            "n-models": len(res.models), "n-significant": len(sig), "significant": ", ".join(sig) or "none",
            "min-points": min(points), "max-points": max(points)}


def publish(res: Result) -> None:
    """Glue the chapter's figures (`anisotropy-layers`, `-correlation`, `-gaussian`) and numbers."""
    common.set_theme()
    for name, make in (("layers", fig_layers), ("correlation", fig_correlation), ("gaussian", fig_gaussian)):
        common.figure(f"anisotropy-{name}", make(res))
    common.publish("anisotropy", numbers(res))
