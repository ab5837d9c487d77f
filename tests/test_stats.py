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
