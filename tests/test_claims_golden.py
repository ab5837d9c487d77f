"""The book's findings equal their golden file (`tests/golden/findings-book.json`, written by
`scripts/golden_findings.py`): every finding's verdict, estimate, interval, n and method and every claim's
verdict, collected from the committed results without computing anything. A change to the code that moves a
number fails here; a change meant to move one rewrites the file in the same commit."""

import importlib.util
import json
from pathlib import Path

import pytest

from helpers.core.findings import Finding, Interval

REPO = Path(__file__).resolve().parents[1]


def _script():
    spec = importlib.util.spec_from_file_location("golden_findings", REPO / "scripts" / "golden_findings.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_collection_equals_the_golden_file(monkeypatch):
    from helpers.experiments.findings import collect

    monkeypatch.setenv("TOKUNI_TRAIN_MISSING", "0")         # a missing run fails here instead of being computed
    g = _script()
    now, then = g.golden(collect("book")), json.loads(g.GOLDEN.read_text())
    assert not g.differences(now, then), "\n".join(g.differences(now, then))
    assert len(then["findings"]) > 100 and len(then["claims"]) > 90


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
