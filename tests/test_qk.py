"""Godey et al. §5 / App. C–D helpers: Q/K hooks, attention entropy, the SVD projections and
alignment measures on planted data, MLM masking, and pretraining resume after a kill."""

import math

import numpy as np
import pytest
import torch

from helpers.core import measures as M
from helpers.core import qk
from helpers.experiments import qk as experiment
from helpers.experiments.qk import Params as QKParams
from helpers.hf import qk as hooks
from helpers.hf.qk import MULTIBERT_STEPS
from helpers.machinery.params import ParameterError
from helpers.train import mlm as PT


def tiny_encoder(kind: str):
    from transformers import BertConfig, BertModel, RobertaConfig, RobertaModel

    kw = dict(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
              max_position_embeddings=64)
    torch.manual_seed(0)
    cfg = BertConfig(**kw) if kind == "bert" else RobertaConfig(pad_token_id=1, **kw)
    cfg._attn_implementation = "eager"
    return (BertModel(cfg) if kind == "bert" else RobertaModel(cfg)).eval()


@pytest.mark.parametrize("kind", ["bert", "roberta"])
def test_hooks_capture_the_layers_own_projections_and_probabilities(kind):
    model = tiny_encoder(kind)
    ids = torch.randint(5, 100, (3, 10))
    mask = torch.ones(3, 10, dtype=torch.long)
    mask[1, 6:] = 0                                     # padding
    mask[2, 3:] = 0
    out = hooks.capture(model, ids, mask)
    with torch.no_grad():
        hs = model(input_ids=ids, attention_mask=mask, output_hidden_states=True).hidden_states
    assert len(out["q"]) == 2
    for li, layer in enumerate(model.encoder.layer):
        att = layer.attention.self
        with torch.no_grad():
            q = att.query(hs[li]).view(3, 10, 4, 8).transpose(1, 2)                 # (B, h, L, d_k)
            k = att.key(hs[li]).view(3, 10, 4, 8).transpose(1, 2)
        assert out["q"][li].shape == (3, 4, 10, 8)
        assert torch.allclose(out["q"][li], q, atol=1e-6) and torch.allclose(out["k"][li], k, atol=1e-6)
        assert not torch.allclose(out["q"][li], out["k"][li])
        # the probabilities recomputed from the captured Q, K are the model's own
        P = qk.attention_from_qk(out["q"][li], out["k"][li], mask)
        assert torch.allclose(P, out["p"][li], atol=1e-6)
        assert float(out["p"][li][1, :, :, 6:].abs().max()) == 0.0                  # padded keys get no mass
    with pytest.raises(ValueError, match="query"):
        hooks.attention_modules(torch.nn.Sequential(torch.nn.Linear(3, 3)))


def test_entropy_uniform_one_hot_and_padding():
    n = 7
    uniform = torch.full((2, 3, n, n), 1.0 / n, dtype=torch.float64)
    assert torch.allclose(M.attention_entropy(uniform), torch.full((2, 3), math.log(n), dtype=torch.float64))
    one_hot = torch.eye(n, dtype=torch.float64).expand(2, 3, n, n)
    assert torch.allclose(M.attention_entropy(one_hot), torch.zeros(2, 3, dtype=torch.float64))
    # 4 real tokens, 3 padded: uniform over the real keys, garbage on padded rows
    m = 4
    P = torch.zeros(n, n, dtype=torch.float64)
    P[:, :m] = 1.0 / m
    P[m:] = torch.softmax(torch.randn(n - m, n, dtype=torch.float64), -1)
    mask = torch.arange(n) < m
    assert math.isclose(float(M.attention_entropy(P, mask)), math.log(m), rel_tol=1e-12)
    assert not math.isclose(float(M.attention_entropy(P)), math.log(m), rel_tol=1e-3)
    rows = M.attention_entropy(P, mask, reduce=False)
    assert torch.all(rows[m:] == 0)


def test_top_directions_are_the_svd(float64):
    X = torch.randn(300, 16) @ torch.randn(16, 16) + 2.0
    V, s = qk.top_directions(X.T @ X, 3)
    _, S, Vh = torch.linalg.svd(X, full_matrices=False)
    assert torch.allclose(s, S[:3], rtol=1e-8)
    assert torch.allclose((V.T @ Vh[:3].T).diagonal().abs(), torch.ones(3), atol=1e-8)
    Vo = qk.orient(V, -X.mean(0))
    assert torch.all(-X.mean(0) @ Vo >= 0)


def planted_stats(steps, d=32, n=400, seed=0):
    """Two heads of one layer whose query and key means drift with the step: head 0 along a
    shared direction m (Q = noise + t m, K = noise + t m), head 1 in opposite directions
    (Q = noise + t m', K = noise − t m')."""
    g = torch.Generator().manual_seed(seed)
    m = torch.randn(2, d, generator=g)
    m = 3 * m / m.norm(dim=-1, keepdim=True)
    stats = []
    for t in np.linspace(0, 1, len(steps)):
        noise_q = torch.randn(1, 2, n, d, generator=g)
        noise_k = torch.randn(1, 2, n, d, generator=g)
        sign = torch.tensor([1.0, -1.0])[:, None, None]                              # (h, 1, 1)
        q = noise_q + t * m[:, None, :]                                               # (1, h, n, d)
        k = noise_k + t * sign * m[:, None, :]
        mask = torch.ones(1, n, dtype=torch.bool)
        svd = torch.rand(1, n, generator=g) < 0.2
        stats.append(qk.StepStats.from_batch([q], [k], None, mask, svd, torch.arange(n)[None] < 50))
    return stats


