"""The tse chapter's findings, declared as data: `FINDINGS` is a table of specs, one per finding in the order of
the chapter's sections (where two test one claim, the closer test comes first: Prop. 2.9's Monte Carlo check before
its reading on BERT; the τ threshold is the chapter's own question), and `findings(res)` turns it into `Finding`s.

A spec's key is written here once. Its other columns are values or functions of the `Result` (`R`): `effect` is the
quantity read (an `Interval`), `setting` the Params fields a run may reduce from the paper's (they make the
finding's `reduced` and `scale`), `when` whether the result holds what the finding needs."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from helpers.core.findings import Finding, Partial, Spec
from helpers.core.stats import Interval, t_interval

from .params import FFN_INIT_NAMES, Params

if TYPE_CHECKING:
    from .result import Result as R
else:
    R = Any

#: how a reduced setting reads, per Params field ("d = 256 of 512")
LABELS = {"n_tokens": "n = {} of {}", "d_model": "d = {} of {}", "depth": "depth {} of {}",
          "trials": "{} of {} trials", "w_trials": "{} of {} draws of W", "prenorm_depth": "depth {} of {}",
          "deesc_depth": "depth {} of {}", "deesc_runs": "{} of {} runs", "hf_depth": "depth {} of {}",
          "hf_batch": "{} of {} sentences", "lemma_trials": "{} of {} draws",
          "eta_draws_precise": "{} of {} draws", "bound_samples": "{} of {} samples"}
SYNTH = ("n_tokens", "d_model")
FIG1 = ("hf_depth", "hf_batch")


def reduced(res: R, *names: str) -> str:
    """How the run's Params fall short of the paper's for the fields `names` ("d = 256 of 512, 6 of 50
    trials"); "" at the paper's setting."""
    paper, st = Params.resolve("paper"), res.settings
    return ", ".join(LABELS[k].format(getattr(st, k), getattr(paper, k)) for k in names
                     if getattr(st, k) != getattr(paper, k))


#: what the findings' intervals are taken over (the unit each claim is about: random stacks drawn at initialisation,
#: the blocks of one stack, Monte Carlo draws of the weights; each row names its own)
TRIALS, BLOCKS, DRAWS = "random stacks (trials)", "blocks", "Monte Carlo draws of the weights"


def build(spec: Spec, res: R) -> Finding:
    """The `Finding` a spec gives on `res`; its `setting` names the Params fields whose reduction it states."""
    red = reduced(res, *(spec.setting or ()))
    return spec.finding(res, paper="yu2024", chapter="tse", reduced=red,
                        scale=f"{res.scale}: {red}" if red else f"{res.scale}: the paper's setting")


def findings(res: R) -> list[Finding]:
    """The paper's claims of §1-3.2 and Appendix A this chapter tests, computed from the runs, in the chapter's
    order (`FINDINGS`)."""
    return [build(s, res) for s in FINDINGS if s.when(res)]


# ------------------------------------------------------------------ the settings the findings describe


def stacks(res: R) -> str:
    st = res.settings
    return (f"Algorithm-1 stacks at initialisation, n = {st.n_tokens}, d = {st.d_model}, h = {st.n_heads}, "
            f"σ² = {st.value_scale:g}/d, {FFN_INIT_NAMES[st.ffn_init]} FFN")


def trials(res: R) -> str:
    return f"{res.settings.trials} {stacks(res)}, depth {res.settings.depth}"


def redrawn(res: R) -> str:
    st = res.settings
    return f"one {stacks(res)}, depth {st.depth}, step-1 value maps redrawn {st.w_trials} times per block"


def bert(res: R) -> str:
    st = res.settings
    return f"random-init transformers BERT and ALBERT of depth {st.hf_depth} on {st.hf_batch} CoLA sentences"


def head_setting(res: R, maps: str) -> str:
    st = res.settings
    return f"n = {st.n_tokens}, d = {st.d_model}; {st.lemma_trials} draws of {maps}"


def delta_omega(res: R) -> Interval:
    return t_interval(np.maximum(res.figure2.delta[:, 0], res.figure2.omega[:, 0]))


def prenorm_block(res: R) -> int:
    """The block at which pre-norm is set beside post-norm: post-norm's depth, or pre-norm's last block."""
    return min(res.settings.depth, res.figure4.t_sim.shape[1] - 1)


def fig5(key: str, tau: str, level: float) -> Spec:
    """Figure 5 at one τ: the last block's t_div against the paper's level. At τ = 1 eq. (21) removes the whole
    token mean, and a matrix with zero mean has t_div 1 by definition: an exact value, not a sample."""
    def last(res: R) -> np.ndarray:
        return res.figure5[tau][:, -1]

    def identity(res: R) -> bool:
        return tau == "1.0" and float(np.abs(last(res) - 1).max()) < 1e-9

    return Spec(
        key=key, where="Fig. 5", claim_id="yu-fig5",
        claim=f"With de-escalation after every block, token diversity levels off near {level:g} at "
              f"τ = {float(tau):g}.",
        measured=lambda res: f"{last(res).size} de-escalated {stacks(res)}, depth {res.settings.deesc_depth}",
        quantity=f"the last block's t_div at τ = {float(tau):g}, mean over runs",
        read=lambda res: Partial(Interval.exact(float(last(res).mean())) if identity(res) else t_interval(last(res))),
        direction="equal", reference=lambda res: res.paper_fig5[tau], reference_label=f"the paper's {level:g}",
        # at τ = 1 the level is an identity of eq. (21): a check of the code, not a test that could fail
        kind="control" if tau == "1.0" else "claim", margin=0.1, section="tse-fig5",
        setting=(*SYNTH, "deesc_depth", "deesc_runs"),
        when=lambda res: tau in res.figure5 and tau in res.paper_fig5,
        more=dict(unit="runs", label=f"τ = {float(tau):g}", tolerance=lambda res: 1e-9 if identity(res) else None,
                  exact_why=lambda res: (
                      f"at τ = 1 eq. (21) removes the whole token mean, and a matrix of zero mean has t_div = 1 by "
                      f"definition: every one of the {last(res).size} runs gives 1 to round-off"
                      if identity(res) else "")))


# ------------------------------------------------------------------ the table

FINDINGS: tuple[Spec, ...] = (
    Spec(key="tse-fig1", where="Fig. 1", claim_id="yu-fig1",
         claim="In BERT and ALBERT of depth 100 at default initialisation, token similarity escalates to unity.",
         measured=bert,
         quantity="the smaller of BERT's and ALBERT's last-layer t_sim, mean over sentences (bootstrap over sentences)",
         read=lambda res: Partial(res.fig1_last()), direction="above", reference=0.99, reference_label="0.99 (unity)",
         section="tse-fig1", setting=FIG1, more=dict(unit="input sentences", digits=4)),
    Spec(key="tse-fig1-gradient", where="Fig. 1 (right)", claim_id="yu-fig1-gradient",
         claim="The depth-100 BERT's gradient norm stays roughly constant across layers.",
         measured=lambda res: bert(res).replace(" and ALBERT", ""),
         quantity="change of log gradient norm between adjacent layers, mean over layers",
         read=lambda res: Partial(res.grad_log_steps()), direction="equal", margin=math.log(1.01),
         reference_label="0 (± log 1.01: 1 % per layer)", section="tse-fig1", setting=FIG1,
         more=dict(unit="layers", digits=4)),
    Spec(key="tse-fig2-ratio", where="Fig. 2, §2.4", claim_id="yu-fig2-ratio",
         claim="The attention step's ξ₁/ξ₂ is around 2 from the very first block.",
         measured=trials,
         quantity="the attention step's ξ₁/ξ₂ (step 1: SA + residual) at block 0, mean over trials",
         read=lambda res: Partial(t_interval(res.figure2.xi_ratio[:, 0, 0])), direction="equal",
         reference=lambda res: res.paper_fig2["mean xi1/xi2 of step 1 at the first block"],
         reference_label="the paper's 2", margin=0.2, section="tse-fig2", setting=(*SYNTH, "trials"),
         more=dict(unit=TRIALS)),
    Spec(key="tse-fig2-saturation", where="Fig. 2, §2.4", claim_id="yu-fig2-saturation",
         claim="Token similarity approaches its maximum before block 15.",
         measured=trials, quantity="the first block whose mean t_sim exceeds 0.99 (bootstrap over trials)",
         read=lambda res: Partial(res.saturation_interval()), direction="below",
         reference=lambda res: res.paper_fig2["first block where t_sim > 0.99"], reference_label="block 15",
         section="tse-fig2", setting=(*SYNTH, "trials"),
         more=dict(unit=TRIALS, point_why=lambda res: res.saturation_point_why(), digits=0,
                   units=lambda res: res.settings.trials)),
    Spec(key="tse-fig2-delta-omega", where="Fig. 2 (right)", claim_id="yu-fig2-delta-omega",
         claim="δ and ω are far less than 1 from the start.",
         measured=trials, quantity="the larger of δ and ω (head averages) at block 0, mean over trials",
         read=lambda res: Partial(delta_omega(res)), direction="below", reference=1.0, reference_label="1",
         section="tse-fig2", setting=(*SYNTH, "trials"), more=dict(unit=TRIALS)),
    Spec(key="tse-ffn-negligible", where="§2.4, Fig. 2", claim_id="yu-other-steps-negligible",
         claim="Steps 2-4 (the LayerNorms and the FFN) have a negligible impact on token similarity.",
         measured=trials, quantity="the FFN step's share of the log-odds growth of t_sim until it passes 0.99",
         read=lambda res: Partial(res.ffn_share()), direction="equal", reference=0.0, margin=0.1,
         reference_label="0 (a share under a tenth counts as negligible)", section="tse-ffn",
         setting=(*SYNTH, "trials"), more=dict(unit=TRIALS)),
    Spec(key="tse-prop23", where="Prop. 2.3, eq. (6)", claim_id="yu-prop23",
         claim="r(X, Y) = 1 + (ξ₁/ξ₂ − 1) t_sim(X) for any pair X, Y.",
         measured="8 random float64 pairs X, Y (n = 64, d = 512)",
         quantity="max |r − (1 + (ξ₁/ξ₂ − 1) t_sim(X))| over the pairs",
         read=lambda res: Partial(Interval.exact(res.prop23_max_abs_error)), direction="equal", margin=1e-10,
         reference_label="0 (± 1e-10: round-off)", section="tse-identities",
         more=dict(tolerance=1e-12,
                   exact_why="an algebraic identity evaluated in float64: its error is round-off, not sampling")),
    Spec(key="tse-lemma24", where="Lemma 2.4, eq. (9)", claim_id="yu-lemma24",
         claim="E[ξ₁] = 1 + α²dσ²μ₁² for Y = X + αPXW with one head.",
         measured=lambda res: (f"head 0's attention of one block on X ~ N(0, 1), "
                               f"{head_setting(res, 'a d × d value map of variance 1/d')}"),
         quantity="Monte Carlo mean of ξ₁ − the formula",
         read=lambda res: Partial(res.lemma_gap("single")), direction="equal",
         margin=lambda res: res.lemma_margin("single"),
         reference_label="0 (± 1 % of the formula's excess over one)", section="tse-identities",
         setting=(*SYNTH, "lemma_trials"), when=lambda res: res.lemma24_single is not None,
         more=dict(unit=DRAWS, digits=4)),
    Spec(key="tse-prop29", where="Prop. 2.9, eq. (18)", claim_id="yu-prop29",
         claim="With h heads, E[ξ₁] = 1 + α²dσ²μ̄₁², μ̄₁² the head average.",
         measured=lambda res: (f"one block's 8-head attention on X ~ N(0, 1), "
                               f"{head_setting(res, 'the per-head value maps')}"),
         quantity="Monte Carlo mean of ξ₁ − the formula",
         read=lambda res: Partial(res.lemma_gap("multi")), direction="equal",
         margin=lambda res: res.lemma_margin("multi"),
         reference_label="0 (± 1 % of the formula's excess over one)", section="tse-identities",
         setting=(*SYNTH, "lemma_trials"), more=dict(unit=DRAWS, digits=4)),
    Spec(key="tse-fig1-eq18", where="eq. (18), Fig. 1", claim_id="yu-prop29",
         claim=("BERT's attention step escalates at the rate eq. (18) gives: E[ξ₁]/E[ξ₂] ≈ 1 + α²dσ² at "
                "near-uniform attention."),
         measured=lambda res: (f"{res.figure1_steps.increments.shape[0]} random-init transformers BERTs of depth "
                               f"{res.settings.hf_depth} (initializer_range 0.02) on {res.settings.hf_batch} "
                               "CoLA sentences"),
         quantity=("the attention step's (SA + residual) factor on the odds t_sim/(1 − t_sim) per layer "
                   "while t_sim < 0.99, geometric mean over layers, mean over initialisations"),
         read=lambda res: Partial(res.bert_attention_factor()), direction="equal",
         reference=lambda res: res.eq18_factor(),
         reference_label=lambda res: (f"eq. (18)'s {res.eq18_factor():.4f} at d = {res.settings.hf_hidden}, "
                                      "σ = 0.02"),
         margin=lambda res: res.eq18_margin(), section="tse-fig1", setting=FIG1,
         when=lambda res: res.figure1_steps is not None, more=dict(unit="initialisations")),
    Spec(key="tse-estimate2", where="Estimates 1-2, Fig. 3", claim_id="yu-estimate2",
         claim="Estimate 2 (the spectral gap of P alone) approximates E[ξ₁/ξ₂] − 1 more closely than Estimate 1.",
         measured=redrawn,
         quantity="|Estimate 1 − sample mean of ξ₁/ξ₂ − 1| − |Estimate 2 − sample mean|, mean over blocks",
         read=lambda res: Partial(res.estimate_gap()), direction="above", section="tse-fig3",
         setting=(*SYNTH, "w_trials"), more=dict(unit=BLOCKS)),
    Spec(key="tse-thm26", where="Theorem 2.6, eq. (16); Fig. 3", claim_id="yu-thm26",
         claim="The SA-plus-residual step raises token similarity in expectation: E[r] > 1.",
         measured=redrawn,
         quantity=lambda res: f"sample mean of r(X, Y) − 1 at the least escalating block ({res.rate_excess()[1]})",
         read=lambda res: Partial(res.rate_excess()[0]), direction="above", section="tse-fig3",
         setting=(*SYNTH, "w_trials"), more=dict(unit=DRAWS, digits=4)),
    Spec(key="tse-remark28-rate", where="Remark 2.8, Fig. 3", claim_id="yu-linear-rate",
         claim="Once similarity is high, diversity shrinks per block by the linear rate 1/(1 + α²) = 1/2.",
         measured=redrawn,
         quantity="diversity contraction 1/r per block over the blocks with t_sim > 0.9, mean over them",
         read=lambda res: Partial(res.late_rate()), direction="equal",
         reference=lambda res: 1 / (1 + res.settings.alpha ** 2),
         reference_label="1/(1 + α²) = 0.5", margin=0.05, section="tse-fig3", setting=(*SYNTH, "w_trials"),
         more=dict(unit=BLOCKS)),
    Spec(key="tse-fig4-prenorm", where="Fig. 4, §3.1", claim_id="yu-fig4-prenorm",
         claim="Pre-norm mitigates the escalation implicitly: its token similarity grows more slowly.",
         measured=lambda res: (f"{res.figure4.t_sim.shape[0]} pre-norm (eq. 19) stacks beside "
                               f"{res.figure2.t_sim.shape[0]} post-norm ones"),
         quantity=lambda res: f"pre-norm t_sim at block {prenorm_block(res)}, mean over trials",
         read=lambda res: Partial(t_interval(res.figure4.t_sim[:, prenorm_block(res)])), direction="below",
         reference=lambda res: float(res.figure2.t_sim[:, prenorm_block(res)].mean()),
         reference_label=lambda res: (f"post-norm's {res.figure2.t_sim[:, prenorm_block(res)].mean():.3f} at block "
                                      f"{prenorm_block(res)}"),
         section="tse-fig4", setting=(*SYNTH, "trials"), more=dict(unit=TRIALS, size_word="much slower")),
    Spec(key="tse-eq20-norm", where="eq. (20), Fig. 4 (right)", claim_id="yu-eq20",
         claim="The pre-norm residual stream grows with depth while the attention's input stays at ‖LN(·)‖_F.",
         measured=lambda res: (f"{res.figure4.t_sim.shape[0]} pre-norm (eq. 19) stacks, "
                               f"depth {res.settings.prenorm_depth}"),
         quantity="‖X‖_F at the last block ÷ at the first, mean over trials",
         read=lambda res: Partial(t_interval(res.figure4.norm_X[:, -1] / res.figure4.norm_X[:, 0])), direction="above",
         reference=1.0, reference_label="1", section="tse-fig4", setting=(*SYNTH, "prenorm_depth"),
         more=dict(unit=TRIALS, digits=2)),
    fig5("tse-fig5-half", "0.5", 0.5),
    fig5("tse-fig5-tenth", "0.1", 0.0),
    fig5("tse-fig5-one", "1.0", 1.0),
    Spec(key="tse-tau-threshold", where="Prop. 2.3, Remark 2.8, Fig. 5", kind="extension",
         claim=("By Prop. 2.3 and Remark 2.8's rate 1 + α², de-escalation keeps diversity exactly when "
                "τ > τ* = 1 − 1/√(1 + α²)."),
         measured=lambda res: (f"τ from 0 to 1 in {len(res.tau_sweep.taus)} steps, {res.tau_sweep.runs} "
                               f"de-escalated {stacks(res)}, depth {res.settings.deesc_depth}"),
         quantity="the τ at which the last block's t_div first reaches 0.5, mean over runs",
         read=lambda res: Partial(res.tau_threshold()), direction="equal", reference=lambda res: res.tau_star(),
         reference_label=lambda res: f"τ* = {res.tau_star():.2f}", margin=0.05, section="tse-tau-sweep",
         setting=(*SYNTH, "deesc_depth"), when=lambda res: res.tau_sweep is not None, more=dict(unit="runs")),
    Spec(key="tse-bounds11", where="Lemma 2.4, eq. (11)", claim_id="yu-bounds11",
         claim="μ₁² ≥ (1 − ω)² and μ₂² ≤ δ² for any row-stochastic P.",
         measured=lambda res: (f"{res.settings.bound_samples} random pairs (X, P) per family, {len(res.bounds11)} "
                               f"families of row-stochastic P, n = {res.settings.bound_n}, "
                               f"d = {res.settings.bound_d}, float64"),
         quantity="the smallest slack of the two bounds over every sample",
         read=lambda res: Partial(Interval.exact(res.bounds_min_slack())), direction="above", reference=-1e-10,
         reference_label="−1e-10 (round-off)", section="tse-bounds", setting=("bound_samples",),
         more=dict(tolerance=1e-12,
                   exact_why="a minimum over fixed float64 samples: on them each bound holds or not; only round-off")),
    Spec(key="tse-cor27", where="Cor. 2.7", claim_id="yu-cor27",
         claim="For doubly stochastic P, ω = 0 (and μ₁ = 1).",
         measured=lambda res: (f"{res.settings.bound_samples} random doubly stochastic P (Sinkhorn), "
                               f"n = {res.settings.bound_n}, float64"),
         quantity="ω, mean over the samples",
         read=lambda res: Partial(Interval.exact(res.bounds11["doubly stochastic (Sinkhorn)"].omega)),
         direction="equal",
         margin=1e-10, reference_label="0 (± 1e-10: round-off)", section="tse-bounds", setting=("bound_samples",),
         more=dict(tolerance=1e-12,
                   exact_why="ω of a doubly stochastic P is zero by algebra; what remains is float64 round-off")),
    Spec(key="tse-fig8", where="App. A, Fig. 8", claim_id="yu-fig8",
         claim="η concentrates at zero as d grows.",
         measured=lambda res: (f"X = e vᵀ + tQ, n = {res.settings.eta_n}, {len(res.settings.eta_ts)} values of t, "
                               f"d = {', '.join(str(x) for x in res.settings.eta_dims)}; "
                               f"{res.settings.eta_draws_precise} draws of W per (d, t)"),
         quantity="slope of log sd(η) against log d, mean over t",
         read=lambda res: Partial(res.eta_slope()), direction="below", reference_label="0 (−1/2: the rate 1/√d)",
         section="tse-fig8", setting=("eta_draws_precise",), more=dict(unit=TRIALS)),
)
