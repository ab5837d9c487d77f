"""Unsupervised STS (Yan et al. §5.1): pooling, the post-processing methods of Table 1, scoring, and
the sentence encoder — properties a wrong implementation breaks."""

import numpy as np
import pytest
import torch
from testutil import seeded_randn

from helpers.core import sts as C
from helpers.experiments import sts
from helpers.machinery.params import ParameterError


def states(n=4, layers=3, d=8):
    return C.TokenStates(seeded_randn(n, layers, d, seed=13), seeded_randn(n, d, seed=14), seeded_randn(n, d, seed=15))


def test_poolings():
    e = states()
    torch.testing.assert_close(C.pool(e, "first_last"), (e.layer_means[:, 0] + e.layer_means[:, -1]) / 2)
    torch.testing.assert_close(C.pool(e, "first_last_l1"), (e.layer_means[:, 1] + e.layer_means[:, -1]) / 2)
    torch.testing.assert_close(C.pool(e, "last"), e.layer_means[:, -1])
    torch.testing.assert_close(C.pool(e, "cls"), e.cls_last)
    torch.testing.assert_close(C.pool(e, "first_last", token_level=True), (e.layer_means[:, 0] + e.token_sd_last) / 2)
    with pytest.raises(ValueError, match="CLS"):
        C.pool(e, "cls", token_level=True)
    with pytest.raises(ValueError, match="token"):
        C.pool(C.TokenStates(e.layer_means, e.cls_last, None), "last", token_level=True)


def test_spearman_follows_the_gold_order():
    e1 = seeded_randn(50, 8, seed=11)
    gold = torch.linspace(0, 5, 50)
    e2 = e1 + seeded_randn(50, 8, seed=12) * (5 - gold).unsqueeze(1)        # more similar when gold is high
    assert C.spearman100(e1, e2, gold.tolist()) > 50
    assert C.spearman100(e1, e2, (-gold).tolist()) == pytest.approx(-C.spearman100(e1, e2, gold.tolist()))


def test_methods_do_what_table_1_says():
    e1, e2 = seeded_randn(60, 8, seed=1) + 3, seeded_randn(60, 8, seed=2) + 3
    a, b = C.apply_method("vanilla", e1, e2)
    assert a is e1 and b is e2
    a, b = C.apply_method("de-escalation", e1, e2, tau=1.0)               # the mean of both sets removed
    torch.testing.assert_close(torch.cat([a, b]).mean(0), torch.zeros(8), atol=1e-5, rtol=0)
    a, b = C.apply_method("de-escalation", e1, e2, tau=0.5)
    torch.testing.assert_close(torch.cat([a, b]).mean(0), torch.cat([e1, e2]).mean(0) / 2, atol=1e-5, rtol=1e-5)
    a, b = C.apply_method("whitening", e1, e2)                              # fitted on the concatenation
    Y = torch.cat([a, b]).double()
    cov = (Y - Y.mean(0)).T @ (Y - Y.mean(0)) / Y.shape[0]
    torch.testing.assert_close(cov, torch.eye(8, dtype=torch.float64), atol=1e-3, rtol=0)
    a, b = C.apply_method("SoftDecay (sentence)", e1 * 30, e2 * 30, alpha=-0.6)   # each set on its own
    s_in, s_out = torch.linalg.svdvals(e1 * 30), torch.linalg.svdvals(a)
    assert s_out[0] == pytest.approx(float(s_in[0]), rel=1e-4)              # the largest is kept
    assert (s_out[1:] / s_out[0] > s_in[1:] / s_in[0]).all()                # the others lifted
    with pytest.raises(ValueError, match="unknown method"):
        C.apply_method("flow", e1, e2)


def test_uniformity_metrics_see_a_uniform_set():
    iso = seeded_randn(400, 16, seed=3)
    aniso = iso * 0.1 + torch.ones(16) * 3
    u, a = C.uniformity_metrics(iso), C.uniformity_metrics(aniso)
    assert u["EV1"] < a["EV1"] and u["TokenUni"] < a["TokenUni"] and u["RBF_dis"] < a["RBF_dis"]


def test_lsds_is_lower_for_a_neighbourhood_preserving_map():
    E = seeded_randn(200, 16, seed=4)
    scaled = E * 2.0                                         # unit-normalised: the same neighbourhoods
    shuffled = E[torch.randperm(200, generator=torch.Generator().manual_seed(0))]
    assert C.lsds_score(E, scaled) < C.lsds_score(E, shuffled)


