"""The anisotropy chapter's central claims (Godey et al. §3, App. A-B), asserted on its `ci`-scale
result: all-MiniLM-L6-v2, AntiBERTy and rxnmapper's ALBERT with their untrained twins, and EfficientNet-Lite0."""

import dataclasses

import numpy as np
import pytest
from testutil import ci_result

from helpers.core.anisotropy import ISO_SHARE, isotropic_cosine_quantile
from helpers.experiments import anisotropy


@pytest.fixture(scope="module")
def res():
    return ci_result(anisotropy)


def test_result_round_trips_through_json(res):
    again = anisotropy.Result.from_json(res.to_json())
    assert [m.label for m in again.models] == [m.label for m in res.models]
    assert np.allclose(again.models[0].cos_exact, res.models[0].cos_exact)


def test_every_transformer_has_an_untrained_twin_and_the_cnn_has_none(res):
    names = [(m.name, m.trained) for m in res.models]
    for name in ("all-MiniLM-L6-v2", "AntiBERTy", "rxnmapper-ALBERT"):
        assert (name, True) in names and (name, False) in names
    assert ("EfficientNet-Lite0", True) in names and ("EfficientNet-Lite0", False) not in names
    assert all("untrained" in m.description for m in res.models if not m.trained)
    assert len(res.model("all-MiniLM-L6-v2").cos_exact) == 7          # embeddings + 6 layers
    assert len(res.model("AntiBERTy").cos_exact) == 9                 # embeddings + 8 layers
    assert len(res.model("rxnmapper-ALBERT").cos_exact) == 13         # embeddings + 12 (shared) layers


def test_residue_and_atom_models_see_no_unknown_tokens(res):
    assert res.model("AntiBERTy").other["unknown_tokens"] == 0
    assert res.model("rxnmapper-ALBERT").other["unknown_tokens"] == 0


def test_sampled_pairs_agree_with_the_exact_all_pairs_average(res):
    z = res.sampling_z()
    assert np.median(z) < 2 and z.max() < 5


def test_pretrained_transformer_peaks_are_far_above_the_isotropic_baseline(res):
    """Appendix B: the peak layer of every pretrained Transformer is at least twice the 95th percentile
    of a single isotropic pair's cosine at its width (the paper's Fig. 18 line); MiniLM's contrastive
    last layer is below that line but above the null of an average over the sampled pairs."""
    for name in ("all-MiniLM-L6-v2", "AntiBERTy", "rxnmapper-ALBERT"):
        m = res.model(name)
        q = [isotropic_cosine_quantile(0.95, int(d)) for d in m.dims]
        k = int(np.argmax(m.cos_exact))
        assert m.cos_exact[k] > 2 * q[k], name
    mini = res.model("all-MiniLM-L6-v2")
    assert mini.cos_exact[-1] < isotropic_cosine_quantile(0.95, int(mini.dims[-1]))
    assert mini.cos_exact[-1] > res.null_q95(mini.dims[-1])
    assert res.null_q95(384) == pytest.approx(1.645 / np.sqrt(384 * res.n_pairs), rel=1e-3)


def test_contrastive_minilm_drops_sharply_in_its_last_layer(res):
    cos = np.asarray(res.model("all-MiniLM-L6-v2").cos_exact)
    assert int(cos.argmax()) not in (0, len(cos) - 1)
    assert cos[-1] < 0.6 * cos.max()


def test_untrained_bert_twin_starts_at_one_third(res):
    """The random token-type embedding is one vector shared by every token: with word and position
    embeddings of equal expected norm, the cosine of two tokens is about 1/3."""
    assert res.model("all-MiniLM-L6-v2", False).cos_exact[0] == pytest.approx(1 / 3, abs=0.03)


def test_minilm_is_below_its_twin_at_every_layer(res):
    mini, twin = res.model("all-MiniLM-L6-v2"), res.model("all-MiniLM-L6-v2", False)
    assert all(a < b for a, b in zip(mini.cos_exact, twin.cos_exact, strict=True))


