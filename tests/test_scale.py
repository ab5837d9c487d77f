"""The trend to the paper's setting (`core.scale`) and the verdict it gives there (`Finding.paper_scale_verdict`),
on planted cases: a gap that closes with the budget, a stand-in on a planted trend, too few budgets."""

import math
from dataclasses import replace

import numpy as np
import pytest

from helpers.core import findings as F
from helpers.core.findings import Finding, Judged, judge
from helpers.core.scale import FORMS, MIN_POINTS, Distance, extrapolate
from helpers.core.stats import Interval, against_trend, fit_trend, t_interval

BUDGETS = [250, 500, 1000, 2000, 4000]


def _gap(budget, seed, closes=True):
    """A planted gap (lower is the paper's side): +0.30 at 250 steps, falling 0.12 per doubling when it closes."""
    rng = np.random.default_rng(seed)
    slope = -0.12 if closes else 0.0
    return 0.30 + slope * math.log2(budget / 250) + rng.normal(0, 0.01)


def _finding(at_scale=None, effect=None, reduced="at 1.7 % of the paper's steps", **kw):
    effect = effect or t_interval([_gap(1000, s) for s in range(3)])
    return Finding(key="planted-gap", paper="yu2024", where="Fig. 6", claim="the planted model trains better",
                   measured="planted", quantity="gap", effect=effect, direction="below", reduced=reduced,
                   claim_id="planted", at_scale=at_scale, **kw)


def _trend(budgets, closes=True, target=60_000):
    per_seed = [[_gap(b, 10 * s + i, closes) for i, b in enumerate(budgets)] for s in range(3)]
    return extrapolate(budgets, np.mean(per_seed, 0), target, ("log", "inverse square root"), per_unit=per_seed,
                       axis="training steps")


def test_a_planted_log_trend_is_read_back_with_a_band_that_covers_it():
    x = np.array(BUDGETS, float)
    y = 1.0 - 0.2 * np.log(x) + np.random.default_rng(0).normal(0, 0.01, x.size)
    e = extrapolate(x, y, 60_000, ("log",), axis="training steps")
    truth = 1.0 - 0.2 * math.log(60_000)
    assert e.band.low < truth < e.band.high
    assert e.fits[0].coefficients[1] == pytest.approx(-0.2, abs=0.02)
    assert e.points == 5 and e.span == pytest.approx(16)
    # the band widens with the distance it is carried
    assert e.at(8_000).high - e.at(8_000).low < e.band.high - e.band.low


def test_the_band_is_the_union_of_the_forms():
    e = _trend(BUDGETS)
    lows = [f.at_target.low for f in e.fits]
    highs = [f.at_target.high for f in e.fits]
    assert e.band.low == min(lows) and e.band.high == max(highs)
    assert e.band.estimate == e.fits[0].at_target.estimate
    assert set(e.forms) <= set(FORMS)


def test_fewer_than_four_budgets_give_no_trend():
    with pytest.raises(ValueError, match="at least 4"):
        extrapolate([250, 500, 1000], [0.3, 0.2, 0.1], 60_000)
    with pytest.raises(ValueError, match="at least 4"):
        extrapolate([250, 250, 500, 1000], [0.3, 0.3, 0.2, 0.1], 60_000)
    assert MIN_POINTS == 4
    # so a reduced test without one says nothing at the paper's scale
    f = _finding()
    assert f.verdict == F.CONTRADICTED
    assert f.paper_scale_verdict == F.NOT_JUDGED


def test_a_gap_that_closes_with_budget_stops_being_contradicted_at_the_papers_scale():
    f = _finding(at_scale=_trend(BUDGETS))
    assert f.verdict == F.CONTRADICTED                        # at its own setting, the gap is on the wrong side
    assert f.paper_scale_verdict in (F.SCALE_INCONCLUSIVE, F.REPRODUCED)
    assert f.paper_scale_verdict != F.CONTRADICTED
    assert "training steps" in f.paper_scale_text()
    # a gap that stays open stays contradicted there
    g = _finding(at_scale=_trend(BUDGETS, closes=False))
    assert g.paper_scale_verdict == F.CONTRADICTED
    assert g.decides_to() == pytest.approx(60_000)


def test_a_closing_gap_with_a_tight_trend_reads_reproduced_at_the_papers_scale():
    x = np.array(BUDGETS * 3, float)
    per_seed = [[0.30 - 0.12 * math.log2(b / 250) + 0.001 * s for b in BUDGETS] for s in range(3)]
    e = extrapolate(BUDGETS, np.mean(per_seed, 0), 60_000, ("log",), per_unit=per_seed, axis="training steps")
    assert x.size == 15
    f = _finding(at_scale=e)
    assert f.paper_scale_verdict == F.REPRODUCED


