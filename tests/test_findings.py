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
    (iv(0.2, 0.5), "above", 0.3, fd.REPRODUCED),          # exceeds it
    (iv(0.2, 0.5), "above", 0.9, fd.DIRECTION_ONLY),      # right side, short of the paper's size
    (iv(-0.1, 0.5), "above", None, fd.NOT_DETECTED),
    (iv(-0.5, -0.2), "above", None, fd.CONTRADICTED),
    (iv(-0.5, -0.2), "below", None, fd.REPRODUCED),
    (iv(-0.5, -0.2), "below", -0.9, fd.DIRECTION_ONLY),
    (iv(0.2, 0.5), "below", None, fd.CONTRADICTED),
    (Interval(0.3, math.nan, math.nan, 1, "t"), "above", None, fd.INCONCLUSIVE),
    (Interval.exact(0.3), "above", None, fd.REPRODUCED),
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


def finding(**kw):
    base = dict(key="x-y", paper="yu2024", where="Fig. 6", claim="c", measured="m", quantity="q",
                effect=iv(-0.04, 0.03))
    return fd.Finding(**{**base, **kw})


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
    c = fd.count_verdicts([finding(), finding(paper="yan2022", effect=iv(0.1, 0.2))])
    assert c["yu2024"][fd.NOT_DETECTED] == 1 and c["yan2022"][fd.REPRODUCED] == 1
    assert sum(sum(v.values()) for v in c.values()) == 2 and set(c["godey2024"]) == set(fd.VERDICTS)
