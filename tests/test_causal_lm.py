"""The deep causal LM of the Figure 7 experiment: causality of every variant (the prefix-mean
de-escalation included), eq. (21) at the last position, and the training adapter."""

import pytest
import torch
from testutil import seeded_randn

from helpers.core.blocks import deescalate
from helpers.core.causal_lm import VARIANTS, CausalLM, LMConfig, prefix_deescalate


@pytest.mark.parametrize("variant", VARIANTS)
def test_no_output_depends_on_later_inputs(variant):
    torch.manual_seed(0)
    model = CausalLM(LMConfig(variant=variant, vocab=50, depth=3, d_model=16, n_heads=2, d_ff=32, seq_len=12)).eval()
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(50, (2, 12), generator=g)
    t = 6
    changed = ids.clone()
    changed[:, t + 1:] = torch.randint(50, (2, 12 - t - 1), generator=g)
    with torch.no_grad():
        a, b = model(ids), model(changed)
    assert torch.allclose(a[:, : t + 1], b[:, : t + 1], atol=1e-5)        # positions 0..t unchanged
    assert not torch.allclose(a[:, t + 1:], b[:, t + 1:], atol=1e-3)       # later ones do change


def test_whole_sequence_mean_would_leak():
    """The control: eq. (21) with the whole-sequence mean makes position 0 depend on the last input."""
    x = seeded_randn(1, 8, 4, seed=2)
    y = x.clone()
    y[:, -1] += 1.0
    assert not torch.allclose(deescalate(x)[:, 0], deescalate(y)[:, 0])
    assert torch.allclose(prefix_deescalate(x)[:, 0], prefix_deescalate(y)[:, 0])


def test_the_sequence_mean_control_leaks_and_the_prefix_mean_does_not():
    """The deeplm leakage control: the de-escalated model with the whole sequence's mean (`deesc_mean=
    "sequence"`) lets position 0 depend on the last input; with the prefix mean it does not."""
    outs = {}
    for mean in ("prefix", "sequence"):
        torch.manual_seed(0)
        model = CausalLM(LMConfig(variant="de-escalated", vocab=50, depth=2, d_model=16, n_heads=2, d_ff=32,
                                  seq_len=8, deesc_mean=mean)).eval()
        ids = torch.randint(50, (1, 8), generator=torch.Generator().manual_seed(1))
        changed = ids.clone()
        changed[0, -1] = (ids[0, -1] + 1) % 50
        with torch.no_grad():
            outs[mean] = (model(ids)[0, :-1] - model(changed)[0, :-1]).abs().max().item()
    assert outs["prefix"] < 1e-5 < 1e-3 < outs["sequence"]
    with pytest.raises(ValueError, match="deesc_mean"):
        LMConfig(deesc_mean="future")


def test_deeplm_runs_the_leakage_control_and_tau_only_in_de_escalated_models(tmp_path):
    """The chapter's switch: the variant `de-escalated-sequence-mean` trains a de-escalated model with the
    whole-sequence mean; a τ other than 1 leaves the other variants' runs (and cache keys) at τ = 1."""
    from helpers.experiments import deeplm

    p = deeplm.Params.resolve("ci", variants=("post-norm", deeplm.LEAKY), steps=3, eval_every=3, tau=0.5)
    r = deeplm.run(p)
    assert r.variants == ["post-norm", deeplm.LEAKY] and r.tau == 0.5
    assert all(len(h["loss"]) == 3 for v in r.variants for h in r.histories[v])


def test_prefix_mean_is_eq21_on_each_prefix():
    x = seeded_randn(3, 10, 5, seed=3, dtype=torch.float64)
    y = prefix_deescalate(x, 0.7)
    for t in range(10):
        assert torch.allclose(y[:, t], deescalate(x[:, : t + 1], 0.7)[:, t])
    assert torch.allclose(prefix_deescalate(x)[:, 0], torch.zeros_like(x[:, 0]))   # τ = 1: the first token is zeroed


def test_config_rejects_bad_values():
    with pytest.raises(ValueError, match="variant"):
        LMConfig(variant="sandwich")
    with pytest.raises(ValueError, match="tau"):
        LMConfig(tau=0.0)


def test_training_adapter_learns_and_resumes(tmp_path):
    """A tiny model learns a repeated pattern (loss falls well below log V), and a run killed midway
    and resumed ends with the same history as one that was never stopped."""
    from helpers.train.lm import LMTrainConfig, train_lm

    seqs = torch.arange(20).repeat(40, 1) % 7                                   # (40, 20): a periodic text
    cfg = LMConfig(variant="pre-norm", vocab=7, depth=2, d_model=16, n_heads=2, d_ff=32, seq_len=19)
    tc = LMTrainConfig(steps=40, batch_size=4, lr=1e-2, eval_every=10, resume_every=10)
    whole = train_lm(cfg, tc, seqs, seqs[:4], checkpoint=tmp_path / "a.pt")
    assert whole["eval_loss"][-1] < 0.5 * whole["eval_loss"][0]
    train_lm(cfg, tc, seqs, seqs[:4], checkpoint=tmp_path / "b.pt", stop_after=25)
    resumed = train_lm(cfg, tc, seqs, seqs[:4], checkpoint=tmp_path / "b.pt")
    assert resumed["loss"] == pytest.approx(whole["loss"], rel=1e-6)
    assert len(whole["t_sim"][0]) == cfg.depth + 1


@pytest.mark.parametrize("causal", [True, False])
def test_attention_in_bf16_on_cpu_is_softmax_qk_v(causal):
    """The bf16 CPU path (the math kernel, `attention_kernel`) computes softmax(QKᵀ/√d_h)V with the causal
    mask where asked: it matches an fp32 reference written out by hand, to bf16 rounding; fp32 keeps
    PyTorch's own kernel choice."""
    import contextlib

    from helpers.core.causal_lm import SelfAttention, attention_kernel

    torch.manual_seed(0)
    att = SelfAttention(32, 4, causal=causal)
    x = seeded_randn(2, 9, 32, seed=3)
    B, n, d = x.shape
    q, k, v = att.qkv(x).view(B, n, 3, 4, 8).permute(2, 0, 3, 1, 4)
    s = q @ k.transpose(-1, -2) / 8 ** 0.5
    if causal:
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
    ref = att.out((s.softmax(-1) @ v).transpose(1, 2).reshape(B, n, d))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got = att(x)
    assert got.dtype == torch.bfloat16 and torch.allclose(got.float(), ref, atol=3e-2, rtol=3e-2)
    assert isinstance(attention_kernel(q), contextlib.nullcontext)
    assert not isinstance(attention_kernel(q.bfloat16()), contextlib.nullcontext)
