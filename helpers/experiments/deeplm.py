"""The deep causal language model chapter (Yu & Zhang §3.4, Figure 7): post-norm vs pre-norm vs
de-escalated post-norm (the de-escalation step at every FFN's input) in a deep, narrow causal
Transformer LM trained on WikiText-103 text.

`run(params)` trains every variant for every seed through `helpers.train.lm` (the book's one loop;
checkpoints under `_build/checkpoints/deeplm/`, resumed after a kill), each run read back from the
committed results when its settings match, and summarises the histories: the last steps' training
loss, the held-out loss, t_sim per block, and the paired (same seed) differences between variants.
"""

from __future__ import annotations

import math
from dataclasses import MISSING, dataclass, field, fields
from typing import Any, ClassVar, Literal

import numpy as np

from ..book import results, runtime
from ..book.params import ChapterParams, check_heads, nonneg, positive, rules
from ..core.causal_lm import VARIANTS, LMConfig
from ..core.findings import Finding, Partial, Spec
from ..core.scale import BUDGET_FORMS, BUDGET_WHY, BudgetCurve, Distance, Extrapolation, doubling_budgets
from ..core.stats import Interval, moving_average, t_interval
from ..train import lm
from .findings import corrected

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


@dataclass
class Result(results.Result):
    """`histories[variant][i]`: run seed `seeds[i]`'s history — `loss` per step, `eval_step`,
    `eval_loss`, `t_sim` (per evaluation, per block; block 0 = the embeddings), `diverged` (None or
    the error), `wall_time_s`. `uniform_nats`: log |V|, the loss of a model that has learned nothing;
    `unigram_nats`: the held-out cross-entropy of the training text's symbol frequencies."""

    variants: list[str]
    seeds: list[int]
    depth: int
    steps: int
    tokens: str
    parameters: int
    uniform_nats: float
    unigram_nats: float
    scale: str
    histories: dict[str, list[dict]] = field(default_factory=dict)
    from_cache: bool = False
    #: the training budget of this run and of the paper's (the `paper` preset): steps, batch_size, seq_len,
    #: depth, d_model
    budget: dict[str, dict[str, int]] = field(default_factory=dict)
    tau: float = 1.0
    #: the τ of the de-escalated control runs, whose histories are `histories[tau_arm(t)]`
    control_taus: list[float] = field(default_factory=list)
    #: the budget curve (`curve_runs`): per variant, each seed's run under a constant learning rate (`loss` per step,
    #: `wall_time_s`, `diverged`), None for a run the results do not hold yet; `curve_steps`: the budgets it is read
    #: at; `curve_missing`: the names of the runs not held
    curve: dict[str, list[dict | None]] = field(default_factory=dict)
    curve_steps: list[int] = field(default_factory=list)
    curve_missing: list[str] = field(default_factory=list)

    @property
    def arms(self) -> list[str]:
        """Every trained arm: the variants, then the de-escalated model at each control τ (`tau_arm`)."""
        return list(self.variants) + [tau_arm(t) for t in self.control_taus]

    def final_train(self, window: float = FINAL_WINDOW) -> dict[str, np.ndarray]:
        """Per variant, each seed's mean training loss over the last `window` of the steps (NaN if diverged)."""
        out = {}
        for v in self.arms:
            vals = []
            for h in self.histories[v]:
                loss = np.asarray(h["loss"], dtype=float)
                k = max(1, int(window * self.steps))
                vals.append(float(loss[-k:].mean()) if len(loss) == self.steps and not h.get("diverged") else np.nan)
            out[v] = np.array(vals)
        return out

    def final_eval(self) -> dict[str, np.ndarray]:
        """Per variant, each seed's last held-out loss."""
        return {v: np.array([h["eval_loss"][-1] if not h.get("diverged") else np.nan for h in self.histories[v]])
                for v in self.arms}

    def differences(self, a: str, b: str, which: str = "train") -> np.ndarray:
        """Same-seed differences a − b of the final loss (training: last 5 % of steps; "eval": held-out), over
        the seeds both arms ran (a control runs the first of the variants' seeds)."""
        final = self.final_train() if which == "train" else self.final_eval()
        n = min(len(final[a]), len(final[b]))
        return final[a][:n] - final[b][:n]

    def paired(self, a: str, b: str, which: str = "train") -> Interval:
        """Same-seed differences a − b of the final loss: their mean with its 95 % Student-t interval over
        seeds (no interval with one seed)."""
        return t_interval(self.differences(a, b, which))

    def against_unigram(self, variant: str) -> Interval:
        """A variant's final training loss minus the unigram loss, with its t-interval over seeds: below
        zero, the model has learned more than byte frequencies (it did not fail)."""
        return t_interval(self.final_train()[variant] - self.unigram_nats)

    def similar_margin(self) -> float:
        """The margin of "performed similarly": `SIMILAR_FRACTION` of what pre-norm learned beyond the
        unigram predictor (nats per token; at least 0.001, for a pre-norm model that learned nothing)."""
        return max(1e-3, SIMILAR_FRACTION * float(self.unigram_nats - np.nanmean(self.final_train()["pre-norm"])))

    def first_position_cost(self) -> float:
        """With τ = 1 the prefix-mean de-escalation zeroes the first position's FFN input, so its
        prediction ignores the input (a constant). Its cost on the average loss is at most what a model
        gains over the unigram predictor at one position in seq_len: (unigram − de-escalated loss)/seq_len."""
        n = self.budget.get("ours", {}).get("seq_len", 0)
        if "de-escalated" not in self.variants or not n:
            return math.nan
        return float((self.unigram_nats - np.nanmean(self.final_train()["de-escalated"])) / n)

    def seconds_per_step(self) -> dict[str, float]:
        """Per variant, the mean wall-clock seconds per training step over seeds."""
        return {v: float(np.nanmean([h.get("wall_time_s", np.nan) / max(1, sum(np.isfinite(h["loss"])))
                                     for h in self.histories[v]])) for v in self.arms}

    def findings(self) -> list[Finding]:
        """The paper's Figure 7 claims, tested on this run (`book.findings`): `FINDINGS`."""
        return [f for spec in FINDINGS for f in spec.findings(self, paper="yu2024", where=WHERE, chapter="deeplm")]

    def reduced(self) -> str:
        """How this run falls short of the paper's setting, read after a verdict ("at 2.0 % of the paper's steps,
        depth 48 of 60, width 64 of 410"); "" at the paper's steps, depth and width."""
        ours, paper = self.budget.get("ours", {}), self.budget.get("paper", {})
        if not paper:
            return ""
        parts = []
        if self.steps < paper["steps"]:
            parts.append(f"at {100 * self.steps / paper['steps']:.1f} % of the paper's steps")
        if self.depth != paper.get("depth", self.depth):
            parts.append(f"depth {self.depth} of {paper['depth']}")
        if "d_model" in ours and ours["d_model"] != paper.get("d_model", ours["d_model"]):
            parts.append(f"width {ours['d_model']} of {paper['d_model']}")
        return ", ".join(parts)

    def steps_near(self, level: float, tol: float = 0.05, window: int = 20) -> dict[str, list[int]]:
        """Per variant and seed, how many steps the training loss's moving average over `window` steps
        lies within ±`tol` of `level`: how long a variant dwells at that loss (a plateau) rather than
        passing through it."""
        out = {}
        for v in self.arms:
            out[v] = []
            for h in self.histories[v]:
                out[v].append(int((np.abs(moving_average(h["loss"], window) - level) < tol).sum()))
        return out

    def token_ratio(self) -> dict[str, float]:
        """This run's training budget against the paper's: `steps` (ratio of optimiser steps),
        `tokens_per_step` (batch × sequence length, each in its own tokens), `tokens` (their product),
        and the two budgets' token counts `ours`, `paper`."""
        ours, paper = self.budget.get("ours"), self.budget.get("paper")
        if not ours or not paper:
            return {}
        per = {k: b["batch_size"] * b["seq_len"] for k, b in (("ours", ours), ("paper", paper))}
        return {"steps": paper["steps"] / ours["steps"], "tokens_per_step": per["paper"] / per["ours"],
                "tokens": paper["steps"] * per["paper"] / (ours["steps"] * per["ours"]),
                "ours": ours["steps"] * per["ours"], "paper": paper["steps"] * per["paper"],
                "ours_per_step": per["ours"], "paper_per_step": per["paper"]}

    def steps_to(self, level: float, window: int = 20) -> dict[str, list[int | None]]:
        """Per variant and seed, the first step (1-based: the last step of the first window) at which the
        training loss's moving average over `window` steps falls below `level` (None if it never does): how
        long a variant sits on a plateau."""
        out = {}
        for v in self.arms:
            out[v] = []
            for h in self.histories[v]:
                w = max(1, min(window, len(h["loss"])))          # a history shorter than the window: its mean
                hit = np.nonzero(moving_average(h["loss"], w) < level)[0]
                out[v].append(int(hit[0]) + w if len(hit) else None)
        return out

    def distance(self) -> tuple[Distance, ...]:
        """How far this run is from the paper's: training steps, depth, width and parameters (() without the
        paper's budget)."""
        ours, paper = self.budget.get("ours", {}), self.budget.get("paper", {})
        if not paper:
            return ()
        return (Distance("training steps", self.steps, paper["steps"]),
                Distance("blocks", self.depth, paper["depth"]),
                Distance("model width", ours.get("d_model", math.nan), paper["d_model"]),
                Distance("parameters", self.parameters, PAPER_PARAMETERS))

    # --- the budget curve: the same gaps after b steps of a constant-rate run -------------------------------

    def budget_curve(self, window: float = FINAL_WINDOW) -> BudgetCurve:
        """The constant-rate runs as budgets (`core.scale.BudgetCurve`): each seed's per-step training loss per
        variant, read at `curve_steps` over the last `window` of each budget (the definition of `final_train` at a
        budget of that many steps), gaps against no variant taken against the unigram loss."""
        return BudgetCurve({v: [h["loss"] if h else None for h in hs] for v, hs in self.curve.items()},
                           tuple(self.curve_steps), window, self.unigram_nats,
                           {v: tuple(bool(h and h.get("diverged")) for h in hs) for v, hs in self.curve.items()})

    def curve_final(self, budget: int, window: float = FINAL_WINDOW) -> dict[str, np.ndarray]:
        """Per curve variant, each seed's final training loss at a budget of `budget` steps (`BudgetCurve.final`)."""
        return self.budget_curve(window).final(budget)

    def curve_gaps(self, a: str, b: str | None = None) -> np.ndarray:
        """seeds × `curve_steps`: the same-seed gap a − b at each budget (b None: a − the unigram loss); NaN where
        a run is not held."""
        g = self.budget_curve().gaps(a, b)
        return g if g.size else np.empty((len(self.seeds), 0))

    def curve_complete(self, a: str, b: str | None = None) -> list[int]:
        """The budgets at which every seed's gap a − b is held."""
        return self.budget_curve().complete(a, b) if self.curve else []

    def curve_at(self, a: str, b: str | None = None, budget: int | None = None) -> Interval | None:
        """The constant-rate gap a − b at `budget` steps (default: the run's own `steps`) with its t-interval over
        seeds, where every seed holds it (else None)."""
        return self.budget_curve().at(a, b, self.steps if budget is None else budget)

    def trend(self, a: str, b: str | None = None) -> Extrapolation | None:
        """The gap a − b along the training steps of the constant-rate runs, carried to the paper's steps
        (`BudgetCurve.trend`, forms `CURVE_FORMS`); None with fewer than `MIN_POINTS` budgets at which every seed
        is held, or at the paper's steps."""
        paper = self.budget.get("paper", {})
        if not paper or self.steps >= paper["steps"]:
            return None
        return self.budget_curve().trend(a, b, paper["steps"], CURVE_FORMS, why=CURVE_WHY)

    def curve_findings(self) -> dict[tuple[str, str | None], Finding]:
        """The findings the budget curve carries to the paper's steps, by the gap (a, b) each reads, corrected within
        their paper's families (`experiments.findings.corrected`: the bands the findings page reads)."""
        return {f.extra["gap"]: f for f in corrected(self.findings()) if "gap" in f.extra}

    def gap(self, a: str, b: str | None = None) -> Interval:
        """The gap a − b of the runs themselves (cosine schedule, `steps` steps): `paired`, or `against_unigram`
        for b None."""
        return self.against_unigram(a) if b is None else self.paired(a, b)

    def curve_seconds(self) -> dict[str, list[float | None]]:
        """Per curve variant, each seed's run time (seconds; None for a run not held)."""
        return {v: [h.get("wall_time_s") if h else None for h in hs] for v, hs in self.curve.items()}

    def last_t_sim(self) -> dict[str, float]:
        """t_sim of the last block's output at the end of training, mean over seeds."""
        return {v: float(np.mean([h["t_sim"][-1][-1] for h in self.histories[v]])) for v in self.arms}


