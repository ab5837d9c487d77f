"""The tse chapter's parameters: `Params` (presets, rules), the constants its runs and findings share, and the
paper's values (data/yu_zhang_2024_claims.csv)."""

from __future__ import annotations

import csv
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from helpers.machinery.params import ChapterParams, ParameterError, check_heads, positive, rules
from helpers.machinery.runtime import REPO_ROOT

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
