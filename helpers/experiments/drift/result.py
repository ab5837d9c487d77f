"""The drift chapter's `Result`: the sweeps over bias norms per seed and input variant, the fixed point N*, the
reference model's layers (`records.Reference`), and the statistics the chapter reads off them; the findings are
`findings.py`'s table."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from ...core.findings import Finding
from ...core.stats import Interval, t_interval
from ...machinery import results
from .findings import findings
from .records import Histogram, Reference


@dataclass
class Result(results.Result):
    """Everything the drift chapter shows. `stats[name]` is (seeds, norms) for every name of `STATS`
    (inputs: rows of E); `variant_stats[variant][name]` the same for the other input variants (their
    first `variant_seeds` seeds);
    `hists[s][j]` the histogram (`records.Histogram`) of the pre-softmax scores of seed s at `hist_norms[j]`;
    `reference`: the trained model's layers (`records.Reference`). Stored dicts become records here (a saved Result
    and the committed runs read back as they were written)."""

    norms: list[float]
    seeds: list[int]
    stats: dict[str, list[list[float]]]
    hist_norms: list[float]
    hists: list[list[Histogram]]
    fixed_point_per_seed: list[float | None]
    fixed_point_refined: float | None
    n_seq: int
    seq_len: int
    hidden: int
    norm_min: float
    reference: Reference = field(default_factory=Reference)
    variant_stats: dict[str, dict[str, list[list[float]]]] = field(default_factory=dict)
    uniform_tol: float = 1.05

    def __post_init__(self) -> None:
        """The converter: each stored dict becomes its record."""
        self.reference = Reference.of(self.reference)
        self.hists = [[Histogram.of(h) for h in per_seed] for per_seed in self.hists]

    def stat(self, name: str, variant: str = "table") -> np.ndarray:
        """One statistic as a (seeds, norms) array, for the inputs of `variant`."""
        src = self.stats if variant == "table" else self.variant_stats[variant]
        return np.asarray(src[name], dtype=float)

    def last_uniform(self, variant: str = "table") -> int:
        """Index of the largest bias norm up to which the mean row maximum (over seeds) stays below
        `uniform_tol`/L at every norm: the attention is uniform there."""
        ok = self.stat("row_max", variant).mean(0) < self.uniform_tol / self.seq_len
        return int(np.argmin(ok)) - 1 if not ok.all() else len(ok) - 1

    # ------------------------------------------------------------------ what the chapter reads off the sweeps

    def seeds_of(self, variant: str = "table") -> int:
        """How many seeds the inputs of `variant` were run on."""
        return len(self.stat("row_max", variant))

    def variants(self) -> list[str]:
        return ["table", *self.variant_stats]

    def onset(self, variant: str = "table") -> int | None:
        """Index of the first bias norm where the mean row maximum (over seeds) is twice its value
        without bias; None when it never doubles."""
        rm = self.stat("row_max", variant).mean(0)
        idx = np.nonzero(rm > 2 * rm[0])[0]
        return int(idx[0]) if idx.size else None

    def index_of(self, norm: float) -> int:
        """Index of the swept bias norm closest to `norm`."""
        return int(np.argmin(np.abs(np.asarray(self.norms) - norm)))

    def softmax_rows(self) -> list[dict[str, float]]:
        """Per input variant, where the attention leaves uniform: the largest bias norm up to which it
        is uniform (mean row maximum below `uniform_tol`/L) with the input cosine there, the bias norm
        where the row maximum first doubles with the input cosine and 1 − cosine there, and the row
        maximum × L and normalised entropy without bias and at the largest bias (means over seeds)."""
        nan = float("nan")
        rows = []
        for v in self.variants():
            cos, u, o = self.stat("in_cos", v).mean(0), self.last_uniform(v), self.onset(v)
            rm, ent = self.stat("row_max", v).mean(0) * self.seq_len, self.stat("entropy_norm", v).mean(0)
            rows.append({"variant": v, "seeds": self.seeds_of(v),
                         "in_norm_0": float(self.stat("in_norm", v)[:, 0].mean()),
                         "uniform_n": self.norms[u] if u >= 0 else nan, "uniform_cos": float(cos[u]) if u >= 0 else nan,
                         "onset_n": self.norms[o] if o is not None else nan,
                         "onset_cos": float(cos[o]) if o is not None else nan,
                         "onset_1mcos": float(1 - cos[o]) if o is not None else nan,
                         "row_max_l_0": float(rm[0]), "entropy_0": float(ent[0]),
                         "row_max_l_last": float(rm[-1]), "entropy_last": float(ent[-1])})
        return rows

    def fixed_point_range(self) -> tuple[float, float]:
        """The smallest and largest N* over seeds (interpolated on the grid); NaN when none crossed."""
        per_seed = [v for v in self.fixed_point_per_seed if v is not None]
        return (min(per_seed), max(per_seed)) if per_seed else (float("nan"), float("nan"))

    #: below this distance of the input's average cosine from 1, float32 cannot resolve the output's
    #: cosine from the input's (the differences there are rounding, ±6e-8)
    RESOLVABLE: ClassVar[float] = 1e-4

    def cosine_gain(self) -> Interval:
        """Output − input average cosine at the bias norm where it is smallest, among the norms where
        1 − input cosine exceeds `RESOLVABLE`: per seed, then a t-interval over seeds."""
        gap = self.stat("out_cos") - self.stat("in_cos")
        ok = (1 - self.stat("in_cos").mean(0)) > self.RESOLVABLE
        return t_interval(gap[:, ok].min(1))

    def fixed_point_ratio(self) -> Interval:
        """log10 of N* over the reference model's mean hidden-state norm: the estimate from the refined
        N* and the mean over layers; the range from the smallest per-seed N* over the largest layer norm
        to the largest N* over the smallest norm."""
        norms = np.asarray(self.reference.layer_norms, float)
        lo, hi = self.fixed_point_range()
        est = self.fixed_point_refined if self.fixed_point_refined is not None else float("nan")
        return Interval(np.log10(est / norms.mean()), np.log10(lo / norms.max()), np.log10(hi / norms.min()),
                        len(norms), "range")

    def score_growth(self) -> Interval:
        """log10 of the pooled score sd at the largest histogram bias norm over its value without bias:
        per seed, t-interval over seeds."""
        sd = self.stat("score_std")
        return t_interval(np.log10(sd[:, self.index_of(max(self.hist_norms))] / sd[:, 0]))

    def entropy_drop(self) -> Interval:
        """Normalised attention entropy at the largest bias norm minus without bias: per seed, t over seeds."""
        e = self.stat("entropy_norm")
        return t_interval(e[:, -1] - e[:, 0])

    def qk_norm_growth(self) -> Interval:
        """log10 of the mean query norm at the largest bias norm over its value without bias (Fig. 8b): per seed,
        t-interval over seeds."""
        qn = self.stat("q_norm")
        return t_interval(np.log10(qn[:, -1] / qn[:, 0]))

    def qk_cos_at_zero(self) -> Interval:
        """Average cosine of the queries at N = 0 (inputs: rows of E), t over seeds."""
        return t_interval(self.stat("q_cos")[:, 0])

    def reference_level(self) -> int:
        """Index of the largest bias norm whose input average cosine (mean over seeds) does not exceed
        the reference model's most anisotropic layer: the drift at real anisotropy levels."""
        cos = self.stat("in_cos").mean(0)
        return int(np.nonzero(cos <= max(self.reference.layer_cos))[0].max())

    def sharpening_at_reference(self) -> Interval:
        """Row maximum × L − 1 (0 = uniform attention) at `reference_level`: per seed, t over seeds."""
        return t_interval(self.stat("row_max")[:, self.reference_level()] * self.seq_len - 1)

    def findings(self) -> list[Finding]:
        """The paper's §4 claims (Figs. 6-10) against the sweeps, with the inputs the paper describes (rows
        of E): `FINDINGS`."""
        return findings(self)

    def seed_mean(self, name: str, variant: str = "table") -> np.ndarray:
        """One statistic per bias norm, averaged over seeds (`stat`'s (seeds, norms) → (norms,))."""
        return self.stat(name, variant).mean(0)

    def mean_out_norm(self) -> float:
        """The block's output norm E‖T(x + b)‖ averaged over every bias norm and seed."""
        return float(self.stat("out_norm").mean())