def test_planted_common_and_opposite_drifts_are_found():
    steps = [0, 10, 100, 1000]
    res = qk.analyse(planted_stats(steps), steps)
    cos = res["cos"]                                                                  # (S, 1, 2)
    assert abs(float(cos[0, 0, 0])) < 0.3 and abs(float(cos[0, 0, 1])) < 0.3        # no drift at step 0
    assert float(cos[-1, 0, 0]) > 0.95 and float(cos[-1, 0, 1]) < -0.95
    assert float(res["dot"][-1, 0, 0]) > 8 and float(res["dot"][-1, 0, 1]) < -8
    # on the common SVD the first coordinate of both means grows: same sign for head 0, opposite for head 1
    u = res["means"]["union"]
    q1, k1 = u["q"][..., 0], u["k"][..., 0]                                          # (S, 1, 2)
    assert float(q1[-1, 0, 0]) > 2.5 and float(k1[-1, 0, 0]) > 2.5
    assert float(q1[-1, 0, 1]) * float(k1[-1, 0, 1]) < 0 and abs(float(q1[-1, 0, 1])) > 2.5
    assert float(res["sv1_share"]["union"][0, 0]) > 0.5
    # the SVD of K alone (App. C) also carries the query drift
    kq = res["means"]["K"]["q"][..., 0]
    assert abs(float(kq[-1, 0, 0])) > 2.5 and abs(float(kq[-1, 0, 1])) > 2.5
    assert res["display"]["similar"]["head"] == 0 and res["display"]["opposite"]["head"] == 1
    assert res["display"]["similar"]["union"]["q"].shape == (4, 50, 2)
    few = qk.analyse(planted_stats(steps), steps, display_steps=[0, 1000])["display"]["opposite"]
    assert few["steps"] == [0, 1000] and few["K"]["k"].shape == (2, 50, 2)
    assert qk.pick_steps([0, 10, 20, 50, 100, 200, 300, 500, 700, 1000]) == [0, 20, 100, 1000]
    summary = qk.alignment_summary(cos.numpy(), steps)
    assert summary["common"] == [1] and summary["opposite"] == [1] and summary["unaligned"] == [0]
    assert all(o is not None and o > 0 for o in summary["onset"][0])
    # heads concatenated (Fig. 23): one common and one opposite head cancel out
    assert abs(float(res["cos_concat"][-1, 0])) < 0.3


def test_mlm_masking_follows_bert():
    tok = PT.tokenizer()
    ids = torch.randint(2000, 20000, (64, 128))
    ids[:, 0], ids[:, -1] = tok.cls_token_id, tok.sep_token_id
    inputs, labels = PT.mask_tokens(ids, tok, 0.15, generator=torch.Generator().manual_seed(0))
    sel = labels != -100
    assert abs(float(sel[:, 1:-1].float().mean()) - 0.15) < 0.01
    assert not sel[:, 0].any() and not sel[:, -1].any()                               # specials never masked
    assert torch.equal(labels[sel], ids[sel])
    frac_mask = float((inputs[sel] == tok.mask_token_id).float().mean())
    frac_same = float((inputs[sel] == ids[sel]).float().mean())
    assert abs(frac_mask - 0.8) < 0.03 and abs(frac_same - 0.1) < 0.03
    assert torch.equal(inputs[~sel], ids[~sel])


def test_pretraining_writes_the_weights_of_each_checkpoint_step(tmp_path):
    """(Resume after a kill is tested once for every loop in tests/test_train.py.)"""
    tok = PT.tokenizer()
    cfg = PT.PretrainConfig(layers=1, d_model=32, n_heads=2, d_ff=64, seq_len=16, batch_size=4, steps=12,
                            lr=1e-3, checkpoint_steps=(0, 3, 12), resume_every=4, seed=3)
    chunks = torch.randint(2000, 6000, (40, 16))
    h = PT.pretrain(cfg, chunks, tmp_path / "a", tok=tok, eval_chunks=chunks[:8])
    assert h["done"] and len(h["loss"]) == 12 and set(h["eval_loss"]) == {"0", "3", "12"}
    assert sorted(p.name for p in (tmp_path / "a").glob("step_*.pt")) == [
        "step_0000000.pt", "step_0000003.pt", "step_0000012.pt"]
    w0 = torch.load(PT.weights_path(tmp_path / "a", 0), weights_only=True)
    w12 = torch.load(PT.weights_path(tmp_path / "a", 12), weights_only=True)
    assert not torch.allclose(w0["bert.encoder.layer.0.attention.self.query.weight"],
                              w12["bert.encoder.layer.0.attention.self.query.weight"])
    model = PT.load_step(cfg, tmp_path / "a", 3, len(tok))
    assert len(hooks.capture(model, chunks[:2], torch.ones(2, 16, dtype=torch.long))["p"]) == 1


