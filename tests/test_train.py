"""The one training core (`helpers.train.loop.fit`) and its three task adapters: GLUE fine-tuning,
ViT training and MLM pretraining.

One parametrised resume-after-kill test covers the three: a run killed in the middle (between two
checkpoints) and resumed in a "new process" (another global RNG state) ends with the same weights
and the same history as a run that was never interrupted; resuming with other settings raises; and
the test can fail: without restoring the RNG states the resumed run differs (dropout draws)."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch
from PIL import Image

from helpers.train import checkpoint as ckpt_mod
from helpers.train import glue as glue_train
from helpers.train import loop, mlm
from helpers.train import vit as vit_train


@pytest.fixture(scope="module")
def tok():
    return mlm.tokenizer()


def _glue(tok):
    from transformers import BertConfig, BertForSequenceClassification

    from helpers.data.glue import Encoded

    rng = random.Random(0)
    feats = [{"input_ids": [101] + [rng.randrange(2000, 3000) for _ in range(rng.randrange(4, 12))] + [102]}
             for _ in range(24)]
    for f in feats:
        f["attention_mask"] = [1] * len(f["input_ids"])
    tr = Encoded("RTE", "train", feats[:16], [rng.randrange(2) for _ in range(16)])
    ev = Encoded("RTE", "validation", feats[16:], [rng.randrange(2) for _ in range(8)])

    def factory():
        cfg = BertConfig(vocab_size=tok.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                         intermediate_size=64, max_position_embeddings=64, num_labels=2)
        return BertForSequenceClassification(cfg), tok              # dropout on

    def run(path, stop=None, **changes):
        cfg = glue_train.FinetuneConfig(**{**dict(task="RTE", variant="softdecay", epochs=3, batch_size=4, lr=1e-3,
                                                  alpha_lr=2e-2, max_length=24, seed=3), **changes})
        stop_epochs = None if stop is None else stop
        h = glue_train.finetune(cfg, tr, ev, checkpoint=path, stop_after_epochs=stop_epochs, device="cpu",
                                model_factory=factory, keep_model=True)
        return h.pop("_model").state_dict(), {"loss": h["train_loss"], "alpha": h["alpha"],
                                              "eval": [e["loss"] for e in h["eval"]]}
    return run, {"lr": 5e-4}


def _vit(_tok):
    from helpers.core.vit import ViT, ViTConfig

    rng = np.random.default_rng(0)
    imgs = [Image.fromarray(rng.integers(0, 255, (32, 32, 3), dtype=np.uint8)) for _ in range(40)]
    train_set, test_set = (imgs[:32], [i % 10 for i in range(32)]), (imgs[32:], [i % 10 for i in range(8)])

    def run(path, stop=None, **changes):
        torch.manual_seed(0)
        model = ViT(ViTConfig(variant="de-escalated", depth=2, d_model=32, d_ff=64, n_heads=4, patch=8))
        tc = vit_train.TrainConfig(epochs=3, batch_size=8, seed=1, **changes)
        h = vit_train.train(model, train_set, test_set, tc, checkpoint=path, stop_after_epochs=stop)
        return model.state_dict(), {k: h[k] for k in ("train_loss", "train_acc", "test_loss")}
    return run, {"lr": 3e-4}


def _mlm(tok):
    chunks = torch.randint(2000, 6000, (40, 16))

    def run(path, stop=None, **changes):
        cfg = mlm.PretrainConfig(**{**dict(layers=1, d_model=32, n_heads=2, d_ff=64, seq_len=16, batch_size=4,
                                           steps=12, lr=1e-3, checkpoint_steps=(0, 3, 12), resume_every=4, seed=3),
                                    **changes})
        folder = path.with_suffix("")
        h = mlm.pretrain(cfg, chunks, folder, tok=tok, stop_after=None if stop is None else 6)
        w = torch.load(mlm.weights_path(folder, 12), weights_only=True) if h["done"] else {}
        return w, {"loss": h["loss"]}
    return run, {"lr": 2e-3}


TASKS = {"glue": _glue, "vit": _vit, "mlm": _mlm}


@pytest.mark.parametrize("name", sorted(TASKS))
def test_resume_after_kill_gives_the_same_numbers(name, tmp_path, tok):
    run, other = TASKS[name](tok)
    w_full, h_full = run(tmp_path / "a.pt")
    run(tmp_path / "b.pt", stop=1)                                  # killed after epoch 1 (MLM: after step 6)
    torch.manual_seed(12345)                                        # a new process: another RNG state
    w_res, h_res = run(tmp_path / "b.pt")
    for key in h_full:
        np.testing.assert_allclose(h_res[key], h_full[key], rtol=1e-6, atol=1e-7, err_msg=key)
    assert w_full.keys() == w_res.keys() and w_full
    for k in w_full:
        torch.testing.assert_close(w_res[k], w_full[k], rtol=1e-6, atol=1e-7)
    with pytest.raises(ValueError, match="other settings"):
        run(tmp_path / "b.pt", **other)


def test_resume_without_the_rng_states_differs(tmp_path, tok, monkeypatch):
    """The control: drop the RNG restore and the resumed GLUE run (dropout on) is no longer the same."""
    run, _ = _glue(tok)
    w_full, _ = run(tmp_path / "a.pt")
    run(tmp_path / "b.pt", stop=1)
    monkeypatch.setattr(loop, "load_checkpoint", lambda p, map_location="cpu": ckpt_mod.load_checkpoint(
        p, map_location=map_location, restore_rng=False))
    torch.manual_seed(12345)
    w_res, _ = run(tmp_path / "b.pt")
    assert any(not torch.allclose(w_full[k], w_res[k]) for k in w_full)


def test_a_finished_run_returns_at_once(tmp_path, tok):
    run, _ = _mlm(tok)
    _, h = run(tmp_path / "a.pt")
    _, again = run(tmp_path / "a.pt")
    assert again["loss"] == h["loss"]


def test_fit_rejects_an_unknown_precision():
    with pytest.raises(ValueError, match="precision"):
        loop.autocast(torch.device("cpu"), "fp8")


def test_auto_precision_is_bf16_only_where_the_device_computes_it_natively(monkeypatch, tmp_path, tok):
    """`precision="auto"` resolves, in the chapter's parameters (so in its cache key), to bf16 on a device
    with native bf16 and to fp32 elsewhere; asked-for precisions are kept; bf16 on an emulating CPU warns."""
    from helpers.experiments import vit
    from helpers.machinery import runtime

    assert runtime.choose_precision("fp32") == "fp32" and runtime.choose_precision("bf16") == "bf16"
    assert runtime.choose_precision("auto", "meta") == "fp32"                 # no native bf16 on a placeholder
    with pytest.raises(ValueError, match="precision"):
        runtime.choose_precision("fp16")
    for native, expected in ((True, "bf16"), (False, "fp32")):
        monkeypatch.setattr(runtime, "native_bf16", lambda device=None, native=native: native)
        assert runtime.choose_precision("auto", "cpu") == expected
        assert vit.Params.resolve("ci").precision == expected                  # resolved where the key is made
        assert vit.Params.resolve("ci").cache_key()["precision"] == expected
        assert vit.Params.resolve("book").precision == "bf16"                  # the committed runs' precision
        assert vit.Params.resolve("ci", precision="fp32").precision == "fp32"
    cfg = mlm.PretrainConfig(layers=1, d_model=16, n_heads=2, d_ff=32, seq_len=8, batch_size=2, steps=1,
                             checkpoint_steps=(0,), resume_every=1, seed=0)
    chunks = torch.randint(2000, 2100, (4, 8))
    monkeypatch.setattr(loop, "native_bf16", lambda device=None: False)
    with pytest.warns(RuntimeWarning, match="emulated"):
        mlm.pretrain(cfg, chunks, tmp_path / "emulated", tok=tok, precision="bf16")


@pytest.mark.filterwarnings("ignore:bf16 autocast on a CPU without native bf16")   # asked for on purpose
def test_bf16_training_follows_the_fp32_loss_curve(tmp_path, tok):
    """bf16 autocast is accurate enough to be the default where the device computes it natively: over
    40 MLM steps on a tiny model the per-step losses of fp32 and bf16 runs from the same initialisation
    stay within 2 % of each other, while both fall well below the starting loss (the run learns)."""
    chunks = torch.randint(2000, 2100, (64, 16))                   # a 100-token vocabulary slice: learnable
    cfg = mlm.PretrainConfig(layers=1, d_model=64, n_heads=2, d_ff=128, seq_len=16, batch_size=16, steps=40,
                             lr=3e-3, checkpoint_steps=(0,), resume_every=40, seed=0)
    h32 = mlm.pretrain(cfg, chunks, tmp_path / "fp32", tok=tok, precision="fp32")
    h16 = mlm.pretrain(cfg, chunks, tmp_path / "bf16", tok=tok, precision="bf16")
    a, b = np.array(h32["loss"]), np.array(h16["loss"])
    assert a[-5:].mean() < a[:5].mean() - 2.0
    np.testing.assert_allclose(b, a, rtol=0.02)


def test_centring_ablation_zeroes_every_block_mean(tok):
    """The Q/K centring ablation (eq. 21 after each block): every block's output has zero mean over the
    valid tokens of each sequence, padding excluded; without it the means are far from zero."""
    from helpers.hf.walk import transformer_layers

    base = dict(layers=2, d_model=32, n_heads=2, d_ff=64, seq_len=16, batch_size=4, steps=1, checkpoint_steps=(0,))
    ids = torch.randint(1000, 2000, (3, 10))
    mask = torch.ones(3, 10, dtype=torch.long)
    mask[1, 6:] = 0                                                 # padded sequence
    for centre in (False, True):
        torch.manual_seed(0)
        model = mlm.new_mlm(mlm.PretrainConfig(centre=centre, **base), len(tok)).eval()
        outs = []
        for layer in transformer_layers(model):
            layer.register_forward_hook(lambda m, i, o, outs=outs: outs.append(o[0] if isinstance(o, tuple) else o))
        with torch.no_grad():
            model(input_ids=ids, attention_mask=mask)
        w = mask.unsqueeze(-1).float()
        means = [((h * w).sum(1) / w.sum(1)).norm(dim=-1).max().item() for h in outs]
        if centre:
            assert max(means) < 1e-4
        else:
            assert min(means) > 0.1


def test_pretraining_corpus_leaves_out_analysis_and_held_out_text(tok):
    """The mixed corpus never trains on the analysis paragraphs or the held-out block, and its unigram
    baseline lies between a perfect predictor and the uniform one."""
    c = mlm.corpus(tok, 128, n_analysis=16, analysis_seed=0, held_out_chunks=8)
    train = set(map(tuple, c["train"][:, 1:-1].unfold(1, 12, 12).reshape(-1, 12).tolist()))
    held = c["held_out"][:, 1:-1].unfold(1, 12, 12).reshape(-1, 12).tolist()
    assert sum(tuple(h) in train for h in held) < 0.05 * len(held)        # 12-token windows: no overlap
    samples = mlm.analysis_samples(tok, 16, 40, seed=0)
    first = samples["input_ids"][:, 1:13].tolist()                         # the start of each analysis paragraph
    text = " ".join(map(str, c["train"].flatten().tolist()))
    assert sum(" ".join(map(str, f)) in text for f in first) <= 1
    assert 1.0 < c["unigram_nats"] < c["uniform_nats"]
    assert c["train_tokens"] > 1_000_000 and len(c["sources"]) >= 3


def test_a_text_is_tokenised_once_per_process_and_a_changed_one_anew(tok):
    """`mlm.tokenised` (the corpora every seed and variant of a chapter share): the same ids as tokenising
    each paragraph, the same shared list for the same text, and fresh ids for a text that differs in one
    character."""
    paras = ["The cat sat on the mat.", "Dogs bark at night."]
    ids = mlm.tokenised(tok, paras)
    assert ids == [i for p in paras for i in tok(p, add_special_tokens=False)["input_ids"]]
    assert mlm.tokenised(tok, list(paras)) is ids
    other = mlm.tokenised(tok, ["The cat sat on the hat.", "Dogs bark at night."])
    assert other is not ids and other != ids
