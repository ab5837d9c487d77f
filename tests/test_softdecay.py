"""SoftDecay (Yan et al. eq. 2, Algorithm 1) and the post-processing baselines."""

import pytest
import torch

from helpers.core import softdecay as S


def rand(*shape, seed=0, dtype=torch.float32):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


@pytest.mark.parametrize("alpha", [-0.2, -0.6, -1.0])
def test_f_increasing_and_concave(alpha):
    lam = torch.linspace(0.01, 50, 2001, dtype=torch.float64)
    f = S.softdecay(lam, alpha)
    d1 = torch.diff(f)
    assert (d1 > 0).all()
    assert (torch.diff(d1) <= 1e-12).all()
    assert (f <= lam + 1e-12).all()         # λ ≥ f(λ) for α < 0 (§4.3)


def test_domain_error_instead_of_nan():
    with pytest.raises(S.SoftDecayDomainError, match="alpha"):
        S.softdecay(torch.tensor([0.5, 5.0]), 0.5)       # 1 − α(λ + α) < 0 for λ = 5
    with pytest.raises(S.SoftDecayDomainError):
        S.softdecay(torch.tensor([0.1]), -2.0)
    with pytest.raises(S.SoftDecayDomainError):
        S.softdecay_transform(rand(4, 8) * 100, 0.5)


@pytest.mark.parametrize("shape", [(3, 20, 64), (300, 32), (6, 6)])
def test_gram_path_matches_svd_and_keeps_largest_singular_value(shape):
    X = rand(*shape, seed=1) * torch.logspace(0, -1.5, shape[-1])
    ref = S.softdecay_transform(X.double(), -0.6, method="svd")          # float64 SVD: the reference
    scale = torch.linalg.matrix_norm(X.double(), ord=2).max()
    for precision in ("auto", "double"):
        a = S.softdecay_transform(X, -0.6, precision=precision)
        assert ((a.double() - ref).abs().max() / scale).item() < 1e-5, precision
    b = S.softdecay_transform(X, -0.6, method="svd")                      # float32 SVD, for comparison
    assert ((b.double() - ref).abs().max() / scale).item() < 1e-5
    s_in, s_out = torch.linalg.svdvals(X), torch.linalg.svdvals(a)
    assert torch.allclose(s_in[..., 0], s_out[..., 0], rtol=1e-5)


def test_flattens_the_spectrum_only_at_large_scale():
    """f(λ) crosses zero at λ = |α| and f(λ)/λ decreases only above that region, so Algorithm 1 lifts
    the small singular values relative to the largest only when the spectrum lies well above |α|:
    SoftDecay is not scale-invariant."""
    X = rand(20, 64, seed=1) * torch.logspace(0, -1.5, 64)
    for scale, flatter in ((100.0, True), (0.5, False)):
        Y = S.softdecay_transform(X * scale, -0.6)
        s_in, s_out = torch.linalg.svdvals(X * scale), torch.linalg.svdvals(Y)
        ratio_in, ratio_out = (s_in[-1] / s_in[0]).item(), (s_out[-1] / s_out[0]).item()
        assert (ratio_out > ratio_in) is flatter


def test_matches_per_example_loop_reference():
    X = rand(4, 12, 48, seed=2)
    mask = torch.ones(4, 12, dtype=torch.bool)
    mask[1, 9:] = False
    mask[3, 5:] = False
    ours = S.softdecay_transform(X, -0.4, mask)
    ref = S.softdecay_loop_reference(X, -0.4, mask)
    assert (ours - ref).abs().max().item() < 1e-4


def test_output_does_not_depend_on_padding_amount():
    X = rand(2, 10, 40, seed=3)
    mask = torch.ones(2, 10, dtype=torch.bool)
    mask[0, 7:] = False
    out = S.softdecay_transform(X, -0.6, mask)
    Xp = torch.cat([X, 1e3 * rand(2, 25, 40, seed=4)], dim=1)
    mp = torch.cat([mask, torch.zeros(2, 25, dtype=torch.bool)], dim=1)
    outp = S.softdecay_transform(Xp, -0.6, mp)
    assert torch.allclose(out[mask], outp[:, :10][mask], atol=1e-5)
    assert torch.equal(outp[:, 10:], Xp[:, 10:])            # padded rows come back unchanged
    assert torch.equal(out[0, 7:], X[0, 7:])


def _degenerate(dtype=torch.float64, zeros=True):
    U, _ = torch.linalg.qr(rand(10, 10, seed=5, dtype=torch.float64))
    V, _ = torch.linalg.qr(rand(40, 10, seed=6, dtype=torch.float64))
    s = torch.tensor([4.0, 3.0, 3.0, 1.0, 1.0, 1.0, 0.5, 0.5, 0.0 if zeros else 0.8, 0.0 if zeros else 0.8],
                     dtype=torch.float64)
    return ((U * s) @ V.T).to(dtype)


