"""Figures, tables and glued numbers of the tse chapter (the paper's Figs. 1-5 and 8, the FFN's share of
the escalation, the τ sweep, the bounds (11)), drawn from its Result; the statistics are the Result's
(`findings`, `ffn_share`, `tau_threshold`, ...)."""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.ticker import MaxNLocator

from ..core.escalation import STEPS, log_odds_increments
from ..experiments.tse import Result
from . import common

TSIM, TCOS, TDIV, XI = r"$t_{\rm sim}$", r"$t_{\rm cos}$", r"$t_{\rm div}$", r"$\xi_1/\xi_2$"
#: the page shows a figure about 5.7 inches wide (its text column, `common.COLUMN_PX`, at the figures' 120 dpi): text
#: of `size` points in a figure `width` inches wide appears at size · 5.7 / width points; the book wants at least 6.6
#: (11 px; `common.figure` raises any smaller text to it)
PAGE_INCHES, MIN_POINTS = 5.7, 6.6


def _panels(n: int, width: float | None = None, height: float = 3.6) -> tuple[plt.Figure, np.ndarray]:
    """`n` panels side by side, no figure title (the caption names the figure)."""
    common.set_theme()
    width = width or {1: 5.5, 2: 7.5}.get(n, 8.5)
    fig, axes = plt.subplots(1, n, figsize=(width, height))
    for ax in np.atleast_1d(axes):
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))     # blocks are whole numbers
    return fig, np.atleast_1d(axes)


def _legible(fig: plt.Figure) -> plt.Figure:
    """Every tick, label, title and legend at least `MIN_POINTS` as shown on the page."""
    size = MIN_POINTS * fig.get_figwidth() / PAGE_INCHES
    for ax in fig.axes:
        ax.tick_params(labelsize=size)
        for text in (ax.xaxis.label, ax.yaxis.label, ax.title):
            text.set_size(max(text.get_size(), size + 0.5))
        if ax.get_legend() is not None:
            for t in ax.get_legend().get_texts():
                t.set_fontsize(size)
    return fig


def fig1(res: Result) -> plt.Figure:
    """Figure 1: t_sim, t_cos and the per-layer gradient norm of random-init BERT / ALBERT."""
    f1 = res.figure1
    fig, axes = _panels(3)
    common.layer_curves(axes[0], {k.upper(): v.t_sim for k, v in f1.items()}, ylabel=TSIM,
                        title="token similarity", markers=False, xlabel="layer")
    common.layer_curves(axes[1], {k.upper(): v.t_cos for k, v in f1.items()}, ylabel=TCOS,
                        title="cosine similarity", markers=False, xlabel="layer")
    common.layer_curves(axes[2], {"BERT": f1["bert"].grad_norm}, x0=1, ylabel=r"$\|\partial L/\partial\theta\|$",
                        title="gradient norm (BERT)", logy=True, markers=False, xlabel="layer")
    return _legible(fig)


def fig2(res: Result) -> plt.Figure:
    """Figure 2: post-norm t_sim under both readings of the value-map variance, ξ₁/ξ₂ per step, δ and ω."""
    f2, vs, alt = res.figure2, res.settings.value_scale, res.other_value_scale
    fig, axes = _panels(3)
    init, other_init = _init_names(res)
    common.layer_curves(axes[0], {f"$\\sigma^2$={vs:g}/d, {init}": f2.t_sim,
                                  f"$\\sigma^2$={alt:g}/d, {init}": res.figure2_other.t_sim,
                                  f"$\\sigma^2$={vs:g}/d, {other_init}": res.figure2_init.t_sim},
                        ylabel=TSIM, title="token similarity")
    common.layer_curves(axes[1], {step.split(":")[0]: f2.xi_ratio[:, :, i] for i, step in enumerate(STEPS)},
                        ylabel=XI, title=f"{XI} of each step")
    axes[0].legend(loc="lower right")
    common.layer_curves(axes[2], {r"$\delta$": f2.delta, r"$\omega$": f2.omega}, ylabel="head average",
                        title=r"$\delta$ and $\omega$ (eq. 12)", logy=True)
    return _legible(fig)