def test_masked_lm_twins_are_more_anisotropic_than_the_trained_models_at_the_last_layer(res):
    """At initialisation the BERT/ALBERT embeddings (position and token-type vectors shared across
    sequences) make the twins anisotropic; training lowers it."""
    for name in ("AntiBERTy", "rxnmapper-ALBERT"):
        assert res.model(name, False).cos_exact[-1] > res.model(name).cos_exact[-1], name


def test_removing_the_mean_leaves_a_cosine_near_zero_but_not_an_isotropic_cloud(res):
    """Biś et al. (2021): without the mean the average cosine is ~0 — by construction (centred vectors sum
    to zero). The centred cloud's effective dimension says whether it is isotropic: here it is far
    below the width in every layer of every model, and far below the isotropic Gaussian's band."""
    for m in res.models:
        assert np.abs(m.cos_centred).max() < 0.05, m.label
        eff, d = m.effective_dims(), np.asarray(m.dims, float)
        assert np.all(eff < 0.6 * d), m.label
        assert np.all(eff < res.isotropic_effective_dim(int(d[-1])).low) or m.name == "EfficientNet-Lite0"


def test_planted_clouds_separate_a_drift_from_a_narrow_cone(res):
    """Clusters + drift and isotropic + drift: both have a high raw cosine and a mean-removed cosine of ~0;
    only the effective dimension tells them apart (≈ 3 against ≈ d)."""
    c, g = res.planted["clusters + drift"], res.planted["isotropic + drift"]
    assert c.makeup == "drift + low-dimensional cloud" and g.makeup == "one common direction"
    assert c.pr < 0.05 * c.pr_iso and g.pr == pytest.approx(g.pr_iso, rel=0.05)
    assert c.cos > 0.7 and g.cos > 0.7
    assert abs(c.cos_centred) < 0.05 and abs(g.cos_centred) < 0.01      # ±3 SE at ci's 4,000 pairs
    assert c.effective_dim == pytest.approx(3, rel=0.15)
    assert g.effective_dim == pytest.approx(g.d, rel=0.1)


def test_average_cosine_is_the_squared_normalised_drift(res):
    """avg cos ≈ (‖x̄‖/E‖x‖)²: within 0.02 on nearly every layer, so the paper's drift test is
    nearly a definition; the normalised drift is always significantly rank-correlated."""
    within = sum(m.normalised.identity_layers_within for m in res.models)
    layers = sum(m.normalised.layers for m in res.models)
    assert within >= 0.9 * layers
    assert all(m.normalised.normalised_spearman_p < 0.01 for m in res.models)


def test_cnn_positions_shrink_and_flattened_maps_are_measured(res):
    cnn = res.model("EfficientNet-Lite0")
    v = cnn.other["vectors_per_layer"]
    assert len(v) == 18 and v[0] == 8 * 112 * 112 and v[-1] == 8 * 7 * 7
    assert len(cnn.map_cos_exact) == 18
    assert cnn.dims[0] == 32 and cnn.dims[-1] == 1280


def test_drift_and_anisotropy_tests_are_reported_per_model(res):
    for m in res.models:
        c = m.correlation
        assert -1 <= c.spearman_r <= 1 and 0 <= c.spearman_p <= 1 and 0 <= c.pearson_p <= 1


def test_isotropic_monte_carlo_matches_the_exact_law(res):
    for g in res.gaussian:
        assert abs(g.mc_mean) < 5 / np.sqrt(20_000 * g.d)
        assert g.mc_q95 == pytest.approx(g.exact_q95, rel=0.04)
    big = max(res.gaussian, key=lambda g: g.d)
    assert big.exact_q95 == pytest.approx(big.asymptotic_q95, rel=0.01)


# ------------------------------------------------------------------ findings

