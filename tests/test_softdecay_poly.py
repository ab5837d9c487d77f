"""SoftDecay by matrix products (`method="poly"`, the GPU path: Newton–Schulz and a Chebyshev polynomial,
no eigensolver) against the float64 SVD transform, on
planted spectra: repeated, tiny and negative-mapped singular values, padding, both Gram sides, gradients;
a planted wrong spectrum must fail the comparison."""

from __future__ import annotations

import math

import pytest
import torch

from helpers.core import softdecay as S

TOL = 1e-9          # max|Y − Y_svd| / σ_max in float64 (the stated accuracy; POLY_TOL = 1e-10 is the tail bound)
TOL_F32 = 1e-6      # float32 inputs: the result's own rounding


def planted(s: torch.Tensor, batch: int = 3, d: int = 72, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    n = s.numel()
    U = torch.linalg.qr(torch.randn(batch, n, n, generator=g, dtype=torch.float64))[0]
    V = torch.linalg.qr(torch.randn(batch, d, n, generator=g, dtype=torch.float64))[0]
    return (U * s) @ V.transpose(-1, -2)


def svd_reference(X: torch.Tensor, alpha: float, floor: float = 1e-10) -> torch.Tensor:
    """Algorithm 1 by a float64 SVD, with the book's null-space rule (σ² ≤ floor·‖XXᵀ‖_F is dropped)."""
    X64 = X.to(torch.float64)
    U, s, Vh = torch.linalg.svd(X64, full_matrices=False)
    G = X64 @ X64.transpose(-1, -2) if X.shape[-2] <= X.shape[-1] else X64.transpose(-1, -2) @ X64
    live = s.square() > floor * G.flatten(-2).norm(dim=-1, keepdim=True)
    f = S.softdecay(s.clamp_min(1e-300), alpha)
    K = s[..., :1] / f[..., :1]
    return (U * torch.where(live, K * f, torch.zeros_like(f)).unsqueeze(-2)) @ Vh


SPECTRA = {
    "geometric to 0.05": torch.exp(torch.linspace(0, math.log(0.05), 24, dtype=torch.float64)) * 40,
    "repeated": torch.tensor([30.0] * 4 + [3.0] * 14 + [1.5] * 6, dtype=torch.float64),
    "negative-mapped (σ < |α|)": torch.linspace(10, 0.3, 24, dtype=torch.float64),
    "tiny but live (1e-3)": torch.cat([torch.linspace(40, 2, 20, dtype=torch.float64),
                                       torch.tensor([0.4, 0.1, 0.05, 0.04], dtype=torch.float64)]),
    "tiny (falls back)": torch.cat([torch.linspace(10, 1, 21, dtype=torch.float64),
                                    torch.tensor([1e-2, 1e-6, 1e-9], dtype=torch.float64)]),
}


@pytest.mark.parametrize("name", list(SPECTRA))
def test_poly_equals_the_float64_svd_transform(name):
    s = SPECTRA[name]
    X = planted(s)
    ref = svd_reference(X, -0.6)
    certified = S.gram_poly(X, -0.6, None) is not None
    assert certified == (name != "tiny (falls back)")
    err = float((S.softdecay_transform(X, -0.6, method="poly") - ref).abs().max() / s.max())
    assert err <= TOL * 10, err
    err32 = float((S.softdecay_transform(X.float(), -0.6, method="poly").double() - ref).abs().max() / s.max())
    assert err32 <= TOL_F32, err32


def test_poly_with_padding_and_on_the_tall_side():
    s = torch.exp(torch.linspace(0, math.log(0.1), 20, dtype=torch.float64)) * 25
    X = planted(s, batch=4)
    mask = torch.ones(4, 20, dtype=torch.bool)
    mask[1, 12:] = False
    mask[2, 3:] = False
    assert S.gram_poly(X * mask[..., None], -0.6, mask) is not None
    Y = S.softdecay_transform(X, -0.6, mask, method="poly")
    for b in range(4):
        live = mask[b]
        ref = svd_reference(X[b][live], -0.6)
        assert float((Y[b][live] - ref).abs().max()) <= TOL * 10 * 25
        assert torch.equal(Y[b][~live], X[b][~live])              # padded rows unchanged
    tall = torch.randn(2, 64, 16, generator=torch.Generator().manual_seed(1), dtype=torch.float64) * 3
    assert S.gram_poly(tall, -0.3, None) is not None
    err = (S.softdecay_transform(tall, -0.3, method="poly") - svd_reference(tall, -0.3)).abs().max()
    assert float(err) <= TOL * 10 * float(torch.linalg.matrix_norm(tall, 2).max())


def test_poly_gradients_equal_the_eigensolver_gradients():
    s = torch.exp(torch.linspace(0, math.log(0.1), 12, dtype=torch.float64)) * 20
    X0 = planted(s, batch=2, d=30)
    W = torch.randn(X0.shape, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    grads = {}
    for method in ("gram", "poly"):
        X = X0.clone().requires_grad_()
        a = torch.tensor(-0.6, dtype=torch.float64, requires_grad=True)
        (S.softdecay_transform(X, a, method=method, precision="double") * W).sum().backward()
        grads[method] = (X.grad, a.grad)
    gx, ga = grads["gram"]
    px, pa = grads["poly"]
    assert float((px - gx).abs().max() / gx.abs().max()) < 1e-5
    assert abs(float(pa - ga)) < 1e-6 * abs(float(ga))


def test_a_planted_wrong_spectrum_fails_the_comparison():
    """The comparison can fail: a transform from a spectrum one part in 1e6 off is rejected."""
    s = SPECTRA["geometric to 0.05"]
    X = planted(s)
    U, sv, Vh = torch.linalg.svd(X, full_matrices=False)
    wrong = (U * (sv * (1 + 1e-6 * torch.linspace(0, 1, sv.shape[-1], dtype=torch.float64))).unsqueeze(-2)) @ Vh
    err = float((S.softdecay_transform(wrong, -0.6, method="poly") - svd_reference(X, -0.6)).abs().max() / s.max())
    assert err > TOL * 10


def test_auto_is_the_eigensolver_on_the_cpu():
    X = planted(SPECTRA["repeated"]).float()
    assert torch.equal(S.softdecay_transform(X, -0.6), S.softdecay_transform(X, -0.6, method="gram"))
