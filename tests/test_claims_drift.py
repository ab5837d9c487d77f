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
    norms = res.reference.layer_norms
    assert 0.1 < min(norms) / res.fixed_point_refined and max(norms) / res.fixed_point_refined < 10


def test_the_output_drifts_as_the_bias_grows(res):
    """Fig. 6b's E‖T(x+b)‖ is √d by construction; ‖E T(x+b)‖ is what rises with N — from well
    below √d without a bias to near √d at the largest N, as the outputs align."""
    m = res.stat("out_mean_norm").mean(0)                     # (norms,)
    assert m[0] < 0.5 * np.sqrt(res.hidden) and m[-1] > 0.9 * np.sqrt(res.hidden)
    assert np.all(np.diff(m) > -1e-3 * np.sqrt(res.hidden))


def test_embedding_layer_makes_q_and_k_anisotropic_without_bias(res):
    """through BERT's embedding layer (shared token-type vector) the inputs have cosine ≈ 1/3
    and Q, K inherit it at N = 0 — the paper's observation; rows of E give isotropic Q, K."""
    emb = "embedding-layer"
    assert res.stat("in_cos", emb)[:, 0].mean() == pytest.approx(1 / 3, abs=0.05)
    for name in ("q_cos", "k_cos"):
        assert res.stat(name, emb)[:, 0].mean() > 0.25
        assert abs(res.stat(name)[:, 0].mean()) < 0.01


def test_most_of_the_score_spread_is_row_constant(res):
    """The pooled sd of the scores (Fig. 7) grows far faster than the within-row sd the softmax sees."""
    big = np.asarray(res.norms) >= 100
    frac = res.stat("score_rowconst_frac").mean(0)
    assert np.all(frac[big] > 0.99)
    assert np.all(res.stat("score_row_sd").mean(0)[big] < 0.01 * res.stat("score_std").mean(0)[big])


def test_attention_departs_from_uniform_only_near_full_alignment(res):
    """Rows of E: uniform (row max < 1.05/L) at every N whose input cosine is below 0.99; for both
    inputs the row maximum first doubles only where the input cosine exceeds 0.9 — far above the
    reference model's layer-wise average cosines."""
    in_cos, row_max = res.stat("in_cos").mean(0), res.stat("row_max").mean(0)
    assert np.all(row_max[in_cos < 0.99] < res.uniform_tol / res.seq_len)
    assert res.last_uniform() >= 0 and in_cos[res.last_uniform()] > 0.99
    for v in ("table", "embedding-layer"):
        rm, cos = res.stat("row_max", v).mean(0), res.stat("in_cos", v).mean(0)
        onset = np.nonzero(rm > 2 * rm[0])[0]
        assert onset.size and cos[onset[0]] > 0.9, v
        assert max(res.reference.layer_cos) < cos[onset[0]] - 0.3, v
        ent = res.stat("entropy_norm", v).mean(0)
        assert ent[-1] < ent[0]                                           # sharper at the largest bias


def test_seed_counts_are_counted_per_variant(res):
    """ci: 2 seeds, the embedding layer on the first one only."""
    assert res.seeds_of() == len(res.seeds) == 2 and res.seeds_of("embedding-layer") == 1
    assert res.variants() == ["table", "embedding-layer"]
    rows = res.softmax_rows()
    assert [r["seeds"] for r in rows] == [2, 1]


# ------------------------------------------------------------------ findings

def test_findings_on_the_ci_run(res):
    fs = {f.key: f for f in res.findings()}
    assert set(fs) == {"drift-output-cosine", "drift-fixed-point", "drift-score-spread", "drift-qk-norm",
                       "drift-qk-without-bias", "drift-sharper-softmax", "drift-low-anisotropy"}
    assert all(f.paper == "godey2024" and f.chapter == "drift" and f.section for f in fs.values())
    assert all(f.kind == "claim" and f.claim_id.startswith("godey-") for f in fs.values())
    assert all(f.effect.n == 2 for k, f in fs.items() if k != "drift-fixed-point")
    for key in ("drift-score-spread", "drift-sharper-softmax", "drift-fixed-point", "drift-qk-norm"):
        assert fs[key].verdict == "reproduced", key
    # "slightly": no size, so on the paper's side it is direction only, and around zero nothing can be excluded
    assert fs["drift-output-cosine"].verdict in ("direction only", "inconclusive")
    # rows of E: Q at N = 0 is isotropic (zero-initialised biases); never "reproduced"
    assert fs["drift-qk-without-bias"].verdict in ("inconclusive", "contradicted")
    assert abs(fs["drift-qk-without-bias"].effect.estimate) < 0.01


