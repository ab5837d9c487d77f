"""A reduced test states its distance from the paper's setting as numbers (`Finding.distance`, `core.scale.Distance`):
the committed book runs of the chapters listed here, and a planted distance carried into the finding's record."""

from __future__ import annotations

import math

import pytest

from helpers.core import findings as fd
from helpers.core.scale import Distance, ModelSize, model_distance
from helpers.core.stats import Interval

#: the chapters whose reduced findings must state a distance (the others state theirs in their own tests)
CHAPTERS = ["anisotropy", "glue", "tse", "drift", "subspace", "synthesis", "sts", "vit", "qk", "deeplm"]


@pytest.fixture(scope="module")
def book():
    from helpers.experiments.findings import collect

    mp = pytest.MonkeyPatch()
    mp.setenv("TOKUNI_TRAIN_MISSING", "0")                  # read the committed runs; compute nothing
    try:
        yield collect("book", chapters=CHAPTERS)
    finally:
        mp.undo()


def distance_problems(findings) -> list[str]:
    """What is wrong with the distances of the reduced in-scope claim tests among `findings`, one line each: a test
    with none, an axis whose own value is not positive, an axis whose fraction of the paper's is not finite."""
    out = []
    for f in findings:
        if not f.reduced or f.kind != "claim" or f.out_of_scope:
            continue
        if not f.distance:
            out.append(f"{f.key}: reduced ({f.reduced}) but states no distance")
        for d in f.distance:
            if not (d.ours is not None and math.isfinite(d.ours) and d.ours > 0):
                out.append(f"{f.key}: {d.what}: ours {d.ours} is not positive")
            if d.paper is not None and not (d.fraction is not None and math.isfinite(d.fraction)):
                out.append(f"{f.key}: {d.what}: {d.ours} of {d.paper} has no finite fraction")
    return out


def test_every_reduced_claim_test_of_these_chapters_states_its_distance(book):
    reduced = [f for f in book.findings if f.reduced and f.kind == "claim" and not f.out_of_scope]
    assert reduced, "no reduced claim test: the check below would pass on nothing"
    assert not distance_problems(book.findings), "\n".join(distance_problems(book.findings))


def _finding(**kw):
    base = dict(key="glue-x", paper="yan2022", where="Table 2", claim="c", measured="m", quantity="q",
                effect=Interval(1.0, 0.5, 1.5, 5, "t"), claim_id="yan-table2-gain", chapter="glue")
    return fd.Finding(**base | kw)


def test_the_check_names_a_planted_test_without_a_distance_or_with_a_bad_one():
    bare = _finding(reduced="on a stand-in")
    zero = _finding(key="glue-y", reduced="on a stand-in", distance=(Distance("layers", 0, 12),))
    paper_scale = _finding(key="glue-z")
    problems = distance_problems([bare, zero, paper_scale])
    assert problems == ["glue-x: reduced (on a stand-in) but states no distance",
                        "glue-y: layers: ours 0 is not positive"]


def test_a_planted_distance_reaches_the_findings_json_record_and_its_csv_row():
    import jsonschema

    from helpers.experiments.findings import Collected, _test_record, dataset_rows, dataset_schema

    d = model_distance(ModelSize(6, 384, 22_713_216), ModelSize(12, 768, 110e6)) + (
        Distance("baseline RTE accuracy", 55.5, 64.98, "score"),)
    f = _finding(reduced="on all-MiniLM-L6-v2 in place of bert-base-uncased", distance=d)
    rec = _test_record(f, "deciding", "book")
    assert rec["distance"] == [{"what": "parameters", "ours": 22_713_216, "paper": 110e6, "unit": ""},
                               {"what": "layers", "ours": 6, "paper": 12, "unit": "blocks"},
                               {"what": "width", "ours": 384, "paper": 768, "unit": "dimensions"},
                               {"what": "baseline RTE accuracy", "ours": 55.5, "paper": 64.98, "unit": "score"}]
    claim = fd.Claim(id="yan-table2-gain", paper="yan2022", where="Table 2", claim="c", predicate="p")
    data = Collected(scale="book", findings=[f], claims=[claim], chapters=["glue"]).to_dataset(commit=None)
    jsonschema.Draft202012Validator(dataset_schema()).validate(data)
    (row,) = dataset_rows(data)
    assert row["test_distance"].startswith("parameters: 22713216.0 of 110000000.0; layers: 6.0 of 12.0")


def test_model_distance_leaves_out_what_is_not_counted():
    assert model_distance(None, ModelSize(12, 768, 110e6)) == ()
    got = model_distance(ModelSize(4, 256), None)
    assert [(d.what, d.ours, d.paper) for d in got] == [("layers", 4, None), ("width", 256, None)]


def test_the_widths_the_chapters_quote_are_the_size_table_s():
    from helpers.hf.models import SIZE, WIDTH

    assert WIDTH and all(WIDTH[m] == SIZE[m].width for m in WIDTH)
