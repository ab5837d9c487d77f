"""The STS chapter's typed records: one encoder's main run (`Run`), a reading of an encoder under each pooling
(`Reading`, subsampled or on every pair: the same record with other `per_set` and `draws`), one draw of it
(`Draw`) and the same-fit procedures of whitening − SoftDecay (`SameFit`). Each is read from the dict a results
file stores (`Record.of`, the converter: committed results keep their layout and their cache keys) and written
back in that layout (`Record.to_json`); the few settings a record needs to read itself (the sets, the bootstrap
size, the default pooling) are given by the `Result` that holds it and never stored."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar, TypedDict

import numpy as np
import pandas as pd

from ...core.stats import Interval, t_interval
from ...core.sts import FLIP_FREE
from ...machinery.results import Band, StoredRecord, Unread
from .params import PLANT_METHODS, reading_bootstrap, refit_draws

SD = "SoftDecay (sentence)"


def _by_set(table: dict, sets) -> pd.DataFrame:
    """{set: {column: value}} as a frame with one row per set, in `sets` order."""
    df = pd.DataFrame(table).T.loc[list(sets)]
    df.index.name = "set"
    return df


#: the stored-dict record base (`machinery.results.StoredRecord`)
Record = StoredRecord

#: {method: Spearman ×100} (None: a method not run, or undefined)
Scores = dict[str, float | None]
#: {method: [method − raw (or − SoftDecay), low, high]}, a paired bootstrap's 95 % interval
Bands = dict[str, Band]


class Uniformity(TypedDict):
    """Table 4's metrics of one set of embeddings (`core.sts.uniformity_metrics`)."""

    EV1: float
    RBF_dis: float
    TokenUni: float


class Control(TypedDict):
    """Table 4's control on one structureless set (`compute._control`): its metrics before and after SoftDecay."""

    before: Uniformity
    after: Uniformity


class SignFlips(TypedDict):
    """SoftDecay's sign-flipped directions on one set, summed over the two sentence matrices (σ, σ/√N, σ/σ_max
    below |α|), their summed rank and the smallest and largest live singular value (`compute.run_model`)."""

    raw: int
    sqrt_n: int
    max: int
    rank: int
    sigma_min: float
    sigma_max: float


class Spectra(TypedDict, total=False):
    """Fig. 3 on one set (`compute.run_model`): per layer the singular values before and after SoftDecay, and the
    directions it flips (absent: the run read no set it draws)."""

    before: list[list[float]]
    after: list[list[float]]
    flips: list[int]


class Anisotropy(TypedDict):
    """One set under one pooling (`compute.readings`): EV₁ before and after whitening, EV₁ of the centred rows and
    the mean's share."""

    EV1: float
    EV1_whitened: float
    EV1_centred: float
    mean_share: float


class Settings(TypedDict):
    """The same-fit procedures' sizes (`compute.samefit_settings`)."""

    halves: int
    splits: int
    split_boot: int


