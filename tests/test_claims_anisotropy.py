"""The anisotropy chapter's central claims (Godey et al. §3, App. A-B), asserted on its `ci`-scale
result (all-MiniLM-L6-v2 and its untrained twin)."""

import numpy as np
import pytest
from testutil import ci_result

from helpers.core.anisotropy import isotropic_cosine_quantile
from helpers.experiments import anisotropy


@pytest.fixture(scope="module")
def res():
    return ci_result(anisotropy)


def model(res, trained: bool):
    return next(m for m in res.models if m["trained"] == trained)


def test_result_round_trips_through_json(res):
    again = anisotropy.Result.from_json(res.to_json())
    assert [m["label"] for m in again.models] == [m["label"] for m in res.models]
    assert np.allclose(again.models[0]["cos_exact"], res.models[0]["cos_exact"])


def test_measures_pretrained_model_and_its_untrained_twin(res):
    assert [m["trained"] for m in res.models] == [True, False]
    assert all(len(m["cos_exact"]) == 7 and m["tokens"] > 2000 for m in res.models)   # embeddings + 6 layers


def test_sampled_pairs_agree_with_the_exact_all_pairs_average(res):
    z = res.sampling_z()
    assert np.median(z) < 2 and z.max() < 4.5


def test_pretrained_layers_are_far_above_the_isotropic_baseline(res):
    m = model(res, True)
    q = [isotropic_cosine_quantile(0.95, int(d)) for d in m["dims"]]
    assert all(c > qq for c, qq in zip(m["cos_exact"][1:], q[1:], strict=True))
    assert max(m["cos_exact"]) > 2 * q[0]


def test_contrastive_minilm_drops_sharply_in_its_last_layer(res):
    cos = np.asarray(model(res, True)["cos_exact"])
    assert int(cos.argmax()) not in (0, len(cos) - 1)
    assert cos[-1] < 0.6 * cos.max()


def test_untrained_bert_twin_starts_anisotropic_at_the_embeddings(res):
    """The random token-type embedding adds one vector to every token."""
    twin, trained = model(res, False), model(res, True)
    assert twin["cos_exact"][0] > 0.2 and twin["cos_exact"][0] > 2 * trained["cos_exact"][0]


def test_drift_and_anisotropy_tests_are_reported_per_model(res):
    for m in res.models:
        c = m["correlation"]
        assert -1 <= c["spearman_r"] <= 1 and 0 <= c["spearman_p"] <= 1 and 0 <= c["pearson_p"] <= 1


def test_isotropic_monte_carlo_matches_the_exact_law(res):
    for g in res.gaussian:
        assert abs(g["mc_mean"]) < 5 / np.sqrt(20_000 * g["d"])
        assert g["mc_q95"] == pytest.approx(g["exact_q95"], rel=0.04)
    big = max(res.gaussian, key=lambda g: g["d"])
    assert big["exact_q95"] == pytest.approx(big["asymptotic_q95"], rel=0.01)
