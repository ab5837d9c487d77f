"""The findings index (`helpers/experiments/FINDINGS-INDEX.md`, written by `scripts/findings_index.py`): one line
per finding of the book with its section, where its key is written and the function that computes its effect. It is
what the code gives, and every route from a row to its computing line is at most three hops."""

import re
from pathlib import Path

import pytest
from testutil import load_script

ROOT = Path(__file__).resolve().parents[1]

def _script():
    return load_script("findings_index")


def entries() -> dict[str, list[str]]:
    """The committed index: {key: [section, written at, computed by, route (hops)]}."""
    out = {}
    for line in (ROOT / "helpers" / "experiments" / "FINDINGS-INDEX.md").read_text().splitlines():
        if m := re.match(r"\| `([^`]+)` \| (.*) \|$", line):
            out[m.group(1)] = [c.strip() for c in m.group(2).split(" | ")]
    return out


def test_the_index_is_what_the_code_gives(monkeypatch):
    monkeypatch.setenv("TOKUNI_TRAIN_MISSING", "0")
    mod = _script()
    assert mod.text(mod.rows()) == (ROOT / "helpers" / "experiments" / "FINDINGS-INDEX.md").read_text(), (
        "the findings index is out of date: python scripts/findings_index.py")


def test_every_finding_of_the_golden_file_is_indexed_once_with_lines_that_exist():
    import json

    golden = json.loads((ROOT / "tests" / "golden" / "findings-book.json").read_text())["findings"]
    idx = entries()
    assert set(idx) == set(golden)
    for key, (_section, written, computed, _route) in idx.items():
        path, line = written.split(":")
        assert f'"{key}"' in (ROOT / path).read_text().splitlines()[int(line) - 1], key   # grep lands on it
        if not computed.startswith("—"):
            where, name = computed.split(" ")
            path, line = where.split(":")
            assert name.strip("`<>") in (ROOT / path).read_text().splitlines()[int(line) - 1], key


def test_a_route_is_the_row_the_reader_and_the_accessor_that_computes():
    idx = entries()
    section, written, computed, route = idx["sts-gain-bert"]
    assert section == "`sts-full`" and written.startswith("helpers/experiments/sts/findings.py:")
    assert route == "row → _gain → vs_raw (3)" and computed.endswith("`vs_raw`")
    assert "records.py" in computed
    assert idx["deeplm-deesc-rescues"][3] == "row → paired (2)"               # a row that reads one accessor
    assert idx["vit-deesc-vs-pre"][3] == "row → main → gap (3)"               # its read written by a column helper


@pytest.mark.parametrize("limit", [_script().MAX_HOPS])
def test_every_route_is_at_most_three_hops(limit):
    hops = {k: int(re.search(r"\((\d+)\)$", v[3]).group(1)) for k, v in entries().items()}
    assert limit == 3
    assert not {k for k, n in hops.items() if n > limit}, f"routes over {limit} hops: " + ", ".join(
        f"{k} ({n})" for k, n in sorted(hops.items()) if n > limit)
    # the anisotropy and GLUE routes end at the accessor that computes, not at the interval constructor it calls
    assert entries()["anisotropy-transformers"][3] == "row → _transformers → layer_interval (3)"
    assert entries()["glue-expdecay-all"][3] == "row → _expdecay → expdecay_effect (3)"
