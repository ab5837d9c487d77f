"""The deep causal LM chapter's parameters: `Params` with its presets and rules, and the names its runs, `Result`
and findings share (the leakage control, the control τ arms, the budget curve's gaps and forms, the reading
constants)."""

from __future__ import annotations

from dataclasses import MISSING, dataclass, fields
from typing import Any, ClassVar, Literal

from ...core.causal_lm import VARIANTS
from ...core.scale import BUDGET_FORMS, BUDGET_WHY
from ...machinery.params import ChapterParams, check_heads, nonneg, positive, rules

#: the leakage control: de-escalation with the whole sequence's mean, as eq. (21) is written — position t then
#: sees tokens after t through the mean (`core.causal_lm.DEESC_MEANS`)
LEAKY = "de-escalated-sequence-mean"
Variant = Literal["post-norm", "pre-norm", "de-escalated", "de-escalated-sequence-mean"]
#: how close (nats) the moving-average training loss must be to the unigram loss to count as dwelling there
PLATEAU_TOL = 0.05
#: "performed similarly" (§3.4) read as: a final-loss gap smaller than this fraction of what pre-norm
#: learned beyond the unigram predictor (unigram loss − pre-norm loss)
SIMILAR_FRACTION = 0.1
#: the final loss of a run of b steps: the mean training loss over this fraction of its last steps
FINAL_WINDOW = 0.05
#: the paper's deep Transformer-XL: "about 201M model parameters" (§3.4)
PAPER_PARAMETERS = 201e6
#: the forms a budget curve is carried to the paper's steps with, and why (`core.scale.BUDGET_FORMS`)
CURVE_FORMS, CURVE_WHY = BUDGET_FORMS, BUDGET_WHY
#: the gaps the budget curve reads, a − b (b None: a − the unigram loss), in the order of the findings
CURVE_GAPS: tuple[tuple[str, str | None], ...] = (("post-norm", None), ("de-escalated", "post-norm"),
                                                   ("de-escalated", "pre-norm"))


@dataclass(frozen=True)
class Params(ChapterParams):
    """Yu & Zhang §3.4 (Figure 7): three variants of a deep causal Transformer LM on WikiText-103.

    Defaults follow their run where a CPU allows: Transformer-XL's optimiser (Adam, lr 2.5e-4, cosine
    decay, no warm-up), no dropout and no gradient clipping, FFN width twice the model width (their
    820 for 410), τ = 1. `tokens="bytes"` models UTF-8 bytes (256 symbols), `"wordpiece"` BERT's
    uncased WordPiece vocabulary (30,522; Transformer-XL used WikiText-103's 267k-word vocabulary)."""

    variants: tuple[Variant, ...] = VARIANTS + (LEAKY,)
    depth: int = 48
    d_model: int = 64
    n_heads: int = 4
    d_ff: int = 128
    seq_len: int = 64
    tokens: Literal["bytes", "wordpiece"] = "bytes"
    batch_size: int = 16
    steps: int = 1000
    lr: float = 2.5e-4
    warmup: int = 0
    tau: float = 1.0
    #: the de-escalated model (prefix mean) trained again at each of these τ, beside `tau`: a partial
    #: de-escalation, which also leaves the first position's FFN input non-zero (τ = 1 zeroes it)
    control_taus: tuple[float, ...] = (0.5,)
    seeds: int = 3
    #: how many of the seeds the controls run: the leakage control (`LEAKY`) and the control τ runs (the first
    #: `leak_seeds` / `tau_seeds` run seeds, so every control run pairs with the same seed of the variants)
    leak_seeds: int = 3
    tau_seeds: int = 3
    eval_sequences: int = 64          # held-out sequences from WikiText-103 test
    eval_every: int = 50
    resume_every: int = 100
    #: fp32 by default: at width 64 bf16 autocast is *slower* on this CPU. It was 2-3x slower (0.55 vs 1.54 s
    #: per step) while attention ran PyTorch's CPU flash kernel in bf16; with the math kernel
    #: (`core.causal_lm.attention_kernel`) it is still ~1.15x slower (casts dominate the small matrix
    #: products: 0.27 vs 0.31 s per step at depth 48, one thread); on a GPU at paper width choose bf16
    precision: Literal["fp32", "bf16"] = "fp32"
    #: the learning rate after the warm-up: "cosine" decays it to zero over `steps` (Transformer-XL's), "constant"
    #: holds it, so that the first b steps of a run stand for a run of b steps
    schedule: Literal["cosine", "constant"] = "cosine"
    #: the budget curve: post-norm, pre-norm and de-escalated trained again for `steps` under a constant learning
    #: rate (every seed), and read at this many budgets — `steps`, `steps`/2, …, each half the next (0: none)
    curve_budgets: int = 5

    CHAPTER: ClassVar[str] = "deeplm"
    #: `control_taus`, the controls' seed counts and the budget curve only add runs, each keyed by its own τ, seed
    #: and schedule
    CACHE_EXCLUDE: ClassVar[tuple[str, ...]] = ("resume_every", "control_taus", "leak_seeds", "tau_seeds",
                                                "curve_budgets")
    #: the committed cosine runs were keyed before `schedule` existed
    KEYED_UNLESS_DEFAULT: ClassVar[tuple[str, ...]] = ("schedule",)
    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {
        "ci": dict(depth=6, d_model=32, n_heads=2, d_ff=64, seq_len=32, batch_size=8, steps=40, lr=1e-3,
                   seeds=1, eval_sequences=16, eval_every=10),
        "book": dict(),
        "paper": dict(depth=60, d_model=410, n_heads=10, d_ff=820, seq_len=150, tokens="wordpiece", batch_size=40,
                      steps=50000, seeds=3, eval_every=1000, resume_every=1000, precision="bf16",
                      variants=VARIANTS, control_taus=(), curve_budgets=0),
    }
    RULES: ClassVar = rules(
        variants=(lambda v: len(v) > 0 and len(set(v)) == len(v), "needs distinct variants"),
        depth=positive, d_model=positive, n_heads=positive, d_ff=positive,
        seq_len=(lambda v: v >= 4, "must be >= 4"), batch_size=positive, steps=positive, lr=positive,
        warmup=nonneg, tau=(lambda v: 0 < v <= 1, "must lie in (0, 1] (eq. 21)"), seeds=positive,
        control_taus=(lambda v: all(0 < t <= 1 for t in v) and len(set(v)) == len(v),
                      "distinct taus in (0, 1] (eq. 21)"),
        leak_seeds=positive, tau_seeds=positive, curve_budgets=nonneg,
        eval_sequences=positive, eval_every=positive, resume_every=positive,
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        check_heads(self)

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Unpickling (a grid job): a Params pickled before a field existed — by a runner started on older
        code — takes that field's default."""
        for f in fields(self):
            if f.name not in state and f.default is not MISSING:
                state[f.name] = f.default
        self.__dict__.update(state)


def tau_arm(tau: float) -> str:
    """The name of the de-escalated control run at `tau` (prefix mean): "de-escalated τ=0.5"."""
    return f"de-escalated τ={tau:g}"
