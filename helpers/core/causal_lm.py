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

from .blocks import ScalarLayerNorm

VARIANTS = ("post-norm", "pre-norm", "de-escalated")
#: the means a de-escalation step can subtract: the running prefix mean (causal) or the whole sequence's
DEESC_MEANS = ("prefix", "sequence")
ACTIVATIONS = ("relu", "gelu")
NORMS = ("channel", "scalar")


@dataclass(frozen=True)
class LMConfig:
    """Architecture. Defaults: a narrow, deep stack a CPU can train (Figure 7 used depth 60, width 410,
    FFN 820, 10 heads, 201M parameters with its 267k-word vocabulary)."""

    variant: str = "post-norm"
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
    deesc_mean: str = "prefix"

    def __post_init__(self) -> None:
        if self.deesc_mean not in DEESC_MEANS:
            raise ValueError(f"deesc_mean {self.deesc_mean!r}: use one of {DEESC_MEANS}")
        if self.variant not in VARIANTS:
            raise ValueError(f"variant {self.variant!r}: use one of {VARIANTS}")
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model {self.d_model} must be divisible by n_heads {self.n_heads}")
        if not 0 < self.tau <= 1:
            raise ValueError(f"tau must lie in (0, 1] (eq. 21), got {self.tau}")


def prefix_deescalate(x: Tensor, tau: float = 1.0) -> Tensor:
    """Causal eq. (21): y_t = x_t − τ · mean(x_1..x_t) along the token axis (−2). (…, n, d) -> (…, n, d)."""
    n = x.shape[-2]
    count = torch.arange(1, n + 1, device=x.device, dtype=x.dtype).unsqueeze(-1)        # (n, 1)
    return x - tau * x.cumsum(-2) / count


