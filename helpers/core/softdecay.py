"""SoftDecay (Yan et al. 2022, eq. 2 and Algorithm 1), fast and exact, batched and padding-aware,
with gradients that stay finite when singular values repeat or vanish; and the whitening and
de-escalation post-processing baselines.

Algorithm 1 on X (n × d): X = U Σ Vᵀ; σ̂ = f(σ) with f(λ) = −ln(1 − α(λ + α))/α; K = σ_max/σ̂_max;
X̃ = U (K σ̂) Vᵀ. Writing g(σ) = K f(σ)/σ this is X̃ = U diag(g) Uᵀ X = Ψ(XXᵀ) X, a *matrix function*
of the n × n Gram matrix (or X Ψ(XᵀX) with the d × d one when n > d). We compute it from one
symmetric eigendecomposition of the smaller Gram matrix in float64, and differentiate it with the
Daleckii–Krein formula, whose divided differences (ψ(λ_i) − ψ(λ_j))/(λ_i − λ_j) tend to ψ′(λ_i) when
eigenvalues coincide — so repeated or vanishing singular values give finite gradients, unlike
the SVD backward, which divides by σ_i² − σ_j².
"""

from __future__ import annotations

import math
from typing import Literal

import torch
from torch import Tensor, nn

from .config import choice
from .papers import SOFTDECAY_ALPHA

_TINY = 1e-12
#: how Algorithm 1 is computed (`softdecay_transform`) and in what precision its Gram path runs
SoftDecayMethod = Literal["auto", "gram", "poly", "svd"]
Precision = Literal["auto", "mixed", "double"]
#: the two flip-free variants (`softdecay_flipfree`)
FlipFree = Literal["clamp", "rescale"]


class SoftDecayDomainError(ValueError):
    """ln(1 − α(λ + α)) is undefined for some singular value λ with this α."""


def softdecay(lam: Tensor, alpha: float | Tensor) -> Tensor:
    """f(λ) = −ln(1 − α(λ + α))/α (Yan et al. eq. 2). Increasing and concave for α < 0; raises
    `SoftDecayDomainError` instead of returning NaN when the log's argument is not positive."""
    a = torch.as_tensor(alpha, dtype=lam.dtype, device=lam.device)
    if float(a.detach()) == 0:
        raise SoftDecayDomainError("alpha = 0: eq. (2) is undefined (its limit is the identity)")
    arg = 1 - a * (lam + a)
    if bool((arg <= 0).any()):
        bad = lam.detach()[arg.detach() <= 0]
        av = float(a.detach())
        raise SoftDecayDomainError(
            f"SoftDecay with alpha = {av:g} needs 1 − α(λ + α) > 0, i.e. "
            + (f"λ < {(1 - av**2) / av:.4g}" if av > 0 else f"λ > {(av**2 - 1) / -av:.4g}")
            + f"; got λ in [{float(bad.min()):.4g}, {float(bad.max()):.4g}]. Use α in [−1, 0) for λ ≥ 0."
        )
    return -torch.log(arg) / a


def _psi_and_derivs(lam: Tensor, alpha: Tensor, floor: float) -> tuple[Tensor, Tensor, Tensor]:
    """ψ(λ) = f(√λ)/√λ for eigenvalues λ of the Gram matrix, dψ/dλ and dψ/dα.

    Eigenvalues at or below `floor` belong to the null space of X (padding, rank deficiency, or
    round-off): ψ = 0 there, so those directions stay zero. (Eq. 2 has f(0) = −ln(1 − α²)/α ≠ 0, so
    the literal algorithm would add K f(0) u vᵀ with arbitrary singular vectors u, v of a zero
    singular value: ill-defined; dropping them is the only choice independent of the SVD routine.)"""
    keep = lam > floor
    lam = lam.clamp_min(floor)
    s = lam.sqrt()
    a = alpha
    arg = 1 - a * (s + a)
    f = -torch.log(arg) / a
    df_ds = 1 / arg
    df_da = torch.log(arg) / a**2 + (s + 2 * a) / (a * arg)
    zero = torch.zeros_like(s)
    psi = torch.where(keep, f / s, zero)
    dpsi_dlam = torch.where(keep, (df_ds * s - f) / (2 * s**3), zero)
    dpsi_da = torch.where(keep, df_da / s, zero)
    return psi, dpsi_dlam, dpsi_da


