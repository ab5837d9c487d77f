"""The GLUE chapter's central claims, asserted on its `ci` result (tiny subsets, two epochs: claims
about the SoftDecay layer and the bookkeeping, not about the scores)."""

import numpy as np
import pytest
from testutil import ci_result

from helpers import experiments


@pytest.fixture(scope="module")
def res():
    return ci_result(experiments.glue)


def test_the_layer_works_on_every_architecture(res):
    """Finite loss and gradients, a gradient on α, every earlier layer untouched, on all four."""
    assert {r["architecture"] for r in res.architectures} == {"bert", "roberta", "albert", "distilbert"}
    for r in res.architectures:
        assert r["all gradients finite"] and r["earlier layers untouched"]
        assert np.isfinite(r["loss"]) and r["dL/dα"] != 0.0


def test_softdecay_flattens_the_last_layer_spectrum_inside_the_model(res):
    """Figure 5: just after the transform the median normalised singular value is higher and the
    skewness lower than just before it, on every task."""
    rows = [r for r in res.spectrum if r["variant"] == "softdecay"]
    assert {r["task"] for r in rows} == set(res.tasks)
    for r in rows:
        assert r["median after SD"] > r["median before SD"], r["task"]
        assert r["skew after SD"] < r["skew before SD"], r["task"]


def test_alpha_is_learned_and_stays_in_its_domain(res):
    for r in res.runs:
        if r["variant"] == "softdecay":
            alphas = r["history"]["alpha"]
            assert all(-0.999 <= a <= -0.001 for a in alphas)
            assert alphas[-1] != pytest.approx(r["alpha"], abs=1e-5)


def test_selection_then_fresh_comparison_seeds(res):
    """The learning rate is the baseline's best on the selection seed, α₀ SoftDecay's best at that rate;
    every comparison run of the task uses them, on seeds other than the selection seed."""
    p = experiments.glue.Params.resolve("ci")
    for task in p.tasks:
        sel = [r for r in res.selection if r["task"] == task]
        lrs = {r["value"]: r["score"] for r in sel if r["choice"].startswith("learning rate")}
        alphas = {r["value"]: r["score"] for r in sel if r["choice"].startswith("initial")}
        assert set(lrs) == set(p.lrs) and set(alphas) == set(p.alphas)
        lr = next(r["value"] for r in sel if r["chosen"] and r["choice"].startswith("learning rate"))
        a0 = next(r["value"] for r in sel if r["chosen"] and r["choice"].startswith("initial"))
        assert lrs[lr] == max(lrs.values()) and alphas[a0] == max(alphas.values())
        comp = [r for r in res.runs if r["task"] == task and r["stage"] == "comparison"]
        assert {r["lr"] for r in comp} == {lr} and {r["alpha"] for r in comp if r["variant"] == "softdecay"} == {a0}
        assert p.seed not in {r["seed"] for r in comp}
        for r in [r for r in res.runs if r["task"] == task and r["stage"] == "selection"]:
            assert r["seed"] == p.seed


def test_every_run_and_comparison_is_there(res):
    """Selection runs, then seeds × (baseline, SoftDecay) and each ExpDecay reading on its seeds, each
    with a final score per metric; one paired comparison per modified variant and metric."""
    p = experiments.glue.Params.resolve("ci")
    n_select = len(p.lrs) + len(p.alphas)
    n_compare = 2 * p.seeds + len(p.expdecay_readings) * p.expdecay_seeds
    assert len(res.runs) == len(p.tasks) * (n_select + n_compare)
    for r in res.runs:
        assert len(r["history"]["epoch"]) == p.epochs
        assert all(0.0 <= v <= 100.0 for k, v in r["history"]["final"].items() if k != "loss")
    n_metrics = sum(len(experiments.glue.TASK_METRICS[t]) for t in p.tasks)
    assert len(res.paired) == n_metrics * (1 + len(p.expdecay_readings))
    assert {r["variant"] for r in res.paired} == {"softdecay", "expdecay (top-5)", "expdecay (all)"}
    assert all(row["baseline n"] == p.seeds and np.isfinite(row["baseline sd"]) for row in res.summary)


def test_the_paper_gains_are_largest_on_rte(res):
    """The prose: the paper's SoftDecay gains over BERT-base are small, largest on RTE."""
    gains = {(g["task"], g["metric"]): g["gain %"] for g in res.paper_gains}
    assert max(gains, key=gains.get) == ("RTE", "acc") and max(gains.values()) < 6.0


