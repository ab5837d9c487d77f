"""The deep causal LM chapter's `Result`: every arm's training histories (and the budget curve's), with the
statistics the figures and findings read (final losses, paired differences, the unigram reference, the budget
curve carried to the paper's steps); the findings are `findings.py`'s table."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ...core.findings import Finding
from ...core.scale import BudgetCurve, Distance, Extrapolation
from ...core.stats import Interval, moving_average, t_interval
from ...machinery import results
from ..findings import corrected
from .findings import FINDINGS, WHERE
from .params import CURVE_FORMS, CURVE_WHY, FINAL_WINDOW, PAPER_PARAMETERS, SIMILAR_FRACTION, tau_arm


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

    def first_t_sim(self) -> dict[str, float]:
        """t_sim of the last block's output at the first evaluation, mean over seeds (per variant)."""
        return {v: float(np.mean([h["t_sim"][0][-1] for h in self.histories[v]])) for v in self.variants}

    def final_mean(self, variant: str, which: str = "train") -> float:
        """A variant's final loss (training: `final_train`; "eval": held-out) averaged over the seeds that did not
        diverge."""
        final = self.final_train() if which == "train" else self.final_eval()
        return float(np.nanmean(final[variant]))

    def eval_band(self, variant: str) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """A variant's held-out loss per evaluation over the seeds that did not diverge: mean, smallest and
        largest (None when every seed diverged)."""
        ev = np.array([h["eval_loss"] for h in self.histories[variant] if not h.get("diverged")], dtype=float)
        return (ev.mean(0), ev.min(0), ev.max(0)) if len(ev) else None