def _init_names(res: Result) -> tuple[str, str]:
    names = {"torch": "PyTorch FFN", "xavier": "Xavier FFN"}
    init = res.settings.ffn_init
    return names[init], names["xavier" if init == "torch" else "torch"]


def fig_ffn(res: Result) -> plt.Figure:
    """The FFN's part in the escalation: t_sim with the FFN as in the paper, Xavier-initialised, with a
    zero-mean activation and removed (a); and the per-block log-odds increments log(ξ₁/ξ₂) of steps 1
    (SA + residual) and 3 (FFN + residual) for both initialisations (b)."""
    init, other_init = _init_names(res)
    fig, axes = _panels(2, height=4.0)
    abl = res.figure2_ablation
    common.layer_curves(axes[0], {f"ReLU, {init}": res.figure2.t_sim,
                                  f"ReLU, {other_init}": res.figure2_init.t_sim,
                                  "zero-mean ReLU": abl["centred-relu"].t_sim,
                                  "FFN removed": abl["none"].t_sim},
                        ylabel=TSIM, title="(a) token similarity", markers=False)
    axes[0].axhline(0.99, color="k", lw=0.6, ls=":")
    inc, inc_o = log_odds_increments(res.figure2.xi_ratio), log_odds_increments(res.figure2_init.xi_ratio)
    common.layer_curves(axes[1], {f"SA, {init}": inc[:, :, 0], f"FFN, {init}": inc[:, :, 2],
                                  f"SA, {other_init}": inc_o[:, :, 0], f"FFN, {other_init}": inc_o[:, :, 2]},
                        ylabel=r"$\log(\xi_1/\xi_2)$", title="(b) log-odds increment per step")
    return _legible(fig)


def fig8(res: Result) -> plt.Figure:
    """Figure 8: the sample mean of η = E[ξ₁]/E[ξ₂] − ξ₁/ξ₂ over the paper's 50 draws of W, with ±2 standard
    errors (a); E[η] from many draws (b); the spread of η over draws (c) — against t, one curve per d."""
    s, f8 = res.settings, res.figure8
    fig, axes = _panels(3)
    ts = np.asarray(s.eta_ts, dtype=float)
    for i, d in enumerate(s.eta_dims):
        for ax, key in ((axes[0], "paper"), (axes[1], "precise")):
            m, se = np.asarray(f8[key].mean[i]), np.asarray(f8[key].se[i])
            line, = ax.plot(ts, m, marker="o", ms=3, label=f"d = {d}")
            ax.fill_between(ts, m - 2 * se, m + 2 * se, color=line.get_color(), alpha=0.15, lw=0)
        axes[2].plot(ts, f8["precise"].sd[i], marker="o", ms=3, label=f"d = {d}")
    titles = (rf"(a) mean of $\eta$, {s.eta_draws} draws", rf"(b) mean of $\eta$, {s.eta_draws_precise} draws",
              r"(c) sd of $\eta$ over draws")
    for ax, title in zip(axes, titles, strict=True):
        ax.set_xlabel("perturbation size t")
        ax.set_title(title)
        ax.xaxis.set_major_locator(plt.MaxNLocator(5))
    axes[2].legend()
    axes[0].axhline(0, color="k", lw=0.6)
    axes[1].axhline(0, color="k", lw=0.6)
    axes[0].set_ylabel(r"$\eta$")
    return _legible(fig)


def fig3(res: Result) -> plt.Figure:
    """Figure 3: one trajectory with W redrawn — sample means against Estimates 1 and 2."""
    f3 = res.figure3
    fig, axes = _panels(3)
    common.layer_curves(axes[0], {r"$t_{\rm sim}(X_\ell)$": f3.t_sim}, ylabel=TSIM, title="token similarity")
    common.layer_curves(axes[1], {"sample mean": f3.xi_minus_1, "Est. 1 (16)": f3.est1,
                                  "Est. 2 (17)": f3.est2, "Lemma 2.4": f3.exact_ratio_minus_1},
                        ylabel=XI + " − 1", title=XI + " − 1")
    common.layer_curves(axes[2], {"sample mean": f3.r, "Est. 1": f3.r_est1, "Est. 2": f3.r_est2},
                        ylabel=r"$r(X, Y)$", title="escalation rate")
    axes[0].get_legend().remove() if axes[0].get_legend() else None
    return _legible(fig)


