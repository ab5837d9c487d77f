"""Seed statistics shared by the chapters: the Student-t interval of per-seed paired differences, and
the moving average the training chapters read loss histories with.

The training chapters (GLUE, ViT, Q/K) compare two variants run on the same seeds (same data order,
same initialisation seed), so each seed gives one paired difference and the interval is over seeds."""

from __future__ import annotations

import functools
import math
from dataclasses import asdict, dataclass, replace
from typing import Any, Literal

import numpy as np

Method = Literal["t", "bootstrap", "exact", "normal", "range", "fisher-z", "jackknife", "subsample", "cross-fit",
                 "binomial"]


@dataclass(frozen=True)
class Interval:
    """An estimate with its interval: `estimate` in [`low`, `high`] at `level`, from `n` units (seeds,
    bootstrap draws, layers) by `method` — "t" (Student-t over seeds), "bootstrap" (percentile),
    "normal" (± z·SE), "range" (min–max), "fisher-z" (a correlation's interval on Fisher's z scale over its `n`
    points), "jackknife" (leave-one-unit-out), "subsample" (half-samples without replacement), "cross-fit" (fit on
    one half, score the other), "binomial" (Clopper–Pearson, a share of `n` units), or "exact" (a computed value:
    low = high = estimate)."""

    estimate: float
    low: float
    high: float
    n: int = 1
    method: Method = "exact"
    level: float = 0.95

    def __post_init__(self) -> None:
        object.__setattr__(self, "estimate", float(self.estimate))
        object.__setattr__(self, "low", float(self.low))
        object.__setattr__(self, "high", float(self.high))
        if not (math.isnan(self.low) or math.isnan(self.high)) and self.low > self.high:
            raise ValueError(f"interval low {self.low} > high {self.high}")

    @classmethod
    def exact(cls, value: float) -> Interval:
        v = float(value)
        return cls(v, v, v, 1, "exact")

    @classmethod
    def from_draws(cls, draws, estimate: float | None = None, level: float = 0.95) -> Interval:
        """The percentile interval of bootstrap `draws` (the estimate: given, else their mean)."""
        d = np.asarray(draws, dtype=float).ravel()
        lo, hi = np.nanpercentile(d, [50 * (1 - level), 50 * (1 + level)])
        est = float(np.nanmean(d)) if estimate is None else float(estimate)
        return cls(est, float(lo), float(hi), int(np.isfinite(d).sum()), "bootstrap", level)

    @property
    def has_interval(self) -> bool:
        """True when low and high are finite (not a single seed's bare estimate)."""
        return math.isfinite(self.low) and math.isfinite(self.high)

    def shift(self, by: float) -> Interval:
        """The same interval measured from `by` (estimate − by, …)."""
        return replace(self, estimate=self.estimate - by, low=self.low - by, high=self.high - by)

    def clip(self, low: float, high: float) -> Interval:
        """The bounds clipped to the values the quantity can take (a count of heads: 0 to the heads of a layer;
        a |cos|: 0 to 1), so a t-interval over a few seeds does not reach past them; the estimate is kept."""
        return replace(self, low=max(self.low, low), high=min(self.high, high))

    def covers(self, x: float) -> bool:
        return self.has_interval and self.low <= x <= self.high

    def text(self, digits: int = 3, signed: bool = True) -> str:
        """'+0.055 [+0.041, +0.070]'; the bare estimate for an exact value or a single seed."""
        f = f"{{:{'+' if signed else ''}.{digits}f}}"
        if self.method == "exact" or not self.has_interval:
            return f.format(self.estimate)
        return f"{f.format(self.estimate)} [{f.format(self.low)}, {f.format(self.high)}]"

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def t_interval(values, level: float = 0.95) -> Interval:
    """Mean of `values` (per-seed paired differences) with its Student-t interval (n − 1 degrees of
    freedom); low and high NaN with a single value (a NaN value — a diverged seed — makes all NaN)."""
    from scipy import stats

    d = np.asarray(values, dtype=float).ravel()
    if d.size == 0:
        raise ValueError("t_interval needs at least one value")
    if not 0 < level < 1:
        raise ValueError(f"level must lie in (0, 1), got {level}")
    m = float(d.mean())
    if d.size < 2:
        return Interval(m, math.nan, math.nan, 1, "t", level)
    half = float(stats.t.ppf(0.5 + level / 2, d.size - 1) * d.std(ddof=1) / np.sqrt(d.size))
    return Interval(m, m - half, m + half, int(d.size), "t", level)


#: up to this many points `spearman_exact_p` enumerates every ordering (9! = 362,880); beyond, Monte Carlo
EXACT_MAX_POINTS = 9