def test_findings_on_the_ci_run(res):
    """Every finding names its Godey claim and the models it measured, and is a sample statistic with a real
    interval (the CNN's over images, the drift share over models — with a width though all three models here follow
    the drift —, the drift tests over layers, Biś et al.'s cosine over MiniLM's text chunks); a reduced setting says
    its stand-ins."""
    fs = {f.key: f for f in res.findings()}
    assert set(fs) == {"anisotropy-transformers", "anisotropy-subword", "anisotropy-cnn",
                       "anisotropy-drift-correlation", "anisotropy-centred-isotropy", "anisotropy-centred-spread",
                       "anisotropy-cnn-drift", "anisotropy-single-pair-null"}
    assert all(f.paper == "godey2024" and f.chapter == "anisotropy" and f.section for f in fs.values())
    assert all(f.claim_id.startswith("godey-") and f.reduced and f.members and f.label for f in fs.values())
    assert {k for k, f in fs.items() if f.kind != "claim"} == {"anisotropy-centred-spread"}
    assert fs["anisotropy-centred-spread"].kind == "extension"
    assert all(f.effect.method != "exact" and f.effect.has_interval and not f.flags() for f in fs.values())
    assert fs["anisotropy-transformers"].verdict == "reproduced"
    assert fs["anisotropy-centred-isotropy"].verdict == "reproduced"        # the average cosine: ≈ 0 once centred
    assert fs["anisotropy-centred-isotropy"].effect.method == "jackknife" and fs["anisotropy-centred-isotropy"].caveat
    assert fs["anisotropy-centred-spread"].verdict == "contradicted"        # the shape: far from isotropic
    assert fs["anisotropy-cnn"].verdict == "contradicted"          # flattened maps far from isotropic
    assert fs["anisotropy-cnn"].effect.method == "bootstrap" and fs["anisotropy-cnn"].reduced.startswith("on one CNN")
    assert fs["anisotropy-drift-correlation"].effect.method == "binomial"
    assert fs["anisotropy-cnn-drift"].effect.method == "fisher-z" and fs["anisotropy-cnn-drift"].direction == "none"
    assert all("nearly a definition" in fs[k].caveat for k in ("anisotropy-drift-correlation", "anisotropy-cnn-drift"))
    # the bootstrap's maps are the chapter's flattened maps; MiniLM's jackknife reads the record's vectors
    assert res.cnn_boot.map_cos == pytest.approx(res.model("EfficientNet-Lite0").map_cos_exact, abs=1e-6)
    (jk,) = res.centred_jack
    assert jk.raw == pytest.approx(res.model("all-MiniLM-L6-v2").cos_exact, abs=1e-6)


#: the committed book runs: share of models whose anisotropy follows the drift (positive ρ, exact p < 0.05), with
#: its exact binomial interval over the 8 models; the centred cloud's participation ratio over the isotropic
#: Gaussian's (median, smallest, largest over the pretrained layers)
BOOK_DRIFT_SHARE, BOOK_PR_SHARE = (0.625, 0.245, 0.915), (0.12, 0.005, 0.36)


def _at(values: tuple, i: int, value) -> tuple:
    """`values` with item i replaced."""
    return (*values[:i], value, *values[i + 1:])


def _put(r, old, new):
    """`new` in the place of the record `old` in the Result `r` (records are frozen: a planted change is a new
    record); returns `new`."""
    for name in ("models", "centred_jack"):
        seq = getattr(r, name)
        i = next((i for i, x in enumerate(seq) if x is old), None)
        if i is not None:
            seq[i] = new
            return new
    name = next(n for n in ("cnn_boot", "speech_boot") if getattr(r, n) is old)
    setattr(r, name, new)
    return new


def _book_or_skip():
    from helpers.machinery.runtime import REPO_ROOT

    p = anisotropy.Params.resolve("book")
    folder = REPO_ROOT / "results" / "anisotropy" / "book"
    if (len(list(folder.glob("model-*.json"))) < 2 * len(p.models) - 1 or not list(folder.glob("shape-*.json"))
            or len(list(folder.glob("centred-jackknife-*.json"))) < len(anisotropy.CENTRED_MODELS)):
        pytest.skip("anisotropy book runs not committed")
    return anisotropy.run(p.with_(train_missing=False))     # every run read back from the cache


