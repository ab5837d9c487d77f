"""Property tests of helpers.measures: paper identities that a wrong implementation breaks."""

import math

import numpy as np
import pytest
import torch
from testutil import seeded_randn

from helpers.core import measures as M

pytestmark = pytest.mark.usefixtures("float64")   # identities checked to 1e-10


def rand(*shape, seed=0):
    return seeded_randn(*shape, seed=seed)


def random_stochastic(h, n, seed=0):
    return torch.softmax(rand(h, n, n, seed=seed) * 2, dim=-1)


def test_tsim_plus_tdiv_is_one_batched():
    X = rand(3, 5, 17, 8)
    assert torch.allclose(M.t_sim(X) + M.t_div(X), torch.ones(3, 5), atol=1e-12)


def test_tsim_one_iff_rows_equal():
    v = rand(1, 8)
    assert M.t_sim(v.repeat(10, 1)).item() == pytest.approx(1.0, abs=1e-12)
    X = v.repeat(10, 1)
    X[3] += 1e-3 * rand(8, seed=1)
    assert M.t_sim(X).item() < 1 - 1e-9
    assert M.t_sim(X - X.mean(0)).item() == pytest.approx(0.0, abs=1e-12)


def test_masked_measures_ignore_padding():
    X = rand(2, 6, 4)
    mask = torch.tensor([[1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 1]], dtype=torch.bool)
    Xp = X.clone()
    Xp[0, 4:] = 1e3 * rand(2, 4, seed=3)       # garbage in padded rows
    for f in (M.t_sim, M.t_div, M.t_cos):
        a = f(Xp, mask)
        assert a[0].item() == pytest.approx(f(X[0, :4]).item(), abs=1e-12)
        assert a[1].item() == pytest.approx(f(X[1]).item(), abs=1e-12)


def test_tcos_matches_explicit_pairs():
    X = rand(7, 5)
    U = X / X.norm(dim=1, keepdim=True)
    C = U @ U.T
    expected = C[torch.triu_indices(7, 7, 1).unbind()].mean()
    assert M.t_cos(X).item() == pytest.approx(expected.item(), abs=1e-12)


def test_prop23_identity():
    """Prop. 2.3: r(X, Y) = 1 + (ξ₁/ξ₂ − 1) t_sim(X) for any X, Y (to 1e-6)."""
    for seed in range(5):
        X = rand(4, 16, 32, seed=seed) + rand(32, seed=seed + 10)     # give X some similarity
        Y = X + rand(4, 16, 32, seed=seed + 20)
        assert torch.allclose(M.escalation_rate(X, Y), M.prop23_rhs(X, Y), atol=1e-6, rtol=0)


def test_prop23_identity_fails_for_a_wrong_formula():
    X, Y = rand(16, 32) + 1, rand(16, 32, seed=1)
    x1, x2 = M.xi(X, Y)
    wrong = 1 + (x1 / x2 - 1) * M.t_div(X)
    assert abs((M.escalation_rate(X, Y) - wrong).item()) > 1e-3


def test_xi_definitions():
    X, Y = rand(10, 6), rand(10, 6, seed=1)
    x1, x2 = M.xi(X, Y)
    P1 = torch.full((10, 10), 0.1)
    P2 = torch.eye(10) - P1
    assert x1.item() == pytest.approx(((P1 @ Y).norm() ** 2 / (P1 @ X).norm() ** 2).item(), rel=1e-10)
    assert x2.item() == pytest.approx(((P2 @ Y).norm() ** 2 / (P2 @ X).norm() ** 2).item(), rel=1e-10)


def test_delta_omega_lambda2_on_known_matrices():
    n = 12
    J = torch.full((n, n), 1 / n)
    lam = 0.3
    P = lam * torch.eye(n) + (1 - lam) * J                 # symmetric doubly stochastic
    X = rand(n, 8) + 2.0
    assert M.omega(X, P).item() == pytest.approx(0.0, abs=1e-12)
    assert M.delta(P).item() == pytest.approx(lam, abs=1e-10)
    assert M.lambda2_abs(P).item() == pytest.approx(lam, abs=1e-10)
    m1, m2 = M.mu_sq(X, P)
    assert m1.item() == pytest.approx(1.0, abs=1e-12)
    assert m2.item() == pytest.approx(lam**2, abs=1e-12)


def test_estimate2_exact_for_symmetric_doubly_stochastic():
    """Cor. 2.7: for symmetric doubly stochastic P with all non-leading eigenvalues equal to λ₂,
    μ₁ = 1, ω = 0, μ₂ = δ = |λ₂|, so both estimates equal the exact E[ξ₁]/E[ξ₂] − 1 (α = 1, dσ² = 1)."""
    n = 16
    for lam in (0.0, 0.2, 0.6, -0.05):
        P = lam * torch.eye(n) + (1 - lam) * torch.full((n, n), 1 / n)
        X = rand(n, 32, seed=4) + 0.5
        e1, e2 = M.expected_xi(X, P)
        exact = (e1 / e2 - 1).item()
        assert M.estimate2(P).item() == pytest.approx(exact, abs=1e-10)
        assert M.estimate1(X, P).item() == pytest.approx(exact, abs=1e-10)


