"""The tse chapter (Yu & Zhang §1-3.2, Appendix A): token similarity escalation in random-init
BERT/ALBERT (Figure 1), in the synthetic post-norm, pre-norm and de-escalated stacks of §2.4
(Figures 2-5, with the FFN's share of the escalation and its ablations), the concentration of η
(Figure 8) and the bounds (11) on generic attention matrices.

Device: Figure 1's transformers models and the synthetic stacks of Figures 2-5 run on
`book.runtime.choose_device(p.device)` — the stacks inside `with torch.device(...)`, so
`core.escalation` builds its blocks there and moves its CPU-generator draws there: the same X on every
device, while the blocks' weights come from that device's RNG (seeded alike, so a GPU run draws other
weights than a CPU run; CPU reruns stay bit-identical). The float64 identity checks, Figure 8 and the
bounds (11) are small and stay on CPU.
At `book` scale Figure 1 and the synthetic stacks go through the committed-results cache
(`results/tse/book/`), so the book build reads them back.
The mathematics of one trajectory is in `helpers.core.escalation`; the transformers models in
`helpers.hf.escalation`; here are the loops over trials and τ and the numbers the chapter quotes.
"""

from __future__ import annotations

import csv
import math
import warnings
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

import numpy as np
import torch

from ..book import results
from ..book.params import ChapterParams, ParameterError, check_heads, positive, rules
from ..book.runtime import REPO_ROOT, choose_device, progress, seed_everything
from ..core import escalation as E
from ..core import measures as M
from ..core.escalation import first_block_above
from ..core.findings import Finding
from ..core.stats import Interval, t_interval
from ..data import load_glue
from ..hf import models
from ..hf.escalation import escalation_profile, random_encoder, step_log_odds
from ..hf.models import quiet_loading

PAPER_CLAIMS = REPO_ROOT / "data" / "yu_zhang_2024_claims.csv"
#: the τ-sweep fields: not part of the key of the pieces computed before the sweep existed
SWEEP_FIELDS = ("sweep_taus", "sweep_runs")
#: the field of Figure 1's per-step measurement: not part of the key of the pieces computed before it existed
STEP_FIELDS = ("hf_inits",)
#: eq. (18) "holds" for BERT when the attention step's factor on the odds lies within this fraction of the
#: predicted excess over one, (dσ²)², of the prediction (μ̄₁ ≈ 1, μ̄₂ ≈ 0 are approximations)
EQ18_FRACTION = 0.1
FFN_INIT_NAMES = {"torch": "PyTorch-default", "xavier": "Xavier"}
#: where Figure 1's tokens come from: CoLA validation sentences, BERT's uncased WordPiece tokenizer
TOKENIZER_MODEL = "all-MiniLM-L6-v2"


