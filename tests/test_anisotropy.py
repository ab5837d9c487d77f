"""Godey et al. helpers: isotropic baselines, drift norm, streaming anisotropy, fixed point, drift block."""

import math

import numpy as np
import pytest
import torch

from helpers.core import measures as M
from helpers.experiments import anisotropy as A


def test_isotropic_gaussian_cosine_mean_and_95th_percentile():
    for d in (64, 768):
        c = A.sample_isotropic_cosines(d, 20_000, seed=d)
        assert abs(c.mean()) < 4 / math.sqrt(20_000 * d) + 1e-3
        q = A.isotropic_cosine_quantile(0.95, d)
        assert np.quantile(c, 0.95) == pytest.approx(q, rel=0.05)
    # large d: the exact 95th percentile tends to 1.645/sqrt(d)
    assert A.isotropic_cosine_quantile(0.95, 4096) * math.sqrt(4096) == pytest.approx(1.645, rel=0.01)
    assert A.isotropic_cosine_quantile(0.95, 16) * 4 != pytest.approx(1.645, rel=0.001)


def test_isotropic_pdf_integrates_to_one():
    c = np.linspace(-1, 1, 20001)
    for d in (3, 16, 768):
        assert np.trapezoid(A.isotropic_cosine_pdf(c, d), c) == pytest.approx(1.0, abs=1e-3)


def test_drift_norm_of_centred_set_is_zero():
    X = torch.randn(100, 16) + 3
    assert M.mean_norm(X - X.mean(0)).item() == pytest.approx(0.0, abs=1e-5)
    assert M.mean_norm(X).item() > 1


def test_sample_pairs_distinct_and_in_range():
    p = A.sample_pairs(10, 5000, seed=0)
    assert (p[:, 0] != p[:, 1]).all() and p.min() >= 0 and p.max() < 10
    counts = torch.bincount(p[:, 1], minlength=10).float()
    assert counts.min() > 400   # roughly uniform


def test_layer_accumulator_exact_cosine_matches_brute_force():
    g = torch.Generator().manual_seed(0)
    layers_a = [torch.randn(30, 8, generator=g) + 1 for _ in range(3)]
    layers_b = [torch.randn(20, 8, generator=g) - 0.5 for _ in range(3)]
    acc = A.LayerAccumulator(A.sample_pairs(50, 2000, seed=1))
    acc.add(layers_a)
    acc.add(layers_b)
    r = acc.result()
    for li in range(3):
        X = torch.cat([layers_a[li], layers_b[li]]).double()
        U = X / X.norm(dim=1, keepdim=True)
        C = U @ U.T
        brute = (C.sum() - 50) / (50 * 49)
        assert r["cos_exact"][li] == pytest.approx(brute.item(), abs=1e-10)
        assert r["cos_sampled"][li] == pytest.approx(brute.item(), abs=5 * r["cos_sampled_se"][li] + 1e-3)
        assert r["mean_norm"][li] == pytest.approx(X.mean(0).norm().item(), rel=1e-6)
    assert r["tokens"] == 50 and list(r["dims"]) == [8, 8, 8]


def test_fixed_point_finder_recovers_planted_point():
    norms = np.geomspace(0.1, 1000, 15)
    planted = 27.7
    gap_fn = lambda n: math.sqrt(planted**2 + 0.3) - math.sqrt(n**2 + 0.3)  # noqa: E731
    gap = np.array([gap_fn(n) for n in norms])
    coarse = A.find_fixed_point(norms, gap)
    assert coarse == pytest.approx(planted, rel=0.15)
    assert A.find_fixed_point(norms, gap, refine=gap_fn) == pytest.approx(planted, rel=1e-6)
    assert A.find_fixed_point(norms, np.ones_like(norms)) is None


def test_bert_block_drift_properties():
    E, layer = A.bert_block(0, hidden=64, heads=4, intermediate=128)
    assert E.std().item() == pytest.approx(0.02, rel=0.05)
    sw = A.drift_sweep(E, layer, [0.0, 1.0, 100.0], n_seq=2, seq_len=16, seed=0)
    # the block ends with LayerNorm (gamma = 1, beta = 0): output norm sqrt(d) whatever the bias
    assert np.allclose(sw["out_norm"], math.sqrt(64), rtol=1e-3)
    assert sw["in_cos"][0] < 0.2 and sw["in_cos"][-1] > 0.99
    assert np.all(sw["row_max"] >= sw["row_median"]) and np.all(sw["row_median"] >= sw["row_min"])
    assert sw["row_max"][0] == pytest.approx(1 / 16, rel=0.05)   # near-uniform attention without drift


def test_block_with_qk_matches_layer_projection():
    E, layer = A.bert_block(1, hidden=32, heads=4, intermediate=64)
    x = E[torch.randint(0, E.shape[0], (2, 8))]
    r = A.block_with_qk(layer, x)
    q_direct = layer.attention.self.query(x).view(2, 8, 4, 8).transpose(1, 2)
    assert torch.allclose(r["q"], q_direct)
    assert torch.allclose(r["P"].sum(-1), torch.ones(2, 4, 8), atol=1e-6)


def test_unreachable_hub_model_fails_with_a_clear_message(monkeypatch):
    from helpers.hf import models

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(models.ModelUnavailable, match="hub"):
        models.load("bert-base-uncased-not-cached-anywhere")
