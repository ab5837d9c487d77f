"""Seed statistics shared by the chapters: the Student-t interval of per-seed paired differences (and Welch's of
two unpaired samples), the jackknife, Fisher-z and rank-correlation intervals (with the rank-correlation test
across a model's layers, `LayerTest`), and the moving average the training chapters read loss histories with.

The training chapters (GLUE, ViT, Q/K) compare two variants run on the same seeds (same data order,
same initialisation seed), so each seed gives one paired difference and the interval is over seeds."""

from __future__ import annotations

import functools
import math
from dataclasses import asdict, dataclass, replace
from typing import Any, Literal

import numpy as np

from .config import choice

Method = Literal["t", "bootstrap", "exact", "normal", "range", "fisher-z", "t-fisher-z", "jackknife", "subsample",
                 "cross-fit", "binomial", "extrapolated"]


@dataclass(frozen=True)
class Interval:
    """An estimate with its interval: `estimate` in [`low`, `high`] at `level`, from `n` units (seeds,
    bootstrap draws, layers) by `method` — "t" (Student-t over seeds), "bootstrap" (percentile),
    "normal" (± z·SE), "range" (min–max), "fisher-z" (a correlation's interval on Fisher's z scale over its `n`
    points), "jackknife" (leave-one-unit-out), "subsample" (half-samples without replacement), "cross-fit" (fit on
    one half, score the other), "binomial" (Clopper–Pearson, a share of `n` units), "t-fisher-z" (correlations
    averaged over `n` units on Fisher's z with a Student-t interval: `fisher_t_interval`), or "exact" (a computed
    value: low = high = estimate)."""

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

    #: methods whose interval is a confidence interval at `level` (a `range` is a spread, an `exact` value has none)
    SAMPLED = ("t", "bootstrap", "normal", "fisher-z", "t-fisher-z", "jackknife", "subsample", "cross-fit",
               "binomial")
    #: methods built on Fisher's z scale, and with Student-t quantiles on n − 1 degrees of freedom
    _ZSCALE, _STUDENT = ("fisher-z", "t-fisher-z"), ("t", "jackknife", "t-fisher-z")

    @property
    def sampled(self) -> bool:
        """True for a confidence interval at `level` (not an exact value, not a range, not a single seed's bare
        estimate)."""
        return self.method in self.SAMPLED and self.has_interval

    def tail(self, value: float) -> float:
        """The one-sided p-value of `value` read off this interval: the share of the estimate's sampling
        distribution that lies beyond `value`, on the side of `value` away from the estimate (0.5 at the estimate).
        An interval at level L excludes `value` exactly when `2 * tail(value) < 1 - L`. Each side's spread is read
        from its own half of the interval, on the scale the method builds it on: Student-t with n − 1 degrees of
        freedom (`t`, `jackknife`), Fisher's z (`fisher-z`), the binomial distribution itself (`binomial`:
        k = estimate·n successes of n), the normal otherwise (a percentile bootstrap, a cross-fit or subsample
        interval read as normal on each side)."""
        from scipy import stats

        if not self.sampled:
            raise ValueError(f"a {self.method!r} interval has no sampling distribution to read a p-value from")
        if self.method == "binomial":
            k, n = round(self.estimate * self.n), int(self.n)
            if value <= 0 or value >= 1:
                return 0.0 if (value <= 0 < k / n or k / n < 1 <= value) else 0.5
            return float(stats.binom.sf(k - 1, n, value) if k / n > value else stats.binom.cdf(k, n, value))
        est, low, high, v = self.estimate, self.low, self.high, float(value)
        if self.method in self._ZSCALE:
            c = 1 - 1e-9
            est, low, high, v = (math.atanh(max(-c, min(c, x))) for x in (est, low, high, v))
        if v == est:
            return 0.5
        bound = low if v < est else high
        q = self._quantile(self.level)
        spread = abs(est - bound) / q
        if spread == 0:
            return 0.0
        dist = stats.t(self.n - 1) if self.method in self._STUDENT and self.n > 1 else stats.norm
        return float(dist.sf(abs(est - v) / spread))

    def _quantile(self, level: float) -> float:
        from scipy import stats

        a = 0.5 + level / 2
        return float(stats.t.ppf(a, self.n - 1) if self.method in self._STUDENT and self.n > 1
                     else stats.norm.ppf(a))

    def at_level(self, level: float) -> Interval:
        """The same interval at another confidence `level` (a family's corrected level), on the scale its method
        builds it on (`tail`'s): each side's distance from the estimate scaled by the ratio of the quantiles, on
        Fisher's z for a correlation; a binomial share's Clopper–Pearson interval again. Not sampled (exact, range):
        unchanged."""
        if not self.sampled or level == self.level:
            return self
        if not 0 < level < 1:
            raise ValueError(f"level must lie in (0, 1), got {level}")
        if self.method == "binomial":
            from scipy import stats

            ci = stats.binomtest(round(self.estimate * self.n), int(self.n)).proportion_ci(level, method="exact")
            return replace(self, low=min(float(ci.low), self.estimate), high=max(float(ci.high), self.estimate),
                           level=level)
        r = self._quantile(level) / self._quantile(self.level)
        if self.method in self._ZSCALE:
            c = 1 - 1e-9
            z = [math.atanh(max(-c, min(c, x))) for x in (self.estimate, self.low, self.high)]
            low, high = math.tanh(z[0] - r * (z[0] - z[1])), math.tanh(z[0] + r * (z[2] - z[0]))
        else:
            low = self.estimate - r * (self.estimate - self.low)
            high = self.estimate + r * (self.high - self.estimate)
        return replace(self, low=low, high=high, level=level)

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


