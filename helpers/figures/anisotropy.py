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

MARKERS = {"text": "o", "bytes": "D", "protein": "P", "chem": "X", "audio": "^", "vision": "s"}
#: p-values below this are drawn at it (scipy's t-approximation gives 0 or 1e-300 for perfect ranks)
FLOOR = 1e-16
MODALITY_NAMES = {"text": "text (subword tokens)", "bytes": "text (bytes)", "protein": "protein (residues)",
                  "chem": "chemistry (SMILES atoms)", "audio": "speech", "vision": "vision"}


def _colors(res: Result) -> list:
    return sns.color_palette("colorblind", len(res.models))


def _pretrained(res: Result) -> list[dict]:
    return [m for m in res.models if m["trained"]]


def _twin(res: Result, m: dict) -> dict | None:
    return next((t for t in res.models if t["name"] == m["name"] and not t["trained"]), None)


def fig_layers(res: Result) -> plt.Figure:
    """Figures 1-4, one panel per model: the average cosine over all pairs per layer (solid), its
    untrained twin (dotted), and the cosine after removing the mean vector (dashed, Biś et al. 2021);
    for the CNN also the cosine of whole flattened maps (Godey et al.'s reading of Fig. 4)."""
    models = _pretrained(res)
    cols = min(4, len(models))
    rows = -(-len(models) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.3 * cols, 2.9 * rows), squeeze=False, sharey=True)
    for ax, m in zip(axes.flat, models, strict=False):
        x = np.arange(len(m["cos_exact"]))
        ax.plot(x, m["cos_exact"], "-o", ms=3, color="C0", label="average cosine")
        ax.plot(x, m["cos_centred"], "--", color="C2", label="mean removed")
        if "map_cos_exact" in m:
            ax.plot(x, m["map_cos_exact"], "-.", color="C4", label="whole maps flattened")
        t = _twin(res, m)
        if t is not None:
            ax.plot(np.arange(len(t["cos_exact"])), t["cos_exact"], ":", color="C1", label="untrained twin")
        ax.axhline(0, color="0.6", lw=0.6)
        ax.set_title(f"{m['name']}\n{MODALITY_NAMES.get(m['modality'], m['modality'])}", fontsize=9)
        ax.set_xlabel("layer (0 = embeddings)", fontsize=8)
    for ax in axes.flat[len(models):]:
        ax.axis("off")
    for ax in axes[:, 0]:
        ax.set_ylabel("cosine similarity")
    handles = {h.get_label(): h for ax in axes.flat for h in ax.get_lines() if not h.get_label().startswith("_")}
    fig.legend(handles.values(), handles.keys(), loc="lower center", ncol=4, fontsize=8, bbox_to_anchor=(0.5, -0.02))
    fig.suptitle("Anisotropy per layer across models and modalities")
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    return fig


def fig_drift(res: Result) -> plt.Figure:
    """Why the drift test is nearly circular: left, every layer of every model, the average cosine
    against (‖x̄‖₂ / E‖x‖)² with the identity line; right, the Spearman p-values of ‖x̄‖₂ (Godey et
    al. Fig. 5) and of the normalised drift ‖x̄‖₂ / E‖x‖ against the average cosine."""
    fig, axes = plt.subplots(1, 2, figsize=(11, 2.8 + 0.25 * len(res.models)))
    for m, c in zip(res.models, _colors(res), strict=True):
        r2 = np.square(m["drift_ratio"])
        axes[0].scatter(r2, m["cos_exact"], s=12, marker=MARKERS.get(m["modality"], "o"),
                        facecolors=c if m["trained"] else "none", edgecolors=c, label=m["label"])
    axes[0].plot([0, 1], [0, 1], "k-", lw=0.8)
    axes[0].set_xlabel("(‖x̄‖₂ / E‖x‖)²")
    axes[0].set_ylabel("average cosine similarity")
    axes[0].set_title("avg cos ≈ (normalised drift)²", fontsize=10)
    axes[0].legend(fontsize=6, loc="upper left")
    labels = [m["label"] for m in res.models]
    y = np.arange(len(labels))
    raw = [max(m["correlation"]["spearman_p"], FLOOR) for m in res.models]
    norm = [max(m["normalised"]["normalised_spearman_p"], FLOOR) for m in res.models]
    axes[1].barh(y - 0.2, raw, height=0.4, color="C3", label="‖x̄‖₂ (the paper's test)")
    axes[1].barh(y + 0.2, norm, height=0.4, color="C0", label="‖x̄‖₂ / E‖x‖ (normalised)")
    axes[1].set_yticks(y, labels, fontsize=7)
    axes[1].axvline(0.05, color="r", ls="--", lw=1)
    axes[1].set_xscale("log")
    axes[1].set_xlim(FLOOR / 10, 2)
    axes[1].set_xlabel(f"Spearman p-value across layers (below {FLOOR:.0e} drawn at it)")
    axes[1].legend(fontsize=7)
    axes[1].invert_yaxis()
    fig.tight_layout()
    return fig


