"""A deep, narrow causal Transformer language model in the three variants of Yu & Zhang's §3.4
(Figure 7: Transformer-XL of depth 60 on WikiText-103): post-norm, pre-norm, and post-norm with the
de-escalation step (eq. 21) at the input of every FFN.

What it is, and where it departs from their model:
* Blocks are standard GPT/Transformer blocks — per-channel LayerNorm with bias, Q/K/V and output
  projections with biases, a two-layer ReLU FFN — not Algorithm 1's scalar-γ, projection-free block:
  Figure 7's model is a Transformer-XL, which has all of these.
* No Transformer-XL recurrence memory and no relative positions: learned absolute positions over a
  fixed context (`seq_len`). The question Figure 7 asks — does a deep post-norm stack train, and does
  de-escalation make it train like pre-norm? — concerns the block, not the memory.
* De-escalation in a causal model. Eq. (21) subtracts the mean over *all* tokens, Y = (I − τΠ₁)X; in a
  causal model that mean carries later tokens into earlier positions (the model would see the future
  through the mean). We use the running prefix mean: y_t = x_t − τ · (1/t) Σ_{s≤t} x_s, which is
  eq. (21) applied, at every position t, to the sequence the model has seen up to t (the two agree at
  the last position). `tests/test_causal_lm.py` checks that no output at position t depends on inputs
  after t, for all three variants.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from .blocks import (
    DEESC_MEANS,
    STANDARD_DEESC_PLACES,
    VARIANTS,
    DeescMean,
    SelfAttention,
    StandardBlock,
    Variant,
    attention_kernel,
    prefix_deescalate,
)
from .config import choice

#: the block of this model is the book's standard block (`blocks.StandardBlock`)
Block = StandardBlock


@dataclass(frozen=True)
class LMConfig:
    """Architecture. Defaults: a narrow, deep stack a CPU can train (Figure 7 used depth 60, width 410,
    FFN 820, 10 heads, 201M parameters with its 267k-word vocabulary)."""

    variant: Variant = "post-norm"
    vocab: int = 30522
    depth: int = 48
    d_model: int = 128
    n_heads: int = 4
    d_ff: int = 256
    seq_len: int = 64
    tau: float = 1.0
    #: the mean the de-escalated variant subtracts: "prefix" (causal, `prefix_deescalate`) or "sequence"
    #: (eq. 21 as written: the whole sequence's mean — it leaks later tokens into earlier positions; a
    #: control, never the model)
    deesc_mean: DeescMean = "prefix"

    def __post_init__(self) -> None:
        choice("deesc_mean", self.deesc_mean, DeescMean)
        choice("variant", self.variant, Variant)
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model {self.d_model} must be divisible by n_heads {self.n_heads}")
        if not 0 < self.tau <= 1:
            raise ValueError(f"tau must lie in (0, 1] (eq. 21), got {self.tau}")


class CausalLM(nn.Module):
    """Token + learned position embeddings, `depth` blocks, a final LayerNorm for pre-norm (which needs
    one; post-norm stacks end in LN already), and an output layer tied to the token embedding."""

    def __init__(self, cfg: LMConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.tok = nn.Embedding(cfg.vocab, cfg.d_model)
        self.pos = nn.Embedding(cfg.seq_len, cfg.d_model)
        self.blocks = nn.ModuleList(Block(cfg.d_model, cfg.n_heads, cfg.d_ff, cfg.variant, cfg.tau, causal=True,
                                          deesc_place="ffn_input", deesc_mean=cfg.deesc_mean)
                                    for _ in range(cfg.depth))
        self.final_norm = nn.LayerNorm(cfg.d_model) if cfg.variant == "pre-norm" else nn.Identity()
        self.apply(self._init)

    @staticmethod
    def _init(m: nn.Module) -> None:
        """GPT-2's initialisation: N(0, 0.02) for linear and embedding weights, zero biases."""
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, 0.0, 0.02)
        if isinstance(m, nn.Linear) and m.bias is not None:
            nn.init.zeros_(m.bias)

    def hidden(self, ids: Tensor, return_states: bool = False):
        """(B, n) token ids -> final hidden states (B, n, d) [and every block's output]."""
        n = ids.shape[1]
        if n > self.cfg.seq_len:
            raise ValueError(f"sequence of {n} tokens, the model has {self.cfg.seq_len} positions")
        x = self.tok(ids) + self.pos(torch.arange(n, device=ids.device))  # (B, n, d) + (n, d)
        states = [x]
        for blk in self.blocks:
            x = blk(x)
            if return_states:
                states.append(x)
        x = self.final_norm(x)
        return (x, states) if return_states else x

    def forward(self, ids: Tensor) -> Tensor:
        """Logits (B, n, vocab): position t predicts token t+1."""
        return self.hidden(ids) @ self.tok.weight.T  # (B, n, d) @ (d, vocab)

    def loss(self, ids: Tensor) -> Tensor:
        """Next-token cross-entropy (nats) over positions 1..n−1 of (B, n) ids."""
        logits = self(ids[:, :-1])  # (B, n−1, vocab)
        # (B·(n−1), vocab) against (B·(n−1),)
        return F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1))


def parameter_count(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


__all__ = ["VARIANTS", "DEESC_MEANS", "STANDARD_DEESC_PLACES", "LMConfig", "prefix_deescalate", "SelfAttention",
           "attention_kernel", "Block", "CausalLM", "parameter_count"]