class _GramMatrixFunction(torch.autograd.Function):
    """(Ψ(G), λ) with Ψ(G) = U diag(ψ(λ)) Uᵀ for symmetric PSD G (…, m, m) and its eigenvalues λ
    (ascending), from one eigendecomposition, with a Daleckii–Krein backward for Ψ and the usual
    U diag(ḡ_λ) Uᵀ for λ (neither divides by eigenvalue gaps)."""

    @staticmethod
    def forward(ctx, G: Tensor, alpha: Tensor, floor: float, rel_tol: float):
        lam, U = torch.linalg.eigh(G)
        psi, dpsi, dpsi_da = _psi_and_derivs(lam, alpha, floor)
        ctx.save_for_backward(lam.clamp_min(floor), U, psi, dpsi, dpsi_da)
        ctx.rel_tol = rel_tol
        return (U * psi.unsqueeze(-2)) @ U.transpose(-1, -2), lam  # U diag(ψ) Uᵀ (…, m, m), λ (…, m)

    @staticmethod
    def backward(ctx, grad: Tensor, grad_lam: Tensor):
        lam, U, psi, dpsi, dpsi_da = ctx.saved_tensors
        gs = 0.5 * (grad + grad.transpose(-1, -2))  # (…, m, m), symmetrised
        inner = U.transpose(-1, -2) @ gs @ U                        # (…, m, m)
        dl = lam.unsqueeze(-1) - lam.unsqueeze(-2)  # λ_i − λ_j (…, m, m)
        dp = psi.unsqueeze(-1) - psi.unsqueeze(-2)  # ψ_i − ψ_j (…, m, m)
        close = dl.abs() <= ctx.rel_tol * lam.abs().amax(-1, keepdim=True).unsqueeze(-1).clamp_min(_TINY)  # (…, m, m)
        mean_slope = 0.5 * (dpsi.unsqueeze(-1) + dpsi.unsqueeze(-2))
        D = torch.where(close, mean_slope, dp / torch.where(close, torch.ones_like(dl), dl))
        M = inner * D
        if grad_lam is not None:
            M = M + torch.diag_embed(grad_lam)
        gG = U @ M @ U.transpose(-1, -2)  # (…, m, m)
        g_alpha = (torch.diagonal(inner, dim1=-2, dim2=-1) * dpsi_da).sum()
        return gG, g_alpha, None, None


def _as_alpha(alpha: float | Tensor, like: Tensor) -> Tensor:
    return torch.as_tensor(alpha, dtype=torch.float64, device=like.device)


def softdecay_transform(X: Tensor, alpha: float | Tensor = SOFTDECAY_ALPHA, mask: Tensor | None = None,
                        method: SoftDecayMethod = "auto", floor: float = 1e-10, rel_tol: float = 1e-9,
                        precision: Precision = "auto") -> Tensor:
    """Algorithm 1 of Yan et al. on each matrix X (…, n, d) (rows = tokens or sentences).

    * `mask` (…, n) marks real rows: only they enter the decomposition; padded rows come back
      unchanged, so the result does not depend on how much padding a batch has.
    * `method="auto"` (default): `"poly"` on a GPU, `"gram"` elsewhere (on a CPU one eigensolver call is
      ten to a hundred times cheaper than the matrix products; on a GPU the batched eigensolver runs its
      matrices one by one: on an H200 at batch 32 × 128 and width 768 the products are 1.9× faster
      forward but 1.3× slower forward + backward, `results/bench/gpu-nvidia-h200.json`).
    * `method="gram"`: the matrix-function form from the smaller Gram matrix, exact to
      round-off and with finite gradients at repeated or zero singular values. `precision="mixed"`
      forms the Gram matrix and the product in the input dtype and solves the eigensystem in
      float64 (fastest); `"double"` does all of it in float64; `"auto"` (default) uses mixed unless
      the spectrum is too ill-conditioned for it (see `_gram_path`), keeping every result within
      1e-5·σ_max of a float64 SVD;
      `method="svd"`: a batched `torch.linalg.svd` (the literal algorithm; its backward is
      infinite at repeated singular values).
      `method="poly"`: the same transform by matrix products only, in float64 (`gram_poly`: Newton–Schulz
      for the Gram matrix's square root and inverse square root, a Chebyshev polynomial for f): within
      1e-9·σ_max of the float64 SVD transform where the live spectrum has σ_min ≥ 1e-5·σ_max, certified per
      call; other calls (tinier singular values, rank deficiency, a nearly repeated σ_max) fall back to
      `"gram"`.
    * α may be a tensor with `requires_grad` (the trainable layer).
    The largest singular value is kept (K = σ_max/f(σ_max)). Singular values σ < −α map to negative
    f(σ): eq. (2) is applied as printed, so those directions change sign after rescaling.
    """
    choice("method", method, SoftDecayMethod)
    if method == "auto":
        method = "poly" if X.device.type == "cuda" else "gram"
    if X.shape[-2] < 1 or X.shape[-1] < 1:
        raise ValueError("empty matrix")
    Xm = X if mask is None else X * mask.unsqueeze(-1).to(X.dtype)  # (…, n, d), padded rows zero
    Y = None
    if method == "svd":
        Y = _svd_path(Xm, alpha)
    elif method == "poly":
        Y = gram_poly(Xm, alpha, mask)
    if Y is None:
        choice("precision", precision, Precision)
        Y = _gram_path(Xm, alpha, floor, rel_tol, precision)
    if mask is not None:
        Y = torch.where(mask.unsqueeze(-1), Y, X)  # (…, n, 1) picks per row
    return Y


