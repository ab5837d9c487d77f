"""Figures, tables and published numbers of the anisotropy chapter (Godey et al. Figures 1-5 and
16-18)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from ..core.anisotropy import ISO_SHARE, MEAN_STABLE, isotropic_cosine_pdf, isotropic_cosine_quantile
from ..core.stats import EXACT_MAX_POINTS
from ..experiments.anisotropy import ALPHA, BYTE_MLM, IDENTITY_TOL, Result
from . import common

MARKERS = {"text": "o", "bytes": "D", "protein": "P", "chem": "X", "audio": "^", "vision": "s"}
#: p-values below this are drawn at it (Pearson's t-test gives 1e-16 and less for near-perfect lines)
FLOOR = 1e-16
MODALITY_NAMES = {"text": "text (subword tokens)", "bytes": "text (bytes)", "protein": "protein (residues)",
                  "chem": "chemistry (SMILES atoms)", "audio": "speech", "vision": "vision"}


def _colors(res: Result) -> list:
    return sns.color_palette("colorblind", len(res.models))


_scroll = common.scroll


def fig_layers(res: Result) -> plt.Figure:
    """Figures 1-4, one panel per model: the average cosine over all pairs per layer (solid), its
    untrained twin (dotted); for the CNN also the cosine of whole flattened maps (Godey et al.'s reading of Fig. 4)."""
    models = res.pretrained()
    cols = min(3, len(models))       # three panels a row: the figure fits the text column with its text legible
    rows = -(-len(models) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(2.5 * cols, 2.4 * rows + 0.6), squeeze=False, sharey=True)
    for ax, m in zip(axes.flat, models, strict=False):
        x = np.arange(len(m.cos_exact))
        ax.plot(x, m.cos_exact, "-o", ms=3, color="C0", label="average cosine")
        if m.flattened:
            ax.plot(x, m.map_cos_exact, "-.", color="C4", label="whole maps flattened")
        t = res.twin(m)
        if t is not None:
            ax.plot(np.arange(len(t.cos_exact)), t.cos_exact, ":", color="C1", label="untrained twin")
        ax.axhline(0, color="0.6", lw=0.6)
        ax.set_title(f"{m.name}\n{MODALITY_NAMES.get(m.modality, m.modality)}", fontsize=9)
        ax.set_xlabel("layer", fontsize=8)
    return _finish_grid(fig, axes, len(models), "cosine similarity",
                        "Anisotropy per layer across models and modalities", 3)


def fig_drift(res: Result) -> plt.Figure:
    """Why the drift test is nearly circular: left, every layer of every model, the average cosine
    against (‖x̄‖₂ / E‖x‖)² with the identity line; right, the Spearman p-values of ‖x̄‖₂ (Godey et
    al. Fig. 5) and of the normalised drift ‖x̄‖₂ / E‖x‖ against the average cosine."""
    fig, axes = plt.subplots(1, 2, figsize=(8, 4.5 + 0.3 * len(res.models)))
    for m, c in zip(res.models, _colors(res), strict=True):
        r2 = np.square(m.drift_ratio)
        axes[0].scatter(r2, m.cos_exact, s=12, marker=MARKERS.get(m.modality, "o"),
                        facecolors=c if m.trained else "none", edgecolors=c, label=m.label)
    axes[0].plot([0, 1], [0, 1], "k-", lw=0.8)
    axes[0].set_xlabel(r"$(\|\bar{x}\|_2\,/\,E\|x\|)^2$")
    axes[0].set_ylabel("average cosine similarity")
    axes[0].set_title("(a) average cosine against\nthe squared normalised drift", fontsize=10)
    labels = [m.label for m in res.models]
    y = np.arange(len(labels))
    raw = [max(m.test().p_exact, FLOOR) for m in res.models]
    norm = [max(m.normalised_test().p_exact, FLOOR) for m in res.models]
    axes[1].barh(y - 0.2, raw, height=0.4, color="C3", label="‖x̄‖₂ (the paper's test)")
    axes[1].barh(y + 0.2, norm, height=0.4, color="C0", label="‖x̄‖₂ / E‖x‖ (normalised)")
    axes[1].set_yticks(y, labels, fontsize=8)
    axes[1].axvline(0.05, color="r", ls="--", lw=1)
    axes[1].set_xscale("log")
    axes[1].set_xlim(1e-6, 2)
    axes[1].set_xlabel("exact permutation p-value")
    axes[1].legend(fontsize=8, loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=1, title="(b) Spearman p-value of",
                   title_fontsize=9)
    axes[1].invert_yaxis()
    fig.legend(*axes[0].get_legend_handles_labels(), loc="lower center", ncol=2, fontsize=8,
               bbox_to_anchor=(0.5, -0.01))
    fig.tight_layout(rect=(0, 0.2, 1, 1))
    return fig


def fig_correlation(res: Result) -> plt.Figure:
    """Figures 5 and 16: p-values of the Spearman and Pearson tests between ‖x̄‖₂ and the average
    cosine across layers, per model; red bars are not significant at 0.05."""
    labels = [m.label for m in res.models]
    fig, axes = plt.subplots(1, 2, figsize=(8, 2.6 + 0.35 * len(labels)), sharey=True)
    for ax, test in zip(axes, ("spearman", "pearson"), strict=True):
        tests = [m.test() for m in res.models]
        pv = [max(t.p_exact if test == "spearman" else t.pearson_p, FLOOR) for t in tests]
        sign = [t.rho if test == "spearman" else t.pearson_r for t in tests]
        ax.barh(labels, pv, color=["0.7" if v >= 0.05 else ("C0" if r > 0 else "C3") for v, r in
                                   zip(pv, sign, strict=True)])
        ax.axvline(0.05, color="r", ls="--", lw=1)
        ax.set_xscale("log")
        ax.set_xlabel("Spearman p-value (exact permutation)" if test == "spearman" else "Pearson p-value")
    axes[0].invert_yaxis()
    fig.suptitle("‖x̄‖₂ against the average cosine across layers:\np < 0.05 with a positive (blue) or negative "
                 "(red) correlation; grey, p > 0.05")
    return fig


def fig_gaussian(res: Result) -> plt.Figure:
    """Figure 17: density of the cosine of isotropic Gaussians (exact lines, Monte Carlo steps);
    Figure 18: the measured layer averages against the isotropic 95th percentile of their width."""
    fig, axes = plt.subplots(1, 2, figsize=(8, 9.5))
    c = np.linspace(-1, 1, 801)
    for i, g in enumerate(res.gaussian):
        axes[0].plot(c, isotropic_cosine_pdf(c, g.d), color=f"C{i}", label=f"d = {g.d}")
        axes[0].stairs(g.hist_density, g.hist_edges, color=f"C{i}", alpha=0.5)
    axes[0].set_xlabel("cosine similarity")
    axes[0].set_ylabel("density")
    axes[0].set_yscale("log")
    axes[0].set_ylim(1e-3, 80)
    axes[0].legend(fontsize=8)
    axes[0].set_title("(a) density (lines exact,\nsteps Monte Carlo)")
    ds = np.unique(np.geomspace(4, 8192, 60).astype(int))
    axes[1].plot(ds, [isotropic_cosine_quantile(0.95, d) for d in ds], "k-", label="95th pct of one pair (paper)")
    axes[1].plot(ds, [res.null_q95(d) for d in ds], "k--", label=f"95th pct of a {res.n_pairs:,}-pair average")
    for m, col in zip(res.models, _colors(res), strict=True):
        axes[1].scatter(m.dims, m.cos_exact, marker=MARKERS.get(m.modality, "o"), s=14,
                        facecolors=col if m.trained else "none", edgecolors=col, label=m.label)
    axes[1].set_xscale("log")
    axes[1].set_yscale("log")
    axes[1].set_ylim(1e-4, 1.5)
    axes[1].set_xlabel("dimension d")
    axes[1].set_ylabel("cosine similarity")
    axes[1].set_title("(b) layer averages against\nthe isotropic null")
    fig.legend(*axes[1].get_legend_handles_labels(), loc="lower center", ncol=2, fontsize=8,
               bbox_to_anchor=(0.5, 0.0))
    fig.tight_layout(rect=(0, 0.38, 1, 1))
    return fig


def models_table(res: Result):
    """What was measured, one row per model (its untrained twin, same configuration and data, is
    measured beside it where the last column says so): modality, data, layers, what the model is."""
    names = {m.name for m in res.models if not m.trained}
    df = pd.DataFrame([{"model": m.name + (" (and its twin)" if m.name in names else ""),
                        "modality": MODALITY_NAMES.get(m.modality, m.modality),
                        "measured on": m.data, "layers": m.layers - 1, "what it is": m.description}
                       for m in res.models if m.trained])
    return _scroll(common.table(df).set_caption("Models measured; \"and its twin\": its untrained twin (same "
                                                "configuration, random weights) is measured on the same data"))


def summary_table(res: Result):
    """Per model: the average cosine at the embeddings, its peak and the layer of the peak, at the last
    layer, how many layers lie above the isotropic null of a sampled-pairs average and above its twin."""
    above = res.above_isotropic()
    rows = []
    for m in res.models:
        cos = np.asarray(m.cos_exact)
        a, n = above[m.label]
        t = res.twin(m) if m.trained else None
        twin = f" / {int(np.sum(cos > np.asarray(t.cos_exact)))}" if t else ""
        rows.append({"model": m.label, "embeddings": f"{cos[0]:.3f}",
                     "peak (layer)": f"{cos.max():.3f} ({int(cos.argmax())})", "last layer": f"{cos[-1]:.3f}",
                     "layers above the null / its twin": f"{a}{twin} of {n}"})
    return _scroll(common.table(pd.DataFrame(rows)).set_caption(
        "Average cosine over all pairs: embeddings, peak, last layer; layers above the isotropic null and above "
        "the untrained twin"))


def fig_spectrum(res: Result) -> plt.Figure:
    """The centred cloud per layer, one panel per model with a spectrum run: its participation ratio
    over d (pretrained solid, untrained twin dotted) and an isotropic Gaussian's of the same n and d
    (dashed)."""
    names = list(dict.fromkeys(s_.name for s_ in res.shapes))
    cols = min(3, max(1, len(names)))
    rows = -(-len(names) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(2.5 * cols, 2.2 * rows + 0.6), squeeze=False, sharey=True)
    for ax, name in zip(axes.flat, names, strict=False):
        for trained, style, label in ((True, "-o", "pretrained"), (False, ":", "untrained twin")):
            s_ = res.shape(name, trained)
            if s_ is not None:
                x, d = np.arange(len(s_.pr)), np.asarray(s_.dims, float)
                ax.plot(x, np.asarray(s_.pr) / d, style, ms=3, color="C0" if trained else "C1", label=label)
                if trained or res.shape(name) is None:
                    ax.plot(x, np.asarray(s_.pr_iso) / d, "--", color="0.5", label="isotropic Gaussian")
        ax.set_yscale("log")
        ax.set_title(name, fontsize=9)
        ax.set_xlabel("layer", fontsize=8)
    return _finish_grid(fig, axes, len(names), "participation ratio / d",
                        "How many directions the centred cloud spreads over", 3)


def spectrum_table(res: Result):
    """Per model (`Result.shape_rows`): the centred cloud's participation ratio over layers against the
    isotropic Gaussian's and the twin's, top-3 share, split-half stability of the mean, and what each
    layer's anisotropy is made of (layers per class)."""
    df = pd.DataFrame(res.shape_rows())
    rng = lambda a, b: f"{a:.0f}–{b:.0f}" if np.isfinite(a) else "—"  # noqa: E731
    out = pd.DataFrame({
        "model": df.model, "d (tokens)": [f"{d} ({t:,})" for d, t in zip(df.d, df.tokens, strict=True)],
        "PR, pretrained": [rng(a, b) for a, b in zip(df.pr_min, df.pr_max, strict=True)],
        "PR, twin": [rng(a, b) for a, b in zip(df.twin_pr_min, df.twin_pr_max, strict=True)],
        "PR, isotropic": [f"{v:.0f}" for v in df.pr_iso],
    })
    return _scroll(common.table(out, digits=2).set_caption(
        "The centred cloud's participation ratio (PR) per layer, smallest–largest over layers (a subsample of the "
        "tokens), against the untrained twin's and an isotropic Gaussian's of the same n and d"))


def shape_table(res: Result):
    """Per model with a spectrum run (`Result.shape_rows`): the largest top-3 share, the smallest ‖x̄‖²/λ₁, the
    largest RMS cosine once the top 10 directions are removed over 1/√d, the smallest split-half cosine of x̄."""
    df = pd.DataFrame(res.shape_rows())
    split = [f"{a:.2f} / {b:.2f}" if np.isfinite(a) else f"— / {b:.2f}"
             for a, b in zip(df.get("split_min", np.nan), df.get("twin_split_min", np.nan), strict=True)]
    out = pd.DataFrame({"model": df.model, "top-3 share (max)": df.get("top3_max"),
                        "‖x̄‖²/λ₁ (min)": df.get("drift_over_top_min"),
                        "RMS cos after top 10 × √d (max)": df.get("rms10_ratio"),
                        "split-half cos of x̄ (min), pretrained / twin": split})
    return _scroll(common.table(out, digits=2).set_caption(
        "The centred cloud's shape (pretrained): the largest top-3 variance share; the smallest ratio of the "
        "mean's squared norm to the top centred eigenvalue; the largest RMS cosine once the mean and top 10 "
        "directions are removed, over an isotropic cloud's 1/√d; the smallest split-half cosine of the mean"))


def makeup_table(res: Result):
    """Per model with a spectrum run: how many of its pretrained layers fall in each `MAKEUP` class."""
    df = pd.DataFrame(res.shape_rows())
    out = pd.DataFrame({"model": df.model, "one common direction": df.get("one common direction"),
                        "drift + low-dim cloud": df.get("drift + low-dimensional cloud"),
                        "no stable drift": df.get("no stable drift")})
    return _scroll(common.table(out, digits=0).set_caption("What each pretrained layer's anisotropy is made of: "
                                                           "layers per class"))


def zeroed_table(res: Result):
    """Per BERT-embedding model: the twin's and the token-type-zeroed twin's average cosine at the embeddings
    and the layers where the pretrained model lies below each (`Result.zeroed_rows`)."""
    df = pd.DataFrame(res.zeroed_rows())
    out = pd.DataFrame({"model": df.model, "twin, embeddings": df.twin_emb,
                        "zeroed twin, embeddings / largest": [f"{a:.3f} / {b:.3f}" for a, b in
                                                               zip(df.zeroed_emb, df.zeroed_max, strict=True)],
                        "pretrained below twin": [f"{a} of {n}" for a, n in zip(df.below_twin, df.layers, strict=True)],
                        "pretrained below zeroed twin": [f"{a} of {n}" for a, n in
                                                         zip(df.below_zeroed, df.layers, strict=True)]})
    return _scroll(common.table(out, digits=3).set_caption(
        "Untrained twins with and without the token-type embedding: average cosine, and the layers where the "
        "pretrained model is below each"))


def correlation_table(res: Result):
    """Per pretrained model: the paper's tests (‖x̄‖₂ against the average cosine across layers) at their unit,
    the layers — Spearman ρ with its Fisher-z interval and exact permutation p, Pearson r and its p — and whether
    the anisotropy follows the drift (positive, p < 0.05)."""
    rows = []
    for m in res.pretrained():
        t = m.test()
        rows.append({"model": m.name, "layers": t.layers, "Spearman ρ [over layers]": t.fisher.text(2),
                     "p (exact)": f"{t.p_exact:.2g}", "Pearson r": f"{t.pearson_r:+.2f}",
                     "p (Pearson)": f"{t.pearson_p:.2g}", "follows the drift": "yes" if t.follows() else "no"})
    return _scroll(common.table(pd.DataFrame(rows), compact=True).set_caption(
        "The paper's tests (its Figs. 5 and 16) across each model's layers: ‖x̄‖₂ against the average cosine (per "
        "position for the CNN); the interval's unit is the layers (Fisher z), the p-value is the exact permutation "
        "test (Monte Carlo beyond 9 layers)"))


def layer_test_table(res: Result):
    """The two drift tests the findings read (Whisper base's encoder, the CNN's flattened maps), a column each, under
    every procedure over the layers, a row each: Spearman ρ with its Fisher-z interval and its jackknife over the
    layers (on Fisher's z, so inside [−1, 1]), the exact permutation p, and Pearson's reading. The bootstrap over
    the inputs varies the data, not the layers, and is left out: it is no interval of this test."""
    rows = []
    for name, t in (("Whisper base encoder", res.speech_test()), ("EfficientNet-Lite0, flattened maps",
                                                                    res.cnn_test())):
        if t is None:
            continue
        rows.append({"model": name, "layers": t.layers, "ρ, Fisher z over layers": t.fisher.text(2),
                     "ρ, jackknife over layers": t.jackknife.text(2), "p (exact)": f"{t.p_exact:.4f}",
                     "Pearson r [over layers]": t.pearson.text(2), "p (Pearson)": f"{t.pearson_p:.3f}"})
    # a column per model, a row per procedure: eight columns side by side would not fit the page (as objects, so
    # that the layer counts stay integers)
    df = pd.DataFrame(rows).set_index("model").astype(object).T.rename_axis(columns="procedure")
    return _scroll(common.table(df, index=True).set_caption(
        "The drift tests the findings read, under each procedure over the layers, the unit of the paper's test"))


def centred_cosine_table(res: Result):
    """Per pretrained Transformer (`Result.centred_rows_by_layer`): the layer whose mean-removed average cosine
    reaches furthest toward the isotropic line, with its interval (sampled pairs; the jackknife over inputs where
    measured) and the line at its width."""
    rows = []
    for r in res.centred_rows_by_layer():
        jk = "jackknife" in r
        rows.append({"model": r["model"], "layer": r["jk_layer"] if jk else r["layer"],
                     "sampled pairs": (r["jk_pairs"] if jk else r["pairs"]).text(4),
                     "jackknife over inputs": f"{r['jackknife'].text(4)} ({r['inputs']} {r['unit']})" if jk else "—",
                     "isotropic line ±": f"{r['line']:.3f}"})
    return _scroll(common.table(pd.DataFrame(rows)).set_caption(
        "The average cosine once the mean is removed, at each model's layer closest to the isotropic line (the 95th "
        "percentile of one isotropic pair's cosine at its width, the paper's Appendix B)"))


def normalised_table(res: Result):
    """Per model: the Spearman test of the normalised drift r = ‖x̄‖₂ / E‖x‖ against the average cosine, and how
    many layers satisfy avg cos ≈ r² within 0.02."""
    rows = [{"model": m.label, "Spearman ρ (r)": m.normalised.normalised_spearman_r,
             "p (r)": m.normalised.normalised_spearman_p,
             "layers with |cos − r²| < 0.02":
                 f"{m.normalised.identity_layers_within} of {m.normalised.layers}"}
            for m in res.models]
    return _scroll(common.table(pd.DataFrame(rows), digits=3).set_caption(
        "The normalised drift r = ‖x̄‖₂ / E‖x‖ against the average cosine across layers"))


def byte_mlm_table(res: Result):
    """The byte-level MLM's held-out masked-byte loss per checkpoint step against the unigram baseline."""
    b = res.byte_mlm
    if not b:
        skipped = [s["reason"] for s in res.skipped if s["model"].endswith(":byte-MLM")]
        note = f"not on this machine: {skipped[0]}" if skipped else "the byte-level MLM is not among this run's models"
        return common.table(pd.DataFrame([{"note": note}]))
    df = pd.DataFrame([{"step": k, "held-out MLM loss (nats/byte)": v, "unigram baseline": b.unigram_loss}
                       for k, v in b.losses()])
    return common.table(df).set_caption("Byte-level MLM trained here: held-out loss (WikiText-103 test bytes)")


def gaussian_table(res: Result):
    """Monte Carlo mean and 95th percentile of the isotropic cosine against the exact percentile and 1.645/√d."""
    df = pd.DataFrame([{"d": g.d, "mean (MC)": g.mc_mean, "95th pct (MC)": g.mc_q95,
                        "95th pct (exact)": g.exact_q95, "1.645/√d": g.asymptotic_q95} for g in res.gaussian])
    return common.table(df, digits=4).set_caption("Cosine of isotropic Gaussians: Monte Carlo against the exact law")


def publish(res: Result) -> None:
    """Glue the chapter's figures and the numbers its prose quotes (literal dicts of full keys, one per section of
    the chapter; NaN where this run did not measure a model)."""
    common.set_theme()
    common.figure("anisotropy-layers", fig_layers(res))
    common.figure("anisotropy-drift", fig_drift(res))
    common.figure("anisotropy-correlation", fig_correlation(res))
    common.figure("anisotropy-gaussian", fig_gaussian(res))
    common.figure("anisotropy-spectrum", fig_spectrum(res))
    common.publish({**_levels(res), **_speech(res), **_cnn(res), **_drift_tests(res), **_bytes(res),
                    **_centred(res), **_shape(res), **_zeroed(res)})


def _levels(res: Result) -> dict[str, object]:
    """The average cosine per model against the isotropic null, and how well the sampled pairs read it."""
    nan = float("nan")
    mini, mini_twin = res.get("all-MiniLM-L6-v2"), res.get("all-MiniLM-L6-v2", False)
    smol = res.get("SmolLM2-135M-Instruct")
    whisper_twins = [t for t in (res.get(n, False) for n in ("whisper-base", "whisper-tiny.en")) if t]
    return {
        "anisotropy-skipped": "none" if not res.skipped else
        "; ".join(f"{s['model'].split(':', 1)[1]} ({s['reason']})" for s in res.skipped),
        "anisotropy-n-pairs": f"{res.n_pairs:,}",
        "anisotropy-z-median": res.sampling_z_median(),
        "anisotropy-z-max": float(res.sampling_z().max()),
        "anisotropy-smollm-last": float(smol.cos_exact[-1]) if smol else nan,
        "anisotropy-minilm-last": float(mini.cos_exact[-1]) if mini else nan,
        "anisotropy-minilm-null": res.null_q95(mini.d) if mini else nan,
        "anisotropy-minilm-twin-emb": float(mini_twin.cos_exact[0]) if mini_twin else nan,
        "anisotropy-whisper-twin-min": min(min(t.cos_exact) for t in whisper_twins) if whisper_twins else nan,
        "anisotropy-whisper-twin-max": max(max(t.cos_exact) for t in whisper_twins) if whisper_twins else nan,
        "anisotropy-null-single": sum(a for a, _ in res.above_single_pair().values()),
        "anisotropy-null-mean": sum(a for a, _ in res.above_isotropic().values()),
        "anisotropy-null-layers": sum(n for _, n in res.above_isotropic().values()),
    }


def _speech(res: Result) -> dict[str, object]:
    """Whisper's encoder: its levels, the drift test over its layers and the bootstrap over clips."""
    nan = float("nan")
    base, sboot, speech, st = res.get("whisper-base"), res.speech_boot, res.group("speech"), res.speech_test()
    return {
        "anisotropy-speech-base-min": res.lowest_layer([base]).text(3, signed=False) if base else "—",
        "anisotropy-speech-base-first": float(base.cos_exact[0]) if base else nan,
        "anisotropy-speech-base-peak": float(max(base.cos_exact)) if base else nan,
        "anisotropy-speech-rho": st.fisher.text(2) if st else "—",
        "anisotropy-speech-p": st.p_exact if st else nan,
        "anisotropy-speech-pearson-r": st.pearson_r if st else nan,
        "anisotropy-speech-pearson-p": st.pearson_p if st else nan,
        "anisotropy-speech-boot": st.input_bootstrap.estimate if st else nan,
        "anisotropy-speech-boot-draws": st.input_bootstrap.n if st else 0,
        "anisotropy-speech-layers": st.layers if st else 0,
        "anisotropy-speech-clips": sboot.clips if sboot else 0,
        "anisotropy-speech-norm-first": float(sboot.mean_norm[0]) if sboot else nan,
        "anisotropy-speech-norm-last": float(sboot.mean_norm[-1]) if sboot else nan,
        "anisotropy-speech-cos-last": float(sboot.cos[-1]) if sboot else nan,
        "anisotropy-speech-min": res.lowest_layer(speech).text(3, signed=False) if speech else "—",
    }


def _cnn(res: Result) -> dict[str, object]:
    """The CNN: the cosine per position and of whole flattened maps over its inner layers, and the drift test of
    each reading."""
    nan = float("nan")
    cnn, boot, ct = res.get("EfficientNet-Lite0"), res.cnn_boot, res.cnn_test()
    cnn_map = np.asarray(cnn.map_cos_exact if cnn and cnn.flattened else [nan] * 3)[1:-1]
    cnn_pos = np.asarray(cnn.cos_exact if cnn else [nan] * 3)[1:-1]
    pos = cnn.test() if cnn else None
    return {
        "anisotropy-cnn-pos-min": float(np.min(cnn_pos)),
        "anisotropy-cnn-pos-max": float(np.max(cnn_pos)),
        "anisotropy-cnn-map-min": float(np.min(cnn_map)),
        "anisotropy-cnn-map-max": float(np.max(cnn_map)),
        "anisotropy-cnn-images": boot.images if boot else 0,
        "anisotropy-cnn-map-median": res.cnn_map_cosine().text(3, signed=False) if boot else "—",
        "anisotropy-cnn-layers": len(boot.map_cos) if boot else 0,
        "anisotropy-cnn-rho": ct.fisher.text(2) if ct else "—",
        "anisotropy-cnn-p": ct.p_exact if ct else nan,
        "anisotropy-cnn-pos-rho": pos.rho if pos else nan,
        "anisotropy-cnn-pos-p": pos.p_exact if pos else nan,
    }


def _drift_tests(res: Result) -> dict[str, object]:
    """The paper's drift test over the models, and the identity avg cos ≈ (‖x̄‖₂ / E‖x‖)² that makes it circular."""
    share = res.share_counts()
    return {
        "anisotropy-drift-share": res.significant_share().text(2, signed=False) if res.transformers() else "—",
        "anisotropy-drift-models": share["models"], "anisotropy-alpha": ALPHA,
        "anisotropy-exact-layers": EXACT_MAX_POINTS,
        "anisotropy-drift-follow": share["spearman"],
        "anisotropy-drift-either": share["either_sign"],
        "anisotropy-drift-negative": share["negative"],
        "anisotropy-drift-pearson": share["pearson"],
        "anisotropy-identity-within": sum(m.normalised.identity_layers_within for m in res.models),
        "anisotropy-identity-layers": sum(m.normalised.layers for m in res.models),
        "anisotropy-identity-gap-max": max(m.normalised.identity_gap_max for m in res.models),
        "anisotropy-identity-tol": IDENTITY_TOL,
    }


def _bytes(res: Result) -> dict[str, object]:
    """The byte-level MLM trained here: its level against the subword models', and its training."""
    nan = float("nan")
    byte, b = res.get("byte-MLM"), res.byte_mlm
    smol, mini = res.get("SmolLM2-135M-Instruct"), res.get("all-MiniLM-L6-v2")
    losses = b.losses() if b else []
    return {
        "anisotropy-bytes-vs-smollm": res.level_gap(byte, smol).text(3) if byte and smol else "—",
        "anisotropy-bytes-vs-minilm": res.level_gap(byte, mini).text(3) if byte and mini else "—",
        "anisotropy-byte-steps": int(b.steps) if b else 0,
        "anisotropy-byte-wall-min": float(b.wall_time_s) / 60 if b else nan,
        "anisotropy-byte-loss-init": losses[0][1] if b else nan,
        "anisotropy-byte-loss": losses[-1][1] if b else nan,
        "anisotropy-byte-unigram": float(b.unigram_loss) if b else nan,
        "anisotropy-byte-batch": BYTE_MLM.batch_size,
        "anisotropy-byte-seq-len": BYTE_MLM.seq_len,
        "anisotropy-chunk-len": res.chunk_len,
        "anisotropy-chains": res.chains,
    }


def _centred(res: Result) -> dict[str, object]:
    """Biś et al.'s reading: the cosine once the mean is removed, on a planted cloud and at the deciding layer."""
    nan = float("nan")
    planted, iso, dec = res.planted["clusters + drift"], res.planted["isotropic + drift"], res.centred_decider()
    return {
        "anisotropy-planted-cos": planted.cos,
        "anisotropy-planted-centred": planted.cos_centred,
        "anisotropy-planted-d": planted.d,
        "anisotropy-iso-planted-cos": iso.cos,
        "anisotropy-centred-max": max(r["centred_max"] for r in res.centred_rows()
                                      if r["model"] not in ("EfficientNet-Lite0",)),
        "anisotropy-centred-model": dec["model"] if dec else "—",
        "anisotropy-centred-layer": dec.get("jk_layer", dec["layer"]) if dec else 0,
        "anisotropy-centred-value": dec["jackknife"].text(4) if dec and "jackknife" in dec else "—",
        "anisotropy-centred-inputs": dec.get("inputs", 0) if dec else 0,
        "anisotropy-centred-unit": dec.get("unit", "inputs") if dec else "inputs",
        "anisotropy-centred-line": dec["line"] if dec else nan,
        "anisotropy-centred-d": dec["d"] if dec else 0,
        "anisotropy-jack-models": len(res.centred_jack),
        "anisotropy-jack-names": _listed([j.name for j in res.centred_jack]),
    }


def _shape(res: Result) -> dict[str, object]:
    """The centred cloud's spectrum: the planted clouds, what each layer's anisotropy is made of, SmolLM2's final
    norm."""
    nan = float("nan")
    planted, iso, counts = res.planted["clusters + drift"], res.planted["isotropic + drift"], res.makeup_counts()
    smol_shape, norm = res.shape("SmolLM2-135M-Instruct"), res.final_norm
    return {
        "anisotropy-planted-pr": planted.pr,
        "anisotropy-planted-pr-iso": planted.pr_iso,
        "anisotropy-planted-makeup": planted.makeup,
        "anisotropy-iso-planted-pr": iso.pr,
        "anisotropy-iso-planted-makeup": iso.makeup,
        "anisotropy-makeup-low": counts["drift + low-dimensional cloud"],
        "anisotropy-makeup-one": counts["one common direction"],
        "anisotropy-makeup-unstable": counts["no stable drift"],
        "anisotropy-makeup-layers": counts["layers"],
        "anisotropy-shape-share": f"{res.shape_share:.0%}",
        "anisotropy-norm-previous": norm.previous if norm else nan,
        "anisotropy-norm-before": norm.before if norm else nan,
        "anisotropy-norm-after": norm.after if norm else nan,
        "anisotropy-norm-tokens": f"{norm.tokens:,}" if norm else "0",
        "anisotropy-smollm-pr-min": float(np.min(smol_shape.pr)) if smol_shape else nan,
        "anisotropy-smollm-top3-max": float(np.max(smol_shape.top3)) if smol_shape else nan,
        "anisotropy-shape-max-d": max((max(s_.dims) for s_ in res.shapes), default=0),
        "anisotropy-mean-stable": MEAN_STABLE,
        "anisotropy-iso-share": ISO_SHARE,
    }


def _zeroed(res: Result) -> dict[str, object]:
    """BERT's untrained twin with its token-type embedding zeroed, against the pretrained model."""
    zrows = res.zeroed_rows()
    return {
        "anisotropy-zeroed-emb-max": max((r["zeroed_emb"] for r in zrows), default=float("nan")),
        "anisotropy-zeroed-below": sum(r.get("below_zeroed", 0) for r in zrows),
        "anisotropy-zeroed-below-twin": sum(r.get("below_twin", 0) for r in zrows),
        "anisotropy-zeroed-layers": sum(r["layers"] for r in zrows if "below_zeroed" in r),
        "anisotropy-zeroed-models": len(res.zeroed),
    }


def _listed(names: list[str]) -> str:
    """"a", "a and b", "a, b and c"; "none" for no names."""
    return " and ".join([", ".join(names[:-1]), names[-1]] if len(names) > 1 else names) or "none"


def _finish_grid(fig, axes, used: int, ylabel: str, title: str, ncol: int):
    """A grid of per-model panels finished alike: empty panels off, the y label on the first column, one legend
    of every labelled line below the grid."""
    for ax in axes.flat[used:]:
        ax.axis("off")
    for ax in axes[:, 0]:
        ax.set_ylabel(ylabel)
    handles = {h.get_label(): h for ax in axes.flat for h in ax.get_lines() if not h.get_label().startswith("_")}
    fig.legend(handles.values(), handles.keys(), loc="lower center", ncol=ncol, fontsize=8,
               bbox_to_anchor=(0.5, -0.02))
    fig.suptitle(title)
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    return fig
