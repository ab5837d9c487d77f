"""The synthesis chapter reads a model through `tokuni diagnose`'s own twin test: from what the chapter stores
(the model's estimates, every twin's estimates and the paired bootstrap variance, `synthesis.curves_record`), its
`Result.twin_test` flags the same cells, at the same threshold, with the same prediction band and the same power as
the tool's `Diagnosis` of the same measurements. Planted: seven layers, three measures, five twins, a model
shifted in some cells by 1 to 8 standard errors."""

from __future__ import annotations

import numpy as np
import pytest

from helpers.diagnose import measures, run
from helpers.experiments import synthesis

L, K, B = 7, 5, 200


def _planted(seed: int = 0):
    rng = np.random.default_rng(seed)
    names = ("cos", "ev1", "t_sim")
    twin_est = {m: 0.3 + 0.01 * rng.standard_normal((K, L)) for m in names}
    twins = [measures.Measured({m: twin_est[m][k] for m in names},
                               {m: twin_est[m][k] + 3e-3 * rng.standard_normal((B, L)) for m in names})
             for k in range(K)]
    shift = {"cos": np.linspace(0, 8, L) * 0.012, "ev1": np.zeros(L), "t_sim": np.r_[np.zeros(L - 2), 0.1, -0.1]}
    est = {m: twin_est[m].mean(0) + shift[m] for m in names}
    model = measures.Measured(est, {m: est[m] + 3e-3 * rng.standard_normal((B, L)) for m in names})
    return model, twins


def test_the_chapter_and_the_tool_read_a_model_alike():
    model, twins = _planted()
    d = run.Diagnosis({"seed": 0, "layer_names": ["embeddings"] + [f"block {i}" for i in range(1, L)]}, model, twins)
    rec = synthesis.curves_record(model, twins)
    res = synthesis.Result(settings={}, runs=[{"name": "planted", "curves": rec, "layers": L}], draws=B)
    test = res.twin_test("planted")
    assert test.cells == d.cells == 3 * L and test.threshold == d.threshold > 0
    flagged = 0
    for m in d.measures:
        assert np.array_equal(test.differs(m), d.differs(m)), m
        flagged += int(d.differs(m).sum())
        for k in ("estimate", "low", "high"):
            assert np.allclose(res.twin_curve("planted", m)[k], d.curve(m, "twin")[k], rtol=1e-12), (m, k)
    assert 0 < flagged < test.cells                             # the planted shifts are found, not every cell
    assert not d.differs("ev1").any() and d.differs("t_sim")[-2:].all()
    assert test.power() == pytest.approx({k: d.power()[k] for k in ("one_sd", "all_sd")})


def test_the_stored_record_is_what_the_test_reads():
    """`paired_var` is the bootstrap variance of the model's draw minus the twins' mean draw, per layer."""
    model, twins = _planted(1)
    rec = synthesis.curves_record(model, twins)
    v = np.var(model.draws["cos"] - np.mean([t.draws["cos"] for t in twins], 0), axis=0, ddof=1)
    assert np.allclose(rec["cos"]["paired_var"], v, rtol=1e-12)
    assert np.array(rec["cos"]["twins"]).shape == (K, L) and set(rec["cos"]) == {"model", "twins", "paired_var"}


def test_one_twin_band_in_the_code():
    """The old band beside the twin test is gone: the tool and the chapter have one, `prediction_band`."""
    assert not hasattr(measures, "twin_band") and not hasattr(measures, "compare")