def test_params_presets_and_paper_path(monkeypatch):
    paper = QKParams.resolve("paper")
    assert paper.source == "multiberts" and paper.seeds == 5 and paper.n_samples == 128
    assert paper.steps == MULTIBERT_STEPS and len(MULTIBERT_STEPS) == 29 and MULTIBERT_STEPS[-1] == 2_000_000
    assert hooks.multibert_id(0, 40_000) == "google/multiberts-seed_0-step_40k"
    with pytest.raises(ValueError, match="thousands"):
        hooks.multibert_id(0, 1500)
    with pytest.raises(ParameterError, match="MultiBERT"):
        QKParams.resolve("paper", steps=(0, 30_000))
    with pytest.raises(ParameterError, match="seeds 0-4"):
        QKParams.resolve("paper", seed=3, seeds=3)
    with pytest.raises(ParameterError, match="steps"):
        QKParams.resolve("ci", steps=(10, 5))
    with pytest.raises(ParameterError, match="train_split"):
        QKParams.resolve("ci", train_split="train")
    from helpers.hf import models

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(models.ModelUnavailable, match="hub"):
        experiment.run(QKParams.resolve("paper", seeds=1, steps=(0, 20_000)))


def test_cache_key_separates_run_seeds_and_ignores_resume_points():
    """The committed trajectories are keyed by base seed (it draws the analysis samples) and run
    seed (it seeds the pretraining); resume points and the reading threshold do not change them."""
    p = QKParams.resolve("book")
    k0 = p.cache_key(drop=("seeds",), run_seed=0, analysis_version=experiment.ANALYSIS_VERSION)
    k1 = p.cache_key(drop=("seeds",), run_seed=1, analysis_version=experiment.ANALYSIS_VERSION)
    assert k0 != k1 and k0["seed"] == k1["seed"] == 0 and "seeds" not in k0
    assert p.with_(resume_every=7, threshold=0.3).cache_key(drop=("seeds",), run_seed=0,
                                                            analysis_version=experiment.ANALYSIS_VERSION) == k0
    assert p.with_(n_samples=64).cache_key(drop=("seeds",), run_seed=0,
                                           analysis_version=experiment.ANALYSIS_VERSION) != k0
    pc = experiment.pretrain_config(p, 1)
    assert pc.seed == 1 and pc.d_model == p.d_model and pc.checkpoint_steps == p.steps
    assert pc.steps == max(p.steps) == 15000


def test_compare_runs_reads_planted_trajectories():
    """The chapter's numbers: one common and one opposite head per seed, onsets by final sign,
    |Q̄·K̄| growth, an entropy dip and rebound, and the other mean on the K-/Q-only SVD (App. C)."""
    steps = [0, 10, 100, 1000]
    res = qk.analyse(planted_stats(steps), steps)
    runs = {}
    for s in (0, 1):
        r = dict(res)
        r["entropy_layer"] = np.array([[4.0], [2.0], [1.0], [1.5]])          # dips at step 100, rebounds 0.5
        runs[s] = r
    c = experiment.compare_runs(runs, steps, threshold=0.5)
    assert c["n_heads"] == 4 and c["heads_per_layer"] == 4
    assert c["n_common"] == 2 and c["n_opposite"] == 2 and c["common_layers"] == [] and c["opposite_layers"] == []
    assert c["abs_cos_first"] < 0.3 and c["abs_cos_final"] > 0.95
    assert len(c["onsets"]["common"]) == 2 and len(c["onsets"]["opposite"]) == 2
    assert c["median_onset"]["common"] in steps[1:]
    assert c["abs_dot_growth"] > 5
    assert c["entropy_falls"] == 1 and c["entropy_lowest_step"] == [100] and c["entropy_rebound_layers"] == [0]
    assert c["concat_same_sign_layers"] in (0, 1) and c["concat_spread"] == 0.0
    assert c["other_mean"]["K"]["moved"] == 2 and c["other_mean"]["K"]["final"] > 2.5
    # a layer with only opposite heads is named as such
    flipped = {s: dict(r, cos=-np.abs(np.asarray(r["cos"]))) for s, r in runs.items()}
    assert experiment.compare_runs(flipped, steps)["opposite_layers"] == [0]


def test_pretraining_settings_reach_the_model():
    """dropout and the centring ablation of the Params reach the pretraining config and the model."""
    from helpers.experiments import qk as X
    from helpers.train import mlm as M

    p = X.Params.resolve("ci", dropout=0.0, centre=True, corpus="mixed")
    pc = X.pretrain_config(p, 3)
    assert (pc.dropout, pc.centre, pc.seed) == (0.0, True, 3)
    model = M.new_mlm(pc, 100)
    assert model.config.hidden_dropout_prob == 0.0 and model.config.attention_probs_dropout_prob == 0.0
    assert len(model.bert.encoder.layer[0]._forward_hooks) == 1
    with pytest.raises(Exception, match="dropout"):
        X.Params.resolve("ci", dropout=1.5)


