"""Token similarity escalation in synthetic stacks (Yu & Zhang §2-3.2): one trajectory at a time.

* `prop23_error`: Prop. 2.3, r = 1 + (ξ₁/ξ₂ − 1) t_sim(X), checked on random pairs.
* `lemma24_monte_carlo`: Lemma 2.4 / Prop. 2.9, E[ξ_i] = 1 + α² dσ² μ̄_i², by Monte Carlo over W.
* `postnorm_trajectory`: one Algorithm-1 stack (Figure 2; with de-escalation eq. 21, Figure 5).
* `w_resampling`: one post-norm trajectory with the step-1 value maps redrawn (Figure 3, eqs. 16-17).
* `prenorm_trajectory`: one eq.-(19) stack (Figure 4).
* `step_shares`: each step's share of the log-odds growth of t_sim (Prop. 2.3 applied per step).
* `deescalated_diversity_trajectory`: one stack with eq. (21) after every block, for the τ sweep.
* `eta_concentration`: Figure 8, η = E[ξ₁]/E[ξ₂] − ξ₁/ξ₂ (eq. 14) over samples of W.
* `bounds11_check`: Lemma 2.4's bounds (11), μ₁² ≥ (1 − ω)² and μ₂² ≤ δ², on generic row-stochastic P.

Every stack starts from X with i.i.d. N(0, 1) entries (§2.4). A trajectory with seed `s` seeds torch's
global generator with `s` (the blocks' weights) and draws X from a generator seeded with `s + 7`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch
from torch import Tensor

from . import measures as M
from .blocks import PostNormBlock, PreNormBlock, deescalate
from .config import choice

#: the four steps of Algorithm 1, in order
STEPS = ("step 1: SA + residual", "step 2: LN", "step 3: FFN + residual", "step 4: LN")


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _randn(*size: int, generator: torch.Generator, dtype: torch.dtype | None = None) -> Tensor:
    """`torch.randn` drawn from a CPU `generator` and moved to torch's default device (the one a
    caller's `with torch.device(...)` sets; CPU otherwise): the same numbers on every device, so a
    stack run on a GPU starts from the X of its CPU run, and CPU reruns stay bit-identical."""
    return torch.randn(*size, generator=generator, dtype=dtype, device="cpu").to(torch.get_default_device())


def _rand(*size: int, generator: torch.Generator, dtype: torch.dtype | None = None) -> Tensor:
    """`torch.rand` from a CPU `generator`, moved to the default device (as `_randn`)."""
    return torch.rand(*size, generator=generator, dtype=dtype, device="cpu").to(torch.get_default_device())


def random_input(n: int, d: int, seed: int, batch: tuple[int, ...] = ()) -> Tensor:
    """X with i.i.d. N(0, 1) entries, as in §2.4."""
    return _randn(*batch, n, d, generator=_gen(seed))


def prop23_error(n: int, d: int, seed: int, pairs: int = 8) -> float:
    """max |r(X, Y) − (1 + (ξ₁/ξ₂ − 1) t_sim(X))| over `pairs` random float64 pairs (X with a common
    offset 0.3, Y = X + noise): Prop. 2.3 is an identity, so this is round-off."""
    g = _gen(seed)
    X = _randn(pairs, n, d, generator=g, dtype=torch.float64) + 0.3
    Y = X + _randn(pairs, n, d, generator=g, dtype=torch.float64)
    return float((M.escalation_rate(X, Y) - M.prop23_rhs(X, Y)).abs().max())


@dataclass
class Lemma24Check:
    mc_xi1: float
    mc_xi2: float
    mc_xi1_se: float
    mc_xi2_se: float
    formula_xi1: float
    formula_xi2: float


def lemma24_monte_carlo(X: Tensor, P: Tensor, alpha: float, value_scale: float, draws: int, seed: int,
                        chunk: int = 250) -> Lemma24Check:
    """Monte Carlo over W ~ N(0, c/d) of (ξ₁, ξ₂) for Y = X + α[P_kXW_k]_k, against Lemma 2.4 / Prop. 2.9:
    E[ξ_i] = 1 + α² d σ² μ̄_i² with d σ² = c. `P` is (h, n, n), X (n, d)."""
    h, n, _ = P.shape
    d = X.shape[-1]
    g = _gen(seed)
    PX = P @ X                                                   # (h, n, d)
    x1s, x2s = [], []
    for start in range(0, draws, chunk):
        b = min(chunk, draws - start)
        W = _randn(b, h, d, d // h, generator=g, dtype=X.dtype) * math.sqrt(value_scale / d)
        SA = (PX.unsqueeze(0) @ W).transpose(1, 2).flatten(-2)   # (b, n, d)
        x1, x2 = M.xi(X, X + alpha * SA)
        x1s.append(x1)
        x2s.append(x2)
    x1, x2 = torch.cat(x1s), torch.cat(x2s)
    f1, f2 = M.expected_xi(X, P, alpha, value_scale)
    n_draws = math.sqrt(x1.numel())
    return Lemma24Check(float(x1.mean()), float(x2.mean()), float(x1.std() / n_draws), float(x2.std() / n_draws),
                        float(f1), float(f2))


def lemma24_at_init(n: int, d: int, heads: int, alpha: float, value_scale: float, draws: int, seed: int,
                    ffn_mult: int = 4, ffn_init: str = "xavier") -> Lemma24Check:
    """Lemma 2.4 checked on X ~ N(0, 1) and the attention P(X) of one freshly initialised post-norm
    block, both from `seed`."""
    torch.manual_seed(seed)
    blk = PostNormBlock(d, heads, ffn_mult * d, value_scale=value_scale, ffn_init=ffn_init)
    X = random_input(n, d, seed)
    with torch.no_grad():
        P = blk.attn.attention(X)
    return lemma24_monte_carlo(X, P, alpha, value_scale, draws, seed)


@torch.no_grad()
def postnorm_trajectory(n: int, d: int, heads: int, depth: int, seed: int, alpha: float = 1.0,
                        value_scale: float = 1.0, ffn_mult: int = 4, tau: float | None = None,
                        deesc_place: str = "output", ffn_init: str = "xavier",
                        ffn_kind: str = "relu") -> dict[str, np.ndarray]:
    """One Algorithm-1 stack of `depth` fresh blocks on X ~ N(0, 1); per block:

    * `t_sim`, `t_cos` (depth+1,): of the block inputs and the final output,
    * `xi_ratio` (depth, 4): ξ₁/ξ₂ of each of the four steps of Algorithm 1 (NaN once diversity is
      below float32 round-off),
    * `delta`, `omega` (depth,): averaged over heads (eq. 12).

    `tau` inserts the de-escalation of eq. (21) at `deesc_place` of every block; `ffn_init`,
    `ffn_kind` choose the FFN's initialisation and ablations (`core.blocks.FFN`)."""
    ts, tc = np.zeros(depth + 1), np.zeros(depth + 1)
    xr = np.zeros((depth, 4))
    de, om = np.zeros(depth), np.zeros(depth)
    torch.manual_seed(seed)
    X = random_input(n, d, seed + 7)
    for layer in range(depth):
        blk = PostNormBlock(d, heads, ffn_mult * d, alpha=alpha, value_scale=value_scale,
                            tau=tau, deesc_place=deesc_place, ffn_init=ffn_init, ffn_kind=ffn_kind)
        tr = blk.trace(X)
        ts[layer], tc[layer] = float(M.t_sim(tr.X)), float(M.t_cos(tr.X))
        pairs = ((tr.X, tr.Y1), (tr.Y1, tr.Y2), (tr.Y2, tr.Y3), (tr.Y3, tr.Y4))
        for s, (a, b) in enumerate(pairs):
            x1, x2 = M.xi(a, b)
            # once t_div < 1e-9 in float32, ξ₂ is round-off: record NaN rather than noise
            ok = float(M.t_div(a)) > 1e-9 and float(M.t_div(b)) > 1e-9
            xr[layer, s] = float(x1 / x2) if ok else np.nan
        de[layer] = float(M.delta(tr.P).mean())
        om[layer] = float(M.omega(tr.X, tr.P).mean())
        X = tr.Y4
    ts[depth], tc[depth] = float(M.t_sim(X)), float(M.t_cos(X))
    return {"t_sim": ts, "t_cos": tc, "xi_ratio": xr, "delta": de, "omega": om}