def test_decides_to_is_where_the_band_stops_deciding():
    closing = _finding(at_scale=_trend(BUDGETS))                    # decides at the paper's point: reproduced there
    assert closing.paper_scale_verdict == F.REPRODUCED and closing.decides_to() == pytest.approx(60_000)
    # a gap on the wrong side whose seeds drift apart: the band widens with distance and stops deciding
    per_seed = [[0.10 + (s - 1) * 0.01 * i for i, _ in enumerate(BUDGETS)] for s in range(3)]
    drifting = _finding(at_scale=extrapolate(BUDGETS, np.mean(per_seed, 0), 10**7, ("log",), per_unit=per_seed,
                                             axis="training steps"))
    assert drifting.paper_scale_verdict == F.SCALE_INCONCLUSIVE
    where = drifting.decides_to()
    assert where is not None and max(BUDGETS) <= where < 10**7
    assert drifting.paper_scale_text().endswith(f"the band decides up to {F.num(where)} training steps")
    assert _finding().decides_to() is None


def test_a_test_at_the_papers_setting_needs_no_trend():
    with pytest.raises(ValueError, match="needs no trend"):
        _finding(at_scale=_trend(BUDGETS), reduced="")
    f = _finding(reduced="")
    assert f.paper_scale_verdict == f.verdict


def test_a_claim_reads_its_deciding_tests_trends():
    claim = F.Claim(id="planted", paper="yu2024", where="Fig. 6", claim="c", predicate="p")
    closing = _finding(at_scale=_trend(BUDGETS))
    j = judge(claim, [closing])
    assert isinstance(j, Judged)
    assert j.verdict == F.CONTRADICTED
    assert j.paper_scale_verdict == closing.paper_scale_verdict
    bare = judge(claim, [_finding()])
    assert bare.paper_scale_verdict == F.NOT_JUDGED


def test_distance_in_words_and_in_the_record():
    d = Distance("training steps", 1000, 60_000)
    assert d.fraction == pytest.approx(1 / 60)
    assert d.text() == "1,000 of 60,000 training steps (1.7 %)"
    assert Distance("raw STS", 44.04, 62.97, "score").text() == "raw STS 44.04 against 62.97"
    f = _finding(distance=(d,))
    assert f.to_json()["distance"][0]["paper"] == 60_000


def test_a_stand_in_placed_on_a_planted_trend_reads_on_the_trend():
    xs, slope, icpt = [51.87, 59.53, 62.97, 64.12], -0.5, 40.0
    rng = np.random.default_rng(1)
    trend = fit_trend(xs, [icpt + slope * x + rng.normal(0, 0.5) for x in xs])
    x0 = 44.04
    on = Interval(icpt + slope * x0, icpt + slope * x0 - 0.5, icpt + slope * x0 + 0.5, 200, "bootstrap")
    assert against_trend(on, trend, x0) == "on the paper's trend"
    far = on.shift(-100)
    assert against_trend(far, trend, x0) == "off the trend (above)"


def test_a_run_that_cannot_test_the_claim_still_speaks_through_its_trend():
    f = _finding(at_scale=_trend(BUDGETS, closes=False), cannot_test="trained too little")
    assert f.verdict == F.NOT_TESTABLE
    assert f.paper_scale_verdict == F.CONTRADICTED
    assert _finding(cannot_test="trained too little").paper_scale_verdict == F.NOT_TESTABLE


def test_units_with_their_own_x_widen_the_band_by_their_own_fits():
    rng = np.random.default_rng(3)
    xs, ys, gs = [], [], []
    for unit, slope in (("a", 0.5), ("b", 0.1)):
        for x in (40.0, 45.0, 50.0, 55.0):
            xv = x + rng.normal(0, 0.5)
            xs.append(xv)
            ys.append(slope * (xv - 40) + rng.normal(0, 0.05))
            gs.append(unit)
    pooled = extrapolate(xs, ys, 63.0, ("linear",))
    by_unit = extrapolate(xs, ys, 63.0, ("linear",), groups=gs)
    assert by_unit.units == 2 and pooled.units == 1
    assert by_unit.band.high - by_unit.band.low > pooled.band.high - pooled.band.low
    assert by_unit.at(63.0) == by_unit.band
    with pytest.raises(ValueError, match="groups"):
        extrapolate(xs, ys, 63.0, groups=gs[:-1])