def test_multibert_ids_are_the_hubs():
    """The 29 MultiBERT ids per seed on the hub: step_0k (initialisation), step_20k … step_200k
    every 20k, step_300k … step_2000k every 100k. The cards' "28 checkpoints" per run leave out step 0;
    google/multiberts-seed_0-step_0k exists (as do seed_1/2/4-step_0k)."""
    ids = [hooks.multibert_id(0, s) for s in MULTIBERT_STEPS]
    want = [f"google/multiberts-seed_0-step_{k}k" for k in [*range(0, 201, 20), *range(300, 2001, 100)]]
    assert ids == want and len(set(ids)) == 29
    assert "google/multiberts-seed_0-step_220k" not in ids and "google/multiberts-seed_0-step_250k" not in ids


@pytest.fixture(scope="module")
def ci_trajectory():
    """The qk `ci` trajectory of the first seed, computed once for the export tests (at `ci` it is recomputed:
    the pretraining runs, its weights stay in the checkpoint folder): (params, record)."""
    from helpers.experiments import qk

    p = qk.Params.resolve("ci")
    record, _ = qk.run_seed(p, p.seed)
    return p, record


def test_export_book_model_loads_through_models_load(ci_trajectory, tmp_path, monkeypatch):
    """The book's own MLM BERT, exported from the pretraining's best checkpoint, loads by name through
    `models.load` (as the STS chapter's encoders do) and gives the same MLM logits as the checkpoint;
    without an export, `models.load` says how to make one."""
    import json

    from helpers.experiments import qk
    from helpers.hf import models
    from helpers.machinery import results
    from helpers.train import mlm

    p, record = ci_trajectory
    monkeypatch.setattr(qk.compute, "run_seed", lambda q, seed, device="cpu": (record, True))
    monkeypatch.setattr(models, "book_model_dir", lambda name: tmp_path / name)
    with pytest.raises(models.ModelUnavailable, match="export_book_model"):
        models.load("book-mlm-bert")
    out = qk.export_model(p)
    info = json.loads((out / "BOOK_MODEL.json").read_text())
    evals = {int(k): v for k, v in record["eval_loss"].items()}
    assert info["step"] == min(evals, key=evals.get) and info["held_out_mlm_nats"] == pytest.approx(evals[info["step"]])
    loaded = models.load("book-mlm-bert")
    assert loaded.trained and "not a released checkpoint" in loaded.description
    pc = qk.pretrain_config(p, p.seed)
    ckpt = results.checkpoint_dir("qk", {**pc.stored(), "precision": p.precision})
    ref = mlm.load_step(pc, ckpt, info["step"], len(mlm.tokenizer()))
    ids = loaded.tokenizer(["the cat sat on the mat ."], return_tensors="pt")
    with torch.no_grad():
        h = loaded.model(**ids).last_hidden_state
        h_ref = ref.bert(**ids).last_hidden_state
    assert torch.allclose(h, h_ref, atol=1e-5)


def test_export_train_remakes_the_weights_and_checks_them_against_the_record(ci_trajectory, tmp_path, monkeypatch):
    """`export_model(train=True)` on a machine without the pretraining's weights re-runs the pretraining and
    exports only when its held-out losses equal the committed trajectory's; a record the re-run does not
    reproduce stops it; without `train` a missing checkpoint says how to make it."""
    import shutil

    from helpers.experiments import qk
    from helpers.hf import models
    from helpers.machinery import results

    monkeypatch.setattr(models, "book_model_dir", lambda name: tmp_path / name)
    p, record = ci_trajectory
    monkeypatch.setattr(qk.compute, "run_seed", lambda q, seed, device="cpu": (record, True))
    pc = qk.pretrain_config(p, p.seed)
    ckpt = results.checkpoint_dir("qk", {**pc.stored(), "precision": p.precision})
    shutil.rmtree(ckpt)
    with pytest.raises(FileNotFoundError, match="--train"):
        qk.export_model(p)
    reruns = []
    real = qk.pretrain_weights

    def pretrain(*args, **kwargs):
        reruns.append(real(*args, **kwargs))
        return reruns[-1]

    monkeypatch.setattr(qk.compute, "pretrain_weights", pretrain)
    out = qk.export_model(p, train=True)
    assert len(reruns) == 1 and (out / "BOOK_MODEL.json").is_file() and any(ckpt.glob("step_*.pt"))
    # a record the re-run does not reproduce: the same re-run's history (no second pretraining) against losses
    # 0.5 nats off stops the export
    for step in list(ckpt.glob("step_*.pt")):
        step.unlink()
    monkeypatch.setattr(qk.compute, "pretrain_weights", lambda *a, **k: reruns[0])
    off = {**record, "eval_loss": {k: v + 0.5 for k, v in record["eval_loss"].items()}}
    monkeypatch.setattr(qk.compute, "run_seed", lambda q, seed, device="cpu": (off, True))
    with pytest.raises(RuntimeError, match="does not reproduce"):
        qk.export_model(p, train=True)


