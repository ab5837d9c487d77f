"""The vit chapter's block ablation and FFN-scale sweep, read from a `Result`'s grids (`AblationReadings`, a base
of `result.Result`): the seed-paired gaps per block, the contrasts between blocks, the FFN-scale slope."""

from __future__ import annotations

import numpy as np

from helpers.core.blocks import ffn_weight_variances
from helpers.core.stats import Interval, t_interval
from helpers.core.vit import FFN_SCALES, ffn_step_scales

from .params import FFN_SCALE_BASE


class AblationReadings:
    """The readings of the ablation grids (`ablation`, `confirm`, `missing`) of a vit `Result`."""

    ablation: dict[str, dict[str, list[dict]]]
    ablation_depth: int
    confirm: dict[str, dict[str, dict[str, list[dict]]]]
    missing: dict[str, list[str]]
    d_model: int
    d_ff: int

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
