"""Figures, tables and glued numbers of the tse chapter (Yu & Zhang Figures 1-5), drawn from its Result."""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.ticker import MaxNLocator

from ..core.escalation import STEPS
from ..experiments.tse import Result
from . import common


def _panels(n: int, title: str, width: float = 11.0) -> tuple[plt.Figure, np.ndarray]:
    common.set_theme()
    fig, axes = plt.subplots(1, n, figsize=(width, 4.0))
    fig.suptitle(title)
    for ax in np.atleast_1d(axes):
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))     # blocks are whole numbers
    return fig, np.atleast_1d(axes)


def fig1(res: Result) -> plt.Figure:
    """Figure 1: t_sim, t_cos and the per-layer gradient norm of random-init BERT / ALBERT."""
    s, f1 = res.settings, res.figure1
    fig, axes = _panels(3, f"Figure 1 — random-init transformers BERT/ALBERT, depth {s['hf_depth']}, "
                           f"{s['hf_batch']}×{s['hf_seq_len']} CoLA tokens")
    common.layer_curves(axes[0], {k.upper(): v["t_sim"] for k, v in f1.items()}, ylabel="t_sim",
                        title="token similarity", markers=False)
    common.layer_curves(axes[1], {k.upper(): v["t_cos"] for k, v in f1.items()}, ylabel="t_cos",
                        title="cosine similarity", markers=False)
    common.layer_curves(axes[2], {"BERT": f1["bert"]["grad_norm"]}, x0=1, ylabel="‖∂L/∂θ_layer‖",
                        title="gradient norm per layer (BERT)", logy=True, markers=False)
    return fig


def fig2(res: Result) -> plt.Figure:
    """Figure 2: post-norm t_sim under both readings of the value-map variance, ξ₁/ξ₂ per step, δ and ω."""
    s, f2, vs, alt = res.settings, res.figure2, res.settings["value_scale"], res.other_value_scale
    fig, axes = _panels(3, f"Figure 2 — {s['trials']} trials, n={s['n_tokens']}, d={s['d_model']}, "
                           f"h={s['n_heads']}, α={s['alpha']:g}")
    common.layer_curves(axes[0], {f"σ²={vs:g}/d": f2["t_sim"], f"σ²={alt:g}/d": res.figure2_other["t_sim"]},
                        ylabel="t_sim", title="token similarity (block inputs)")
    common.layer_curves(axes[1], {step: f2["xi_ratio"][:, :, i] for i, step in enumerate(STEPS)},
                        ylabel="ξ₁/ξ₂", title=f"ξ₁/ξ₂ of each step (σ²={vs:g}/d)", logy=True)
    common.layer_curves(axes[2], {"δ": f2["delta"], "ω": f2["omega"]}, ylabel="head average",
                        title="δ and ω (eq. 12)", logy=True)
    return fig


def fig3(res: Result) -> plt.Figure:
    """Figure 3: one trajectory with W redrawn — sample means against Estimates 1 and 2."""
    s, f3 = res.settings, res.figure3
    fig, axes = _panels(3, f"Figure 3 — one trajectory, {s['w_trials']} draws of W per block "
                           f"(σ²={s['value_scale']:g}/d)")
    common.layer_curves(axes[0], {"t_sim(X_ℓ)": f3["t_sim"]}, ylabel="t_sim", title="token similarity")
    common.layer_curves(axes[1], {"sample mean": f3["xi_minus_1"], "Estimate 1 (eq. 16)": f3["est1"],
                                  "Estimate 2 (eq. 17)": f3["est2"],
                                  "E[ξ₁]/E[ξ₂] − 1 (Lemma 2.4)": f3["exact_ratio_minus_1"]},
                        ylabel="ξ₁/ξ₂ − 1", title="ξ₁/ξ₂ − 1")
    common.layer_curves(axes[2], {"sample mean": f3["r"], "Estimate 1": f3["r_est1"], "Estimate 2": f3["r_est2"]},
                        ylabel="r(X, Y)", title="escalation rate")
    return fig


def fig4(res: Result) -> plt.Figure:
    """Figure 4: pre-norm similarity beside post-norm, and the norms inside the pre-norm block."""
    s, f4 = res.settings, res.figure4
    fig, axes = _panels(2, f"Figure 4 — pre-norm (eq. 19), depth {s['prenorm_depth']}, "
                           f"{f4['t_sim'].shape[0]} trials", width=10.0)
    common.layer_curves(axes[0], {"pre-norm": f4["t_sim"], "post-norm (Fig. 2)": res.figure2["t_sim"][:, :-1]},
                        ylabel="t_sim", title="token similarity", markers=False)
    common.layer_curves(axes[1], {"‖X‖_F": f4["norm_X"], "‖X̂‖_F": f4["norm_Xhat"], "‖P(X̂)X̂W‖_F": f4["norm_attn"]},
                        ylabel="Frobenius norm", title="norms in the pre-norm block", logy=True, markers=False)
    return fig


