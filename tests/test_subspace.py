"""Yan et al. §3 theorem and Appendix A helpers."""

import math

import numpy as np
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


def test_theorem_check_detects_a_violation(monkeypatch):
    """theorem_check must report a positive slack and a ratio above one when a residual exceeds
    λ_{k+1}: feed it residuals inflated by 1.5 (the SVD itself can never violate the theorem)."""
    X = torch.randn(8, 8, generator=torch.Generator().manual_seed(2))
    honest = S.theorem_check(X)
    assert honest["worst_slack"] <= 1e-10 and honest["max_ratio"] <= 1 + 1e-10
    real = S.subspace_residuals
    monkeypatch.setattr(S, "subspace_residuals", lambda Y: (1.5 * real(Y)[0], real(Y)[1]))
    out = S.theorem_check(X)
    assert out["worst_slack"] > 0 and out["worst_slack_rel"] > 0
    assert out["max_ratio"] > 1.2


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


def test_random_matrices_have_the_planted_spectra():
    from helpers.experiments.subspace import random_matrices

    mats = random_matrices(32, 48, torch.Generator().manual_seed(0))
    lam = {k: torch.linalg.svdvals(X) for k, X in mats.items()}
    assert all(X.shape == (32, 48) for X in mats.values())
    assert lam["rank 4 + noise"][4] < 1e-2 * lam["rank 4 + noise"][3]          # rank 4, then noise
    assert lam["decaying spectrum"][-1] / lam["decaying spectrum"][0] < lam["gaussian"][-1] / lam["gaussian"][0]


def test_case_summary_counts_violations_and_finds_the_worst():
    from helpers.experiments.subspace import case_summary

    rows = [dict(n=8, k=1, d=0.5, bound=0.1, exact_l2=0.3, l2_violates=True, l1_violates=False),
            dict(n=8, k=2, d=0.5, bound=0.1, exact_l2=0.6, l2_violates=True, l1_violates=True),
            dict(n=8, k=4, d=0.5, bound=0.2, exact_l2=0.1, l2_violates=False, l1_violates=False),
            dict(n=8, k=6, d=0.5, bound=0.4, exact_l2=0.1, l2_violates=False, l1_violates=False)]
    out = case_summary(rows)
    assert (out.cases, out.l2_violations, out.l1_violations) == (4, 2, 1)
    assert out.worst.k == 2 and out.median_looseness == pytest.approx(3.0)
    assert case_summary(rows[2:]).worst is None


def test_tightness_by_cut_leaves_out_cuts_beyond_a_matrix_rank():
    """A batch of one full-rank 6×4 matrix and one whose last 4 rows are padding (rank 2): cuts 2 and 3
    exist only for the first, so their average is the first matrix's value alone, not halved by the
    padded one's zeros (or blown up by its 0/0)."""
    g = torch.Generator().manual_seed(0)
    X = torch.randn(2, 6, 4, generator=g, dtype=torch.float64)
    mask = torch.ones(2, 6, dtype=torch.bool)
    mask[1, 2:] = False
    both = S.tightness_by_cut(X, mask)
    first = S.tightness_by_cut(X[:1], mask[:1])
    second = S.tightness_by_cut(X[1:], mask[1:])
    np.testing.assert_allclose(both[2:], first[2:], rtol=1e-12)
    np.testing.assert_allclose(both[:2], (first[:2] + second[:2]) / 2, rtol=1e-12)
    assert np.isnan(second[2:]).all() and np.isfinite(first).all()


@pytest.mark.parametrize(("n", "k"), [(16, 1), (16, 7), (64, 16), (384, 96), (768, 384)])
def test_gamma_step_of_appendix_a_is_off_by_four(n, k):
    """The line before eq. (8) equals 8/(k(n−k)B(k/2,(n−k)/2)) (Γ(x+1) = xΓ(x)); eq. (8)'s constant
    2/(k(n−k)B) is a quarter of it, so the printed "≤" is false."""
    g = S.gamma_step(n, k)
    assert g["log_printed_line"] == pytest.approx(g["log_corrected"], abs=1e-9)
    assert g["ratio"] == pytest.approx(4.0, rel=1e-9)
    eq8_constant = S.eq8_bound(n, k, 0.5) / (0.5 ** (2 * k) * (1 - 0.5 ** (n - k)))
    assert math.exp(g["log_printed_next"]) == pytest.approx(eq8_constant, rel=1e-9)
    if n <= 64:                                             # direct evaluation with math.gamma
        pi, gm = math.pi, math.gamma
        direct = (gm(n / 2) / (2 * pi ** (n / 2)) * 2 * pi ** ((n - k) / 2) / gm((n - k) / 2 + 1)
                  * 2 * pi ** (k / 2) / gm(k / 2 + 1))
        assert direct == pytest.approx(math.exp(g["log_printed_line"]), rel=1e-9)


