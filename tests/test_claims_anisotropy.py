"""The anisotropy chapter's central claims (Godey et al. §3, App. A-B; issue 15), asserted on its `ci`-scale
result: all-MiniLM-L6-v2, AntiBERTy and rxnmapper's ALBERT with their untrained twins, and EfficientNet-Lite0."""

import numpy as np
import pytest
from testutil import ci_result

from helpers.core.anisotropy import isotropic_cosine_quantile
from helpers.experiments import anisotropy


@pytest.fixture(scope="module")
def res():
    return ci_result(anisotropy)


def test_result_round_trips_through_json(res):
    again = anisotropy.Result.from_json(res.to_json())
    assert [m["label"] for m in again.models] == [m["label"] for m in res.models]
    assert np.allclose(again.models[0]["cos_exact"], res.models[0]["cos_exact"])


def test_every_transformer_has_an_untrained_twin_and_the_cnn_has_none(res):
    names = [(m["name"], m["trained"]) for m in res.models]
    for name in ("all-MiniLM-L6-v2", "AntiBERTy", "rxnmapper-ALBERT"):
        assert (name, True) in names and (name, False) in names
    assert ("EfficientNet-Lite0", True) in names and ("EfficientNet-Lite0", False) not in names
    assert all("untrained" in m["description"] for m in res.models if not m["trained"])
    assert len(res.model("all-MiniLM-L6-v2")["cos_exact"]) == 7          # embeddings + 6 layers
    assert len(res.model("AntiBERTy")["cos_exact"]) == 9                 # embeddings + 8 layers
    assert len(res.model("rxnmapper-ALBERT")["cos_exact"]) == 13         # embeddings + 12 (shared) layers


def test_residue_and_atom_models_see_no_unknown_tokens(res):
    assert res.model("AntiBERTy")["unknown_tokens"] == 0
    assert res.model("rxnmapper-ALBERT")["unknown_tokens"] == 0


def test_sampled_pairs_agree_with_the_exact_all_pairs_average(res):
    z = res.sampling_z()
    assert np.median(z) < 2 and z.max() < 5


def test_pretrained_transformer_peaks_are_far_above_the_isotropic_baseline(res):
    """Appendix B: the peak layer of every pretrained Transformer is at least twice the 95th percentile
    of the cosine of isotropic vectors of its width; MiniLM's contrastive last layer is not."""
    for name in ("all-MiniLM-L6-v2", "AntiBERTy", "rxnmapper-ALBERT"):
        m = res.model(name)
        q = [isotropic_cosine_quantile(0.95, int(d)) for d in m["dims"]]
        k = int(np.argmax(m["cos_exact"]))
        assert m["cos_exact"][k] > 2 * q[k], name
    mini = res.model("all-MiniLM-L6-v2")
    assert mini["cos_exact"][-1] < isotropic_cosine_quantile(0.95, int(mini["dims"][-1]))


def test_contrastive_minilm_drops_sharply_in_its_last_layer(res):
    cos = np.asarray(res.model("all-MiniLM-L6-v2")["cos_exact"])
    assert int(cos.argmax()) not in (0, len(cos) - 1)
    assert cos[-1] < 0.6 * cos.max()


def test_untrained_bert_twin_starts_at_one_third(res):
    """The random token-type embedding is one vector shared by every token: with word and position
    embeddings of equal expected norm, the cosine of two tokens is about 1/3."""
    assert res.model("all-MiniLM-L6-v2", False)["cos_exact"][0] == pytest.approx(1 / 3, abs=0.03)


def test_minilm_is_below_its_twin_at_every_layer(res):
    mini, twin = res.model("all-MiniLM-L6-v2"), res.model("all-MiniLM-L6-v2", False)
    assert all(a < b for a, b in zip(mini["cos_exact"], twin["cos_exact"], strict=True))


def test_masked_lm_twins_are_more_anisotropic_than_the_trained_models_at_the_last_layer(res):
    """At initialisation the BERT/ALBERT embeddings (position and token-type vectors shared across
    sequences) make the twins anisotropic; training lowers it."""
    for name in ("AntiBERTy", "rxnmapper-ALBERT"):
        assert res.model(name, False)["cos_exact"][-1] > res.model(name)["cos_exact"][-1], name


def test_removing_the_mean_leaves_nearly_isotropic_representations(res):
    """Biś et al. (2021): the anisotropy is a common direction; without it the cosine is ~0."""
    for m in res.models:
        cen = np.abs(m["cos_centred"])
        assert cen.max() < 0.05 and cen.max() < 0.25 * max(m["cos_exact"]), m["label"]


def test_average_cosine_is_the_squared_normalised_drift(res):
    """avg cos ≈ (‖x̄‖/E‖x‖)²: within 0.02 on nearly every layer, so the paper's drift test is
    nearly a definition; the normalised drift is always significantly rank-correlated."""
    within = sum(m["normalised"]["identity_layers_within"] for m in res.models)
    layers = sum(m["normalised"]["layers"] for m in res.models)
    assert within >= 0.9 * layers
    assert all(m["normalised"]["normalised_spearman_p"] < 0.01 for m in res.models)


def test_cnn_positions_shrink_and_flattened_maps_are_measured(res):
    cnn = res.model("EfficientNet-Lite0")
    v = cnn["vectors_per_layer"]
    assert len(v) == 18 and v[0] == 8 * 112 * 112 and v[-1] == 8 * 7 * 7
    assert len(cnn["map_cos_exact"]) == 18
    assert cnn["dims"][0] == 32 and cnn["dims"][-1] == 1280


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