def _seeds(n: int) -> str:
    return f"{n} seed{'s' if n != 1 else ''}"


#: the finding key of the de-escalated control at each τ of `Params.control_taus`
TAU_KEYS = {0.5: "deeplm-tau-0p5-rescues"}


# --- the findings, as a table (`core.findings.Spec`): what each row reads of the Result -------------------
WHERE = "Fig. 7, §3.4"
GAP_CLAIM = ("There is a huge performance gap between the post-norm model and the post-norm model with "
             "de-escalation at each FFN input.")


def _measured(res: Result) -> str:
    n, ours = len(res.seeds), res.budget.get("ours", {})
    width = f", width {ours['d_model']}" if "d_model" in ours else ""
    return (f"causal LM of depth {res.depth}{width} on WikiText-103 {res.tokens}, {res.steps:,} steps, {n} "
            f"seed{'s' if n != 1 else ''} per variant")


def _scale(res: Result) -> str:
    paper = res.budget.get("paper", {})
    return (f"{res.scale}: {res.steps:,} of the paper's {paper['steps']:,} steps, depth {res.depth} against "
            f"{paper.get('depth', 60)}" if paper else res.scale)


def _tau_controls(res: Result) -> list[Partial]:
    """The de-escalated control at each τ of `control_taus` against post-norm (one finding each)."""
    return [Partial(case=t, quantity=f"de-escalated at τ = {t:g} − post-norm final training loss, nats per token",
                 effect=res.paired(tau_arm(t), "post-norm"), label=f"τ = {t:g}",
                 measured=(_measured(res) + f", the de-escalated model at τ = {t:g}: "
                           f"{_seeds(len(res.histories[tau_arm(t)]))}"),
                 reduced=", ".join(filter(None, (res.reduced(), f"at τ = {t:g} in place of {res.tau:g}"))))
            for t in res.control_taus if {tau_arm(t), "post-norm"} <= set(res.arms)]