@torch.no_grad()
def w_resampling(n: int, d: int, heads: int, depth: int, draws: int, alpha: float = 1.0,
                 value_scale: float = 1.0, ffn_mult: int = 4, seed: int = 0,
                 chunk: int = 100, ffn_init: str = "xavier") -> dict[str, np.ndarray]:
    """Figure 3: one post-norm trajectory X₀ → X₁ → …; at every block ℓ keep X_ℓ and P(X_ℓ) fixed
    and redraw only the step-1 value maps W `draws` times. Returns per block: `t_sim` of X_ℓ, the
    sample means of ξ₁/ξ₂ − 1 and of r(X_ℓ, Y₁), Estimates 1 and 2 (eqs. 16, 17) with the
    corresponding r-estimates 1 + E·t_sim, and the Lemma 2.4 check (MC vs formula E[ξ₁], E[ξ₂])."""
    keys = ("t_sim", "xi_minus_1", "xi_minus_1_se", "r", "r_se", "est1", "est2", "r_est1", "r_est2",
            "exact_ratio_minus_1", "mc_xi1", "mc_xi2", "formula_xi1", "formula_xi2")
    out = {k: np.zeros(depth) for k in keys}
    torch.manual_seed(seed)
    X = random_input(n, d, seed + 7)
    g = _gen(seed + 11)
    for layer in range(depth):
        blk = PostNormBlock(d, heads, ffn_mult * d, alpha=alpha, value_scale=value_scale, ffn_init=ffn_init)
        P = blk.attn.attention(X)                        # (h, n, n), fixed
        PX = P @ X                                       # (h, n, d)
        ratios, rates, x1s, x2s = [], [], [], []
        for start in range(0, draws, chunk):
            b = min(chunk, draws - start)
            W = _randn(b, heads, d, d // heads, generator=g) * math.sqrt(value_scale / d)
            Y1 = X + alpha * (PX.unsqueeze(0) @ W).transpose(1, 2).flatten(-2)   # (b, n, d)
            x1, x2 = M.xi(X, Y1)
            ratios.append(x1 / x2)
            rates.append(M.escalation_rate(X, Y1))
            x1s.append(x1)
            x2s.append(x2)
        ratio, rate = torch.cat(ratios), torch.cat(rates)
        ts = float(M.t_sim(X))
        f1, f2 = M.expected_xi(X, P, alpha, value_scale)
        e1 = float(M.estimate1(X, P, alpha))
        e2 = float(M.estimate2(P, head_axis=True))
        vals = dict(t_sim=ts, xi_minus_1=float(ratio.mean() - 1),
                    xi_minus_1_se=float(ratio.std() / math.sqrt(draws)),
                    r=float(rate.mean()), r_se=float(rate.std() / math.sqrt(draws)), est1=e1, est2=e2,
                    r_est1=1 + e1 * ts, r_est2=1 + e2 * ts, exact_ratio_minus_1=float(f1 / f2 - 1),
                    mc_xi1=float(torch.cat(x1s).mean()), mc_xi2=float(torch.cat(x2s).mean()),
                    formula_xi1=float(f1), formula_xi2=float(f2))
        for k, v in vals.items():
            out[k][layer] = v
        X = blk(X)
    return out


@torch.no_grad()
def prenorm_trajectory(n: int, d: int, heads: int, depth: int, seed: int, alpha: float = 1.0,
                       value_scale: float = 1.0, ffn_mult: int = 4, ffn_init: str = "xavier") -> dict[str, np.ndarray]:
    """Figure 4: one eq.-(19) stack; per block the t_sim of its input and the Frobenius norms of X,
    X̂ = LN(X) and P(X̂)X̂W, each (depth,)."""
    out = {k: np.zeros(depth) for k in ("t_sim", "norm_X", "norm_Xhat", "norm_attn")}
    torch.manual_seed(seed)
    X = random_input(n, d, seed + 7)
    for layer in range(depth):
        tr = PreNormBlock(d, heads, ffn_mult * d, alpha=alpha, value_scale=value_scale, ffn_init=ffn_init).trace(X)
        out["t_sim"][layer] = float(M.t_sim(X))
        out["norm_X"][layer] = float(X.norm())
        out["norm_Xhat"][layer] = float(tr.Xhat.norm())
        out["norm_attn"][layer] = float(tr.attn_out.norm())
        X = tr.Z
    return out


def log_odds_increments(xi_ratio: np.ndarray) -> np.ndarray:
    """log(ξ₁/ξ₂) of each step: by Prop. 2.3 the odds t_sim/(1 − t_sim) of a step's output are those
    of its input times ξ₁/ξ₂ (‖Π₁Y‖²/‖Π₂Y‖² = ξ₁/ξ₂ · ‖Π₁X‖²/‖Π₂X‖²), at any similarity level; so
    the log-odds growth of a block is the sum of these increments over its four steps."""
    return np.log(np.asarray(xi_ratio, dtype=float))


def log_odds(t_sim: np.ndarray | float) -> np.ndarray:
    """log(t_sim/(1 − t_sim)), the quantity whose growth `log_odds_increments` splits by step."""
    t = np.asarray(t_sim, dtype=float)
    return np.log(t) - np.log1p(-t)


def step_shares(xi_ratio: np.ndarray, blocks: slice = slice(None)) -> np.ndarray:
    """Each step's share of the log-odds growth over `blocks`: Σ_ℓ log(ξ₁/ξ₂)_{ℓ,s} / Σ_{ℓ,s'} log(ξ₁/ξ₂)_{ℓ,s'}.
    `xi_ratio` is (…, depth, 4) (trials first when present: the increments are averaged over trials,
    NaN — unresolved diversity — ignored); returns (4,) summing to one. With identity attention
    (α = 0: Y₁ = X, ξ₁/ξ₂ = 1) step 1's share is 0."""
    inc = log_odds_increments(xi_ratio)
    inc = inc.reshape(-1, *inc.shape[-2:])[:, blocks]                # (trials, blocks, 4)
    per_step = np.nansum(np.nanmean(inc, axis=0), axis=0)            # (4,)
    return per_step / per_step.sum()


def rank_one_plus_noise(n: int, d: int, t: float, v: Tensor, Q: Tensor) -> Tensor:
    """Figure 8's X = e vᵀ + tQ (e = 1/√n): a rank-one matrix perturbed by t·Q."""
    e = torch.full((n, 1), 1 / math.sqrt(n), dtype=v.dtype)
    return e @ v.unsqueeze(0) + t * Q  # (n, 1) @ (1, d) + t·(n, d)


@torch.no_grad()
def eta_samples(X: Tensor, P: Tensor, draws: int, gen: torch.Generator, alpha: float = 1.0,
                value_scale: float = 1.0) -> Tensor:
    """η = E[ξ₁]/E[ξ₂] − ξ₁/ξ₂ (eq. 14) for `draws` samples of W ~ N(0, c/d) (d × d, one head), with
    Y = X + αPXW and E[ξ_i] from Lemma 2.4 (eq. 9). Returns (draws,)."""
    d = X.shape[-1]
    W = _randn(draws, d, d, generator=gen, dtype=X.dtype) * math.sqrt(value_scale / d)
    x1, x2 = M.xi(X, X + alpha * (P @ X) @ W)  # (n, d) @ (draws, d, d): (draws,) each
    f1, f2 = M.expected_xi(X, P, alpha, value_scale)
    return f1 / f2 - x1 / x2


@torch.no_grad()
def softmax_attention_matrix(X: Tensor, gen: torch.Generator) -> Tensor:
    """P(X) of eq. (2): softmax rows of XW_q(XW_k)ᵀ/√d, W_q, W_k uniform in (−1, 1)/√d, one head."""
    d = X.shape[-1]
    Wq = (_rand(d, d, generator=gen, dtype=X.dtype) * 2 - 1) / math.sqrt(d)
    Wk = (_rand(d, d, generator=gen, dtype=X.dtype) * 2 - 1) / math.sqrt(d)
    return torch.softmax((X @ Wq) @ (X @ Wk).T / math.sqrt(d), dim=-1)  # (n, n)


@torch.no_grad()
def eta_concentration(n: int, dims: tuple[int, ...], ts: tuple[float, ...], draws: int, seed: int,
                      alpha: float = 1.0) -> dict[str, np.ndarray]:
    """Figure 8 (Appendix A): for each d, fixed random v ∈ ℝ^d and Q ∈ ℝ^{n×d}, X = e vᵀ + tQ for every t,
    P = P(X) from eq. (2), and `draws` samples of W ~ N(0, I/d). Returns `mean` (the sample mean of η,
    what Figure 8 plots), `sd` (its spread over the draws) and `se` (standard error of the mean), each
    (len(dims), len(ts)), computed in float64."""
    out = {k: np.zeros((len(dims), len(ts))) for k in ("mean", "sd", "se")}
    for i, d in enumerate(dims):
        g = _gen(seed * 1009 + d)
        v = _randn(d, generator=g, dtype=torch.float64)
        Q = _randn(n, d, generator=g, dtype=torch.float64)
        Wg = _gen(seed * 1009 + d + 1)
        for j, t in enumerate(ts):
            X = rank_one_plus_noise(n, d, t, v, Q)
            P = softmax_attention_matrix(X, _gen(seed * 1009 + d + 2))
            eta = eta_samples(X, P, draws, Wg, alpha)
            out["mean"][i, j] = float(eta.mean())
            out["sd"][i, j] = float(eta.std())
            out["se"][i, j] = float(eta.std() / math.sqrt(draws))
    return out


#: families of generic row-stochastic P for the check of the bounds (11), by the names their results are stored
#: under: each name's kind of matrix and its parameter (softmax's scale of N(0, 1) scores, Dirichlet's
#: concentration, the nonzeros of a sparse row; none for Sinkhorn's doubly stochastic matrices)
STOCHASTIC_FAMILY_SPECS: dict[str, tuple[Literal["softmax", "Dirichlet", "sparse", "doubly"], float | None]] = {
    "softmax, scale 0.1": ("softmax", 0.1), "softmax, scale 1": ("softmax", 1.0),
    "softmax, scale 10": ("softmax", 10.0), "Dirichlet(0.1) rows": ("Dirichlet", 0.1),
    "Dirichlet(1) rows": ("Dirichlet", 1.0), "sparse rows (3 nonzeros)": ("sparse", 3),
    "doubly stochastic (Sinkhorn)": ("doubly", None),
}
STOCHASTIC_FAMILIES = tuple(STOCHASTIC_FAMILY_SPECS)


def random_stochastic(family: str, n: int, gen: torch.Generator) -> Tensor:
    """One random row-stochastic n × n matrix (float64) of a `STOCHASTIC_FAMILIES` family."""
    kind, param = STOCHASTIC_FAMILY_SPECS[choice("family", family, STOCHASTIC_FAMILIES)]
    if kind == "softmax":
        return torch.softmax(param * _randn(n, n, generator=gen, dtype=torch.float64), -1)
    if kind == "Dirichlet":
        gam = torch._standard_gamma(torch.full((n, n), param, dtype=torch.float64), generator=gen)
        return gam / gam.sum(-1, keepdim=True)  # (n, n), rows summing to 1
    if kind == "sparse":
        P = torch.zeros(n, n, dtype=torch.float64)
        for i in range(n):
            cols = torch.randperm(n, generator=gen, device="cpu")[:int(param)]
            w = _rand(int(param), generator=gen, dtype=torch.float64)
            P[i, cols] = w / w.sum()
        return P
    P = _rand(n, n, generator=gen, dtype=torch.float64) + 0.01          # doubly stochastic: Sinkhorn's scaling
    for _ in range(500):
        P = P / P.sum(-1, keepdim=True)                                 # rows sum to 1
        P = P / P.sum(-2, keepdim=True)                                 # columns sum to 1
    return P / P.sum(-1, keepdim=True)


def bound11_margins(X: Tensor, P: Tensor) -> tuple[float, float]:
    """The slack of Lemma 2.4's bounds (11): (μ₁² − (1 − ω)², δ² − μ₂²). Both are ≥ 0 for row-stochastic P."""
    m1, m2 = M.mu_sq(X, P)
    return float(m1 - (1 - M.omega(X, P)) ** 2), float(M.delta(P) ** 2 - m2)


def bounds11_check(n: int, d: int, samples: int, seed: int,
                   families: tuple[str, ...] = STOCHASTIC_FAMILIES) -> dict[str, dict[str, float]]:
    """Lemma 2.4's bounds (11) on generic P: for every family, `samples` pairs (random row-stochastic P,
    X = e vᵀ + tQ with t uniform in (0, 1]), float64; returns per family the smallest slack of each
    bound (≥ 0 when the bound holds), the mean slack and the mean ω and δ."""
    g = _gen(seed)
    out = {}
    for fam in families:
        rows = []
        for _ in range(samples):
            v = _randn(d, generator=g, dtype=torch.float64)
            Q = _randn(n, d, generator=g, dtype=torch.float64)
            X = rank_one_plus_noise(n, d, float(torch.rand((), generator=g, device="cpu")) + 1e-3, v, Q)
            P = random_stochastic(fam, n, g)
            rows.append((*bound11_margins(X, P), float(M.omega(X, P)), float(M.delta(P))))
        a = np.asarray(rows)
        out[fam] = {"min_slack_mu1": float(a[:, 0].min()), "min_slack_mu2": float(a[:, 1].min()),
                    "mean_slack_mu1": float(a[:, 0].mean()), "mean_slack_mu2": float(a[:, 1].mean()),
                    "omega": float(a[:, 2].mean()), "delta": float(a[:, 3].mean())}
    return out


def first_block_above(t_sim: np.ndarray, level: float = 0.99) -> int | None:
    """The first block whose mean (over trials, axis 0) t_sim exceeds `level`, or None."""
    above = np.nonzero(np.asarray(t_sim).mean(0) > level)[0]
    return int(above[0]) if above.size else None


__all__ = ["STEPS", "random_input", "prop23_error", "Lemma24Check", "lemma24_monte_carlo", "lemma24_at_init",
           "postnorm_trajectory", "w_resampling", "prenorm_trajectory", "log_odds_increments", "log_odds",
           "step_shares", "rank_one_plus_noise", "eta_samples", "softmax_attention_matrix", "eta_concentration",
           "STOCHASTIC_FAMILIES", "random_stochastic", "bound11_margins", "bounds11_check", "first_block_above",
           "deescalated_diversity_trajectory"]


@torch.no_grad()
def deescalated_diversity_trajectory(n: int, d: int, heads: int, depth: int, seed: int, tau: float,
                                     alpha: float = 1.0, value_scale: float = 1.0, ffn_mult: int = 4,
                                     ffn_init: str = "xavier") -> dict[str, np.ndarray]:
    """The τ sweep's trajectory: one Algorithm-1 stack with eq. (21) after every block (τ = 0: none),
    the same weights and X as `postnorm_trajectory` with that seed, without the per-step diagnostics.
    Returns `t_div` (depth+1,) of the block outputs (index 0: the input) and `block_odds` (depth,): the
    factor ξ₁/ξ₂ by which each block, before its de-escalation, multiplies the odds t_sim/(1 − t_sim)
    (Prop. 2.3: the odds of the output are those of the input times ξ₁/ξ₂)."""
    tdiv, odds = np.zeros(depth + 1), np.zeros(depth)
    torch.manual_seed(seed)
    X = random_input(n, d, seed + 7)
    tdiv[0] = float(M.t_div(X))
    for layer in range(depth):
        blk = PostNormBlock(d, heads, ffn_mult * d, alpha=alpha, value_scale=value_scale, ffn_init=ffn_init)
        Y = blk(X)
        x1, x2 = M.xi(X, Y)
        ok = float(M.t_div(X)) > 1e-9 and float(M.t_div(Y)) > 1e-9
        odds[layer] = float(x1 / x2) if ok else np.nan
        X = Y if tau == 0 else deescalate(Y, tau)
        tdiv[layer + 1] = float(M.t_div(X))
    return {"t_div": tdiv, "block_odds": odds}
