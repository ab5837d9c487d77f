"""What the softmax sees of drifted attention scores (Godey et al. §4.3-4.4, Figures 7, 9, 10).

With queries q_i = q̄ + q̃_i and keys k_j = k̄ + k̃_j, a score matrix splits as
S_ij = q_iᵀk̄/√d_k + q_iᵀk̃_j/√d_k: the first term depends on the query (the row) only, and a row
constant cancels in the softmax (softmax(s + c·1) = softmax(s)). So the spread of the scores
(Figure 7's histogram) overstates what can sharpen the attention; the part that can is the spread
*within* each row, S_ij − mean_j S_ij.

* `score_decomposition`: the overall variance of the scores, the within-row variance, and the share of
  the overall variance that is row-constant (between rows, heads and sequences).
* `attention_entropy_normalised`: the mean row entropy of P over log L (1 = uniform attention).
* `DRIFT_STATS` / `drift_statistics`: both, as the drift chapter records them per bias norm.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

DRIFT_STATS = ("score_row_sd", "score_rowconst_frac", "entropy_norm")


def score_decomposition(scores: Tensor) -> dict[str, Tensor]:
    """For pre-softmax scores (…, L, L) with rows = queries: `total_var` the variance of all scores
    pooled (what a histogram of them shows), `within_var` the mean over rows of each row's variance
    (the part the softmax sees), and `rowconst_frac` = 1 − within_var / total_var, the share of the
    spread that is constant along rows (it cancels in the softmax)."""
    total = scores.var(unbiased=False).double()
    within = scores.var(-1, unbiased=False).double().mean()
    return {"total_var": total, "within_var": within, "rowconst_frac": 1 - within / total.clamp_min(1e-300)}


def attention_entropy_normalised(P: Tensor) -> Tensor:
    """Mean over rows of H(P_i) / log L: 1 for uniform attention, 0 when every row is one-hot."""
    L = P.shape[-1]
    h = -(P * torch.log(P.clamp_min(1e-45))).sum(-1)
    return h.mean() / math.log(L)


@torch.no_grad()
def drift_statistics(scores: Tensor, P: Tensor | None = None) -> dict[str, float]:
    """`DRIFT_STATS` of one block's scores (B, h, L, L): the within-row sd of the scores, the
    row-constant share of their variance, and the normalised attention entropy (of `P`, the
    softmax of the scores, when given)."""
    dec = score_decomposition(scores)
    P = torch.softmax(scores, dim=-1) if P is None else P
    vals = {"score_row_sd": dec["within_var"].sqrt(), "score_rowconst_frac": dec["rowconst_frac"],
            "entropy_norm": attention_entropy_normalised(P)}
    return {name: float(vals[name]) for name in DRIFT_STATS}


__all__ = ["DRIFT_STATS", "score_decomposition", "attention_entropy_normalised", "drift_statistics"]