def fig4(res: Result) -> plt.Figure:
    """Figure 4: pre-norm similarity beside post-norm, and the norms inside the pre-norm block."""
    f4 = res.figure4
    fig, axes = _panels(2)
    common.layer_curves(axes[0], {"pre-norm": f4.t_sim, "post-norm": res.figure2.t_sim[:, :-1]},
                        ylabel=TSIM, title="token similarity", markers=False)
    common.layer_curves(axes[1], {r"$\|X\|_F$": f4.norm_X, r"$\|\hat X\|_F$": f4.norm_Xhat,
                                  r"$\|P(\hat X)\hat XW\|_F$": f4.norm_attn},
                        ylabel="Frobenius norm", title="norms in the pre-norm block", logy=True, markers=False)
    return _legible(fig)


def fig5(res: Result) -> plt.Figure:
    """Figure 5: token diversity of every block output with de-escalation (eq. 21), per τ."""
    fig, axes = _panels(1)
    common.layer_curves(axes[0], {rf"$\tau$ = {float(t):g}": v for t, v in res.figure5.items()}, ylabel=TDIV,
                        markers=False)
    return _legible(fig)


def fig_sweep(res: Result) -> plt.Figure:
    """The τ sweep: the last block's token diversity against τ (mean ± 1 sd over runs), with τ* and the
    measured threshold; and the diversity through the stack for every τ."""
    sw = res.tau_sweep
    taus = np.asarray(sw.taus, dtype=float)
    fig, axes = _panels(2)
    axes[0].xaxis.set_major_locator(plt.MaxNLocator(6))
    m, sd = res.sweep_last_spread()
    axes[0].plot(taus, m, marker="o", ms=3, color="C0", label="last block")
    axes[0].fill_between(taus, m - sd, m + sd, color="C0", alpha=0.2, lw=0)
    axes[0].axvline(res.tau_star(), color="k", ls=":", lw=1, label=r"$\tau^*$")
    axes[0].axvline(res.tau_threshold().estimate, color="C3", ls="--", lw=1, label="measured")
    axes[0].set_xlabel(r"$\tau$")
    axes[0].set_ylabel(TDIV)
    axes[0].set_title("diversity at the last block")
    axes[0].legend(loc="lower right")
    cmap = plt.get_cmap("viridis")
    for i, tau in enumerate(taus):
        axes[1].plot(np.asarray(sw.t_div[i]), color=cmap(tau), lw=1)
    sm = plt.cm.ScalarMappable(cmap=cmap, norm=plt.Normalize(0, 1))
    fig.colorbar(sm, ax=axes[1], label=r"$\tau$")
    axes[1].set_xlabel("block")
    axes[1].set_title("diversity through the stack")
    return _legible(fig)


def identities_table(res: Result):
    """Prop. 2.3 to round-off and Lemma 2.4 by Monte Carlo."""
    n = res.settings.lemma_trials
    rows = [("max |r − (1 + (ξ₁/ξ₂ − 1) t_sim)| over 8 random pairs (Prop. 2.3)",
             f"{res.prop23_max_abs_error:.1e}", "0", "—")]
    for heads, lem, name in (("single", res.lemma24_single, "one head (Lemma 2.4)"),
                             ("multi", res.lemma24, f"{res.settings.n_heads} heads (Prop. 2.9)")):
        if not lem:
            continue
        se = res.lemma24_se(heads)
        for k, xi in (("xi1", "ξ₁"), ("xi2", "ξ₂")):
            mc, mc_se, formula = getattr(lem, f"mc_{k}"), getattr(lem, f"mc_{k}_se"), getattr(lem, f"formula_{k}")
            dg = max(2, 1 - math.floor(math.log10(mc_se)))     # two significant digits of the SE
            rows.append((f"E[{xi}], {name}: Monte Carlo ({n} draws of W) vs the formula",
                         f"{mc:.{dg}f} ± {mc_se:.{dg}f}", f"{formula:.{dg}f}", f"{se[k]:.1f} SE"))
    return common.table(pd.DataFrame(rows, columns=["quantity", "measured", "theory", "distance"]))


