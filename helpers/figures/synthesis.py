"""Figures, tables and glued numbers of the synthesis chapter (the three papers' measures on the same models),
drawn from its Result."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.ticker import MaxNLocator

from ..experiments.synthesis import HEADLINE, RANKED, TCOS_MODEL, Result
from . import common

#: how the chapter names each measure
LABELS = {"cos": "mean cos", "cos_centred": "mean cos, centred", "drift": "drift", "pr": "− PR", "top3": "top-3 share",
          "ev1": "EV₁", "tokenuni": "TokenUni", "rbf_dis": "log RBF_dis", "skew": "SV skew", "t_sim": "t_sim",
          "qk_cos": "cos(q̄, k̄)"}
COLOURS = {"cos": "C0", "ev1": "C1", "t_sim": "C2"}
AUTHORS = {"godey2024": "Godey et al.", "yan2022": "Yan et al.", "yu2024": "Yu & Zhang"}
#: how close the mean cosine must lie to D²/(1 + D²) at every layer for the chapter to say the identity holds
IDENTITY_TOLERANCE = 0.1


def curves(res: Result) -> plt.Figure:
    """Per model, the three papers' headline measures per layer (model solid with its interval, the untrained
    twins' mean dashed)."""
    common.set_theme()
    n = len(res.runs)
    cols = min(3, n)
    rows = -(-n // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(2.5 * cols + 0.6, 2.4 * rows + 0.8), squeeze=False, sharey=True)
    for ax, r in zip(axes.flat, res.runs, strict=False):
        for paper, meas in HEADLINE.items():
            c = r["curves"][meas]
            x = np.arange(r["layers"])
            ax.plot(x, c["model"]["estimate"], color=COLOURS[meas], lw=1.8, label=f"{LABELS[meas]} ({AUTHORS[paper]})")
            ax.fill_between(x, c["model"]["low"], c["model"]["high"], color=COLOURS[meas], alpha=0.25, lw=0)
            ax.plot(x, res.twin_curve(r["name"], meas)["estimate"], color=COLOURS[meas], lw=1.1, ls="--")
        ax.set_title(r["name"], fontsize=10)
        ax.set_xlabel("layer (0 = embeddings)", fontsize=9)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_ylim(-0.05, 1.0)
    for ax in list(axes.flat)[n:]:
        ax.axis("off")
    handles, labels = axes.flat[0].get_legend_handles_labels()
    handles.append(plt.Line2D([], [], color="0.4", ls="--"))
    labels.append(f"untrained twins (mean of {res.settings['twins']})")
    fig.legend(handles, labels, loc="upper center", ncol=2, frameon=False, fontsize=9, bbox_to_anchor=(0.5, 1.08))
    fig.tight_layout()
    return fig


def agreement(res: Result) -> plt.Figure:
    """Mean Spearman correlation across layers between every pair of measures (+1: the same layers most
    collapsed), trained models; the twins' below the diagonal."""
    common.set_theme()
    A, T = res.agreement_matrix("model"), res.agreement_matrix("twin")
    M = np.triu(A, 1) + np.tril(T, -1) + np.eye(len(A))
    fig, ax = plt.subplots(figsize=(6.4, 5.4))
    im = ax.imshow(M, cmap="RdBu_r", vmin=-1, vmax=1)
    names = [LABELS[m] for m in RANKED]
    ax.set_xticks(range(len(names)), names, rotation=45, ha="right", fontsize=9)
    ax.set_yticks(range(len(names)), names, fontsize=9)
    for i in range(len(names)):
        for j in range(len(names)):
            if i != j:
                ax.text(j, i, f"{M[i, j]:.2f}", ha="center", va="center", fontsize=7,
                        color="white" if abs(M[i, j]) > 0.6 else "black")
    ax.set_title("trained models above the diagonal, untrained twins below", fontsize=10)
    fig.colorbar(im, ax=ax, shrink=0.8, label="Spearman across layers, mean over models")
    fig.tight_layout()
    return fig


def collapsed_table(res: Result):
    """Per model, the layer each headline measure rates most collapsed, and the share of (layer, measure)
    cells where the twin test flags the model as unlike a new draw from its twins."""
    picks = {m: res.most_collapsed(m) for m in ("cos", "ev1", "t_sim", "pr")}
    rows = [{("", "model"): r["name"], ("", "modality"): r["modality"], ("", "layers"): r["layers"] - 1,
             **{("most collapsed layer by", LABELS[m].replace("− ", "−\u00a0")): picks[m][r["name"]] for m in picks},
             ("", "differs from twins"): f"{res.differing_share_of(r['name']):.2f}"}
            for r in res.runs]
    # one header over the four layer columns keeps each of them as narrow as its numbers
    return common.table(pd.DataFrame(rows, columns=pd.MultiIndex.from_tuples(list(rows[0]))), compact=True)


def operations_table(res: Result):
    """Per model, at its most collapsed layer by EV₁: the change in each input's EV₁ and t_sim under
    SoftDecay, whitening and removing the input's mean, with 95 % intervals."""
    rows = []
    ch = {(q, op): res.change_per_model(f"{q}_{op}", f"{q}_raw") for q, op in
          (("ev1", "softdecay"), ("t_sim", "softdecay"), ("t_sim", "whitening"))}
    skew = res.change_per_model("ev1_centred", "ev1_isotropic")
    for r in res.runs:
        n = r["name"]
        rows.append({"model": n, "layer": r["operation_layer"],
                     "ΔEV₁, SoftDecay": ch["ev1", "softdecay"][n].text(3),
                     "Δt_sim, SoftDecay": ch["t_sim", "softdecay"][n].text(3),
                     "Δt_sim, whitening": ch["t_sim", "whitening"][n].text(3),
                     "centred EV₁ − isotropic": skew[n].text(3)})
    return common.table(pd.DataFrame(rows))


def publish(res: Result) -> None:
    """Glue the figures and every number the prose quotes (one literal dict)."""
    common.figure("synthesis-curves", curves(res))
    common.figure("synthesis-agreement", agreement(res))
    f = {x.key: x for x in res.findings()}
    share = res.differing_share()
    least, least_rho = res.least_agreeing("t_sim", "ev1")
    skewed, skew = res.largest_centred_excess()
    identity = res.drift_identity_holds(IDENTITY_TOLERANCE)
    power = res.power()
    tcos = res.cos_against_t_cos(TCOS_MODEL)
    common.publish({
        "synthesis-n-models": len(res.runs), "synthesis-models": ", ".join(res.names),
        "synthesis-text-inputs": res.settings["text_inputs"], "synthesis-image-inputs": res.settings["image_inputs"],
        "synthesis-audio-inputs": res.settings["audio_inputs"], "synthesis-draws": res.draws,
        "synthesis-twins": res.settings["twins"],
        "synthesis-max-tokens": res.settings["max_tokens"], "synthesis-alpha": res.settings["alpha"],
        "synthesis-agree-cos-ev1": f["synthesis-agree-cos-ev1"].effect.text(2),
        "synthesis-agree-tsim-ev1": f["synthesis-agree-tsim-ev1"].effect.text(2),
        "synthesis-agree-cos-tsim": f["synthesis-agree-cos-tsim"].effect.text(2),
        "synthesis-agree-cos-pr": res.agreement("cos", "pr").text(2),
        "synthesis-agree-cos-drift": res.agreement("cos", "drift").text(2),
        "synthesis-identity-tolerance": IDENTITY_TOLERANCE, "synthesis-identity-holds": len(identity["holds"]),
        "synthesis-identity-apart": ", ".join(identity["apart"]) or "none",
        "synthesis-identity-apart-gap": identity["apart_gap"],
        "synthesis-agree-pr-ev1": res.agreement("pr", "ev1").text(2),
        "synthesis-agree-cos-ev1-twin": res.agreement("cos", "ev1", "twin").text(2),
        "synthesis-same-layer": res.headline_same_layer(),
        "synthesis-differ-share": share.estimate, "synthesis-differ-min": share.low, "synthesis-differ-max": share.high,
        "synthesis-softdecay-ev1": f["synthesis-softdecay-ev1"].effect.text(3),
        "synthesis-softdecay-tsim": f["synthesis-softdecay-tsim"].effect.text(3),
        "synthesis-softdecay-both": res.lowered_both("softdecay"),
        "synthesis-whitening-both": res.lowered_both("whitening"),
        "synthesis-whitening-tsim": f["synthesis-whitening-tsim"].effect.text(3),
        "synthesis-whitening-ev1": res.change("ev1_whitening", "ev1_raw").text(3),
        "synthesis-centring-cos": f["synthesis-centring-anisotropy"].effect.text(3),
        "synthesis-centring-skew": f["synthesis-centring-skew"].effect.text(3),
        "synthesis-centred-tokenuni": res.change("tokenuni_centred", "tokenuni_raw").text(3),
        "synthesis-missing": ", ".join(res.missing) or "none",
        "synthesis-least-agree-model": least, "synthesis-least-agree": least_rho.text(2),
        "synthesis-softdecay-not-both": ", ".join(res.not_both("softdecay")) or "none",
        "synthesis-whitening-not-both": ", ".join(res.not_both("whitening")) or "none",
        "synthesis-skew-model": skewed, "synthesis-skew-largest": skew.text(3),
        "synthesis-power-one": power["one_sd"], "synthesis-power-all": power["all_sd"],
        "synthesis-tcos-model": TCOS_MODEL, "synthesis-tcos-specials": tcos["specials"],
        "synthesis-tcos-mid": f"{tcos['mid_low']:.2f} to {tcos['mid_high']:.2f}",
        "synthesis-tcos-gap-last": tcos["last"], "synthesis-tcos-cos-last": tcos["cos_last"],
        "synthesis-tcos-last": tcos["t_cos_last"],
    })


__all__ = ["curves", "agreement", "collapsed_table", "operations_table", "publish"]
