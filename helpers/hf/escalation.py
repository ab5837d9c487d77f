"""Token similarity escalation in transformers models (Yu & Zhang Figure 1): randomly initialised
BERT / ALBERT of any depth, and their per-layer similarity and gradient-norm profile."""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import Tensor

from ..core import measures as M
from .walk import transformer_layers


def random_encoder(kind: str, depth: int, hidden: int, heads: int, intermediate: int, seed: int):
    """A randomly initialised transformers BERT or ALBERT of the given depth (no download).

    BERT: `BertConfig` defaults (bert-base) with `num_hidden_layers=depth`. ALBERT: the albert-base
    sizes (embedding 128) — the `AlbertConfig()` default is xxlarge (4096 wide), which the paper's
    Figure 1 cannot have used at depth 100 on one GPU. Eager attention, eval mode (no dropout).
    """
    from transformers import AlbertConfig, AlbertModel, BertConfig, BertModel

    torch.manual_seed(seed)
    common = dict(num_hidden_layers=depth, hidden_size=hidden, num_attention_heads=heads,
                  intermediate_size=intermediate, attn_implementation="eager")
    if kind == "bert":
        model = BertModel(BertConfig(**common))
    elif kind == "albert":
        model = AlbertModel(AlbertConfig(embedding_size=128, **common))
    else:
        raise ValueError(f"kind {kind!r}: use 'bert' or 'albert'")
    return model.eval()


def escalation_profile(model, input_ids: Tensor, attention_mask: Tensor, grad: bool = True) -> dict[str, np.ndarray]:
    """t_sim and t_cos of every hidden state (embedding output = block 0), averaged over the batch
    with padding masked, and — when `grad` — the gradient norm of each encoder layer's parameters for
    a token-reconstruction loss: cross-entropy of logits H_last Eᵀ (E the word embedding table, as a
    tied MLM decoder without its transform) against the input tokens, over real tokens. The paper
    does not name its loss; this one depends on every layer, whereas a function of ‖H_last‖ alone
    would be flattened by the final LayerNorm."""
    model.zero_grad(set_to_none=True)
    with torch.set_grad_enabled(grad):
        out = model(input_ids=input_ids, attention_mask=attention_mask, output_hidden_states=True)
        hs = out.hidden_states
        mask = attention_mask.bool()
        ts = np.array([float(M.t_sim(h.detach(), mask).mean()) for h in hs])
        tc = np.array([float(M.t_cos(h.detach(), mask).mean()) for h in hs])
        res = {"t_sim": ts, "t_cos": tc}
        if grad:
            emb = model.get_input_embeddings().weight                        # (vocab, d or e)
            last = hs[-1][mask]                                              # (real tokens, d)
            if last.shape[-1] != emb.shape[-1]:
                raise ValueError("token-reconstruction loss needs hidden size == embedding size")
            loss = torch.nn.functional.cross_entropy(last @ emb.T, input_ids[mask])
            loss.backward()
            gn = [math.sqrt(sum(float(p.grad.square().sum()) for p in lay.parameters() if p.grad is not None))
                  for lay in transformer_layers(model)]
            res["grad_norm"] = np.array(gn)
    return res


__all__ = ["random_encoder", "escalation_profile"]
