"""Comparisons: `tokuni diagnose A B` (two small local models on one probe, side by side), `tokuni compare a.json
b.json` (the same numbers from the two JSONs), a model's place among the book's reference models, and `tokuni
rerun X.json` (weights and probe checked, every number back, and refusals where either changed). A planted
difference: B is A with a shared offset added in block 2, so the two agree exactly before block 2 and differ
after it."""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from helpers.diagnose import cli, compare, rerun

sys.path.insert(0, str(Path(__file__).parent))
from test_diagnose import tiny_bert, word_probe  # noqa: E402


def _offset(folder: Path) -> Path:
    from transformers import BertModel

    net = BertModel.from_pretrained(folder)
    v = torch.randn(net.config.hidden_size, generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        net.encoder.layer[1].output.dense.bias += v / v.norm() * 8
    net.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    """A (random 3-block BERT, width 64) and B (A plus a shared offset in block 2), diagnosed together."""
    base = tmp_path_factory.mktemp("pair")
    a = tiny_bert(base / "a", seed=11, layers=3, width=64)
    b = _offset(tiny_bert(base / "b", seed=11, layers=3, width=64))
    probe = word_probe(base / "probe.txt", n=24)
    argv = ["diagnose", str(a), str(b), "--probe", str(probe), "--twins", "2", "--draws", "50", "--out",
            str(base / "ab")]
    assert cli.main(argv) == 0
    return base, a, b, probe


def test_two_models_in_one_run_side_by_side(pair, capsys):
    base = pair[0]
    files = sorted(p.name for p in base.iterdir() if p.suffix in (".html", ".json"))
    assert "ab.html" in files and "ab.json" in files and len(files) == 6      # the pair and each model's report
    cmp = json.loads((base / "ab.json").read_text())
    assert cmp["models"] == [str(pair[1]), str(pair[2])] and cmp["notes"] == []
    d = cmp["measures"]["cos"]["differences"][0]
    assert d["paired"]                                         # one probe, one seed, one set of draws
    est, lo, hi = (np.array(d[k], dtype=float) for k in ("estimate", "low", "high"))
    assert np.allclose(est[:2], 0, atol=1e-6) and np.allclose(lo[:2], 0, atol=1e-6)   # identical before block 2
    assert np.all(lo[2:] > 0)                                  # the offset raises the mean cosine after it
    page = (base / "ab.html").read_text()
    assert "among the reference models" in page and page.count("<h2>") >= 10


def test_compare_reads_the_same_numbers_from_the_two_jsons(pair, tmp_path, capsys):
    base = pair[0]
    runs = sorted(base.glob("ab-*.json"))
    assert len(runs) == 2
    assert cli.main(["compare", str(runs[0]), str(runs[1]), "--out", str(tmp_path / "c")]) == 0
    again = json.loads((tmp_path / "c.json").read_text())
    first = json.loads((base / "ab.json").read_text())
    for m in first["measures"]:
        assert again["measures"][m]["differences"][0]["estimate"] == pytest.approx(
            first["measures"][m]["differences"][0]["estimate"], abs=2e-6, nan_ok=True)


def test_runs_on_different_probes_compare_as_independent(pair, tmp_path):
    base, a, _, _ = pair
    other = word_probe(tmp_path / "other.txt", n=24, seed=9)
    assert cli.main(["diagnose", str(a), "--probe", str(other), "--twins", "2", "--draws", "50", "--out",
                     str(tmp_path / "a2")]) == 0
    recs = [compare.Record.read(base / f"ab-{a.name}.json"), compare.Record.read(tmp_path / "a2.json")]
    cmp = compare.compare(recs)
    assert not cmp["measures"]["cos"]["differences"][0]["paired"] and "independent" in cmp["notes"][0]


def test_compare_refuses_what_is_not_a_diagnosis(tmp_path, capsys):
    (tmp_path / "x.json").write_text('{"a": 1}')
    assert cli.main(["compare", str(tmp_path / "x.json"), str(tmp_path / "x.json"), "--out",
                     str(tmp_path / "c")]) == 2
    assert "not the JSON of a tokuni diagnose run" in capsys.readouterr().err


def test_placement_among_the_reference_models():
    refs = compare.references()
    assert "all-MiniLM-L6-v2" in refs and len(refs) >= 5           # the synthesis chapter's committed runs
    mini = refs["all-MiniLM-L6-v2"]["curves"]["cos"]
    fake = {"tool": "tokuni diagnose", "model": "planted", "layer_names": ["embeddings", "block 1"],
            "probe": {}, "measures": {"cos": {"model": {"estimate": [9.0, 9.0], "low": [9.0, 9.0],
                                                        "high": [9.0, 9.0]}}}}
    rows = compare.placement(compare.Record(fake), refs)
    assert rows[0]["rank"] == len(refs) + 1 and rows[0]["above"] is None       # above every reference model
    top = max(refs, key=lambda n: np.nanmean(refs[n]["curves"]["cos"]))
    assert rows[0]["below"] == top
    itself = compare.Record({**fake, "model": "all-MiniLM-L6-v2",
                             "measures": {"cos": {"model": {k: list(mini) for k in ("estimate", "low", "high")}}}})
    row = compare.placement(itself, refs)[0]
    assert row["of"] == len(refs) and row["value"] == pytest.approx(np.nanmean(mini))   # itself left out


# ------------------------------------------------------------------------------------------------ rerun


@pytest.fixture
def one(tmp_path, monkeypatch):
    """A random 2-block BERT diagnosed from a relative folder path."""
    folder = tiny_bert(tmp_path / "m", seed=4, layers=2)
    probe = word_probe(tmp_path / "p.txt", n=16)
    monkeypatch.chdir(tmp_path)
    assert cli.main(["diagnose", "./m", "--probe", "p.txt", "--twins", "2", "--draws", "20", "--out", "r"]) == 0
    return tmp_path, folder, probe


def test_the_json_records_absolute_paths_and_the_device_used(one):
    data = json.loads((one[0] / "r.json").read_text())
    assert data["argv"][1] == str(one[1].resolve()) and data["weights"]["folder"] == str(one[1].resolve())
    assert Path(data["probe"]["path"]).is_absolute() and data["device_used"] == "cpu"


def test_rerun_gives_every_number_again(one, capsys):
    base = one[0]
    capsys.readouterr()
    assert cli.main(["rerun", str(base / "r.json")]) == 0
    out = capsys.readouterr().out
    assert "hash as recorded" in out and "SHA-256 as recorded" in out and "every number came back" in out
    assert (base / "r-rerun.json").exists()


def test_rerun_refuses_changed_weights_or_probe(one, capsys):
    base, folder, probe = one
    text = probe.read_text()
    probe.write_text(text + "w1 w2 w3 w4 w5 w6\n")
    assert cli.main(["rerun", str(base / "r.json"), "--out", str(base / "x")]) == 2
    assert "the probe is not the one the run read" in capsys.readouterr().err
    probe.write_text(text)
    tiny_bert(folder, seed=5, layers=2)                           # other weights in the same folder
    assert cli.main(["rerun", str(base / "r.json"), "--out", str(base / "x")]) == 2
    assert "model.safetensors is not the file the run read" in capsys.readouterr().err
    assert not list(base.glob("x.*"))


def test_moved_names_what_changed_and_by_how_much(one):
    old = json.loads((one[0] / "r.json").read_text())
    new = copy.deepcopy(old)
    assert rerun.moved(old, new) == []
    new["measures"]["ev1"]["model"]["estimate"][1] += 0.01
    rows = rerun.moved(old, new)
    assert len(rows) == 1 and rows[0]["measure"] == "ev1" and rows[0]["part"] == "model"
    assert rows[0]["largest"] == pytest.approx(0.01) and rows[0]["where"] == "block 1 (estimate)"


def test_models_of_different_depths_side_by_side_without_differences(pair, tmp_path):
    base, a = pair[0], pair[1]
    rec = compare.Record.read(base / f"ab-{a.name}.json")
    short = copy.deepcopy(rec.data)
    short["model"], short["layer_names"] = "shorter", short["layer_names"][:-1]
    for row in short["measures"].values():
        row["model"] = {k: v[:-1] for k, v in row["model"].items()}
        row["model_draws"] = [r[:-1] for r in row["model_draws"]]
    cmp = compare.compare([rec, compare.Record(short, "short.json")])
    assert cmp["measures"]["cos"]["differences"] == [None] and "no differences" in cmp["notes"][0]
    page = compare.compare_html(cmp)
    assert "shorter" in page and "<td>block 3</td><td>" in page            # the deeper model's last layer shown
    html_path, json_path = compare.write_comparison(cmp, tmp_path / "d")
    assert json.loads(json_path.read_text())["models"] == [rec.name, "shorter"]
