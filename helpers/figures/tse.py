"""Figures, tables and glued numbers of the tse chapter (Yu & Zhang Figures 1-5 and 8, the FFN's
share of the escalation, the bounds (11)), drawn from its Result."""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.ticker import MaxNLocator

from ..core.escalation import STEPS, log_odds_increments
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
                           f"{s['hf_batch']} CoLA sentences ({f1['bert']['real_tokens']} tokens)")
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
    init, other_init = _init_names(res)
    common.layer_curves(axes[0], {f"σ²={vs:g}/d, {init}": f2["t_sim"],
                                  f"σ²={alt:g}/d, {init}": res.figure2_other["t_sim"],
                                  f"σ²={vs:g}/d, {other_init}": res.figure2_init["t_sim"]},
                        ylabel="t_sim", title="token similarity (block inputs)")
    common.layer_curves(axes[1], {step: f2["xi_ratio"][:, :, i] for i, step in enumerate(STEPS)},
                        ylabel="ξ₁/ξ₂", title=f"ξ₁/ξ₂ of each step (σ²={vs:g}/d)", logy=True)
    common.layer_curves(axes[2], {"δ": f2["delta"], "ω": f2["omega"]}, ylabel="head average",
                        title="δ and ω (eq. 12)", logy=True)
    return fig


def _init_names(res: Result) -> tuple[str, str]:
    names = {"torch": "PyTorch-default FFN", "xavier": "Xavier FFN"}
    init = res.settings["ffn_init"]
    return names[init], names["xavier" if init == "torch" else "torch"]


def fig_ffn(res: Result) -> plt.Figure:
    """The FFN's part in the escalation: t_sim with the FFN as in the paper, Xavier-initialised, with a
    zero-mean activation and removed (a); and the per-block log-odds increments log(ξ₁/ξ₂) of steps 1
    (SA + residual) and 3 (FFN + residual) for both initialisations (b)."""
    init, other_init = _init_names(res)
    fig, axes = _panels(2, f"The FFN's share of the escalation — {res.settings['trials']} trials "
                           f"(σ²={res.settings['value_scale']:g}/d)", width=11.0)
    abl = res.figure2_ablation
    common.layer_curves(axes[0], {f"ReLU FFN, {init}": res.figure2["t_sim"],
                                  f"ReLU FFN, {other_init}": res.figure2_init["t_sim"],
                                  "zero-mean (centred) ReLU": abl["centred-relu"]["t_sim"],
                                  "FFN removed": abl["none"]["t_sim"]},
                        ylabel="t_sim", title="(a) token similarity (block inputs)", markers=False)
    axes[0].axhline(0.99, color="k", lw=0.6, ls=":")
    inc, inc_o = log_odds_increments(res.figure2["xi_ratio"]), log_odds_increments(res.figure2_init["xi_ratio"])
    common.layer_curves(axes[1], {f"step 1 (SA), {init}": inc[:, :, 0], f"step 3 (FFN), {init}": inc[:, :, 2],
                                  f"step 1 (SA), {other_init}": inc_o[:, :, 0],
                                  f"step 3 (FFN), {other_init}": inc_o[:, :, 2]},
                        ylabel="log(ξ₁/ξ₂) = growth of log-odds of t_sim",
                        title="(b) log-odds increment per step (Prop. 2.3)")
    return fig


def fig8(res: Result) -> plt.Figure:
    """Figure 8: the sample mean of η = E[ξ₁]/E[ξ₂] − ξ₁/ξ₂ over the paper's 50 draws of W, with ±2 standard
    errors (a); E[η] from many draws (b); the spread of η over draws (c) — against t, one curve per d."""
    s, f8 = res.settings, res.figure8
    fig, axes = _panels(3, f"Figure 8 — η over draws of W ~ N(0, I/d), X = e vᵀ + tQ, n = {s['eta_n']}",
                        width=13.0)
    ts = np.asarray(s["eta_ts"], dtype=float)
    for i, d in enumerate(s["eta_dims"]):
        for ax, key in ((axes[0], "paper"), (axes[1], "precise")):
            m, se = np.asarray(f8[key]["mean"][i]), np.asarray(f8[key]["se"][i])
            line, = ax.plot(ts, m, marker="o", ms=3, label=f"d = {d}")
            ax.fill_between(ts, m - 2 * se, m + 2 * se, color=line.get_color(), alpha=0.15, lw=0)
        axes[2].plot(ts, f8["precise"]["sd"][i], marker="o", ms=3, label=f"d = {d}")
    titles = (f"(a) mean of η, {s['eta_draws']} draws (paper)", f"(b) mean of η, {s['eta_draws_precise']} draws",
              "(c) sd of η over draws")
    for ax, title in zip(axes, titles, strict=True):
        ax.set_xlabel("t (size of the perturbation)")
        ax.set_title(title)
        ax.legend(fontsize=8)
        ax.xaxis.set_major_locator(plt.MaxNLocator(6))
    axes[0].axhline(0, color="k", lw=0.6)
    axes[1].axhline(0, color="k", lw=0.6)
    axes[0].set_ylabel("η")
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
    """Figure 2 against the paper, under both readings of the value-map variance and with the other FFN
    initialisation; the shares of log-odds growth over the first blocks."""
    s, vs, paper = res.summary, res.settings["value_scale"], res.paper_fig2
    step1, others = paper["mean xi1/xi2 of step 1 at the first block"], paper["mean xi1/xi2 of steps 2-4"]
    init, other_init = _init_names(res)
    last = int(s["share_last_block"])
    rows = [
        ("mean ξ₁/ξ₂ of step 1, first block", step1, s["step1_ratio_first"], s["step1_ratio_first_other"], "—"),
        ("mean ξ₁/ξ₂ of steps 2–4, all blocks (where defined)", others, _ratio(s["other_steps_ratio"]),
         _ratio(s["other_steps_ratio_other"]), "—"),
        ("mean ξ₁/ξ₂ of step 3 (FFN), first block", others, s["step3_ratio_first"], s["step3_ratio_first_other"],
         s["step3_ratio_first_init"]),
        ("first block with t_sim > 0.99", f"before {paper['first block where t_sim > 0.99']:g}",
         _block(s["first_block_above_099"]), _block(s["first_block_above_099_other"]),
         _block(s["first_block_above_099_init"])),
        (f"share of log-odds growth, blocks 0–{last}: step 1 (SA)", "— (steps 2–4 'negligible')", s["attn_share"],
         "—", s["attn_share_init"]),
        (f"share of log-odds growth, blocks 0–{last}: step 3 (FFN)", "— ('negligible')", s["ffn_share"], "—",
         s["ffn_share_init"]),
    ]
    return common.table(pd.DataFrame(rows, columns=["quantity", "paper (Fig. 2)", f"ours, σ²={vs:g}/d, {init}",
                                                    f"ours, σ²={res.other_value_scale:g}/d, {init}",
                                                    f"ours, σ²={vs:g}/d, {other_init}"]))