def _block(v: float | None) -> str:
    return "never" if v is None else str(int(v))


def _ratio(v: float) -> object:
    return "∞" if v == math.inf else v


def fig2_table(res: Result):
    """The paper's Fig. 2 statements against ours, under both readings of the value-map variance and
    with the other FFN initialisation."""
    s, vs, paper = res.summary, res.settings.value_scale, res.paper_fig2
    step1, others = paper["mean xi1/xi2 of step 1 at the first block"], paper["mean xi1/xi2 of steps 2-4"]
    rows = [
        ("ξ₁/ξ₂ of step 1, block 0", step1, s.step1_ratio_first, s.step1_ratio_first_other, "—"),
        ("ξ₁/ξ₂ of steps 2–4, all blocks", others, _ratio(s.other_steps_ratio),
         _ratio(s.other_steps_ratio_other), "—"),
        ("ξ₁/ξ₂ of step 3 (FFN), block 0", others, s.step3_ratio_first, s.step3_ratio_first_other,
         s.step3_ratio_first_init),
        ("first block with t_sim > 0.99", f"< {paper['first block where t_sim > 0.99']:g}",
         _block(s.first_block_above_099), _block(s.first_block_above_099_other),
         _block(s.first_block_above_099_init)),
    ]
    _, other_init = _init_names(res)
    return common.table(pd.DataFrame(rows, columns=["mean over trials", "paper", f"ours (σ² = {vs:g}/d)",
                                                    f"σ² = {res.other_value_scale:g}/d", other_init]), digits=2)


def share_table(res: Result):
    """The FFN step's share of the log-odds growth of t_sim over the first blocks, over the whole
    escalation (until t_sim passes 0.99) and over all blocks, per FFN initialisation (mean over trials
    with its 95 % t-interval)."""
    init, other_init = _init_names(res)
    depth, first = res.settings.depth, res.settings.share_blocks
    sat, sat_o = res.saturation_block("run"), res.saturation_block("other")
    rows = [(f"blocks 0–{first - 1}", res.ffn_share("run", first).text(2, signed=False),
             res.ffn_share("other", first).text(2, signed=False)),
            (f"the escalation: blocks 0–{(sat or depth) - 1} / 0–{(sat_o or depth) - 1}",
             res.ffn_share("run").text(2, signed=False), res.ffn_share("other").text(2, signed=False)),
            (f"all {depth} blocks", res.ffn_share("run", depth).text(2, signed=False),
             res.ffn_share("other", depth).text(2, signed=False))]
    return common.table(pd.DataFrame(rows, columns=["FFN share of the growth over", init, other_init]))


def ablation_table(res: Result):
    """The FFN ablations: first block with t_sim > 0.99 and block 0's step-3 ratio."""
    s = res.summary
    return common.table(pd.DataFrame([
        ("ReLU FFN (§2.4)", s.step3_ratio_first, _block(s.first_block_above_099)),
        ("zero-mean (centred) ReLU", s.step3_ratio_first_centred, _block(s.first_block_above_099_centred)),
        ("FFN removed", 1.0, _block(s.first_block_above_099_none)),
    ], columns=["FFN of step 3", "ξ₁/ξ₂ of step 3, block 0", "first block with t_sim > 0.99"]))


def bounds_table(res: Result):
    """Lemma 2.4's bounds (11) on generic row-stochastic P: the smallest slack of each (≥ 0 when it holds)."""
    b = res.bounds11
    return common.table(pd.DataFrame({
        "family of P": list(b),
        "min μ₁² − (1 − ω)²": [v.min_slack_mu1 for v in b.values()],
        "min δ² − μ₂²": [v.min_slack_mu2 for v in b.values()],
        "mean ω": [v.omega for v in b.values()], "mean δ": [v.delta for v in b.values()],
    }), digits=3).set_caption(f"{res.settings.bound_samples} random (X, P) per family, "
                              f"n = {res.settings.bound_n}, d = {res.settings.bound_d}, float64")


