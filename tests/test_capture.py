"""The one capture (`helpers.hf.capture`): what it records under each name is what the model computes, and the
same names come out for an encoder, a causal LM and a vision Transformer (tiny models built from configs)."""

from __future__ import annotations

import pytest
import torch

from helpers.hf.capture import Capture, blocks


def _bert():
    from transformers import BertConfig, BertModel

    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=50, hidden_size=32, num_hidden_layers=3, num_attention_heads=4, intermediate_size=64,
                     attn_implementation="eager")
    return BertModel(cfg).eval()


def _split(x: torch.Tensor, h: int) -> torch.Tensor:
    B, L, D = x.shape
    return x.view(B, L, h, D // h).transpose(1, 2)


def test_bert_resid_post_is_the_hidden_states_and_q_k_are_the_projections_of_the_block_input():
    model = _bert()
    ids = torch.randint(0, 50, (2, 7))
    mask = torch.ones(2, 7, dtype=torch.long)
    mask[1, 5:] = 0
    with Capture(model, resid=True) as cap, torch.no_grad():
        rec = cap(hidden=True, attentions=True, input_ids=ids, attention_mask=mask)
        ref = model(input_ids=ids, attention_mask=mask, output_hidden_states=True, output_attentions=True)
    assert cap.qk_kind == "query_key"
    assert len(blocks(rec, "hidden")) == 4 and len(blocks(rec, "resid_post")) == 3
    for i, layer in enumerate(model.encoder.layer):
        x_in = ref.hidden_states[i]                                     # block i's input
        assert torch.equal(rec[f"hidden.{i}"], ref.hidden_states[i])
        assert torch.allclose(rec[f"blocks.{i}.resid_post"], ref.hidden_states[i + 1], atol=1e-6)
        sa = layer.attention.self
        with torch.no_grad():
            q, k = _split(sa.query(x_in), 4), _split(sa.key(x_in), 4)
        assert rec[f"blocks.{i}.attn.q"].shape == (2, 4, 7, 8)
        assert torch.allclose(rec[f"blocks.{i}.attn.q"], q, atol=1e-6)
        assert torch.allclose(rec[f"blocks.{i}.attn.k"], k, atol=1e-6)
        assert not torch.allclose(rec[f"blocks.{i}.attn.q"], rec[f"blocks.{i}.attn.k"], atol=1e-3)
        assert torch.equal(rec[f"blocks.{i}.attn.pattern"], ref.attentions[i])
    # the scores the captured q, k give are the model's attention
    s = rec["blocks.1.attn.q"] @ rec["blocks.1.attn.k"].transpose(-1, -2) / 8 ** 0.5
    p = torch.softmax(s.masked_fill(~mask.bool()[:, None, None, :], float("-inf")), -1)
    assert torch.allclose(p, ref.attentions[1], atol=1e-6)


def test_hooks_are_removed_and_each_call_starts_empty():
    model = _bert()
    ids = torch.randint(0, 50, (1, 5))
    with Capture(model, resid=True) as cap, torch.no_grad():
        cap(input_ids=ids)
        rec = cap(input_ids=ids)
    assert len(blocks(rec, "attn.q")) == 3 and "hidden.0" not in rec
    assert all(not m._forward_hooks for m in model.modules())
    with pytest.raises(RuntimeError, match="enter the capture"):
        cap(input_ids=ids)


def _names(rec: dict) -> set[str]:
    return set(rec)


def test_the_same_names_for_an_encoder_a_causal_lm_and_a_vision_transformer():
    from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM, ViTConfig, ViTModel

    torch.manual_seed(0)
    n = 3
    want = {f"hidden.{l}" for l in range(n + 1)} | {f"blocks.{i}.{f}" for i in range(n)
                                                     for f in ("resid_post", "attn.q", "attn.k", "attn.pattern")}
    ids = torch.randint(0, 50, (2, 6))
    with torch.no_grad():
        with Capture(_bert(), resid=True) as cap:
            bert = cap(hidden=True, attentions=True, input_ids=ids)
        llama = LlamaForCausalLM(LlamaConfig(vocab_size=50, hidden_size=32, intermediate_size=64, num_hidden_layers=n,
                                             num_attention_heads=4, num_key_value_heads=2,
                                             attn_implementation="eager")).eval()
        with Capture(llama, resid=True) as cap:
            lm = cap(hidden=True, attentions=True, input_ids=ids)
        assert cap.qk_kind == "rotary"
        vit = ViTModel(ViTConfig(hidden_size=32, num_hidden_layers=n, num_attention_heads=4, intermediate_size=64,
                                 image_size=16, patch_size=4, attn_implementation="eager")).eval()
        with Capture(vit, resid=True) as cap:
            img = cap(hidden=True, attentions=True, pixel_values=torch.randn(2, 3, 16, 16))
        assert cap.qk_kind == "linear"
        gpt2 = GPT2LMHeadModel(GPT2Config(vocab_size=50, n_embd=32, n_layer=n, n_head=4,
                                          attn_implementation="eager")).eval()
        with Capture(gpt2, qk=False, resid=True) as cap:
            g = cap(hidden=True, attentions=True, input_ids=ids)
    assert _names(bert) == want
    rotary = {f"blocks.{i}.attn.{w}_pre_rotary" for i in range(n) for w in "qk"}
    assert _names(lm) == want | rotary
    assert _names(img) == want
    assert _names(g) == want - {f"blocks.{i}.attn.{w}" for i in range(n) for w in "qk"}
    assert img["blocks.0.attn.q"].shape == (2, 4, 17, 8)                     # [CLS] + 16 patches
    assert lm["blocks.2.attn.k"].shape == (2, 4, 6, 8)                        # 2 key heads repeated to 4
    # GPT-2 applies its final LayerNorm to the last hidden state: there resid_post is the block's own output
    assert torch.allclose(g["blocks.1.resid_post"], g["hidden.2"], atol=1e-6)
    assert not torch.allclose(g["blocks.2.resid_post"], g["hidden.3"], atol=1e-3)


def test_a_model_without_readable_projections_says_why():
    from transformers import GPT2Config, GPT2Model

    gpt2 = GPT2Model(GPT2Config(vocab_size=50, n_embd=32, n_layer=2, n_head=4))
    with pytest.raises(ValueError, match="no query/key linear maps"):
        Capture(gpt2)
