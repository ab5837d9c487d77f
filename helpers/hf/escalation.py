"""Token similarity escalation in transformers models (Yu & Zhang Figure 1): randomly initialised
BERT / ALBERT of any depth, and their per-layer similarity and gradient-norm profile."""

from __future__ import annotations

import copy
import math

import numpy as np
import torch
from torch import Tensor

from ..core import measures as M
from ..core.kept import Kept
from .walk import transformer_layers

#: the encoders built inside `kept_encoders()`: arguments -> (untouched model, the global RNG state its
#: construction left)
_KEPT = Kept(512 * 2**20, lambda v: _nbytes(v[0]), keep_at_least=0)


def kept_encoders(max_bytes: int | None = None):
    """Within this block `random_encoder` builds each (kind, sizes, seed) once and hands out copies of the
    untouched model, leaving the global RNG where building it leaves it: the same weights and the same draws
    after, without drawing a model's weights again. Models are kept while they fit in `max_bytes` (512 MiB; a
    deep one is built each time)."""
    return _KEPT.scope(max_bytes)


def _nbytes(model) -> int:
    return sum(t.numel() * t.element_size() for t in (*model.parameters(), *model.buffers()))


def random_encoder(kind: str, depth: int, hidden: int, heads: int, intermediate: int, seed: int):
    """A randomly initialised transformers BERT or ALBERT of the given depth (no download).

    BERT: `BertConfig` defaults (bert-base) with `num_hidden_layers=depth`. ALBERT: the albert-base
    sizes (embedding 128) — the `AlbertConfig()` default is xxlarge (4096 wide), which the paper's
    Figure 1 cannot have used at depth 100 on one GPU. Eager attention, eval mode (no dropout).
    Inside `kept_encoders()` a repeated request is a copy of the first build.
    """
    if not _KEPT.active:
        return _build(kind, depth, hidden, heads, intermediate, seed)
    key = (kind, depth, hidden, heads, intermediate, seed)
    if key not in _KEPT:
        model = _build(kind, depth, hidden, heads, intermediate, seed)
        _KEPT.put(key, (model, torch.get_rng_state()))
        if key not in _KEPT:                     # beyond the budget: not kept
            return model
    model, rng = _KEPT.get(key)
    torch.manual_seed(seed)             # every device's generator as a build leaves it, the CPU's after its draws
    torch.set_rng_state(rng)
    return copy.deepcopy(model)


def _build(kind: str, depth: int, hidden: int, heads: int, intermediate: int, seed: int):
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


def step_log_odds(model, input_ids: Tensor, attention_mask: Tensor) -> dict[str, np.ndarray]:
    """Prop. 2.3 per sub-step of a BERT layer: a step X → Y multiplies the odds t_sim/(1 − t_sim) by its
    ξ₁/ξ₂, so its change of log-odds is its additive part of the escalation. The four steps of a post-norm
    BERT layer, in Algorithm 1's order: SA + residual (X + attention output), its LayerNorm, FFN + residual,
    its LayerNorm. Returns `increments` (layers, 4): each step's change of log-odds, mean over the batch's
    sentences (each sentence's t_sim over its real tokens), and `t_sim` (layers + 1,): each layer's input
    t_sim (the last entry: the last layer's output), mean over sentences. Read with hooks on each layer and
    on its `attention.output` and `output` (transformers' BertSelfOutput / BertOutput: dense, dropout,
    LayerNorm of the residual sum; eval mode, so dropout is the identity)."""
    mask = attention_mask.bool()
    states: list[list[Tensor]] = []                 # per layer: X, X + SA, LN(·), A + FFN, LN(·)

    def layer_input(mod, inp):
        states.append([inp[0].detach()])

    def residual_and_norm(mod, inp, out):
        h, x = inp
        states[-1].extend([(mod.dense(h) + x).detach(), out.detach()])

    hooks = []
    for lay in transformer_layers(model):
        hooks += [lay.register_forward_pre_hook(layer_input),
                  lay.attention.output.register_forward_hook(residual_and_norm),
                  lay.output.register_forward_hook(residual_and_norm)]
    try:
        with torch.no_grad():
            model(input_ids=input_ids, attention_mask=attention_mask)
    finally:
        for h in hooks:
            h.remove()

    def t_and_log_odds(X: Tensor) -> tuple[np.ndarray, np.ndarray]:
        t = M.t_sim(X.double(), mask).cpu().numpy()                  # per sentence
        return t, np.log(t / (1 - t))

    inc, ts = [], []
    for st in states:
        tl = [t_and_log_odds(X) for X in st]
        inc.append([float((tl[i + 1][1] - tl[i][1]).mean()) for i in range(4)])
        ts.append(float(tl[0][0].mean()))
    ts.append(float(t_and_log_odds(states[-1][-1])[0].mean()))
    return {"increments": np.array(inc), "t_sim": np.array(ts)}


__all__ = ["random_encoder", "kept_encoders", "escalation_profile", "step_log_odds"]