def test_gradients_finite_with_repeated_and_zero_singular_values():
    X = _degenerate(torch.float32).requires_grad_(True)
    alpha = torch.tensor(-0.5, requires_grad=True)
    S.softdecay_transform(X, alpha).square().sum().backward()
    assert torch.isfinite(X.grad).all() and torch.isfinite(alpha.grad)
    assert alpha.grad.abs() > 0
    # continuity at repeated (non-zero) singular values: the gradient there is the limit of the
    # gradients at nearby non-degenerate matrices. (At zero singular values eq. 2 itself jumps,
    # f(0) ≠ 0, so only finiteness can be asked there; nor at a repeated *largest* one, where
    # K = σ_max/f(σ_max) is a max, not differentiable.)
    X64 = _degenerate(zeros=False).requires_grad_(True)
    S.softdecay_transform(X64, -0.5).square().sum().backward()
    Xp = (_degenerate(zeros=False) + 1e-7 * rand(10, 40, seed=9, dtype=torch.float64)).requires_grad_(True)
    S.softdecay_transform(Xp, -0.5).square().sum().backward()
    assert torch.allclose(X64.grad, Xp.grad, rtol=1e-3, atol=1e-4)


def test_gradcheck_generic_matrix():
    X = rand(5, 12, seed=7, dtype=torch.float64).requires_grad_(True)
    a = torch.tensor(-0.4, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda x, al: S.softdecay_transform(x, al), (X, a))


def test_module_trainable_alpha():
    layer = S.SoftDecay(-0.5)
    X = rand(2, 8, 16, seed=8)
    layer(X, torch.ones(2, 8, dtype=torch.bool)).sum().backward()
    assert layer.alpha.grad is not None and torch.isfinite(layer.alpha.grad)
    with pytest.raises(ValueError):
        S.SoftDecay(0.3)


def test_whitening_gives_identity_covariance_and_top_k():
    X = rand(500, 16, seed=9) @ rand(16, 16, seed=10)
    mu, W = S.whitening_fit(X)
    Y = S.whitening_apply(X, mu, W).double()
    cov = (Y - Y.mean(0)).T @ (Y - Y.mean(0)) / Y.shape[0]
    assert torch.allclose(cov, torch.eye(16, dtype=torch.float64), atol=1e-3)
    _, W4 = S.whitening_fit(X, 4)
    assert W4.shape == (16, 4)


def _spread(n=120, d=30, seed=0):
    """A matrix whose singular values run from 1e-3 to 10 (so some lie below |α| = 0.6)."""
    g = torch.Generator().manual_seed(seed)
    U, _ = torch.linalg.qr(torch.randn(n, d, generator=g, dtype=torch.float64))
    V, _ = torch.linalg.qr(torch.randn(d, d, generator=g, dtype=torch.float64))
    return U @ torch.diag(torch.logspace(1, -3, d, dtype=torch.float64)) @ V.T


def test_flips_are_counted_in_softdecay_and_prevented_in_the_flip_free_variants():
    from helpers.core import sts as C

    X = _spread()
    below = int((torch.linalg.svdvals(X) < 0.6).sum())
    assert below > 0
    assert C.count_flips(X, S.softdecay_transform(X, -0.6)) == below           # Algorithm 1 as printed flips them
    for how in ("clamp", "rescale"):
        Y = S.softdecay_flipfree(X, -0.6, how)
        assert C.count_flips(X, Y) == 0, how
        s = torch.linalg.svdvals(Y)
        assert torch.allclose(s.max(), torch.linalg.svdvals(X).max())            # the largest value kept
    assert C.count_flips(X, -X) == X.shape[1]                                   # a counter that can count


def test_clamped_softdecay_is_algorithm_1_above_alpha_and_zero_below():
    X = _spread()
    U, s, Vh = torch.linalg.svd(X, full_matrices=False)
    Y = S.softdecay_flipfree(X, -0.6, "clamp")
    proj = ((U.T @ Y) * Vh).sum(-1)                                              # uᵢᵀ Y vᵢ
    K = s.max() / S.softdecay(s.max(), -0.6)
    above = s > 0.6
    assert torch.allclose(proj[above], K * S.softdecay(s[above], -0.6), rtol=1e-9)
    assert proj[~above].abs().max() < 1e-9
    Z = _spread(seed=1) * 1000                                                   # every σ above |α|: identical
    assert torch.allclose(S.softdecay_flipfree(Z, -0.6, "clamp"), S.softdecay_transform(Z, -0.6), atol=1e-8)


def test_rescaled_softdecay_depends_on_the_shape_of_the_spectrum_only():
    X = _spread()
    Y = S.softdecay_flipfree(X, -0.6, "rescale")
    assert torch.allclose(S.softdecay_flipfree(X * 37.0, -0.6, "rescale"), Y * 37.0, atol=1e-9)
    with pytest.raises(ValueError):
        S.softdecay_flipfree(X, -0.6, "shift")