_RUN = dict(scale=_scale, reduced=lambda res: res.reduced(), distance=lambda res: res.distance())


def _curve(a: str, b: str | None = None) -> dict:
    """The columns of a finding the budget curve carries to the paper's steps: its trend (`Result.trend`) and, in
    `extra["gap"]`, the gap (a, b) it reads (`CURVE_GAPS`)."""
    return dict(at_scale=lambda res: res.trend(a, b), extra={"gap": (a, b)})

FINDINGS = (
    Spec(key="deeplm-post-norm-fails", where=WHERE,
         claim="The deep post-norm Transformer 'essentially failed' to train.",
         measured=_measured, quantity="post-norm final training loss − unigram loss, nats per token",
         read=lambda res: Partial(res.against_unigram("post-norm")), direction="above", reference=0.0,
         reference_label="the unigram predictor", claim_id="yu-fig7-post-fails", section="deeplm-loss",
         when=lambda res: "post-norm" in res.variants,
         more=dict(_RUN, **_curve("post-norm"))),
    Spec(key="deeplm-deesc-rescues", where=WHERE, claim=GAP_CLAIM, measured=_measured,
         quantity="de-escalated − post-norm final training loss, nats per token",
         read=lambda res: Partial(res.paired("de-escalated", "post-norm")), direction="below",
         claim_id="yu-fig7-deesc-vs-post", section="deeplm-loss",
         when=lambda res: {"de-escalated", "post-norm"} <= set(res.variants),
         more=dict(_RUN, size_word="huge", label=lambda res: f"τ = {res.tau:g}",
                   **_curve("de-escalated", "post-norm"))),
    Spec(key="deeplm-deesc-like-pre-norm", where=WHERE,
         claim="The pre-norm and the de-escalated post-norm models 'performed similarly'.", measured=_measured,
         quantity="de-escalated − pre-norm final training loss, nats per token",
         read=lambda res: Partial(res.paired("de-escalated", "pre-norm")), direction="equal",
         margin=lambda res: res.similar_margin(), claim_id="yu-fig7-deesc-like-pre", section="deeplm-loss",
         when=lambda res: {"de-escalated", "pre-norm"} <= set(res.variants),
         more=dict(_RUN, **_curve("de-escalated", "pre-norm"))),
    Spec(key="deeplm-leak-rescues", where=WHERE, claim=GAP_CLAIM,
         measured=lambda res: _measured(res) + f", the leakage control: {_seeds(len(res.histories[LEAKY]))}",
         quantity=("de-escalated with the whole sequence's mean (eq. 21 as written: each position sees the later "
                   "tokens through it) − post-norm final training loss, nats per token"),
         read=lambda res: Partial(res.paired(LEAKY, "post-norm")), direction="below", section="deeplm-controls",
         claim_id="yu-fig7-deesc-vs-post", kind="control", when=lambda res: {LEAKY, "post-norm"} <= set(res.arms),
         more=_RUN),
    Spec(key=TAU_KEYS, where=WHERE, claim=GAP_CLAIM, direction="below", section="deeplm-controls",
         claim_id="yu-fig7-deesc-vs-post", read=_tau_controls, more=dict(_RUN, size_word="huge")),
    Spec(key="deeplm-paper-scale", where=WHERE,
         claim="Fig. 7 at the paper's scale: depth 60, width 410, 50,000 iterations.", measured="not run",
         quantity="the three findings above at the paper's scale", section="deeplm-differences",
         claim_id="yu-fig7-deesc-vs-post",
         more=dict(needs="a GPU", command="make rerun CHAPTER=deeplm SCALE=paper", reduced="", scale="paper")),
)


