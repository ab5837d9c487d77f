"""The seed statistics shared by the training chapters (`helpers.core.stats`)."""

import numpy as np

from helpers.core.stats import moving_average


def test_moving_average_is_the_mean_of_each_window():
    x = np.arange(10, dtype=float) ** 2
    m = moving_average(x, 3)
    assert m.shape == (8,)
    np.testing.assert_allclose(m, [(x[i] + x[i + 1] + x[i + 2]) / 3 for i in range(8)])
    # a constant history is left unchanged, a ramp is shifted by half a window
    np.testing.assert_allclose(moving_average(np.full(7, 2.5), 4), 2.5)
    np.testing.assert_allclose(moving_average(np.arange(6.0), 3), np.arange(1.0, 5.0))


def test_moving_average_keeps_short_histories_and_marks_divergence():
    np.testing.assert_array_equal(moving_average([1, 2], 5), [1.0, 2.0])     # shorter than a window
    np.testing.assert_array_equal(moving_average([1, 2, 3], 1), [1.0, 2.0, 3.0])
    m = moving_average([1.0, 1.0, np.nan, 1.0, 1.0, 1.0, 1.0], 2)
    assert np.isnan(m[1]) and np.isnan(m[2]) and not np.isnan(m[[0, 3, 4, 5]]).any()


def test_clip_keeps_the_estimate_and_bounds_the_interval():
    from helpers.core.stats import Interval

    iv = Interval(2.3, -2.8, 7.4, 3, "t")
    c = iv.clip(0, 4)
    assert (c.estimate, c.low, c.high, c.n, c.method) == (2.3, 0, 4, 3, "t")
    assert iv.clip(-10, 10) == iv


def test_t_or_nan_is_the_t_interval_or_all_nan_without_values():
    from helpers.core.stats import NAN_INTERVAL, t_interval, t_or_nan

    assert t_or_nan([1.0, 2.0, 4.0]) == t_interval([1.0, 2.0, 4.0])
    iv = t_or_nan([])
    assert iv is NAN_INTERVAL and iv.n == 0 and np.isnan([iv.estimate, iv.low, iv.high]).all()


def test_normal_interval_is_the_estimate_plus_minus_1_96_se():
    from helpers.core.stats import normal_interval

    iv = normal_interval(0.3, 0.01, 500)
    assert (iv.estimate, iv.n, iv.method) == (0.3, 500, "normal")
    assert iv.low == 0.3 - 0.0196 and iv.high == 0.3 + 0.0196


def test_welch_interval_is_scipys_welch_t_interval():
    from scipy import stats

    from helpers.core.stats import welch_interval

    a, b = [60.0, 62.0, 64.0], [55.0, 56.0, 54.0, 57.0, 55.5]
    iv, ci = welch_interval(a, b), stats.ttest_ind(a, b, equal_var=False).confidence_interval()
    assert iv.estimate == np.mean(a) - np.mean(b) and iv.n == 8
    np.testing.assert_allclose([iv.low, iv.high], [ci.low, ci.high])
    assert np.isnan(welch_interval([1.0], b).low) and welch_interval([], b).n == 0
    assert welch_interval([2.0, 2.0], [1.0, 1.0]).text() == "+1.000 [+1.000, +1.000]"   # no spread: no width


def test_jackknife_from_loo_is_jackknife_interval_given_the_leave_one_out_values():
    from helpers.core.stats import jackknife_from_loo, jackknife_interval, t_interval

    x = np.random.default_rng(0).normal(size=12)
    loo = [np.delete(x, i).mean() for i in range(x.size)]
    got, ref = jackknife_from_loo(float(x.mean()), loo), jackknife_interval(x, np.mean)
    assert (got.method, got.n, got.estimate) == ("jackknife", 12, ref.estimate)
    np.testing.assert_allclose([got.low, got.high], [ref.low, ref.high])
    # for the mean the jackknife is the t interval of the values themselves
    t = t_interval(x)
    np.testing.assert_allclose([got.low, got.high], [t.low, t.high])
    assert jackknife_from_loo(float(x.mean()), loo, level=0.99).high > got.high


def test_layer_test_reads_spearman_and_pearson_across_layers():
    from helpers.core.stats import LayerTest, drift_layer_test, layer_test

    x = np.arange(1.0, 9.0)
    up = layer_test(x, x**2)                                    # a perfect rank order, not a straight line
    assert isinstance(up, LayerTest) and up.layers == 8 and up.rho == 1.0 and 0.95 < up.pearson_r < 1
    assert up.p_exact == 2 / 40320 and up.follows() and up.follows("pearson")
    assert up.fisher.method == "fisher-z" and up.fisher.low < 1 and up.fisher.high <= 1
    assert not up.follows(alpha=1e-6)                           # the exact p of 8 layers cannot go below 2/8!
    down = layer_test(x, -x)
    assert down.rho == -1.0 and down.p_exact < 0.05 and not down.follows()
    assert layer_test(x, x**2) is drift_layer_test(tuple(x), tuple(x**2))       # one computation per pair of rows
    boot = up.with_bootstrap([0.9, 0.95, 1.0, 0.97], rho=1.0)
    assert boot.input_bootstrap.method == "bootstrap" and boot.fisher is up.fisher and up.input_bootstrap is None