def fig_correlation(res: Result) -> plt.Figure:
    """Figures 5 and 16: p-values of the Spearman and Pearson tests between ‖x̄‖₂ and the average
    cosine across layers, per model; red bars are not significant at 0.05."""
    labels = [m["label"] for m in res.models]
    fig, axes = plt.subplots(1, 2, figsize=(11, 2.6 + 0.3 * len(labels)), sharey=True)
    for ax, test in zip(axes, ("spearman", "pearson"), strict=True):
        pv = [max(m["correlation"][f"{test}_p"], FLOOR) for m in res.models]
        ax.barh(labels, pv, color=["C0" if v < 0.05 else "C3" for v in pv])
        ax.axvline(0.05, color="r", ls="--", lw=1)
        ax.set_xscale("log")
        ax.set_xlabel(f"{test.title()} p-value")
    axes[0].invert_yaxis()
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
        axes[1].scatter(m["dims"], m["cos_exact"], marker=MARKERS.get(m["modality"], "o"), s=14,
                        facecolors=col if m["trained"] else "none", edgecolors=col, label=m["label"])
    axes[1].set_xscale("log")
    axes[1].set_yscale("symlog", linthresh=1e-2)
    axes[1].set_xlabel("dimension d")
    axes[1].set_ylabel("cosine similarity")
    axes[1].legend(fontsize=7)
    axes[1].set_title("Figure 18 — layer averages vs isotropic 95th percentile")
    return fig


def models_table(res: Result):
    """What was measured, one row per model (its untrained twin, same configuration and data, is
    measured beside it where the last column says so): modality, data, layers, what the model is."""
    names = {m["name"] for m in res.models if not m["trained"]}
    df = pd.DataFrame([{"model": m["name"], "modality": MODALITY_NAMES.get(m["modality"], m["modality"]),
                        "measured on": m["data"], "layers": len(m["cos_exact"]) - 1, "what it is": m["description"],
                        "untrained twin": "yes" if m["name"] in names else "no"}
                       for m in res.models if m["trained"]])
    return common.table(df).set_caption("Models measured")


def layer_table(res: Result):
    """Average cosine (all pairs) per layer (rows) and model (columns)."""
    df = pd.DataFrame({m["label"]: pd.Series(m["cos_exact"]) for m in res.models})
    df.index.name = "layer"
    return common.table(df, index=True).set_caption("Average cosine similarity over all pairs, per layer")


def summary_table(res: Result):
    """Per model: the average cosine at the embeddings, its peak and the layer of the peak, at the
    last layer, the largest mean-removed cosine, and how many layers lie above the isotropic 95th
    percentile of their width."""
    above = res.above_isotropic()
    rows = []
    for m in res.models:
        cos = np.asarray(m["cos_exact"])
        a, n = above[m["label"]]
        t = _twin(res, m) if m["trained"] else None
        above_twin = f"{int(np.sum(cos > np.asarray(t['cos_exact'])))} of {n}" if t else ""
        rows.append({"model": m["label"], "embeddings": cos[0], "peak": cos.max(), "peak layer": int(cos.argmax()),
                     "last layer": cos[-1], "max |mean-removed|": float(np.abs(m["cos_centred"]).max()),
                     "layers above isotropic 95th pct": f"{a} of {n}", "layers above its twin": above_twin})
    return common.table(pd.DataFrame(rows)).set_caption(
        "Average cosine: embeddings, peak, last layer; and the largest cosine left once the mean is removed")