#: no values to take an interval over: estimate, low and high NaN, n 0 (`t_or_nan`)
NAN_INTERVAL = Interval(float("nan"), float("nan"), float("nan"), 0, "t")


def t_or_nan(values) -> Interval:
    """`t_interval` of `values`, or `NAN_INTERVAL` (all NaN, n 0) when there are none (a run that measured none)."""
    return t_interval(values) if len(values) else NAN_INTERVAL


def normal_interval(estimate: float, se: float, n: int) -> Interval:
    """`estimate` ± 1.96 standard errors `se` (a normal 95 % interval), from `n` units (sampled pairs, say)."""
    return Interval(estimate, estimate - 1.96 * se, estimate + 1.96 * se, n, "normal")


def welch_interval(a, b, level: float = 0.95) -> Interval:
    """mean(a) − mean(b) of two independent samples with Welch's Student-t interval (Welch–Satterthwaite
    degrees of freedom); NaN bounds when either sample has fewer than two values, all NaN when one is empty."""
    from scipy import stats

    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if not a.size or not b.size:
        return Interval(float("nan"), float("nan"), float("nan"), 0, "t", level)
    diff = float(a.mean() - b.mean())
    if a.size < 2 or b.size < 2:
        return Interval(diff, float("nan"), float("nan"), int(a.size + b.size), "t", level)
    va, vb = a.var(ddof=1) / a.size, b.var(ddof=1) / b.size
    if va + vb == 0:
        return Interval(diff, diff, diff, int(a.size + b.size), "t", level)
    df = (va + vb) ** 2 / (va ** 2 / (a.size - 1) + vb ** 2 / (b.size - 1))
    half = float(stats.t.ppf(0.5 + level / 2, df) * np.sqrt(va + vb))
    return Interval(diff, diff - half, diff + half, int(a.size + b.size), "t", level)


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
    return rank_interval(float(stats.spearmanr(x, y).statistic), n, level)


def rank_interval(rho: float, n: int, level: float = 0.95) -> Interval:
    """A Spearman ρ over `n` points with its Fisher-z interval and Bonett and Wright's standard error
    √((1 + ρ²/2)/(n − 3)), ρ = ±1 read as ±(1 − 1/n²) (`fisher_interval`)."""
    r = float(np.clip(rho, -(1 - 1 / n**2), 1 - 1 / n**2))
    return fisher_interval(rho, n, level, se=math.sqrt((1 + r * r / 2) / (n - 3)))


