"""The vit chapter's `Result`: one training history per variant and seed at every depth and block run, and the
seed-paired readings every table, figure, sentence and finding of the chapter reads (the ablation's in
`ablation.AblationReadings`)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np

from helpers.core.findings import Finding
from helpers.core.scale import BudgetCurve, Distance, Extrapolation
from helpers.core.stats import Interval, t_interval
from helpers.data.loaders import CIFAR10_IMAGES
from helpers.machinery import results
from helpers.train.vit import lr_factors, lr_milestones

from ..findings import corrected
from .ablation import AblationReadings
from .findings import findings
from .params import ALIKE, CHANCE_MARGIN, CURVE_EPOCHS, CURVE_WINDOW, LEVEL_MARGIN, Params, side


@dataclass
class Result(AblationReadings, results.Result):
    """One training history per variant and seed (`histories[variant][i]` for run seed `seeds[i]`):
    per epoch `train_loss`, `train_acc`, `test_loss`, `test_acc`, `t_sim` (per block, keyed by the
    epoch as a string), plus `lr` and `wall_time_s`."""

    variants: list[str]
    seeds: list[int]
    depth: int
    epochs: int
    train_images: int                # effective number (50,000 when the preset says 0 = all)
    scale: str
    histories: dict[str, list[dict]] = field(default_factory=dict)
    from_cache: bool = False
    #: the depth sweep: {str(depth): {variant: [history per seed]}} for every depth run (`depth` included)
    sweep: dict[str, dict[str, list[dict]]] = field(default_factory=dict)
    batch_size: int = 128
    d_model: int = 192
    n_heads: int = 8
    d_ff: int = 384
    patch: int = 4                   # patch side in pixels (the paper's 4×4)
    image: int = 32                  # image side in pixels (CIFAR-10)
    test_images: int = CIFAR10_IMAGES["test"]        # effective number
    #: the block comparison: {str(depth): {variant: [history per seed]}} of the standard-block runs at
    #: `standard_depths` (empty when none were run)
    standard: dict[str, dict[str, list[dict]]] = field(default_factory=dict)
    #: the block ablation at `ablation_depth`: {block: {variant: [history per seed]}} for Algorithm 1's
    #: block, the standard block and each standard block with one part reverted (empty when not run)
    ablation: dict[str, dict[str, list[dict]]] = field(default_factory=dict)
    ablation_depth: int = 0
    #: the same at each confirmation depth for Algorithm 1's block, the standard block and `confirm_blocks`:
    #: {str(depth): {block: {variant: [history per seed]}}}
    confirm: dict[str, dict[str, dict[str, list[dict]]]] = field(default_factory=dict)
    #: the ablation's optional blocks (the FFN-scale sweep, `FFN_SCALES`) whose runs the cache lacks when this run
    #: may not train them (`train_missing` False, the book build): {str(depth): [block, …]}; `MISSING_COMMAND`
    #: makes them
    missing: dict[str, list[str]] = field(default_factory=dict)
    #: what each of `RECIPES` adds to these runs: {name: {"runs": runs not in the cache, "hours": their estimated
    #: CPU-hours}} (`recipe_cost`; empty outside the book scale)
    recipe_costs: dict[str, dict[str, float]] = field(default_factory=dict)
    #: the budget curve (`compute.curve_specs`): per variant, each seed's constant-rate run at `depth` (`loss` per
    #: step, `wall_time_s`), None for a run the results do not hold yet; `curve_missing`: the names of those runs;
    #: `curve_images`: their training images (an epoch of theirs is a budget, `CURVE_EPOCHS`)
    curve: dict[str, list[dict | None]] = field(default_factory=dict)
    curve_missing: list[str] = field(default_factory=list)
    curve_images: int = 0

    @property
    def steps_per_epoch(self) -> int:
        return -(-self.train_images // self.batch_size)

    @property
    def steps(self) -> int:
        """Optimiser steps per run."""
        return self.epochs * self.steps_per_epoch

    @property
    def depths(self) -> list[int]:
        return sorted(int(d) for d in self.sweep) or [self.depth]

    def runs(self, depth: int) -> dict[str, list[dict]]:
        """{variant: [history per seed]} at one depth of the sweep (the main depth without a sweep)."""
        return (self.sweep or {str(self.depth): self.histories})[str(depth)]

    def sweep_final(self, key: str = "train_loss") -> dict[str, np.ndarray]:
        """Per variant, (depths, seeds) of the last epoch's `key` over the depth sweep."""
        return {v: np.array([[h[key][-1] for h in self.runs(d)[v]] for d in self.depths], dtype=float)
                for v in self.variants}

    # --- the seed-paired comparisons every table, figure, sentence and finding of the chapter reads ---

    def gap(self, a: str, b: str, depth: int | None = None, key: str = "train_loss") -> Interval:
        """Final `key` of variant `a` minus variant `b` at `depth` (default: the main depth), per run seed
        (the runs of a seed share data order, augmentation and initial weights), with its 95 % t-interval
        over the seeds."""
        r = self.runs(self.depth if depth is None else depth)
        return t_interval([ha[key][-1] - hb[key][-1] for ha, hb in zip(r[a], r[b], strict=True)])

    def gaps(self, a: str, b: str, key: str = "train_loss") -> dict[int, Interval]:
        """`gap(a, b)` at every depth of the sweep."""
        return {d: self.gap(a, b, d, key) for d in self.depths}

    def ahead_depths(self, a: str, b: str, key: str = "train_loss") -> list[int]:
        """The depths at which `a` ends below `b` (seed-paired interval below 0)."""
        return [d for d, g in self.gaps(a, b, key).items() if side(g) < 0]

    def fails_from(self, variant: str, ref: str = "pre-norm") -> int | None:
        """The shallowest depth from which `variant` ends above `ref` (interval above 0) at that depth and
        at every deeper depth of the sweep; None if it does not at the deepest."""
        behind = [side(g) > 0 for g in self.gaps(variant, ref).values()]
        if not behind or not behind[-1]:
            return None
        i = len(behind) - 1
        while i > 0 and behind[i - 1]:
            i -= 1
        return self.depths[i]

    def ahead_from(self, a: str, b: str = "pre-norm") -> int | None:
        """The shallowest depth from which `a` ends below `b` at that depth and every deeper one."""
        ahead = [side(g) < 0 for g in self.gaps(a, b).values()]
        if not ahead or not ahead[-1]:
            return None
        i = len(ahead) - 1
        while i > 0 and ahead[i - 1]:
            i -= 1
        return self.depths[i]

    def level_depths(self, variant: str, ref: str = "pre-norm") -> list[int]:
        """The depths at which `variant` ends level with `ref`: the interval covers 0 and its half-width is
        below `LEVEL_MARGIN`."""
        return [d for d, g in self.gaps(variant, ref).items()
                if g.has_interval and side(g) == 0 and (g.high - g.low) / 2 < LEVEL_MARGIN]

    def at_chance(self, variant: str, depth: int) -> int:
        """How many seeds of `variant` end at chance at `depth` (final training loss within
        `CHANCE_MARGIN` of ln 10)."""
        return int(sum(abs(h["train_loss"][-1] - np.log(10)) < CHANCE_MARGIN for h in self.runs(depth)[variant]))

    def run_t_sim(self, variant: str, depth: int, seed_index: int = 0) -> float:
        """A run's last-block t_sim after training: for a de-escalated run the state just before its last
        de-escalation step (after it t_sim is 0 by construction), otherwise the last block's output;
        float round-off (|t_sim| < 1e-9, a centred state) is 0."""
        h = self.runs(depth)[variant][seed_index]
        t = h.get("t_sim_before_deescalation") or h["t_sim"]
        v = float(t[max(t, key=int)][-1])
        return 0.0 if abs(v) < 1e-9 else v

    def alike_depth(self, variant: str = "post-norm-full-lr") -> int:
        """The shallowest depth at which `variant`'s last block has t_sim ≥ `ALIKE` on every seed (its
        tokens all but identical); the deepest depth when there is none."""
        for d in self.depths:
            if all(self.run_t_sim(variant, d, i) >= ALIKE for i in range(len(self.runs(d)[variant]))):
                return d
        return self.depths[-1]

    def final_loss_range(self) -> tuple[float, float]:
        """The lowest and the highest final training loss of any run of the depth sweep (either block)."""
        grids = [self.sweep or {str(self.depth): self.histories}, self.standard]
        losses = [h["train_loss"][-1] for g in grids for runs in g.values() for hs in runs.values() for h in hs]
        return float(min(losses)), float(max(losses))

    # --- what the findings say of their runs ---

    def lr_text(self, variant: str, depth: int | None = None) -> str:
        """The learning rate `variant` trained at, as '5e-5'."""
        lr = self.runs(self.depth if depth is None else depth)[variant][0]["lr"]
        return f"{lr:.0e}".replace("e-0", "e-")

    def measured_text(self, depth: int, block: str, variants: str) -> str:
        """What one finding's runs are: model, data, budget, seeds."""
        return (f"{variants} ViTs of depth {depth} ({block}, width {self.d_model}), CIFAR-10 "
                f"({self.train_images:,} training images, AutoAugment), {self.steps:,} optimiser steps of batch "
                f"{self.batch_size}, {len(self.seeds)} seed{'s' if len(self.seeds) > 1 else ''} (seed-paired final "
                f"training loss)")

    @property
    def paper_steps(self) -> int:
        """The paper's optimiser steps per run (the `paper` preset: 150 epochs of all 50,000 images, batch 128)."""
        q = Params.resolve("paper")
        return q.epochs * -(-(q.train_images or CIFAR10_IMAGES["train"]) // q.batch_size)

    def scale_text(self) -> str:
        """This run's budget and width against the paper's (the chapter says once where its losses lie)."""
        return (f"{self.scale}: {self.steps:,} of the paper's {self.paper_steps:,} optimiser steps "
                f"({100 * self.steps / self.paper_steps:.1f} %), width {self.d_model} of "
                f"{Params.resolve('paper').d_model}")

    def reduced(self, depth: int | None = None) -> str:
        """How a finding's runs fall short of the paper's setting, read after its verdict ("at 1.7 % of the paper's
        steps, width 96 of 192"); "" at the paper's budget, width and depth."""
        q = Params.resolve("paper")
        parts = []
        if self.steps < self.paper_steps:
            parts.append(f"at {100 * self.steps / self.paper_steps:.1f} % of the paper's steps")
        if self.d_model != q.d_model:
            parts.append(f"width {self.d_model} of {q.d_model}")
        if depth is not None and depth != q.depth:
            parts.append(f"depth {depth} of {q.depth}")
        return ", ".join(parts)

    def distance(self, depth: int) -> tuple[Distance, ...]:
        """How far a finding's runs at `depth` are from the paper's setting, as numbers: optimiser steps, width,
        and the depth, patch tokens per image and training images where they differ from the paper's."""
        q = Params.resolve("paper")
        out = [Distance("training steps", self.steps, self.paper_steps, "optimiser steps"),
               Distance("width", self.d_model, q.d_model)]
        if depth != q.depth:
            out.append(Distance("depth", depth, q.depth, "blocks"))
        tokens, paper_tokens = (self.image // self.patch) ** 2, (self.image // q.patch) ** 2
        if tokens != paper_tokens:
            out.append(Distance("patch tokens per image", tokens, paper_tokens))
        paper_images = q.train_images or CIFAR10_IMAGES["train"]
        if self.train_images != paper_images:
            out.append(Distance("training images", self.train_images, paper_images, "CIFAR-10 images"))
        return tuple(out)

    # --- the learning-rate schedule: whether an epoch's end stands for a shorter run ---

    def lr_factors(self, epochs: int | None = None) -> np.ndarray:
        """The rate of every optimiser step of a run of `epochs` (default: these runs') at this run's steps per
        epoch, as a multiple of the variant's base rate (§3.3's step decay, `train.vit.lr_factors`)."""
        return np.asarray(lr_factors(self.epochs if epochs is None else epochs, self.steps_per_epoch))

    @property
    def lr_constant(self) -> bool:
        """Whether these runs keep one learning rate from the first step to the last."""
        f = self.lr_factors()
        return bool((f == f[0]).all())

    def lr_decay_steps(self) -> list[int]:
        """The optimiser steps of these runs after which the rate decays (those before their last step)."""
        return [m for m in lr_milestones(self.epochs, self.steps_per_epoch) if m < self.steps]

    def budget_epochs(self) -> list[int]:
        """The epochs k after which these runs are where a run of k epochs ends: their first k epochs follow the
        schedule a k-epoch run follows (a seed fixes the data order, augmentation and initial weights, so the
        rest is shared). Under a constant rate every epoch; under the step decay a shorter run decays sooner,
        so an epoch after which a shorter run would already have decayed, but these have not, is none."""
        full, n = self.lr_factors(), self.steps_per_epoch
        return [k for k in range(1, self.epochs + 1) if np.array_equal(full[:k * n], self.lr_factors(k))]

    # --- the budget curve: the same gaps after b steps of a constant-rate run ---

    @property
    def curve_steps(self) -> list[int]:
        """The budgets the curve is read at, in optimiser steps (`CURVE_EPOCHS` of its runs; none without a curve)."""
        n = -(-self.curve_images // self.batch_size) if self.curve else 0
        return [e * n for e in CURVE_EPOCHS] if n else []

    def budget_curve(self) -> BudgetCurve:
        """The constant-rate runs as budgets (`core.scale.BudgetCurve`): each seed's per-step training loss per
        variant, a budget's final loss the mean over its last `CURVE_WINDOW` of steps."""
        return BudgetCurve({v: [h["loss"] if h else None for h in hs] for v, hs in self.curve.items()},
                           tuple(self.curve_steps), CURVE_WINDOW)

    def curve_at(self, a: str, b: str, budget: int | None = None) -> Interval | None:
        """The constant-rate gap a − b at `budget` steps (default: the curve's largest) over seeds, where every seed
        holds it (else None)."""
        return self.budget_curve().at(a, b, budget) if self.curve else None

    def trend(self, a: str, b: str) -> Extrapolation | None:
        """The gap a − b along the curve's budgets carried to the paper's steps (`BudgetCurve.trend`); None with
        fewer than `core.scale.MIN_POINTS` budgets at which every seed is held, or at the paper's steps."""
        if not self.curve or self.steps >= self.paper_steps:
            return None
        return self.budget_curve().trend(a, b, self.paper_steps)

    def curve_findings(self) -> dict[tuple[str, str], Finding]:
        """The findings the budget curve carries to the paper's steps, by the gap (a, b) each reads, corrected within
        their paper's families (`experiments.findings.corrected`: the bands the findings page reads)."""
        return {f.extra["gap"]: f for f in corrected(self.findings()) if "gap" in f.extra}

    def curve_gaps(self, a: str, b: str) -> np.ndarray:
        """seeds × `curve_steps`: the same-seed constant-rate gap a − b at each budget (NaN where a run is not held)."""
        return self.budget_curve().gaps(a, b) if self.curve else np.empty((len(self.seeds), 0))

    def curve_seconds(self) -> dict[str, list[float | None]]:
        """Per curve variant, each seed's run time (seconds; None for a run not held)."""
        return {v: [h["wall_time_s"] if h else None for h in hs] for v, hs in self.curve.items()}

    def before_t_sim(self) -> dict[str, float]:
        """t_sim of the last block just before its de-escalation step, after training (first seed;
        variants without de-escalation are left out)."""
        out = {}
        for v in self.variants:
            b = self.histories[v][0].get("t_sim_before_deescalation")
            if b:
                out[v] = float(b[max(b, key=int)][-1])
        return out

    def standard_result(self) -> Result | None:
        """The standard-block runs as a Result of their own (their sweep, `depth` = the deepest of them),
        so that every sweep reading applies to them; None when no standard-block run was made."""
        if not self.standard:
            return None
        deep = max(self.standard, key=int)
        return dataclasses.replace(self, depth=int(deep), histories=self.standard[deep], sweep=self.standard,
                                   standard={})

    def curves(self, key: str) -> dict[str, np.ndarray]:
        """Per variant, (seeds, epochs) of one per-epoch history entry (`train_loss`, `test_acc`, …)."""
        return {v: np.array([h[key] for h in self.histories[v]], dtype=float) for v in self.variants}

    def final(self, key: str) -> dict[str, float]:
        """Per variant, the last epoch's value of `key`, mean over seeds."""
        return {v: float(c[:, -1].mean()) for v, c in self.curves(key).items()}

    def t_sim(self, variant: str, seed_index: int = 0) -> dict[int, np.ndarray]:
        """t_sim per block (block 0 = patch embeddings + positions) after each measured epoch."""
        return {int(e): np.asarray(s, dtype=float) for e, s in self.histories[variant][seed_index]["t_sim"].items()}

    def last_t_sim(self) -> dict[str, float]:
        """t_sim of the last block's output after training (first seed)."""
        return {v: float(self.t_sim(v)[self.epochs][-1]) for v in self.variants}

    def table(self):
        """Final numbers per variant (mean over seeds): lr, losses, accuracy, seconds per epoch."""
        import pandas as pd

        rows = [{"variant": v, "lr": self.histories[v][0]["lr"],
                 "final train loss": self.final("train_loss")[v], "final test loss": self.final("test_loss")[v],
                 "final test acc": self.final("test_acc")[v],
                 "s per epoch": float(np.mean([h["wall_time_s"] for h in self.histories[v]])) / self.epochs}
                for v in self.variants]
        return pd.DataFrame(rows)

    def findings(self) -> list[Finding]:
        """The chapter's findings on Yu & Zhang's Figure 6 (`findings.FINDINGS`, in the chapter's order)."""
        return findings(self)

    @staticmethod
    def final_spread(histories: list[dict], key: str = "train_loss") -> tuple[float, float]:
        """The last epoch's `key` over the runs of `histories` (a variant's seeds): its mean and its sd (ddof 1;
        NaN for one run)."""
        a = np.array([h[key][-1] for h in histories], dtype=float)
        return float(a.mean()), float(a.std(ddof=1)) if len(a) > 1 else float("nan")

    def sweep_final_spread(self, key: str = "train_loss") -> dict[str, tuple[np.ndarray, np.ndarray | None]]:
        """Per variant, over the depth sweep, the mean and sd (ddof 1; None for one seed) over seeds of the last
        epoch's `key` (`sweep_final`)."""
        return {v: (a.mean(1), a.std(1, ddof=1) if a.shape[1] > 1 else None) for v, a in self.sweep_final(key).items()}