def _check_domain(smax: Tensor, smin: Tensor, alpha: Tensor) -> None:
    a = float(alpha)
    if a == 0:
        raise SoftDecayDomainError("alpha = 0: eq. (2) is undefined (its limit is the identity)")
    lo, hi = float(smin.min()), float(smax.max())
    # the argument 1 − α(σ + α) is monotone in σ: check both ends of the spectrum
    for s in (lo, hi):
        if 1 - a * (s + a) <= 0:
            softdecay(torch.tensor([lo, hi], dtype=torch.float64), a)   # raises with the message


def _gram_path(X: Tensor, alpha: float | Tensor, floor: float, rel_tol: float, precision: Precision) -> Tensor:
    """`auto`: float64 inputs are solved in float64; float32 ones in mixed precision, redone in
    float64 when some live singular value is below 1 % of the largest (a float32 Gram matrix loses
    about eps·σ_max²/σ in each σ; measured on MiniLM and BERT-base hidden states with σ_min/σ_max ≈
    0.03 the mixed result is within 2e-7·σ_max of a float64 SVD)."""
    if precision == "double" or (precision == "auto" and X.dtype == torch.float64):
        return _gram_once(X, alpha, floor, rel_tol, torch.float64)[0]
    Y, lam, abs_floor = _gram_once(X, alpha, floor, rel_tol, X.dtype)
    if precision == "auto":
        lam = lam.detach()
        live_min = torch.where(lam > abs_floor, lam, torch.full_like(lam, float("inf"))).amin(-1)
        if bool((live_min < 1e-4 * lam[..., -1]).any()):
            return _gram_once(X, alpha, floor, rel_tol, torch.float64)[0]
    return Y


def _gram_once(X: Tensor, alpha: float | Tensor, floor: float, rel_tol: float,
               work: torch.dtype) -> tuple[Tensor, Tensor, float]:
    n, d = X.shape[-2], X.shape[-1]
    Xw = X.to(work)
    a = _as_alpha(alpha, X)
    if isinstance(alpha, Tensor) and alpha.requires_grad:
        a = alpha.to(torch.float64)
    left = n <= d
    G = Xw @ Xw.transpose(-1, -2) if left else Xw.transpose(-1, -2) @ Xw          # (…, m, m)
    G = G.to(torch.float64)                                                         # eigensystem in float64
    with torch.no_grad():
        top = G.flatten(-2).norm(dim=-1)  # ‖G‖_F: (…,)
        abs_floor = float((floor * top).clamp_min(_TINY).min())                     # null space: λ ≤ floor·‖G‖
    Psi, lam = _GramMatrixFunction.apply(G, a, abs_floor, rel_tol)
    smax = lam[..., -1].clamp_min(_TINY).sqrt()
    live = lam.detach()[lam.detach() > abs_floor]
    _check_domain(smax.detach(), live.sqrt() if live.numel() else smax.detach(), a.detach())
    K = smax / softdecay(smax, a)                                                   # (…,)
    Y = Psi.to(work) @ Xw if left else Xw @ Psi.to(work)
    return (K[..., None, None].to(work) * Y).to(X.dtype), lam, abs_floor