def fig5(res: Result) -> plt.Figure:
    """Figure 5: token diversity of every block output with de-escalation (eq. 21), per τ."""
    fig, axes = _panels(1, f"Figure 5 — token diversity with de-escalation, {res.settings['deesc_runs']} runs",
                        width=8.0)
    common.layer_curves(axes[0], {f"τ = {float(t):g}": v for t, v in res.figure5.items()}, ylabel="t_div",
                        markers=False)
    return fig


def identities_table(res: Result):
    """Prop. 2.3 to round-off and Lemma 2.4 by Monte Carlo."""
    lem, n = res.lemma24, res.settings["lemma_trials"]
    return common.table(pd.DataFrame({
        "quantity": ["max |r − (1 + (ξ₁/ξ₂ − 1) t_sim)| over 8 random pairs (Prop. 2.3)",
                     f"E[ξ₁]: Monte Carlo ({n} draws of W) vs Lemma 2.4",
                     f"E[ξ₂]: Monte Carlo ({n} draws of W) vs Lemma 2.4"],
        "measured": [f"{res.prop23_max_abs_error:.1e}", f"{lem['mc_xi1']:.4f} ± {lem['mc_xi1_se']:.4f}",
                     f"{lem['mc_xi2']:.4f} ± {lem['mc_xi2_se']:.4f}"],
        "theory": ["0", f"{lem['formula_xi1']:.4f}", f"{lem['formula_xi2']:.4f}"],
    }))


def _block(v: float | None) -> str:
    return "never" if v is None else str(int(v))


def _ratio(v: float) -> object:
    return "∞" if v == math.inf else v


def fig2_table(res: Result):
    """Figure 2 against the paper, under both readings of the value-map variance."""
    s, vs, paper = res.summary, res.settings["value_scale"], res.paper_fig2
    step1, others = paper["mean xi1/xi2 of step 1 at the first block"], paper["mean xi1/xi2 of steps 2-4"]
    rows = [
        ("mean ξ₁/ξ₂ of step 1, first block", step1, s["step1_ratio_first"], s["step1_ratio_first_other"]),
        ("mean ξ₁/ξ₂ of steps 2–4, all blocks (where defined)", others, _ratio(s["other_steps_ratio"]),
         _ratio(s["other_steps_ratio_other"])),
        ("mean ξ₁/ξ₂ of step 3 (FFN), first block", others, s["step3_ratio_first"], s["step3_ratio_first_other"]),
        ("first block with t_sim > 0.99", f"before {paper['first block where t_sim > 0.99']:g}",
         _block(s["first_block_above_099"]), _block(s["first_block_above_099_other"])),
    ]
    return common.table(pd.DataFrame(rows, columns=["quantity", "paper (Fig. 2)", f"ours, σ²={vs:g}/d",
                                                    f"ours, σ²={res.other_value_scale:g}/d"]))


def fig3_table(res: Result):
    """Figure 3: how close Estimates 1 and 2 come, the Lemma 2.4 check, and the late contraction."""
    s = res.summary
    return common.table(pd.DataFrame([
        ("mean |Estimate 1 − sample mean| of ξ₁/ξ₂ − 1", "larger than Est. 2", s["err_est1"]),
        ("mean |Estimate 2 − sample mean| of ξ₁/ξ₂ − 1", "closer", s["err_est2"]),
        ("max |MC E[ξ₁] − Lemma 2.4| / Lemma 2.4", "0", s["lemma24_max_rel_err"]),
        ("diversity contraction 1/r once t_sim > 0.9", "→ 1/2 (Remark 2.8)", s["late_contraction"]),
    ], columns=["quantity", "paper", "ours"]), digits=4)


def fig5_table(res: Result):
    """Figure 5: the last block's token diversity per τ against the paper's levels."""
    return common.table(pd.DataFrame({
        "τ": [f"{float(t):g}" for t in res.figure5],
        "paper (diversity level)": [res.paper_fig5.get(t, math.nan) for t in res.figure5],
        "ours (last block, mean)": [float(v[:, -1].mean()) for v in res.figure5.values()],
        "ours (sd over runs)": [float(v[:, -1].std()) for v in res.figure5.values()],
    }))


def _key(name: str) -> str:
    return name.replace("_", "-").replace(".", "p")


def publish(res: Result) -> None:
    """Glue every figure (`tse-fig1` … `tse-fig5`) and every number the prose quotes (`tse-<summary key>`,
    underscores as hyphens, plus the settings it names)."""
    for name, draw in (("fig1", fig1), ("fig2", fig2), ("fig3", fig3), ("fig4", fig4), ("fig5", fig5)):
        common.figure(f"tse-{name}", draw(res))
    numbers = {_key(k): (math.nan if v is None else float(v)) for k, v in res.summary.items()}
    numbers.update({_key(k): res.settings[k] for k in ("depth", "prenorm_depth", "hf_depth", "trials", "w_trials")})
    common.publish("tse", numbers)


__all__ = ["fig1", "fig2", "fig3", "fig4", "fig5", "identities_table", "fig2_table", "fig3_table",
           "fig5_table", "publish"]