@dataclass(frozen=True)
class Run(Record):
    """One encoder's main run (`compute.run_model`): per set `spearman[protocol]` (Spearman ×100 per method), `ci`
    ([method − raw, low, high], paired bootstrap), `avg_ci` (the same for the mean over the sets), `alpha_sweep`,
    `table4` (EV1, RBF_dis, TokenUni of vanilla / whitening / SoftDecay), `control`, `lsds`, `sign_flips`,
    `planted`, `pairs`, `subsets`, `cdf` (per-layer singular values, STS-B)."""

    CONTEXT: ClassVar[tuple[str, ...]] = ("encoder", "sets", "bootstrap")

    encoder: str
    sets: tuple[str, ...]
    bootstrap: int
    spearman: dict[str, dict[str, Scores]] = field(default_factory=dict)      # [protocol][set]
    ci: dict[str, dict[str, Bands]] = field(default_factory=dict)              # [protocol][set]
    avg_ci: dict[str, Bands] = field(default_factory=dict)                     # [protocol]
    alpha_sweep: dict[str, dict[str, float]] = field(default_factory=dict)    # [set][str(α)]
    table4: dict[str, dict[str, Uniformity]] = field(default_factory=dict)    # [set]["vanilla", "whitening", …]
    lsds: dict[str, dict[str, float]] = field(default_factory=dict)           # [set]["SoftDecay (normalised)"]
    control: dict[str, dict[str, Control]] = field(default_factory=dict)      # [set]["gaussian" | "shuffled"]
    sign_flips: dict[str, SignFlips] = field(default_factory=dict)            # [set]
    planted: dict[str, dict[str, dict[str, list[float]]]] = field(default_factory=dict)  # [set][kind][method][size]
    pairs: dict[str, int] = field(default_factory=dict)
    subsets: dict[str, int] = field(default_factory=dict)
    cdf: Spectra = field(default_factory=dict)
    refit: Bands = field(default_factory=dict)                                 # whitening − SoftDecay, refitted
    other: Unread = field(default_factory=dict)
    layout: tuple[str, ...] = field(default=(), compare=False, repr=False)

    @property
    def n_pairs(self) -> int:
        return int(sum(self.pairs.values()))

    def vs_raw(self, method: str, protocol: str = "subset-mean", dataset: str | None = None) -> Interval:
        """`method` − raw model, Spearman ×100 (the mean over the sets, or one set), with its 95 % paired
        bootstrap interval (pairs resampled within each subset; the transforms as fitted on the full set)."""
        d, lo, hi = self.avg_ci[protocol][method] if dataset is None else self.ci[protocol][dataset][method]
        return Interval(d, lo, hi, self.bootstrap or 1, "bootstrap")

    def set_scores(self, method: str, protocol: str = "subset-mean") -> np.ndarray:
        """`method`'s Spearman ×100 on each set, in set order (NaN: not run, or undefined)."""
        s = self.spearman[protocol]
        return np.array([np.nan if s[d].get(method) is None else s[d][method] for d in self.sets], dtype=float)

    def across_sets(self, a: str, b: str, protocol: str = "subset-mean") -> Interval:
        """Method `a` − method `b` on each set, as the mean over the sets with its Student-t interval
        (the seven sets the unit: does the ordering hold from one STS set to the next?)."""
        return t_interval(self.set_scores(a, protocol) - self.set_scores(b, protocol))


    def mean_metric(self, method: str, metric: str = "EV1") -> float:
        """Table 4's `metric` of `method` ("vanilla", "whitening", "SoftDecay"), mean over the sets."""
        t4 = self.table4
        return float(np.mean([t[method][metric] for t in t4.values()])) if t4 else float("nan")

    def metric_change(self, metric: str = "EV1") -> Interval:
        """SoftDecay's change of a Table 4 metric (after − before) per set, mean with its t-interval."""
        return t_interval([self.table4[d]["SoftDecay"][metric] - self.table4[d]["vanilla"][metric] for d in self.sets])

    def control_gap(self, metric: str = "EV1", kind: str = "gaussian") -> Interval:
        """Table 4's control: `metric` after SoftDecay of a structureless set (`kind`: "gaussian", "shuffled") −
        after SoftDecay of the sentence embeddings, per set, mean with its t-interval over the sets."""
        return t_interval([self.control[d][kind]["after"][metric] - self.table4[d]["SoftDecay"][metric]
                           for d in self.sets if d in self.control])

    def lsds_gap(self, weights: str = "normalised") -> Interval:
        """LSDS of SoftDecay − LSDS of whitening per set (k = 12; `weights` "normalised" or "eq. 6"),
        mean with its t-interval over the sets."""
        ls = self.lsds
        return t_interval([ls[d][f"SoftDecay ({weights})"] - ls[d][f"whitening ({weights})"] for d in ls])

    def lsds_count(self, weights: str = "normalised") -> int:
        """On how many sets SoftDecay has the lower LSDS than whitening."""
        return int(sum(v[f"SoftDecay ({weights})"] < v[f"whitening ({weights})"] for v in self.lsds.values()))

    def alpha_scores(self) -> pd.DataFrame:
        """The α sweep: Spearman ×100 of sentence-level SoftDecay per α (rows) and set (columns)."""
        df = pd.DataFrame({d: {float(a): v for a, v in self.alpha_sweep[d].items()} for d in self.sets})
        df.index.name = "α"
        return df.sort_index(ascending=False)

    def alpha_effect(self) -> Interval:
        """The α grid's two ends: score at the least negative α − score at the most negative, per set,
        mean with its t-interval over the sets."""
        df = self.alpha_scores()
        return t_interval(df.loc[df.index.max()].to_numpy() - df.loc[df.index.min()].to_numpy())

    def flips(self) -> pd.DataFrame:
        """Per set: SoftDecay's sign-flipped directions (σ, σ/√N, σ/σ_max below |α|) summed over the two
        sentence matrices, their summed rank and the smallest and largest live singular value."""
        return _by_set(self.sign_flips, self.sets)

    def planted_curve(self, kind: str, sizes) -> pd.DataFrame:
        """Mean over the sets of each method's score (paper protocol) per planted size."""
        pl = self.planted
        df = pd.DataFrame({m: np.mean([pl[d][kind][m] for d in pl], 0) for m in PLANT_METHODS}, index=sizes)
        df.index.name = "planted size (× RMS norm)"
        return df

    def drop_one_set(self, method: str, dataset: str) -> float:
        """`method` − raw, mean over the sets other than `dataset` (what the rest of the sets say)."""
        keep = [i for i, d in enumerate(self.sets) if d != dataset]
        return float(np.mean((self.set_scores(method) - self.set_scores("vanilla"))[keep]))


