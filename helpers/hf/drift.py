"""Godey et al. §4's untrained Transformer block, built from transformers' own BERT modules, and a
forward pass that also returns its queries, keys and attention scores."""

from __future__ import annotations

import math

import torch
from torch import Tensor


def bert_block(seed: int, hidden: int = 768, heads: int = 12, intermediate: int = 3072):
    """A BERT embedding table E (vocab × d) and one BERT layer T, both with BERT's default
    initialisation (normal, std 0.02; LayerNorm γ = 1, β = 0), drawn from `seed`; eval mode, eager
    attention."""
    emb, layer = bert_embeddings_and_block(seed, hidden, heads, intermediate)
    return emb.word_embeddings.weight.detach(), layer


def bert_embeddings_and_block(seed: int, hidden: int = 768, heads: int = 12, intermediate: int = 3072):
    """BERT's whole embedding layer (word + position + token-type embeddings, then LayerNorm) and one
    BERT layer, initialised as in `bert_block` from the same draw (its E is this layer's word table)."""
    from transformers import BertConfig
    from transformers.models.bert.modeling_bert import BertEmbeddings, BertLayer

    torch.manual_seed(seed)
    cfg = BertConfig(hidden_size=hidden, num_attention_heads=heads, intermediate_size=intermediate,
                     attn_implementation="eager")
    emb = BertEmbeddings(cfg)
    layer = BertLayer(cfg)
    for mod in (emb, layer):
        for m in mod.modules():   # BertPreTrainedModel._init_weights, applied by hand to bare modules
            if isinstance(m, torch.nn.Linear | torch.nn.Embedding):
                torch.nn.init.normal_(m.weight, 0.0, cfg.initializer_range)
                if getattr(m, "bias", None) is not None:
                    torch.nn.init.zeros_(m.bias)
            elif isinstance(m, torch.nn.LayerNorm):
                torch.nn.init.ones_(m.weight)
                torch.nn.init.zeros_(m.bias)
    return emb.eval(), layer.eval()


@torch.no_grad()
def embed(emb, ids: Tensor) -> Tensor:
    """BERT's embedding layer on token ids (B, L): LN(word + position + token type 0), eval mode."""
    return emb(input_ids=ids)


@torch.no_grad()
def block_with_qk(layer, x: Tensor) -> dict[str, Tensor]:
    """Run a BertLayer on x (B, L, d) and return the output, Q and K per head (B, h, L, d_k), the
    pre-softmax scores QKᵀ/√d_k (B, h, L, L) and the softmax P."""
    att = layer.attention.self
    h = att.num_attention_heads
    dk = att.attention_head_size
    B, L, _ = x.shape
    q = att.query(x).view(B, L, h, dk).transpose(1, 2)
    k = att.key(x).view(B, L, h, dk).transpose(1, 2)
    scores = q @ k.transpose(-1, -2) / math.sqrt(dk)
    out = layer(x)
    out = out[0] if isinstance(out, tuple) else out
    return {"out": out, "q": q, "k": k, "scores": scores, "P": torch.softmax(scores, dim=-1)}