def test_findings_on_the_committed_book_runs():
    r = _book_or_skip()
    fs = {f.key: f for f in r.findings()}
    expected = {"anisotropy-transformers": ("reproduced", 0.18), "anisotropy-subword": ("reproduced", 0.25),
                "anisotropy-centred-isotropy": ("reproduced", 0.032),
                "anisotropy-centred-spread": ("contradicted", BOOK_PR_SHARE[0]),
                "anisotropy-bytes": ("reproduced", 0.30), "anisotropy-bytes-vs-smollm2": ("contradicted", -0.30),
                "anisotropy-bytes-vs-minilm": ("reproduced", 0.07),
                "anisotropy-speech-whisper-base": ("reproduced", 0.34), "anisotropy-speech": ("reproduced", 0.29),
                "anisotropy-vision": ("reproduced", 0.67), "anisotropy-cnn": ("contradicted", 0.25),
                "anisotropy-drift-correlation": ("inconclusive", BOOK_DRIFT_SHARE[0]),     # 5 of 8 against ½
                "anisotropy-speech-drift": ("contradicted", -0.93),
                "anisotropy-speech-drift-sign": ("reproduced", -0.93), "anisotropy-cnn-drift": ("contradicted", 0.68),
                "anisotropy-single-pair-null": ("reproduced", 0.018)}
    assert list(fs) == list(expected.keys())             # the paper's order; for each claim the closest test first
    for key, (verdict, effect) in expected.items():
        assert fs[key].verdict == verdict, key
        assert fs[key].effect.estimate == pytest.approx(effect, abs=0.01), key
        assert not fs[key].flags(), key                  # no zero-width interval, no procedures that disagree
        assert fs[key].members and fs[key].label, key
    # class claims: a byte-level test names the byte-level model only; the CNN tests name the CNN
    assert fs["anisotropy-bytes-vs-smollm2"].members == fs["anisotropy-bytes-vs-minilm"].members == ("byte-MLM",)
    assert fs["anisotropy-cnn"].members == fs["anisotropy-cnn-drift"].members == ("EfficientNet-Lite0",)
    # the CNN: an interval over 192 images, on one CNN
    cnn = fs["anisotropy-cnn"].effect
    assert cnn.method == "bootstrap" and 0.24 < cnn.low < cnn.high < 0.26
    assert fs["anisotropy-cnn"].reduced == "on one CNN (EfficientNet-Lite0), 192 images"
    # the drift share counts a positive ρ with exact p < 0.05 only: 5 of 8 (6 have p < 0.05, Whisper base's is
    # negative); Pearson (App. A) also counts 5; an exact binomial interval over the 8 models
    share = fs["anisotropy-drift-correlation"]
    assert share.effect.method == "binomial" and share.effect.n == 8
    assert (share.effect.low, share.effect.high) == pytest.approx(BOOK_DRIFT_SHARE[1:], abs=0.001)
    assert r.share_counts() == {"models": 8, "spearman": 5, "pearson": 5, "either_sign": 6, "negative": 1}
    base = r.model_test(r.model("whisper-base"))
    assert base.p_exact < 0.05 and base.rho < 0 and not base.follows()
    for key in ("anisotropy-drift-correlation", "anisotropy-speech-drift", "anisotropy-speech-drift-sign",
                "anisotropy-cnn-drift"):
        assert "nearly a definition" in fs[key].caveat, key
    # the paper's own speech model decides its claims: Whisper base's encoder, every layer above 0.2 (lowest: the
    # last); the paper's drift test on it at its unit, the 7 layers: ρ −0.93, exact p = 34/5040, a Fisher-z interval
    # that excludes 0 and stays negative; Pearson (App. A) is not significant; the bootstrap over recordings: no width
    base_f = fs["anisotropy-speech-whisper-base"]
    assert base_f.claim_id == fs["anisotropy-speech"].claim_id and "one of the paper's three" in base_f.reduced
    assert "encoder" in base_f.measured and int(np.argmin(r.model("whisper-base").cos_exact)) == 6
    t = r.speech_test()
    assert t.layers == 7 and t.p_exact == pytest.approx(34 / 5040, abs=1e-9) and t.pearson_p > 0.05
    lit, sign = fs["anisotropy-speech-drift"], fs["anisotropy-speech-drift-sign"]
    assert lit.effect == sign.effect and lit.effect.method == "fisher-z" and lit.effect.n == 7
    assert -1 < lit.effect.low < lit.effect.high < 0 and lit.direction == "none"
    assert sign.direction == "at most" and sign.margin == 0
    assert t.input_bootstrap.high - t.input_bootstrap.low < 1e-9           # the data do not move the order
    assert r.speech_boot.cos == pytest.approx(r.model("whisper-base").cos_exact, abs=1e-4)
    assert r.speech_boot.mean_norm[-1] > r.speech_boot.mean_norm[0]
    # the CNN's ρ over 18 flattened maps excludes 0 at its unit, the layers (per position instead: p > 0.05)
    c = r.cnn_test()
    assert c.layers == 18 and c.p_exact < 0.01 and fs["anisotropy-cnn-drift"].effect.low > 0.2
    assert r.model_test(r.cnn()).p_exact > 0.05
    assert r.cnn_boot.map_cos == pytest.approx(r.model("EfficientNet-Lite0").map_cos_exact, abs=1e-6)
    # Biś et al.'s cosine: SmolLM2's layer 3 comes closest to the isotropic line at d = 576, about half of it, by the
    # jackknife over its 47 text chunks and by the sampled pairs alike; the jackknife reads the record's vectors
    bis = fs["anisotropy-centred-isotropy"]
    assert bis.effect.method == "jackknife" and bis.effect.n == 47 and "layer 3" in bis.measured
    assert bis.margin == pytest.approx(isotropic_cosine_quantile(0.95, 576))
    assert 0 < bis.effect.low and bis.effect.high < 0.6 * bis.margin
    assert [v for _, v in bis.alternative_verdicts()] == ["reproduced"]
    for j in r.centred_jack:
        assert j.raw == pytest.approx(r.model(j.name).cos_exact, abs=1e-6), j.name
    assert max(row["pairs_reach"] for row in r.centred_rows_by_layer() if "jackknife" not in row) < 0.1
    iso = fs["anisotropy-centred-spread"].effect
    assert (iso.low, iso.high) == (pytest.approx(BOOK_PR_SHARE[1], abs=0.01), pytest.approx(BOOK_PR_SHARE[2], abs=0.01))
    assert iso.high < ISO_SHARE                 # no pretrained layer is one common direction
    assert r.makeup_counts()["one common direction"] == 0
    assert all(a == n for a, n in r.above_isotropic().values())      # every layer above the null of an average
    rows = {row["model"]: row for row in r.shape_rows()}
    assert r.makeup_counts()["no stable drift"] == 1 and rows["all-MiniLM-L6-v2"]["no stable drift"] == 1
    assert all(row["rms10_ratio"] > 1 for row in rows.values() if "rms10_ratio" in row)   # top 10 removed: not noise
    for name in ("all-MiniLM-L6-v2", "byte-MLM"):                                          # narrower than its twin
        assert rows[name]["pr_max"] < rows[name]["twin_pr_min"], name
    assert rows["byte-MLM"]["no stable drift"] == 0 and rows["byte-MLM"]["layers"] == 5   # a stable drift in all
    for name in ("AntiBERTy", "whisper-base", "whisper-tiny.en"):                          # broader than their twins
        assert rows[name]["pr_min"] > rows[name]["twin_pr_max"], name
    smol = r.shape("SmolLM2-135M-Instruct")
    assert min(smol.drift_over_top) < 1 and min(smol.pr) < 5                       # a near-line outweighs x̄
    assert max(r.shape("SmolLM2-135M-Instruct", False).mean_split_cos) < 0.9            # the twin: no stable drift
    fn = r.final_norm                                     # SmolLM2's last block and its final norm both lower it
    assert fn.previous > fn.before + 0.05 and fn.before > fn.after + 0.05
    assert fn.after == pytest.approx(r.model("SmolLM2-135M-Instruct").cos_exact[-1], abs=0.03)
    zeroed = {row["model"]: row for row in r.zeroed_rows()}
    assert set(zeroed) == {"all-MiniLM-L6-v2", "byte-MLM", "AntiBERTy", "rxnmapper-ALBERT"}
    assert all(row["below_twin"] >= row["layers"] - 1 for row in zeroed.values())    # "training lowered it" …
    assert sum(row["below_zeroed"] for row in zeroed.values()) <= 1                   # … only against the shared vector


