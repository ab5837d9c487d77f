"""Yan et al. §3 and Appendix A: the singular-value subspace theorem, its case-study probability
bound (eq. 8), and the per-layer singular-value statistics of §3.2."""

from __future__ import annotations

import math

import numpy as np
import torch
from scipy import special, stats
from torch import Tensor

from . import measures as M


def subspace_residuals(X: Tensor) -> tuple[Tensor, Tensor]:
    """For X (…, m, n) with rows x_i, SVD X = U diag(λ) Vᵀ, and every cut k = 0..r−1:

    the distance ‖x_i − x_i′‖ from each row to its projection x_i′ onto S_[1,k] = span(v_1..v_k),
    which Appendix A writes as √(Σ_{j>k} λ_j² u_ij²), and the tightest constant of the theorem,
    C_k = λ_{k+1} (any C with λ_k ≥ C ≥ λ_{k+1} works; the smallest gives the strongest bound).

    Returns (res (…, m, r) with res[..., i, k] = ‖x_i − x_i′‖ for cut k, lam (…, r)).
    """
    U, lam, _ = torch.linalg.svd(X, full_matrices=False)          # U (…, m, r), lam (…, r)
    contrib = (U * lam.unsqueeze(-2)).square()                     # λ_j² u_ij²  (…, m, r)
    tail = contrib.flip(-1).cumsum(-1).flip(-1)                    # Σ_{j≥k+1} (0-based j ≥ k)
    return tail.clamp_min(0).sqrt(), lam


def theorem_check(X: Tensor, mask: Tensor | None = None) -> dict[str, float]:
    """Verify ‖x − x′‖ ≤ C for every row and every cut, with C = λ_{k+1}; report the worst slack
    (should be < 0, or ≤ 0 up to round-off) and the tightness ratios ‖x − x′‖/λ_{k+1} (max, median).
    All four are taken over real rows and the cuts with λ_{k+1} > 0: a cut at or beyond a matrix's
    rank (a sentence shorter than the padded length) compares a zero residual with a zero constant,
    a slack of exactly 0 that says nothing about the theorem. Padded rows (mask False) are zeroed
    and left out."""
    if mask is not None:
        X = X * mask.unsqueeze(-1).to(X.dtype)
    res, lam = subspace_residuals(X.to(torch.float64))
    ratio = res / lam.unsqueeze(-2).clamp_min(1e-300)
    valid = (lam > 1e-12 * lam.amax(-1, keepdim=True)).unsqueeze(-2).expand_as(ratio)  # (…, m, r): the cut exists
    if mask is not None:
        valid = valid & mask.unsqueeze(-1).expand_as(ratio)  # and the row is real
    worst = float((res - lam.unsqueeze(-2))[valid].max())  # (…, m, r) − (…, 1, r)
    return {
        "worst_slack": worst,
        "worst_slack_rel": worst / float(lam.max()),
        "max_ratio": float(ratio[valid].max()),
        "median_ratio": float(ratio[valid].median()),
    }


def tightness_by_cut(X: Tensor, mask: Tensor | None = None) -> np.ndarray:
    """max_i ‖x_i − x_i′‖ / λ_{k+1} for each cut k, averaged over the leading batch items for which
    the cut exists: a cut k at or beyond a matrix's rank (λ_{k+1} = 0 up to round-off, e.g. a padded
    sentence shorter than the width) has no theorem to check and is left out, as in `theorem_check`.
    NaN for a cut no item reaches."""
    if mask is not None:
        X = X * mask.unsqueeze(-1).to(X.dtype)
    res, lam = subspace_residuals(X.to(torch.float64))
    ratio = res / lam.unsqueeze(-2).clamp_min(1e-300)
    if mask is not None:
        ratio = ratio * mask.unsqueeze(-1)  # (…, m, r) · (…, m, 1)
    worst = ratio.amax(-2).reshape(-1, ratio.shape[-1])                      # (items, r)
    valid = (lam > 1e-12 * lam.amax(-1, keepdim=True)).reshape(-1, ratio.shape[-1])  # (items, r)
    total = torch.where(valid, worst, torch.zeros_like(worst)).sum(0)  # (r,)
    count = valid.sum(0)
    return torch.where(count > 0, total / count.clamp_min(1), torch.full_like(total, float("nan"))).numpy()


# ------------------------------------------------------------------ Appendix A case study


def eq8_bound(n: int, k: int, d: float) -> float:
    """Yan et al. eq. (8): 2 / (k (n−k) B(k/2, (n−k)/2)) · d^{2k} (1 − d^{n−k})."""
    if not 0 < k < n:
        raise ValueError(f"need 0 < k < n, got k={k}, n={n}")
    logc = math.log(2) - math.log(k) - math.log(n - k) - special.betaln(k / 2, (n - k) / 2)
    return math.exp(logc + 2 * k * math.log(d)) * (1 - d ** (n - k))