def correlation_table(res: Result):
    """Per model: the paper's tests (‖x̄‖₂ vs average cosine), the Spearman test of the normalised drift,
    and how many layers satisfy avg cos ≈ (‖x̄‖₂ / E‖x‖)² within 0.02."""
    rows = [{"model": m["label"], "Spearman ρ (‖x̄‖)": m["correlation"]["spearman_r"],
             "p (‖x̄‖)": m["correlation"]["spearman_p"], "Pearson p (‖x̄‖)": m["correlation"]["pearson_p"],
             "Spearman ρ (‖x̄‖/E‖x‖)": m["normalised"]["normalised_spearman_r"],
             "p (‖x̄‖/E‖x‖)": m["normalised"]["normalised_spearman_p"],
             "layers with |cos − r²| < 0.02":
                 f"{m['normalised']['identity_layers_within']} of {m['normalised']['layers']}"}
            for m in res.models]
    return common.table(pd.DataFrame(rows), digits=3).set_caption(
        "Drift vs average cosine across layers: the paper's test and the normalised drift r = ‖x̄‖₂ / E‖x‖")


def byte_mlm_table(res: Result):
    """The byte-level MLM's held-out masked-byte loss per checkpoint step against the unigram baseline."""
    b = res.byte_mlm
    if not b:
        return common.table(pd.DataFrame([{"note": "the byte-level MLM is not among this run's models"}]))
    df = pd.DataFrame([{"step": int(k), "held-out MLM loss (nats/byte)": v, "unigram baseline": b["unigram_loss"]}
                       for k, v in sorted(b["eval_loss"].items(), key=lambda kv: int(kv[0]))])
    return common.table(df).set_caption("Byte-level MLM trained here: held-out loss (WikiText-103 test bytes)")


def gaussian_table(res: Result):
    """Monte Carlo mean and 95th percentile of the isotropic cosine against the exact percentile and 1.645/√d."""
    df = pd.DataFrame([{"d": g["d"], "mean (MC)": g["mc_mean"], "95th pct (MC)": g["mc_q95"],
                        "95th pct (exact)": g["exact_q95"], "1.645/√d": g["asymptotic_q95"]} for g in res.gaussian])
    return common.table(df, digits=4).set_caption("Cosine of isotropic Gaussians: Monte Carlo against the exact law")


def _peak_ratio(m: dict) -> float:
    """The largest ratio, over layers, of the average cosine to the isotropic 95th percentile of the width."""
    return max(c / isotropic_cosine_quantile(0.95, int(d)) for c, d in zip(m["cos_exact"], m["dims"], strict=True))


def _get(res: Result, name: str, trained: bool = True) -> dict | None:
    return next((m for m in res.models if m["name"] == name and m["trained"] == trained), None)