def ablation_table(res: Result):
    """The FFN ablations: first block with t_sim > 0.99 and block 0's step-3 ratio."""
    s = res.summary
    return common.table(pd.DataFrame([
        ("ReLU FFN (paper)", s["step3_ratio_first"], _block(s["first_block_above_099"])),
        ("zero-mean (centred) ReLU", s["step3_ratio_first_centred"], _block(s["first_block_above_099_centred"])),
        ("FFN removed", 1.0, _block(s["first_block_above_099_none"])),
    ], columns=["FFN of step 3", "ξ₁/ξ₂ of step 3, block 0", "first block with t_sim > 0.99"]))


def bounds_table(res: Result):
    """Lemma 2.4's bounds (11) on generic row-stochastic P: the smallest slack of each (≥ 0 when it holds)."""
    b = res.bounds11
    return common.table(pd.DataFrame({
        "family of P": list(b),
        "min μ₁² − (1 − ω)²": [v["min_slack_mu1"] for v in b.values()],
        "min δ² − μ₂²": [v["min_slack_mu2"] for v in b.values()],
        "mean ω": [v["omega"] for v in b.values()], "mean δ": [v["delta"] for v in b.values()],
    }), digits=3).set_caption(f"{res.settings['bound_samples']} random (X, P) per family, "
                              f"n = {res.settings['bound_n']}, d = {res.settings['bound_d']}, float64")


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
    """Figure 5: the last block's token diversity per τ against the paper's levels, under both readings."""
    vs, alt = res.settings["value_scale"], res.other_value_scale
    return common.table(pd.DataFrame({
        "τ": [f"{float(t):g}" for t in res.figure5],
        "paper (diversity level)": [res.paper_fig5.get(t, math.nan) for t in res.figure5],
        f"ours, σ²={vs:g}/d (last block, mean)": [float(v[:, -1].mean()) for v in res.figure5.values()],
        "(sd over runs)": [float(v[:, -1].std()) for v in res.figure5.values()],
        f"ours, σ²={alt:g}/d (last block, mean)": [float(v[:, -1].mean()) for v in res.figure5_other.values()],
    }))


def _key(name: str) -> str:
    return name.replace("_", "-").replace(".", "p")


def publish(res: Result) -> None:
    """Glue every figure (`tse-fig1` … `tse-fig5`, `tse-ffn`, `tse-fig8`) and every number the prose quotes
    (`tse-<summary key>`, underscores as hyphens, plus the settings it names)."""
    for name, draw in (("fig1", fig1), ("fig2", fig2), ("ffn", fig_ffn), ("fig3", fig3), ("fig4", fig4),
                       ("fig5", fig5), ("fig8", fig8)):
        common.figure(f"tse-{name}", draw(res))
    numbers = {_key(k): (math.nan if v is None else float(v)) for k, v in res.summary.items()}
    numbers.update({_key(k): res.settings[k] for k in ("depth", "prenorm_depth", "hf_depth", "trials", "w_trials",
                                                       "eta_draws", "eta_draws_precise", "eta_n", "bound_samples")})
    numbers["eta-d-first"], numbers["eta-d-last"] = res.settings["eta_dims"][0], res.settings["eta_dims"][-1]
    common.publish("tse", numbers)


__all__ = ["fig1", "fig2", "fig_ffn", "fig3", "fig4", "fig5", "fig8", "identities_table", "fig2_table",
           "ablation_table", "bounds_table", "fig3_table", "fig5_table", "publish"]
