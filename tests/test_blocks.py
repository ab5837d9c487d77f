"""Blocks as Yu & Zhang's algorithms: hand-computed cases and invariants."""

import math

import pytest
import torch
from testutil import seeded_randn

from helpers.core import measures as M
from helpers.core.blocks import (
    PostNormBlock,
    PreNormBlock,
    ScalarLayerNorm,
    SoftmaxAttention,
    deescalate,
)

pytestmark = pytest.mark.usefixtures("float64")   # identities checked to 1e-10


def rand(*shape, seed=0):
    return seeded_randn(*shape, seed=seed)


def test_deescalation_tau_one_gives_zero_similarity():
    X = rand(3, 20, 16) + 5.0
    Y = deescalate(X, 1.0)
    assert torch.allclose(Y.mean(-2), torch.zeros(3, 16), atol=1e-12)
    assert torch.allclose(M.t_sim(Y), torch.zeros(3), atol=1e-12)


def test_deescalation_partial():
    X = rand(20, 16) + 5.0
    Y = deescalate(X, 0.5)
    assert torch.allclose(Y.mean(0), 0.5 * X.mean(0), atol=1e-12)


def test_layernorm_keeps_span_one():
    v = rand(1, 12)
    X = v.repeat(7, 1)
    Y = ScalarLayerNorm()(X)
    assert M.t_sim(Y).item() == pytest.approx(1.0, abs=1e-12)


def test_identical_rows_stay_identical_through_post_norm_block():
    torch.manual_seed(0)
    blk = PostNormBlock(16, 4, 32)
    X = rand(1, 16).repeat(9, 1)
    Y = blk(X)
    assert torch.allclose(Y, Y[:1].expand_as(Y), atol=1e-10)
    assert M.t_sim(Y).item() == pytest.approx(1.0, abs=1e-10)


def test_attention_is_row_stochastic_and_init_ranges():
    torch.manual_seed(0)
    att = SoftmaxAttention(32, 4)
    P = att.attention(rand(2, 10, 32))
    assert P.shape == (2, 4, 10, 10)
    assert torch.allclose(P.sum(-1), torch.ones(2, 4, 10), atol=1e-12)
    assert att.w_q.abs().max() <= 1 / math.sqrt(32)
    big = SoftmaxAttention(512, 8, value_scale=1.0)
    assert big.w_v.var().item() == pytest.approx(1 / 512, rel=0.05)
    big8 = SoftmaxAttention(512, 8, value_scale=8.0)
    assert big8.w_v.var().item() == pytest.approx(8 / 512, rel=0.05)


def _ln(x, eps=1e-5):
    mu = x.mean(-1, keepdim=True)
    return (x - mu) / torch.sqrt(((x - mu) ** 2).mean(-1, keepdim=True) + eps)


def test_post_norm_block_matches_algorithm_1_by_hand():
    torch.manual_seed(1)
    n, d, h = 5, 8, 2
    blk = PostNormBlock(d, h, 12, alpha=0.7)
    X = rand(n, d, seed=3)
    # step 0: attention per head by hand
    heads = []
    for k in range(h):
        M_ = (X @ blk.attn.w_q[k]) @ (X @ blk.attn.w_k[k]).T / math.sqrt(d // h)
        Pk = torch.exp(M_) / torch.exp(M_).sum(1, keepdim=True)
        heads.append(Pk @ X @ blk.attn.w_v[k])
    Y1 = X + 0.7 * torch.cat(heads, dim=1)
    Y2 = _ln(Y1)
    Y3 = torch.relu(Y2 @ blk.ffn.w1.weight.T) @ blk.ffn.w2.weight.T + Y2
    Y4 = _ln(Y3)
    tr = blk.trace(X)
    assert torch.allclose(tr.Y1, Y1, atol=1e-12)
    assert torch.allclose(tr.Y4, Y4, atol=1e-10)


def test_pre_norm_block_matches_eq_19_by_hand():
    torch.manual_seed(2)
    blk = PreNormBlock(8, 2, 12)
    X = rand(5, 8, seed=4) * 3
    Xh = _ln(X)
    A, _ = blk.attn(Xh)
    Y = X + A
    Z = Y + torch.relu(_ln(Y) @ blk.ffn.w1.weight.T) @ blk.ffn.w2.weight.T
    assert torch.allclose(blk(X), Z, atol=1e-10)


@pytest.mark.parametrize("place", ["input", "after_attention", "ffn_input", "output"])
def test_deescalation_places(place):
    torch.manual_seed(3)
    blk = PostNormBlock(16, 4, 32, tau=1.0, deesc_place=place)
    tr = blk.trace(rand(6, 16) + 2)
    target = {"input": tr.X, "after_attention": tr.Y1, "ffn_input": tr.Y2, "output": tr.Y4}[place]
    assert torch.allclose(target.mean(0), torch.zeros(16), atol=1e-10)


def test_learnable_tau_gets_gradient_and_bad_tau_rejected():
    blk = PostNormBlock(16, 4, 32, tau=0.5, learnable_tau=True)
    blk(rand(6, 16) + 1).sum().backward()
    assert blk.tau_logit.grad is not None and torch.isfinite(blk.tau_logit.grad)
    with pytest.raises(ValueError, match="tau"):
        PostNormBlock(16, 4, 32, tau=1.5)
    with pytest.raises(ValueError, match="deesc_place"):
        PostNormBlock(16, 4, 32, tau=1.0, deesc_place="nowhere")