def jackknife_interval(values, statistic, level: float = 0.95, correlation: bool = False) -> Interval:
    """`statistic(values)` with its leave-one-out jackknife interval over the units of `values` (the first axis:
    layers, models, seeds): pseudo-values n·θ − (n − 1)·θ₍₋ᵢ₎, their mean ± t·SE with n − 1 degrees of freedom.
    The estimate is the statistic on all units. `correlation`: the statistic is a correlation, jackknifed on
    Fisher's z = atanh θ (±1 read as ±(1 − 1/n²)) and mapped back, so its interval stays inside [−1, 1]."""
    from scipy import stats

    v = np.asarray(values)
    n = len(v)
    if n < 3:
        raise ValueError("a jackknife needs at least 3 units")
    theta = float(statistic(v))
    loo = np.array([float(statistic(np.delete(v, i, axis=0))) for i in range(n)])
    c = 1 - 1 / n**2
    z = (lambda x: np.arctanh(np.clip(x, -c, c))) if correlation else (lambda x: x)
    zt, zl = float(z(theta)), z(loo)
    pseudo = n * zt - (n - 1) * zl
    se = float(pseudo.std(ddof=1) / math.sqrt(n))
    half = float(stats.t.ppf(0.5 + level / 2, n - 1)) * se
    lo, hi = zt - half, zt + half
    if correlation and half > 0:
        lo, hi = math.tanh(lo), math.tanh(hi)
        return Interval(theta, min(lo, theta), max(hi, theta), n, "jackknife", level)
    if correlation:                                  # no leave-one-out value moved: no width
        return Interval(theta, theta, theta, n, "jackknife", level)
    return Interval(theta, lo, hi, n, "jackknife", level)


def jackknife_from_loo(theta: float, loo, level: float = 0.95) -> Interval:
    """`theta` (a statistic on all K units) with its jackknife interval from its K leave-one-out values `loo`
    (computed elsewhere, e.g. from per-input sums): pseudo-values K·θ − (K − 1)·θ₍₋ᵢ₎, θ ± t·SE with K − 1 degrees
    of freedom (`jackknife_interval`'s rule, for a statistic whose leave-one-out values are already at hand)."""
    from scipy import stats

    loo = np.asarray(loo, float)
    k = loo.size
    pseudo = k * theta - (k - 1) * loo
    half = float(stats.t.ppf(0.5 + level / 2, k - 1)) * float(pseudo.std(ddof=1) / np.sqrt(k))
    return Interval(theta, theta - half, theta + half, k, "jackknife", level)


def fisher_interval(r: float, n: int, level: float = 0.95, se: float | None = None) -> Interval:
    """A correlation `r` computed on `n` points with its interval on Fisher's z: atanh r ± z·SE, SE = 1/√(n − 3)
    unless given (Bonett & Wright's √((1 + r²/2)/(n − 3)) for a rank correlation), mapped back. A perfect ±1 is
    read as ±(1 − 1/n²) on the z scale, so its interval keeps a width; the interval always holds `r`."""
    from scipy import stats

    if n < 4:
        raise ValueError("a Fisher-z interval needs at least 4 points")
    c = float(np.clip(r, -(1 - 1 / n**2), 1 - 1 / n**2))
    se = 1 / math.sqrt(n - 3) if se is None else se
    q = float(stats.norm.ppf(0.5 + level / 2))
    z = math.atanh(c)
    return Interval(r, min(math.tanh(z - q * se), r), max(math.tanh(z + q * se), r), int(n), "fisher-z", level)


def fisher_t_interval(values, n_points: int | None = None, level: float = 0.95) -> Interval:
    """Correlations over units (one per model, say) averaged on Fisher's z with the Student-t interval over the
    units (n − 1 degrees of freedom), mapped back: the estimate tanh(mean z) and an interval inside [−1, 1]. A
    correlation of ±1 is read as ±(1 − 1/m²), m = `n_points` (the points each was computed on; 10⁶ if not
    given). A single unit gives no interval."""
    v = np.asarray(values, dtype=float).ravel()
    m = n_points or 1000
    c = 1 - 1 / m**2
    z = np.arctanh(np.clip(v, -c, c))
    t = t_interval(z, level)
    if not t.has_interval:
        return Interval(float(np.tanh(t.estimate)), math.nan, math.nan, t.n, "t-fisher-z", level)
    return Interval(float(np.tanh(t.estimate)), float(np.tanh(t.low)), float(np.tanh(t.high)), t.n, "t-fisher-z",
                    level)