def tau_arm(tau: float) -> str:
    """The name of the de-escalated control run at `tau` (prefix mean): "de-escalated τ=0.5"."""
    return f"de-escalated τ={tau:g}"


def _unigram(train: np.ndarray, held: np.ndarray, vocab: int) -> float:
    counts = np.bincount(train.ravel(), minlength=vocab).astype(float) + 1.0
    logp = np.log(counts / counts.sum())
    return float(-logp[held.ravel()].mean())


class _Trainer:
    """Trains one variant and run seed of `p` (`train(variant, seed, checkpoint)`); the text is read once per
    process. An object rather than a closure, so a grid job (`make grid`) can carry it to another process."""

    def __init__(self, p: Params):
        self.p, self._data = p, None

    def sequences(self):
        p = self.p
        if self._data is None:
            self._data = (lm.sequences(lm.token_stream("validation", p.tokens), p.seq_len + 1),
                          lm.sequences(lm.token_stream("test", p.tokens), p.seq_len + 1)[: p.eval_sequences])
        return self._data

    def __call__(self, variant: str, s: int, ckpt):
        p, leaky = self.p, variant == LEAKY
        cfg = LMConfig(variant="de-escalated" if leaky else variant, vocab=lm.vocabulary_size(p.tokens),
                       depth=p.depth, d_model=p.d_model, n_heads=p.n_heads, d_ff=p.d_ff, seq_len=p.seq_len,
                       tau=p.tau, deesc_mean="sequence" if leaky else "prefix")
        tc = lm.LMTrainConfig(steps=p.steps, batch_size=p.batch_size, lr=p.lr, warmup=p.warmup,
                              eval_every=p.eval_every, seed=s, resume_every=p.resume_every, schedule=p.schedule)
        h = lm.train_lm(cfg, tc, *self.sequences(), checkpoint=ckpt, device=runtime.choose_device(p.device),
                        precision=p.precision)
        h["loss"] = [round(x, 5) if math.isfinite(x) else None for x in h["loss"]]
        h.pop("_epoch_sums", None)
        return h