def test_centred_model_mean_query_and_key_are_the_projection_biases():
    """The ablation's premise: with every block output centred per sequence, the hidden states entering
    layers 1, 2, … have zero mean over the real tokens, so the analysis's Q̄ and K̄ there are exactly
    b_Q and b_K (layer 0 reads the uncentred embeddings); without centring they are not."""
    from helpers.train import mlm

    tok = mlm.tokenizer()
    base = dict(layers=3, d_model=32, n_heads=2, d_ff=64, seq_len=16, batch_size=4, steps=1, checkpoint_steps=(0,))
    ids = torch.randint(1000, 2000, (4, 12))
    mask = torch.ones(4, 12, dtype=torch.long)
    mask[1, 7:] = 0
    for centre in (True, False):
        torch.manual_seed(0)
        model = mlm.new_mlm(mlm.PretrainConfig(centre=centre, **base), len(tok), attn_implementation="eager").eval()
        for prm in model.parameters():                       # non-zero biases, so the property is not trivial
            prm.data.add_(0.05 * torch.randn_like(prm))
        st = hooks.step_statistics(model, ids, mask, svd_fraction=0.5, n_display=4)
        for li, layer in enumerate(model.bert.encoder.layer):
            bq = layer.attention.self.query.bias.detach().double().view(2, 16)
            bk = layer.attention.self.key.bias.detach().double().view(2, 16)
            close = (torch.allclose(st.q_mean[li], bq, atol=1e-5)
                     and torch.allclose(st.k_sum[li] / st.count, bk, atol=1e-5))
            assert close == (centre and li > 0), (centre, li)


def test_mean_abs_cos_of_random_directions():
    """The chance level the chapter quotes: E|cos| of two random directions in ℝ^d, checked by Monte
    Carlo and against √(2/(πd)); d = 2 gives 2/π exactly."""
    from helpers.core.qk import mean_abs_cos_random

    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((2, 20000, 64))
    mc = np.abs((a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)).mean()
    assert abs(mean_abs_cos_random(64) - mc) < 0.003
    assert abs(mean_abs_cos_random(64) - np.sqrt(2 / (np.pi * 64))) < 0.002
    assert abs(mean_abs_cos_random(2) - 2 / np.pi) < 1e-12


def test_key_bias_gets_no_gradient():
    """Why the centred model has no mean key: adding b_K to every key adds q_i·b_K to every score of row
    i, which the softmax ignores, so the MLM loss's gradient with respect to b_K is zero (to fp32
    round-off) while b_Q's is not."""
    from helpers.train import mlm

    tok = mlm.tokenizer()
    torch.manual_seed(0)
    cfg = mlm.PretrainConfig(layers=2, d_model=32, n_heads=2, d_ff=64, seq_len=16, batch_size=4, steps=1,
                             checkpoint_steps=(0,))
    model = mlm.new_mlm(cfg, len(tok), attn_implementation="eager")
    ids = torch.randint(1000, 2000, (4, 12))
    labels = ids.clone()
    labels[:, ::2] = -100
    model(input_ids=ids, labels=labels).loss.backward()
    for layer in model.bert.encoder.layer:
        gq = layer.attention.self.query.bias.grad.norm()
        gk = layer.attention.self.key.bias.grad.norm()
        assert gq > 0 and gk < 1e-3 * gq


def test_long_pretraining_recipe_is_a_recipe_of_the_grid():
    """`LONG_PRETRAINING` (the GPU recipe for the 1.5-nat bar) is a valid book-scale setting that sees far
    more tokens than the book runs, with checkpoints from step 0, and is the grid runner's `--recipe long`
    (its listing: tests/test_grid.py)."""
    from helpers.experiments import qk

    book = qk.Params.resolve("book")
    long = qk.Params.resolve("book", **qk.RECIPES["long"])
    tokens = lambda p: max(p.steps) * p.batch_size * p.seq_len  # noqa: E731
    assert tokens(long) >= 20 * tokens(book) and long.steps[0] == 0 and long.ablation and long.seeds >= 3
    assert long.cache_key() != book.cache_key()            # written beside the committed runs, not over them
    assert qk.RECIPES["long"] is qk.LONG_PRETRAINING and "--recipe long" in qk.LONG_COMMAND