def test_the_claims_these_findings_decide_on_the_committed_book_runs():
    """The registry's verdicts from these tests: the speech claim reads two ways on one model (mixed); the class
    claims (CNNs, byte- and character-level models, vision Transformers) are tested on one member each; the
    Transformers that follow the drift, 5 of 8, do not settle "most"."""
    from helpers.experiments import findings as F

    fs = _book_or_skip().findings()
    claims = {c.id: c for c in F.claims("godey2024")}
    j = F.judge(claims["godey-fig5-speech"], fs)
    assert j.verdict == "mixed" and {f.key for f in j.deciding} == {"anisotropy-speech-drift",
                                                                      "anisotropy-speech-drift-sign"}
    assert F.judge(claims["godey-fig5-transformers"], fs).verdict == "inconclusive"        # "most": more than half
    assert F.judge(claims["godey-bis-centred"], fs).verdict == "reproduced"
    for cid in ("godey-fig4-cnn", "godey-fig5-cnn", "godey-fig2-bytes-higher", "godey-fig2-character",
                "godey-fig3-vision"):
        assert claims[cid].class_of and F.judge(claims[cid], fs).verdict == "on one model", cid


def test_a_planted_isotropic_centred_cloud_changes_the_verdict(res):
    """Plant a centred cloud with the standard errors an isotropic cloud would give (E[cos²] = 1/d) in
    every layer of every Transformer: the centred-isotropy finding turns to reproduced. Plant a flat
    CNN: its finding turns to reproduced too."""
    import copy
    from dataclasses import replace

    planted = copy.deepcopy(res)              # the records are frozen: each planted one replaces its record
    planted.shapes = [replace(s_, pr=list(np.asarray(s_.pr_iso) * (1 + 0.05 * np.sin(np.arange(len(s_.pr_iso))))))
                      for s_ in planted.shapes]  # the spectrum runs: about an isotropic Gaussian's participation ratio
    ts = {m.name for m in planted.transformers()}
    planted.models = [replace(m, cos_centred=[0.0] * len(m.dims),
                              cos_centred_se=list(1 / np.sqrt(np.asarray(m.dims, float) * planted.n_pairs)))
                      if m.trained and m.name in ts else m for m in planted.models]
    b = planted.cnn_boot
    planted.cnn_boot = replace(b, map_cos=[0.01] * len(b.map_cos),
                               median_draws=list(0.01 + 0.01 * np.sin(np.arange(len(b.median_draws)))))
    before = {f.key: f.verdict for f in res.findings()}
    after = {f.key: f.verdict for f in planted.findings()}
    key = "anisotropy-centred-spread"
    assert before[key] == "contradicted" and after[key] == "reproduced"
    assert before["anisotropy-cnn"] == "contradicted" and after["anisotropy-cnn"] == "reproduced"