def _grid(p: Params, trainer: _Trainer) -> list[results.RunSpec]:
    # τ acts only in the de-escalated variants: the others run (and are cached) under τ = 1, so a run with
    # another τ retrains only the de-escalated models
    # the control τ runs are the de-escalated model's specs at that τ (named like it: a committed run of
    # another τ is the file `de-escalated-seed<s>@<hash>.json`; `_arm` tells them apart)
    # a run under another schedule than the cosine is named for it (`constant-lr-post-norm-seed0`)
    seeds = runtime.run_seeds(p.seed, p.seeds)
    pre = "" if p.schedule == "cosine" else f"{p.schedule}-lr-"
    plain = [v for v in p.variants if not v.startswith("de-escalated")]
    deesc = [v for v in p.variants if v.startswith("de-escalated")]
    specs = ((results.variant_specs(p.with_(tau=1.0), plain, seeds, trainer, pre) if plain else [])
             + (results.variant_specs(p, deesc, seeds, trainer, pre) if deesc else []))
    specs = [s for s in specs if s.extra["variant"] != LEAKY or s.extra["run_seed"] in seeds[: p.leak_seeds]]
    for t in p.control_taus:
        if t == p.tau and "de-escalated" in p.variants:
            continue
        specs += results.variant_specs(p.with_(tau=t), ["de-escalated"], seeds[: p.tau_seeds], _Trainer(p.with_(tau=t)))
    return specs