@dataclass(frozen=True)
class LayerTest:
    """A rank-correlation test across a model's layers (`layer_test`; Godey et al.'s §3.3 test, Fig. 5, with the
    drift ‖x̄‖₂ and the average cosine as the two sequences): Spearman's `rho` with its exact permutation `p_exact`,
    its Fisher-z interval (`fisher`) and its jackknife over the layers; Pearson's `pearson_r`, `pearson_p` and
    Fisher-z interval (`pearson`, the paper's Fig. 16); `input_bootstrap`: ρ's bootstrap over inputs, where a
    bootstrap gives one (`with_bootstrap`)."""

    layers: int
    rho: float
    p_exact: float
    fisher: Interval
    jackknife: Interval
    pearson_r: float
    pearson_p: float
    pearson: Interval
    input_bootstrap: Interval | None = None

    def follows(self, reading: Literal["spearman", "pearson"] = "spearman", alpha: float = 0.05) -> bool:
        """Says the second sequence follows the first: positive and p < `alpha` (Spearman with its exact
        permutation p; `reading="pearson"`: Pearson's r and its p, the paper's Fig. 16)."""
        if choice("reading", reading, ("spearman", "pearson")) == "pearson":
            return self.pearson_p < alpha and self.pearson_r > 0
        return self.p_exact < alpha and self.rho > 0

    def with_bootstrap(self, draws, rho: float) -> LayerTest:
        """The same test with ρ's percentile bootstrap over inputs (`draws`, estimate `rho`) as `input_bootstrap`."""
        return replace(self, input_bootstrap=Interval.from_draws(draws, estimate=rho))


def layer_test(x, y) -> LayerTest:
    """`drift_layer_test` of any two sequences over layers."""
    return drift_layer_test(tuple(float(v) for v in x), tuple(float(v) for v in y))


@functools.lru_cache(maxsize=512)
def drift_layer_test(mean_norm: tuple[float, ...], cos: tuple[float, ...]) -> LayerTest:
    """Godey et al.'s §3.3 test (Fig. 5) and its Pearson reading (App. A, Fig. 16) with the layers as the unit,
    as the paper's test has them: Spearman's ρ across layers between ‖x̄‖₂ and the average cosine, its exact
    permutation p (over all n! orderings up to 9 layers, Monte Carlo beyond: `spearman_exact_p`), its Fisher-z
    interval over the layers (`rank_correlation_interval`) and its jackknife over the layers (degenerate for a
    perfect rank order); Pearson's r with its p and Fisher-z interval."""
    from scipy import stats as sps

    x, y = np.asarray(mean_norm, float), np.asarray(cos, float)
    n = x.size
    rho = lambda v: float(sps.spearmanr(v[:, 0], v[:, 1]).statistic)  # noqa: E731
    pr = sps.pearsonr(x, y)
    est = float(pr.statistic)
    return LayerTest(layers=int(n), rho=float(sps.spearmanr(x, y).statistic), p_exact=spearman_exact_p(x, y),
                     fisher=rank_correlation_interval(x, y),
                     jackknife=jackknife_interval(np.column_stack([x, y]), rho, correlation=True),
                     pearson_r=est, pearson_p=float(pr.pvalue), pearson=fisher_interval(est, n))


def moving_average(x, window: int) -> np.ndarray:
    """The mean over each `window` consecutive entries of a loss history (length len(x) − window + 1;
    `x` itself, as floats, when `window` ≤ 1 or longer than the history). A NaN (a diverged step) stays
    NaN in every window that holds it."""
    x = np.asarray(x, dtype=float)
    if window <= 1 or len(x) < window:
        return x
    return np.convolve(x, np.ones(window) / window, mode="valid")


__all__ = ["Interval", "t_interval", "moving_average", "spearman_exact_p", "rank_correlation_interval",
           "jackknife_interval", "fisher_interval", "fisher_t_interval", "rank_interval", "Trend", "fit_trend",
           "against_trend", "NAN_INTERVAL", "t_or_nan", "normal_interval", "welch_interval", "jackknife_from_loo",
           "LayerTest", "layer_test", "drift_layer_test",
           "ON_TREND", "ABOVE_TREND", "BELOW_TREND", "TREND_INCONCLUSIVE"]