def numbers(res: Result) -> dict[str, object]:
    """Every number the chapter's prose quotes (NaN or "n/a" where this run did not measure the model)."""
    nan = float("nan")
    z = res.sampling_z()
    sig = [m["label"] for m in res.models if m["correlation"]["spearman_p"] < 0.05]
    sig_n = [m["label"] for m in res.models if m["normalised"]["normalised_spearman_p"] < 0.05]
    points = [len(m["cos_exact"]) for m in res.models]
    within = sum(m["normalised"]["identity_layers_within"] for m in res.models)
    layers = sum(m["normalised"]["layers"] for m in res.models)
    transformers = [m for m in res.models if m["trained"] and m["name"] != "EfficientNet-Lite0"]
    centred = max((float(np.abs(m["cos_centred"]).max()) for m in transformers), default=nan)
    out: dict[str, object] = {
        "z-median": float(np.median(z)), "z-max": float(z.max()), "z-layers": int(z.size),
        "n-models": len(res.models), "n-pretrained": len(_pretrained(res)), "n-significant": len(sig),
        "significant": ", ".join(sig) or "none", "n-significant-normalised": len(sig_n),
        "min-points": min(points), "max-points": max(points), "identity-within": within, "identity-layers": layers,
        "identity-gap-max": max(m["normalised"]["identity_gap_max"] for m in res.models),
        "centred-max": centred,
        "peak-ratio-min": min((_peak_ratio(m) for m in transformers), default=nan),
    }
    below, above = [], []
    for m in _pretrained(res):
        t = _twin(res, m)
        if t is not None:
            diff = np.subtract(m["cos_exact"], t["cos_exact"])
            (below if np.all(diff < 0) else above if np.all(diff[1:] > 0) else []).append(m["name"])
    out["below-twin-everywhere"] = ", ".join(below) or "none"
    out["above-twin"] = ", ".join(above) or "none"
    mini, twin = _get(res, "all-MiniLM-L6-v2"), _get(res, "all-MiniLM-L6-v2", False)
    out["minilm-below-twin"] = (int(np.sum(np.less(mini["cos_exact"], twin["cos_exact"]))) if mini and twin else 0)
    out["minilm-layers"] = len(mini["cos_exact"]) if mini else 0
    out["minilm-last"] = float(mini["cos_exact"][-1]) if mini else nan
    out["minilm-twin-emb"] = twin["cos_exact"][0] if twin else nan
    dino = _get(res, "DINOv2-S/14")
    out["dino-p-raw"] = dino["correlation"]["spearman_p"] if dino else nan
    out["dino-p-norm"] = dino["normalised"]["normalised_spearman_p"] if dino else nan
    cnn = _get(res, "EfficientNet-Lite0")
    out["cnn-p-raw"] = cnn["correlation"]["spearman_p"] if cnn else nan
    out["cnn-p-norm"] = cnn["normalised"]["normalised_spearman_p"] if cnn else nan
    out["cnn-pos-min"] = float(np.min(cnn["cos_exact"][1:-1])) if cnn else nan
    out["cnn-pos-max"] = float(np.max(cnn["cos_exact"][1:-1])) if cnn else nan
    out["cnn-map-min"] = float(np.min(cnn["map_cos_exact"][1:-1])) if cnn and "map_cos_exact" in cnn else nan
    out["cnn-map-max"] = float(np.max(cnn["map_cos_exact"][1:-1])) if cnn and "map_cos_exact" in cnn else nan
    for key, name in (("antiberty", "AntiBERTy"), ("rxn", "rxnmapper-ALBERT"), ("bytes", "byte-MLM"),
                      ("whisper", "whisper-tiny.en"), ("smollm", "SmolLM2-135M-Instruct")):
        m, t = _get(res, name), _get(res, name, False)
        out[f"{key}-peak"] = float(np.max(m["cos_exact"])) if m else nan
        out[f"{key}-last"] = float(m["cos_exact"][-1]) if m else nan
        out[f"{key}-twin-last"] = float(t["cos_exact"][-1]) if t else nan
    b = res.byte_mlm
    steps = sorted(b["eval_loss"], key=int) if b else []
    out["byte-steps"] = int(b["steps"]) if b else 0
    out["byte-loss"] = float(b["eval_loss"][steps[-1]]) if b else nan
    out["byte-loss-init"] = float(b["eval_loss"][steps[0]]) if b else nan
    out["byte-unigram"] = float(b["unigram_loss"]) if b else nan
    out["byte-wall-min"] = float(b["wall_time_s"]) / 60 if b else nan
    skipped = getattr(res, "skipped", None) or []
    out["skipped"] = ("none" if not skipped else
                      "; ".join(f"{s['model'].split(':', 1)[1]} ({s['reason']})" for s in skipped))
    return out


def publish(res: Result) -> None:
    """Glue the chapter's figures (`anisotropy-layers`, `-drift`, `-correlation`, `-gaussian`) and numbers."""
    common.set_theme()
    for name, make in (("layers", fig_layers), ("drift", fig_drift), ("correlation", fig_correlation),
                       ("gaussian", fig_gaussian)):
        common.figure(f"anisotropy-{name}", make(res))
    common.publish("anisotropy", numbers(res))
