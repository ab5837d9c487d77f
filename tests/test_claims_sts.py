"""The STS chapter's central claims, asserted on its `ci` result (all seven sets, 150 pairs each)."""

import numpy as np
import pytest
from testutil import ci_result

from helpers import experiments


@pytest.fixture(scope="module")
def res():
    return ci_result(experiments.sts)


@pytest.fixture(scope="module")
def run(res):
    return res.runs[res.models[0]]


def test_softdecay_makes_the_sentence_embeddings_more_uniform(run):
    """Table 4: sentence-level SoftDecay lowers EV₁, log RBF_dis and TokenUni on every set."""
    for d, t in run["table4"].items():
        for metric in ("EV1", "RBF_dis", "TokenUni"):
            assert t["SoftDecay"][metric] < t["vanilla"][metric], (d, metric)


def test_softdecay_keeps_local_structure_better_than_whitening(res, run):
    """Figure 6: SoftDecay has the lower LSDS (the paper: on all sets)."""
    assert res.lsds_wins[res.models[0]] == len(run["lsds"]) == len(res.datasets)


def test_softdecay_lifts_the_small_singular_values_and_keeps_the_largest(run):
    """Figure 3: per layer, the largest singular value is kept and the median normalised one rises."""
    for before, after in zip(run["cdf"]["before"], run["cdf"]["after"], strict=True):
        b, a = np.asarray(before), np.asarray(after)
        assert a.max() == pytest.approx(b.max(), rel=1e-6)
        assert np.median(a / a.max()) > 2 * np.median(b / b.max())


def test_post_processing_leaves_little_to_gain_on_a_contrastive_encoder(res):
    """Table 1 on all-MiniLM-L6-v2: no post-processing beats the raw model by more than a point on
    average, whitening loses, and token-level SoftDecay stays within a point of the raw model."""
    avg = res.averages[res.models[0]]
    assert max(v for k, v in avg.items() if k != "vanilla") < avg["vanilla"] + 1.0
    assert avg["whitening"] < avg["vanilla"] - 1.0
    assert abs(avg["SoftDecay (token)"] - avg["vanilla"]) < 1.0


def test_the_token_level_encoder_ranks_related_sentences_higher(res):
    cos = np.asarray(res.encoder_demo["cosine"])
    labels = res.encoder_demo["labels"]
    g, i, s = (labels.index(x) for x in ("guitar", "instrument", "stocks"))
    assert cos[g, i] > cos[g, s] + 0.3 and np.allclose(np.diag(cos), 1.0, atol=1e-5)
