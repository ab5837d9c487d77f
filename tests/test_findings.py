"""The finding record and its one verdict rule (`helpers.core.findings`), and the one Interval type."""

import math

import numpy as np
import pytest

from helpers.core import findings as fd
from helpers.core.stats import Interval, t_interval


def iv(lo, hi, est=None, n=5, method="t"):
    return Interval((lo + hi) / 2 if est is None else est, lo, hi, n, method)


def test_t_interval_is_the_student_t_interval_of_the_mean():
    from scipy import stats

    d = np.array([0.1, 0.3, 0.2, 0.25])
    i = t_interval(d)
    half = stats.t.ppf(0.975, 3) * d.std(ddof=1) / 2
    assert (i.estimate, i.n, i.method) == (pytest.approx(d.mean()), 4, "t")
    assert (i.low, i.high) == (pytest.approx(d.mean() - half), pytest.approx(d.mean() + half))
    one = t_interval([0.4])
    assert one.n == 1 and math.isnan(one.low) and not one.has_interval


def test_interval_text_and_bootstrap_percentiles():
    assert iv(0.041, 0.070, 0.055).text() == "+0.055 [+0.041, +0.070]"
    assert Interval.exact(2.5).text(2, signed=False) == "2.50"
    draws = np.arange(1001.0)
    b = Interval.from_draws(draws, estimate=500.0)
    assert (b.low, b.high, b.method) == (pytest.approx(25.0), pytest.approx(975.0), "bootstrap")
    with pytest.raises(ValueError):
        Interval(0.0, 1.0, -1.0)


@pytest.mark.parametrize("effect, direction, paper, expected", [
    (iv(0.2, 0.5), "above", None, fd.REPRODUCED),
    (iv(0.2, 0.5), "above", 0.4, fd.REPRODUCED),          # covers the paper's size
    (iv(0.2, 0.5), "above", 0.1, fd.DIRECTION_ONLY),      # wholly beyond it: larger than the paper's
    (iv(0.2, 0.5), "above", 0.9, fd.DIRECTION_ONLY),      # right side, short of the paper's size
    (iv(-0.1, 0.5), "above", None, fd.NOT_DETECTED),
    (iv(-0.5, -0.2), "above", None, fd.CONTRADICTED),
    (iv(-0.5, -0.2), "below", None, fd.REPRODUCED),
    (iv(-0.5, -0.2), "below", -0.9, fd.DIRECTION_ONLY),
    (iv(0.2, 0.5), "below", None, fd.CONTRADICTED),
    (Interval(0.3, math.nan, math.nan, 1, "t"), "above", None, fd.INCONCLUSIVE),
    (Interval.exact(0.3), "above", None, fd.REPRODUCED),   # read with tolerance 0 by the bare rule
    (Interval.exact(-0.3), "above", None, fd.CONTRADICTED),
    (None, "above", None, fd.NOT_TESTABLE),
])
def test_the_verdict_rule(effect, direction, paper, expected):
    assert fd.verdict(effect, direction, paper_value=paper) == expected


def test_the_rule_reads_the_interval_from_its_reference():
    """A reference other than zero (chance, a baseline): the same interval reads differently."""
    e = iv(0.15, 0.25)
    assert fd.verdict(e, "above", reference=0.10) == fd.REPRODUCED
    assert fd.verdict(e, "above", reference=0.20) == fd.NOT_DETECTED
    assert fd.verdict(e, "above", reference=0.30) == fd.CONTRADICTED
    assert fd.verdict(e, "above", reference=0.10, paper_value=0.8) == fd.DIRECTION_ONLY


def test_claims_of_likeness_need_the_interval_inside_the_margin():
    assert fd.verdict(iv(-0.02, 0.03), "equal", margin=0.05) == fd.REPRODUCED
    assert fd.verdict(iv(-0.02, 0.09), "equal", margin=0.05) == fd.INCONCLUSIVE
    assert fd.verdict(iv(0.07, 0.12), "equal", margin=0.05) == fd.CONTRADICTED
    with pytest.raises(ValueError):
        fd.verdict(iv(0, 1), "equal")


def test_an_exact_effect_is_read_with_its_tolerance_not_by_its_sign():
    """+0.01 with a tolerance of 0.05 is no effect; −1e-9 with a tolerance of 1e-6 contradicts nothing."""
    assert fd.verdict(Interval.exact(0.01), "above", tolerance=0.05) == fd.NOT_DETECTED
    assert fd.verdict(Interval.exact(-1e-9), "above", tolerance=1e-6) == fd.NOT_DETECTED
    assert fd.verdict(Interval.exact(0.2), "above", tolerance=0.05) == fd.REPRODUCED
    assert fd.verdict(Interval.exact(3e-16), "equal", margin=1e-10, tolerance=1e-12) == fd.REPRODUCED


def test_size_matters_both_ways():
    """An interval wholly beyond the paper's size is not the paper's result either: direction only, larger."""
    big = finding(effect=iv(2.0, 4.0), paper_value=0.32, direction="above")
    assert big.verdict == fd.DIRECTION_ONLY and big.size_side() == "larger"
    assert "larger than the paper's" in big.verdict_text()
    small = finding(effect=iv(0.01, 0.1), paper_value=0.32)
    assert small.verdict == fd.DIRECTION_ONLY and small.size_side() == "smaller"
    below = finding(effect=iv(-4.17, -3.1), paper_value=-0.32, direction="below")
    assert below.verdict == fd.DIRECTION_ONLY and below.size_side() == "larger"
    assert finding(effect=iv(0.2, 0.5), paper_value=0.32).verdict == fd.REPRODUCED
    assert finding(effect=iv(0.2, 0.5), paper_value=0.32).size_side() == ""


