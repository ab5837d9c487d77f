"""The tse chapter's central claims (Yu & Zhang §1-3.2), asserted on its `ci`-scale result."""

import math

import numpy as np
import pytest
from testutil import ci_result

from helpers.experiments import tse


@pytest.fixture(scope="module")
def res():
    return ci_result(tse)


def test_result_round_trips_through_json(res):
    again = tse.Result.from_json(res.to_json())
    assert np.array_equal(again.figure2["t_sim"], res.figure2["t_sim"])
    assert again.figure5.keys() == res.figure5.keys() and again.summary == res.summary


def test_prop23_is_an_identity_and_lemma24_holds_in_expectation(res):
    assert res.prop23_max_abs_error < 1e-12
    lem = res.lemma24
    assert abs(lem["mc_xi1"] - lem["formula_xi1"]) < 4 * lem["mc_xi1_se"] + 1e-6
    assert abs(lem["mc_xi2"] - lem["formula_xi2"]) < 4 * lem["mc_xi2_se"] + 1e-6


def test_figure1_similarity_escalates_while_gradients_stay_flat(res):
    for kind in ("bert", "albert"):
        t = res.figure1[kind]["t_sim"]
        assert t[-1] > t[0] + 0.2, kind                 # escalation with depth
        assert np.all(np.diff(t) > -0.02), kind         # and (nearly) monotone
    assert res.summary["grad_factor"] < 1.1            # no vanishing gradient: < 10 % per layer


def test_figure2_postnorm_similarity_rises_to_one_with_step1_ratio_near_two(res):
    t = res.figure2["t_sim"].mean(0)
    assert np.all(np.diff(t) > 0) and t[-1] > 0.99
    s = res.summary
    assert s["step1_ratio_first"] == pytest.approx(2.0, abs=0.3)          # σ² = 1/d: ξ₁/ξ₂ ≈ 1 + c = 2
    assert s["step1_ratio_first_other"] > 5                               # σ² = h/d: ≈ 1 + h
    assert s["first_block_above_099_other"] < s["first_block_above_099"]  # the literal reading saturates sooner


def test_figure3_estimate2_beats_estimate1_and_the_rate_tends_to_one_half(res):
    s = res.summary
    assert s["err_est2"] < s["err_est1"]
    assert s["late_contraction"] == pytest.approx(0.5, abs=0.05)          # Remark 2.8: 1/(1 + α²)
    assert s["lemma24_max_rel_err"] < 0.05


def test_figure4_prenorm_escalates_slower_while_the_residual_stream_grows(res):
    s, p = res.summary, res.settings
    assert s["prenorm_tsim_last"] < s["postnorm_tsim_last"]
    pre = res.figure4["t_sim"].mean(0)
    assert pre[p["depth"]] < res.figure2["t_sim"].mean(0)[p["depth"]] - 0.05   # slower at equal depth
    assert s["prenorm_normX_last"] > 2 * s["prenorm_normX_first"]
    assert s["prenorm_normXhat"] == pytest.approx(math.sqrt(p["n_tokens"] * p["d_model"]), rel=1e-3)


def test_figure5_tau_one_keeps_full_diversity_and_small_tau_collapses(res):
    levels = {float(k): v for k, v in res.figure5.items()}
    assert np.allclose(levels[1.0][:, 1:], 1.0, atol=1e-6)   # t_sim does not rise with τ = 1
    assert levels[0.1][:, -1].mean() < 0.15                   # τ = 0.1 still collapses (paper: ~0)
    assert levels[0.5][:, -1].mean() > 0.5                    # τ > 1 − 1/√2: the common part dies out