def fig3_table(res: Result):
    """Figure 3: how close Estimates 1 and 2 come, the Lemma 2.4 check, and the late contraction."""
    s = res.summary
    return common.table(pd.DataFrame([
        ("mean |Estimate 1 − sample mean| of ξ₁/ξ₂ − 1", "larger than Est. 2", s.err_est1),
        ("mean |Estimate 2 − sample mean| of ξ₁/ξ₂ − 1", "closer", s.err_est2),
        ("max |MC E[ξ₁] − Lemma 2.4| / Lemma 2.4", "0", s.lemma24_max_rel_err),
        ("diversity contraction 1/r once t_sim > 0.9", "→ 1/2 (Remark 2.8)", s.late_contraction),
    ], columns=["quantity", "paper", "ours"]), digits=4)


def fig5_table(res: Result):
    """The last block's token diversity per τ (mean over runs) against the paper's levels (its Fig. 5), under
    both readings of the value-map variance."""
    vs, alt, s = res.settings.value_scale, res.other_value_scale, res.summary
    return common.table(pd.DataFrame({
        "τ": [f"{float(t):g}" for t in res.figure5],
        "paper": [res.paper_fig5.get(t, math.nan) for t in res.figure5],
        f"ours (σ² = {vs:g}/d)": [s.tdiv_last[t] for t in res.figure5],
        "sd over runs": [s.tdiv_last_sd[t] for t in res.figure5],
        f"σ² = {alt:g}/d": [s.tdiv_last_other[t] for t in res.figure5_other],
    }))