def test_subsample_is_seeded_and_keeps_pairs_together():
    from helpers.data.loaders import STSSet

    n = 40
    ds = STSSet("x", [f"a{i}" for i in range(n)], [f"b{i}" for i in range(n)], list(range(n)), ["s"] * n)
    a, b = sts.subsample_pairs(ds, 10, 0), sts.subsample_pairs(ds, 10, 0)
    assert a.sentence1 == b.sentence1 and len(a.sentence1) == 10
    assert all(s1[1:] == s2[1:] == str(g) for s1, s2, g in zip(a.sentence1, a.sentence2, a.scores, strict=True))
    assert sts.subsample_pairs(ds, 0, 0) is ds


def test_averages_skip_methods_not_run():
    run = {"spearman": {"subset-mean": {"A": {"vanilla": 70.0, "whitening": 60.0}, "B": {"vanilla": 80.0}}}}
    avg = sts.averages(run, ["A", "B"])
    assert avg["vanilla"] == 75.0 and avg["whitening"] == 60.0 and np.isnan(avg["SoftDecay (token)"])


def test_params():
    for scale in ("ci", "book", "paper"):
        sts.Params.resolve(scale)
    with pytest.raises(ParameterError, match="pooling"):
        sts.Params.resolve("ci", pooling="mean")
    with pytest.raises(ParameterError, match="datasets"):
        sts.Params.resolve("ci", datasets=("STS17",))
    with pytest.raises(ParameterError, match="alpha"):
        sts.Params.resolve("ci", alpha=0.0)
    with pytest.raises(ParameterError, match="bootstrap"):
        sts.Params.resolve("ci", bootstrap=5)
    assert sts.Params.resolve("ci").extra_models == ()            # ci stays light: no 135M decoder
    with pytest.raises(ParameterError, match="plant_directions"):
        sts.Params.resolve("ci", plant_directions=1)
    assert sts.Params.resolve("book").paper_pooling == "first_last_l1"       # the authors' test.sh: layers 1, 12


def test_readings_draw_zero_scores_the_pairs_of_the_main_run():
    """Draw 0 of the re-reading is the subsample the main run scores (same seed), later draws differ."""
    from helpers.data import load_sts

    ds = load_sts("STS-B", "auto")
    first = sts.subsample_pairs(ds, 100, 0)
    idx = sts.subsample_idx(len(ds), 100, 0)
    assert sts.take(ds, idx).sentence1 == first.sentence1 and sts.take(ds, idx).scores == first.scores
    assert sts.subsample_idx(len(ds), 100, 1) != idx and sts.subsample_idx(len(ds), 0, 1) == list(range(len(ds)))


@pytest.fixture(scope="module")
def minilm():
    from helpers.hf import models

    return models.load("all-MiniLM-L6-v2")


def test_token_mode_encoder_is_batch_independent(minilm):
    """`mode="token"` transforms each sentence's own tokens: encoding together or alone agrees;
    `mode="sentence"` depends on what is encoded together."""
    from helpers.hf.sts import SoftDecayEncoder

    texts = ["A man is playing a guitar.", "The stock market fell sharply today.", "Cats sleep."]
    tok = SoftDecayEncoder(minilm, mode="token")
    together = tok.encode(texts)
    alone = np.concatenate([tok.encode([t]) for t in texts])
    np.testing.assert_allclose(together, alone, atol=1e-4)
    sent = SoftDecayEncoder(minilm, mode="sentence")
    assert not np.allclose(sent.encode(texts)[:2], sent.encode(texts[:2]), atol=1e-4)


def test_result_round_trips_through_json():
    res = sts.Result(models=["m"], datasets=["STS-B"], pooling="first_last", alpha=-0.6, scale="ci",
                     runs={"m": {"spearman": {"pooled": {"STS-B": {"vanilla": 1.0}}}, "lsds": {},
                                 "pairs": {"STS-B": 3}}},
                     from_cache={"m": False}, averages={"m": {"pooled": {"vanilla": float("nan")}}}, lsds_wins={"m": 0})
    back = sts.Result.from_json(res.to_json())
    assert back.runs == res.runs and back.averages["m"]["pooled"]["vanilla"] is None