def test_a_headline_that_sums_up_others_is_their_conjunction():
    R, D, C, I, M = F.REPRODUCED, F.DIRECTION_ONLY, F.CONTRADICTED, F.INCONCLUSIVE, F.MIXED
    assert F.synthesis([R, R]) == R
    assert F.synthesis([R, D]) == D
    assert F.synthesis([R, C, I]) == C
    assert F.synthesis([R, M]) == M
    assert F.synthesis([R, I]) == I
    assert F.synthesis([R, F.NOT_TESTED]) == I                  # a part with no verdict leaves it open
    assert F.synthesis([C, F.NOT_TESTED]) == C
    assert F.synthesis([F.NOT_TESTED, F.NOT_TESTABLE]) == F.NOT_TESTED
    assert F.synthesis([F.NOT_JUDGED], at_scale=True) == F.NOT_JUDGED
    assert F.synthesis([R, F.SCALE_INCONCLUSIVE], at_scale=True) == F.SCALE_INCONCLUSIVE


def test_a_headline_claim_reads_its_parts_at_both_settings():
    part = F.Claim(id="planted", paper="yu2024", where="Fig. 6", claim="c", predicate="p")
    head = F.Claim(id="planted-head", paper="yu2024", where="abstract", claim="h", predicate="p", headline=True,
                   judged_from=("planted",))
    closing, still = _finding(at_scale=_trend(BUDGETS)), _finding(at_scale=_trend(BUDGETS, closes=False))
    [h] = F.headlines([part, head], [closing])
    assert h.verdict == F.CONTRADICTED
    assert h.paper_scale_verdict == closing.paper_scale_verdict != F.CONTRADICTED
    assert "planted" in h.basis()
    [h2] = F.headlines([part, head], [still])
    assert h2.paper_scale_verdict == F.CONTRADICTED
    with pytest.raises(ValueError, match="only a headline"):
        F.Claim(id="x", paper="yu2024", where="a", claim="c", predicate="p", judged_from=("planted",))
    with pytest.raises(ValueError, match="not in the registry"):
        F.headlines([F.Claim(id="h", paper="yu2024", where="a", claim="c", predicate="p", headline=True,
                             judged_from=("nowhere",))], [])


def test_the_registry_names_each_papers_headlines():
    from helpers.experiments.findings import claims

    cs = claims()
    for paper in F.PAPERS:
        assert any(c.headline for c in cs if c.paper == paper), paper
    ids = {c.id for c in cs}
    for c in cs:
        assert set(c.judged_from) <= ids, c.id


def test_a_papers_trends_are_a_family_read_at_bonferronis_level():
    """Three trends of one paper: each band is read at 1 − 0.05/3 (wider than its 95 % band, the same estimate),
    the record says so, and a chapter's trend corrected with the other two named (`scale_others`) reads the same
    band; a band that just decides at 95 % stops deciding at the family's level. A lone trend stays at 95 %, and a
    finding with no trend is left alone."""
    trends = [_finding(at_scale=_trend(BUDGETS)), _finding(at_scale=_trend(BUDGETS, closes=False))]
    fs = [replace(f, key=f"planted-{i}") for i, f in enumerate([*trends, _finding(at_scale=_trend(BUDGETS))])]
    none = replace(_finding(), key="no-trend")
    out = {f.key: f for f in F.correct([*fs, none])}
    for f in fs:
        c = out[f.key]
        assert c.scale_family_size == 3 and c.at_scale.level == pytest.approx(1 - 0.05 / 3)
        assert c.at_scale.band.estimate == pytest.approx(f.at_scale.band.estimate)
        assert c.at_scale.band.low < f.at_scale.band.low and c.at_scale.band.high > f.at_scale.band.high
        assert "read at 98.3 % (Bonferroni over its paper's 3 trends)" in c.paper_scale_text()
    assert out["no-trend"].at_scale is None and out["no-trend"].scale_family_size == 0
    alone = F.correct([fs[0]], scale_others={"yu2024": ["planted-1", "planted-2"]})[0]
    assert alone.at_scale.band == out["planted-0"].at_scale.band
    assert F.correct([fs[0]])[0].at_scale.band == fs[0].at_scale.band      # one trend: 95 %
    # a band that just decides at 95 %: a gap whose seeds scatter so that its 95 % band ends just below 0
    per_seed = [[-0.2 - 0.02 * math.log2(b / 250) + 0.08 * (s - 1) for b in BUDGETS] for s in range(3)]
    e = extrapolate(BUDGETS, np.mean(per_seed, 0), 60_000, ("log",), per_unit=per_seed, axis="training steps")
    edge = _finding(at_scale=e)
    assert e.band.high < 0 and edge.paper_scale_verdict != F.SCALE_INCONCLUSIVE
    wide = replace(edge, at_scale=e.at_level(1 - 0.05 / 30))
    assert wide.at_scale.band.high > 0 and wide.paper_scale_verdict == F.SCALE_INCONCLUSIVE
