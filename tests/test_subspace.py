"""Yan et al. §3 theorem and Appendix A helpers."""

import math

import pytest
import torch

from helpers.core import subspace as S

pytestmark = pytest.mark.usefixtures("float64")   # identities checked to 1e-10


def test_residual_formula_equals_projection_distance():
    X = torch.randn(12, 7, generator=torch.Generator().manual_seed(0))
    res, lam = S.subspace_residuals(X)
    _, _, Vh = torch.linalg.svd(X, full_matrices=False)
    for k in range(lam.numel()):
        Vk = Vh[:k].T
        direct = (X - X @ Vk @ Vk.T).norm(dim=1)
        assert torch.allclose(res[:, k], direct, atol=1e-10)


@pytest.mark.parametrize("shape", [(16, 64), (64, 16), (5, 5)])
def test_theorem_holds_on_random_matrices(shape):
    g = torch.Generator().manual_seed(1)
    X = torch.randn(*shape, generator=g) @ torch.diag(torch.logspace(0, -3, shape[1]))
    out = S.theorem_check(X)
    assert out["worst_slack_rel"] <= 1e-10
    assert out["max_ratio"] <= 1 + 1e-10


def test_theorem_check_detects_a_violation():
    # a residual larger than λ_{k+1} would show as a positive slack: make C too small on purpose
    X = torch.randn(8, 8, generator=torch.Generator().manual_seed(2))
    res, lam = S.subspace_residuals(X)
    assert (res > 0.5 * lam.unsqueeze(0)).any()


def test_exact_probability_matches_monte_carlo():
    mc = S.sphere_monte_carlo(20, [1, 4], [0.3, 0.7], samples=40_000, seed=0)
    for i, k in enumerate([1, 4]):
        for j, d in enumerate([0.3, 0.7]):
            exact = S.exact_l2_probability(20, k, d)
            assert mc["l2"][i, j] == pytest.approx(exact, abs=4 * math.sqrt(exact * (1 - exact) / 40_000) + 1e-3)
    assert (mc["l1"] <= mc["l2"] + 1e-12).all()    # ‖·‖₁ ≥ ‖·‖₂, so the ℓ1 event is smaller


def test_eq8_bound_values():
    beta = math.exp(math.lgamma(1) + math.lgamma(4) - math.lgamma(5))      # B(1, 4) = 1/4
    assert S.eq8_bound(10, 2, 0.5) == pytest.approx(2 / (2 * 8 * beta) * 0.5**4 * (1 - 0.5**8))
    with pytest.raises(ValueError):
        S.eq8_bound(10, 10, 0.5)
