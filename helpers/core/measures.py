"""Every scalar diagnostic of the book, batched over leading dimensions, torch, CPU or CUDA.

Conventions: a representation is `X` of shape `(..., n, d)` (n tokens as rows, as in Yu & Zhang);
`mask` is an optional boolean `(..., n)` marking real (non-padded) tokens. Attention matrices are
`P` of shape `(..., n, n)`, row-stochastic.
"""

from __future__ import annotations

import math
from typing import Literal

import torch
from torch import Tensor

from .config import choice

_EPS = 1e-30


def _mask_f(X: Tensor, mask: Tensor | None) -> Tensor:
    """(…, n, 1) float mask of real rows (all ones when mask is None)."""
    if mask is None:
        return torch.ones(X.shape[:-1] + (1,), dtype=X.dtype, device=X.device)
    if mask.shape != X.shape[:-1]:
        raise ValueError(f"mask shape {tuple(mask.shape)} does not match X rows {tuple(X.shape[:-1])}")
    return mask.to(X.dtype).unsqueeze(-1)  # (…, n) -> (…, n, 1)


def row_mean(X: Tensor, mask: Tensor | None = None) -> Tensor:
    """Mean over real rows: (…, n, d) -> (…, d)."""
    m = _mask_f(X, mask)
    return (X * m).sum(-2) / m.sum(-2).clamp_min(1)  # (…, d) / (…, 1)


def project_ones_perp(X: Tensor, mask: Tensor | None = None) -> Tensor:
    """Π₁^⊥X = (I − 11ᵀ/n)X: rows centred on their mean (padded rows stay zero)."""
    return (X - row_mean(X, mask).unsqueeze(-2)) * _mask_f(X, mask)  # (…, n, d) − (…, 1, d)


def _sq_norms(X: Tensor, mask: Tensor | None) -> tuple[Tensor, Tensor]:
    """(‖Π₁X‖_F², ‖X‖_F²) over real rows, computed as n‖x̄‖² and Σ‖x_i‖²."""
    m = _mask_f(X, mask)
    n = m.sum((-2, -1))
    total = (X.square() * m).sum((-2, -1))  # (…,): over rows and columns
    par = n * row_mean(X, mask).square().sum(-1)  # (…,): n‖x̄‖²
    return par, total


def t_sim(X: Tensor, mask: Tensor | None = None) -> Tensor:
    """Token similarity t_sim(X) = ‖Π₁X‖_F² / ‖X‖_F² ∈ [0, 1] (Yu & Zhang Def. 1.1)."""
    par, total = _sq_norms(X, mask)
    return (par / total.clamp_min(_EPS)).clamp(0.0, 1.0)


def t_div(X: Tensor, mask: Tensor | None = None) -> Tensor:
    """Token diversity t_div(X) = ‖Π₁^⊥X‖_F² / ‖X‖_F² (Def. 1.1), computed directly, not as 1 − t_sim."""
    perp = project_ones_perp(X, mask).square().sum((-2, -1))  # (…,)
    _, total = _sq_norms(X, mask)
    return (perp / total.clamp_min(_EPS)).clamp(0.0, 1.0)


def pairwise_cosine_mean(X: Tensor, mask: Tensor | None = None) -> Tensor:
    """Average cosine over all unordered pairs i < j of real rows: Yu & Zhang eq. (1), t_cos.

    Computed in O(n d) from ‖Σ x̂_i‖² = n + 2 Σ_{i<j} cos(x_i, x_j), with x̂ the unit rows.
    """
    m = _mask_f(X, mask)
    unit = X / X.norm(dim=-1, keepdim=True).clamp_min(_EPS) * m  # (…, n, d), padded rows zero
    n = m.sum((-2, -1))
    s = unit.sum(-2).square().sum(-1)  # ‖Σ x̂_i‖²: (…, d) -> (…,)
    return (s - n) / (n * (n - 1)).clamp_min(1)


def t_cos(X: Tensor, mask: Tensor | None = None) -> Tensor:
    """Cosine similarity t_cos(X) (Yu & Zhang eq. 1) — the average pairwise cosine of tokens."""
    return pairwise_cosine_mean(X, mask)