def _arm(p: Params, spec: results.RunSpec) -> str:
    """The arm a run of `_grid(p)` belongs to: its variant, or `tau_arm(τ)` for a control τ run."""
    v = spec.extra["variant"]
    return tau_arm(spec.params.tau) if v == "de-escalated" and spec.params.tau != p.tau else v


def curve_params(p: Params) -> Params | None:
    """The budget curve's settings: `p` under a constant learning rate, with the variants of `VARIANTS` it runs and
    no control; None when `p` reads no curve (`curve_budgets` 0, or `p` itself under a constant rate)."""
    if not p.curve_budgets or p.schedule != "cosine":
        return None
    return p.with_(schedule="constant", variants=tuple(v for v in VARIANTS if v in p.variants), control_taus=(),
                   curve_budgets=0)


def curve_budgets(p: Params) -> list[int]:
    """The budgets the curve is read at: `steps`, `steps`/2, … (`curve_budgets` of them, `core.scale.doubling_budgets`),
    ascending."""
    return doubling_budgets(p.steps, p.curve_budgets)


def curve_runs(p: Params) -> list[results.RunSpec]:
    """The budget curve's runs, seed by seed (a seed's three variants, then the next seed's)."""
    q = curve_params(p)
    if q is None:
        return []
    order = {v: i for i, v in enumerate(q.variants)}
    return sorted(_grid(q, _Trainer(q)), key=lambda s: (s.extra["run_seed"], order[s.extra["variant"]]))


