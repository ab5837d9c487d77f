"""The STS protocol: the per-subset blocks of the WhiteningBERT files against the official gold
files, both scoring protocols, the paired bootstrap, SoftDecay's sign flips and scale, planted
anisotropy, and the paper-table helpers."""

import re

import numpy as np
import pandas as pd
import pytest
import torch
from scipy import stats
from testutil import seeded_randn

from helpers.core import sts as C
from helpers.data import loaders as L
from helpers.machinery.runtime import REPO_ROOT


def _norm(s: str) -> str:
    return re.sub(r"[^a-z0-9]", "", s.lower())


@pytest.mark.parametrize("year", sorted(L.STS_SUBSET_BLOCKS))
def test_subset_blocks_match_the_official_gold_files(year):
    """Each block of the processed file holds exactly the scored pairs of one official subset, in
    order: the same gold scores and (up to tokenisation and case) the same first sentences."""
    if L.data_root() is None:
        pytest.skip("offline mirror not found")
    w, o = L.load_sts(year, "whiteningbert"), L.load_sts(year, "official")
    assert len(w) == sum(k for _, k in L.STS_SUBSET_BLOCKS[year])
    start = 0
    for subset, k in L.STS_SUBSET_BLOCKS[year]:
        rows = [i for i, s in enumerate(o.subsets) if s == subset]
        assert len(rows) == k, subset
        assert set(w.subsets[start:start + k]) == {subset}
        np.testing.assert_allclose(w.scores[start:start + k], [o.scores[i] for i in rows], atol=1e-3)
        same = np.mean([_norm(w.sentence1[start + j]) == _norm(o.sentence1[i]) for j, i in enumerate(rows)])
        assert same > 0.9, (subset, same)
        start += k


def test_subset_labels_refuse_a_wrong_length():
    with pytest.raises(ValueError, match="blocks add up"):
        L.sts_subset_labels("STS13", 1499)
    assert L.sts_subset_labels("SICK-R", 3) == ["SICK-R"] * 3


