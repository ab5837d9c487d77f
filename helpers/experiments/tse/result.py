"""The tse chapter's typed records and its `Result`: every number the figures, tables, prose and findings read.

A record is a frozen dataclass of what one computation returns (its fields named as the computation names its
outputs), so a run piece stored as a JSON dict (`results/tse/book/*.json`) becomes a record field for field
(`Record.of`) when a `Result` is built or loaded; the files and their cache keys stay as they are."""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np

from helpers.core import escalation as E
from helpers.core.escalation import Lemma24Check, first_block_above
from helpers.core.findings import Finding
from helpers.core.stats import Interval, t_interval
from helpers.machinery import results

from .findings import findings
from .params import EQ18_FRACTION, Params, paper_claims


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


@dataclass(frozen=True, eq=False)
class Record:
    """A computation's outputs by name; lists of numbers as numpy arrays."""

    @classmethod
    def of(cls, obj: Any) -> Any:
        """`obj` as this record: a record is kept, a dict (a stored piece, a computation's output) is read field
        for field, an empty one or None gives None."""
        if obj is None or isinstance(obj, cls):
            return obj
        if not obj:
            return None
        names = {f.name for f in fields(cls)}
        return cls(**{k: _arrays(v) for k, v in obj.items() if k in names})


@dataclass(frozen=True, eq=False)
class Profile(Record):
    """Figure 1, one random-init transformers model (`hf.escalation.escalation_profile`): t_sim, t_cos
    (depth+1,) over layers, the gradient norm per layer (BERT only), the batch's real tokens and sentences."""

    t_sim: np.ndarray
    t_cos: np.ndarray
    grad_norm: np.ndarray | None = None
    real_tokens: int = 0
    sentences: int | None = None


@dataclass(frozen=True, eq=False)
class Stacks(Record):
    """Post-norm Algorithm-1 stacks over trials (`compute.postnorm_trials`): t_sim, t_cos (trials, depth+1),
    xi_ratio (trials, depth, 4), delta, omega (trials, depth); the FFN ablations keep t_sim and xi_ratio."""

    t_sim: np.ndarray
    xi_ratio: np.ndarray
    t_cos: np.ndarray | None = None
    delta: np.ndarray | None = None
    omega: np.ndarray | None = None


@dataclass(frozen=True, eq=False)
class Resampling(Record):
    """Figure 3 (`core.escalation.w_resampling`): per block (depth,), the step-1 value maps redrawn."""

    t_sim: np.ndarray
    xi_minus_1: np.ndarray
    xi_minus_1_se: np.ndarray
    r: np.ndarray
    r_se: np.ndarray
    est1: np.ndarray
    est2: np.ndarray
    r_est1: np.ndarray
    r_est2: np.ndarray
    exact_ratio_minus_1: np.ndarray
    mc_xi1: np.ndarray
    mc_xi2: np.ndarray
    formula_xi1: np.ndarray
    formula_xi2: np.ndarray


@dataclass(frozen=True, eq=False)
class PreNorm(Record):
    """Figure 4 (`compute.prenorm_trials`): each (trials, depth)."""

    t_sim: np.ndarray
    norm_X: np.ndarray
    norm_Xhat: np.ndarray
    norm_attn: np.ndarray


@dataclass(frozen=True, eq=False)
class Eta(Record):
    """Figure 8 (`core.escalation.eta_concentration`): η's mean, sd and standard error over draws, (dims, ts)."""

    mean: np.ndarray
    sd: np.ndarray
    se: np.ndarray


@dataclass(frozen=True, eq=False)
class Bounds(Record):
    """The bounds (11) on one family of P (`core.escalation.bounds11_check`)."""

    min_slack_mu1: float
    min_slack_mu2: float
    mean_slack_mu1: float
    mean_slack_mu2: float
    omega: float
    delta: float


@dataclass(frozen=True, eq=False)
class Sweep(Record):
    """The τ sweep (`compute.tau_sweep`): `taus`, `runs`, `t_div_last` (taus, runs) of the last block, `t_div`
    (taus, depth+1) mean over runs, `block_odds` (taus, depth) mean over runs of each block's ξ₁/ξ₂ before its
    de-escalation."""

    taus: np.ndarray
    runs: int
    t_div_last: np.ndarray
    t_div: np.ndarray
    block_odds: np.ndarray