def test_bundle_carries_what_pretraining_reads(tmp_path, monkeypatch):
    """`scripts/bundle.py` writes the mirror's WikiText, GLUE and STS parts and BERT's tokenizer: pointed at
    the bundle ($TOKUNI_DATA, $TOKUNI_TOKENIZER), the loaders read the same text and the tokenizer encodes
    alike (what a machine with neither the mirror nor the tokenizer's package needs to build the mixed corpus)."""
    import importlib.util

    from helpers.data import data_root, load_glue, load_sts, load_wikitext103
    from helpers.machinery.runtime import REPO_ROOT
    from helpers.train import mlm

    if data_root() is None:
        pytest.skip("no data mirror")
    spec = importlib.util.spec_from_file_location("bundle", REPO_ROOT / "scripts" / "bundle.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.main([str(tmp_path)]) == 0
    with pytest.raises(SystemExit, match="has no nope/"):
        mod.bundle(tmp_path / "other", ("nope",))

    def texts():
        return (load_wikitext103("validation"), list(load_sts("STS12").sentence1),
                list(load_glue("RTE", "train").sentence1))

    before = texts()
    text = "Token similarity escalates in deep post-norm transformers."
    ids = mlm.tokenizer()(text)["input_ids"]
    monkeypatch.setenv("TOKUNI_DATA", str(tmp_path / "data"))
    monkeypatch.setenv("TOKUNI_TOKENIZER", str(tmp_path / "tokenizer"))
    assert data_root() == tmp_path / "data"
    assert texts() == before
    tok = mlm.tokenizer()
    assert tok.name_or_path == str(tmp_path / "tokenizer") and tok(text)["input_ids"] == ids


def test_later_layer_entropy_leaves_layer_0_out_and_pairs_seeds():
    """Planted: layer 0 falls 4 nats in the centred runs only and must not count; in layers 1-2 the plain
    drop is 1.0 + 0.1·seed and the centred one 0.5 + 0.1·seed, so every paired difference is -0.5 (a
    zero-width interval), and the per-layer final differences are the planted ones."""
    steps = [0, 10, 20]

    def run(seed, centred):
        e = np.full((3, 3), 4.0)
        e[-1, 1:] = 4.0 - ((0.5 if centred else 1.0) + 0.1 * seed)
        e[1, 1:] = 3.9
        if centred:
            e[-1, 0] = 0.0
        return {"entropy_layer": e.tolist()}
    plain = {str(s): run(s, False) for s in range(3)}
    centred = {str(s): run(s, True) for s in reversed(range(3))}        # pairing by seed, not by order
    out = experiment.later_layer_entropy(plain, centred, steps)
    assert out["layers"] == [1, 2] and out["seeds"] == [0, 1, 2]
    assert out["diff_drop"] == pytest.approx([-0.5] * 3)
    from helpers.core.stats import t_interval

    iv = t_interval(out["diff_drop"])
    assert iv.estimate == pytest.approx(-0.5) and iv.high == pytest.approx(-0.5)
    assert t_interval(out["centred"]["drop"]).low > 0 and out["plain"]["final_mean"] == pytest.approx(2.9)
    assert np.allclose(out["layer_diff_final"], 0.5)
    with pytest.raises(ValueError, match="layers"):
        experiment.later_layer_entropy(plain, centred, steps, first_layer=3)
    with pytest.raises(ValueError, match="seed"):
        experiment.later_layer_entropy(plain, {}, steps)


def _fake_result(sim_cos, opp_cos, threshold=0.5, onsets=(None, 300)):
    cos = np.array([[[opp_cos, sim_cos]]]).repeat(2, axis=0)                 # (S, layers, heads)
    disp = {"similar": {"layer": 0, "head": 1, "cos_final": sim_cos},
            "opposite": {"layer": 0, "head": 0, "cos_final": opp_cos}}
    per_seed = [{"seed": 0, "eval_final": 7.0, "n_common": int(sim_cos >= threshold), "n_opposite": 1,
                 "median_onset": {"common": onsets[0], "opposite": onsets[1]}, "abs_cos_final": 0.5,
                 "entropy_first": 4.0, "entropy_lowest": 2.0, "entropy_lowest_step": 10, "entropy_final": 2.5,
                 "entropy_rebound_layers": []}]
    return experiment.Result(source="pretrain", what="planted", steps=[0, 10], seeds=[0], shown=[0, 10],
                             n_samples=2, batch_size=1, seq_len=8, d_k=64, threshold=threshold,
                             runs={"0": {"display": disp, "cos": cos.tolist()}}, comparison={"per_seed": per_seed})


def test_example_heads_are_named_by_the_threshold():
    """The 'similar' example is called similar only when its cos reaches the threshold; below it the figures
    say 'most positive (unaligned)'."""
    below = _fake_result(0.46, -0.94)
    assert below.example_label("similar") == "most positive (unaligned)"
    assert below.example_label("opposite") == "opposite"
    above = _fake_result(0.7, -0.3)
    assert above.example_label("similar") == "similar"
    assert above.example_label("opposite") == "most negative (unaligned)"


def test_seed_table_shows_a_dash_for_a_missing_onset():
    from helpers.figures import qk as fq

    html = fq.seed_table(_fake_result(0.46, -0.94, onsets=(None, 300))).to_html()
    assert "<NA>" not in html and ">300<" in html
    html = fq.seed_table(_fake_result(0.46, -0.94, onsets=(None, None))).to_html()
    assert fq.MISSING in html and "<NA>" not in html


def test_chance_share_of_aligned_heads():
    """Pr(|cos| ≥ t) for two random directions in R^d (the chance level of an aligned head): by Monte Carlo
    at d = 8, exactly at d = 2 (a uniform angle), and negligible at the chapter's d_k = 64."""
    from helpers.core.qk import chance_aligned_share

    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((2, 200000, 8))
    c = np.abs((a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1))
    assert abs(chance_aligned_share(8, 0.5) - (c >= 0.5).mean()) < 0.005
    assert chance_aligned_share(2, 0.5) == pytest.approx(2 / 3)          # a uniform angle: |cos| ≥ 1/2 on 2/3
    assert chance_aligned_share(64, 0.5) < 1e-4


# --- the end state of real pretraining -----------------------------------------------------------

def _moments(q: torch.Tensor, k: torch.Tensor) -> qk.QKMoments:
    """Moments of one layer of per-head vectors q, k (h, n, d) as one batch of n tokens."""
    mask = torch.ones(1, q.shape[1], dtype=torch.bool)
    return qk.QKMoments.from_batch([q.unsqueeze(0)], [k.unsqueeze(0)], mask)


def test_end_state_finds_planted_aligned_means():
    """Heads whose queries and keys scatter around means planted along a common (+) or opposite (−)
    direction give |cos(Q̄, K̄)| ≈ 1 with the planted sign, whatever the noise around them."""
    g = torch.Generator().manual_seed(0)
    h, n, d = 6, 4000, 32
    mu = torch.randn(h, 1, d, generator=g)
    sign = torch.tensor([1.0, -1.0] * 3).view(h, 1, 1)
    q = 3 * mu + torch.randn(h, n, d, generator=g)
    k = 2 * sign * mu + torch.randn(h, n, d, generator=g)
    out = qk.end_state(_moments(q, k))
    cos = np.asarray(out["cos"])[0]
    assert np.allclose(np.abs(cos), 1, atol=0.02) and np.array_equal(np.sign(cos), sign.view(-1).numpy())
    assert np.all(np.asarray(out["mean_share"]) > 0.3)


def test_end_state_of_random_means_is_at_chance():
    """Independent random means: the mean |cos| over many heads is the chance level E|cos| in R^d, and
    no more heads pass 0.5 than chance allows."""
    g = torch.Generator().manual_seed(1)
    h, n, d = 2000, 64, 32
    q = torch.randn(h, 1, d, generator=g) + 0.1 * torch.randn(h, n, d, generator=g)
    k = torch.randn(h, 1, d, generator=g) + 0.1 * torch.randn(h, n, d, generator=g)
    cos = np.abs(np.asarray(qk.end_state(_moments(q, k))["cos"]))
    assert cos.mean() == pytest.approx(qk.mean_abs_cos_random(d), abs=0.01)
    assert (cos >= 0.5).mean() == pytest.approx(qk.chance_aligned_share(d, 0.5), abs=0.01)


def test_score_parts_are_the_brute_force_shares():
    """The mean's share of the score is mean(s)² / mean(s²) over every query-key pair; the mean query's
    share of what the softmax sees is that of Q̄·(k_j − K̄) in q_i·(k_j − K̄); both lie in [0, 1]; a head
    whose every query and key is the same vector has all of its score in the mean; a zero mean query has none
    of the softmax's part."""
    g = torch.Generator().manual_seed(2)
    q = (torch.randn(300, 8, generator=g) + torch.randn(8, generator=g)).double()
    k = (2 * torch.randn(200, 8, generator=g) + torch.randn(8, generator=g)).double()
    r = qk.score_parts(q.mean(0), k.mean(0), q.T @ q / len(q), k.T @ k / len(k))
    s = q @ k.T
    kc = k - k.mean(0)
    assert float(r["mean_share"]) == pytest.approx(float(s.mean() ** 2 / (s ** 2).mean()), rel=1e-9)
    assert float(r["drift_share"]) == pytest.approx(float((q.mean(0) @ kc.T).pow(2).mean() / (q @ kc.T).pow(2).mean()),
                                                    rel=1e-9)
    assert 0 <= float(r["mean_share"]) <= 1 and 0 <= float(r["drift_share"]) <= 1
    c = torch.randn(8, generator=g).double()
    same = qk.score_parts(c, 2 * c, torch.outer(c, c), 4 * torch.outer(c, c))
    assert float(same["mean_share"]) == pytest.approx(1.0)
    qz = q - q.mean(0)
    assert float(qk.score_parts(qz.mean(0), k.mean(0), qz.T @ qz / len(q), k.T @ k / len(k))["drift_share"]) < 1e-20


def test_moments_leave_padding_out_and_add_over_batches():
    g = torch.Generator().manual_seed(3)
    q, k = torch.randn(2, 3, 5, 4, generator=g), torch.randn(2, 3, 5, 4, generator=g)
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]])
    whole = qk.QKMoments.from_batch([q], [k], mask)
    parts = qk.QKMoments.from_batch([q[:1]], [k[:1]], mask[:1]) + qk.QKMoments.from_batch([q[1:]], [k[1:]], mask[1:])
    assert whole.count == 8 and parts.count == 8
    assert torch.allclose(whole.q_gram, parts.q_gram) and torch.allclose(whole.k_sum, parts.k_sum)
    real = torch.cat([q[0, :, :3], q[1]], dim=1)                                    # (h, 8, d)
    assert torch.allclose(whole.q_sum[0], real.sum(1).double())