def _svd_path(X: Tensor, alpha: float | Tensor) -> Tensor:
    U, s, Vh = torch.linalg.svd(X, full_matrices=False)
    a = torch.as_tensor(alpha, dtype=X.dtype, device=X.device) if not isinstance(alpha, Tensor) else alpha.to(X.dtype)
    _check_domain(s.detach()[..., :1], s.detach()[s.detach() > 1e-6 * s.detach().max()], a.detach())
    fs = softdecay(s, a)
    K = s[..., :1] / fs[..., :1]
    return (U * (K * fs).unsqueeze(-2)) @ Vh  # U diag(K f(σ)) Vᵀ: (…, n, d)


# ------------------------------------------------------------------ the matrix-product form (GPU)

#: the lower ends of the live spectrum tried (λ_min/λ_max of the Gram matrix; the last: σ_min/σ_max ≥ 1e-5);
#: the largest one certified sets the Newton–Schulz steps (trained encoders: λ_min/λ_max ≈ 1e-6)
POLY_LAMBDA_FLOORS = (1e-4, 1e-6, 1e-8, 1e-10)
#: the coefficient-tail bound on max|Y − Y_exact|/σ_max the Chebyshev degree is chosen for
POLY_TOL = 1e-10
#: the largest degree tried before falling back to the eigensolver
POLY_MAX_DEGREE = 400
#: relative width of the certified bracket [λ̂, λ̂(1 + τ)] around the largest eigenvalue of the Gram matrix
POLY_TOP_TAU = 1e-9
_SQUARINGS = 11                                     # power iteration G^(2^11): gap ratios up to ≈ 0.995 resolve


def _top_eigen(G: Tensor) -> Tensor:
    """An estimate λ̂ ≤ λ_max of the largest eigenvalue of each symmetric PSD G, differentiable as vᵀGv
    (v a unit vector from repeated squaring, G^(2^k) normalised)."""
    with torch.no_grad():
        A = G / G.flatten(-2).norm(dim=-1).clamp_min(_TINY)[..., None, None]  # (…, m, m) / (…, 1, 1)
        for _ in range(_SQUARINGS):
            A = torch.matmul(A, A)
            A = A / A.flatten(-2).norm(dim=-1).clamp_min(_TINY)[..., None, None]
        col = A.norm(dim=-2).argmax(-1)                                            # the dominant column
        v = torch.take_along_dim(A, col[..., None, None], dim=-1)                  # (…, m, 1)
        v = torch.matmul(G, v / v.norm(dim=-2, keepdim=True).clamp_min(_TINY))     # one more step
        v = v / v.norm(dim=-2, keepdim=True).clamp_min(_TINY)
    return (v * torch.matmul(G, v)).sum((-2, -1))  # vᵀGv: (…,)


def _cheb_nodes_coeffs(f, hi: Tensor, n: int) -> Tensor:
    """Chebyshev coefficients (…, n) of s ↦ f(s) on [0, hi] (per matrix) from n Chebyshev nodes."""
    j = torch.arange(n, dtype=torch.float64, device=hi.device)
    theta = torch.pi * (j + 0.5) / n
    s = hi[..., None] * (torch.cos(theta) + 1) / 2
    C = torch.cos(j[:, None] * theta[None, :]) * (2.0 / n)                     # C[k, j] = 2/n cos(k θ_j)
    return f(s) @ C.T  # (…, n) @ (n, n) -> (…, n)


def _clenshaw(T: Tensor, c: Tensor) -> Tensor:
    """Σ'_k c_k T_k(T) (first term halved) for symmetric T (B, m, m), coefficients c (B, N); differentiable;
    two kernels a term (one fused product-and-add, one diagonal add)."""
    b1 = torch.zeros_like(T)
    b2 = torch.zeros_like(T)
    for k in range(c.shape[-1] - 1, 0, -1):
        b0 = torch.baddbmm(b2, T, b1, beta=-1, alpha=2)
        b0.diagonal(dim1=-2, dim2=-1).add_(c[:, k:k + 1])
        b1, b2 = b0, b1
    out = torch.baddbmm(b2, T, b1, beta=-1)
    out.diagonal(dim1=-2, dim2=-1).add_(c[:, :1] / 2)
    return out


