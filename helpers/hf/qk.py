"""Queries, keys and attention of a BERT-family encoder, recorded with forward hooks (Godey et al.
§5), and the MultiBERT checkpoints of the paper by hub id."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor, nn

from ..book.runtime import progress
from ..core.qk import QKMoments, StepStats, token_selections
from .walk import attention_modules, num_heads

#: MultiBERT's released intermediate checkpoints (Sellam et al. 2021) of seeds 0-4 on the hub,
#: `google/multiberts-seed_<s>-step_<k>k`: 0k (the initialisation), every 20k up to 200k, then every 100k
#: up to 2000k = 29 ids per seed. The model cards say "28 checkpoints for the first 5 runs" (140 in all),
#: which matches these steps without step 0; the step_0k repositories do exist (seen for seeds 0, 1, 2
#: and 4), so they stay.
MULTIBERT_STEPS = tuple(range(0, 200_000, 20_000)) + tuple(range(200_000, 2_000_001, 100_000))


class _Hooks:
    """What a capture does on leaving its `with` block: remove every hook it registered."""

    _handles: list

    def __exit__(self, *exc) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles.clear()


class QKCapture(_Hooks):
    """Forward hooks on every layer's `query` and `key` projections. Inside `with QKCapture(model)
    as cap:` each forward pass fills `cap.q[l]` and `cap.k[l]` with the per-head queries and keys
    of layer l, shape (B, h, L, d_k) — the vectors whose scalar products give the attention scores
    QKᵀ/√d_k of Godey et al. §4–5."""

    def __init__(self, model: nn.Module) -> None:
        self.modules = attention_modules(model)
        self.heads = [num_heads(m, model) for m in self.modules]
        self.q: list[Tensor | None] = [None] * len(self.modules)
        self.k: list[Tensor | None] = [None] * len(self.modules)
        self._handles: list = []

    def _hook(self, store: list, layer: int) -> Callable:
        h = self.heads[layer]

        def hook(_mod, _inp, out: Tensor) -> None:
            B, L, D = out.shape
            store[layer] = out.detach().view(B, L, h, D // h).transpose(1, 2)      # (B, h, L, d_k)
        return hook

    def __enter__(self) -> QKCapture:
        for i, m in enumerate(self.modules):
            self._handles.append(m.query.register_forward_hook(self._hook(self.q, i)))
            self._handles.append(m.key.register_forward_hook(self._hook(self.k, i)))
        return self


@torch.no_grad()
def capture(model: nn.Module, input_ids: Tensor, attention_mask: Tensor) -> dict[str, list[Tensor] | Tensor]:
    """One forward pass: per layer Q and K (B, h, L, d_k) and the attention probabilities P
    (B, h, L, L) returned by the model (needs eager attention: `attn_implementation="eager"`),
    plus the boolean padding mask (B, L)."""
    with QKCapture(model) as cap:
        out = model(input_ids=input_ids, attention_mask=attention_mask, output_attentions=True)
    if not out.attentions or out.attentions[0] is None:
        raise ValueError("the model returned no attention probabilities: load it with attn_implementation='eager'")
    return {"q": list(cap.q), "k": list(cap.k), "p": list(out.attentions), "mask": attention_mask.bool()}



@torch.no_grad()
def step_statistics(model: nn.Module, input_ids: Tensor, attention_mask: Tensor, svd_fraction: float = 0.2,
                    n_display: int = 200, batch_size: int = 32, seed: int = 0,
                    device: str | torch.device = "cpu", desc: str = "") -> StepStats:
    """One pass of `model` over the analysis samples (N, L), accumulating `StepStats`."""
    svd_sel, disp_sel = token_selections(attention_mask, svd_fraction, n_display, seed)
    total: StepStats | None = None
    batches = range(0, len(input_ids), batch_size)
    for i in progress(batches, desc=desc or "Q/K capture", total=len(batches)):
        sl = slice(i, i + batch_size)
        out = capture(model, input_ids[sl].to(device), attention_mask[sl].to(device))
        st = StepStats.from_batch(out["q"], out["k"], out["p"], out["mask"], svd_sel[sl].to(device),
                                  disp_sel[sl].to(device))
        total = st if total is None else total + st
    assert total is not None
    return total


class CallCapture(_Hooks):
    """Per-head queries and keys of every attention *call*, in call order, for a model that learned:
    BERT-family encoders (`query`/`key` maps; ALBERT's one shared layer is called once per depth, so it
    yields `num_hidden_layers` entries) and Llama-style decoders (`q_proj`/`k_proj`, rotary position
    embedding, grouped keys). For a rotary model `q`/`k` hold the vectors after the rotation — the ones whose
    scalar products are the scores — and `q_pre`/`k_pre` the projections before it; grouped keys are
    repeated so that key head j // (h / h_kv) stands beside query head j. Shapes (B, h, L, d_k)."""

    def __init__(self, model: nn.Module) -> None:
        self.model = model
        self.q: list[Tensor] = []
        self.k: list[Tensor] = []
        self.q_pre: list[Tensor] = []
        self.k_pre: list[Tensor] = []
        self._handles: list = []
        cfg = model.config
        self.rotary = [m for m in model.modules() if isinstance(getattr(m, "q_proj", None), nn.Linear)
                       and isinstance(getattr(m, "k_proj", None), nn.Linear)]
        if self.rotary:
            self.heads = int(cfg.num_attention_heads)
            self.kv_heads = int(getattr(cfg, "num_key_value_heads", None) or self.heads)
            self.modules = self.rotary
        else:
            self.modules = attention_modules(model)
            self.heads = num_heads(self.modules[0], model)
            self.kv_heads = self.heads

    @staticmethod
    def _split(out: Tensor, h: int) -> Tensor:
        B, L, D = out.shape
        return out.detach().view(B, L, h, D // h).transpose(1, 2)

    def _bert_hook(self, store: list) -> Callable:
        def hook(_mod, _inp, out: Tensor) -> None:
            store.append(self._split(out, self.heads))
        return hook

    def _rotary_hook(self, attn: nn.Module) -> Callable:
        from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

        pending: dict[str, Tensor] = {}
        handles = [attn.q_proj.register_forward_hook(lambda _m, _i, o: pending.__setitem__("q", o)),
                   attn.k_proj.register_forward_hook(lambda _m, _i, o: pending.__setitem__("k", o))]
        self._handles.extend(handles)

        def hook(_mod, _args, kwargs, _out) -> None:
            cos, sin = kwargs["position_embeddings"]
            q, k = self._split(pending["q"], self.heads), self._split(pending["k"], self.kv_heads)
            qr, kr = apply_rotary_pos_emb(q, k, cos, sin)
            rep = self.heads // self.kv_heads
            self.q_pre.append(q)
            self.k_pre.append(k.repeat_interleave(rep, dim=1))
            self.q.append(qr)
            self.k.append(kr.repeat_interleave(rep, dim=1))
        return hook

    def clear(self) -> None:
        for store in (self.q, self.k, self.q_pre, self.k_pre):
            store.clear()

    def __enter__(self) -> CallCapture:
        for m in self.modules:
            if self.rotary:
                self._handles.append(m.register_forward_hook(self._rotary_hook(m), with_kwargs=True))
            else:
                self._handles.append(m.query.register_forward_hook(self._bert_hook(self.q)))
                self._handles.append(m.key.register_forward_hook(self._bert_hook(self.k)))
        return self


@torch.no_grad()
def end_state_moments(model: nn.Module, input_ids: Tensor, attention_mask: Tensor, batch_size: int = 16,
                      device: str | torch.device = "cpu", desc: str = "") -> dict[str, QKMoments]:
    """The moments of every attention call's queries and keys over the real tokens of (N, L) inputs:
    {"qk": …} and, for a rotary model, {"qk_pre_rotary": …} (before the rotation)."""
    model = model.to(device).eval()
    total: dict[str, QKMoments] = {}
    batches = range(0, len(input_ids), batch_size)
    with CallCapture(model) as cap:
        for i in progress(batches, desc=desc or "Q/K moments", total=len(batches)):
            sl = slice(i, i + batch_size)
            mask = attention_mask[sl].to(device)
            cap.clear()
            model(input_ids=input_ids[sl].to(device), attention_mask=mask)
            parts = {"qk": (cap.q, cap.k)}
            if cap.rotary:
                parts["qk_pre_rotary"] = (cap.q_pre, cap.k_pre)
            for name, (q, k) in parts.items():
                m = QKMoments.from_batch(list(q), list(k), mask)
                total[name] = m if name not in total else total[name] + m
    return total


def multibert_id(seed: int, step: int) -> str:
    """Hub id of a MultiBERT checkpoint (Sellam et al. 2021), e.g. google/multiberts-seed_0-step_40k."""
    if step % 1000:
        raise ValueError(f"MultiBERT steps are whole thousands, got {step}")
    return f"google/multiberts-seed_{seed}-step_{step // 1000}k"


__all__ = ["MULTIBERT_STEPS", "attention_modules", "QKCapture", "capture", "step_statistics", "multibert_id",
           "CallCapture", "end_state_moments"]