def escalation_rate(X: Tensor, Y: Tensor, mask: Tensor | None = None) -> Tensor:
    """TSE rate r(X, Y) = t_div(X) / t_div(Y) (Yu & Zhang Def. 2.2, eq. 5)."""
    return t_div(X, mask) / t_div(Y, mask).clamp_min(_EPS)


def xi(X: Tensor, Y: Tensor, mask: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """(ξ₁, ξ₂) with ξ_i = ‖Π_iY‖_F² / ‖Π_iX‖_F² (Yu & Zhang eq. 7), computed in float64.

    ‖Π₁^⊥X‖² is computed directly from the centred rows, not as ‖X‖² − ‖Π₁X‖²: near t_sim = 1 that
    difference cancels to rounding noise (and overflowed ξ₂ to inf). Where ‖Π₁^⊥X‖² is below what the
    input's precision can resolve — (10·eps)²·‖X‖² — ξ₂ is undefined and returned as NaN."""
    Xd, Yd = X.double(), Y.double()
    px, tx = _sq_norms(Xd, mask)
    py, _ = _sq_norms(Yd, mask)
    qx = project_ones_perp(Xd, mask).square().sum((-2, -1))
    qy = project_ones_perp(Yd, mask).square().sum((-2, -1))
    eps = torch.finfo(X.dtype).eps if X.dtype.is_floating_point else torch.finfo(torch.float32).eps
    resolved = qx > (10 * eps) ** 2 * tx
    xi2 = torch.where(resolved, qy / qx.clamp_min(_EPS), torch.full_like(qx, float("nan")))
    return (py / px.clamp_min(_EPS)).to(X.dtype), xi2.to(X.dtype)


def prop23_rhs(X: Tensor, Y: Tensor, mask: Tensor | None = None) -> Tensor:
    """Right-hand side of Prop. 2.3's identity (eq. 6): 1 + (ξ₁/ξ₂ − 1)·t_sim(X)."""
    x1, x2 = xi(X, Y, mask)
    return 1 + (x1 / x2 - 1) * t_sim(X, mask)


def mu_sq(X: Tensor, P: Tensor) -> tuple[Tensor, Tensor]:
    """(μ₁², μ₂²) with μ_i = ‖Π_iPX‖_F / ‖Π_iX‖_F (Yu & Zhang eq. 10).

    `P` may carry a head axis: `P` (…, h, n, n) with `X` (…, n, d) gives the head averages
    μ̄_i² = (1/h) Σ_k ‖Π_iP_kX‖_F² / ‖Π_iX‖_F² of Prop. 2.9.
    """
    if P.dim() == X.dim() + 1:  # heads
        PX = P @ X.unsqueeze(-3)                       # (…, h, n, d)
        px, tx = _sq_norms(X, None)
        ppx, tpx = _sq_norms(PX, None)                 # (…, h)
        m1 = ppx / px.unsqueeze(-1).clamp_min(_EPS)  # (…, h) / (…, 1)
        m2 = (tpx - ppx) / (tx - px).unsqueeze(-1).clamp_min(_EPS)
        return m1.mean(-1), m2.mean(-1)  # head means: (…,)
    PX = P @ X
    px, tx = _sq_norms(X, None)
    ppx, tpx = _sq_norms(PX, None)
    return ppx / px.clamp_min(_EPS), (tpx - ppx) / (tx - px).clamp_min(_EPS)


def omega(X: Tensor, P: Tensor) -> Tensor:
    """ω = ‖eᵀPΠ₁^⊥X‖ / ‖eᵀX‖ with e = 1/√n (Yu & Zhang eq. 12). `P` may have a head axis (…, h, n, n)."""
    n = X.shape[-2]
    Xc = project_ones_perp(X)
    if P.dim() == X.dim() + 1:
        Xc, X = Xc.unsqueeze(-3), X.unsqueeze(-3)  # (…, 1, n, d): broadcast over the heads
    num = (P.sum(-2, keepdim=True) @ Xc).squeeze(-2).norm(dim=-1) / math.sqrt(n)  # 1ᵀP (…, 1, n) @ Xc -> (…, d) -> (…,)
    den = X.sum(-2).norm(dim=-1) / math.sqrt(n)  # (…,)
    return num / den.clamp_min(_EPS)


def delta(P: Tensor) -> Tensor:
    """δ = ‖Π₁^⊥P‖₂, the spectral norm of the column-centred attention matrix (Yu & Zhang eq. 12)."""
    Pc = P - P.mean(-2, keepdim=True)                  # Π₁^⊥P: centre each column
    return torch.linalg.matrix_norm(Pc, ord=2)


def lambda2_abs(P: Tensor) -> Tensor:
    """|λ₂(P)|: the second largest eigenvalue modulus of P (Cor. 2.7, eq. 17)."""
    ev = torch.linalg.eigvals(P.to(torch.float64) if P.dtype != torch.float64 else P).abs()
    top2 = ev.topk(2, dim=-1).values  # (…, 2)
    return top2[..., 1].to(P.dtype)


def expected_xi(X: Tensor, P: Tensor, alpha: float = 1.0, d_sigma2: float = 1.0) -> tuple[Tensor, Tensor]:
    """Lemma 2.4 (eq. 9) / Prop. 2.9: E[ξ_i] = 1 + α² d σ² μ_i² (μ̄_i² with a head axis on P)."""
    m1, m2 = mu_sq(X, P)
    return 1 + alpha**2 * d_sigma2 * m1, 1 + alpha**2 * d_sigma2 * m2


def estimate1(X: Tensor, P: Tensor, alpha: float = 1.0) -> Tensor:
    """Estimate 1 of E[ξ₁/ξ₂] − 1: α²((1−ω)² − δ²)/(1 + α²δ²), the bound of Thm 2.6 (eq. 16).

    With a head axis on P the head averages of (1−ω_k)² and δ_k² are used (text after Prop. 2.9).
    """
    om, de = omega(X, P), delta(P)
    a, b = (1 - om).square(), de.square()
    if P.dim() == X.dim() + 1:
        a, b = a.mean(-1), b.mean(-1)  # over heads: (…, h) -> (…,)
    return alpha**2 * (a - b) / (1 + alpha**2 * b)


def estimate2(P: Tensor, head_axis: bool = False) -> Tensor:
    """Estimate 2 of E[ξ₁/ξ₂] − 1: (1 − |λ₂(P)|²)/(1 + |λ₂(P)|²) (Cor. 2.7, eq. 17, α = 1).

    With `head_axis=True` (P of shape `(…, h, n, n)`), |λ₂|² is averaged over heads first (our
    choice; the paper does not say how it averaged Estimate 2 over heads).
    """
    l2 = lambda2_abs(P).square()
    if head_axis:
        l2 = l2.mean(-1)  # over heads: (…, h) -> (…,)
    return (1 - l2) / (1 + l2)


# ---------------------------------------------------------------- singular-value spectrum tools


def singular_values(X: Tensor, mask: Tensor | None = None) -> Tensor:
    """Singular values of each (…, n, d) matrix over its real rows, descending (…, min(n, d)).

    Padded rows are zeroed, which leaves the non-zero singular values of the real rows unchanged
    (a zero row adds nothing to XᵀX).
    """
    Xm = X * _mask_f(X, mask)
    return torch.linalg.svdvals(Xm)


#: how a spectrum is scaled to [0, 1] (`normalised_spectrum`): by its largest value or by its sum
SpectrumNorm = Literal["max", "sum"]


def normalised_spectrum(s: Tensor, how: SpectrumNorm = "max") -> Tensor:
    """Singular values scaled to [0, 1]: by the largest (`max`, the authors' CDF code) or their sum."""
    if choice("normalisation", how, SpectrumNorm) == "max":
        return s / s.max().clamp_min(_EPS)
    return s / s.sum().clamp_min(_EPS)


def ecdf(values: Tensor) -> tuple[Tensor, Tensor]:
    """Empirical CDF F(x) = Pr(λ ≤ x) (Yan et al. Figs. 1-2): sorted x and F at each."""
    v = values.flatten().sort().values
    return v, torch.arange(1, v.numel() + 1, dtype=v.dtype, device=v.device) / v.numel()


def skewness(values: Tensor) -> Tensor:
    """Sample skewness E[(x−m)³]/σ³ (population moments), the paper's measure of spectrum skew."""
    v = values.flatten().to(torch.float64)
    c = v - v.mean()
    return (c.pow(3).mean() / c.pow(2).mean().clamp_min(_EPS).pow(1.5)).to(values.dtype)


def explained_variance(X: Tensor, k: int = 1, mask: Tensor | None = None) -> Tensor:
    """EV_k = Σ_{i≤k} λ_i² / Σ_j λ_j² (Yan et al. eq. 5), per matrix."""
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    s2 = singular_values(X, mask).square()
    return s2[..., :k].sum(-1) / s2.sum(-1).clamp_min(_EPS)


def token_uni(X: Tensor, mask: Tensor | None = None) -> Tensor:
    """TokenUni (Yan et al. eq. 3): the average cosine similarity over pairs of rows."""
    return pairwise_cosine_mean(X, mask)


def _pair_sqdist(X: Tensor) -> Tensor:
    sq = X.square().sum(-1)
    return (sq.unsqueeze(-1) + sq.unsqueeze(-2) - 2 * X @ X.transpose(-1, -2)).clamp_min(0)  # (…, n, n)


def rbf_dis(X: Tensor, t: float = 0.5, normalise: bool = True, mask: Tensor | None = None) -> Tensor:
    """log RBF_dis (Yan et al. eq. 4): log of the mean over pairs i≠j of exp(−‖x_i − x_j‖²/t).

    With `normalise=True` rows are unit vectors and t = 1/2, i.e. Wang & Isola's uniformity
    log E exp(−2‖x−y‖²) that the paper cites; lower means more uniform.
    """
    if t <= 0:
        raise ValueError(f"t must be > 0, got {t}")
    Z = X / X.norm(dim=-1, keepdim=True).clamp_min(_EPS) if normalise else X
    m = _mask_f(X, mask).squeeze(-1)  # (…, n)
    pair = m.unsqueeze(-1) * m.unsqueeze(-2)  # (…, n, n): both rows real
    pair = pair * (1 - torch.eye(X.shape[-2], dtype=X.dtype, device=X.device))
    k = torch.exp(-_pair_sqdist(Z) / t) * pair
    return torch.log(k.sum((-2, -1)) / pair.sum((-2, -1)).clamp_min(1))


def lsds(X: Tensor, FX: Tensor, k: int = 12, t: float | None = None, normalise_weights: bool = False) -> Tensor:
    """Local Structure Discrepancy Score (Yan et al. eq. 6), averaged over the n points of X (n, d).

    For each x_i: its k nearest neighbours N(x_i) in the original space, weights
    w_ij = exp(−‖x_i − x_j‖²/t), and LSDS(x_i) = ‖f(x_i) − Σ_j w_ij f(x_j)‖². `t` defaults to the
    median squared neighbour distance (the paper leaves t unspecified). `normalise_weights` makes
    the weights sum to one (LLE-style), an option the paper does not use.
    """
    if X.dim() != 2 or FX.dim() != 2 or X.shape[0] != FX.shape[0]:
        raise ValueError("lsds takes X (n, d) and f(X) (n, d') with the same n")
    if not 1 <= k < X.shape[0]:
        raise ValueError(f"k must lie in [1, n-1], got {k}")
    d2 = _pair_sqdist(X)
    d2.fill_diagonal_(float("inf"))
    nd, idx = d2.topk(k, dim=-1, largest=False)          # (n, k)
    tt = float(nd.median()) if t is None else t
    w = torch.exp(-nd / max(tt, _EPS))                   # (n, k)
    if normalise_weights:
        w = w / w.sum(-1, keepdim=True).clamp_min(_EPS)
    recon = (w.unsqueeze(-1) * FX[idx]).sum(-2)          # (n, d')
    return (FX - recon).square().sum(-1).mean()  # (n, d') -> (n,) -> ()


# ---------------------------------------------------------------- anisotropy (Godey et al.)


def cls_cosine_mean(H: Tensor) -> Tensor:
    """[CLS] uniformity (Yan et al. §3.2): average pairwise cosine of the first token over a batch.

    `H` (batch, n, d) -> scalar; (…, batch, n, d) -> (…).
    """
    return pairwise_cosine_mean(H[..., 0, :])


def mean_norm(X: Tensor, mask: Tensor | None = None) -> Tensor:
    """‖x̄‖₂, the norm of the average representation (Godey et al. §3 drift)."""
    return row_mean(X, mask).norm(dim=-1)


def attention_entropy(P: Tensor, mask: Tensor | None = None, reduce: bool = True) -> Tensor:
    """Entropy −Σ_j P_ij log P_ij (nats) of each attention row (Godey et al. §4 Fig. 9, §5 Fig. 15).

    `P` (…, n, n) row-stochastic; `mask` (…, n) marks real tokens: padded keys are left out of the
    sum (0 log 0 = 0) and padded query rows out of the mean. `reduce=False` returns the per-row
    entropies (…, n), zero on padded rows; otherwise their mean over real rows (…).
    A uniform row over m real keys has entropy log m, a one-hot row 0.
    """
    keep = torch.ones(P.shape[:-1], dtype=torch.bool, device=P.device) if mask is None else mask.bool()
    if keep.shape != P.shape[:-1]:
        raise ValueError(f"mask shape {tuple(keep.shape)} does not match P rows {tuple(P.shape[:-1])}")
    Pk = P * keep.unsqueeze(-2).to(P.dtype)                      # padded keys out
    rows = -(Pk * torch.log(Pk.clamp_min(_EPS))).sum(-1)          # (…, n)
    rows = rows * keep.to(P.dtype)                               # padded queries out
    if not reduce:
        return rows
    return rows.sum(-1) / keep.sum(-1).clamp_min(1).to(P.dtype)


# ------------------------------------------------------------------ the shape of a centred cloud


def centred_spectrum(X: Tensor) -> Tensor:
    """Eigenvalues, largest first, of the covariance of the rows of `X` (n, d): the variance of the
    cloud along each principal direction once its mean x̄ is removed."""
    C = X.double() - X.double().mean(0)  # (n, d) − (d,)
    return (torch.linalg.svdvals(C).square() / max(1, X.shape[0] - 1)).to(X.dtype)


def participation_ratio(X: Tensor) -> Tensor:
    """(Σλ)² / Σλ² of the centred covariance's eigenvalues λ: how many directions the centred cloud
    spreads over — d for an isotropic cloud, k for k equal directions, 1 for a line."""
    lam = centred_spectrum(X).double()
    return (lam.sum().square() / lam.square().sum().clamp_min(_EPS)).to(X.dtype)


def top_k_variance_share(X: Tensor, k: int) -> Tensor:
    """Share of the centred cloud's variance in its top `k` principal directions (k/d if isotropic)."""
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    lam = centred_spectrum(X).double()
    return (lam[:k].sum() / lam.sum().clamp_min(_EPS)).to(X.dtype)


def cosine_effective_dim(cos: Tensor) -> Tensor:
    """1 / E[cos²] over the cosines of independent pairs of a centred cloud: exactly the participation
    ratio (tr S)² / tr S² of S = E[u uᵀ], the second moment of the cloud's *directions* u = x/‖x‖
    (tr S = 1 and E[(u·v)²] = tr S² for independent u, v). d for an isotropic cloud, about k for k tight
    equal clusters on a simplex. When the norms concentrate it is also the participation ratio of the
    covariance; when they vary (a few long outlier vectors) the two differ, and this one counts
    directions, not variance."""
    c = torch.as_tensor(cos).double()
    return (1.0 / c.square().mean().clamp_min(_EPS)).to(torch.float64)
