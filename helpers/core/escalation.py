"""Token similarity escalation in synthetic stacks (Yu & Zhang §2-3.2): one trajectory at a time.

* `prop23_error`: Prop. 2.3, r = 1 + (ξ₁/ξ₂ − 1) t_sim(X), checked on random pairs.
* `lemma24_monte_carlo`: Lemma 2.4 / Prop. 2.9, E[ξ_i] = 1 + α² dσ² μ̄_i², by Monte Carlo over W.
* `postnorm_trajectory`: one Algorithm-1 stack (Figure 2; with de-escalation eq. 21, Figure 5).
* `w_resampling`: one post-norm trajectory with the step-1 value maps redrawn (Figure 3, eqs. 16-17).
* `prenorm_trajectory`: one eq.-(19) stack (Figure 4).

Every stack starts from X with i.i.d. N(0, 1) entries (§2.4). A trajectory with seed `s` seeds torch's
global generator with `s` (the blocks' weights) and draws X from a generator seeded with `s + 7`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from . import measures as M
from .blocks import PostNormBlock, PreNormBlock

#: the four steps of Algorithm 1, in order
STEPS = ("step 1: SA + residual", "step 2: LN", "step 3: FFN + residual", "step 4: LN")


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def random_input(n: int, d: int, seed: int, batch: tuple[int, ...] = ()) -> Tensor:
    """X with i.i.d. N(0, 1) entries, as in §2.4."""
    return torch.randn(*batch, n, d, generator=_gen(seed))


def prop23_error(n: int, d: int, seed: int, pairs: int = 8) -> float:
    """max |r(X, Y) − (1 + (ξ₁/ξ₂ − 1) t_sim(X))| over `pairs` random float64 pairs (X with a common
    offset 0.3, Y = X + noise): Prop. 2.3 is an identity, so this is round-off."""
    g = _gen(seed)
    X = torch.randn(pairs, n, d, generator=g, dtype=torch.float64) + 0.3
    Y = X + torch.randn(pairs, n, d, generator=g, dtype=torch.float64)
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
        W = torch.randn(b, h, d, d // h, generator=g, dtype=X.dtype) * math.sqrt(value_scale / d)
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
                    ffn_mult: int = 4) -> Lemma24Check:
    """Lemma 2.4 checked on X ~ N(0, 1) and the attention P(X) of one freshly initialised post-norm
    block, both from `seed`."""
    torch.manual_seed(seed)
    blk = PostNormBlock(d, heads, ffn_mult * d, value_scale=value_scale)
    X = random_input(n, d, seed)
    with torch.no_grad():
        P = blk.attn.attention(X)
    return lemma24_monte_carlo(X, P, alpha, value_scale, draws, seed)


@torch.no_grad()
def postnorm_trajectory(n: int, d: int, heads: int, depth: int, seed: int, alpha: float = 1.0,
                        value_scale: float = 1.0, ffn_mult: int = 4, tau: float | None = None,
                        deesc_place: str = "output") -> dict[str, np.ndarray]:
    """One Algorithm-1 stack of `depth` fresh blocks on X ~ N(0, 1); per block:

    * `t_sim`, `t_cos` (depth+1,): of the block inputs and the final output,
    * `xi_ratio` (depth, 4): ξ₁/ξ₂ of each of the four steps of Algorithm 1 (NaN once diversity is
      below float32 round-off),
    * `delta`, `omega` (depth,): averaged over heads (eq. 12).

    `tau` inserts the de-escalation of eq. (21) at `deesc_place` of every block."""
    ts, tc = np.zeros(depth + 1), np.zeros(depth + 1)
    xr = np.zeros((depth, 4))
    de, om = np.zeros(depth), np.zeros(depth)
    torch.manual_seed(seed)
    X = random_input(n, d, seed + 7)
    for layer in range(depth):
        blk = PostNormBlock(d, heads, ffn_mult * d, alpha=alpha, value_scale=value_scale,
                            tau=tau, deesc_place=deesc_place)
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
                 chunk: int = 100) -> dict[str, np.ndarray]:
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
        blk = PostNormBlock(d, heads, ffn_mult * d, alpha=alpha, value_scale=value_scale)
        P = blk.attn.attention(X)                        # (h, n, n), fixed
        PX = P @ X                                       # (h, n, d)
        ratios, rates, x1s, x2s = [], [], [], []
        for start in range(0, draws, chunk):
            b = min(chunk, draws - start)
            W = torch.randn(b, heads, d, d // heads, generator=g) * math.sqrt(value_scale / d)
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
                       value_scale: float = 1.0, ffn_mult: int = 4) -> dict[str, np.ndarray]:
    """Figure 4: one eq.-(19) stack; per block the t_sim of its input and the Frobenius norms of X,
    X̂ = LN(X) and P(X̂)X̂W, each (depth,)."""
    out = {k: np.zeros(depth) for k in ("t_sim", "norm_X", "norm_Xhat", "norm_attn")}
    torch.manual_seed(seed)
    X = random_input(n, d, seed + 7)
    for layer in range(depth):
        tr = PreNormBlock(d, heads, ffn_mult * d, alpha=alpha, value_scale=value_scale).trace(X)
        out["t_sim"][layer] = float(M.t_sim(X))
        out["norm_X"][layer] = float(X.norm())
        out["norm_Xhat"][layer] = float(tr.Xhat.norm())
        out["norm_attn"][layer] = float(tr.attn_out.norm())
        X = tr.Z
    return out


def first_block_above(t_sim: np.ndarray, level: float = 0.99) -> int | None:
    """The first block whose mean (over trials, axis 0) t_sim exceeds `level`, or None."""
    above = np.nonzero(np.asarray(t_sim).mean(0) > level)[0]
    return int(above[0]) if above.size else None


__all__ = ["STEPS", "random_input", "prop23_error", "Lemma24Check", "lemma24_monte_carlo", "lemma24_at_init",
           "postnorm_trajectory", "w_resampling", "prenorm_trajectory", "first_block_above"]