def _captured(model, n: int, length: int, padded: tuple[int, int]):
    """Random ids (n, length), sequence `padded[0]` padded from position `padded[1]`, one forward pass under
    `hf.capture.Capture`: (ids, mask, what it recorded by name, the attention probabilities per block)."""
    from helpers.hf.capture import Capture, blocks

    ids = torch.randint(0, 50, (n, length))
    mask = torch.ones(n, length, dtype=torch.long)
    mask[padded[0], padded[1]:] = 0
    with Capture(model) as cap, torch.no_grad():
        rec = cap(attentions=True, input_ids=ids, attention_mask=mask)
    return ids, mask, rec, blocks(rec, "attn.pattern")


def test_call_capture_gives_the_scores_of_a_rotary_grouped_decoder():
    """A Llama-style decoder (rotary embedding, 4 query heads on 2 key heads): the captured queries and keys,
    after the rotation and with grouped keys repeated, give exactly the model's causal attention; before
    the rotation they give other scores."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=50, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                      num_key_value_heads=2, attn_implementation="eager")
    model = LlamaForCausalLM(cfg).eval()
    ids, mask, rec, att = _captured(model, 3, 7, padded=(1, 5))
    assert "blocks.2.attn.q" not in rec and rec["blocks.0.attn.q"].shape == rec["blocks.1.attn.k"].shape == (3, 4, 7, 8)
    allowed = torch.ones(7, 7).tril().bool()[None, None] & mask[:, None, None, :].bool()
    real = mask.bool()[:, None, :, None].expand(3, 4, 7, 7)
    for li in range(2):
        s = rec[f"blocks.{li}.attn.q"] @ rec[f"blocks.{li}.attn.k"].transpose(-1, -2) / math.sqrt(8)
        p = torch.softmax(s.masked_fill(~allowed, float("-inf")), -1)
        assert torch.allclose(p[real], att[li][real], atol=1e-6)
        pre = (rec[f"blocks.{li}.attn.q_pre_rotary"] @ rec[f"blocks.{li}.attn.k_pre_rotary"].transpose(-1, -2)
               / math.sqrt(8))
        assert not torch.allclose(pre, s, atol=1e-3)


def test_call_capture_sees_albert_shared_layer_once_per_depth():
    """ALBERT runs one shared attention module at every depth: the capture records one entry per call, and
    each gives that depth's attention."""
    from transformers import AlbertConfig, AlbertModel

    torch.manual_seed(0)
    cfg = AlbertConfig(vocab_size=50, embedding_size=16, hidden_size=32, num_attention_heads=4, intermediate_size=64,
                       num_hidden_layers=3, attn_implementation="eager")
    model = AlbertModel(cfg).eval()
    ids, mask, rec, att = _captured(model, 2, 6, padded=(0, 4))
    assert "blocks.2.attn.q" in rec and "blocks.3.attn.q" not in rec
    for li in range(3):
        s = rec[f"blocks.{li}.attn.q"] @ rec[f"blocks.{li}.attn.k"].transpose(-1, -2) / math.sqrt(8)
        p = torch.softmax(s.masked_fill(~mask[:, None, None, :].bool(), float("-inf")), -1)
        assert torch.allclose(p, att[li], atol=1e-6)
    m = hooks.end_state_moments(model, ids, mask, batch_size=1)
    assert set(m) == {"qk"} and m["qk"].count == 10 and m["qk"].q_sum.shape == (3, 4, 8)