class SelfAttention(nn.Module):
    """Multi-head softmax attention with Q/K/V and output projections (biases included); `causal`
    masks the scores so position t attends to positions ≤ t only. `bias=False` drops the projections'
    biases; `out_proj=False` drops the output projection (the heads' outputs are concatenated, as in
    Yu & Zhang's Prop. 2.9 block) — the two parts the ViT chapter's block ablation reverts."""

    def __init__(self, d: int, heads: int, causal: bool = True, bias: bool = True, out_proj: bool = True) -> None:
        super().__init__()
        self.h, self.causal = heads, causal
        self.qkv = nn.Linear(d, 3 * d, bias=bias)
        self.out: nn.Module = nn.Linear(d, d, bias=bias) if out_proj else nn.Identity()

    def forward(self, x: Tensor) -> Tensor:
        B, n, d = x.shape
        q, k, v = self.qkv(x).view(B, n, 3, self.h, d // self.h).permute(2, 0, 3, 1, 4)   # 3 × (B, h, n, dh)
        with attention_kernel(q):
            y = F.scaled_dot_product_attention(q, k, v, is_causal=self.causal)           # (B, h, n, dh)
        return self.out(y.transpose(1, 2).reshape(B, n, d))


def attention_kernel(q: Tensor):
    """The kernel `scaled_dot_product_attention` runs: on a CPU in reduced precision (bf16 autocast) the
    plain math kernel — PyTorch's CPU flash-attention kernel is slow in bf16 at the book's small heads
    (a standard-block ViT training step at depth 40, width 96, batch 64: 0.96 s against 0.21 s, one
    thread; its backward was three quarters of the step) — otherwise PyTorch's own choice. Both compute
    softmax(QKᵀ/√d_h)V; only the rounding differs."""
    import contextlib

    if q.device.type == "cpu" and q.dtype != torch.float32:
        from torch.nn.attention import SDPBackend, sdpa_kernel

        return sdpa_kernel([SDPBackend.MATH])
    return contextlib.nullcontext()


#: kept for readers of the first version of this module
CausalSelfAttention = SelfAttention

DEESC_PLACES = ("ffn_input", "output")


class Block(nn.Module):
    """A standard Transformer block (per-channel LayerNorm with bias, projections with biases, a
    two-layer FFN) in one of Yu & Zhang's three variants:

    post-norm: x ← LN(x + SA(x)); x ← LN(x + FFN(x)).
    pre-norm (eq. 19 with per-channel LN): x ← x + SA(LN(x)); x ← x + FFN(LN(x)).
    de-escalated: post-norm with eq. (21) at `deesc_place` — "ffn_input" (after the first LN: their
    Transformer-XL run) or "output" (after the second LN: their ViT run). With `causal` the
    de-escalation uses the prefix mean (`prefix_deescalate`), otherwise the whole-sequence mean.

    `deesc_mean` overrides which mean the de-escalation subtracts ("prefix" or "sequence"; None: the
    prefix mean when `causal`, else the sequence mean) — "sequence" in a causal block is the
    leakage control of the deeplm chapter.

    `forward` returns the block's output; `trace` also returns the state just before the
    de-escalation step (None for the other variants), so t_sim can be read on both sides of it.

    Parts that can be switched to Algorithm 1's (the ViT chapter's block ablation): `norm="scalar"`
    (LayerNorm with one scalar γ and λ, `blocks.ScalarLayerNorm`), `bias=False` (no biases in the
    projections and the FFN; LayerNorm keeps its own), `out_proj=False` (no attention output
    projection), `activation="relu"`."""

    def __init__(self, d: int, heads: int, d_ff: int, variant: str = "post-norm", tau: float = 1.0,
                 causal: bool = True, deesc_place: str = "ffn_input", activation: str = "relu",
                 norm: str = "channel", bias: bool = True, out_proj: bool = True,
                 deesc_mean: str | None = None) -> None:
        super().__init__()
        if deesc_mean is not None and deesc_mean not in DEESC_MEANS:
            raise ValueError(f"deesc_mean {deesc_mean!r}: use one of {DEESC_MEANS}")
        self.deesc_mean = deesc_mean or ("prefix" if causal else "sequence")
        if variant not in VARIANTS:
            raise ValueError(f"variant {variant!r}: use one of {VARIANTS}")
        if deesc_place not in DEESC_PLACES:
            raise ValueError(f"deesc_place {deesc_place!r}: use one of {DEESC_PLACES}")
        self.variant, self.tau, self.causal, self.deesc_place = variant, tau, causal, deesc_place
        if activation not in ACTIVATIONS:
            raise ValueError(f"activation {activation!r}: use one of {ACTIVATIONS}")
        if norm not in NORMS:
            raise ValueError(f"norm {norm!r}: use one of {NORMS}")
        self.attn = SelfAttention(d, heads, causal, bias=bias, out_proj=out_proj)
        act = {"relu": nn.ReLU(), "gelu": nn.GELU()}[activation]
        self.ffn = nn.Sequential(nn.Linear(d, d_ff, bias=bias), act, nn.Linear(d_ff, d, bias=bias))
        if norm == "channel":
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        else:
            self.ln1, self.ln2 = ScalarLayerNorm(), ScalarLayerNorm()

    def _deesc(self, x: Tensor) -> Tensor:
        if self.deesc_mean == "prefix":
            return prefix_deescalate(x, self.tau)
        return x - self.tau * x.mean(-2, keepdim=True)

    def trace(self, x: Tensor) -> tuple[Tensor, Tensor | None]:
        if self.variant == "pre-norm":
            x = x + self.attn(self.ln1(x))
            return x + self.ffn(self.ln2(x)), None
        x = self.ln1(x + self.attn(x))
        before = None
        if self.variant == "de-escalated" and self.deesc_place == "ffn_input":
            before, x = x, self._deesc(x)
        x = self.ln2(x + self.ffn(x))
        if self.variant == "de-escalated" and self.deesc_place == "output":
            before, x = x, self._deesc(x)
        return x, before

    def forward(self, x: Tensor) -> Tensor:
        return self.trace(x)[0]


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
        x = self.tok(ids) + self.pos(torch.arange(n, device=ids.device))
        states = [x]
        for blk in self.blocks:
            x = blk(x)
            if return_states:
                states.append(x)
        x = self.final_norm(x)
        return (x, states) if return_states else x

    def forward(self, ids: Tensor) -> Tensor:
        """Logits (B, n, vocab): position t predicts token t+1."""
        return self.hidden(ids) @ self.tok.weight.T

    def loss(self, ids: Tensor) -> Tensor:
        """Next-token cross-entropy (nats) over positions 1..n−1 of (B, n) ids."""
        logits = self(ids[:, :-1])
        return F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1))


def parameter_count(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


__all__ = ["VARIANTS", "DEESC_MEANS", "DEESC_PLACES", "LMConfig", "prefix_deescalate", "SelfAttention",
           "CausalSelfAttention", "Block", "CausalLM", "parameter_count"]