def _book_or_skip():
    from helpers.machinery.runtime import REPO_ROOT

    folder = REPO_ROOT / "results" / "drift" / "book"
    names = ("sweeps-table", "sweeps-embedding-layer", "fixed-point", "reference")
    if not all((folder / f"{n}.json").is_file() for n in names):
        pytest.skip("drift book runs not committed")
    return drift.run(drift.Params.resolve("book"))          # every piece read back from the cache


def test_findings_on_the_committed_book_runs():
    """Each book finding's verdict and effect, pinned (3 seeds; the embedding layer on one)."""
    fs = {f.key: f for f in _book_or_skip().findings()}
    expected = {"drift-output-cosine": ("direction only", 6e-6, 2e-6), "drift-fixed-point": ("reproduced", 0.42, 0.01),
                "drift-score-spread": ("reproduced", 6.48, 0.01), "drift-qk-without-bias": ("inconclusive", 3e-5, 1e-5),
                "drift-sharper-softmax": ("reproduced", -0.036, 0.001), "drift-qk-norm": ("reproduced", 3.74, 0.01),
                "drift-low-anisotropy": ("reproduced", 0.0004, 0.0001)}
    for key, (verdict, effect, tol) in expected.items():
        assert fs[key].verdict == verdict, key
        assert fs[key].effect.estimate == pytest.approx(effect, abs=tol), key
    assert fs["drift-low-anisotropy"].effect.high < 0.05          # inside the margin: uniform attention
    # "slightly higher": on the paper's side, with no size to hold it to
    gain = fs["drift-output-cosine"]
    assert gain.primary_verdict == "reproduced" and gain.size_word == "slightly" and gain.margin is None
    assert "states no size" in gain.verdict_words()
    # the block and its inputs are the paper's; N*'s order and the low-anisotropy level are read against MiniLM
    assert fs["drift-output-cosine"].reduced == "" and fs["drift-qk-norm"].reduced == ""
    assert "all-MiniLM-L6-v2 in place of BERT-base" in fs["drift-fixed-point"].reduced
    assert fs["drift-low-anisotropy"].reduced == fs["drift-fixed-point"].reduced


def test_a_planted_effect_changes_the_verdicts(res):
    """Plant effects in the sweeps: Q anisotropic at N = 0, the softmax flatter at the largest bias, the
    attention sharp at the reference model's anisotropy — and see each verdict change."""
    import copy

    planted = copy.deepcopy(res)
    q = np.asarray(planted.stats["q_cos"])
    q[:, 0] = [0.30, 0.32]
    planted.stats["q_cos"] = q.tolist()
    e = np.asarray(planted.stats["entropy_norm"])
    e[:, -1] = e[:, 0] + [0.050, 0.051]
    planted.stats["entropy_norm"] = e.tolist()
    rm = np.asarray(planted.stats["row_max"])
    rm[:, planted.reference_level()] = [3 / res.seq_len, 3.2 / res.seq_len]
    planted.stats["row_max"] = rm.tolist()
    qn = np.asarray(planted.stats["q_norm"])
    qn[:, -1] = qn[:, 0] * [0.50, 0.52]                          # queries shrink as the bias grows
    planted.stats["q_norm"] = qn.tolist()
    oc = np.asarray(planted.stats["out_cos"])
    oc[:, 1] = np.asarray(planted.stats["in_cos"])[:, 1] - [0.010, 0.011]     # the output less aligned at one norm
    planted.stats["out_cos"] = oc.tolist()
    before = {f.key: f.verdict for f in res.findings()}
    after = {f.key: f.verdict for f in planted.findings()}
    assert before["drift-output-cosine"] != "contradicted" and after["drift-output-cosine"] == "contradicted"
    assert before["drift-qk-without-bias"] != "reproduced" and after["drift-qk-without-bias"] == "reproduced"
    assert before["drift-sharper-softmax"] == "reproduced" and after["drift-sharper-softmax"] == "contradicted"
    assert before["drift-low-anisotropy"] != "contradicted" and after["drift-low-anisotropy"] == "contradicted"
    assert before["drift-qk-norm"] == "reproduced" and after["drift-qk-norm"] == "contradicted"