def test_end_state_runs_leave_the_trajectory_keys_alone():
    """The end-state fields are not part of a trajectory's cache key (the committed runs stay valid), and an
    end-state run's key holds only what it depends on."""
    p = QKParams.resolve("book")
    spec = experiment.run_spec(p, 0)
    assert not set(experiment.END_STATE_FIELDS) & set(spec.key)
    es = experiment.end_state_spec(p, "AntiBERTy")
    assert es.key == {"seed": p.seed, "end_state": "AntiBERTy", "end_state_samples": p.end_state_samples,
                      "end_state_length": p.end_state_length}
    with pytest.raises(ParameterError):
        QKParams.resolve("ci", end_state=("bert-base-uncased",))


def test_an_end_state_model_without_a_record_is_reported_when_the_run_may_not_measure_it(monkeypatch):
    """The book build (train_missing=False) reads the committed end-state records; a model with none (the byte
    MLM, whose checkpoint is never committed) is listed as missing with the command, not a failed chapter."""
    from helpers.experiments import qk
    from helpers.machinery import results

    def execute(spec, train_missing=True):
        if spec.name.endswith("byte-MLM"):
            raise results.MissingRuns(spec.chapter, spec.scale, [spec.name])
        return {"model": spec.name}, True

    monkeypatch.setattr(results, "execute", execute)
    p = qk.Params.resolve("book", train_missing=False)
    done, missing, hits = qk.end_state_runs(p)
    assert set(missing) == {"byte-MLM"} and "make grid CHAPTER=qk" in missing["byte-MLM"]
    assert set(done) == set(p.end_state) - {"byte-MLM"} and all(hits)


def test_the_trend_starts_where_the_pretraining_schedule_ends_its_warm_up():
    """`Result.warmup_steps` is the step at which the MLM pretraining's learning rate peaks and starts its linear
    decay to zero (`train.mlm`'s schedule), for the book preset and the ci one; the trend's checkpoints start
    there."""
    from helpers.train import mlm

    for scale in ("ci", "book"):
        p = QKParams.resolve(scale)
        rate = mlm._schedule(experiment.pretrain_config(p, p.seed))
        res = experiment.Result(source="pretrain", what="", steps=list(p.steps), seeds=[p.seed], shown=[],
                                n_samples=p.n_samples, batch_size=p.batch_size, seq_len=p.seq_len, d_k=p.d_k,
                                threshold=p.threshold, warmup=p.warmup)
        w = res.warmup_steps
        assert rate(w - 2) < rate(w - 1) == rate(w) == 1.0 > rate(w + 1), scale
        assert rate(max(p.steps)) == 0.0
        assert res.trend_steps() == [s for s in p.steps if s >= w], scale
