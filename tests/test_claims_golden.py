"""The book's findings equal their golden file (`tests/golden/findings-book.json`, written by
`scripts/golden_findings.py`): every finding's verdict, estimate, interval, n and method and every claim's
verdict, collected from the committed results without computing anything. A change to the code that moves a
number fails here; a change meant to move one rewrites the file in the same commit."""

import json
from pathlib import Path

import pytest
from testutil import load_script

from helpers.core.findings import Finding, Interval

REPO = Path(__file__).resolve().parents[1]


def _script():
    return load_script("golden_findings")


@pytest.fixture(scope="module")
def book():
    from helpers.experiments.findings import collect

    mp = pytest.MonkeyPatch()
    mp.setenv("TOKUNI_TRAIN_MISSING", "0")                  # a missing run fails here instead of being computed
    try:
        yield collect("book")
    finally:
        mp.undo()


def test_the_collection_equals_the_golden_file(book):
    g = _script()
    now, then = g.golden(book), json.loads(g.GOLDEN.read_text())
    assert not g.differences(now, then), "\n".join(g.differences(now, then))
    assert len(then["findings"]) > 100 and len(then["claims"]) > 90


def test_the_committed_family_is_the_collections_and_a_chapter_reads_its_verdicts_from_it(book, monkeypatch):
    """The p-values and the trends a chapter's own table corrects its tests with (`results/findings-family.json`)
    are those of the whole book's collection, and a chapter's findings corrected within those families give the
    findings page's verdicts, levels and bands at the paper's setting, test for test."""
    from helpers.experiments import deeplm, vit
    from helpers.experiments import findings as F

    g = _script()
    assert json.loads(F.FAMILY_PATH.read_text()) == g.family_record(F.family_p_values(book.findings),
                                                                     F.scale_family(book.findings))
    monkeypatch.setenv("TOKUNI_TRAIN_MISSING", "0")
    page = {f.key: f for f in book.findings}
    for chapter in (vit, deeplm):
        for f in F.corrected(chapter.run(chapter.Params.resolve("book")).findings()):
            assert (f.verdict, f.family_size) == (page[f.key].verdict, page[f.key].family_size), f.key
            if f.family_level is not None:
                assert f.family_level == pytest.approx(page[f.key].family_level, abs=1e-6)
            assert f.scale_family_size == page[f.key].scale_family_size, f.key
            if f.at_scale is not None:
                assert f.at_scale.band == page[f.key].at_scale.band, f.key
                assert f.paper_scale_verdict == page[f.key].paper_scale_verdict, f.key


def test_a_moved_number_or_verdict_is_reported():
    g = _script()
    then = json.loads(g.GOLDEN.read_text())
    now = json.loads(json.dumps(then))
    key = next(iter(now["findings"]))
    now["findings"][key]["low"] = (now["findings"][key]["low"] or 0.0) - 1e-6
    cid = next(iter(now["claims"]))
    now["claims"][cid] = "mixed" if now["claims"][cid] != "mixed" else "reproduced"
    lines = g.differences(now, then)
    assert len(lines) == 2 and lines[0].startswith(f"findings: {key}") and lines[1].startswith(f"claims: {cid}")
    del now["findings"][key]
    assert f"findings: {key} gone" in g.differences(now, then)


def test_numbers_keep_their_digits_and_nan_is_none():
    g = _script()
    f = Finding(key="k", paper="yu2024", where="w", claim="c", measured="m", quantity="q",
                effect=Interval(0.123456789012345, float("nan"), 1.0, 3, "t"), chapter="tse", kind="extension")

    class Col:
        scale, findings = "book", [f]

        def judged(self):
            return []

    rec = g.golden(Col())["findings"]["k"]
    assert rec["estimate"] == pytest.approx(0.123456789, abs=1e-9) and rec["low"] is None and rec["n"] == 3