def test_spectrum_runs_classify_every_layer_and_hold_their_isotropic_reference(res):
    """Each spectrum run holds, per layer, the centred cloud's participation ratio, its isotropic
    reference of the same n and d, and the split-half cosine of the mean; every pretrained layer gets one
    `MAKEUP` class."""
    from helpers.core.anisotropy import MAKEUP, isotropic_participation_ratio

    assert {(s_.name, s_.trained) for s_ in res.shapes} == {
        ("all-MiniLM-L6-v2", True), ("all-MiniLM-L6-v2", False), ("rxnmapper-ALBERT", True),
        ("rxnmapper-ALBERT", False)}
    for s_ in res.shapes:
        d = np.asarray(s_.dims)
        assert np.all(np.asarray(s_.pr) <= d) and np.all(np.asarray(s_.pr) >= 1)
        assert s_.pr_iso[0] == pytest.approx(isotropic_participation_ratio(s_.tokens, int(d[0])))
        assert all(-1 <= c <= 1 for c in s_.mean_split_cos)
        assert set(s_.makeup()) <= set(MAKEUP)
    counts = res.makeup_counts()
    assert sum(counts[k] for k in MAKEUP) == counts["layers"] == 7 + 13


def test_zeroed_twins_start_near_zero_instead_of_one_third(res):
    """The twin with the token-type embedding zeroed has no shared vector at the embeddings: its average
    cosine there is near 0 where the ordinary twin's is near 1/3."""
    rows = {r["model"]: r for r in res.zeroed_rows()}
    assert set(rows) == {"all-MiniLM-L6-v2", "AntiBERTy", "rxnmapper-ALBERT"}
    assert rows["all-MiniLM-L6-v2"]["twin_emb"] == pytest.approx(1 / 3, abs=0.03)
    assert abs(rows["all-MiniLM-L6-v2"]["zeroed_emb"]) < 0.05
    assert all(r["zeroed_emb"] < r["twin_emb"] - 0.1 for r in rows.values())
    assert all("token-type embedding zeroed" in z.description for z in res.zeroed)