def _planted_scores(n=600, seed=0, noise=(1.0, 2.0)):
    rng = np.random.default_rng(seed)
    gold = rng.uniform(0, 5, n)
    subsets = np.repeat(["a", "b", "c"], n // 3)
    return gold, subsets, gold + noise[0] * rng.standard_normal(n), gold + noise[1] * rng.standard_normal(n)


def test_protocols_are_what_they_say():
    gold, subsets, a, _ = _planted_scores()
    a[subsets == "b"] += 3                        # a per-subset offset: invisible per subset, not pooled
    per = [stats.spearmanr(a[subsets == s], gold[subsets == s]).statistic for s in "abc"]
    assert C.score(a, gold, subsets, "subset-mean") == pytest.approx(100 * np.mean(per))
    assert C.score(a, gold, subsets, "pooled") == pytest.approx(100 * stats.spearmanr(a, gold).statistic)
    with pytest.raises(ValueError, match="protocol"):
        C.score(a, gold, subsets, "median")


def test_bootstrap_interval_covers_a_planted_difference():
    """Method b is noisier than a by a planted amount; its population difference (from a very large
    sample) lies inside the 95 % paired interval of a 600-pair sample in at least 17 of 20 samples."""
    gold, subsets, a, b = _planted_scores(n=300_000, seed=99)
    truth = C.score(b, gold, subsets) - C.score(a, gold, subsets)
    assert truth < -5                             # the planted difference is real
    covered = 0
    for seed in range(20):
        g, s, a, b = _planted_scores(seed=seed)
        lo, hi = C.interval(C.paired_bootstrap(a, b, g, s, draws=300, seed=seed))
        covered += lo <= truth <= hi
        assert hi < 0                             # and the interval sees it
    assert covered >= 17


def test_bootstrap_of_a_method_against_itself_is_zero_and_stratified():
    gold, subsets, a, _ = _planted_scores(n=90)
    assert np.all(C.paired_bootstrap(a, a.copy(), gold, subsets, draws=50) == 0)
    idx = C.bootstrap_indices(subsets, 30, 0)
    assert (subsets[idx] == subsets[None]).all()


def _matrix(svals, d=12, seed=0):
    n = len(svals)
    U, _ = torch.linalg.qr(seeded_randn(n + 3, n, seed=seed, dtype=torch.float64))
    V, _ = torch.linalg.qr(seeded_randn(d, n, seed=seed + 1, dtype=torch.float64))
    return U, V, U @ torch.diag(torch.as_tensor(svals, dtype=torch.float64)) @ V.T


def test_sign_flips_count_the_directions_softdecay_reverses():
    """Eq. (2) is negative below |α|: Algorithm 1 maps those directions to −(something) — property 1
    broken — and `sign_flips` counts exactly them."""
    s = [40.0, 10.0, 3.0, 0.9, 0.5, 0.3, 0.1]
    U, V, X = _matrix(s)
    Y = C.softdecay_transform(X, -0.6)
    signs = torch.diagonal(U.T @ Y @ V)
    assert int((signs < 0).sum()) == C.sign_flips(s, -0.6) == 3
    assert C.sign_flips(s, -0.6, scale=s[0]) == 6                 # σ/σ_max: all but the largest


def test_scaled_softdecay_removes_what_the_plain_one_depends_on():
    """σ/σ_max: the output scales with the input (the plain transform does not); σ/√N: a set and the
    same set twice (σ grows by √2) are transformed alike (the plain transform is not)."""
    X = seeded_randn(50, 12, seed=5, dtype=torch.float64) + 2
    torch.testing.assert_close(C.softdecay_scaled(7 * X, -0.6, "max"), 7 * C.softdecay_scaled(X, -0.6, "max"))
    assert not torch.allclose(C.softdecay_transform(7 * X, -0.6), 7 * C.softdecay_transform(X, -0.6), atol=1e-3)
    XX = torch.cat([X, X])
    torch.testing.assert_close(C.softdecay_scaled(XX, -0.6, "sqrt_n")[:50], C.softdecay_scaled(X, -0.6, "sqrt_n"))
    assert not torch.allclose(C.softdecay_transform(XX, -0.6)[:50], C.softdecay_transform(X, -0.6), atol=1e-3)


def _sts_like(n=300, d=16, seed=0):
    """Pairs whose angle follows the gold score and whose norms are random (so only the cosine, not
    the distance, ranks them)."""
    gold = torch.linspace(0, 5, n, dtype=torch.float64)
    e1 = seeded_randn(n, d, seed=seed, dtype=torch.float64)
    e2 = e1 + seeded_randn(n, d, seed=seed + 1, dtype=torch.float64) * (5.5 - gold).unsqueeze(1) / 2
    r = torch.exp(0.5 * seeded_randn(2, n, 1, seed=seed + 2, dtype=torch.float64))
    return r[0] * e1 / e1.norm(dim=1, keepdim=True), r[1] * e2 / e2.norm(dim=1, keepdim=True), gold.tolist(), ["x"] * n


def test_whitening_recovery_grows_with_the_planted_mean():
    """A common vector added to every sentence leaves whitening's output unchanged (it subtracts the
    mean), while the raw cosines lose the order: whitening's recovery over the raw score grows with
    the planted size. De-escalation (τ = 1) is unchanged by it too."""
    e1, e2, gold, sub = _sts_like()
    n = e1.shape[0]
    rec, white, deesc = [], [], []
    for size in (0.0, 0.5, 1.0, 2.0, 4.0):
        X = C.plant(torch.cat([e1, e2]), "mean", size)
        raw = C.score(C.cosines(X[:n], X[n:]), gold, sub)
        w = C.score(C.cosines(*C.apply_method("whitening", X[:n], X[n:])), gold, sub)
        deesc.append(C.score(C.cosines(*C.apply_method("de-escalation", X[:n], X[n:])), gold, sub))
        rec.append(w - raw)
        white.append(w)
    assert np.all(np.diff(rec) > 0)
    assert np.ptp(white) < 1e-6 and np.ptp(deesc) < 1e-6
    assert rec[-1] > 20


def test_plant_spike_adds_a_dominant_direction():
    E = seeded_randn(400, 16, seed=3, dtype=torch.float64)
    ev = [C.uniformity_metrics(C.plant(E, "spike", s))["EV1"] for s in (0.0, 1.0, 4.0)]
    assert ev[0] < ev[1] < ev[2] and ev[2] > 0.8
    with pytest.raises(ValueError, match="kind"):
        C.plant(E, "ring", 1.0)


def test_paper_csv_labels_say_what_the_rows_are():
    t1 = pd.read_csv(REPO_ROOT / "data" / "yan_2022_table1.csv")
    assert "whitening" not in set(t1.method)                            # the paper's whitening rows are NLI-fitted
    assert {"whitening (NLI)", "whitening (NLI)-256", "WhiteBERT"} <= set(t1.method)
    assert "albert-base" in set(t1.model) and "albert-base-v2" not in set(t1.model)


def test_paper_table_helpers_keep_models_apart():
    from helpers.experiments import sts
    from helpers.figures import sts as F

    paper = pd.read_csv(REPO_ROOT / "data" / "yan_2022_table1.csv").to_dict("records")
    res = sts.Result(models=["albert-base-v2", "all-MiniLM-L6-v2"], datasets=["STS-B"], pooling="first_last",
                     alpha=-0.6, scale="ci", runs={}, from_cache={}, averages={}, lsds_wins={}, paper_table1=paper)
    label, rows = F.paper_rows(res, "albert-base-v2")
    assert label == "albert-base" and rows and {r["model"] for r in rows} == {"albert-base"}
    assert {r["model"] for r in F.paper_rows(res, "distilbert-base-uncased")[1]} == {"distilbert-base-uncased"}
    label, rows = F.paper_rows(res, "all-MiniLM-L6-v2")                  # not in the paper: BERT-base as reference
    assert label == "bert-base-cased" and {r["model"] for r in rows} == {"bert-base-cased"}


def test_the_paper_models_names_on_the_path_figure_never_overlap():
    """The path figure's names of the paper's models (raw 52–64: ALBERT, RoBERTa, BERT, DistilBERT within a few
    points) are set so that no two overlap and none crosses the band's bar; a crowded name gets a leader line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.text import Text
    from matplotlib.transforms import Bbox

    from helpers.figures import sts as F

    fig, ax = plt.subplots(figsize=(4.8, 3.6))
    ax.set_xlim(20, 85)
    ax.set_ylim(-15, 45)
    points = [("BERT", 62.97, 8.29), ("DistilBERT", 64.12, 5.66), ("ALBERT", 51.87, 12.19), ("RoBERTa", 59.53, 8.97)]
    bar = (62.97, -10.4, 64.17, 21.6)
    texts = F._label_points(ax, points, avoid=[bar])
    fig.canvas.draw()
    r = fig.canvas.get_renderer()
    boxes = [Text.get_window_extent(t, r) for t in texts]
    assert [t.get_text() for t in texts] == ["ALBERT", "RoBERTa", "BERT", "DistilBERT"]
    assert not any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1:])
    drawn_bar = Bbox(ax.transData.transform([bar[:2], bar[2:]]))
    assert not any(b.overlaps(drawn_bar) for b in boxes)
    assert any(t.arrow_patch is not None for t in texts)                  # at least one name was moved off its point
    plt.close(fig)


def _pairs_with_a_spike(n=90, d=12, size=0.0, seed=0):
    """Sentence pairs whose similarity follows the gold score (three subsets spanning its range), with a
    planted dominant direction of `size` (`plant(..., "spike")`: a per-sentence random coefficient) that
    the raw cosine suffers from and whitening removes."""
    g = torch.Generator().manual_seed(seed)
    gold = torch.linspace(0, 5, n, dtype=torch.float64)
    e1 = torch.randn(n, d, generator=g, dtype=torch.float64)
    e2 = e1 + torch.randn(n, d, generator=g, dtype=torch.float64) * (5.5 - gold).unsqueeze(1) / 3
    both = C.plant(torch.cat([e1, e2]), "spike", size, seed)
    return both[:n], both[n:], gold.numpy(), np.tile(["a", "b", "c"], n // 3)


def test_refit_bootstrap_pairs_the_draws_and_scores_vanilla_as_the_fixed_bootstrap():
    e1, e2, gold, sub = _pairs_with_a_spike(size=1.0)
    draws = C.refit_bootstrap(e1, e2, gold, sub, ("vanilla", "whitening"), draws=30, seed=3)
    idx = C.bootstrap_indices(sub, 30, 3)
    fixed = C.score_draws(C.cosines(e1, e2)[idx], gold[idx], sub, "subset-mean")
    np.testing.assert_allclose(draws["vanilla"], fixed)                    # nothing to refit: the same draws
    assert draws["whitening"].shape == (30,)


def test_refit_bootstrap_detects_a_planted_difference_and_covers_none():
    """Whitening against the raw embeddings: with a large planted spike the difference's interval lies
    above 0 and covers the difference on the full set; with none it covers 0."""
    for size, planted in ((4.0, True), (0.0, False)):
        e1, e2, gold, sub = _pairs_with_a_spike(size=size)
        draws = C.refit_bootstrap(e1, e2, gold, sub, ("vanilla", "whitening"), draws=100, seed=1)
        lo, hi = C.interval(draws["whitening"] - draws["vanilla"])
        white = C.cosines(*C.apply_method("whitening", e1, e2))
        full = C.score(white, gold, sub) - C.score(C.cosines(e1, e2), gold, sub)
        assert lo <= full <= hi
        assert (lo > 0) == planted and hi > 0, (size, lo, hi)


def test_refitting_widens_the_interval_of_a_fitted_transform():
    """Whitening fitted on few sentences in many dimensions: refitting it on every resample gives a wider
    interval than resampling the scores of one fit (what the fixed bootstrap leaves out)."""
    e1, e2, gold, sub = _pairs_with_a_spike(n=60, d=40, size=1.0, seed=2)
    refit = C.refit_bootstrap(e1, e2, gold, sub, ("vanilla", "whitening"), draws=200, seed=0)
    w1, w2 = C.apply_method("whitening", e1, e2)
    fixed = C.paired_bootstrap(C.cosines(e1, e2), C.cosines(w1, w2), gold, sub, draws=200, seed=0)
    lo_r, hi_r = C.interval(refit["whitening"] - refit["vanilla"])
    lo_f, hi_f = C.interval(fixed)
    assert hi_r - lo_r > hi_f - lo_f


def test_whitening_minus_softdecay_refit_interval_covers_the_planted_difference_and_excludes_zero_when_it_should():
    """whitening − SoftDecay with both refitted on every resample: a planted dominant direction (a spike)
    is undone by whitening and only compressed by SoftDecay, so the interval lies above 0 and covers the
    full-set difference; without it both are close to the identity on these pairs, and the interval
    covers the full-set difference and 0."""
    for size, planted in ((4.0, True), (0.0, False)):
        e1, e2, gold, sub = _pairs_with_a_spike(n=240, d=8, size=size, seed=4)
        draws = C.refit_bootstrap(e1, e2, gold, sub, ("whitening", "SoftDecay (sentence)"), draws=100, seed=1)
        lo, hi = C.interval(draws["whitening"] - draws["SoftDecay (sentence)"])
        full = (C.score(C.cosines(*C.apply_method("whitening", e1, e2)), gold, sub)
                - C.score(C.cosines(*C.apply_method("SoftDecay (sentence)", e1, e2)), gold, sub))
        assert lo <= full <= hi, (size, lo, full, hi)
        assert (lo > 0) == planted and hi > 0, (size, lo, hi)
        clo, chi = C.recentre(full, lo, hi)                    # moved onto the estimate: the same verdicts
        assert clo <= full <= chi and (clo > 0) == planted and chi > 0 and chi - clo == pytest.approx(hi - lo)


def test_recentre_keeps_the_spread_and_moves_it_onto_the_estimate():
    assert C.recentre(-3.0, -14.0, -9.0) == (pytest.approx(-5.5), pytest.approx(-0.5))


def test_count_flips_agrees_with_the_singular_value_count():
    e1, _, _, _ = _pairs_with_a_spike(n=60, d=12)
    X = e1 * torch.logspace(-2, 0.5, 12, dtype=torch.float64)
    sv = torch.linalg.svdvals(X).numpy()
    for method in ("SoftDecay (sentence)", *C.FLIP_FREE):
        a, _ = C.apply_method(method, X, X)
        assert C.count_flips(X, a) == (C.sign_flips(sv, -0.6) if method == "SoftDecay (sentence)" else 0)


def test_authors_lsds_weights_reconstruct_a_flat_manifold_and_see_a_scramble():
    """The authors' LSDS (LLE barycentre weights, self included): the identity and a rotation keep every
    neighbourhood alike (what is left is the weights' regularisation); a map that scrambles the points
    scores far higher."""
    g = torch.Generator().manual_seed(0)
    t = torch.rand(300, 2, generator=g, dtype=torch.float64)
    E = torch.cat([t, torch.ones(300, 1, dtype=torch.float64) * 3], 1)          # a plane away from the origin
    Q, _ = torch.linalg.qr(torch.randn(3, 3, generator=g, dtype=torch.float64))
    same, rotated = C.lsds_lle(E, E), C.lsds_lle(E, E @ Q)
    scrambled = C.lsds_lle(E, E[torch.randperm(300, generator=g)])
    assert rotated == pytest.approx(same, rel=1e-6)                # an isometry keeps every reconstruction
    assert scrambled > 20 * same