@functools.lru_cache(maxsize=4)
def _orderings(n: int) -> np.ndarray:
    """Every ordering of n points, one per row (read-only: shared by every test on n points)."""
    from itertools import permutations

    perms = np.fromiter((i for p in permutations(range(n)) for i in p), dtype=np.int8 if n < 128 else np.int64,
                        count=math.factorial(n) * n).reshape(-1, n)
    perms.flags.writeable = False
    return perms


@functools.lru_cache(maxsize=4)
def _random_orderings(n: int, draws: int, seed: int) -> np.ndarray:
    """`draws` random orderings of n points from `seed` (read-only: the same for every test on n points)."""
    rng = np.random.default_rng(seed)
    idx = np.argsort(rng.random((draws, n)), axis=1)
    idx.flags.writeable = False
    return idx


def spearman_exact_p(x, y, max_exact: int = EXACT_MAX_POINTS, draws: int = 200_000, seed: int = 0) -> float:
    """Two-sided p-value of Spearman's ρ between `x` and `y` under the permutation null: exact over all n!
    orderings for n ≤ `max_exact` (as the paper's test, for a handful of layers), otherwise Monte Carlo over
    `draws` random permutations (add-one corrected). Ties are ranked by their mean rank."""
    from scipy import stats

    rx, ry = stats.rankdata(np.asarray(x, float)), stats.rankdata(np.asarray(y, float))
    n = rx.size
    if n < 3:
        raise ValueError("a rank correlation test needs at least 3 points")
    rx, ry = rx - rx.mean(), ry - ry.mean()
    denom = math.sqrt(float((rx * rx).sum() * (ry * ry).sum()))
    if denom == 0:
        return 1.0
    obs = abs(float((rx * ry).sum())) / denom
    eps = 1e-12
    if n <= max_exact:
        r = np.abs(ry[_orderings(n)] @ rx) / denom
        return float((r >= obs - eps).mean())
    r = np.abs(ry[_random_orderings(n, draws, seed)] @ rx) / denom
    return float(((r >= obs - eps).sum() + 1) / (draws + 1))


def rank_correlation_interval(x, y, level: float = 0.95) -> Interval:
    """Spearman's ρ between `x` and `y` with an interval whose unit is the points themselves (the layers of a
    model, not the inputs they were measured on): Fisher's z = atanh ρ with the standard error
    √((1 + ρ²/2)/(n − 3)) of Bonett & Wright (2000), mapped back, so it stays inside [−1, 1]. A perfect
    ρ = ±1 is read as ±(1 − 1/n²) on the z scale, so its interval keeps a width (n points cannot prove a perfect
    population correlation). Needs n ≥ 4."""
    from scipy import stats

    x, y = np.asarray(x, float), np.asarray(y, float)
    n = x.size
    if n < 4:
        raise ValueError("a Fisher-z interval of a rank correlation needs at least 4 points")
    rho = float(stats.spearmanr(x, y).statistic)
    r = float(np.clip(rho, -(1 - 1 / n**2), 1 - 1 / n**2))
    se = math.sqrt((1 + r * r / 2) / (n - 3))
    z = math.atanh(r)
    q = float(stats.norm.ppf(0.5 + level / 2))
    low, high = math.tanh(z - q * se), math.tanh(z + q * se)
    return Interval(rho, min(low, rho), max(high, rho), int(n), "fisher-z", level)


def jackknife_interval(values, statistic, level: float = 0.95) -> Interval:
    """`statistic(values)` with its leave-one-out jackknife interval over the units of `values` (the first axis:
    layers, models, seeds): pseudo-values n·θ − (n − 1)·θ₍₋ᵢ₎, their mean ± t·SE with n − 1 degrees of freedom.
    The estimate is the statistic on all units."""
    from scipy import stats

    v = np.asarray(values)
    n = len(v)
    if n < 3:
        raise ValueError("a jackknife needs at least 3 units")
    theta = float(statistic(v))
    loo = np.array([float(statistic(np.delete(v, i, axis=0))) for i in range(n)])
    pseudo = n * theta - (n - 1) * loo
    se = float(pseudo.std(ddof=1) / math.sqrt(n))
    half = float(stats.t.ppf(0.5 + level / 2, n - 1)) * se
    return Interval(theta, theta - half, theta + half, n, "jackknife", level)


def moving_average(x, window: int) -> np.ndarray:
    """The mean over each `window` consecutive entries of a loss history (length len(x) − window + 1;
    `x` itself, as floats, when `window` ≤ 1 or longer than the history). A NaN (a diverged step) stays
    NaN in every window that holds it."""
    x = np.asarray(x, dtype=float)
    if window <= 1 or len(x) < window:
        return x
    return np.convolve(x, np.ones(window) / window, mode="valid")


__all__ = ["Interval", "t_interval", "moving_average", "spearman_exact_p", "rank_correlation_interval",
           "jackknife_interval"]