def runs(p: Params, curve: bool = True) -> list[results.RunSpec]:
    """The heavy runs of `p` — every variant and seed, then the budget curve's (unless `curve` is False) — as the
    grid runner takes them (`make grid`)."""
    return _grid(p, _Trainer(p)) + (curve_runs(p) if curve else [])


def run(p: Params) -> Result:
    """Train (or read back) every variant for every seed of `p` (`runs(p)`, in order)."""
    trainer = _Trainer(p)
    vocab = lm.vocabulary_size(p.tokens)
    specs = _grid(p, trainer)
    outs = results.execute_all(specs, train_missing=p.train_missing)
    histories: dict[str, list[dict]] = {}
    for spec, (hist, _) in zip(specs, outs, strict=True):
        histories.setdefault(_arm(p, spec), []).append(hist)
    hits = [hit for _, hit in outs]
    for runs in histories.values():
        for hist in runs:
            hist["loss"] = [np.nan if x is None else x for x in hist["loss"]]
    train, held = trainer.sequences()
    from ..core.causal_lm import CausalLM, parameter_count

    paper = Params.resolve("paper")
    budget = {k: {"steps": q.steps, "batch_size": q.batch_size, "seq_len": q.seq_len, "depth": q.depth,
                  "d_model": q.d_model, "d_ff": q.d_ff, "lr": q.lr} for k, q in (("ours", p), ("paper", paper))}
    curve, missing = _curve(p)
    n_params = parameter_count(CausalLM(LMConfig(vocab=vocab, depth=p.depth, d_model=p.d_model, n_heads=p.n_heads,
                                                 d_ff=p.d_ff, seq_len=p.seq_len)))
    return Result(variants=list(p.variants), seeds=runtime.run_seeds(p.seed, p.seeds), depth=p.depth, steps=p.steps,
                  tokens=p.tokens, parameters=n_params, uniform_nats=math.log(vocab),
                  unigram_nats=_unigram(train[:, 1:].numpy(), held[:, 1:].numpy(), vocab), scale=p.scale,
                  histories=histories, from_cache=all(hits), budget=budget, tau=p.tau,
                  control_taus=[t for t in p.control_taus if tau_arm(t) in histories], curve=curve,
                  curve_steps=curve_budgets(p) if curve else [], curve_missing=missing)


def _curve(p: Params) -> tuple[dict[str, list[dict | None]], list[str]]:
    """The budget curve's runs (`curve_runs`): trained where missing when `p.train_missing`, else those the results
    hold (the others None, named in the list returned beside)."""
    specs = curve_runs(p)
    if not specs:
        return {}, []
    held = [s for s in specs if p.train_missing or s.done()]
    outs = dict(zip((s.name for s in held), results.execute_all(held, train_missing=p.train_missing), strict=True))
    seeds = runtime.run_seeds(p.seed, p.seeds)
    curve: dict[str, list[dict | None]] = {v: [None] * len(seeds) for v in curve_params(p).variants}
    for s in specs:
        if s.name in outs:
            h = outs[s.name][0]
            curve[s.extra["variant"]][seeds.index(s.extra["run_seed"])] = {
                "loss": h["loss"], "wall_time_s": h.get("wall_time_s"), "diverged": h.get("diverged")}
    return curve, [s.name for s in specs if s.name not in outs]


__all__ = ["Params", "Result", "run", "runs", "curve_runs", "curve_params", "curve_budgets", "tau_arm",
           "CURVE_GAPS", "CURVE_FORMS", "FINAL_WINDOW", "LEAKY", "PLATEAU_TOL", "SIMILAR_FRACTION"]
