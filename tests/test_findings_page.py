"""The findings page (`book/findings.md`): the chapters' findings collected in the book's order, the
verdicts counted per paper, the table, the forest figure and the list of what needs a GPU or the hub."""

import math

import matplotlib
import pytest

from helpers import experiments, figures
from helpers.core.findings import Finding
from helpers.core.stats import Interval
from helpers.experiments.findings import Collected, chapter_order

matplotlib.use("Agg")


def planted() -> Collected:
    mk = dict(claim="c", measured="m", quantity="q")
    fs = [Finding(key="vit-a", paper="yu2024", where="Fig. 6", effect=Interval(-0.1, -0.15, -0.05, 3, "t"),
                  direction="below", chapter="vit", section="vit-sweep", **mk),
          Finding(key="sts-b", paper="yan2022", where="Table 1", effect=Interval(1.0, -0.5, 2.5, 1000, "bootstrap"),
                  paper_value=3.0, chapter="sts", **mk),
          Finding(key="qk-c", paper="godey2024", where="Fig. 11", effect=None, needs="GPU",
                  command="make grid CHAPTER=qk SCALE=book GRID_ARGS='--recipe long --gpus 0'", chapter="qk", **mk),
          Finding(key="deeplm-d", paper="yu2024", where="Fig. 7", effect=Interval(0.01, -0.02, 0.04, 3, "t"),
                  direction="equal", margin=0.05, chapter="deeplm", **mk),
          Finding(key="tse-e", paper="yu2024", where="eq. (18)", effect=Interval(0.3, math.nan, math.nan, 1, "t"),
                  chapter="tse", **mk)]
    return Collected(scale="book", findings=fs)


def test_the_chapter_order_is_the_table_of_contents():
    order = chapter_order()
    assert order[:3] == ["subspace", "tse", "anisotropy"] and set(order) == set(experiments.CHAPTERS)


def test_counts_table_forest_and_untestable_from_planted_findings():
    col = planted()
    c = col.counts()
    assert c["yu2024"] == {**{v: 0 for v in c["yu2024"]}, "reproduced": 2, "inconclusive": 1}
    assert c["yan2022"]["not detected"] == 1 and c["godey2024"]["not testable here"] == 1
    df = figures.findings.counts(col).data.set_index("verdict")
    assert int(df.loc["findings", "all"]) == 5 and int(df.loc["reproduced", "Yu & Zhang 2024"]) == 2
    html = figures.findings.table(col).to_html()
    assert 'href="vit.html#vit-sweep"' in html and "excludes effects below -0.500 and above +2.500" in html
    assert [f.key for f in col.untestable()] == ["qk-c"]
    assert "--recipe long --gpus 0" in figures.findings.untestable(col).to_html()
    fig = figures.findings.forest(col)
    assert len(fig.axes[0].lines) >= 2 * 4          # an interval and an estimate per row with an interval


def test_collect_rejects_repeated_keys_and_lists_chapters_without_findings(monkeypatch):
    from helpers.experiments import findings as page

    class R:
        def findings(self):
            return planted().findings[:1]

    class Module:
        class Params:
            @staticmethod
            def resolve(scale):
                return None
        run = staticmethod(lambda p: R())

    class Bare(Module):
        run = staticmethod(lambda p: object())

    mods = {"vit": Module, "glue": Bare}
    monkeypatch.setattr("importlib.import_module", lambda name: mods[name.rsplit(".", 1)[1]])
    monkeypatch.setattr(page, "_saved", lambda m, p: None)
    col = page.collect("ci", ["vit", "glue"])
    assert [f.key for f in col.findings] == ["vit-a"] and col.pending == ["glue"]
    with pytest.raises(ValueError, match="repeat"):
        page.collect("ci", ["vit", "vit"])


def test_a_planted_effect_changes_a_verdict_on_the_page(monkeypatch):
    """The page's verdicts are computed from the committed runs: read the deep LM chapter's book runs, plant
    a large gain for de-escalation (its final losses lowered by 1 nat on every seed) and the page's verdict
    for 'de-escalation closes the post-norm gap' becomes reproduced, the counts follow."""
    import copy

    import numpy as np

    from helpers.experiments import deeplm
    from helpers.experiments import findings as page

    monkeypatch.setenv("TOKUNI_TRAIN_MISSING", "0")          # read the committed runs, never train
    before = {f.key: f for f in page.collect("book", ["deeplm"]).findings}
    real = deeplm.run(deeplm.Params.resolve("book"))
    planted = copy.deepcopy(real)
    for h in planted.histories["de-escalated"]:
        h["loss"] = list(np.asarray(h["loss"], dtype=float) - 1.0)
    monkeypatch.setattr(deeplm, "run", lambda p: planted)
    after = {f.key: f for f in page.collect("book", ["deeplm"]).findings}
    key = "deeplm-deesc-rescues"
    assert before[key].verdict != "reproduced" and after[key].verdict == "reproduced"
    assert after[key].effect.estimate == pytest.approx(before[key].effect.estimate - 1.0, abs=1e-6)