def test_estimate2_is_not_exact_for_generic_p():
    P = random_stochastic(1, 16)[0]
    X = rand(16, 32) + 0.5
    e1, e2 = M.expected_xi(X, P)
    assert abs(M.estimate2(P).item() - (e1 / e2 - 1).item()) > 1e-4


def test_head_averaged_mu_and_estimates():
    P = random_stochastic(4, 10)
    X = rand(10, 8)
    m1, m2 = M.mu_sq(X, P)
    singles = [M.mu_sq(X, P[k]) for k in range(4)]
    assert m1.item() == pytest.approx(sum(s[0].item() for s in singles) / 4, rel=1e-12)
    assert m2.item() == pytest.approx(sum(s[1].item() for s in singles) / 4, rel=1e-12)
    assert M.omega(X, P).shape == (4,)
    assert M.estimate2(P, head_axis=True).shape == ()


def test_lemma24_expectation_by_monte_carlo():
    """E[ξ_i] = 1 + α² d σ² μ_i² (Lemma 2.4), single head, W with σ² = 1/d, many draws."""
    n, d, alpha = 12, 24, 0.7
    X = rand(n, d) + 0.8
    P = random_stochastic(1, n, seed=2)[0]
    W = rand(20000, d, d, seed=5) / math.sqrt(d)
    Y = X + alpha * (P @ X) @ W
    x1, x2 = M.xi(X.expand(20000, n, d), Y)
    f1, f2 = M.expected_xi(X, P, alpha, 1.0)
    assert x1.mean().item() == pytest.approx(f1.item(), rel=0.02)
    assert x2.mean().item() == pytest.approx(f2.item(), rel=0.02)


def test_spectrum_tools():
    s = torch.tensor([4.0, 2.0, 1.0, 1.0])
    assert torch.allclose(M.normalised_spectrum(s), s / 4)
    x, F = M.ecdf(torch.tensor([3.0, 1.0, 2.0]))
    assert x.tolist() == [1.0, 2.0, 3.0] and F[-1].item() == 1.0
    assert M.skewness(torch.tensor([1.0, 2.0, 3.0])).item() == pytest.approx(0.0, abs=1e-12)
    assert M.skewness(torch.tensor([0.0, 0.0, 0.0, 10.0])).item() > 1
    X = torch.diag(torch.tensor([3.0, 4.0]))
    assert M.explained_variance(X, 1).item() == pytest.approx(16 / 25)
    with pytest.raises(ValueError):
        M.explained_variance(X, 0)


def test_singular_values_ignore_padding_rows():
    X = rand(9, 5)
    mask = torch.tensor([1] * 6 + [0] * 3, dtype=torch.bool)
    Xp = X.clone()
    Xp[6:] = 100.0
    assert torch.allclose(M.singular_values(Xp, mask)[:5], torch.linalg.svdvals(X[:6]), atol=1e-10)


def test_rbf_dis_and_token_uni():
    same = rand(1, 6).repeat(5, 1)
    assert M.rbf_dis(same).item() == pytest.approx(0.0, abs=1e-12)     # all pairs identical: log 1
    spread = torch.eye(6)
    assert M.rbf_dis(spread).item() == pytest.approx(-4.0, abs=1e-12)  # ‖e_i − e_j‖² = 2, t = 1/2
    assert M.token_uni(spread).item() == pytest.approx(0.0, abs=1e-12)


def test_lsds_matches_eq6_by_hand():
    X = rand(9, 3, seed=20)
    FX = rand(9, 4, seed=21)
    k, t = 3, 0.7
    d2 = torch.cdist(X, X) ** 2
    d2.fill_diagonal_(float("inf"))
    total = 0.0
    for i in range(9):
        nd, idx = d2[i].topk(k, largest=False)
        w = torch.exp(-nd / t)
        total += float((FX[i] - (w.unsqueeze(1) * FX[idx]).sum(0)).square().sum())
    assert M.lsds(X, FX, k=k, t=t).item() == pytest.approx(total / 9, rel=1e-9)
    # an exact midpoint with normalised weights is reconstructed perfectly by the identity map
    line = torch.tensor([[0.0], [1.0], [2.0], [10.0], [11.0], [12.0]])
    per_point_mid = M.lsds(line[:3], line[:3], k=2, normalise_weights=True).item()
    assert per_point_mid < M.lsds(line[:3], 3 * line[:3] ** 2, k=2, normalise_weights=True).item()