def test_book_prose_on_the_committed_grid():
    """What the chapter's verdict says of the committed book grid (every run read from the cache): each
    tuned baseline clears the majority class, and no paired comparison — SoftDecay on five seeds, each
    ExpDecay reading on three — detects a difference from the baseline on any task."""
    from helpers.book.runtime import REPO_ROOT

    p = experiments.glue.Params.resolve("book")
    folder = REPO_ROOT / "results" / "glue" / "book"
    n_runs = len(p.tasks) * (len(p.lrs) + len(p.alphas) + 2 * p.seeds + len(p.expdecay_readings) * p.expdecay_seeds)
    if len(list(folder.glob("*.json"))) < n_runs:
        pytest.skip("book grid not all committed")
    r = experiments.glue.run(p)
    assert all(run["from_cache"] for run in r.runs) and len(r.runs) == n_runs
    first = {}
    for row in r.summary:
        first.setdefault(row["task"], row)
    assert all(row["baseline"] > row["majority class"] for row in first.values())
    assert {row["variant"] for row in r.paired} == {"softdecay", "expdecay (top-5)", "expdecay (all)",
                                                     "expdecay (squared)"}
    assert {row["verdict"] for row in r.paired} == {"no difference detected"}
    assert all(row["seeds"] == (5 if row["variant"] == "softdecay" else 3) for row in r.paired)
    rte = first["RTE"]
    assert max(rte["expdecay (all)"], rte["expdecay (squared)"]) < rte["majority class"] < rte["baseline"]
    # "the gains the paper reports for BERT-base, in points, all lie inside our intervals"
    t2 = experiments.glue.paper_tables()
    bert = t2[(t2.model == "bert-base-uncased")].pivot_table(index=["task", "metric"], columns="variant",
                                                             values="value")
    for row in r.paired:
        if row["variant"] == "softdecay" and (row["task"], row["metric"]) in bert.index:
            gain = bert.loc[(row["task"], row["metric"]), "softdecay"] - bert.loc[(row["task"], row["metric"]),
                                                                                 "baseline"]
            assert row["95% low"] < gain < row["95% high"], (row["task"], row["metric"])
    # the spectra: SoftDecay's output is flatter than right after the transform and than the baseline's
    spec = {(x["task"], x["variant"]): x for x in r.spectrum}
    for task in p.tasks:
        sd, base = spec[(task, "softdecay")], spec[(task, "baseline")]
        assert sd["last layer median"] > sd["median after SD"] > sd["median before SD"]
        assert sd["last layer median"] > base["last layer median"]
    # "α hardly moves"
    from helpers.figures.glue import alpha_max_move

    assert alpha_max_move(r) < 0.1


def test_table_2_as_the_chapter_summarises_it():
    """The chapter's one-line summary of the paper's Table 2: the largest relative SoftDecay gain is on
    RTE for BERT and DistilBERT and on CoLA for ALBERT; the drops are ALBERT's SST-2 and MRPC and
    DistilBERT's MRPC."""
    t2 = experiments.glue.paper_tables()
    t2 = t2[t2.task.isin(["CoLA", "SST-2", "MRPC", "QNLI", "RTE"])]
    wide = t2.pivot_table(index=["model", "task", "metric"], columns="variant", values="value")
    gain = (wide["softdecay"] / wide["baseline"] - 1).reset_index(name="gain")
    best = gain.loc[gain.groupby("model")["gain"].idxmax()].set_index("model")["task"].to_dict()
    assert best == {"bert-base-uncased": "RTE", "distilbert-base-uncased": "RTE", "albert-base-v1": "CoLA"}
    drops = {(m, t) for m, t, g in zip(gain.model, gain.task, gain.gain, strict=True) if g < 0}
    assert drops == {("albert-base-v1", "SST-2"), ("albert-base-v1", "MRPC"), ("distilbert-base-uncased", "MRPC")}


def test_rte_epoch_probe_supports_the_prose():
    """The chapter's RTE paragraph, on the committed 10-epoch probe: the training loss falls below 0.1
    while validation accuracy peaks early (epoch ≤ 3) below 60 % and ends lower; validation loss rises."""
    import json

    from helpers.book.runtime import REPO_ROOT

    probe = json.loads((REPO_ROOT / "results" / "glue" / "probe" / "rte-epochs.json").read_text())
    for run in probe["runs"]:
        acc, loss = run["val_acc"], run["val_loss"]
        peak = int(np.argmax(acc))
        assert run["train_loss"][-1] < 0.1 and peak < 3 and acc[peak] < 60 and acc[-1] < acc[peak]
        assert loss[-1] > loss[1] + 0.5
    assert {round(r["lr"], 6) for r in probe["runs"]} == {5e-5, 1e-4}


def test_side_numbers_are_read_from_the_committed_files():
    """The RTE probe and SST-2 numbers the prose quotes are glued from their result files, not typed in."""
    from helpers.figures.glue import side_numbers

    v = side_numbers()
    assert v["probe-5e-05-peak"] > v["probe-5e-05-last"] and v["probe-5e-05-train-last"] < 0.1
    assert v["probe-0.0001-peak-epoch"] <= 3 and v["sst2-steps"] == 100 and 10 < v["sst2-run-minutes"] < 120


def test_median_note_mentions_missing_variants_only_when_one_is_missing():
    from helpers.figures.glue import median_note

    assert median_note({"baseline": [0.2, 0.3], "softdecay": [0.4]}) == "(ranges over the tasks)"
    assert "not run" in median_note({"baseline": [0.2], "expdecay": []})