def gram_poly(X: Tensor, alpha: float | Tensor, mask: Tensor | None, info: dict | None = None) -> Tensor | None:
    """Algorithm 1 by matrix products only (what a GPU runs fast; its batched eigensolver runs the matrices
    one by one). With G = X Xᵀ (or XᵀX) = U Σ² Uᵀ, S = G^{1/2} and Q = G^{-1/2} X = U Vᵀ (the polar factor),
    Algorithm 1 is Y = K f(S) Q: S and G^{-1/2} by the coupled Newton–Schulz iteration (matrix products,
    quadratic convergence, as many steps as the certified λ_min/λ_max needs), f(S) by Clenshaw's recurrence
    for the Chebyshev interpolant of f on [0, σ̂_max] (f is analytic there: no lower end is needed), of the
    degree whose coefficient tail bounds the error by `POLY_TOL`·σ_max; all in float64, differentiated by
    autograd. The spectrum is certified per call by Cholesky factorisations: hi·I − G (σ_max bracketed to
    1e-9) and G − lo·I (λ_min ≥ lo, the largest of `POLY_LAMBDA_FLOORS`·λ_max that holds; the padded rows'
    null space moved inside).
    Returns None (the caller uses the eigensolver) where that fails (tiny singular values, rank deficiency,
    a nearly repeated σ_max), where the iteration has not converged, or where α is outside (−1, 0)."""
    a = _as_alpha(alpha, X)
    if isinstance(alpha, Tensor) and alpha.requires_grad:
        a = alpha.to(torch.float64)
    if not -1.0 < float(a.detach()) < 0.0:
        return None
    n, d = X.shape[-2], X.shape[-1]
    left = n <= d
    Xw = X.to(torch.float64).reshape(-1, n, d)                                      # (B, n, d)
    if mask is not None:
        mask = mask.reshape(-1, n)  # (B, n)
    G = Xw @ Xw.transpose(-1, -2) if left else Xw.transpose(-1, -2) @ Xw          # (B, m, m)
    eye = torch.eye(G.shape[-1], dtype=G.dtype, device=G.device)
    lam1 = _top_eigen(G)
    top = lam1.detach()
    if bool((top <= _TINY).any()):
        return None
    if mask is not None and left:                     # padded rows: zero rows and columns of G, moved to λ̂
        G = G + torch.diag_embed((~mask).to(G.dtype) * top[..., None])
    with torch.no_grad():
        hi = top * (1 + POLY_TOP_TAU)
        Gd = G.detach()
        floors = torch.tensor(POLY_LAMBDA_FLOORS, dtype=G.dtype, device=G.device)
        # (1 + len(floors), B, m, m): λ̂(1+τ)I − G, then G − floor·λ̂ I per floor
        probe = torch.cat([(hi[..., None, None] * eye - Gd).unsqueeze(0),
                           Gd - (floors.view(-1, *[1] * Gd.dim()) * top[..., None, None]) * eye])
        ok = (torch.linalg.cholesky_ex(probe)[1] == 0).reshape(len(floors) + 1, -1).all(-1)  # (1 + len(floors),)
        if not bool(ok[0]) or not bool(ok[1:].any()):
            return None
        floor_ok = POLY_LAMBDA_FLOORS[int(ok[1:].to(torch.int8).argmax())]           # the largest certified
        steps = int(math.ceil(math.log(1 / floor_ok) / math.log(2.25))) + 6
    # coupled Newton–Schulz on A = G/hi (spectrum in (0, 1)): Yk → A^{1/2}, Zk → A^{-1/2}
    A = G / hi[..., None, None]
    Yk, Zk = A, eye.expand_as(A)
    eye15 = (1.5 * eye).expand_as(A)
    for _ in range(steps):
        T = torch.baddbmm(eye15, Zk, Yk, alpha=-0.5)
        Yk, Zk = torch.bmm(Yk, T), torch.bmm(T, Zk)
    with torch.no_grad():
        if float((torch.matmul(Zk, Yk) - eye).abs().amax()) > 1e-9:
            return None
        s_hi = hi.sqrt()
        smax = top.sqrt()
        K = smax / softdecay(smax, a.detach())
        n_max = POLY_MAX_DEGREE
        c = _cheb_nodes_coeffs(lambda s: softdecay(s, a.detach()), s_hi, n_max)
        tail = c.abs().flip(-1).cumsum(-1).flip(-1) * (K / smax)[..., None]       # K·Σ_{k≥N}|c_k| / σ_max
        fits = tail.reshape(-1, n_max).amax(0) <= POLY_TOL  # (n_max,): the degrees that fit every matrix
        if not bool(fits.any()):
            return None
        deg = max(1, int(fits.to(torch.int8).argmax()))
        if info is not None:                                   # what the call used (benchmarks report it)
            info.update(degree=deg, newton_schulz_steps=steps, lambda_floor=floor_ok)
    c = _cheb_nodes_coeffs(lambda s: softdecay(s, a), s_hi, n_max)[..., :deg]    # differentiable in α
    S_hat = Yk * s_hi[..., None, None]                                              # G^{1/2}
    fS = _clenshaw((2 * S_hat - s_hi[..., None, None] * eye) / s_hi[..., None, None], c)
    Q = torch.matmul(Zk / s_hi[..., None, None], Xw) if left else torch.matmul(Xw, Zk / s_hi[..., None, None])
    smax = lam1.clamp_min(_TINY).sqrt()
    K = smax / softdecay(smax, a)
    Y = torch.matmul(fS, Q) if left else torch.matmul(Q, fS)
    return (K[..., None, None] * Y).to(X.dtype).reshape(X.shape)  # (B, n, d) -> X's (…, n, d)