def test_planted_effects_change_the_new_findings_verdicts():
    """On the committed book runs: a speech layer at 0.15 contradicts 'at least 0.2 at every layer'; the byte
    MLM 0.4 higher at every layer makes it more anisotropic than SmolLM2; a DINOv2 at −0.05 at every layer is
    below the null; a CNN whose flattened maps' cosine does not follow ‖x̄‖₂ across its layers is 'not correlated';
    AntiBERTy at 0.05 in every layer falls below the paper's single-pair line; a mean-removed cosine beyond the
    isotropic line (jackknife and sampled pairs alike) contradicts Biś et al."""
    import copy

    def level(m, layer: int, value: float):
        """Move a layer's level to `value`, its leave-one-input-out values with it: the model's record with the
        change, in its place in `r`."""
        shift = value - m.cos_exact[layer]
        loo = _at(m.cos_exact_loo, layer, tuple(v + shift for v in m.cos_exact_loo[layer]))
        return _put(r, m, dataclasses.replace(m, cos_exact=_at(m.cos_exact, layer, value),
                                              cos_sampled=_at(m.cos_sampled, layer, value), cos_exact_loo=loo))

    r = copy.deepcopy(_book_or_skip())
    level(r.model("whisper-tiny.en"), 4, 0.15)
    b = r.model("byte-MLM")
    for i, c in enumerate(list(b.cos_exact)):
        b = level(b, i, c + 0.4)
    dino = r.model("DINOv2-S/14")
    for i in range(dino.layers):
        dino = level(dino, i, -0.05)
    order = np.argsort(np.argsort(r.cnn_boot.map_mean_norm))     # the rank of each layer's ‖x̄‖₂
    _put(r, r.cnn_boot, dataclasses.replace(r.cnn_boot, map_cos=tuple(0.3 + 0.01 * ((7 * int(k)) % 18)
                                                                       for k in order)))   # a scrambled rank order
    anti = r.model("AntiBERTy")                        # 0.05 on every layer: below the single-pair line at d = 512
    for i in range(anti.layers):
        anti = level(anti, i, 0.05)
    smol = r.model("SmolLM2-135M-Instruct")            # layer 3 beyond the line at d = 576 (±0.069)
    jk = next(j for j in r.centred_jack if j.name == "SmolLM2-135M-Instruct")
    loo = tuple(0.09 + 0.001 * np.sin(np.arange(len(jk.leave_one_out[3]))))
    _put(r, jk, dataclasses.replace(jk, centred=_at(jk.centred, 3, 0.09), leave_one_out=_at(jk.leave_one_out, 3, loo)))
    _put(r, smol, dataclasses.replace(smol, cos_centred=_at(smol.cos_centred, 3, 0.09)))
    fs = {f.key: f.verdict for f in r.findings()}
    assert abs(r.cnn_test().rho) < 0.3
    assert fs["anisotropy-single-pair-null"] == "contradicted"
    assert fs["anisotropy-speech"] == "contradicted"
    assert fs["anisotropy-bytes-vs-smollm2"] == "reproduced"
    assert fs["anisotropy-vision"] == "contradicted"
    assert fs["anisotropy-cnn-drift"] == "not detected"
    assert fs["anisotropy-centred-isotropy"] == "contradicted"


