"""Seed statistics shared by the chapters: the Student-t interval of per-seed paired differences, and
the moving average the training chapters read loss histories with.

The training chapters (GLUE, ViT, Q/K) compare two variants run on the same seeds (same data order,
same initialisation seed), so each seed gives one paired difference and the interval is over seeds."""

from __future__ import annotations

import numpy as np


def t_interval(diffs, level: float = 0.95) -> dict[str, float]:
    """Mean of the per-seed paired differences `diffs` and its Student-t interval (n − 1 degrees of
    freedom): {"mean", "lo", "hi", "n"}; `lo` and `hi` are NaN with fewer than two seeds."""
    from scipy import stats

    d = np.asarray(diffs, dtype=float).ravel()
    if d.size == 0:
        raise ValueError("t_interval needs at least one difference")
    if not 0 < level < 1:
        raise ValueError(f"level must lie in (0, 1), got {level}")
    m = float(d.mean())
    if d.size < 2:
        return {"mean": m, "lo": float("nan"), "hi": float("nan"), "n": 1}
    half = float(stats.t.ppf(0.5 + level / 2, d.size - 1) * d.std(ddof=1) / np.sqrt(d.size))
    return {"mean": m, "lo": m - half, "hi": m + half, "n": int(d.size)}


def interval_text(d: dict[str, float], digits: int = 3) -> str:
    """'+0.055 [+0.041, +0.070]' for a `t_interval`; the bare mean with one seed."""
    f = f"{{:+.{digits}f}}"
    if d["n"] > 1:
        return f"{f.format(d['mean'])} [{f.format(d['lo'])}, {f.format(d['hi'])}]"
    return f.format(d["mean"])


def verdict(d: dict[str, float], above: str = "higher", below: str = "lower",
            none: str = "no difference detected", one: str = "one seed") -> str:
    """The reading of a `t_interval` of paired differences a − b: `above` when the interval lies above 0,
    `below` when it lies below, `none` when it covers 0, `one` with a single seed (nothing to test). The
    chapters' "higher / lower / no difference detected" wording, in one place."""
    if d["n"] < 2:
        return one
    return above if d["lo"] > 0 else below if d["hi"] < 0 else none


def moving_average(x, window: int) -> np.ndarray:
    """The mean over each `window` consecutive entries of a loss history (length len(x) − window + 1;
    `x` itself, as floats, when `window` ≤ 1 or longer than the history). A NaN (a diverged step) stays
    NaN in every window that holds it."""
    x = np.asarray(x, dtype=float)
    if window <= 1 or len(x) < window:
        return x
    return np.convolve(x, np.ones(window) / window, mode="valid")


__all__ = ["t_interval", "interval_text", "verdict", "moving_average"]