def gamma_step(n: int, k: int) -> dict[str, float]:
    """The Γ-step of Appendix A's derivation, as printed: the line before eq. (8) has the constant
    Γ(n/2)/(2π^{n/2}) · 2π^{(n−k)/2}/Γ((n−k)/2+1) · 2π^{k/2}/Γ(k/2+1) (`printed_line`), which the next
    line replaces by "≤ 2/(k(n−k)) · Γ(n/2)/(Γ((n−k)/2)Γ(k/2))" (`printed_next`, eq. 8's constant).
    With Γ(x+1) = xΓ(x) the first equals 8/(k(n−k) B(k/2, (n−k)/2)) (`corrected`): four times the
    second, so the "≤" is false by a factor 4. Returns the three constants as natural logarithms
    (`log_*`) and `ratio` = printed_line / printed_next, all computed in log space."""
    if not 0 < k < n:
        raise ValueError(f"need 0 < k < n, got k={k}, n={n}")
    lg = math.lgamma
    log_line = (lg(n / 2) - math.log(2) - (n / 2) * math.log(math.pi) + math.log(2) + ((n - k) / 2) * math.log(math.pi)
                - lg((n - k) / 2 + 1) + math.log(2) + (k / 2) * math.log(math.pi) - lg(k / 2 + 1))
    log_next = math.log(2) - math.log(k) - math.log(n - k) + lg(n / 2) - lg((n - k) / 2) - lg(k / 2)
    log_corr = math.log(8) - math.log(k) - math.log(n - k) - special.betaln(k / 2, (n - k) / 2)
    return {"n": n, "k": k, "log_printed_line": log_line, "log_printed_next": log_next, "log_corrected": log_corr,
            "ratio": math.exp(log_line - log_next)}


def exact_l2_probability(n: int, k: int, d: float) -> float:
    """P(√(Σ_{j≤k} u_j²) ≤ d) for u uniform on S^{n−1}: Σ u_j² ~ Beta(k/2, (n−k)/2), so this is
    the regularised incomplete beta I_{d²}(k/2, (n−k)/2) (exact)."""
    return float(stats.beta.cdf(d * d, k / 2, (n - k) / 2))


def sphere_monte_carlo(n: int, ks: list[int], radii: list[float], samples: int, seed: int,
                       chunk: int = 20_000) -> dict[str, np.ndarray]:
    """Monte Carlo over u uniform on S^{n−1} (normalised Gaussians) of P(‖u_{1..k}‖ ≤ d) for the
    ℓ2 reading (the proof's √Σu²) and the ℓ1 reading (the text's literal Σ√(u²) = Σ|u|).
    Returns arrays (len(ks), len(radii)) `l2`, `l1`."""
    g = torch.Generator().manual_seed(seed)
    kmax = max(ks)
    r = torch.tensor(radii, dtype=torch.float64)
    hits2 = torch.zeros(len(ks), len(radii), dtype=torch.float64)
    hits1 = torch.zeros_like(hits2)
    done = 0
    while done < samples:
        b = min(chunk, samples - done)
        u = torch.randn(b, n, generator=g, dtype=torch.float64)
        u = u / u.norm(dim=-1, keepdim=True)
        head = u[:, :kmax]
        c2 = head.square().cumsum(-1).sqrt()                # (b, kmax)
        c1 = head.abs().cumsum(-1)
        for i, k in enumerate(ks):
            hits2[i] += (c2[:, k - 1:k] <= r).sum(0)  # (b, 1) <= (radii,) -> (radii,)
            hits1[i] += (c1[:, k - 1:k] <= r).sum(0)
        done += b
    return {"l2": (hits2 / samples).numpy(), "l1": (hits1 / samples).numpy()}


# ------------------------------------------------------------------ §3.2 per-layer statistics


def layer_spectrum_stats(per_layer: list[Tensor], mask: Tensor, normalise: M.SpectrumNorm = "max") -> list[dict]:
    """For every layer's hidden states (N, L, d) with mask (N, L): the singular values of each
    sentence's token matrix (real tokens only), pooled over sentences and normalised by the largest
    pooled value (as the authors' CDF code), with their median and skewness; plus token uniformity
    (average pairwise cosine of tokens within a sentence, averaged over sentences) and [CLS]
    uniformity (average pairwise cosine of the first token over sentences)."""
    rows = []
    lengths = mask.sum(-1)  # (N,): real tokens per sentence
    for layer, H in enumerate(per_layer):
        s = M.singular_values(H, mask)                           # (N, min(L, d))
        keep = torch.arange(s.shape[-1]).unsqueeze(0) < lengths.unsqueeze(-1).clamp(max=s.shape[-1])  # (N, min(L, d))
        vals = M.normalised_spectrum(s[keep], normalise)
        rows.append({
            "layer": layer,
            "values": vals,
            "median": float(vals.median()),
            "skewness": float(M.skewness(vals)),
            "token_uni": float(M.token_uni(H, mask).mean()),
            "cls_uni": float(M.cls_cosine_mean(H)),
            "ev1": float(M.explained_variance(H, 1, mask).mean()),
        })
    return rows