@dataclass(frozen=True)
class Draw(Record):
    """One subsample draw of a reading: `pairs` per set, and per pooling and set each method's Spearman ×100
    (`scores`, paper protocol) and the directions SoftDecay and its flip-free variants turn round (`flips`)."""

    pairs: dict[str, int] = field(default_factory=dict)                       # [set]
    scores: dict[str, dict[str, Scores]] = field(default_factory=dict)        # [pooling][set]
    flips: dict[str, dict[str, dict[str, int]]] = field(default_factory=dict)  # [pooling][set][method | "directions"]
    other: Unread = field(default_factory=dict)
    layout: tuple[str, ...] = field(default=(), compare=False, repr=False)


@dataclass(frozen=True)
class Reading(Record):
    """An encoder read under each pooling from one encoding (`compute.readings`): on `per_set` pairs per set
    (0: every pair) over `draws` subsample draws. `intervals[pooling][method]`: method − raw, mean over the
    sets, paired bootstrap (draw 0); `refit[pooling][whitening]`: whitening − SoftDecay, bootstrap refitted on
    every resample; `anisotropies[pooling][set]`; `planted`, `lsds` (first model only). Every accessor reads
    `pooling` (the paper-comparison one) unless told another."""

    CONTEXT: ClassVar[tuple[str, ...]] = ("encoder", "pooling", "per_set", "sets", "bootstrap")

    encoder: str
    pooling: str
    per_set: int
    sets: tuple[str, ...]
    bootstrap: int
    draws: tuple[Draw, ...] = ()
    intervals: dict[str, Bands] = field(default_factory=dict)                  # [pooling]
    refit: dict[str, Bands] = field(default_factory=dict)                      # [pooling]
    anisotropies: dict[str, dict[str, Anisotropy]] = field(default_factory=dict)  # [pooling][set]
    planted: dict[str, dict[str, list[list[float]]]] = field(default_factory=dict)  # [kind][method][size][direction]
    lsds: dict[str, dict[str, float]] = field(default_factory=dict)           # [set]["SoftDecay (normalised)"]
    cpu_s: float = 0.0
    other: Unread = field(default_factory=dict)
    layout: tuple[str, ...] = field(default=(), compare=False, repr=False)

    @property
    def n_draws(self) -> int:
        return len(self.draws)

    @property
    def n_pairs(self) -> int:
        """Pairs scored over the sets (draw 0)."""
        return int(sum(self.draws[0].pairs.values()))

    def scores(self, pooling: str | None = None, draw: int = 0) -> pd.DataFrame:
        """Spearman ×100 (paper protocol) of each `READING_METHODS` row (columns) on each set (rows)."""
        return _by_set(self.draws[draw].scores[pooling or self.pooling], self.sets)

    def avg(self, method: str, pooling: str | None = None, draw: int = 0) -> float:
        """`method`'s Table 1 Avg (mean over the sets)."""
        return float(self.scores(pooling, draw)[method].mean())

    def raw_avg(self) -> float:
        """The raw encoder's Table 1 Avg, mean over the draws."""
        return float(np.mean([self.avg("vanilla", None, d) for d in range(self.n_draws)]))

    def vs_raw(self, method: str = SD, pooling: str | None = None) -> Interval:
        """`method` − raw, mean over the sets, with its 95 % paired bootstrap interval (transforms fitted
        once on the full set; draw 0)."""
        d, lo, hi = self.intervals[pooling or self.pooling][method]
        return Interval(d, lo, hi, reading_bootstrap(self.bootstrap), "bootstrap")

    def diffs(self, method: str, pooling: str | None = None) -> pd.Series:
        """`method` − raw on each set (draw 0): what drives the mean."""
        df = self.scores(pooling)
        return df[method] - df["vanilla"]

    def rest(self, method: str, dataset: str, pooling: str | None = None) -> float:
        """`method` − raw, mean over the sets other than `dataset`."""
        return float(self.diffs(method, pooling).drop(dataset).mean())

    def over_draws(self, method: str, against: str = "vanilla", pooling: str | None = None) -> Interval:
        """`method` − `against` (mean over the sets) on each subsample draw, as the mean over the draws
        with its Student-t interval: does it hold from one draw of pairs to the next?"""
        return t_interval([self.avg(method, pooling, d) - self.avg(against, pooling, d)
                           for d in range(self.n_draws)])

    def refit_iv(self, whitening: str = "whitening", pooling: str | None = None) -> Interval:
        """whitening − SoftDecay, paired bootstrap refitting both transforms on every resample (draw 0)."""
        d, lo, hi = self.refit[pooling or self.pooling][whitening]
        return Interval(d, lo, hi, refit_draws(self.bootstrap), "bootstrap")

    def refit_shift(self, whitening: str = "whitening", pooling: str | None = None) -> float:
        """How far the refitted draws of whitening − SoftDecay sit from the full-set estimate (the midpoint of
        their interval minus the estimate; `core.sts.recentre` removes it)."""
        d, lo, hi = self.refit[pooling or self.pooling][whitening]
        return (lo + hi) / 2 - d

    def flip_counts(self, pooling: str | None = None) -> pd.DataFrame:
        """Per set: the directions SoftDecay and its flip-free variants turn around (`core.sts.count_flips`,
        both sentence matrices), the largest count over the draws, and the live directions."""
        q = pooling or self.pooling
        df = pd.DataFrame({d: {m: max(dr.flips[q][d][m] for dr in self.draws) for m in (SD, *FLIP_FREE, "directions")}
                           for d in self.sets}).T
        df.index.name = "set"
        return df

    def anisotropy(self, measure: str = "EV1", pooling: str | None = None) -> float:
        """Mean over the sets of EV₁, EV₁ after whitening, EV₁ of the centred rows or the mean's share."""
        a = self.anisotropies[pooling or self.pooling]
        return float(np.mean([a[d][measure] for d in self.sets]))

    def planted_dirs(self, kind: str, method: str) -> np.ndarray:
        """(sizes, directions) mean-over-sets scores of the planted experiment."""
        return np.asarray(self.planted[kind][method], float)

    def lsds_table(self) -> pd.DataFrame:
        """LSDS of SoftDecay − LSDS of whitening per set under the three readings of eq. (6): negative means
        SoftDecay keeps neighbourhoods better."""
        ls = self.lsds
        df = pd.DataFrame({w: {d: ls[d][f"SoftDecay ({w})"] - ls[d][f"whitening ({w})"] for d in ls}
                           for w in ("normalised", "eq. 6", "authors")})
        df.index.name = "set"
        return df


