"""How far a test's setting is from the paper's, and what a measured trend along that distance says at the paper's
setting.

A test run below the paper's setting (fewer steps, a narrower model, a stand-in with a lower raw score) keeps its
verdict *at its own setting*. It speaks for the paper's setting only through a measured trend: the effect measured
at several points of the axis on which the test falls short (training steps, training tokens, a raw score), a form
fitted to those points, and the form's value at the paper's point with a band that carries the fit's uncertainty,
the scatter of the runs and the choice of form.

* `Distance` — one axis of the distance as numbers: ours, the paper's (parameters, layers, width, steps, tokens, a
  baseline score).
* `ModelSize`, `model_distance` — a model's layers, width and parameters, and a stand-in's distance from the paper's
  model on each (the sizes themselves are written once, in `hf.models.SIZE`).
* `FORMS` — the curves a trend is fitted with, each a linear model in a transformed axis: "linear" (y = a + b·x),
  "log" (y = a + b·ln x: an effect that keeps moving by the same amount per doubling of the budget) and
  "inverse square root" (y = a + b/√x: an effect that settles to a limit a as the budget grows).
* `extrapolate` — a trend's value at the paper's point with its band (`Extrapolation`).
* `BudgetCurve` — runs under a constant learning rate read as budgets: the state after b steps of such a run is where
  a run of b steps ends, so one run per arm and seed gives a gap between arms at several budgets, and its trend.

**The band.** For each form: the 95 % prediction interval, at the paper's point, of the least-squares fit to the
mean over units (seeds) at each point of the axis (Student-t, n − p degrees of freedom: the fit's uncertainty and
the points' scatter about it), widened, where the units give one, to the Student-t interval over units of each
unit's own extrapolation (the spread of the runs). The band is the union of the forms' intervals (the choice of
form is part of the uncertainty); its estimate is the first form's. A trend needs `MIN_POINTS` distinct points on
its axis; with fewer there is no band, and no verdict at the paper's setting.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from .stats import Interval, t_interval

#: the fewest distinct points on an axis a trend is read from: no verdict at the paper's setting from fewer
MIN_POINTS = 4


def _log(x: np.ndarray) -> np.ndarray:
    if (x <= 0).any():
        raise ValueError("the log form needs positive x")
    return np.log(x)


def _inv_sqrt(x: np.ndarray) -> np.ndarray:
    if (x <= 0).any():
        raise ValueError("the inverse-square-root form needs positive x")
    return x ** -0.5


#: the forms a trend can take: name -> (the transform t of the axis, so that y = a + b·t(x); what it assumes)
FORMS: dict[str, tuple[Callable[[np.ndarray], np.ndarray], str]] = {
    "linear": (lambda x: x, "the effect moves by the same amount per unit of the axis"),
    "log": (_log, "the effect moves by the same amount per doubling of the axis"),
    "inverse square root": (_inv_sqrt, "the effect settles to a limit as the axis grows, as 1/√x"),
}


def num(v: float) -> str:
    """A point of an axis as the text says it: '1,000', '50,000', '62.97', '2.62e+11' (ten million and beyond)."""
    v = float(v)
    if abs(v) >= 1e7:
        return f"{v:.3g}"
    return f"{v:,.0f}" if v.is_integer() and abs(v) >= 10 else f"{v:,.4g}"


@dataclass(frozen=True)
class Distance:
    """One axis of the distance between a test's setting and the paper's: `what` ("training steps", "width",
    "raw STS"), `ours` and `paper` (None where the paper does not state it), in `unit`."""

    what: str
    ours: float
    paper: float | None
    unit: str = ""

    @property
    def fraction(self) -> float | None:
        """ours / paper (None where the paper's value is unknown or zero)."""
        return None if not self.paper else float(self.ours) / float(self.paper)

    def text(self) -> str:
        """'1,000 of 60,000 training steps (1.7 %)'; 'raw STS 44.04 against 62.97'."""
        if self.paper is None:
            return f"{self.what} {num(self.ours)} (the paper's not stated)"
        if self.what.startswith("raw") or self.unit == "score":
            return f"{self.what} {num(self.ours)} against {num(self.paper)}"
        frac = self.fraction
        pct = f" ({100 * frac:.2g} %)" if frac is not None and frac < 0.995 else ""
        return f"{num(self.ours)} of {num(self.paper)} {self.what}{pct}"


@dataclass(frozen=True)
class ModelSize:
    """A model's size: `layers` (Transformer blocks; an encoder-decoder's encoder and decoder together), `width`
    (hidden size) and `parameters` (None where not counted)."""

    layers: int
    width: int
    parameters: float | None = None


def model_distance(ours: ModelSize | None, paper: ModelSize | None) -> tuple[Distance, ...]:
    """A stand-in's distance from the paper's model: parameters, layers and width, ours against the paper's (an axis
    whose own value is unknown is left out; the paper's unknown is None). Empty when our model's size is unknown."""
    if ours is None:
        return ()
    axes = (("parameters", ""), ("layers", "blocks"), ("width", "dimensions"))
    return tuple(Distance(what, getattr(ours, what), getattr(paper, what) if paper is not None else None, unit)
                 for what, unit in axes if getattr(ours, what) is not None)


@dataclass(frozen=True)
class FormFit:
    """One form fitted to a trend: its name, the interval at the target (`at_target`), the coefficients (a, b) of
    y = a + b·t(x), and the residual standard deviation of the fit to the unit means."""

    form: str
    at_target: Interval
    coefficients: tuple[float, float]
    resid_sd: float

    def value(self, x: Sequence[float] | float) -> np.ndarray:
        """The fitted curve a + b·t(x) at `x` (the form's line through the points and on to the target)."""
        a, b = self.coefficients
        return a + b * FORMS[self.form][0](np.asarray(x, float))


@dataclass(frozen=True)
class Extrapolation:
    """A measured trend along one axis and its value at the paper's point.

    `axis`: what x is ("training steps"); `x`, `y`: the points (x; y the mean over units at x); `units`: how many
    units (seeds) stand behind each mean; `target`: the paper's point on the axis; `fits`: one `FormFit` per form,
    the first the primary; `band`: the union of the forms' intervals at the target, the primary form's value as its
    estimate (method "extrapolated"); `level`: the band's level; `per_unit` or `groups`: the units' own values at
    every x, or each point's unit where the units do not share x."""

    axis: str
    x: tuple[float, ...]
    y: tuple[float, ...]
    units: int
    target: float
    fits: tuple[FormFit, ...]
    band: Interval
    level: float = 0.95
    why: str = ""
    per_unit: tuple[tuple[float, ...], ...] = field(default=(), repr=False)
    groups: tuple[str, ...] = field(default=(), repr=False)

    @property
    def points(self) -> int:
        return len(set(self.x))

    @property
    def span(self) -> float:
        """The largest x over the smallest (how many times the axis the points cover)."""
        return float(max(self.x) / min(self.x)) if min(self.x) > 0 else math.inf

    @property
    def forms(self) -> tuple[str, ...]:
        return tuple(f.form for f in self.fits)

    def at(self, x0: float) -> Interval:
        """The band at another point `x0` of the axis (the same forms and units)."""
        return extrapolate(self.x, self.y, x0, self.forms, per_unit=self.per_unit or None, axis=self.axis,
                           level=self.level, groups=self.groups or None).band

    def at_level(self, level: float) -> Extrapolation:
        """The same trend with its band read at `level` (a family's corrected level)."""
        return extrapolate(self.x, self.y, self.target, self.forms, per_unit=self.per_unit or None, axis=self.axis,
                           level=level, why=self.why, groups=self.groups or None)

    def text(self, digits: int = 3) -> str:
        """'+0.12 [−0.40, +0.64] at 60,000 training steps, from 4 points over 250–1,000 (4×), forms log and inverse
        square root'."""
        f = f"{{:+.{digits}f}}"
        b = self.band
        return (f"{f.format(b.estimate)} [{f.format(b.low)}, {f.format(b.high)}] at {num(self.target)} {self.axis}, "
                f"from {self.points} points over {num(min(self.x))}–{num(max(self.x))} ({self.span:.3g}×), "
                f"form{'s' if len(self.fits) > 1 else ''} {' and '.join(self.forms)}")


def _fit(t: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, float, int]:
    X = np.column_stack([np.ones_like(t), t])
    beta, *_ = np.linalg.lstsq(X, y, rcond=None)
    dof = len(y) - X.shape[1]
    resid = y - X @ beta
    s = float(np.sqrt((resid ** 2).sum() / dof)) if dof > 0 else 0.0
    return beta, np.linalg.pinv(X.T @ X), s, dof


def _prediction(t: np.ndarray, y: np.ndarray, t0: float, level: float) -> tuple[Interval, tuple[float, float], float]:
    from scipy import stats

    beta, xtx_inv, s, dof = _fit(t, y)
    v = np.array([1.0, t0])
    est = float(v @ beta)
    if dof < 1:
        return Interval(est, math.nan, math.nan, len(y), "extrapolated", level), (float(beta[0]), float(beta[1])), s
    half = float(stats.t.ppf(0.5 + level / 2, dof)) * s * math.sqrt(1 + float(v @ xtx_inv @ v))
    return (Interval(est, est - half, est + half, len(y), "extrapolated", level), (float(beta[0]), float(beta[1])),
            s)


def extrapolate(x: Sequence[float], y: Sequence[float], target: float, forms: Sequence[str] = ("log",),
                per_unit: Sequence[Sequence[float]] | None = None, axis: str = "", level: float = 0.95,
                why: str = "", groups: Sequence[object] | None = None) -> Extrapolation:
    """The trend of `y` along `x` read at `target` (see the module's docstring for the band).

    `x`: the points of the axis (positive for the log and inverse-square-root forms); `y`: the effect at each, the
    mean over units; `per_unit`: optionally each unit's effect at every x (units × points), whose own
    extrapolations widen the band to their Student-t interval; `groups`: instead of `per_unit`, where each unit has
    its own x (a model's checkpoints, each at its own raw score), the unit of every point — the fit then takes
    every point, and each unit's own fit widens the band; `forms`: names of `FORMS`, the first the primary;
    `why`: why these forms. Raises ValueError with fewer than `MIN_POINTS` distinct x, an unknown form, or
    mismatched lengths."""
    xa, ya = np.asarray(x, float), np.asarray(y, float)
    if xa.shape != ya.shape or xa.ndim != 1:
        raise ValueError("x and y are one point each, of equal number")
    if groups is not None:
        if per_unit is not None or len(groups) != xa.size:
            raise ValueError("groups name the unit of every point, in place of per_unit")
        labels = list(dict.fromkeys(groups))
        per_unit_fits = [(xa[[g == u for g in groups]], ya[[g == u for g in groups]]) for u in labels]
    else:
        per_unit_fits = None
    if len(set(xa.tolist())) < MIN_POINTS:
        raise ValueError(f"a trend needs at least {MIN_POINTS} distinct points on its axis (got "
                         f"{len(set(xa.tolist()))}); no verdict at the paper's setting from fewer")
    if not forms or any(f not in FORMS for f in forms):
        raise ValueError(f"forms {list(forms)}: use names of {sorted(FORMS)}")
    units = np.asarray(per_unit, float) if per_unit is not None else None
    if units is not None and (units.ndim != 2 or units.shape[1] != xa.size):
        raise ValueError("per_unit holds one row per unit with a value at every x")
    fits, lows, highs = [], [], []
    for name in forms:
        tf = FORMS[name][0]
        t, t0 = tf(xa), float(tf(np.array([float(target)]))[0])
        pred, coef, s = _prediction(t, ya, t0, level)
        low, high = pred.low, pred.high
        own: list[float] = []
        if units is not None and units.shape[0] >= 2:
            own = [_prediction(t, row, t0, level)[0].estimate for row in units if np.isfinite(row).all()]
        elif per_unit_fits is not None:
            own = [_prediction(tf(gx), gy, t0, level)[0].estimate for gx, gy in per_unit_fits
                   if len(set(gx.tolist())) >= 2]
        if len(own) >= 2:
            tv = t_interval(own, level)
            low, high = min(low, tv.low), max(high, tv.high)
        iv = Interval(pred.estimate, low, high, xa.size, "extrapolated", level)
        fits.append(FormFit(name, iv, coef, s))
        lows.append(low)
        highs.append(high)
    band = Interval(fits[0].at_target.estimate, min(lows), max(highs), xa.size, "extrapolated", level)
    n_units = int(units.shape[0]) if units is not None else len(per_unit_fits) if per_unit_fits is not None else 1
    return Extrapolation(axis, tuple(float(v) for v in xa), tuple(float(v) for v in ya), n_units, float(target),
                         tuple(fits), band, level, why,
                         tuple(tuple(float(v) for v in r) for r in units) if units is not None else (),
                         tuple(str(g) for g in groups) if groups is not None else ())


#: the forms a budget curve is carried to the paper's steps with, the first the primary, and why these
BUDGET_FORMS = ("log", "inverse square root")
BUDGET_WHY = ("a loss gap between two trainings either keeps moving by about the same amount per doubling of the "
              "steps (log) or settles to a limit as they grow (inverse square root): the two bracket how it may go on "
              "over the paper's longer run.")


@dataclass(frozen=True)
class BudgetCurve:
    """Constant-rate runs read at several budgets (one run per arm and seed; its first b steps are a b-step run).

    `losses`: per arm, each seed's training loss at every step (None for a run not held; NaN for a step whose loss
    is not finite); `budgets`: the budgets (steps) it is read at, ascending; `window`: a budget's final loss is the
    mean loss over this share of its own last steps (at least one), the reading of a run's final loss at every
    budget alike; `baseline`: what a gap against no arm (b None) is taken against (a loss no model must beat, as
    the unigram loss); `diverged`: per arm, the seeds whose runs diverged (their losses are not read)."""

    losses: dict[str, list[Sequence[float] | None]]
    budgets: tuple[int, ...]
    window: float
    baseline: float = math.nan
    diverged: dict[str, tuple[bool, ...]] = field(default_factory=dict)

    def final(self, budget: int) -> dict[str, np.ndarray]:
        """Per arm, each seed's mean loss over the last `window` of its first `budget` steps (NaN for a run not
        held, diverged or shorter than `budget`)."""
        k = max(1, int(self.window * budget))
        out = {}
        for arm, runs in self.losses.items():
            gone = self.diverged.get(arm, ())
            vals = []
            for i, loss in enumerate(runs):
                a = np.asarray([np.nan if v is None else v for v in loss], float) if loss is not None else np.array([])
                ok = loss is not None and a.size >= budget and not (i < len(gone) and gone[i])
                vals.append(float(a[budget - k:budget].mean()) if ok else np.nan)
            out[arm] = np.array(vals)
        return out

    def gaps(self, a: str, b: str | None = None) -> np.ndarray:
        """seeds × budgets: the same-seed gap a − b at each budget (b None: a − `baseline`); NaN where a run is not
        held."""
        cols = []
        for budget in self.budgets:
            f = self.final(budget)
            cols.append(f[a] - (self.baseline if b is None else f[b]))
        return np.column_stack(cols) if cols else np.empty((0, 0))

    def complete(self, a: str, b: str | None = None) -> list[int]:
        """The budgets at which every seed's gap a − b is held."""
        if a not in self.losses or (b is not None and b not in self.losses):
            return []
        return [x for x, col in zip(self.budgets, self.gaps(a, b).T, strict=True) if np.isfinite(col).all()]

    def at(self, a: str, b: str | None = None, budget: int | None = None) -> Interval | None:
        """The gap a − b at `budget` (default: the largest) with its t-interval over seeds, where every seed holds
        it (else None)."""
        budget = self.budgets[-1] if budget is None and self.budgets else budget
        if budget not in self.complete(a, b):
            return None
        return t_interval(self.gaps(a, b)[:, list(self.budgets).index(budget)])

    def trend(self, a: str, b: str | None, target: float, forms: Sequence[str] = BUDGET_FORMS,
              why: str = BUDGET_WHY) -> Extrapolation | None:
        """The gap a − b along the budgets, carried to `target` steps (`extrapolate`, forms `BUDGET_FORMS` unless
        given, each seed's own curve widening the band); None with fewer than `MIN_POINTS` budgets at which every
        seed is held."""
        x = self.complete(a, b)
        if len(x) < MIN_POINTS:
            return None
        g = self.gaps(a, b)[:, [list(self.budgets).index(v) for v in x]]
        return extrapolate(x, g.mean(0), target, forms, per_unit=g, axis="training steps", why=why)


def doubling_budgets(steps: int, n: int) -> list[int]:
    """`n` budgets ending at `steps`, each half the next (rounded down; at least one step), ascending."""
    return sorted({max(1, steps // 2 ** k) for k in range(n)})


__all__ = ["BUDGET_FORMS", "BUDGET_WHY", "BudgetCurve", "Distance", "Extrapolation", "FORMS", "FormFit", "MIN_POINTS",
           "ModelSize", "doubling_budgets", "extrapolate", "model_distance"]