def test_whisper_base_turned_toward_no_correlation_flips_its_literal_test():
    """Whisper base's 7 layers: a ρ near 0 leaves 'cannot be correlated' standing (the literal test: not detected)
    and leaves the sign undecided; a strong positive ρ (what a drift explanation needs) contradicts the paper's
    point; a perfect negative rank order keeps a width over the layers (never a zero-width, inconclusive point)."""
    import copy

    r0 = _book_or_skip()
    keys = ("anisotropy-speech-drift", "anisotropy-speech-drift-sign")

    def planted(cos):
        r = copy.deepcopy(r0)
        _put(r, r.speech_boot, dataclasses.replace(r.speech_boot, cos=tuple(cos)))
        fs = {f.key: f for f in r.findings()}
        return [fs[k] for k in keys]

    norm = np.asarray(r0.speech_boot.mean_norm)
    rank = np.argsort(np.argsort(norm))                                  # 0 … 6, the order of ‖x̄‖₂
    lit, sign = planted(0.3 + 0.01 * np.array([3, 6, 1, 4, 0, 5, 2])[rank])   # a scrambled order: ρ near 0
    assert abs(lit.effect.estimate) < 0.5 and lit.verdict == "not detected" and lit.excludes()
    assert sign.verdict == "inconclusive"
    lit, sign = planted(0.3 + 0.01 * rank)                               # follows ‖x̄‖₂ perfectly: ρ = +1
    assert lit.verdict == "contradicted" and sign.verdict == "contradicted"
    lit, sign = planted(0.3 - 0.01 * rank)                               # a perfect negative order: ρ = −1
    assert lit.effect.estimate == pytest.approx(-1) and lit.effect.high - lit.effect.low > 0.1
    assert lit.verdict == "contradicted" and sign.verdict == "reproduced" and not lit.flags()


def test_the_sign_aware_share_drops_a_negative_correlation():
    """Turn MiniLM's correlation negative (its layers' cosines in the reverse order of ‖x̄‖₂): it stays
    significant, but no longer counts as following the drift; turn every model negative and the share, 0 of 8,
    lies wholly below one half: not "most" (its exact binomial interval keeps a width at 0 of 8)."""
    import copy

    r = copy.deepcopy(_book_or_skip())
    before = r.share_counts()
    def reversed_order(m):
        return _put(r, m, dataclasses.replace(m, cos_exact=tuple(np.sort(m.cos_exact)[np.argsort(np.argsort(
            -np.asarray(m.mean_norm)))])))

    mini = reversed_order(r.model("all-MiniLM-L6-v2"))
    after = r.share_counts()
    assert r.model_test(mini).p_exact < 0.05 and r.model_test(mini).rho < 0
    assert after["either_sign"] == before["either_sign"] and after["spearman"] == before["spearman"] - 1
    assert after["negative"] == before["negative"] + 1
    for m in r.transformers():
        reversed_order(m)
    assert r.share_counts()["spearman"] == 0
    share = {f.key: f for f in r.findings()}["anisotropy-drift-correlation"]
    # 0 of 8 with its exact interval wholly below one half: not "most" (contradicted), the interval keeping a width
    assert share.verdict == "contradicted" and share.effect.low == 0 < share.effect.high < 0.5