def test_anisotropy_measures():
    X = rand(50, 8)
    Xc = X - X.mean(0)
    assert M.mean_norm(Xc).item() == pytest.approx(0.0, abs=1e-12)
    H = rand(4, 3, 8)
    H[:, 0] = 1.0
    assert M.cls_cosine_mean(H).item() == pytest.approx(1.0, abs=1e-12)


def test_cpu_reruns_are_bit_identical():
    from helpers.experiments import tse

    a = tse.postnorm_trials(16, 32, 4, depth=3, trials=2, seed=5)
    b = tse.postnorm_trials(16, 32, 4, depth=3, trials=2, seed=5)
    c = tse.postnorm_trials(16, 32, 4, depth=3, trials=2, seed=6)
    for k in a:
        assert np.array_equal(a[k], b[k], equal_nan=True), k
    assert not np.array_equal(a["t_sim"], c["t_sim"])


def test_xi2_is_finite_near_full_similarity_and_matches_float64():
    """ξ₂ of nearly identical float32 rows: the old ‖X‖² − ‖Π₁X‖² form cancelled to noise (and inf);
    the direct form equals a float64 reference, and below float32 resolution it is NaN, not inf."""
    g = torch.Generator().manual_seed(0)
    base = torch.randn(1, 16, generator=g, dtype=torch.float64) * 100
    X64 = base + 1e-3 * torch.randn(32, 16, generator=g, dtype=torch.float64)      # t_sim ≈ 1 − 1e-10
    Y64 = X64 + 0.5 * torch.randn(32, 16, generator=g, dtype=torch.float64)
    ref = (M.project_ones_perp(Y64).square().sum() / M.project_ones_perp(X64).square().sum()).item()
    _, x2 = M.xi(X64.float(), Y64.float())
    assert torch.isfinite(x2) and abs(x2.item() / ref - 1) < 1e-2
    same = base.float().expand(32, 16).clone()                                     # t_sim = 1 exactly
    _, x2 = M.xi(same, same + 1.0)
    assert torch.isnan(x2)


def test_participation_ratio_top_k_share_and_cosine_effective_dim():
    from helpers.core.measures import centred_spectrum, cosine_effective_dim, participation_ratio, top_k_variance_share

    g = torch.Generator().manual_seed(0)
    d, n = 64, 20_000
    scales = torch.ones(d, dtype=torch.float64)
    scales[:4] = 10.0                                    # four strong directions
    x = torch.randn(n, d, generator=g, dtype=torch.float64) * scales + 5.0
    lam = centred_spectrum(x)
    assert lam[:4].min() > 50 and lam[4:].max() < 2 and torch.all(lam[:-1] >= lam[1:])
    expected = float((scales**2).sum() ** 2 / (scales**4).sum())
    assert float(participation_ratio(x)) == pytest.approx(expected, rel=0.05)
    assert float(top_k_variance_share(x, 4)) == pytest.approx(400 / (400 + 60), rel=0.02)
    c = x - x.mean(0)
    cos = torch.nn.functional.cosine_similarity(c[: n // 2], c[n // 2:], dim=-1)
    # four dominant directions: the norms vary, so 1/E[cos²] only approximates the participation ratio
    assert float(cosine_effective_dim(cos)) == pytest.approx(expected, rel=0.2)
    y = torch.randn(n, d, generator=g, dtype=torch.float64) * torch.linspace(0.5, 1.5, d, dtype=torch.float64)
    cy = y - y.mean(0)
    cos = torch.nn.functional.cosine_similarity(cy[: n // 2], cy[n // 2:], dim=-1)
    assert float(cosine_effective_dim(cos)) == pytest.approx(float(participation_ratio(y)), rel=0.05)
    line = torch.randn(n, 1, generator=g, dtype=torch.float64) * torch.ones(1, d, dtype=torch.float64)
    assert float(participation_ratio(line)) == pytest.approx(1.0, abs=1e-6)
    with pytest.raises(ValueError):
        top_k_variance_share(x, 0)


def test_cosine_effective_dim_is_the_participation_ratio_of_the_directions():
    """1/E[cos²] over independent pairs = (tr S)²/tr S², S the second moment of the unit vectors — exactly,
    also when the norms vary (here a few vectors 20× longer), where the covariance's ratio differs."""
    from helpers.core.measures import cosine_effective_dim

    g = torch.Generator().manual_seed(1)
    n, d = 3000, 32
    x = torch.randn(n, d, generator=g, dtype=torch.float64) * torch.linspace(0.2, 2, d, dtype=torch.float64)
    x[:30] *= 20
    u = x / x.norm(dim=1, keepdim=True)
    S = u.T @ u / n
    pr_dirs = float(torch.trace(S) ** 2 / torch.trace(S @ S))
    cos = u @ u.T
    off = cos[~torch.eye(n, dtype=torch.bool)]
    assert float(cosine_effective_dim(off)) == pytest.approx(pr_dirs, rel=0.01)