def test_exact_probability_is_a_cliff_at_k_equal_d2n():
    """Σ_{j≤k} u_j² ~ Beta(k/2, (n−k)/2) has mean k/n: P(‖u_{1..k}‖ ≤ d) ≈ 1 well below k = d²n and ≈ 0
    well above it, ≈ 1/2 at it."""
    n, d = 768, 0.5
    assert S.exact_l2_probability(n, 96, d) > 0.999
    assert S.exact_l2_probability(n, 192, d) == pytest.approx(0.5, abs=0.05)
    assert S.exact_l2_probability(n, 288, d) < 1e-6


def test_theorem_check_leaves_out_cuts_beyond_a_padded_sentences_rank():
    """A batch with a short sentence (3 real rows of 6): its cuts k ≥ 3 compare a zero residual with
    λ_{k+1} = 0; counted, they would make the worst slack exactly 0. Left out, it is negative."""
    X = torch.randn(2, 6, 8, generator=torch.Generator().manual_seed(3))
    mask = torch.ones(2, 6, dtype=torch.bool)
    mask[1, 3:] = False
    out = S.theorem_check(X, mask)
    assert out["worst_slack"] < -1e-6
    res, lam = S.subspace_residuals(X * mask.unsqueeze(-1))
    assert float((res - lam.unsqueeze(-2)).max()) == pytest.approx(0.0, abs=1e-12)   # what the trivial cuts give


def test_committed_pieces_read_into_typed_records_and_write_back_as_stored():
    """The converter: the run's settings (its cache key), Appendix A's summary and the committed sentence bootstrap
    become `Settings`, `CaseSummary` and `SentenceDraws` records, and the Result's JSON writes back the dicts they
    were read from (keys in order)."""
    import json

    from helpers.experiments import subspace
    from helpers.machinery.results import jsonable
    from helpers.machinery.runtime import REPO_ROOT

    path = REPO_ROOT / "results" / "subspace" / "book" / "sentence-bootstrap.json"
    if not path.is_file():
        pytest.skip("the book's subspace runs are not committed")
    draws = json.loads(path.read_text())["results"]
    p = subspace.Params.resolve("book")
    rows = [dict(n=8, k=2, d=0.5, bound=0.1, exact_l2=0.6, l2_violates=True, l1_violates=True),
            dict(n=8, k=4, d=0.5, bound=0.2, exact_l2=0.1, l2_violates=False, l1_violates=False)]
    summary = subspace.case_summary(rows)
    assert math.isnan(subspace.case_summary(rows[:1]).median_looseness)    # none holds: NaN, null in JSON
    assert math.isnan(subspace.CaseSummary.of(jsonable(subspace.case_summary(rows[:1]))).median_looseness)
    stored = json.loads(json.dumps(jsonable(summary)))                  # as a saved Result holds it
    res = subspace.Result(settings=p.cache_key(), random=[], tightness={}, tightness_m=0, model_description="",
                          n_sentences=0, n_real_tokens=0, n_hidden_states=0, real_model=[], appendix_a=rows,
                          appendix_a_summary=stored,
                          cdf_values={}, cdf_stats=[], second_task_stats=[], paper_medians=[], sentence_draws=draws)
    assert res.settings.sphere_dims == p.sphere_dims and res.appendix_a_summary == summary
    assert isinstance(res.sentence_draws.cls_uni, tuple) and res.sentence_draws.n == draws["n"]
    out = json.loads(json.dumps(res.to_json()))
    assert out["sentence_draws"] == draws and list(out["sentence_draws"]) == list(draws)
    assert out["settings"] == json.loads(json.dumps(p.cache_key())) and list(out["settings"]) == list(p.cache_key())
    assert out["appendix_a_summary"] == stored and subspace.Result.from_json(out).appendix_a_summary == summary
