"""What the tse experiment computes: one trajectory (core.escalation), the loops over trials and τ
(experiments.tse) and the transformers profile (hf.escalation), on tiny sizes."""

import math

import numpy as np
import pytest
import torch

from helpers.book.params import ParameterError
from helpers.core import escalation as E
from helpers.core import measures as M
from helpers.experiments import tse
from helpers.hf import escalation as H
from helpers.hf.walk import transformer_layers


def test_trials_are_independent_trajectories_with_derived_seeds():
    runs = tse.postnorm_trials(8, 16, 2, depth=3, trials=2, seed=4)
    assert runs["t_sim"].shape == (2, 4) and runs["xi_ratio"].shape == (2, 3, 4) and runs["delta"].shape == (2, 3)
    one = E.postnorm_trajectory(8, 16, 2, 3, seed=4 * 100_003 + 1)
    for k in one:
        assert np.array_equal(runs[k][1], one[k], equal_nan=True), k
    assert not np.array_equal(runs["t_sim"][0], runs["t_sim"][1])


def test_deescalation_with_tau_one_centres_every_block_output():
    div = tse.deescalated_diversity(8, 16, 2, depth=4, runs=2, taus=(1.0, 0.1), seed=1)
    assert np.allclose(div[1.0][:, 1:], 1.0, atol=1e-6)
    assert not np.allclose(div[0.1][:, 1:], 1.0, atol=1e-3)


def test_trajectory_records_the_blocks_own_measures():
    """t_sim of block ℓ's input is that of the previous block's output: recompute block 0 by hand."""
    out = E.postnorm_trajectory(8, 16, 2, 2, seed=3)
    torch.manual_seed(3)
    from helpers.core.blocks import PostNormBlock

    blk = PostNormBlock(16, 2, 64)
    X = E.random_input(8, 16, 10)
    with torch.no_grad():
        Y = blk(X)
    assert out["t_sim"][0] == pytest.approx(float(M.t_sim(X)))
    assert out["t_sim"][1] == pytest.approx(float(M.t_sim(Y)), rel=1e-6)


def test_prop23_error_is_round_off():
    assert E.prop23_error(16, 32, seed=0) < 1e-12


def test_lemma24_monte_carlo_matches_the_formula_and_detects_a_wrong_variance():
    chk = E.lemma24_at_init(16, 32, 4, alpha=1.0, value_scale=1.0, draws=2000, seed=0)
    assert abs(chk.mc_xi1 - chk.formula_xi1) < 4 * chk.mc_xi1_se
    X = E.random_input(16, 32, 0)
    P = torch.softmax(torch.randn(4, 16, 16, generator=torch.Generator().manual_seed(1)), -1)
    wrong = E.lemma24_monte_carlo(X, P, 1.0, value_scale=4.0, draws=2000, seed=0)
    f1, _ = M.expected_xi(X, P, 1.0, 1.0)                 # the formula for a different variance
    assert abs(wrong.mc_xi1 - float(f1)) > 10 * wrong.mc_xi1_se


def test_w_resampling_keeps_its_estimates_consistent():
    out = E.w_resampling(16, 32, 4, depth=3, draws=200, seed=0)
    assert np.allclose(out["r_est2"], 1 + out["est2"] * out["t_sim"])
    assert np.all(np.abs(out["mc_xi1"] - out["formula_xi1"]) / out["formula_xi1"] < 0.05)


def test_prenorm_normalised_input_has_norm_sqrt_nd():
    out = E.prenorm_trajectory(8, 16, 2, depth=3, seed=0)
    assert np.allclose(out["norm_Xhat"], math.sqrt(8 * 16), rtol=1e-3)
    assert np.all(np.diff(out["norm_X"]) > 0)


def test_first_block_above():
    t = np.array([[0.1, 0.5, 0.995, 1.0], [0.1, 0.6, 0.99, 1.0]])
    assert E.first_block_above(t) == 2
    assert E.first_block_above(t[:, :2]) is None


@pytest.mark.parametrize("kind, layers", [("bert", 2), ("albert", 1)])
def test_random_encoder_profile(kind, layers):
    model = H.random_encoder(kind, depth=2, hidden=32, heads=2, intermediate=64, seed=0)
    assert len(transformer_layers(model)) == layers
    ids = torch.randint(5, 100, (2, 6), generator=torch.Generator().manual_seed(0))
    mask = torch.ones(2, 6, dtype=torch.long)
    mask[1, 4:] = 0
    prof = H.escalation_profile(model, ids, mask, grad=(kind == "bert"))
    assert prof["t_sim"].shape == (3,) and prof["t_cos"].shape == (3,)
    if kind == "bert":
        assert prof["grad_norm"].shape == (2,) and np.all(prof["grad_norm"] > 0)
    with pytest.raises(ValueError):
        H.random_encoder("gpt", 2, 32, 2, 64, 0)


def test_params_reject_heads_that_do_not_divide_the_width():
    with pytest.raises(ParameterError, match="d_model"):
        tse.Params.resolve("ci", d_model=100, n_heads=8)
    assert tse.Params.resolve("book").other_value_scale == 8.0
    assert tse.Params.resolve("book", value_scale=8.0).other_value_scale == 1.0


def test_paper_figure2_values_come_from_the_claims_csv():
    claims = tse.paper_claims("Figure 2")
    assert claims["mean xi1/xi2 of step 1 at the first block"] == 2.0
    assert claims["first block where t_sim > 0.99"] == 15.0 and len(claims) == 3