@dataclass(frozen=True)
class Params(ChapterParams):
    """Yu & Zhang §1-3.2: token similarity escalation (Figures 1-5)."""

    # Figures 2-5: the synthetic post-norm / pre-norm stacks of §2.4
    n_tokens: int = 64
    d_model: int = 512
    n_heads: int = 8
    alpha: float = 1.0
    depth: int = 20
    trials: int = 50
    ffn_mult: int = 4
    #: variance of the per-head value maps W_k is value_scale / d; 1 = Lemma 2.4 / Thm 2.6 reading
    #: (sigma = 1/sqrt(d)), n_heads = the literal "N(0, (h/d) I)" of §2.4
    value_scale: float = 1.0
    #: FFN weights: "torch" = nn.Linear's default, what §2.4's "default method in the code" gives for the
    #: experiments of §2.4 (Figs. 2-5); "xavier" — what §2.1's analysis assumes — is run beside it as a variant
    ffn_init: Literal["torch", "xavier"] = "torch"
    share_blocks: int = 3         # the first blocks over which the FFN's share of log-odds growth is quoted
    w_trials: int = 1000          # Figure 3: draws of W in step 1
    lemma_trials: int = 2000      # Lemma 2.4 Monte Carlo
    prenorm_depth: int = 50       # Figure 4
    deesc_depth: int = 50         # Figure 5
    deesc_runs: int = 20
    taus: tuple[float, ...] = (0.1, 0.5, 1.0)
    #: the τ sweep (depth `deesc_depth`): where de-escalation stops the collapse, against τ* = 1 − 1/√(1 + α²)
    sweep_taus: tuple[float, ...] = tuple(round(0.05 * i, 2) for i in range(21))
    sweep_runs: int = 10
    # Figure 8 (Appendix A): eta over draws of W for X = e v^T + tQ, n = 100, d = 10, 20, 40
    eta_n: int = 100
    eta_dims: tuple[int, ...] = (10, 20, 40, 80)
    eta_ts: tuple[float, ...] = tuple(round(0.05 * i, 2) for i in range(1, 21))
    eta_draws: int = 50           # the paper's sample size
    eta_draws_precise: int = 2000  # enough draws to see E[eta] itself
    # bounds (11) on generic row-stochastic P
    bound_n: int = 32
    bound_d: int = 16
    bound_samples: int = 200
    # Figure 1: transformers BERT / ALBERT, random init
    hf_depth: int = 100
    hf_hidden: int = 768
    hf_heads: int = 12
    hf_intermediate: int = 3072
    hf_batch: int = 32           # CoLA validation sentences (every 8th)
    hf_seq_len: int = 128         # truncation length; the batch is padded to its longest sentence
    hf_inits: int = 5             # random BERTs (seeds seed, seed+1, …) for the per-step rate against eq. (18)

    CHAPTER: ClassVar[str] = "tse"
    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {
        "ci": dict(trials=6, depth=12, w_trials=200, lemma_trials=400, prenorm_depth=16, deesc_depth=16,
                   deesc_runs=4, sweep_runs=2, hf_depth=12, hf_batch=8, hf_seq_len=32, d_model=256,
                   eta_draws_precise=400, bound_samples=40, hf_inits=2),
        "book": dict(),
        "paper": dict(),
    }
    RULES: ClassVar = rules(
        n_tokens=(lambda v: v >= 2, "needs at least 2 tokens"),
        d_model=positive, n_heads=positive, alpha=positive, depth=positive, trials=positive,
        ffn_mult=positive, value_scale=positive, w_trials=(lambda v: v >= 2, "needs >= 2 draws"),
        lemma_trials=(lambda v: v >= 2, "needs >= 2 draws"), prenorm_depth=positive,
        deesc_depth=positive, deesc_runs=positive,
        taus=(lambda v: len(v) > 0 and all(0 < t <= 1 for t in v), "every tau must lie in (0, 1] (eq. 21)"),
        sweep_taus=(lambda v: len(v) > 1 and all(0 <= t <= 1 for t in v) and list(v) == sorted(v),
                    "increasing taus in [0, 1] (0: no de-escalation)"),
        sweep_runs=(lambda v: v >= 2, "needs >= 2 runs (an interval over runs)"),
        hf_depth=positive, hf_hidden=positive, hf_heads=positive, hf_intermediate=positive,
        hf_batch=positive, hf_seq_len=(lambda v: 2 <= v <= 512, "must lie in [2, 512]"),
        hf_inits=(lambda v: v >= 2, "needs >= 2 random initialisations (an interval over them)"),
        share_blocks=positive, eta_n=(lambda v: v >= 2, "needs at least 2 tokens"),
        eta_dims=(lambda v: len(v) > 0 and all(x >= 2 for x in v), "every d must be >= 2"),
        eta_ts=(lambda v: len(v) > 0 and all(0 < t <= 1 for t in v), "every t must lie in (0, 1] (Figure 8)"),
        eta_draws=(lambda v: v >= 2, "needs >= 2 draws"), eta_draws_precise=(lambda v: v >= 2, "needs >= 2 draws"),
        bound_n=(lambda v: v >= 3, "needs n >= 3"), bound_d=positive, bound_samples=positive,
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        check_heads(self)
        if self.hf_hidden % self.hf_heads:
            raise ParameterError(f"parameter 'hf_hidden' = {self.hf_hidden} must be divisible by hf_heads")

    @property
    def other_value_scale(self) -> float:
        """The other reading of §2.4's value-map variance: h/d when the run uses 1/d, else 1/d."""
        return float(self.n_heads) if self.value_scale == 1.0 else 1.0

    @property
    def other_ffn_init(self) -> str:
        """The FFN initialisation run as the variant: Xavier when the run uses PyTorch's default, and back."""
        return "xavier" if self.ffn_init == "torch" else "torch"

    @property
    def prenorm_trials(self) -> int:
        return max(2, self.trials // 5)


def _arrays(obj: Any) -> Any:
    """Nested lists of numbers (as JSON gives them back) as numpy arrays, ±1e308 (JSON's infinity)
    back to ±inf; dicts kept."""
    if isinstance(obj, dict):
        return {k: _arrays(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple) and obj and not isinstance(obj[0], dict | str):
        a = np.asarray(obj, dtype=float)
        a[np.abs(a) >= 1e308] *= np.inf
        return a
    if isinstance(obj, float) and abs(obj) >= 1e308:
        return math.copysign(math.inf, obj)
    return obj


@dataclass
class Result(results.Result):
    """Every number of the chapter. Per-block arrays are numpy arrays: `figure2[k]` (trials, depth+1)
    for t_sim / t_cos, (trials, depth, 4) for xi_ratio, (trials, depth) for delta / omega; `figure3[k]`
    (depth,); `figure4[k]` (trials, depth); `figure5[str(tau)]` (runs, depth+1) of t_div."""

    settings: dict[str, Any]                 # the Params (cache key) the result was computed with
    prop23_max_abs_error: float
    lemma24: dict[str, float]
    figure1: dict[str, dict[str, Any]]       # "bert" / "albert" -> t_sim, t_cos (depth+1,), grad_norm (BERT)
    figure2: dict[str, Any]
    figure2_other: dict[str, Any]            # the other reading of the value-map variance
    other_value_scale: float
    figure2_init: dict[str, Any]             # the other FFN initialisation (Params.other_ffn_init)
    figure2_ablation: dict[str, Any]         # "none" / "centred-relu" -> t_sim, xi_ratio with that FFN
    figure3: dict[str, Any]
    figure4: dict[str, Any]
    figure5: dict[str, Any]
    figure5_other: dict[str, Any]            # Figure 5 under the other reading of the value-map variance
    figure8: dict[str, Any]                  # "paper" (eta_draws) / "precise": mean, sd, se (dims, ts)
    bounds11: dict[str, dict[str, float]]    # per family of P: the smallest slack of each bound (11)
    paper_fig5: dict[str, float]             # the paper's t_div level by str(tau) (data/yu_zhang_2024_claims.csv)
    summary: dict[str, float | None]         # the derived numbers the tables and prose quote
    #: the paper's Figure 2 statements by quantity (data/yu_zhang_2024_claims.csv)
    paper_fig2: dict[str, float] = field(default_factory=lambda: paper_claims("Figure 2"))
    #: the τ sweep: `taus`, `t_div_last` (taus, runs) of the last block, `t_div` (taus, depth+1) mean over
    #: runs, `block_odds` (taus, depth) mean over runs of each block's ξ₁/ξ₂ before its de-escalation
    tau_sweep: dict[str, Any] = field(default_factory=dict)
    #: Figure 1's BERT per step (`hf.escalation.step_log_odds`), one row per random initialisation:
    #: `increments` (inits, layers, 4) of the log-odds of t_sim, `t_sim` (inits, layers + 1)
    figure1_steps: dict[str, Any] = field(default_factory=dict)
    #: Figure 1's models per input sentence: `bert`, `albert` (sentences,) — each sentence's last-layer t_sim
    figure1_sentences: dict[str, Any] = field(default_factory=dict)
    #: Lemma 2.4 with a single head (the attention of head 0 of the block `lemma24` uses, one d × d value map)
    lemma24_single: dict[str, float] = field(default_factory=dict)
    scale: str = ""

    def __post_init__(self) -> None:
        for name in ("figure1", "figure2", "figure2_other", "figure2_init", "figure2_ablation", "figure3", "figure4",
                     "figure5", "figure5_other", "figure8", "summary", "tau_sweep", "figure1_steps",
                     "figure1_sentences"):
            setattr(self, name, _arrays(getattr(self, name)))

    # ------------------------------------------------------------ what the findings and the prose read

    def _stack(self, init: str) -> dict[str, Any]:
        """The Figure 2 stacks with the run's FFN initialisation (`init="run"`) or the other one ("other")."""
        return self.figure2 if init == "run" else self.figure2_init

    def saturation_block(self, init: str = "run") -> int | None:
        """The first block whose mean t_sim exceeds 0.99 (None: never)."""
        return first_block_above(self._stack(init)["t_sim"])

    def share(self, steps: tuple[int, ...] = (2,), init: str = "run", blocks: int | None = None) -> Interval:
        """The share of the log-odds growth of t_sim that the steps `steps` of Algorithm 1 supply (0: SA,
        1 and 3: the LayerNorms, 2: the FFN; Prop. 2.3: a step multiplies the odds by its ξ₁/ξ₂, so
        log ξ₁/ξ₂ is its additive part) over blocks 0 … `blocks` − 1 — by default the whole escalation,
        the blocks before t_sim first passes 0.99 (all blocks if it never does) — per trial, with its
        t-interval over trials."""
        xr = np.asarray(self._stack(init)["xi_ratio"], dtype=float)            # (trials, depth, 4)
        if blocks is None:
            blocks = self.saturation_block(init) or xr.shape[1]
        inc = np.log(xr[:, :blocks])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            part = np.nansum(inc[:, :, list(steps)], (1, 2)) / np.nansum(inc, (1, 2))
        return t_interval(part)

    def ffn_share(self, init: str = "run", blocks: int | None = None) -> Interval:
        """The FFN step's share of the log-odds growth (`share` of step 3 of Algorithm 1)."""
        return self.share((2,), init, blocks)

    def tau_star(self) -> float:
        """The threshold the odds argument predicts: a block multiplies the odds t_sim/(1 − t_sim) by
        ξ₁/ξ₂ → 1 + α² (Remark 2.8) and the de-escalation by (1 − τ)², so the common part dies out when
        (1 + α²)(1 − τ)² < 1, i.e. τ > τ* = 1 − 1/√(1 + α²) (≈ 0.29 at α = 1)."""
        return 1 - 1 / math.sqrt(1 + self.settings["alpha"] ** 2)

    def tau_threshold(self, level: float = 0.5) -> Interval:
        """The measured threshold: per run, the τ at which the last block's t_div first reaches `level`
        (linear between the two swept τ around it; NaN if it never does), with its t-interval over runs."""
        taus = np.asarray(self.tau_sweep["taus"], dtype=float)
        last = np.asarray(self.tau_sweep["t_div_last"], dtype=float)         # (taus, runs)
        out = []
        for run in last.T:
            hit = np.nonzero(run >= level)[0]
            if not hit.size:
                out.append(np.nan)
            elif hit[0] == 0:
                out.append(float(taus[0]))
            else:
                i = hit[0]
                f = (level - run[i - 1]) / (run[i] - run[i - 1])
                out.append(float(taus[i - 1] + f * (taus[i] - taus[i - 1])))
        return t_interval(out)

    def tau_implied(self) -> float:
        """The threshold the odds argument gives with the block factor measured in the sweep instead of
        1 + α²: 1 − 1/√g, g the geometric mean of the blocks' ξ₁/ξ₂ in the swept stacks nearest τ*
        (their state stays diverse, as at the threshold)."""
        taus = np.asarray(self.tau_sweep["taus"], dtype=float)
        i = int(np.argmin(np.abs(taus - self.tau_star())))
        odds = np.asarray(self.tau_sweep["block_odds"], dtype=float)[i]
        g = float(np.exp(np.nanmean(np.log(odds))))
        return 1 - 1 / math.sqrt(g)

    def bert_odds_factor(self) -> float:
        """Figure 1's escalation rate: the geometric mean, over BERT's layers while t_sim < 0.99, of the
        factor by which a layer multiplies the odds t_sim/(1 − t_sim)."""
        t = np.asarray(self.figure1["bert"]["t_sim"], dtype=float)
        lo = E.log_odds(t)
        keep = t[:-1] < 0.99
        return float(np.exp(np.diff(lo)[keep].mean()))

    def eq18_factor(self) -> float:
        """Eq. (18)'s rate for BERT's attention at its default initialisation: E[ξ₁]/E[ξ₂] = 1 + c with
        μ̄₁ ≈ 1, μ̄₂ ≈ 0 (near-uniform attention) and c = d·Var of the value-then-output map's entries =
        (d σ²)², σ = transformers' BERT `initializer_range` (the weights of Figure 1), d = hidden width."""
        from transformers import BertConfig

        d, std = self.settings["hf_hidden"], BertConfig().initializer_range
        return 1 + (d * std ** 2) ** 2

    def bert_step_factors(self, level: float = 0.99) -> np.ndarray:
        """(inits, 4): per random BERT, the factor by which each of its four steps (SA + residual, LN,
        FFN + residual, LN) multiplies the odds t_sim/(1 − t_sim), geometric mean over the layers whose input
        t_sim is below `level` (the escalation, as `bert_odds_factor`)."""
        inc = np.asarray(self.figure1_steps["increments"], dtype=float)      # (inits, layers, 4)
        t = np.asarray(self.figure1_steps["t_sim"], dtype=float)[:, :-1]     # (inits, layers): layer inputs
        return np.stack([np.exp(i[k < level].mean(0)) for i, k in zip(inc, t, strict=True)])

    def bert_attention_factor(self) -> Interval:
        """The attention step's (SA + residual) factor on the odds per BERT layer during the escalation,
        with its t-interval over random initialisations: what eq. (18) predicts (`eq18_factor`)."""
        return t_interval(self.bert_step_factors()[:, 0])

    def bert_share(self, steps: tuple[int, ...] = (2,), level: float = 0.99) -> Interval:
        """The share of BERT's log-odds growth over the escalation (layers whose input t_sim is below `level`)
        that the steps `steps` supply (0: SA + residual, 1 and 3: the LayerNorms, 2: FFN + residual), with its
        t-interval over random initialisations."""
        inc = np.asarray(self.figure1_steps["increments"], dtype=float)
        t = np.asarray(self.figure1_steps["t_sim"], dtype=float)[:, :-1]
        return t_interval([i[k < level][:, list(steps)].sum() / i[k < level].sum()
                           for i, k in zip(inc, t, strict=True)])

    def eq18_margin(self) -> float:
        """The margin of "at eq. (18)'s rate": `EQ18_FRACTION` of the predicted excess over one."""
        return EQ18_FRACTION * (self.eq18_factor() - 1)

    def lemma24_se(self, heads: str = "multi") -> dict[str, float]:
        """How far the Monte Carlo E[ξ₁], E[ξ₂] lie from Lemma 2.4's formula, in standard errors (`heads`: "multi",
        the block's 8 heads as Prop. 2.9 averages them; "single", one head)."""
        lem = self.lemma24 if heads == "multi" else self.lemma24_single
        return {k: abs(lem[f"mc_{k}"] - lem[f"formula_{k}"]) / lem[f"mc_{k}_se"] for k in ("xi1", "xi2")}

    # ------------------------------------------------------------ the statistics of the findings

    def fig1_last(self, draws: int = 2000) -> Interval:
        """Figure 1's claim: the smaller of BERT's and ALBERT's last-layer t_sim, each the mean over the input
        sentences, with its percentile bootstrap interval over sentences (the same resampled sentences for both
        models). Without the per-sentence values: the bare estimate from Figure 1 (no interval)."""
        f1 = self.figure1
        est = min(float(f1["bert"]["t_sim"][-1]), float(f1["albert"]["t_sim"][-1]))
        if not self.figure1_sentences:
            return Interval(est, math.nan, math.nan, 1, "bootstrap")
        b, a = (np.asarray(self.figure1_sentences[k], dtype=float) for k in ("bert", "albert"))
        idx = np.random.default_rng(self.settings["seed"]).integers(0, b.size, (draws, b.size))
        boot = np.minimum(b[idx].mean(1), a[idx].mean(1))
        return Interval.from_draws(boot, estimate=min(b.mean(), a.mean()))

    def grad_log_steps(self) -> Interval:
        """Figure 1's gradient norm: the change of log gradient norm between adjacent BERT layers, mean over the
        layers with its t-interval over them (0: constant; log 1.01 ≈ 0.01: 1 % per layer)."""
        return t_interval(np.diff(np.log(np.asarray(self.figure1["bert"]["grad_norm"], dtype=float))))

    def lemma_gap(self, heads: str = "multi") -> Interval:
        """Lemma 2.4 (`heads="single"`) or Prop. 2.9 (`"multi"`): the Monte Carlo mean of ξ₁ over draws of W minus
        the formula 1 + α²dσ²μ̄₁², with its normal interval (± 1.96 standard errors of the mean over the draws)."""
        lem = self.lemma24 if heads == "multi" else self.lemma24_single
        d, half = lem["mc_xi1"] - lem["formula_xi1"], 1.96 * lem["mc_xi1_se"]
        draws = self.settings["lemma_trials"]
        return Interval(d, d - half, d + half, draws, "normal")

    def lemma_margin(self, heads: str = "multi") -> float:
        """"Alike the formula": within 1 % of its predicted excess over one, α²dσ²μ̄₁²."""
        lem = self.lemma24 if heads == "multi" else self.lemma24_single
        return 0.01 * (lem["formula_xi1"] - 1)

    def bounds_min_slack(self) -> float:
        """The smallest slack of the two bounds (11) over every sample of every family of P (≥ 0 where they hold)."""
        return min(min(v["min_slack_mu1"], v["min_slack_mu2"]) for v in self.bounds11.values())

    def rate_excess(self) -> tuple[Interval, int]:
        """Theorem 2.6's conclusion E[r] > 1 where it is weakest: at the block of Figure 3 with the smallest sample
        mean of r(X, Y), that mean minus one with its normal interval over the draws of W; and the block."""
        r, se = np.asarray(self.figure3["r"], dtype=float), np.asarray(self.figure3["r_se"], dtype=float)
        k = int(np.argmin(r))
        return Interval(r[k] - 1, r[k] - 1 - 1.96 * se[k], r[k] - 1 + 1.96 * se[k], self.settings["w_trials"],
                        "normal"), k

    def estimate_gap(self) -> Interval:
        """Fig. 3: how much closer Estimate 2 lies to the sample mean of ξ₁/ξ₂ − 1 than Estimate 1, per block
        |E1 − mean| − |E2 − mean|, mean over blocks with its t-interval over them."""
        f3 = self.figure3
        m = np.asarray(f3["xi_minus_1"], dtype=float)
        return t_interval(np.abs(np.asarray(f3["est1"]) - m) - np.abs(np.asarray(f3["est2"]) - m))

    def late_rate(self, level: float = 0.9) -> Interval:
        """Remark 2.8's rate: the diversity contraction 1/r per block over the blocks of Figure 3 whose t_sim exceeds
        `level`, mean with its t-interval over those blocks (each block's r a mean over the draws of W)."""
        f3 = self.figure3
        late = np.asarray(f3["t_sim"], dtype=float) > level
        return t_interval(1 / np.asarray(f3["r"], dtype=float)[late])

    def saturation_interval(self, draws: int = 1000, level: float = 0.99) -> Interval:
        """The first block whose mean t_sim exceeds `level` (Fig. 2), with its percentile bootstrap interval over
        trials (a resample that never exceeds it counts as the depth)."""
        t = np.asarray(self.figure2["t_sim"], dtype=float)
        idx = np.random.default_rng(self.settings["seed"]).integers(0, t.shape[0], (draws, t.shape[0]))
        depth = t.shape[1]
        boot = [first_block_above(t[i], level) for i in idx]
        est = first_block_above(t, level)
        return Interval.from_draws([depth if b is None else b for b in boot],
                                   estimate=depth if est is None else est)

    def saturation_point_why(self, level: float = 0.99) -> str:
        """Why the saturation block's bootstrap interval has no width: a block index, and the mean t_sim over the
        trials steps across `level` between two blocks by more than the trials move it."""
        t = np.asarray(self.figure2["t_sim"], dtype=float)
        k = first_block_above(t, level)
        if k is None or k == 0:
            return ""
        own = [first_block_above(row[None], level) for row in t]
        own = [t.shape[1] if b is None else b for b in own]
        return (f"a block index: the mean t_sim over {t.shape[0]} trials is {t[:, k - 1].mean():.4f} at block "
                f"{k - 1} and {t[:, k].mean():.4f} at block {k}, so no resample of the trials moves the first block "
                f"above {level} (each trial's own first block lies in {min(own)}–{max(own)})")

    def eta_slope(self) -> Interval:
        """Fig. 8: per t, the least-squares slope of log sd(η) over draws against log d (the `precise` draws), mean
        over t with its t-interval over them; −1/2 is concentration at the rate 1/√d."""
        sd = np.log(np.asarray(self.figure8["precise"]["sd"], dtype=float))         # (dims, ts)
        dims = np.log(np.asarray(self.settings["eta_dims"], dtype=float))
        return t_interval(np.polyfit(dims, sd, 1)[0])

    def reduced(self, *names: str) -> str:
        """How this run's Params fall short of the paper's for the fields `names` ("d = 256 of 512, 6 of 50
        trials"); "" at the paper's setting."""
        paper = Params.resolve("paper")
        labels = {"n_tokens": "n = {} of {}", "d_model": "d = {} of {}", "depth": "depth {} of {}",
                  "trials": "{} of {} trials", "w_trials": "{} of {} draws of W", "prenorm_depth": "depth {} of {}",
                  "deesc_depth": "depth {} of {}", "deesc_runs": "{} of {} runs", "hf_depth": "depth {} of {}",
                  "hf_batch": "{} of {} sentences", "lemma_trials": "{} of {} draws",
                  "eta_draws_precise": "{} of {} draws", "bound_samples": "{} of {} samples"}
        parts = [labels[k].format(self.settings[k], getattr(paper, k)) for k in names
                 if self.settings[k] != getattr(paper, k)]
        return ", ".join(parts)

    def findings(self) -> list[Finding]:
        """The paper's claims of §1-3.2 and Appendix A this chapter tests, computed from the runs, written in the
        order of the chapter's sections; where two test one claim, the closer test comes first (Prop. 2.9's Monte
        Carlo check before its reading on BERT). The τ threshold is the chapter's own question."""
        st = self.settings
        stacks = (f"Algorithm-1 stacks at initialisation, n = {st['n_tokens']}, d = {st['d_model']}, "
                  f"h = {st['n_heads']}, σ² = {st['value_scale']:g}/d, {FFN_INIT_NAMES[st['ffn_init']]} FFN")
        synth = ("n_tokens", "d_model")

        def common(*names: str) -> dict[str, Any]:
            red = self.reduced(*names)
            return dict(paper="yu2024", chapter="tse", reduced=red,
                        scale=f"{self.scale}: {red}" if red else f"{self.scale}: the paper's setting")

        post = np.asarray(self.figure2["t_sim"], dtype=float)
        pre = np.asarray(self.figure4["t_sim"], dtype=float)
        k = min(st["depth"], pre.shape[1] - 1)
        bert = (f"random-init transformers BERT and ALBERT of depth {st['hf_depth']} on "
                f"{st['hf_batch']} CoLA sentences")
        rate, rate_block = self.rate_excess()
        d_o = np.maximum(np.asarray(self.figure2["delta"], dtype=float)[:, 0],
                         np.asarray(self.figure2["omega"], dtype=float)[:, 0])
        norm_x = np.asarray(self.figure4["norm_X"], dtype=float)
        out = [
            Finding(key="tse-fig1", where="Fig. 1", claim_id="yu-fig1",
                    claim=("In BERT and ALBERT of depth 100 at default initialisation, token similarity "
                           "escalates to unity."),
                    measured=bert, quantity="the smaller of BERT's and ALBERT's last-layer t_sim, mean over sentences "
                                            "(bootstrap over sentences)",
                    effect=self.fig1_last(), direction="above", reference=0.99, reference_label="0.99 (unity)",
                    section="tse-fig1", digits=4, **common("hf_depth", "hf_batch")),
            Finding(key="tse-fig1-gradient", where="Fig. 1 (right)", claim_id="yu-fig1-gradient",
                    claim="The depth-100 BERT's gradient norm stays roughly constant across layers.",
                    measured=bert.replace(" and ALBERT", ""),
                    quantity="change of log gradient norm between adjacent layers, mean over layers",
                    effect=self.grad_log_steps(), direction="equal", margin=math.log(1.01),
                    reference_label="0 (± log 1.01: 1 % per layer)", section="tse-fig1", digits=4,
                    **common("hf_depth", "hf_batch")),
            Finding(key="tse-fig2-ratio", where="Fig. 2, §2.4", claim_id="yu-fig2-ratio",
                    claim="The attention step's ξ₁/ξ₂ is around 2 from the very first block.",
                    measured=f"{st['trials']} {stacks}, depth {st['depth']}",
                    quantity="the attention step's ξ₁/ξ₂ (step 1: SA + residual) at block 0, mean over trials",
                    effect=t_interval(np.asarray(self.figure2["xi_ratio"], dtype=float)[:, 0, 0]),
                    direction="equal", reference=self.paper_fig2["mean xi1/xi2 of step 1 at the first block"],
                    reference_label="the paper's 2", margin=0.2, section="tse-fig2", **common(*synth, "trials")),
            Finding(key="tse-fig2-saturation", where="Fig. 2, §2.4", claim_id="yu-fig2-saturation",
                    claim="Token similarity approaches its maximum before block 15.",
                    measured=f"{st['trials']} {stacks}, depth {st['depth']}",
                    quantity="the first block whose mean t_sim exceeds 0.99 (bootstrap over trials)",
                    effect=self.saturation_interval(), direction="below",
                    reference=self.paper_fig2["first block where t_sim > 0.99"], reference_label="block 15",
                    point_why=self.saturation_point_why(), section="tse-fig2", digits=0,
                    **common(*synth, "trials")),
            Finding(key="tse-fig2-delta-omega", where="Fig. 2 (right)", claim_id="yu-fig2-delta-omega",
                    claim="δ and ω are far less than 1 from the start.",
                    measured=f"{st['trials']} {stacks}, depth {st['depth']}",
                    quantity="the larger of δ and ω (head averages) at block 0, mean over trials",
                    effect=t_interval(d_o), direction="below", reference=1.0, reference_label="1",
                    section="tse-fig2", **common(*synth, "trials")),
            Finding(key="tse-ffn-negligible", where="§2.4, Fig. 2", claim_id="yu-other-steps-negligible",
                    claim="Steps 2-4 (the LayerNorms and the FFN) have a negligible impact on token similarity.",
                    measured=f"{st['trials']} {stacks}, depth {st['depth']}",
                    quantity="the FFN step's share of the log-odds growth of t_sim until it passes 0.99",
                    effect=self.ffn_share(), direction="equal", reference=0.0, margin=0.1,
                    reference_label="0 (a share under a tenth counts as negligible)", section="tse-ffn",
                    **common(*synth, "trials")),
            Finding(key="tse-prop23", where="Prop. 2.3, eq. (6)", claim_id="yu-prop23",
                    claim="r(X, Y) = 1 + (ξ₁/ξ₂ − 1) t_sim(X) for any pair X, Y.",
                    measured="8 random float64 pairs X, Y (n = 64, d = 512)",
                    quantity="max |r − (1 + (ξ₁/ξ₂ − 1) t_sim(X))| over the pairs",
                    effect=Interval.exact(self.prop23_max_abs_error), tolerance=1e-12,
                    exact_why="an algebraic identity evaluated in float64: its error is round-off, not sampling",
                    direction="equal", margin=1e-10, reference_label="0 (± 1e-10: round-off)",
                    section="tse-identities", **common()),
        ]
        if self.lemma24_single:
            out.append(Finding(
                key="tse-lemma24", where="Lemma 2.4, eq. (9)", claim_id="yu-lemma24",
                claim="E[ξ₁] = 1 + α²dσ²μ₁² for Y = X + αPXW with one head.",
                measured=f"head 0's attention of one block on X ~ N(0, 1), n = {st['n_tokens']}, d = {st['d_model']}; "
                         f"{st['lemma_trials']} draws of a d × d value map of variance 1/d",
                quantity="Monte Carlo mean of ξ₁ − the formula",
                effect=self.lemma_gap("single"), direction="equal", margin=self.lemma_margin("single"),
                reference_label="0 (± 1 % of the formula's excess over one)", section="tse-identities", digits=4,
                **common(*synth, "lemma_trials")))
        out += [
            Finding(key="tse-prop29", where="Prop. 2.9, eq. (18)", claim_id="yu-prop29",
                    claim="With h heads, E[ξ₁] = 1 + α²dσ²μ̄₁², μ̄₁² the head average.",
                    measured=f"one block's 8-head attention on X ~ N(0, 1), n = {st['n_tokens']}, d = "
                             f"{st['d_model']}; {st['lemma_trials']} draws of the per-head value maps",
                    quantity="Monte Carlo mean of ξ₁ − the formula",
                    effect=self.lemma_gap("multi"), direction="equal", margin=self.lemma_margin("multi"),
                    reference_label="0 (± 1 % of the formula's excess over one)", section="tse-identities",
                    digits=4, **common(*synth, "lemma_trials")),
        ]
        if self.figure1_steps:
            n_inits = np.asarray(self.figure1_steps["increments"]).shape[0]
            out.append(Finding(
                key="tse-fig1-eq18", where="eq. (18), Fig. 1", claim_id="yu-prop29",
                claim=("BERT's attention step escalates at the rate eq. (18) gives: E[ξ₁]/E[ξ₂] ≈ 1 + α²dσ² at "
                       "near-uniform attention."),
                measured=(f"{n_inits} random-init transformers BERTs of depth {st['hf_depth']} "
                          f"(initializer_range 0.02) on {st['hf_batch']} CoLA sentences"),
                quantity=("the attention step's (SA + residual) factor on the odds t_sim/(1 − t_sim) per layer "
                          "while t_sim < 0.99, geometric mean over layers, mean over initialisations"),
                effect=self.bert_attention_factor(), direction="equal", reference=self.eq18_factor(),
                reference_label=f"eq. (18)'s {self.eq18_factor():.4f} at d = {st['hf_hidden']}, σ = 0.02",
                margin=self.eq18_margin(), section="tse-fig1", **common("hf_depth", "hf_batch")))
        out += [
            Finding(key="tse-estimate2", where="Estimates 1-2, Fig. 3", claim_id="yu-estimate2",
                    claim="Estimate 2 (the spectral gap of P alone) approximates E[ξ₁/ξ₂] − 1 more closely than "
                          "Estimate 1.",
                    measured=f"one {stacks}, depth {st['depth']}, step-1 value maps redrawn {st['w_trials']} times "
                             "per block",
                    quantity="|Estimate 1 − sample mean of ξ₁/ξ₂ − 1| − |Estimate 2 − sample mean|, mean over blocks",
                    effect=self.estimate_gap(), direction="above", section="tse-fig3",
                    **common(*synth, "w_trials")),
            Finding(key="tse-thm26", where="Theorem 2.6, eq. (16); Fig. 3", claim_id="yu-thm26",
                    claim="The SA-plus-residual step raises token similarity in expectation: E[r] > 1.",
                    measured=f"one {stacks}, depth {st['depth']}, step-1 value maps redrawn {st['w_trials']} times "
                             "per block",
                    quantity=f"sample mean of r(X, Y) − 1 at the least escalating block ({rate_block})",
                    effect=rate, direction="above", section="tse-fig3", digits=4, **common(*synth, "w_trials")),
            Finding(key="tse-remark28-rate", where="Remark 2.8, Fig. 3", claim_id="yu-linear-rate",
                    claim="Once similarity is high, diversity shrinks per block by the linear rate 1/(1 + α²) = 1/2.",
                    measured=f"one {stacks}, depth {st['depth']}, step-1 value maps redrawn {st['w_trials']} times "
                             "per block",
                    quantity="diversity contraction 1/r per block over the blocks with t_sim > 0.9, mean over them",
                    effect=self.late_rate(), direction="equal", reference=1 / (1 + st["alpha"] ** 2),
                    reference_label="1/(1 + α²) = 0.5", margin=0.05, section="tse-fig3",
                    **common(*synth, "w_trials")),
            Finding(key="tse-fig4-prenorm", where="Fig. 4, §3.1", claim_id="yu-fig4-prenorm",
                    claim="Pre-norm mitigates the escalation implicitly: its token similarity grows more slowly.",
                    measured=f"{pre.shape[0]} pre-norm (eq. 19) stacks beside {post.shape[0]} post-norm ones",
                    quantity=f"pre-norm t_sim at block {k}, mean over trials",
                    effect=t_interval(pre[:, k]), direction="below", reference=float(post[:, k].mean()),
                    reference_label=f"post-norm's {post[:, k].mean():.3f} at block {k}", section="tse-fig4",
                    **common(*synth, "trials")),
            Finding(key="tse-eq20-norm", where="eq. (20), Fig. 4 (right)", claim_id="yu-eq20",
                    claim="The pre-norm residual stream grows with depth while the attention's input stays at "
                          "‖LN(·)‖_F.",
                    measured=f"{pre.shape[0]} pre-norm (eq. 19) stacks, depth {st['prenorm_depth']}",
                    quantity="‖X‖_F at the last block ÷ at the first, mean over trials",
                    effect=t_interval(norm_x[:, -1] / norm_x[:, 0]), direction="above", reference=1.0,
                    reference_label="1", section="tse-fig4", digits=2, **common(*synth, "prenorm_depth")),
        ]
        for tau, level, key in (("0.5", 0.5, "tse-fig5-half"), ("0.1", 0.0, "tse-fig5-tenth"),
                                ("1.0", 1.0, "tse-fig5-one")):
            if tau not in self.figure5 or tau not in self.paper_fig5:
                continue
            tdiv = np.asarray(self.figure5[tau], dtype=float)[:, -1]
            # at τ = 1 eq. (21) removes the whole token mean, and a matrix with zero mean has t_div 1 by definition
            identity = tau == "1.0" and float(np.abs(tdiv - 1).max()) < 1e-9
            out.append(Finding(
                key=key, where="Fig. 5", claim_id="yu-fig5",
                claim=f"With de-escalation after every block, token diversity levels off near {level:g} at "
                      f"τ = {float(tau):g}.",
                measured=f"{tdiv.size} de-escalated {stacks}, depth {st['deesc_depth']}",
                quantity=f"the last block's t_div at τ = {float(tau):g}, mean over runs",
                effect=Interval.exact(float(tdiv.mean())) if identity else t_interval(tdiv),
                tolerance=1e-9 if identity else None,
                exact_why=(f"at τ = 1 eq. (21) removes the whole token mean, and a matrix of zero mean has t_div = 1 "
                           f"by definition: every one of the {tdiv.size} runs gives 1 to round-off"
                           if identity else ""),
                label=f"τ = {float(tau):g}", direction="equal", reference=self.paper_fig5[tau],
                reference_label=f"the paper's {level:g}", margin=0.1, section="tse-fig5",
                **common(*synth, "deesc_depth", "deesc_runs")))
        if self.tau_sweep:
            out.append(Finding(
                key="tse-tau-threshold", where="Prop. 2.3, Remark 2.8, Fig. 5", kind="extension",
                claim=("By Prop. 2.3 and Remark 2.8's rate 1 + α², de-escalation keeps diversity exactly when "
                       "τ > τ* = 1 − 1/√(1 + α²)."),
                measured=(f"τ from 0 to 1 in {len(self.tau_sweep['taus'])} steps, {self.tau_sweep['runs']} "
                          f"de-escalated {stacks}, depth {st['deesc_depth']}"),
                quantity="the τ at which the last block's t_div first reaches 0.5, mean over runs",
                effect=self.tau_threshold(), direction="equal", reference=self.tau_star(),
                reference_label=f"τ* = {self.tau_star():.2f}", margin=0.05, section="tse-tau-sweep",
                **common(*synth, "deesc_depth")))
        out += [
            Finding(key="tse-bounds11", where="Lemma 2.4, eq. (11)", claim_id="yu-bounds11",
                    claim="μ₁² ≥ (1 − ω)² and μ₂² ≤ δ² for any row-stochastic P.",
                    measured=f"{st['bound_samples']} random pairs (X, P) per family, {len(self.bounds11)} families "
                             f"of row-stochastic P, n = {st['bound_n']}, d = {st['bound_d']}, float64",
                    quantity="the smallest slack of the two bounds over every sample",
                    effect=Interval.exact(self.bounds_min_slack()), tolerance=1e-12,
                    exact_why="a minimum over fixed float64 samples: on them each bound holds or not; only round-off",
                    direction="above", reference=-1e-10, reference_label="−1e-10 (round-off)",
                    section="tse-bounds", **common("bound_samples")),
            Finding(key="tse-cor27", where="Cor. 2.7", claim_id="yu-cor27",
                    claim="For doubly stochastic P, ω = 0 (and μ₁ = 1).",
                    measured=f"{st['bound_samples']} random doubly stochastic P (Sinkhorn), n = {st['bound_n']}, "
                             "float64",
                    quantity="ω, mean over the samples",
                    effect=Interval.exact(self.bounds11["doubly stochastic (Sinkhorn)"]["omega"]), tolerance=1e-12,
                    exact_why="ω of a doubly stochastic P is zero by algebra; what remains is float64 round-off",
                    direction="equal", margin=1e-10, reference_label="0 (± 1e-10: round-off)",
                    section="tse-bounds", **common("bound_samples")),
        ]
        dims = st["eta_dims"]
        out.append(Finding(
            key="tse-fig8", where="App. A, Fig. 8", claim_id="yu-fig8",
            claim="η concentrates at zero as d grows.",
            measured=f"X = e vᵀ + tQ, n = {st['eta_n']}, {len(st['eta_ts'])} values of t, d = "
                     f"{', '.join(str(x) for x in dims)}; {st['eta_draws_precise']} draws of W per (d, t)",
            quantity="slope of log sd(η) against log d, mean over t",
            effect=self.eta_slope(), direction="below", reference_label="0 (−1/2: the rate 1/√d)",
            section="tse-fig8", **common("eta_draws_precise")))
        return out


# ------------------------------------------------------------------ loops over trials and taus


def postnorm_trials(n: int, d: int, heads: int, depth: int, trials: int, alpha: float = 1.0,
                    value_scale: float = 1.0, ffn_mult: int = 4, seed: int = 0, tau: float | None = None,
                    deesc_place: str = "output", desc: str = "post-norm trials", ffn_init: str = "xavier",
                    ffn_kind: str = "relu") -> dict[str, np.ndarray]:
    """`trials` independent Algorithm-1 stacks (`core.escalation.postnorm_trajectory`, trial t with
    seed seed·100003 + t), stacked: t_sim, t_cos (trials, depth+1), xi_ratio (trials, depth, 4),
    delta, omega (trials, depth)."""
    runs = [E.postnorm_trajectory(n, d, heads, depth, seed * 100_003 + t, alpha, value_scale, ffn_mult, tau,
                                  deesc_place, ffn_init, ffn_kind)
            for t in progress(range(trials), desc=desc, total=trials)]
    return {k: np.stack([r[k] for r in runs]) for k in runs[0]}


def prenorm_trials(n: int, d: int, heads: int, depth: int, trials: int, alpha: float = 1.0,
                   value_scale: float = 1.0, ffn_mult: int = 4, seed: int = 0,
                   ffn_init: str = "xavier") -> dict[str, np.ndarray]:
    """Figure 4: `trials` eq.-(19) stacks (`core.escalation.prenorm_trajectory`), each key (trials, depth)."""
    runs = [E.prenorm_trajectory(n, d, heads, depth, seed * 100_003 + t, alpha, value_scale, ffn_mult, ffn_init)
            for t in progress(range(trials), desc="pre-norm trials", total=trials)]
    return {k: np.stack([r[k] for r in runs]) for k in runs[0]}


def deescalated_diversity(n: int, d: int, heads: int, depth: int, runs: int, taus: tuple[float, ...],
                          alpha: float = 1.0, value_scale: float = 1.0, ffn_mult: int = 4,
                          seed: int = 0, ffn_init: str = "xavier") -> dict[float, np.ndarray]:
    """Figure 5: token diversity t_div of each block output with de-escalation (eq. 21) after each
    block, for every τ; returns {τ: (runs, depth+1)} (column 0 is the input)."""
    return {tau: 1 - postnorm_trials(n, d, heads, depth, runs, alpha, value_scale, ffn_mult, seed, tau=tau,
                                     deesc_place="output", desc=f"tau={tau}", ffn_init=ffn_init)["t_sim"]
            for tau in taus}


def figure1_batch(p: Params):
    """Figure 1's input: `hf_batch` CoLA validation sentences (every 8th), BERT's uncased tokenizer, truncated at
    `hf_seq_len` and padded to the longest. Returns (sentences, encoding)."""
    with quiet_loading():
        tokenizer = models.load(TOKENIZER_MODEL).tokenizer
    sentences = load_glue("CoLA", "validation").sentence1[: p.hf_batch * 8][::8][: p.hf_batch]
    return sentences, tokenizer(sentences, padding="longest", truncation=True, max_length=p.hf_seq_len,
                                return_tensors="pt")


def figure1(p: Params, device: torch.device | str = "cpu") -> dict[str, dict[str, np.ndarray]]:
    """Random-init BERT and ALBERT of depth `hf_depth` on a batch of `hf_batch` CoLA validation
    sentences (every 8th) tokenised with BERT's uncased tokenizer, truncated at `hf_seq_len` and padded
    to the longest (padding masked); gradient norms for BERT only. The weights are drawn on CPU
    (the same model on every device) and moved to `device` with the batch."""
    sentences, enc = figure1_batch(p)
    out = {}
    for kind in ("bert", "albert"):
        model = random_encoder(kind, p.hf_depth, p.hf_hidden, p.hf_heads, p.hf_intermediate, p.seed).to(device)
        ids = enc["input_ids"].clamp(max=model.config.vocab_size - 1).to(device)
        out[kind] = escalation_profile(model, ids, enc["attention_mask"].to(device), grad=(kind == "bert"))
        out[kind]["real_tokens"] = int(enc["attention_mask"].sum())
        out[kind]["sentences"] = len(sentences)
        del model
    return out


def figure1_steps(p: Params, device: torch.device | str = "cpu") -> dict[str, np.ndarray]:
    """Figure 1's BERT step by step (`hf.escalation.step_log_odds`), for `hf_inits` random initialisations
    (seeds p.seed, p.seed + 1, …; the first is Figure 1's model) on Figure 1's CoLA batch."""
    sentences, enc = figure1_batch(p)
    runs = []
    for i in progress(range(p.hf_inits), desc="BERT per step", total=p.hf_inits):
        model = random_encoder("bert", p.hf_depth, p.hf_hidden, p.hf_heads, p.hf_intermediate, p.seed + i).to(device)
        ids = enc["input_ids"].clamp(max=model.config.vocab_size - 1).to(device)
        runs.append(step_log_odds(model, ids, enc["attention_mask"].to(device)))
        del model
    return {k: np.stack([r[k] for r in runs]) for k in runs[0]}


def figure1_sentences(p: Params, device: torch.device | str = "cpu") -> dict[str, np.ndarray]:
    """Figure 1's BERT and ALBERT (the same models and batch as `figure1`) per input sentence: each sentence's
    last-layer t_sim over its real tokens, so that the mean over sentences gets an interval."""
    sentences, enc = figure1_batch(p)
    out = {}
    for kind in ("bert", "albert"):
        model = random_encoder(kind, p.hf_depth, p.hf_hidden, p.hf_heads, p.hf_intermediate, p.seed).to(device)
        ids = enc["input_ids"].clamp(max=model.config.vocab_size - 1).to(device)
        mask = enc["attention_mask"].to(device)
        with torch.no_grad():
            last = model(input_ids=ids, attention_mask=mask).last_hidden_state
        out[kind] = M.t_sim(last, mask.bool()).cpu().numpy()
        del model
    return out


def lemma24_single(p: Params) -> dict[str, float]:
    """Lemma 2.4 with one head: head 0's attention of the block `core.escalation.lemma24_at_init` draws (same X,
    same P), a d × d value map of variance `value_scale`/d, `lemma_trials` draws."""
    torch.manual_seed(p.seed)
    blk = E.PostNormBlock(p.d_model, p.n_heads, p.ffn_mult * p.d_model, value_scale=p.value_scale,
                          ffn_init=p.ffn_init)
    X = E.random_input(p.n_tokens, p.d_model, p.seed)
    with torch.no_grad():
        P = blk.attn.attention(X)
    return dict(E.lemma24_monte_carlo(X, P[:1], p.alpha, p.value_scale, p.lemma_trials, p.seed).__dict__)


def paper_claims(figure: str) -> dict[str, float]:
    """The paper's values for one figure, by quantity, from data/yu_zhang_2024_claims.csv."""
    with open(PAPER_CLAIMS, encoding="utf-8") as fh:
        return {r["quantity"]: float(r["value"]) for r in csv.DictReader(fh) if r["figure"] == figure}


def paper_levels() -> dict[str, float]:
    """The paper's token-diversity levels of Figure 5 by τ (as `str(float(tau))`), from
    data/yu_zhang_2024_claims.csv."""
    with open(PAPER_CLAIMS, encoding="utf-8") as fh:
        rows = [r for r in csv.DictReader(fh) if r["figure"] == "Figure 5"]
    return {str(float(r["quantity"].rsplit("=", 1)[1])): float(r["value"]) for r in rows}


def _shares(xi_ratio: np.ndarray, blocks: int) -> np.ndarray:
    with warnings.catch_warnings():     # blocks where every trial is NaN (diversity below round-off)
        warnings.simplefilter("ignore", RuntimeWarning)
        return E.step_shares(xi_ratio, slice(0, blocks))


def summarise(r: dict[str, Any], share_blocks: int = 3) -> dict[str, float | None]:
    """The derived numbers of the chapter's tables and prose, from the pieces `run` computes (keys
    `figure1`, `figure2`, `figure2_other`, `figure2_init`, `figure2_ablation`, `figure3`, `figure4`,
    `figure5`, `figure5_other`, `figure8`, `bounds11`)."""
    fig1, fig2, fig2_other, fig3, fig4 = r["figure1"], r["figure2"], r["figure2_other"], r["figure3"], r["figure4"]
    fig2_init, abl = r["figure2_init"], r["figure2_ablation"]
    gn = np.asarray(fig1["bert"]["grad_norm"])
    with warnings.catch_warnings():     # blocks where every trial is NaN (diversity below round-off)
        warnings.simplefilter("ignore", RuntimeWarning)
        xr, xa = np.nanmean(fig2["xi_ratio"], 0), np.nanmean(fig2_other["xi_ratio"], 0)
        xi_init = np.nanmean(fig2_init["xi_ratio"], 0)
        xc = np.nanmean(abl["centred-relu"]["xi_ratio"], 0)
    late = fig3["t_sim"] > 0.9
    sh, sh_init = _shares(fig2["xi_ratio"], share_blocks), _shares(fig2_init["xi_ratio"], share_blocks)
    s: dict[str, float | None] = {
        "bert_tsim_last": float(fig1["bert"]["t_sim"][-1]), "bert_tcos_last": float(fig1["bert"]["t_cos"][-1]),
        "albert_tsim_last": float(fig1["albert"]["t_sim"][-1]),
        "albert_tcos_last": float(fig1["albert"]["t_cos"][-1]),
        "hf_sentences": float(fig1["bert"].get("sentences", math.nan)),
        "hf_real_tokens": float(fig1["bert"]["real_tokens"]),
        "grad_min": float(gn.min()), "grad_max": float(gn.max()), "grad_layers": len(gn),
        # the geometric-mean change per layer over the range max/min, and the largest change between
        # adjacent layers (either direction)
        "grad_factor": float((gn.max() / gn.min()) ** (1 / max(1, len(gn) - 1))),
        "grad_step_max": float(np.max(np.maximum(gn[1:] / gn[:-1], gn[:-1] / gn[1:]))) if len(gn) > 1 else 1.0,
        "step1_ratio_first": float(xr[0, 0]), "step1_ratio_first_other": float(xa[0, 0]),
        "other_steps_ratio": float(np.nanmean(xr[:, 1:])), "other_steps_ratio_other": float(np.nanmean(xa[:, 1:])),
        "step3_ratio_first": float(xr[0, 2]), "step3_ratio_first_other": float(xa[0, 2]),
        "step3_ratio_first_init": float(xi_init[0, 2]), "step3_ratio_first_centred": float(xc[0, 2]),
        "first_block_above_099": first_block_above(fig2["t_sim"]),
        "first_block_above_099_other": first_block_above(fig2_other["t_sim"]),
        "first_block_above_099_init": first_block_above(fig2_init["t_sim"]),
        "first_block_above_099_none": first_block_above(abl["none"]["t_sim"]),
        "first_block_above_099_centred": first_block_above(abl["centred-relu"]["t_sim"]),
        "attn_share": float(sh[0]), "ffn_share": float(sh[2]), "ln_share": float(sh[1] + sh[3]),
        "attn_share_init": float(sh_init[0]), "ffn_share_init": float(sh_init[2]),
        "ln_share_init": float(sh_init[1] + sh_init[3]), "share_blocks": share_blocks,
        "share_last_block": share_blocks - 1,
        "postnorm_tsim_last": float(fig2["t_sim"][:, -1].mean()),
        "err_est1": float(np.abs(fig3["est1"] - fig3["xi_minus_1"]).mean()),
        "err_est2": float(np.abs(fig3["est2"] - fig3["xi_minus_1"]).mean()),
        "lemma24_max_rel_err": float(np.max(np.abs(fig3["mc_xi1"] - fig3["formula_xi1"]) / fig3["formula_xi1"])),
        "late_contraction": float((1 / fig3["r"][late]).mean()) if late.any() else math.nan,
        "prenorm_tsim_last": float(fig4["t_sim"][:, -1].mean()),
        "prenorm_normX_first": float(fig4["norm_X"][:, 0].mean()),
        "prenorm_normX_last": float(fig4["norm_X"][:, -1].mean()),
        "prenorm_normXhat": float(fig4["norm_Xhat"].mean()),
        "prenorm_normattn": float(fig4["norm_attn"].mean()),
    }
    for tau, tdiv in r["figure5"].items():
        s[f"tdiv_last_tau_{tau}"] = float(tdiv[:, -1].mean())
        s[f"tdiv_last_sd_tau_{tau}"] = float(tdiv[:, -1].std())
    for tau, tdiv in r["figure5_other"].items():
        s[f"tdiv_last_other_tau_{tau}"] = float(tdiv[:, -1].mean())
    f8 = r["figure8"]
    sd = np.asarray(f8["precise"]["sd"])                                  # (dims, ts)
    s["eta_sd_first_d"], s["eta_sd_last_d"] = float(sd[0].mean()), float(sd[-1].mean())
    s["eta_paper_absmax_first_d"] = float(np.abs(f8["paper"]["mean"][0]).max())
    s["eta_paper_absmax_last_d"] = float(np.abs(f8["paper"]["mean"][-1]).max())
    s["eta_precise_absmax_last_d"] = float(np.abs(f8["precise"]["mean"][-1]).max())
    b = r["bounds11"]
    s["bound_min_slack_mu1"] = min(v["min_slack_mu1"] for v in b.values())
    s["bound_min_slack_mu2"] = min(v["min_slack_mu2"] for v in b.values())
    return s


def _figure8(p: Params) -> dict[str, Any]:
    """Figure 8 with the paper's 50 draws of W and with `eta_draws_precise` draws (same X and P)."""
    return {name: E.eta_concentration(p.eta_n, p.eta_dims, p.eta_ts, draws, p.seed, p.alpha)
            for name, draws in (("paper", p.eta_draws), ("precise", p.eta_draws_precise))}


def _synthetic(p: Params, device: torch.device | str = "cpu") -> dict[str, Any]:
    """Figures 2-5 and the FFN variants: every synthetic stack of §2.4-3.2, built and run on `device`."""
    with torch.device(device):
        return _synthetic_here(p)


def _synthetic_here(p: Params) -> dict[str, Any]:
    synth = dict(n=p.n_tokens, d=p.d_model, heads=p.n_heads, alpha=p.alpha, ffn_mult=p.ffn_mult, seed=p.seed)
    post = dict(depth=p.depth, trials=p.trials, **synth)
    out: dict[str, Any] = {
        "figure2": postnorm_trials(value_scale=p.value_scale, ffn_init=p.ffn_init, **post),
        "figure2_other": postnorm_trials(value_scale=p.other_value_scale, ffn_init=p.ffn_init,
                                         desc="other reading", **post),
        "figure2_init": postnorm_trials(value_scale=p.value_scale, ffn_init=p.other_ffn_init,
                                        desc=f"{p.other_ffn_init} FFN", **post),
    }
    out["figure2_ablation"] = {
        kind: {k: v for k, v in postnorm_trials(value_scale=p.value_scale, ffn_init=p.ffn_init, ffn_kind=kind,
                                                desc=f"FFN {kind}", **post).items() if k in ("t_sim", "xi_ratio")}
        for kind in ("none", "centred-relu")}
    out["figure3"] = E.w_resampling(depth=p.depth, draws=p.w_trials, value_scale=p.value_scale,
                                    ffn_init=p.ffn_init, **synth)
    out["figure4"] = prenorm_trials(depth=p.prenorm_depth, trials=p.prenorm_trials, value_scale=p.value_scale,
                                    ffn_init=p.ffn_init, **synth)
    for key, vs in (("figure5", p.value_scale), ("figure5_other", p.other_value_scale)):
        out[key] = {str(t): v for t, v in deescalated_diversity(depth=p.deesc_depth, runs=p.deesc_runs, taus=p.taus,
                                                                value_scale=vs, ffn_init=p.ffn_init,
                                                                **synth).items()}
    return out


def tau_sweep(p: Params, device: torch.device | str = "cpu") -> dict[str, Any]:
    """The τ sweep: `sweep_runs` stacks of depth `deesc_depth` per τ in `sweep_taus` (τ = 0: no
    de-escalation), each with eq. (21) after every block (`core.escalation.deescalated_diversity_trajectory`;
    run r has the seed of run r of Figure 5). Returns `taus`, `runs`, `t_div_last` (taus, runs), `t_div`
    (taus, depth+1) and `block_odds` (taus, depth), the last two averaged over runs."""
    last, mean, odds = [], [], []
    with torch.device(device):
        for tau in progress(p.sweep_taus, desc="tau sweep", total=len(p.sweep_taus)):
            runs = [E.deescalated_diversity_trajectory(p.n_tokens, p.d_model, p.n_heads, p.deesc_depth,
                                                       p.seed * 100_003 + r, float(tau), p.alpha, p.value_scale,
                                                       p.ffn_mult, p.ffn_init) for r in range(p.sweep_runs)]
            tdiv = np.stack([r["t_div"] for r in runs])
            last.append(tdiv[:, -1])
            mean.append(tdiv.mean(0))
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                odds.append(np.nanmean(np.stack([r["block_odds"] for r in runs]), 0))
    return {"taus": list(p.sweep_taus), "runs": p.sweep_runs, "t_div_last": np.stack(last), "t_div": np.stack(mean),
            "block_odds": np.stack(odds)}


def run(p: Params) -> Result:
    """Every computation of the chapter, in the order of its sections. At `book` scale every piece —
    the identities, Figure 1, the synthetic stacks, Figure 8 and the bounds (11) — is read back from
    `results/tse/book/` when its parameters match (computing them took 28 minutes on two busy CPU
    cores; reading them, seconds)."""
    seed_everything(p.seed)
    device = choose_device(p.device)

    def identities() -> dict[str, Any]:
        lemma = E.lemma24_at_init(p.n_tokens, p.d_model, p.n_heads, p.alpha, p.value_scale, p.lemma_trials,
                                  p.seed, p.ffn_mult, p.ffn_init)
        return {"lemma24": dict(lemma.__dict__), "prop23": E.prop23_error(p.n_tokens, p.d_model, p.seed)}

    old = dict(drop=SWEEP_FIELDS + STEP_FIELDS)    # the pieces computed before the sweep: keyed without its fields
    ident, _ = results.cached(p, "identities", identities, **old)
    fig1, _ = results.cached(p, "figure1", lambda: figure1(p, device), **old)
    pieces, _ = results.cached(p, "synthetic", lambda: _synthetic(p, device), **old)
    appendix, _ = results.cached(p, "appendix", lambda: {
        "figure8": _figure8(p), "bounds11": E.bounds11_check(p.bound_n, p.bound_d, p.bound_samples, p.seed)}, **old)
    sweep, _ = results.cached(p, "tau_sweep", lambda: tau_sweep(p, device), drop=STEP_FIELDS)
    steps, _ = results.cached(p, "figure1_steps", lambda: figure1_steps(p, device))
    sentences, _ = results.cached(p, "figure1_sentences", lambda: figure1_sentences(p, device))
    single, _ = results.cached(p, "lemma24_single", lambda: lemma24_single(p))
    pieces = _arrays(pieces)
    pieces["figure1"] = _arrays(fig1)
    pieces["figure8"] = _arrays(appendix["figure8"])
    pieces["bounds11"] = appendix["bounds11"]
    return Result(
        settings=p.cache_key(), prop23_max_abs_error=ident["prop23"], lemma24=ident["lemma24"],
        other_value_scale=p.other_value_scale, paper_fig5=paper_levels(),
        summary=summarise(pieces, p.share_blocks), tau_sweep=sweep, figure1_steps=steps,
        figure1_sentences=sentences, lemma24_single=single, scale=p.scale, **pieces)


__all__ = ["Params", "Result", "run", "postnorm_trials", "prenorm_trials", "deescalated_diversity", "figure1",
           "summarise", "paper_claims", "paper_levels", "tau_sweep", "figure1_steps", "figure1_sentences",
           "lemma24_single", "SWEEP_FIELDS", "STEP_FIELDS",
           "EQ18_FRACTION"]