@dataclass(frozen=True)
class Trend:
    """A straight line fitted to a handful of (x, y) points — the papers' own models, each with its starting point
    x (a raw score) and its effect y — with what it predicts at a new x₀: `predict(x0)` gives the fitted value with
    its prediction interval for a new model (Student-t, n − 2 degrees of freedom: the line's uncertainty and the
    models' scatter about it), and `leave_one_out(x0)` the range of the predictions when each model in turn is left
    out. Fitted by `fit_trend`."""

    x: tuple[float, ...]
    y: tuple[float, ...]
    slope: float
    intercept: float
    resid_sd: float

    @property
    def n(self) -> int:
        return len(self.x)

    def value(self, x0: float) -> float:
        return self.intercept + self.slope * float(x0)

    def predict(self, x0: float, level: float = 0.95) -> Interval:
        """The line at `x0` with the prediction interval of a new point there: ŷ ± t·s·√(1 + 1/n + (x₀ − x̄)²/Sxx).
        An `x0` outside the fitted models' range is an extrapolation, and the interval widens with its distance."""
        from scipy import stats

        x = np.asarray(self.x, float)
        sxx = float(((x - x.mean()) ** 2).sum())
        se = self.resid_sd * math.sqrt(1 + 1 / self.n + (float(x0) - x.mean()) ** 2 / sxx)
        half = float(stats.t.ppf(0.5 + level / 2, self.n - 2)) * se
        v = self.value(x0)
        return Interval(v, v - half, v + half, self.n, "t", level)

    def leave_one_out(self, x0: float) -> tuple[float, float]:
        """The smallest and largest prediction at `x0` of the lines fitted with one model left out (needs n ≥ 3)."""
        if self.n < 3:
            raise ValueError("leaving one model out needs at least 3 models")
        preds = []
        for i in range(self.n):
            keep = [j for j in range(self.n) if j != i]
            t = fit_trend([self.x[j] for j in keep], [self.y[j] for j in keep], allow_exact=True)
            preds.append(t.value(x0))
        return float(min(preds)), float(max(preds))

    def within_range(self, x0: float) -> bool:
        """True when `x0` lies between the fitted models' smallest and largest x (an interpolation)."""
        return min(self.x) <= float(x0) <= max(self.x)


def fit_trend(x, y, allow_exact: bool = False) -> Trend:
    """The least-squares line of `y` on `x` (`Trend`). Needs at least 3 points for a prediction interval (2
    degrees of freedom are the fewest a Student-t interval can have with one); `allow_exact` lets 2 points fit a
    line exactly (for `Trend.leave_one_out`)."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    if x.shape != y.shape or x.size < (2 if allow_exact else 3):
        raise ValueError(f"a trend needs at least {2 if allow_exact else 3} (x, y) points of equal number")
    if np.ptp(x) == 0:
        raise ValueError("a trend needs at least two different x")
    slope, intercept = np.polyfit(x, y, 1)
    resid = y - (intercept + slope * x)
    sd = float(np.sqrt((resid**2).sum() / (x.size - 2))) if x.size > 2 else 0.0
    return Trend(tuple(float(v) for v in x), tuple(float(v) for v in y), float(slope), float(intercept), sd)


#: how a stand-in's effect sits against a paper's trend at its own starting point (`against_trend`)
ON_TREND, ABOVE_TREND, BELOW_TREND, TREND_INCONCLUSIVE = ("on the paper's trend", "off the trend (above)",
                                                          "off the trend (below)", "inconclusive")


def against_trend(effect: Interval, trend: Trend, x0: float, level: float = 0.95) -> str:
    """Where a stand-in's `effect` (with its interval) lies against the paper's trend at the stand-in's starting
    point `x0`: "on the paper's trend" when its interval lies inside the trend's prediction interval there; "off the
    trend (above / below)" when it lies wholly beyond it; "inconclusive" when they overlap only in part, or when
    the trend's band covers zero (it cannot tell the effect's sign at that point)."""
    band = trend.predict(x0, level)
    if band.low <= 0 <= band.high:
        return TREND_INCONCLUSIVE
    if band.low <= effect.low and effect.high <= band.high:
        return ON_TREND
    if effect.low > band.high:
        return ABOVE_TREND
    if effect.high < band.low:
        return BELOW_TREND
    return TREND_INCONCLUSIVE