def finding(**kw):
    base = dict(key="x-y", paper="yu2024", where="Fig. 6", claim="c", measured="m", quantity="q",
                effect=iv(-0.04, 0.03), claim_id="yu-fig6")
    return fd.Finding(**{**base, **kw})


def test_a_sample_statistic_without_an_interval_fails():
    """An exact effect must state its tolerance and why it has no sampling; a statistic of 192 images does not."""
    with pytest.raises(ValueError, match="sample statistic"):
        finding(effect=Interval.exact(0.25))
    with pytest.raises(ValueError, match="sample statistic"):
        finding(effect=Interval.exact(0.25), tolerance=0.01)
    ok = finding(effect=Interval.exact(0.25), tolerance=0.01, exact_why="a bound: no sampling")
    assert ok.verdict == fd.REPRODUCED and "exact" in ok.effect_text()


def test_a_reduced_setting_reads_in_the_verdict_itself():
    f = finding(effect=iv(0.1, 0.3), reduced="at 1.7 % of the paper's steps")
    assert f.setting == "reduced" and f.verdict == fd.REPRODUCED
    assert f.verdict_text() == "reproduced at 1.7 % of the paper's steps"
    assert finding(effect=iv(0.1, 0.3)).verdict_text() == "reproduced"


def test_a_test_its_chapter_calls_unable_gives_no_verdict():
    f = finding(effect=iv(-0.9, -0.7), cannot_test="its model saw 1/17,000 of the paper's tokens")
    assert f.verdict == fd.NOT_TESTABLE and f.effect is not None


def test_kinds_and_their_claims():
    with pytest.raises(ValueError, match="kind"):
        finding(kind="variant")
    with pytest.raises(ValueError, match="claim_id"):
        finding(claim_id="")
    assert finding(kind="extension", claim_id="").kind == "extension"


def claim(cid="yu-fig6", paper="yu2024"):
    return fd.Claim(id=cid, paper=paper, where="Fig. 6", claim="c", predicate="p")


def test_a_claim_is_judged_by_its_closest_test_and_counted_once():
    """The first test at the paper's setting decides, else the first listed; a planted duplicate of a test, a
    control and an extension change no count; a claim that loses its finding reads 'not tested here'."""
    c, other = claim(), claim("yu-fig7")
    reduced = finding(key="a", effect=iv(0.1, 0.3), reduced="at 2 % of the steps")
    at_paper = finding(key="b", effect=iv(-0.1, 0.3))
    j = fd.judge(c, [reduced, at_paper])
    assert j.deciding is at_paper and j.verdict == fd.NOT_DETECTED and j.others == (reduced,)
    assert fd.judge(c, [reduced]).verdict_text() == "reproduced at 2 % of the steps"
    base = [reduced]
    counts = fd.count_claims([fd.judge(c, base), fd.judge(other, base)])["yu2024"]
    dup = base + [finding(key="a2", effect=iv(0.1, 0.3), reduced="at 2 % of the steps")]
    control = base + [finding(key="ctl", effect=iv(0.5, 0.9), kind="control", claim_id="yu-fig7")]
    ext = base + [finding(key="e", effect=iv(0.5, 0.9), kind="extension", claim_id="")]
    for planted in (dup, control, ext):
        assert fd.count_claims([fd.judge(c, planted), fd.judge(other, planted)])["yu2024"] == counts
    assert counts["claims"] == 2 and counts["reduced"] == 1 and counts["untested"] == 1
    assert counts["verdicts"]["reduced"][fd.REPRODUCED] == 1 and counts["verdicts"]["paper"][fd.REPRODUCED] == 0
    lost = fd.judge(other, control)
    assert lost.verdict == fd.NOT_TESTED and lost.controls and lost.deciding is None
    needs = finding(key="g", effect=None, needs="GPU", command="make rerun CHAPTER=vit SCALE=paper")
    assert fd.judge(c, [needs]).verdict == fd.NOT_TESTABLE


def test_a_finding_computes_its_verdict_and_says_what_it_excludes():
    f = finding()
    assert f.verdict == fd.NOT_DETECTED
    assert f.excludes() == "excludes effects below -0.040 and above +0.030"
    assert f.to_json()["verdict"] == fd.NOT_DETECTED
    moved = finding(effect=iv(0.01, 0.03))                  # a planted effect changes the verdict
    assert moved.verdict == fd.REPRODUCED


def test_a_finding_is_checked_when_made():
    with pytest.raises(ValueError, match="paper"):
        finding(paper="someone2023")
    with pytest.raises(ValueError, match="command"):
        finding(effect=None)
    assert finding(effect=None, needs="GPU", command="make rerun CHAPTER=vit SCALE=paper").verdict == fd.NOT_TESTABLE
    with pytest.raises(ValueError, match="direction"):
        finding(direction="up")


def test_verdicts_are_counted_per_paper():
    c = fd.count_verdicts([finding(), finding(paper="yan2022", effect=iv(0.1, 0.2), claim_id="yan-x")])
    assert c["yu2024"][fd.NOT_DETECTED] == 1 and c["yan2022"][fd.REPRODUCED] == 1
    assert sum(sum(v.values()) for v in c.values()) == 2 and set(c["godey2024"]) == set(fd.VERDICTS)
