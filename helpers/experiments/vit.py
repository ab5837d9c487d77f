"""The ViT chapter (Yu & Zhang §3.3, Figure 6): post-norm vs pre-norm vs de-escalated deep ViTs on CIFAR-10.

`run(params)` trains every variant for every seed (through `helpers.train.vit`) at `depth` and at every
depth of the sweep `depths`, each run read back from the committed results when its settings match,
and returns the training histories. `run_one` trains (or reads back) one depth × variant × seed, so
that separate single-threaded processes can share a grid."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

import numpy as np

from ..book import results, runtime
from ..book.params import ChapterParams, check_heads, nonneg, positive, rules
from ..core.blocks import ffn_weight_variances
from ..core.findings import Finding
from ..core.stats import Interval, t_interval
from ..core.vit import ALGORITHM1_INITS, FFN_SCALES, FFN_STEPS, STANDARD_REVERTS, ffn_step_scales
from ..core.vit import VARIANTS as MODEL_VARIANTS
from ..data import load_cifar10
from ..train import vit as vit_train

Variant = Literal["post-norm", "post-norm-full-lr", "pre-norm", "de-escalated"]
#: the chapter's variants: the model's three, plus post-norm trained at the others' learning rate
#: (the paper halves it for post-norm; at a short budget that alone can separate the curves)
VARIANTS = ("post-norm", "post-norm-full-lr", "pre-norm", "de-escalated")
#: the block ablation trains these two variants (its question: what puts de-escalation ahead of pre-norm)
ABLATION_VARIANTS = ("pre-norm", "de-escalated")
#: a run "at chance": final training loss within this many nats of ln 10 (the loss of predicting the class
#: frequencies of CIFAR-10, whatever the image)
CHANCE_MARGIN = 0.01
#: "level": the seed-paired interval covers 0 and is narrower than ±LEVEL_MARGIN nats (a wide interval that
#: covers 0 only says the seeds disagree)
LEVEL_MARGIN = 0.1
#: tokens "alike": a last-block t_sim at or above this on every seed
ALIKE = 0.99
Block = Literal["algorithm1", "standard", "standard-scalar-ln", "standard-no-bias", "standard-no-proj",
                "standard-relu", "standard-all-four", "algorithm1-torch-ffn-init", "algorithm1-torch-v-init",
                "algorithm1-torch-ffn-init-x0.5", "algorithm1-torch-ffn-init-x2", "algorithm1-torch-ffn-init-x4",
                "algorithm1-torch-ffn-steps"]
#: the blocks an ablation may train (besides Algorithm 1's and the standard block, which the sweeps train)
ABLATION_BLOCKS = (*STANDARD_REVERTS, *ALGORITHM1_INITS, *FFN_SCALES, *FFN_STEPS)
#: the FFN-scale sweep's factor-1 block: PyTorch's FFN initialisation as drawn (`FFN_SCALES` multiplies its variance)
FFN_SCALE_BASE = "algorithm1-torch-ffn-init"
#: makes the book preset's runs the cache lacks (resumable; the book build lists them instead of training them)
MISSING_COMMAND = "make grid CHAPTER=vit SCALE=book GRID_ARGS='--parallel 1'"


def side(iv: Interval) -> int:
    """Where a seed-paired interval lies: +1 wholly above 0, −1 wholly below, 0 covering 0 (or one seed)."""
    return 0 if not iv.has_interval else 1 if iv.low > 0 else -1 if iv.high < 0 else 0


#: the model behind a chapter variant, and the one learning-rate rule (`helpers.train.vit`)
model_variant, variant_lr = vit_train.model_variant, vit_train.variant_lr


@dataclass(frozen=True)
class Params(ChapterParams):
    """Yu & Zhang §3.3: post-norm vs pre-norm vs de-escalated post-norm ViT on CIFAR-10 (Figure 6)."""

    variants: tuple[Variant, ...] = ("post-norm", "pre-norm", "de-escalated")
    depth: int = 80
    #: the depth sweep: these depths train every variant and seed too, at the same settings
    #: (the same budget of optimiser steps); `depth` is the one Figure 6 and the t_sim figure show
    depths: tuple[int, ...] = ()
    d_model: int = 192
    d_ff: int = 384
    n_heads: int = 8
    patch: int = 4
    epochs: int = 150
    train_images: int = 0            # 0 = all 50,000
    test_images: int = 0             # 0 = all 10,000
    batch_size: int = 128
    lr: float | None = None          # None: 5e-5 post-norm, 1e-4 otherwise (§3.3)
    tau: float = 1.0
    deesc_place: Literal["input", "after_attention", "ffn_input", "output"] = "output"
    augment: bool = True
    #: "algorithm1": Yu & Zhang's blocks as written (the committed runs); "standard": the vit-pytorch-style
    #: block (per-channel LN with bias, output projection, biases, GELU) in the same three variants
    #: or a standard block with one part put back to Algorithm 1's (`core.vit.STANDARD_REVERTS`)
    block: Block = "algorithm1"
    #: the block comparison: these depths also train every variant and seed with standard blocks (beside
    #: the `block` grid, same settings); each run is cached on its own under a `standard-` name
    standard_depths: tuple[int, ...] = ()
    #: the block ablation: at `ablation_depth` (0 = none), pre-norm and de-escalated post-norm are also
    #: trained, every seed, with each of these blocks: a standard block with one part (or all four) reverted
    #: to Algorithm 1's, or Algorithm 1's block with one part of its initialisation made PyTorch's
    ablations: tuple[str, ...] = ()
    ablation_depth: int = 0
    #: the ablation's confirmation at deeper depths: these blocks (beside Algorithm 1's and the standard
    #: block, read from the sweeps) at each of `confirm_depths`
    confirm_blocks: tuple[str, ...] = ()
    confirm_depths: tuple[int, ...] = ()
    seeds: int = 3
    sim_every: int = 1
    #: "auto": bf16 autocast (fp32 weights and optimiser) where the device computes bf16 natively
    #: (`runtime.native_bf16`: ≥ 2× faster on an AVX-512-BF16 CPU and on GPUs, and it follows the fp32 loss
    #: curve, tests/test_train.py), fp32 elsewhere (emulated bf16 is ~100× slower); the book's committed runs
    #: are bf16, and its preset says so
    precision: Literal["fp32", "bf16", "auto"] = "auto"

    CHAPTER: ClassVar[str] = "vit"
    #: which depths are swept does not change any one run's result (each run's key has its own depth)
    CACHE_EXCLUDE: ClassVar[tuple[str, ...]] = ("standard_depths", "ablations", "ablation_depth", "confirm_blocks",
                                                 "confirm_depths")
    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {
        "ci": dict(depth=4, depths=(2,), epochs=1, train_images=256, test_images=128, batch_size=64, seeds=1,
                   variants=VARIANTS, standard_depths=(2,),
                   ablations=(*STANDARD_REVERTS, *ALGORITHM1_INITS, *FFN_SCALES),
                   ablation_depth=2, confirm_blocks=("algorithm1-torch-ffn-init",), confirm_depths=(4,)),
        # the depth sweep a 2-core CPU runs: width 96 (4 heads of 24, as the paper's heads), 8x8 patches,
        # 1,000 optimiser steps of batch 64 per run (16,000 images, 4 epochs), 3 seeds, depths 6 to 80
        # (each run is cached on its own, so adding a depth reruns nothing)
        "book": dict(depth=80, depths=(6, 12, 24, 48), d_model=96, d_ff=192, n_heads=4, patch=8, epochs=4,
                     train_images=16000, test_images=1000, batch_size=64, seeds=3, precision="bf16",
                     variants=("post-norm", "post-norm-full-lr", "pre-norm", "de-escalated"),
                     standard_depths=(6, 12, 24, 48, 80),
                     ablations=(*STANDARD_REVERTS, *ALGORITHM1_INITS, *FFN_SCALES, *FFN_STEPS),
                     ablation_depth=24, confirm_blocks=("algorithm1-torch-ffn-init",),
                     confirm_depths=(48,)),
        "paper": dict(),
    }
    RULES: ClassVar = rules(
        variants=(lambda v: len(v) > 0 and len(set(v)) == len(v), "needs distinct variants"),
        depth=positive, depths=(lambda v: all(d > 0 for d in v) and len(set(v)) == len(v), "needs distinct depths > 0"),
        standard_depths=(lambda v: all(d > 0 for d in v) and len(set(v)) == len(v), "needs distinct depths > 0"),
        ablations=(lambda v: len(set(v)) == len(v) and set(v) <= set(ABLATION_BLOCKS),
                   f"needs distinct blocks from {ABLATION_BLOCKS}"),
        ablation_depth=nonneg,
        confirm_depths=(lambda v: all(d > 0 for d in v) and len(set(v)) == len(v), "needs distinct depths > 0"),
        confirm_blocks=(lambda v: len(set(v)) == len(v) and set(v) <= set(ABLATION_BLOCKS),
                        f"needs distinct blocks from {ABLATION_BLOCKS}"),
        d_model=positive, d_ff=positive, n_heads=positive,
        patch=(lambda v: v > 0 and 32 % v == 0, "must divide 32"), epochs=positive, train_images=nonneg,
        test_images=nonneg, batch_size=positive, lr=(lambda v: v is None or v > 0, "must be > 0"),
        tau=(lambda v: 0 < v <= 1, "must lie in (0, 1] (eq. 21)"), seeds=positive, sim_every=positive,
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        check_heads(self)


@dataclass
class Result(results.Result):
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
    test_images: int = 10_000        # effective number
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

    @property
    def steps(self) -> int:
        """Optimiser steps per run."""
        return self.epochs * -(-self.train_images // self.batch_size)

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

    # --- the block ablation ---

    def ablation_grids(self) -> list[tuple[int, dict[str, dict[str, list[dict]]]]]:
        """The ablation's grids as (depth, {block: {variant: [history per seed]}}): the full one, then the
        confirmations at deeper depths (each only when run)."""
        grids = [(self.ablation_depth, self.ablation)] if self.ablation else []
        return grids + [(int(d), r) for d, r in sorted(self.confirm.items(), key=lambda kv: int(kv[0])) if r]

    def ablation_grid(self, depth: int | None = None) -> dict[str, dict[str, list[dict]]]:
        """The ablation grid at `depth` (default: `ablation_depth`)."""
        if depth is None or depth == self.ablation_depth and self.ablation:
            return self.ablation
        return self.confirm[str(depth)]

    def ablation_gaps(self, depth: int | None = None, a: str = "de-escalated",
                      b: str = "pre-norm") -> dict[str, Interval]:
        """Per block of the ablation grid at `depth`, `a` − `b` in final training loss (seed-paired mean and
        95 % t-interval): how far de-escalated post-norm ends below (< 0) or above (> 0) pre-norm."""
        return {block: t_interval([ha["train_loss"][-1] - hb["train_loss"][-1]
                                   for ha, hb in zip(r[a], r[b], strict=True)])
                for block, r in self.ablation_grid(depth).items()}

    def ablation_contrast(self, block: str, other: str, depth: int | None = None, variant: str | None = None,
                          a: str = "de-escalated", b: str = "pre-norm") -> Interval:
        """How much `block` moves a final training loss against `other` at `depth`, seed by seed (the seeds
        pair the data order and the draws): with `variant`, that variant's loss difference; without, the
        difference of the gaps `a` − `b` (`ablation_gaps`). Mean and 95 % t-interval over seeds; NaN when
        either block was not run."""
        grid = self.ablation_grid(depth)
        if block not in grid or other not in grid:
            return Interval(float("nan"), float("nan"), float("nan"), 0, "t")

        def val(r: dict, i: int) -> float:
            if variant is not None:
                return r[variant][i]["train_loss"][-1]
            return r[a][i]["train_loss"][-1] - r[b][i]["train_loss"][-1]
        n = len(grid[block][a])
        return t_interval([val(grid[block], i) - val(grid[other], i) for i in range(n)])

    def ffn_step_scales(self) -> tuple[float, float]:
        """The learning-rate multipliers of W₁ and W₂ in the `algorithm1-torch-ffn-steps` block at this run's
        widths (`core.vit.ffn_step_scales`: Xavier's initial std over PyTorch's; √2 and 2 at width 96)."""
        return ffn_step_scales(self.d_model, self.d_ff)

    def total_hours(self) -> float:
        """Wall hours of every run of this result (one thread each, on a shared machine), each counted once."""
        seen: dict[int, float] = {}
        grids = [self.histories, *self.sweep.values(), *self.standard.values(), *self.ablation.values(),
                 *(g for c in self.confirm.values() for g in c.values())]
        for g in grids:
            for hs in g.values():
                for h in hs:
                    seen[id(h)] = h["wall_time_s"]
        return float(sum(seen.values()) / 3600)

    def ablation_loss(self, block: str, variant: str, depth: int | None = None) -> float:
        """Mean final training loss over seeds of `variant` with `block` in the ablation grid at `depth`
        (NaN when not run)."""
        runs = self.ablation_grid(depth).get(block, {}).get(variant)
        return float(np.mean([h["train_loss"][-1] for h in runs])) if runs else float("nan")

    @property
    def confirm_depth(self) -> int | None:
        """The deepest confirmation depth of the ablation (None when none was run)."""
        depths = [int(d) for d, r in self.confirm.items() if r]
        return max(depths) if depths else None

    def ffn_init_ratios(self) -> tuple[float, float]:
        """How many times Xavier's initial variance of W₁ and of W₂ exceeds PyTorch's default at this run's
        widths (`core.blocks.ffn_weight_variances`): 2 and 4 at width 96, FFN 192."""
        (x1, x2), (t1, t2) = (ffn_weight_variances(self.d_model, self.d_ff, k) for k in ("xavier", "torch"))
        return x1 / t1, x2 / t2

    # --- the FFN-scale sweep ---

    def _grid_at(self, depth: int | None) -> dict[str, dict[str, list[dict]]]:
        """The ablation grid at `depth` (default: `ablation_depth`); empty when that depth was not run."""
        if depth is None or depth == self.ablation_depth:
            return self.ablation
        return self.confirm.get(str(depth), {})

    def ffn_scale_blocks(self, depth: int | None = None) -> dict[float, str]:
        """The FFN-scale sweep's blocks run at `depth` (default: the ablation's), by the factor their FFN maps'
        initial variance is of PyTorch's default (1: `FFN_SCALE_BASE`; the others `core.vit.FFN_SCALES`), in
        increasing factor."""
        blocks = {1.0: FFN_SCALE_BASE, **{f: b for b, f in FFN_SCALES.items()}}
        grid = self._grid_at(depth)
        return {f: blocks[f] for f in sorted(blocks) if blocks[f] in grid}

    def ffn_scale_gaps(self, depth: int | None = None) -> dict[float, Interval]:
        """De-escalated − pre-norm final training loss per FFN-scale factor run at `depth` (`ablation_gaps`)."""
        blocks = self.ffn_scale_blocks(depth)
        gaps = self.ablation_gaps(depth) if blocks else {}
        return {f: gaps[b] for f, b in blocks.items()}

    def ffn_scale_slope(self, depth: int | None = None) -> Interval:
        """How the de-escalated − pre-norm gap moves per doubling of the FFN's initial variance at `depth`: per
        seed, the least-squares slope of the final-loss gap on log₂ of the factor over the scales run (the
        scales of one seed rescale the same drawn weights and see the same data), then the mean and 95 %
        t-interval over seeds. NaN with fewer than two scales."""
        blocks = self.ffn_scale_blocks(depth)
        if len(blocks) < 2:
            return Interval(float("nan"), float("nan"), float("nan"), 0, "t")
        grid = self._grid_at(depth)
        gaps = np.array([[a["train_loss"][-1] - b["train_loss"][-1]
                          for a, b in zip(grid[blk]["de-escalated"], grid[blk]["pre-norm"], strict=True)]
                         for blk in blocks.values()])                                 # (scales, seeds)
        slopes = np.polyfit(np.log2(list(blocks)), gaps, 1)[0]
        return t_interval(np.atleast_1d(slopes).tolist())

    def ffn_scale_missing(self, depth: int | None = None) -> list[float]:
        """The FFN-scale factors whose runs at `depth` the cache lacks (listed by a book build, not trained)."""
        d = str(self.ablation_depth if depth is None else depth)
        return sorted(f for b, f in FFN_SCALES.items() if b in self.missing.get(d, []))

    # --- the findings ---

    def _lr(self, variant: str, depth: int | None = None) -> str:
        """The learning rate `variant` trained at, as '5e-5'."""
        lr = self.runs(self.depth if depth is None else depth)[variant][0]["lr"]
        return f"{lr:.0e}".replace("e-0", "e-")

    def _measured(self, depth: int, block: str, variants: str) -> str:
        """What one finding's runs are: model, data, budget, seeds."""
        return (f"{variants} ViTs of depth {depth} ({block}, width {self.d_model}), CIFAR-10 "
                f"({self.train_images:,} training images, AutoAugment), {self.steps:,} optimiser steps of batch "
                f"{self.batch_size}, {len(self.seeds)} seed{'s' if len(self.seeds) > 1 else ''} (seed-paired final "
                f"training loss)")

    @property
    def paper_steps(self) -> int:
        """The paper's optimiser steps per run (the `paper` preset: 150 epochs of all 50,000 images, batch 128)."""
        q = Params.resolve("paper")
        return q.epochs * -(-(q.train_images or 50_000) // q.batch_size)

    def _scale(self) -> str:
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

    def findings(self) -> list[Finding]:
        """The chapter's findings on Yu & Zhang's Figure 6 (§3.3), every number from the runs: at the main
        depth with Algorithm 1's blocks, post-norm (at the paper's half rate) against pre-norm, de-escalated
        against that post-norm and against pre-norm; the last with standard blocks, and with Algorithm 1's
        block under PyTorch's FFN initialisation (the ablation's deepest confirmation); whether tokens that
        are all but identical stop plain post-norm from training level with pre-norm; and the paper's run."""
        common = dict(paper="yu2024", chapter="vit", scale=self._scale(), reference=0.0, reference_label="0")
        d, a1 = self.depth, "Algorithm 1's blocks, §2.1 initialisation"
        out = [
            Finding(key="vit-post-behind-pre", where="§3.3, Fig. 6",
                    claim="A deep (80-block) post-norm ViT trains far worse than its pre-norm counterpart, "
                          "even at half the learning rate.",
                    measured=self._measured(d, a1, f"post-norm (lr {self._lr('post-norm')}) and pre-norm "
                                                  f"(lr {self._lr('pre-norm')})"),
                    quantity=f"post-norm − pre-norm final training loss at depth {d}, Algorithm 1's blocks (nats)",
                    effect=self.gap("post-norm", "pre-norm"), direction="above", claim_id="yu-fig6-post-behind-pre",
                    reduced=self.reduced(d), section="vit-depth80-section", **common),
            Finding(key="vit-deesc-vs-post", where="§3.3, Fig. 6",
                    claim="De-escalation (eq. 21, τ = 1, after every block) opens a significant gap between "
                          "the 80-block post-norm ViT and its de-escalated version.",
                    measured=self._measured(d, a1, f"de-escalated (lr {self._lr('de-escalated')}) and plain "
                                                  f"post-norm (lr {self._lr('post-norm')})"),
                    quantity=f"de-escalated − post-norm final training loss at depth {d}, Algorithm 1's blocks (nats)",
                    effect=self.gap("de-escalated", "post-norm"), direction="below", claim_id="yu-fig6-deesc-vs-post",
                    reduced=self.reduced(d), section="vit-depth80-section", **common),
            Finding(key="vit-deesc-vs-pre", where="§3.3, Fig. 6",
                    claim="The de-escalated 80-block post-norm ViT slightly outperforms its pre-norm "
                          "counterpart in training loss.",
                    measured=self._measured(d, a1, "de-escalated and pre-norm"),
                    quantity=f"de-escalated − pre-norm final training loss at depth {d}, Algorithm 1's blocks (nats)",
                    effect=self.gap("de-escalated", "pre-norm"), direction="below", claim_id="yu-fig6-deesc-vs-pre",
                    reduced=self.reduced(d), section="vit-depth80-section", label="Algorithm 1's blocks",
                    size_word="slightly", **common),
        ]
        std = self.standard_result()
        if std is not None:
            out.append(Finding(
                key="vit-deesc-vs-pre-standard", where="§3.3, Fig. 6",
                claim="The de-escalated 80-block post-norm ViT slightly outperforms its pre-norm counterpart in "
                      "training loss (with the vit-pytorch block the paper's code points to).",
                measured=std._measured(std.depth, "standard vit-pytorch blocks, PyTorch's initialisation",
                                       "de-escalated and pre-norm"),
                quantity=f"de-escalated − pre-norm final training loss at depth {std.depth}, standard blocks (nats)",
                effect=std.gap("de-escalated", "pre-norm"), direction="below", section="vit-depth80-section",
                claim_id="yu-fig6-deesc-vs-pre", reduced=std.reduced(std.depth), label="standard blocks",
                size_word="slightly", **common))
        c = self.confirm_depth
        if c is not None and "algorithm1-torch-ffn-init" in self.confirm[str(c)]:
            out.append(Finding(
                key="vit-deesc-vs-pre-torch-ffn", where="§3.3, Fig. 6; §2.4",
                claim="The de-escalated post-norm ViT slightly outperforms its pre-norm counterpart in training "
                      "loss (Algorithm 1's block, other weights initialised by 'the default method in the code').",
                measured=self._measured(c, "Algorithm 1's blocks, PyTorch's default FFN initialisation",
                                        "de-escalated and pre-norm"),
                quantity=f"de-escalated − pre-norm final training loss at depth {c}, Algorithm 1's blocks with "
                         "PyTorch's FFN initialisation (nats)",
                effect=self.ablation_gaps(c)["algorithm1-torch-ffn-init"], direction="below",
                claim_id="yu-fig6-deesc-vs-pre", reduced=self.reduced(c), section="vit-ablation-section",
                label="Algorithm 1's blocks, PyTorch's FFN initialisation", size_word="slightly", **common))
        da, scales, lacking = self.ablation_depth, self.ffn_scale_blocks(), self.ffn_scale_missing()
        if scales or lacking:
            tested = len(scales) >= 2
            factors = ", ".join(f"×{f:g}" for f in sorted({*scales, *lacking}))
            out.append(Finding(
                key="vit-ffn-scale", where="§2.1, §2.4; Fig. 6",
                claim="The FFN's initial scale decides how far the de-escalated post-norm ViT ends below pre-norm: "
                      "the larger the FFN's initial variance, the smaller its lead.",
                measured=self._measured(da, f"Algorithm 1's blocks, PyTorch's FFN initialisation, its variance "
                                            f"{factors}", "de-escalated and pre-norm"),
                quantity=f"change of the de-escalated − pre-norm final training loss per doubling of the FFN's "
                         f"initial variance at depth {da} (per-seed least-squares slope over "
                         f"{', '.join(f'×{f:g}' for f in scales) or 'the scales run'}; nats)",
                effect=self.ffn_scale_slope() if tested else None, direction="above",
                needs="" if tested else f"the FFN-scale runs at depth {da} (not committed)",
                command="" if tested else MISSING_COMMAND, kind="extension", reduced=self.reduced(da),
                section="vit-ffn-scale-section", **common))
        if std is not None:
            da = std.alike_depth()
            out.append(Finding(
                key="vit-alike-tokens", where="abstract; §4",
                claim="Token similarity escalation, tokens growing alike block after block, is what makes deep "
                      "post-norm Transformers hard to train.",
                measured=std._measured(da, "standard blocks; plain post-norm's last-block token similarity "
                                           f"at least {ALIKE} on every seed",
                                       f"post-norm and pre-norm (both lr {std._lr('pre-norm', da)})"),
                quantity=f"post-norm − pre-norm final training loss at depth {da}, standard blocks, where post-norm's "
                         "tokens are alike (nats)",
                effect=std.gap("post-norm-full-lr", "pre-norm", da), direction="above",
                claim_id="yu-tse-causes-depth-problem", reduced=std.reduced(da), section="vit-tsim-section", **common))
        out.append(Finding(
            key="vit-paper-scale", where="§3.3, Fig. 6",
            claim="After 150 epochs at depth 80, width 192 and 4×4 patches, the de-escalated post-norm ViT ends "
                  "slightly below pre-norm and far below plain post-norm in training loss.",
            measured="the paper's setting (the `paper` preset: all 50,000 images, 150 epochs, 3 seeds)",
            quantity="de-escalated − pre-norm final training loss at depth 80, the paper's setting (nats)", effect=None,
            direction="below", needs="a GPU", command="make rerun CHAPTER=vit SCALE=paper",
            claim_id="yu-fig6-deesc-vs-pre", section="vit-differences", **{**common, "scale": "paper"}))
        return out

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


#: named sets of overrides of the `book` preset (`make grid CHAPTER=vit SCALE=book GRID_ARGS='--recipe NAME'`):
#: `ffn-steps`, Algorithm 1's block with PyTorch-sized relative FFN steps at the ablation's depth (what separates
#: the FFN's initial scale from its relative step size); `ffn-scale`, the FFN-scale sweep at the ablation's depth
#: and its confirmation depth, and that block at both; `depth80-ffn`, Algorithm 1's block with
#: PyTorch's FFN initialisation at depth 80; `long`, persistence: depth 48 with both blocks at 10x the optimiser
#: steps (one seed; the schedule's decays at 70 % and 90 % of the longer run)
RECIPES: dict[str, dict[str, Any]] = {
    "ffn-steps": dict(ablations=(*STANDARD_REVERTS, *ALGORITHM1_INITS, *FFN_STEPS)),
    "ffn-scale": dict(ablations=(*STANDARD_REVERTS, *ALGORITHM1_INITS, *FFN_SCALES, *FFN_STEPS),
                      confirm_blocks=("algorithm1-torch-ffn-init", *FFN_SCALES, *FFN_STEPS)),
    "depth80-ffn": dict(confirm_depths=(48, 80)),
    "long": dict(depth=48, depths=(), standard_depths=(48,), ablation_depth=0, ablations=(), confirm_blocks=(),
                 confirm_depths=(), seeds=1, epochs=40, variants=("post-norm", "pre-norm", "de-escalated")),
}


def recipe_cost(name: str, seconds_per_epoch: dict[int, float]) -> dict[str, float]:
    """The runs recipe `name` adds to the book preset's runs (those of the recipe the cache lacks, less those the
    book preset itself lacks) and their CPU-hours, each estimated from `seconds_per_epoch` at its depth (the
    committed runs' mean wall time per epoch, one thread each) times its epochs; a depth without a committed run
    is costed at the nearest deeper one."""
    def ident(s: results.RunSpec) -> tuple[str, str]:
        return s.name, results.settings_hash(s.key)
    book_lacks = {ident(s) for s in runs(Params.resolve("book")) if not s.done()}
    q = Params.resolve("book", **RECIPES[name])
    missing = [s for s in runs(q) if not s.done() and ident(s) not in book_lacks]
    depths = sorted(seconds_per_epoch)

    def per_epoch(d: int) -> float:
        return seconds_per_epoch[next((x for x in depths if x >= d), depths[-1])]
    hours = sum(per_epoch(s.key["depth"]) * s.key["epochs"] for s in missing) / 3600
    return {"runs": len(missing), "hours": float(hours)}


def seconds_per_epoch(res: Result) -> dict[int, float]:
    """Mean wall time per epoch of every run of `res` (any block, any variant) by depth."""
    out: dict[int, list[float]] = {}
    for grid in (res.sweep or {str(res.depth): res.histories}, res.standard):
        for d, by_variant in grid.items():
            out.setdefault(int(d), []).extend(h["wall_time_s"] / res.epochs for hs in by_variant.values() for h in hs)
    return {d: float(np.mean(v)) for d, v in out.items() if v}


def run(p: Params) -> Result:
    """Train (or read back) every variant for every seed of `p`."""
    runtime.seed_everything(p.seed)
    dev = runtime.choose_device(p.device)
    datasets = _lazy_datasets(p)

    seeds = runtime.run_seeds(p.seed, p.seeds)
    sweep, hits = {}, []
    for d in sorted({p.depth, *p.depths}):
        sweep[str(d)], h = _grid(p, d, p.variants, seeds, dev, datasets)
        hits += h
    standard = {}
    if p.block != "standard":
        q = p.with_(block="standard", standard_depths=())
        for d in sorted(p.standard_depths):
            standard[str(d)], h = _grid(q, d, p.variants, seeds, dev, datasets)
            hits += h
    ablation: dict = {}
    confirm: dict = {str(d): {} for d in sorted(p.confirm_depths)}
    missing: dict[str, list[str]] = {}
    grids = [(p.ablation_depth, p.ablations, ablation)] if p.ablation_depth else []
    grids += [(d, p.confirm_blocks, confirm[str(d)]) for d in sorted(p.confirm_depths)]
    for depth, blocks, out in grids:
        hits += _ablation_grid(p, depth, blocks, sweep, standard, seeds, dev, datasets, out,
                               missing.setdefault(str(depth), []))
    res = Result(variants=list(p.variants), seeds=seeds, depth=p.depth, epochs=p.epochs,
                 train_images=p.train_images or 50_000, scale=p.scale, histories=sweep[str(p.depth)],
                 from_cache=all(hits), sweep=sweep if p.depths else {}, batch_size=p.batch_size,
                 d_model=p.d_model, n_heads=p.n_heads, d_ff=p.d_ff, test_images=p.test_images or 10_000,
                 standard=standard, ablation=ablation, ablation_depth=p.ablation_depth, confirm=confirm,
                 missing={d: b for d, b in missing.items() if b})
    if p.scale == "book":
        per_epoch = seconds_per_epoch(res)
        res.recipe_costs = {name: recipe_cost(name, per_epoch) for name in RECIPES}
    return res


def _ablation_grid(p: Params, depth: int, blocks, sweep, standard, seeds, dev, datasets, out: dict,
                   missing: list[str]) -> list[bool]:
    """Pre-norm and de-escalated post-norm at `depth` for Algorithm 1's block, the standard block and
    `blocks`, into `out` ({block: {variant: [history per seed]}}); runs the sweeps above already made are
    taken from them, the others trained (or read back) under their own block's names and keys. A block of the
    FFN-scale sweep whose runs the cache lacks, when `p` may not train them (the book build), goes into
    `missing` instead (the chapter lists it with `MISSING_COMMAND`)."""
    d, hits = str(depth), []
    done = {p.block: sweep.get(d, {}), **({"standard": standard[d]} if d in standard else {})}
    for block in ("algorithm1", "standard", *blocks):
        if all(v in done.get(block, {}) for v in ABLATION_VARIANTS):      # trained above: the same runs
            out[block] = {v: done[block][v] for v in ABLATION_VARIANTS}
            continue
        q = p.with_(block=block, standard_depths=(), ablations=(), confirm_blocks=())
        if (block in FFN_SCALES and not p.train_missing and results.persists(p.scale)
                and not all(s.done() for s in _specs(q, depth, ABLATION_VARIANTS, seeds, datasets))):
            missing.append(block)
            continue
        out[block], h = _grid(q, depth, ABLATION_VARIANTS, seeds, dev, datasets)
        hits += h
    return hits


def _lazy_datasets(p: Params):
    """A function returning (train, test) CIFAR-10 of `p`, read from the mirror on the first call only
    (a grid whose runs are all cached never reads the images)."""
    data: dict[str, Any] = {}

    def datasets():
        if not data:
            data["train"] = load_cifar10("train", p.train_images or None, p.seed)
            data["test"] = load_cifar10("test", p.test_images or None, p.seed + 1)
        return data["train"], data["test"]
    return datasets


class _Trainer:
    """Trains one variant and run seed of `p` at one depth (`train(variant, seed, checkpoint)`); CIFAR-10 is read
    once per process. An object rather than a closure, so a grid job (`make grid`) can carry it."""

    def __init__(self, p: Params, depth: int, datasets):
        self.p, self.depth, self.datasets = p, depth, datasets

    def __call__(self, variant: str, s: int, ckpt):
        train_set, test_set = self.datasets()
        return vit_train.run_variant(self.p, self.depth, variant, s, train_set, test_set, checkpoint=ckpt,
                                     device=runtime.choose_device(self.p.device))


def _specs(p: Params, depth: int, variants, seeds, datasets) -> list[results.RunSpec]:
    """Every variant × seed at one depth, as runs: those at `p.depth` are named `<variant>-seed<s>`, those at
    another depth `d<depth>-<variant>-seed<s>`, both with a `<block>-` prefix for blocks other than Algorithm
    1's (so they sit beside the Algorithm-1 runs instead of replacing them); the key is `p` at that depth
    without the sweep (so a run does not depend on which other depths were swept)."""
    q = p.with_(depth=depth, depths=())
    prefix = ("" if p.block == "algorithm1" else f"{p.block}-") + ("" if depth == p.depth else f"d{depth}-")
    return results.variant_specs(q, variants, seeds, _Trainer(p, depth, datasets), prefix=prefix)


def _grid(p: Params, depth: int, variants, seeds, dev, datasets):
    """`_specs` made (or read back) in order: ({variant: [history per seed]}, [cache hit per run])."""
    specs = _specs(p, depth, variants, seeds, datasets)
    outs = results.execute_all(specs, train_missing=p.train_missing)
    hist: dict[str, list[dict]] = {v: [] for v in variants}
    for spec, (h, _) in zip(specs, outs, strict=True):
        hist[spec.extra["variant"]].append(h)
    return hist, [hit for _, hit in outs]


def runs(p: Params) -> list[results.RunSpec]:
    """Every heavy run `run(p)` makes, in its order, as the grid runner takes them (`make grid`): the sweep, the
    standard-block sweep, the ablation and its confirmations (a run the sweeps already make is listed once)."""
    datasets, seeds = _lazy_datasets(p), runtime.run_seeds(p.seed, p.seeds)
    out = [s for d in sorted({p.depth, *p.depths}) for s in _specs(p, d, p.variants, seeds, datasets)]
    if p.block != "standard":
        q = p.with_(block="standard", standard_depths=())
        out += [s for d in sorted(p.standard_depths) for s in _specs(q, d, p.variants, seeds, datasets)]
    grids = [(p.ablation_depth, p.ablations)] if p.ablation_depth else []
    grids += [(d, p.confirm_blocks) for d in sorted(p.confirm_depths)]
    swept = {p.block: {p.depth, *p.depths}, "standard": set(p.standard_depths) if p.block != "standard" else set()}
    for depth, blocks in grids:
        for block in ("algorithm1", "standard", *blocks):
            if depth in swept.get(block, set()) and set(ABLATION_VARIANTS) <= set(p.variants):
                continue                                    # trained by a sweep above: the same runs
            q = p.with_(block=block, standard_depths=(), ablations=(), confirm_blocks=())
            out += _specs(q, depth, ABLATION_VARIANTS, seeds, datasets)
    seen, unique = set(), []
    for s in out:
        ident = (s.name, results.settings_hash(s.key))
        if ident not in seen:
            seen.add(ident)
            unique.append(s)
    return unique


def run_one(p: Params, depth: int, variant: str, seed: int) -> tuple[dict, bool]:
    """One run of the grid of `p` (a depth of `p.depth`/`p.depths`, a variant, a run seed), through
    the same cache as `run`: (history, cache hit)."""
    if depth not in {p.depth, *p.depths, p.ablation_depth, *p.confirm_depths} - {0} or variant not in p.variants:
        raise ValueError(f"depth {depth} / variant {variant!r} is not in this grid")
    runtime.seed_everything(p.seed)
    dev = runtime.choose_device(p.device)
    datasets = _lazy_datasets(p)

    hist, hits = _grid(p, depth, [variant], [seed], dev, datasets)
    return hist[variant][0], hits[0]


BLOCK_BENCH = ("ViT depth 80, Algorithm 1 blocks (vit book sweep)", "ViT depth 80, standard blocks (vit book sweep)")


def block_cost() -> dict[str, Any] | None:
    """The committed step times of the two block types at the sweep's deepest setting
    (`results/bench/vit-blocks-cpu.json`, written by `scripts/bench_training.py`; bf16, one thread):
    seconds per step of each, their ratio, the load average when measured and the command. None when
    the file is missing."""
    import json

    path = runtime.REPO_ROOT / "results" / "bench" / "vit-blocks-cpu.json"
    if not path.is_file():
        return None
    rec = json.loads(path.read_text())
    loops = {r["loop"]: r for r in rec["loops"]}
    alg1, std = (loops[name]["bf16"]["seconds_per_step"] for name in BLOCK_BENCH)
    return {"algorithm1_s": alg1, "standard_s": std, "ratio": std / alg1, "threads": rec["threads"],
            "load": rec.get("load_average_at_start"), "command": rec["command"]}


__all__ = ["Params", "Result", "run", "run_one", "RECIPES", "FFN_SCALES", "FFN_SCALE_BASE", "MISSING_COMMAND",
           "recipe_cost", "seconds_per_epoch", "block_cost", "BLOCK_BENCH", "ABLATION_VARIANTS", "ABLATION_BLOCKS",
           "VARIANTS", "MODEL_VARIANTS", "model_variant", "variant_lr"]