@dataclass(frozen=True, eq=False)
class Steps(Record):
    """Figure 1's BERT per step (`hf.escalation.step_log_odds`), one row per random initialisation:
    `increments` (inits, layers, 4) of the log-odds of t_sim, `t_sim` (inits, layers + 1)."""

    increments: np.ndarray
    t_sim: np.ndarray


@dataclass(frozen=True)
class Summary:
    """The derived numbers of the chapter's tables and prose (`compute.summarise`); `tdiv_last*` by str(τ)."""

    bert_tsim_last: float
    bert_tcos_last: float
    albert_tsim_last: float
    albert_tcos_last: float
    hf_sentences: float
    hf_real_tokens: float
    grad_min: float
    grad_max: float
    grad_layers: int
    grad_factor: float
    grad_step_max: float
    step1_ratio_first: float
    step1_ratio_first_other: float
    other_steps_ratio: float
    other_steps_ratio_other: float
    step3_ratio_first: float
    step3_ratio_first_other: float
    step3_ratio_first_init: float
    step3_ratio_first_centred: float
    first_block_above_099: int | None
    first_block_above_099_other: int | None
    first_block_above_099_init: int | None
    first_block_above_099_none: int | None
    first_block_above_099_centred: int | None
    attn_share: float
    ffn_share: float
    ln_share: float
    attn_share_init: float
    ffn_share_init: float
    ln_share_init: float
    share_blocks: int
    share_last_block: int
    postnorm_tsim_last: float
    err_est1: float
    err_est2: float
    lemma24_max_rel_err: float
    late_contraction: float
    prenorm_tsim_last: float
    prenorm_normX_first: float
    prenorm_normX_last: float
    prenorm_normXhat: float
    prenorm_normattn: float
    eta_sd_first_d: float
    eta_sd_last_d: float
    eta_paper_absmax_first_d: float
    eta_paper_absmax_last_d: float
    eta_precise_absmax_last_d: float
    bound_min_slack_mu1: float
    bound_min_slack_mu2: float
    tdiv_last: dict[str, float] = field(default_factory=dict)          # the last block's t_div, mean over runs
    tdiv_last_sd: dict[str, float] = field(default_factory=dict)       # … its sd over runs
    tdiv_last_other: dict[str, float] = field(default_factory=dict)    # … under the other value-map variance

    @classmethod
    def of(cls, obj: Any) -> Summary:
        """A `Summary`, or the dict its JSON gives back."""
        if isinstance(obj, cls):
            return obj
        data = dict(obj)
        for prefix, name in (("tdiv_last_tau_", "tdiv_last"), ("tdiv_last_sd_tau_", "tdiv_last_sd"),
                             ("tdiv_last_other_tau_", "tdiv_last_other")):     # the flat keys of older records
            flat = {k[len(prefix):]: data.pop(k) for k in list(data) if k.startswith(prefix)}
            data.setdefault(name, flat)
        names = {f.name for f in fields(cls)}
        return cls(**{k: _arrays(v) for k, v in data.items() if k in names})


def settings_of(obj: Any, scale: str) -> Params:
    """The Params a result was computed with, from the cache key its JSON stores (lists back to tuples)."""
    if isinstance(obj, Params):
        return obj
    names = {f.name for f in fields(Params)}
    return Params(**{k: tuple(v) if isinstance(v, list) else v for k, v in obj.items() if k in names},
                  **({"scale": scale} if scale and "scale" not in obj else {}))


