"""The drift chapter's central claims (Godey et al. §4), asserted on its `ci`-scale result."""

import numpy as np
import pytest
from testutil import ci_result

from helpers.experiments import drift


@pytest.fixture(scope="module")
def res():
    return ci_result(drift)


def test_result_round_trips_through_json(res):
    again = drift.Result.from_json(res.to_json())
    assert again.norms == res.norms and np.allclose(again.stat("out_cos"), res.stat("out_cos"))


def test_output_norm_is_pinned_at_sqrt_d_by_the_final_layernorm(res):
    assert np.allclose(res.stat("out_norm"), np.sqrt(res.hidden), rtol=1e-3)


def test_fixed_point_is_sqrt_d(res):
    """E‖x + b‖ = E‖T(x + b)‖ where the input norm reaches √d (refined and per seed)."""
    assert res.fixed_point_refined == pytest.approx(np.sqrt(res.hidden), rel=0.01)
    assert len(res.fixed_point_per_seed) == len(res.seeds)
    for n_star in res.fixed_point_per_seed:
        assert n_star == pytest.approx(np.sqrt(res.hidden), rel=0.05)


def test_drift_makes_inputs_anisotropic_and_output_cosine_is_above_input(res):
    in_cos, out_cos = res.stat("in_cos").mean(0), res.stat("out_cos").mean(0)
    assert in_cos[0] < 0.05 and in_cos[-1] > 0.999
    assert np.all(out_cos >= in_cos - 1e-6)


def test_queries_and_keys_inherit_the_drift(res):
    """Q and K are isotropic at N = 0 (zero-initialised biases), follow the input's cosine, and
    their norm grows linearly in N at large N."""
    N = np.asarray(res.norms)
    for name in ("q", "k"):
        cos = res.stat(f"{name}_cos").mean(0)
        assert abs(cos[0]) < 0.01 and cos[-1] > 0.999
        big = N >= 100
        per_n = res.stat(f"{name}_norm").mean(0)[big] / N[big]
        assert per_n.max() / per_n.min() < 1.1


def test_score_spread_grows_with_the_bias_norm(res):
    sd = res.stat("score_std").mean(0)
    assert np.all(np.diff(sd) > 0)
    assert sd[-1] > 1000 * sd[0]


def test_softmax_is_uniform_without_drift_and_sharper_with_it(res):
    row_max, seq_min = res.stat("row_max"), res.stat("seq_min")
    assert row_max[:, 0] == pytest.approx(1 / res.seq_len, rel=0.05)
    assert np.all(row_max[:, -1] > 2 / res.seq_len)
    assert np.all(seq_min[:, -1] < 0.5 / res.seq_len)
    n_star = np.asarray(res.norms) <= res.fixed_point_refined     # negligible up to the fixed point
    assert np.all(row_max[:, n_star] < 1.05 / res.seq_len)


def test_reference_model_norms_are_the_same_order_as_the_fixed_point(res):
    norms = res.reference["layer_norms"]
    assert 0.1 < min(norms) / res.fixed_point_refined and max(norms) / res.fixed_point_refined < 10


def test_the_output_drifts_as_the_bias_grows(res):
    """Issue 15: Fig. 6b's E‖T(x+b)‖ is √d by construction; ‖E T(x+b)‖ is what rises with N — from well
    below √d without a bias to near √d at the largest N, as the outputs align."""
    m = res.stat("out_mean_norm").mean(0)                     # (norms,)
    assert m[0] < 0.5 * np.sqrt(res.hidden) and m[-1] > 0.9 * np.sqrt(res.hidden)
    assert np.all(np.diff(m) > -1e-3 * np.sqrt(res.hidden))