def publish(res: Result) -> None:
    """Glue every figure and every number the prose quotes (one literal dict)."""
    for name, draw in (("tse-fig1", fig1), ("tse-fig2", fig2), ("tse-ffn", fig_ffn), ("tse-fig3", fig3),
                       ("tse-fig4", fig4), ("tse-fig5", fig5), ("tse-sweep", fig_sweep), ("tse-fig8", fig8)):
        common.figure(name, draw(res))
    s, st = res.summary, res.settings
    fs = {f.key: f for f in res.findings()}

    def block(v: float | None) -> float:
        return math.nan if v is None else float(v)
    common.publish({
        "tse-hf-depth": st.hf_depth, "tse-hf-sentences": s.hf_sentences,
        "tse-hf-real-tokens": s.hf_real_tokens,
        "tse-bert-tsim-last": s.bert_tsim_last, "tse-bert-tcos-last": s.bert_tcos_last,
        "tse-albert-tsim-last": s.albert_tsim_last, "tse-albert-tcos-last": s.albert_tcos_last,
        "tse-grad-min": s.grad_min, "tse-grad-max": s.grad_max, "tse-grad-layers": s.grad_layers,
        "tse-grad-factor": s.grad_factor, "tse-grad-step-max": s.grad_step_max,
        "tse-bert-odds-factor": res.bert_odds_factor(), "tse-eq18-factor": res.eq18_factor(),
        "tse-hf-inits": len(res.bert_step_factors()), "tse-eq18-margin": fs["tse-fig1-eq18"].margin,
        "tse-bert-attn-factor": res.bert_attention_factor().text(4, signed=False),
        "tse-bert-ffn-share": res.bert_share((2,)).text(2), "tse-bert-ln-share": res.bert_share((1, 3)).estimate,
        "tse-lemma-se-xi1": res.lemma24_se()["xi1"], "tse-lemma-se-xi2": res.lemma24_se()["xi2"],
        "tse-fig1-interval": fs["tse-fig1"].effect.text(4, signed=False),
        "tse-estimate-gap": fs["tse-estimate2"].effect.text(3, signed=False),
        "tse-late-rate": fs["tse-remark28-rate"].effect.text(3, signed=False),
        "tse-n": st.n_tokens, "tse-d": st.d_model, "tse-heads": st.n_heads, "tse-alpha": st.alpha,
        "tse-ffn-mult": st.ffn_mult, "tse-hf-hidden": st.hf_hidden,
        "tse-remark28-factor": res.remark28_factor(), "tse-remark28-rate": 1 / res.remark28_factor(),
        "tse-sweep-step": round(float(st.sweep_taus[1] - st.sweep_taus[0]), 6),
        "tse-trials": st.trials, "tse-depth": st.depth, "tse-w-trials": st.w_trials,
        "tse-step1-ratio-first": s.step1_ratio_first,
        "tse-step3-ratio-first": s.step3_ratio_first, "tse-step3-ratio-first-init": s.step3_ratio_first_init,
        "tse-step3-ratio-first-centred": s.step3_ratio_first_centred,
        "tse-first-block-above-099": block(s.first_block_above_099),
        "tse-first-block-above-099-init": block(s.first_block_above_099_init),
        "tse-first-block-above-099-none": block(s.first_block_above_099_none),
        "tse-ffn-share-first": res.ffn_share("run", st.share_blocks).estimate,
        "tse-ffn-share-first-init": res.ffn_share("other", st.share_blocks).estimate,
        "tse-ffn-share": res.ffn_share("run").estimate, "tse-ffn-share-init": res.ffn_share("other").estimate,
        "tse-ffn-share-all": res.ffn_share("run", st.depth).estimate,
        "tse-ffn-share-all-init": res.ffn_share("other", st.depth).estimate,
        "tse-ffn-margin": fs["tse-ffn-negligible"].margin,
        "tse-ln-share": res.share((1, 3)).estimate,
        "tse-postnorm-tsim-last": s.postnorm_tsim_last, "tse-prenorm-depth": st.prenorm_depth,
        "tse-prenorm-tsim-last": s.prenorm_tsim_last, "tse-prenorm-normX-first": s.prenorm_normX_first,
        "tse-prenorm-normX-last": s.prenorm_normX_last, "tse-prenorm-normXhat": s.prenorm_normXhat,
        "tse-prenorm-normattn": s.prenorm_normattn,
        "tse-tdiv-last-tau-0p1": s.tdiv_last["0.1"], "tse-tdiv-last-tau-0p5": s.tdiv_last["0.5"],
        "tse-tdiv-last-other-tau-0p1": s.tdiv_last_other["0.1"],
        "tse-tdiv-last-other-tau-0p5": s.tdiv_last_other["0.5"],
        "tse-tau-star": res.tau_star(), "tse-tau-threshold": res.tau_threshold().estimate,
        "tse-tau-threshold-low": res.tau_threshold().low, "tse-tau-threshold-high": res.tau_threshold().high,
        "tse-tau-implied": res.tau_implied(), "tse-sweep-runs": res.tau_sweep.runs,
        "tse-deesc-depth": st.deesc_depth,
        "tse-bound-samples": st.bound_samples, "tse-bound-min-slack-mu1": s.bound_min_slack_mu1,
        "tse-bound-min-slack-mu2": s.bound_min_slack_mu2,
        "tse-eta-n": st.eta_n, "tse-eta-draws": st.eta_draws, "tse-eta-draws-precise": st.eta_draws_precise,
        "tse-eta-d-first": st.eta_dims[0], "tse-eta-d-last": st.eta_dims[-1],
        "tse-eta-paper-absmax-first-d": s.eta_paper_absmax_first_d,
        "tse-eta-paper-absmax-last-d": s.eta_paper_absmax_last_d,
        "tse-eta-sd-first-d": s.eta_sd_first_d, "tse-eta-sd-last-d": s.eta_sd_last_d,
        "tse-eta-precise-absmax-last-d": s.eta_precise_absmax_last_d,
    })


__all__ = ["fig1", "fig2", "fig_ffn", "fig3", "fig4", "fig5", "fig_sweep", "fig8", "identities_table", "fig2_table",
           "share_table", "ablation_table", "bounds_table", "fig3_table", "fig5_table", "publish"]