@dataclass
class Result(results.Result):
    """Every number of the chapter, in typed records (above); per-block arrays are numpy arrays. Built from
    dicts (a run's pieces, a saved result's JSON), every field becomes its record (`__post_init__`)."""

    settings: Params                         # the Params the result was computed with (its cache key)
    prop23_max_abs_error: float
    lemma24: Lemma24Check
    figure1: dict[str, Profile]              # "bert" / "albert"
    figure2: Stacks
    figure2_other: Stacks                    # the other reading of the value-map variance
    other_value_scale: float
    figure2_init: Stacks                     # the other FFN initialisation (Params.other_ffn_init)
    figure2_ablation: dict[str, Stacks]      # "none" / "centred-relu": t_sim, xi_ratio with that FFN
    figure3: Resampling
    figure4: PreNorm
    figure5: dict[str, np.ndarray]           # str(tau) -> t_div (runs, depth+1)
    figure5_other: dict[str, np.ndarray]     # Figure 5 under the other reading of the value-map variance
    figure8: dict[str, Eta]                  # "paper" (eta_draws) / "precise" (eta_draws_precise)
    bounds11: dict[str, Bounds]              # per family of P
    paper_fig5: dict[str, float]             # the paper's t_div level by str(tau) (data/yu_zhang_2024_claims.csv)
    #: the derived numbers the tables and prose quote; None: derived from the records (`summarise`)
    summary: Summary | None = None
    #: the paper's Figure 2 statements by quantity (data/yu_zhang_2024_claims.csv)
    paper_fig2: dict[str, float] = field(default_factory=lambda: paper_claims("Figure 2"))
    tau_sweep: Sweep | None = None
    figure1_steps: Steps | None = None
    #: Figure 1's models per input sentence: `bert`, `albert` (sentences,) — each sentence's last-layer t_sim
    figure1_sentences: dict[str, np.ndarray] = field(default_factory=dict)
    #: Lemma 2.4 with a single head (the attention of head 0 of the block `lemma24` uses, one d × d value map)
    lemma24_single: Lemma24Check | None = None
    scale: str = ""

    def __post_init__(self) -> None:
        self.settings = settings_of(self.settings, self.scale)
        self.lemma24 = _lemma(self.lemma24)
        self.lemma24_single = _lemma(self.lemma24_single)
        self.figure1 = {k: Profile.of(v) for k, v in self.figure1.items()}
        for name in ("figure2", "figure2_other", "figure2_init"):
            setattr(self, name, Stacks.of(getattr(self, name)))
        self.figure2_ablation = {k: Stacks.of(v) for k, v in self.figure2_ablation.items()}
        self.figure3, self.figure4 = Resampling.of(self.figure3), PreNorm.of(self.figure4)
        self.figure5, self.figure5_other = _arrays(self.figure5), _arrays(self.figure5_other)
        self.figure8 = {k: Eta.of(v) for k, v in self.figure8.items()}
        self.bounds11 = {k: Bounds.of(v) for k, v in self.bounds11.items()}
        self.tau_sweep, self.figure1_steps = Sweep.of(self.tau_sweep), Steps.of(self.figure1_steps)
        self.figure1_sentences = _arrays(self.figure1_sentences or {})
        self.summary = Summary.of(self.summary) if self.summary else summarise(self)

    # ------------------------------------------------------------ what the findings and the prose read

    def _stack(self, init: str) -> Stacks:
        """The Figure 2 stacks with the run's FFN initialisation (`init="run"`) or the other one ("other")."""
        return self.figure2 if init == "run" else self.figure2_init

    def saturation_block(self, init: str = "run") -> int | None:
        """The first block whose mean t_sim exceeds 0.99 (None: never)."""
        return first_block_above(self._stack(init).t_sim)

    def share(self, steps: tuple[int, ...] = (2,), init: str = "run", blocks: int | None = None) -> Interval:
        """The share of the log-odds growth of t_sim that the steps `steps` of Algorithm 1 supply (0: SA,
        1 and 3: the LayerNorms, 2: the FFN; Prop. 2.3: a step multiplies the odds by its ξ₁/ξ₂, so
        log ξ₁/ξ₂ is its additive part) over blocks 0 … `blocks` − 1 — by default the whole escalation,
        the blocks before t_sim first passes 0.99 (all blocks if it never does) — per trial, with its
        t-interval over trials."""
        xr = np.asarray(self._stack(init).xi_ratio, dtype=float)            # (trials, depth, 4)
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

    def remark28_factor(self) -> float:
        """The factor ξ₁/ξ₂ → 1 + α² by which a post-norm block multiplies the odds t_sim/(1 − t_sim) once
        similarity is high (Remark 2.8; its reciprocal is the linear rate at which diversity shrinks)."""
        return 1 + self.settings.alpha ** 2

    def tau_star(self) -> float:
        """The threshold the odds argument predicts: a block multiplies the odds t_sim/(1 − t_sim) by
        ξ₁/ξ₂ → 1 + α² (Remark 2.8) and the de-escalation by (1 − τ)², so the common part dies out when
        (1 + α²)(1 − τ)² < 1, i.e. τ > τ* = 1 − 1/√(1 + α²) (≈ 0.29 at α = 1)."""
        return 1 - 1 / math.sqrt(1 + self.settings.alpha ** 2)

    def tau_threshold(self, level: float = 0.5) -> Interval:
        """The measured threshold: per run, the τ at which the last block's t_div first reaches `level`
        (linear between the two swept τ around it; NaN if it never does), with its t-interval over runs."""
        taus = np.asarray(self.tau_sweep.taus, dtype=float)
        last = np.asarray(self.tau_sweep.t_div_last, dtype=float)         # (taus, runs)
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
        taus = np.asarray(self.tau_sweep.taus, dtype=float)
        i = int(np.argmin(np.abs(taus - self.tau_star())))
        odds = np.asarray(self.tau_sweep.block_odds, dtype=float)[i]
        g = float(np.exp(np.nanmean(np.log(odds))))
        return 1 - 1 / math.sqrt(g)

    def bert_odds_factor(self) -> float:
        """Figure 1's escalation rate: the geometric mean, over BERT's layers while t_sim < 0.99, of the
        factor by which a layer multiplies the odds t_sim/(1 − t_sim)."""
        t = np.asarray(self.figure1["bert"].t_sim, dtype=float)
        lo = E.log_odds(t)
        keep = t[:-1] < 0.99
        return float(np.exp(np.diff(lo)[keep].mean()))

    def eq18_factor(self) -> float:
        """Eq. (18)'s rate for BERT's attention at its default initialisation: E[ξ₁]/E[ξ₂] = 1 + c with
        μ̄₁ ≈ 1, μ̄₂ ≈ 0 (near-uniform attention) and c = d·Var of the value-then-output map's entries =
        (d σ²)², σ = transformers' BERT `initializer_range` (the weights of Figure 1), d = hidden width."""
        from transformers import BertConfig

        d, std = self.settings.hf_hidden, BertConfig().initializer_range
        return 1 + (d * std ** 2) ** 2

    def bert_step_factors(self, level: float = 0.99) -> np.ndarray:
        """(inits, 4): per random BERT, the factor by which each of its four steps (SA + residual, LN,
        FFN + residual, LN) multiplies the odds t_sim/(1 − t_sim), geometric mean over the layers whose input
        t_sim is below `level` (the escalation, as `bert_odds_factor`)."""
        inc = np.asarray(self.figure1_steps.increments, dtype=float)      # (inits, layers, 4)
        t = np.asarray(self.figure1_steps.t_sim, dtype=float)[:, :-1]     # (inits, layers): layer inputs
        return np.stack([np.exp(i[k < level].mean(0)) for i, k in zip(inc, t, strict=True)])

    def bert_attention_factor(self) -> Interval:
        """The attention step's (SA + residual) factor on the odds per BERT layer during the escalation,
        with its t-interval over random initialisations: what eq. (18) predicts (`eq18_factor`)."""
        return t_interval(self.bert_step_factors()[:, 0])

    def bert_share(self, steps: tuple[int, ...] = (2,), level: float = 0.99) -> Interval:
        """The share of BERT's log-odds growth over the escalation (layers whose input t_sim is below `level`)
        that the steps `steps` supply (0: SA + residual, 1 and 3: the LayerNorms, 2: FFN + residual), with its
        t-interval over random initialisations."""
        inc = np.asarray(self.figure1_steps.increments, dtype=float)
        t = np.asarray(self.figure1_steps.t_sim, dtype=float)[:, :-1]
        return t_interval([i[k < level][:, list(steps)].sum() / i[k < level].sum()
                           for i, k in zip(inc, t, strict=True)])

    def eq18_margin(self) -> float:
        """The margin of "at eq. (18)'s rate": `EQ18_FRACTION` of the predicted excess over one."""
        return EQ18_FRACTION * (self.eq18_factor() - 1)

    def lemma24_se(self, heads: str = "multi") -> dict[str, float]:
        """How far the Monte Carlo E[ξ₁], E[ξ₂] lie from Lemma 2.4's formula, in standard errors (`heads`: "multi",
        the block's 8 heads as Prop. 2.9 averages them; "single", one head)."""
        lem = self.lemma24 if heads == "multi" else self.lemma24_single
        return {"xi1": abs(lem.mc_xi1 - lem.formula_xi1) / lem.mc_xi1_se,
                "xi2": abs(lem.mc_xi2 - lem.formula_xi2) / lem.mc_xi2_se}

    # ------------------------------------------------------------ the statistics of the findings

    def fig1_last(self, draws: int = 2000) -> Interval:
        """Figure 1's claim: the smaller of BERT's and ALBERT's last-layer t_sim, each the mean over the input
        sentences, with its percentile bootstrap interval over sentences (the same resampled sentences for both
        models). Without the per-sentence values: the bare estimate from Figure 1 (no interval)."""
        f1 = self.figure1
        est = min(float(f1["bert"].t_sim[-1]), float(f1["albert"].t_sim[-1]))
        if not self.figure1_sentences:
            return Interval(est, math.nan, math.nan, 1, "bootstrap")
        b, a = (np.asarray(self.figure1_sentences[k], dtype=float) for k in ("bert", "albert"))
        idx = np.random.default_rng(self.settings.seed).integers(0, b.size, (draws, b.size))
        boot = np.minimum(b[idx].mean(1), a[idx].mean(1))
        return Interval.from_draws(boot, estimate=min(b.mean(), a.mean()))

    def grad_log_steps(self) -> Interval:
        """Figure 1's gradient norm: the change of log gradient norm between adjacent BERT layers, mean over the
        layers with its t-interval over them (0: constant; log 1.01 ≈ 0.01: 1 % per layer)."""
        return t_interval(np.diff(np.log(np.asarray(self.figure1["bert"].grad_norm, dtype=float))))

    def lemma_gap(self, heads: str = "multi") -> Interval:
        """Lemma 2.4 (`heads="single"`) or Prop. 2.9 (`"multi"`): the Monte Carlo mean of ξ₁ over draws of W minus
        the formula 1 + α²dσ²μ̄₁², with its normal interval (± 1.96 standard errors of the mean over the draws)."""
        lem = self.lemma24 if heads == "multi" else self.lemma24_single
        d, half = lem.mc_xi1 - lem.formula_xi1, 1.96 * lem.mc_xi1_se
        draws = self.settings.lemma_trials
        return Interval(d, d - half, d + half, draws, "normal")

    def lemma_margin(self, heads: str = "multi") -> float:
        """"Alike the formula": within 1 % of its predicted excess over one, α²dσ²μ̄₁²."""
        lem = self.lemma24 if heads == "multi" else self.lemma24_single
        return 0.01 * (lem.formula_xi1 - 1)

    def bounds_min_slack(self) -> float:
        """The smallest slack of the two bounds (11) over every sample of every family of P (≥ 0 where they hold)."""
        return min(min(v.min_slack_mu1, v.min_slack_mu2) for v in self.bounds11.values())

    def rate_excess(self) -> tuple[Interval, int]:
        """Theorem 2.6's conclusion E[r] > 1 where it is weakest: at the block of Figure 3 with the smallest sample
        mean of r(X, Y), that mean minus one with its normal interval over the draws of W; and the block."""
        r, se = np.asarray(self.figure3.r, dtype=float), np.asarray(self.figure3.r_se, dtype=float)
        k = int(np.argmin(r))
        return Interval(r[k] - 1, r[k] - 1 - 1.96 * se[k], r[k] - 1 + 1.96 * se[k], self.settings.w_trials,
                        "normal"), k

    def estimate_gap(self) -> Interval:
        """Fig. 3: how much closer Estimate 2 lies to the sample mean of ξ₁/ξ₂ − 1 than Estimate 1, per block
        |E1 − mean| − |E2 − mean|, mean over blocks with its t-interval over them."""
        f3 = self.figure3
        m = np.asarray(f3.xi_minus_1, dtype=float)
        return t_interval(np.abs(np.asarray(f3.est1) - m) - np.abs(np.asarray(f3.est2) - m))

    def late_rate(self, level: float = 0.9) -> Interval:
        """Remark 2.8's rate: the diversity contraction 1/r per block over the blocks of Figure 3 whose t_sim exceeds
        `level`, mean with its t-interval over those blocks (each block's r a mean over the draws of W)."""
        f3 = self.figure3
        late = np.asarray(f3.t_sim, dtype=float) > level
        return t_interval(1 / np.asarray(f3.r, dtype=float)[late])

    def saturation_interval(self, draws: int = 1000, level: float = 0.99) -> Interval:
        """The first block whose mean t_sim exceeds `level` (Fig. 2), with its percentile bootstrap interval over
        trials (a resample that never exceeds it counts as the depth)."""
        t = np.asarray(self.figure2.t_sim, dtype=float)
        idx = np.random.default_rng(self.settings.seed).integers(0, t.shape[0], (draws, t.shape[0]))
        depth = t.shape[1]
        boot = [first_block_above(t[i], level) for i in idx]
        est = first_block_above(t, level)
        return Interval.from_draws([depth if b is None else b for b in boot],
                                   estimate=depth if est is None else est)

    def saturation_point_why(self, level: float = 0.99) -> str:
        """Why the saturation block's bootstrap interval has no width: a block index, and the mean t_sim over the
        trials steps across `level` between two blocks by more than the trials move it."""
        t = np.asarray(self.figure2.t_sim, dtype=float)
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
        sd = np.log(np.asarray(self.figure8["precise"].sd, dtype=float))         # (dims, ts)
        dims = np.log(np.asarray(self.settings.eta_dims, dtype=float))
        return t_interval(np.polyfit(dims, sd, 1)[0])

    def findings(self) -> list[Finding]:
        """The paper's claims this chapter tests (`findings.FINDINGS`, in the chapter's order)."""
        return findings(self)

    def sweep_last_spread(self) -> tuple[np.ndarray, np.ndarray]:
        """The τ sweep's last-block token diversity per τ: its mean and sd (ddof 0) over runs."""
        last = np.asarray(self.tau_sweep.t_div_last, dtype=float)         # (taus, runs)
        return last.mean(1), last.std(1)