def test_maps_fit_the_transforms_on_the_whole_set_and_show_a_sample():
    """Figs. 4 and 7: the transforms are fitted on every pair of the set (the set as scored), a sample of the
    pairs is mapped, and the measures are those of the whole transformed set — not of the sample refitted."""
    p = sts.Params.resolve("ci", lsds_points=10 ** 6)
    g = torch.Generator().manual_seed(3)
    spike = torch.randn(24, generator=g)
    p1 = torch.randn(80, 24, generator=g) + 3.0 * torch.randn(80, 1, generator=g) * spike
    p2 = p1 + 0.3 * torch.randn(80, 24, generator=g)
    panels = sts.map_panels(p1, p2, 20, p)
    assert list(panels) == list(sts.MAP_METHODS)
    for method, panel in panels.items():
        a, b = C.apply_method(method, p1, p2, p.alpha, p.tau)
        E = torch.cat([a, b])
        assert panel["n"] == 20 and panel["pairs"] == 80 and np.asarray(panel["xy"]).shape == (40, 2)
        for k, v in C.uniformity_metrics(E).items():
            assert panel[k] == pytest.approx(v, rel=1e-9), (method, k)
        assert panel["LSDS"] == pytest.approx(C.lsds_score(torch.cat([p1, p2]), E, 12, 10 ** 6, p.seed))
    # the sample refitted on its own is another transform, with other measures
    idx = sts.subsample_idx(80, 20, p.seed)
    a, b = C.apply_method("SoftDecay (sentence)", p1[idx], p2[idx], p.alpha)
    refitted = C.uniformity_metrics(torch.cat([a, b]))["EV1"]
    assert refitted != pytest.approx(panels["SoftDecay (sentence)"]["EV1"], rel=1e-2)


def test_committed_runs_read_into_records_and_write_back_as_stored():
    """The converter: every committed STS run becomes its typed record, each stored key read by the field of its
    own name (what it does not read: the t-SNE maps a run once drew, a checkpoint's held-out loss), each
    `[estimate, low, high]` a `Band`, and writes back the dict it was read from."""
    import json

    from helpers.machinery.results import Band
    from helpers.machinery.runtime import REPO_ROOT

    files = sorted((REPO_ROOT / "results" / "sts" / "book").glob("sts-*.json"))
    if not files:
        pytest.skip("the book's STS runs are not committed")
    kinds = {"readings": sts.Reading, "full": sts.Reading, "path": sts.Reading, "samefit": sts.SameFit,
             "extra": sts.Run, "maps": None, "figures": None}
    seen = set()
    for path in files:
        stored = json.loads(path.read_text())["results"]
        kind = kinds.get(path.stem.split("-")[1], sts.Run)
        if kind is None:
            continue
        ctx = {"encoder": "m"} if kind is sts.SameFit else {"encoder": "m", "sets": tuple(sts.STS_DATASETS),
                                                            "bootstrap": 1000}
        if kind is sts.Reading:
            ctx.update(pooling="first_last_l1", per_set=0)
        record = kind.of(stored, **ctx)
        assert json.loads(json.dumps(record.to_json())) == stored, path.name
        assert set(record.other) <= {"tsne", "held_out_mlm_nats"}, (path.name, set(record.other))
        bands = ([*record.avg_ci["subset-mean"].values(), *record.refit.values()] if kind is sts.Run
                 else [*record.intervals["first_last_l1"].values()] if kind is sts.Reading
                 else [*record.crossfit.values()])
        assert bands and all(type(b) is Band for b in bands), path.name
        seen.add(kind)
    assert seen == {sts.Run, sts.Reading, sts.SameFit}
    stored = json.loads((files[0].parent / "sts-readings-all-MiniLM-L6-v2.json").read_text())["results"]
    r = sts.Reading.of(stored, encoder="all-MiniLM-L6-v2", pooling="first_last_l1", per_set=400,
                       sets=tuple(sts.STS_DATASETS), bootstrap=1000)
    assert r.n_draws == len(r.draws) and r.vs_raw().n == sts.reading_bootstrap(1000) == 200


def test_rank_rows_is_scipys_average_rank_bit_for_bit():
    from scipy import stats

    from helpers.core.sts import _rank_rows

    rng = np.random.default_rng(0)
    for shape in [(5,), (3, 7), (64, 40), (2, 3, 9), (1, 1)]:
        for tied in (False, True):
            x = rng.normal(size=shape)
            x = np.round(x * 2) / 2 if tied else x
            assert np.array_equal(_rank_rows(x), stats.rankdata(x, axis=-1))
    x = rng.normal(size=(3, 5))
    x[1, 2] = np.nan
    assert np.array_equal(_rank_rows(x), stats.rankdata(x, axis=-1), equal_nan=True)


