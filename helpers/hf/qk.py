"""Queries, keys and attention of a BERT-family encoder, recorded by `hf.capture.Capture` (Godey et al.
§5), their statistics over a corpus, and the MultiBERT checkpoints of the paper by hub id."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from ..core.qk import QKMoments, StepStats, token_selections
from ..machinery.runtime import progress
from .capture import Capture, blocks
from .walk import attention_modules

#: MultiBERT's released intermediate checkpoints (Sellam et al. 2021) of seeds 0-4 on the hub,
#: `google/multiberts-seed_<s>-step_<k>k`: 0k (the initialisation), every 20k up to 200k, then every 100k
#: up to 2000k = 29 ids per seed. The model cards say "28 checkpoints for the first 5 runs" (140 in all),
#: which matches these steps without step 0; the step_0k repositories do exist (seen for seeds 0, 1, 2
#: and 4), so they stay.
MULTIBERT_STEPS = tuple(range(0, 200_000, 20_000)) + tuple(range(200_000, 2_000_001, 100_000))


@torch.no_grad()
def capture(model: nn.Module, input_ids: Tensor, attention_mask: Tensor) -> dict[str, list[Tensor] | Tensor]:
    """One forward pass: per layer Q and K (B, h, L, d_k) and the attention probabilities P
    (B, h, L, L) returned by the model (needs eager attention: `attn_implementation="eager"`),
    plus the boolean padding mask (B, L)."""
    with Capture(model) as cap:
        rec = cap(attentions=True, input_ids=input_ids, attention_mask=attention_mask)
    return {"q": blocks(rec, "attn.q"), "k": blocks(rec, "attn.k"), "p": blocks(rec, "attn.pattern"),
            "mask": attention_mask.bool()}


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


@torch.no_grad()
def end_state_moments(model: nn.Module, input_ids: Tensor, attention_mask: Tensor, batch_size: int = 16,
                      device: str | torch.device = "cpu", desc: str = "") -> dict[str, QKMoments]:
    """The moments of every attention call's queries and keys over the real tokens of (N, L) inputs:
    {"qk": …} and, for a rotary model, {"qk_pre_rotary": …} (before the rotation)."""
    model = model.to(device).eval()
    total: dict[str, QKMoments] = {}
    batches = range(0, len(input_ids), batch_size)
    with Capture(model) as cap:
        for i in progress(batches, desc=desc or "Q/K moments", total=len(batches)):
            sl = slice(i, i + batch_size)
            mask = attention_mask[sl].to(device)
            rec = cap(input_ids=input_ids[sl].to(device), attention_mask=mask)
            parts = {"qk": ("attn.q", "attn.k")}
            if cap.qk_kind == "rotary":
                parts["qk_pre_rotary"] = ("attn.q_pre_rotary", "attn.k_pre_rotary")
            for name, (q, k) in parts.items():
                m = QKMoments.from_batch(blocks(rec, q), blocks(rec, k), mask)
                total[name] = m if name not in total else total[name] + m
    return total


def multibert_id(seed: int, step: int) -> str:
    """Hub id of a MultiBERT checkpoint (Sellam et al. 2021), e.g. google/multiberts-seed_0-step_40k."""
    if step % 1000:
        raise ValueError(f"MultiBERT steps are whole thousands, got {step}")
    return f"google/multiberts-seed_{seed}-step_{step // 1000}k"


__all__ = ["MULTIBERT_STEPS", "attention_modules", "capture", "step_statistics", "multibert_id",
           "end_state_moments"]