def _lemma(obj: Any) -> Lemma24Check | None:
    """Lemma 2.4's check from its stored dict (None where the result has none)."""
    return obj if obj is None or isinstance(obj, Lemma24Check) else (Lemma24Check(**obj) if obj else None)


def _shares(xi_ratio: np.ndarray, blocks: int) -> np.ndarray:
    with warnings.catch_warnings():     # blocks where every trial is NaN (diversity below round-off)
        warnings.simplefilter("ignore", RuntimeWarning)
        return E.step_shares(xi_ratio, slice(0, blocks))


def summarise(r: Result) -> Summary:
    """The derived numbers of the chapter's tables and prose, from the records of `r`."""
    fig1, fig2, fig2_other, fig3, fig4 = r.figure1, r.figure2, r.figure2_other, r.figure3, r.figure4
    fig2_init, abl, share_blocks = r.figure2_init, r.figure2_ablation, r.settings.share_blocks
    gn = np.asarray(fig1["bert"].grad_norm)
    with warnings.catch_warnings():     # blocks where every trial is NaN (diversity below round-off)
        warnings.simplefilter("ignore", RuntimeWarning)
        xr, xa = np.nanmean(fig2.xi_ratio, 0), np.nanmean(fig2_other.xi_ratio, 0)
        xi_init = np.nanmean(fig2_init.xi_ratio, 0)
        xc = np.nanmean(abl["centred-relu"].xi_ratio, 0)
    late = fig3.t_sim > 0.9
    sh, sh_init = _shares(fig2.xi_ratio, share_blocks), _shares(fig2_init.xi_ratio, share_blocks)
    f8, b = r.figure8, r.bounds11
    sd = np.asarray(f8["precise"].sd)                                  # (dims, ts)
    sentences = fig1["bert"].sentences
    return Summary(
        bert_tsim_last=float(fig1["bert"].t_sim[-1]), bert_tcos_last=float(fig1["bert"].t_cos[-1]),
        albert_tsim_last=float(fig1["albert"].t_sim[-1]), albert_tcos_last=float(fig1["albert"].t_cos[-1]),
        hf_sentences=math.nan if sentences is None else float(sentences),
        hf_real_tokens=float(fig1["bert"].real_tokens),
        grad_min=float(gn.min()), grad_max=float(gn.max()), grad_layers=len(gn),
        # the geometric-mean change per layer over the range max/min, and the largest change between
        # adjacent layers (either direction)
        grad_factor=float((gn.max() / gn.min()) ** (1 / max(1, len(gn) - 1))),
        grad_step_max=float(np.max(np.maximum(gn[1:] / gn[:-1], gn[:-1] / gn[1:]))) if len(gn) > 1 else 1.0,
        step1_ratio_first=float(xr[0, 0]), step1_ratio_first_other=float(xa[0, 0]),
        other_steps_ratio=float(np.nanmean(xr[:, 1:])), other_steps_ratio_other=float(np.nanmean(xa[:, 1:])),
        step3_ratio_first=float(xr[0, 2]), step3_ratio_first_other=float(xa[0, 2]),
        step3_ratio_first_init=float(xi_init[0, 2]), step3_ratio_first_centred=float(xc[0, 2]),
        first_block_above_099=first_block_above(fig2.t_sim),
        first_block_above_099_other=first_block_above(fig2_other.t_sim),
        first_block_above_099_init=first_block_above(fig2_init.t_sim),
        first_block_above_099_none=first_block_above(abl["none"].t_sim),
        first_block_above_099_centred=first_block_above(abl["centred-relu"].t_sim),
        attn_share=float(sh[0]), ffn_share=float(sh[2]), ln_share=float(sh[1] + sh[3]),
        attn_share_init=float(sh_init[0]), ffn_share_init=float(sh_init[2]),
        ln_share_init=float(sh_init[1] + sh_init[3]), share_blocks=share_blocks,
        share_last_block=share_blocks - 1,
        postnorm_tsim_last=float(fig2.t_sim[:, -1].mean()),
        err_est1=float(np.abs(fig3.est1 - fig3.xi_minus_1).mean()),
        err_est2=float(np.abs(fig3.est2 - fig3.xi_minus_1).mean()),
        lemma24_max_rel_err=float(np.max(np.abs(fig3.mc_xi1 - fig3.formula_xi1) / fig3.formula_xi1)),
        late_contraction=float((1 / fig3.r[late]).mean()) if late.any() else math.nan,
        prenorm_tsim_last=float(fig4.t_sim[:, -1].mean()),
        prenorm_normX_first=float(fig4.norm_X[:, 0].mean()),
        prenorm_normX_last=float(fig4.norm_X[:, -1].mean()),
        prenorm_normXhat=float(fig4.norm_Xhat.mean()),
        prenorm_normattn=float(fig4.norm_attn.mean()),
        eta_sd_first_d=float(sd[0].mean()), eta_sd_last_d=float(sd[-1].mean()),
        eta_paper_absmax_first_d=float(np.abs(f8["paper"].mean[0]).max()),
        eta_paper_absmax_last_d=float(np.abs(f8["paper"].mean[-1]).max()),
        eta_precise_absmax_last_d=float(np.abs(f8["precise"].mean[-1]).max()),
        bound_min_slack_mu1=min(v.min_slack_mu1 for v in b.values()),
        bound_min_slack_mu2=min(v.min_slack_mu2 for v in b.values()),
        tdiv_last={tau: float(tdiv[:, -1].mean()) for tau, tdiv in r.figure5.items()},
        tdiv_last_sd={tau: float(tdiv[:, -1].std()) for tau, tdiv in r.figure5.items()},
        tdiv_last_other={tau: float(tdiv[:, -1].mean()) for tau, tdiv in r.figure5_other.items()},
    )