def test_refit_bootstrap_scores_each_draw_as_score_does():
    """The draws are scored in one batch: each must equal `score` of that draw's refitted cosines."""
    from helpers.core import sts as C

    rng = np.random.default_rng(1)
    e1 = torch.randn(30, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(0)) + 2
    e2 = e1 + 0.5 * torch.randn(30, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    gold, sub = np.round(rng.uniform(0, 5, 30) * 2) / 2, np.repeat(["a", "b", "c"], 10)
    methods = ("vanilla", "whitening", "SoftDecay (sentence)")
    got = C.refit_bootstrap(e1, e2, gold, sub, methods, draws=4, seed=3)
    idx = C.bootstrap_indices(sub, 4, 3)
    for b in range(4):
        i = torch.as_tensor(idx[b])
        for m in methods:
            want = C.score(C.cosines(*C.apply_method(m, e1[i], e2[i])), gold[idx[b]], sub)
            assert got[m][b] == want
    halves = C.halfsample_refit(e1, e2, gold, sub, methods, draws=3, seed=2)
    for b, idx in enumerate(C.half_sample_indices(sub, 3, 2)):
        i = torch.as_tensor(idx)
        for m in methods:
            assert halves[m][b] == C.score(C.cosines(*C.apply_method(m, e1[i], e2[i])), gold[idx], sub[idx])


def _fake_encode(loaded, texts, max_length=128, batch_size=32, token_alpha=None, desc=""):
    """An encoder pass without a model: each sentence's states drawn from a seed of its text (3 layers × 16), with a
    common mean and a dominant direction so that every transform has something to do."""
    import zlib

    rows = []
    for t in texts:
        g = torch.Generator().manual_seed(zlib.crc32(t.encode()))
        rows.append(torch.randn(5, 16, generator=g) + torch.linspace(-1, 2, 16))
    x = torch.stack(rows)                                  # (n, 5, 16): 3 layers, [CLS], token spread
    return C.TokenStates(x[:, :3].contiguous(), x[:, 3].contiguous(), x[:, 4].contiguous())


def test_a_figure_run_holds_what_the_first_models_main_run_and_maps_hold(monkeypatch):
    """The LSDS, planted and t-SNE figures draw an in-scope encoder from its figure run and the first model from its
    main run and maps: on the same sentences the two hold the same numbers, and the Result reads them alike (means
    over the sets, wins, gaps; the extremes of a flips table)."""
    import json

    from helpers.experiments.sts import compute, figure_runs

    for mod in (compute, figure_runs):
        monkeypatch.setattr(mod, "encode", _fake_encode)
    q = sts.Params.resolve("ci", datasets=("STS-B", "STS15"), max_pairs=30, lsds_points=40, tsne_pairs=10,
                           bootstrap=20, alphas=(-0.6,), plant_sizes=(0.0, 1.0))
    main, drawn, fig = compute.run_model(None, q), compute.maps(None, q), figure_runs.figure_run(None, q)
    assert fig["pairs"] == main["pairs"] == {"STS-B": 30, "STS15": 30}
    assert fig["lsds"] == main["lsds"]
    assert json.dumps(fig["planted"]) == json.dumps(main["planted"])           # NaN where a small subset has no score
    assert fig["maps"] == drawn["sets"]
    res = sts.Result(models=["m"], datasets=list(q.datasets), pooling=q.pooling, alpha=q.alpha, scale="ci",
                     runs={"m": main}, from_cache={}, averages={}, lsds_wins={}, plant_sizes=list(q.plant_sizes),
                     maps=drawn, figure_runs={"x": fig})
    assert res.figure_models() == ["x", "m"]
    for kind in ("mean", "spike"):
        assert res.planted_of("x", kind).equals(res.planted_of("m", kind))
        assert res.planted_of("m", kind).equals(res.planted(kind))
    for w in ("normalised", "eq. 6"):
        assert res.lsds_wins_of("x", w) == res.lsds_wins_of("m", w) == res.runs["m"].lsds_count(w)
        assert res.lsds_gap_of("x", w) == res.runs["m"].lsds_gap(w)
    assert res.maps_of("x") == res.maps_of("m") == drawn["sets"]
    assert res.flips_over_sets("m", "raw", "max") == max(main["sign_flips"][d]["raw"] for d in q.datasets)
    assert res.flips_over_sets("m", "sigma_min", "min") == min(main["sign_flips"][d]["sigma_min"] for d in q.datasets)
    import matplotlib.pyplot as plt

    from helpers import figures

    for draw in (figures.sts.planted_figure, figures.sts.lsds_figure, figures.sts.tsne_figure):
        f = draw(res)
        titled = [ax for ax in f.axes if ax.get_title() or ax.get_ylabel()]
        assert len(f.axes) in (4, 6) and titled, draw.__name__          # a row per encoder
        assert any("x" in (ax.get_title() + ax.get_ylabel()) for ax in f.axes[:3]), draw.__name__   # x first
        plt.close(f)