def softdecay_loop_reference(X: Tensor, alpha: float, mask: Tensor | None = None) -> Tensor:
    """The authors' style: one `torch.svd` per example in a Python loop (padding included unless a
    mask is given). Kept as the slow baseline for benchmarks and as an independent check."""
    out = []
    for b in range(X.shape[0]):
        x = X[b] if mask is None else X[b][mask[b]]
        U, s, V = torch.svd(x)
        fs = softdecay(s, alpha)
        y = U @ torch.diag(fs * (s.max() / fs.max())) @ V.T  # (n, d)
        if mask is not None:
            full = X[b].clone()
            full[mask[b]] = y
            y = full
        out.append(y)
    return torch.stack(out)  # (B, n, d)


def softdecay_flipfree(X: Tensor, alpha: float = SOFTDECAY_ALPHA, how: FlipFree = "clamp",
                       floor: float = 1e-10) -> Tensor:
    """Algorithm 1 with property 1 (f(σ) ≥ 0, so no direction changes sign) kept — our variants, not in the
    paper. Eq. (2) is negative for σ < |α| (f(|α|) = 0), so Algorithm 1 as printed flips those directions.

    * `how="clamp"`: σ̂ = K f(max(σ, |α|)): a direction with σ ≤ |α| is set to zero instead of flipped;
    * `how="rescale"`: f applied to σ/c with c = σ_min/|α| (σ_min the smallest live singular value, live:
      σ > floor·σ_max), so every live σ/c ≥ |α|; the smallest direction goes to zero, none flips.

    K = σ_max/σ̂_max as in Algorithm 1 (the largest singular value is kept). Dead directions (σ ≤
    floor·σ_max) stay zero. Computed by an SVD in float64; no gradient path is promised."""
    choice("how", how, FlipFree)
    if not -1.0 <= alpha < 0:
        raise ValueError(f"alpha must lie in [-1, 0), got {alpha}")
    X64 = X.to(torch.float64)
    U, s, Vh = torch.linalg.svd(X64, full_matrices=False)
    live = s > floor * s.max()
    if how == "clamp":
        lam = s.clamp_min(-alpha)
    else:
        c = float(s[live].min()) / -alpha
        lam = (s / c).clamp_min(-alpha)             # dead values are dropped below; clamp keeps the log defined
    f = softdecay(lam, alpha)
    f = torch.where(live, f, torch.zeros_like(f))
    K = s.max() / f.max().clamp_min(_TINY)
    return ((U * (K * f).unsqueeze(-2)) @ Vh).to(X.dtype)  # (n, d)