@dataclass(frozen=True)
class SameFit(Record):
    """whitening − SoftDecay under procedures whose estimate and interval come from the same fits
    (`compute.samefit`): `halfsample[w]`, `crossfit[w]` ([estimate, low, high]), `fullfit[w]` (a point), with
    the `pairs` per set, the procedures' `settings` and the `pooling` read."""

    CONTEXT: ClassVar[tuple[str, ...]] = ("encoder",)

    encoder: str
    pairs: dict[str, int] = field(default_factory=dict)                       # [set]
    settings: Settings = field(default_factory=dict)
    pooling: str = ""
    halfsample: Bands = field(default_factory=dict)                            # [whitening]
    crossfit: Bands = field(default_factory=dict)                              # [whitening]
    fullfit: dict[str, float] = field(default_factory=dict)                   # [whitening]: a point
    cpu_s: float = 0.0
    other: Unread = field(default_factory=dict)
    layout: tuple[str, ...] = field(default=(), compare=False, repr=False)

    @property
    def n_pairs(self) -> int:
        return int(sum(self.pairs.values()))

    def iv(self, whitening: str = "whitening", how: str = "crossfit") -> Interval:
        """whitening − SoftDecay: "crossfit" (every pair scored by transforms fitted on the other half) or
        "halfsample" (transforms fitted on each half-sample without replacement)."""
        d, lo, hi = (self.crossfit if how == "crossfit" else self.halfsample)[whitening]
        st = self.settings
        n = st["splits"] * st["split_boot"] if how == "crossfit" else st["halves"]
        return Interval(d, lo, hi, n, "cross-fit" if how == "crossfit" else "subsample")

    def point(self, whitening: str = "whitening") -> float:
        """whitening − SoftDecay with both transforms fitted once on every pair (the paper's point estimate; no
        interval of its own)."""
        return float(self.fullfit[whitening])


class MapPanel(Uniformity):
    """One method's t-SNE map of one set (`compute.map_panels`): the map (`xy`, the first `n` rows the first
    sentences), the set's `pairs`, and the whole transformed set's Table 4 metrics and LSDS (normalised weights)."""

    xy: list[list[float]]
    n: int
    pairs: int
    LSDS: float


class Maps(TypedDict, total=False):
    """The t-SNE maps (`compute.maps`): per set and method its panel, and the CPU seconds they took (empty: none
    drawn)."""

    sets: dict[str, dict[str, MapPanel]]
    cpu_s: float


class Demo(TypedDict):
    """Cosine similarities of the demo sentences under the token-level SoftDecay encoder (`compute.encoder_demo`)."""

    labels: list[str]
    cosine: list[list[float]]
