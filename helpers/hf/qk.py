"""Queries, keys and attention of a BERT-family encoder, recorded with forward hooks (Godey et al.
§5), and the MultiBERT checkpoints of the paper by hub id."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor, nn

from ..book.runtime import progress
from ..core.qk import StepStats, token_selections
from .walk import attention_modules, num_heads

#: MultiBERT's released intermediate checkpoints (Sellam et al. 2021) of seeds 0-4 on the hub,
#: `google/multiberts-seed_<s>-step_<k>k`: 0k (the initialisation), every 20k up to 200k, then every 100k
#: up to 2000k = 29 ids per seed. The model cards say "28 checkpoints for the first 5 runs" (140 in all),
#: which matches these steps without step 0; the step_0k repositories do exist (seen for seeds 0, 1, 2
#: and 4; issue 13), so they stay.
MULTIBERT_STEPS = tuple(range(0, 200_000, 20_000)) + tuple(range(200_000, 2_000_001, 100_000))


class QKCapture:
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

    def __exit__(self, *exc) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles.clear()


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


def multibert_id(seed: int, step: int) -> str:
    """Hub id of a MultiBERT checkpoint (Sellam et al. 2021), e.g. google/multiberts-seed_0-step_40k."""
    if step % 1000:
        raise ValueError(f"MultiBERT steps are whole thousands, got {step}")
    return f"google/multiberts-seed_{seed}-step_{step // 1000}k"


__all__ = ["MULTIBERT_STEPS", "attention_modules", "QKCapture", "capture", "step_statistics", "multibert_id"]