class SoftDecay(nn.Module):
    """SoftDecay as a layer with a trainable α (initial value `alpha`), applied to (…, n, d) with an
    optional mask of real rows (Yan et al. Algorithm 1)."""

    def __init__(self, alpha: float = SOFTDECAY_ALPHA, trainable: bool = True,
                 method: SoftDecayMethod = "auto") -> None:
        super().__init__()
        if not -1.0 <= alpha < 0:
            raise ValueError(f"initial alpha must lie in [-1, 0) (the paper's range), got {alpha}")
        self.alpha = nn.Parameter(torch.tensor(float(alpha)), requires_grad=trainable)
        self.method = method

    def forward(self, X: Tensor, mask: Tensor | None = None) -> Tensor:
        return softdecay_transform(X, self.alpha, mask, method=self.method)

    def extra_repr(self) -> str:
        return f"alpha={float(self.alpha):.4f}, method={self.method}"


# ------------------------------------------------------------------ baselines


def whitening_fit(X: Tensor, k: int | None = None) -> tuple[Tensor, Tensor]:
    """BERT-whitening (Su et al. 2021; WhiteningBERT, Huang et al. 2021): μ = mean(X), Σ = cov(X) =
    U S Uᵀ, W = U S^{−1/2}, optionally its first k columns. Returns (μ, W)."""
    return whitening_fits(X, (k,))[0]


def whitening_fits(X: Tensor, ks: tuple[int | None, ...]) -> list[tuple[Tensor, Tensor]]:
    """`whitening_fit(X, k)` for every k of `ks` from one decomposition of Σ: the variants differ only in
    how many columns of W they keep, so each is the same numbers as its own `whitening_fit`."""
    X64 = X.to(torch.float64)
    mu = X64.mean(0, keepdim=True)  # (1, d)
    cov = (X64 - mu).T @ (X64 - mu) / X64.shape[0]  # (d, d)
    U, S, _ = torch.linalg.svd(cov)
    W = U / S.clamp_min(_TINY).sqrt()
    out = []
    for k in ks:
        if k is not None and not 1 <= k <= W.shape[1]:
            raise ValueError(f"k must lie in [1, {W.shape[1]}], got {k}")
        out.append((mu.to(X.dtype), (W if k is None else W[:, :k]).to(X.dtype)))
    return out


def whitening_apply(X: Tensor, mu: Tensor, W: Tensor) -> Tensor:
    return (X - mu) @ W  # (N, d) @ (d, k) -> (N, k)


def expdecay_penalty(H: Tensor, mask: Tensor | None = None, c1: float = 1.0, c2: float = 1.0, gamma: float = 2.0,
                     gamma_e: float = 1e-4, squared: bool = False, top_k: int | None = None) -> Tensor:
    """ExpDecay regulariser (Yan et al. App. D.1, after Wang et al. 2020): γ_e Σ_{k≤K} (λ_k − c1 e^{−c2 k^γ})
    over the singular values λ_1 ≥ λ_2 ≥ … of each example's output matrix H (B, L, d) (real rows
    only), averaged over the batch. The paper never defines K: `top_k=None` sums over every value a
    sentence can have (the formula as printed), `top_k=5` keeps the 5 largest (the authors' commented-out
    code). `squared=True`: γ_e Σ_k (λ_k − c1 e^{−c2 k^γ})² (Wang et al.'s form)."""
    Hm = H if mask is None else H * mask.unsqueeze(-1).to(H.dtype)  # (B, L, d), padded rows zero
    lam = torch.linalg.svdvals(Hm.float())                             # (B, min(L, d)), descending
    k = torch.arange(1, lam.shape[-1] + 1, dtype=lam.dtype, device=lam.device)
    prior = c1 * torch.exp(-c2 * k.pow(gamma))                         # (K,)
    diff = lam - prior
    if mask is not None:                                               # only the rank a sentence can have
        live = k.unsqueeze(0) <= mask.sum(-1, keepdim=True).to(lam.dtype)  # (B, K): k ≤ the sentence's length
        diff = diff * live
    if top_k is not None:
        diff = diff[..., :top_k]
    per = diff.square().sum(-1) if squared else diff.sum(-1)
    return gamma_e * per.mean()


__all__ = ["expdecay_penalty", "softdecay", "softdecay_transform", "softdecay_flipfree", "softdecay_loop_reference",
           "SoftDecay", "SoftDecayDomainError", "whitening_fit", "whitening_fits", "whitening_apply"]
