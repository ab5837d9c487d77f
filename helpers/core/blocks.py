"""Transformer blocks written exactly as Yu & Zhang's algorithms.

* `PostNormBlock`: Algorithm 1 (SA + residual with α, LN, FFN + residual, LN), multi-head as in
  Prop. 2.9: Y₁ = X + α[P₁XW₁ ⋯ P_hXW_h] with per-head value maps W_k ∈ ℝ^{d×d/h} and no output
  projection.
* `PreNormBlock`: eq. (19): X̂ = LN(X), Y = X + P(X̂)X̂W, Z = Y + φ(LN(Y)W₁)W₂.
* `deescalate`: eq. (21): Y = (I − τΠ₁)X, insertable at any step of Algorithm 1.
* `StandardBlock`: the standard Transformer block (per-channel LayerNorm, projections with biases, a
  two-layer FFN) in the same three variants — the block of the deep causal LM (§3.4's Transformer-XL) and of
  the ViT chapter's block ablation; `prefix_deescalate` is eq. (21) made causal.

Initialisation (§2.1, §2.4): W_q, W_k uniform in (−1, 1)/√d; value maps W_k ~ N(0, c/d) with
c = `value_scale` (the tse chapter discusses its two readings); LN γ = 1, λ = 0. FFN maps: Xavier
(`ffn_init="xavier"`, the default here, §2.1's "mostly under Xavier") or PyTorch's `nn.Linear`
default U(−1/√fan_in, 1/√fan_in) (`ffn_init="torch"`, what §2.4's "default method in the code"
gives). `ffn_kind` ablates the FFN of Algorithm 1 step 3: "relu" (the paper), "centred-relu"
(ReLU minus its expectation for isotropic unit-variance inputs, so a zero-mean activation) or
"none" (Y₃ = Y₂).
"""

from __future__ import annotations

import math
import typing
from dataclasses import dataclass
from typing import Literal

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from .config import choice

#: the three variants of Yu & Zhang's experiments (§3.3, §3.4), in every model of the book
Variant = Literal["post-norm", "pre-norm", "de-escalated"]
VARIANTS: tuple[Variant, ...] = typing.get_args(Variant)
#: where eq. (21) can be inserted in Algorithm 1: before step 0, after step 1, before the FFN, after the block
DeescPlace = Literal["input", "after_attention", "ffn_input", "output"]
DEESCALATION_PLACES: tuple[DeescPlace, ...] = typing.get_args(DeescPlace)
#: the means a de-escalation step can subtract: the running prefix mean (causal) or the whole sequence's
DeescMean = Literal["prefix", "sequence"]
DEESC_MEANS: tuple[DeescMean, ...] = typing.get_args(DeescMean)
#: the standard block's FFN activation and LayerNorm (per channel, or Algorithm 1's scalar γ and λ)
Activation = Literal["relu", "gelu"]
Norm = Literal["channel", "scalar"]
#: the FFN's initialisation and its kind (`FFN`)
FfnInit = Literal["xavier", "torch"]
FfnKind = Literal["relu", "centred-relu", "none"]
FFN_INITS: tuple[FfnInit, ...] = typing.get_args(FfnInit)
FFN_KINDS: tuple[FfnKind, ...] = typing.get_args(FfnKind)


def deescalate(X: Tensor, tau: float | Tensor = 1.0) -> Tensor:
    """Y = (I − τΠ₁)X (Yu & Zhang eq. 21): remove τ of the column means; τ = 1 centres the columns."""
    return X - tau * X.mean(-2, keepdim=True)  # (…, n, d) − τ·(…, 1, d): the column means


class ScalarLayerNorm(nn.Module):
    """Row-wise LN(x) = γ(x − μ)/σ + λ with *scalar* learnable γ, λ, as Algorithm 1 states."""

    def __init__(self, eps: float = 1e-5) -> None:
        super().__init__()
        self.gamma = nn.Parameter(torch.ones(()))
        self.beta = nn.Parameter(torch.zeros(()))
        self.eps = eps

    def forward(self, x: Tensor) -> Tensor:
        mu = x.mean(-1, keepdim=True)  # (…, n, 1): each row's mean
        var = x.var(-1, keepdim=True, unbiased=False)  # (…, n, 1)
        return self.gamma * (x - mu) / torch.sqrt(var + self.eps) + self.beta


class SoftmaxAttention(nn.Module):
    """Multi-head softmax attention matrices P_k(X) (Yu & Zhang eq. 2) and the per-head value maps.

    Per head k: M_k = XW_q^k (XW_k^k)ᵀ/√(d/h), P_k = softmax_rows(M_k). With one head this is eq. (2)
    exactly (scaling √d); with h heads we scale by √(d/h), the usual multi-head choice, which keeps
    the score variance of eq. (2) under the paper's initialisation.
    """

    def __init__(self, d: int, heads: int, value_scale: float = 1.0) -> None:
        super().__init__()
        if d % heads:
            raise ValueError(f"d = {d} must be divisible by heads = {heads}")
        self.d, self.h, self.dh = d, heads, d // heads
        self.value_scale = value_scale
        self.w_q = nn.Parameter(torch.empty(heads, d, self.dh))
        self.w_k = nn.Parameter(torch.empty(heads, d, self.dh))
        self.w_v = nn.Parameter(torch.empty(heads, d, self.dh))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        bound = 1.0 / math.sqrt(self.d)
        nn.init.uniform_(self.w_q, -bound, bound)            # §2.1: uniform in (−1, 1)/√d
        nn.init.uniform_(self.w_k, -bound, bound)
        nn.init.normal_(self.w_v, 0.0, math.sqrt(self.value_scale / self.d))  # σ² = c/d

    def _heads(self, X: Tensor, w: Tensor) -> Tensor:
        """X W_k for every head with one GEMM: (…, n, d) × (h, d, dh) -> (…, h, n, dh)."""
        flat = w.permute(1, 0, 2).reshape(self.d, self.h * self.dh)      # (d, h·dh)
        out = X @ flat                                                   # (…, n, h·dh)
        return out.unflatten(-1, (self.h, self.dh)).transpose(-3, -2)    # (…, h, n, dh)

    def attention(self, X: Tensor) -> Tensor:
        """P (…, h, n, n) for X (…, n, d)."""
        q = self._heads(X, self.w_q)                         # (…, h, n, dh)
        k = self._heads(X, self.w_k)                         # (…, h, n, dh)
        return torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(self.dh), dim=-1)  # (…, h, n, n)

    def mix(self, P: Tensor, X: Tensor, w_v: Tensor | None = None) -> Tensor:
        """[P₁XW₁ ⋯ P_hXW_h] (…, n, d) (Prop. 2.9). `w_v` may carry extra leading axes (draws of W)."""
        # X W_k first (fewer flops than (P X) W_k); one GEMM for the module's own maps
        V = self._heads(X, self.w_v) if w_v is None else X.unsqueeze(-3) @ w_v   # (…, h, n, dh)
        out = P @ V                                          # (…, h, n, dh) = P_k X W_k
        return out.transpose(-3, -2).flatten(-2)             # (…, n, h·dh)

    def forward(self, X: Tensor) -> tuple[Tensor, Tensor]:
        P = self.attention(X)
        return self.mix(P, X), P


def ffn_weight_variances(d: int, q: int, init: FfnInit) -> tuple[float, float]:
    """The entry variances of W₁ (d → q) and W₂ (q → d) under `init`: Xavier-uniform 2/(d + q) for both;
    `nn.Linear`'s default U(±1/√fan_in), 1/(3·fan_in): 1/(3d) and 1/(3q)."""
    if choice("ffn_init", init, FfnInit) == "xavier":
        return 2 / (d + q), 2 / (d + q)
    return 1 / (3 * d), 1 / (3 * q)


class FFN(nn.Module):
    """φ(XW₁)W₂ with bias-free W₁ ∈ ℝ^{d×q}, W₂ ∈ ℝ^{q×d} (Alg. 1 step 3).

    `init`: "xavier" (Xavier-uniform) or "torch" (`nn.Linear`'s default, U(±1/√fan_in)).
    `kind`: "relu" (φ = ReLU), "centred-relu" (φ_j(z) = ReLU(z) − ‖w₁ⱼ‖/√(2π), the ReLU minus its mean
    when the input row has i.i.d. unit-variance entries, as after LN: zero-mean hidden units for
    isotropic tokens) or "none" (the FFN outputs zero, so step 3 is the identity)."""

    def __init__(self, d: int, q: int, init: FfnInit = "xavier", kind: FfnKind = "relu") -> None:
        super().__init__()
        choice("ffn_init", init, FfnInit)
        self.kind = choice("ffn_kind", kind, FfnKind)
        self.w1 = nn.Linear(d, q, bias=False)       # nn.Linear's own reset: the "torch" initialisation
        self.w2 = nn.Linear(q, d, bias=False)
        if init == "xavier":
            nn.init.xavier_uniform_(self.w1.weight)
            nn.init.xavier_uniform_(self.w2.weight)

    def forward(self, x: Tensor) -> Tensor:
        if self.kind == "none":
            return torch.zeros_like(x)
        h = torch.relu(self.w1(x))
        if self.kind == "centred-relu":
            h = h - self.w1.weight.norm(dim=1) / math.sqrt(2 * math.pi)
        return self.w2(h)


@dataclass
class PostNormTrace:
    """The states of Algorithm 1: X (input), Y₁..Y₄, and the attention matrices P (…, h, n, n)."""

    X: Tensor
    Y1: Tensor
    Y2: Tensor
    Y3: Tensor
    Y4: Tensor
    P: Tensor


class PostNormBlock(nn.Module):
    """Y = postLN(X), Yu & Zhang Algorithm 1, with an optional de-escalation step (eq. 21).

    `deesc_place` is one of `input` (before step 0), `after_attention` (after step 1),
    `ffn_input` (after step 2, as their Transformer-XL run), `output` (after step 4, as Fig. 5
    and the ViT run). `learnable_tau` makes τ a parameter (kept in (0, 1] by a sigmoid).
    `ffn_init`, `ffn_kind`: see `FFN`.
    """

    def __init__(
        self,
        d: int,
        heads: int,
        ffn_dim: int,
        alpha: float = 1.0,
        value_scale: float = 1.0,
        tau: float | None = None,
        deesc_place: DeescPlace = "output",
        learnable_tau: bool = False,
        ffn_init: FfnInit = "xavier",
        ffn_kind: FfnKind = "relu",
    ) -> None:
        super().__init__()
        choice("deesc_place", deesc_place, DeescPlace)
        if tau is not None and not 0 < tau <= 1:
            raise ValueError(f"tau must lie in (0, 1] (eq. 21), got {tau}")
        self.attn = SoftmaxAttention(d, heads, value_scale)
        self.ln1, self.ln2 = ScalarLayerNorm(), ScalarLayerNorm()
        self.ffn = FFN(d, ffn_dim, ffn_init, ffn_kind)
        self.alpha = alpha
        self.deesc_place = deesc_place
        if tau is None:
            self.tau_logit = None
            self._tau = None
        elif learnable_tau:
            t = min(tau, 1 - 1e-4)
            self.tau_logit = nn.Parameter(torch.tensor(math.log(t / (1 - t))))
            self._tau = None
        else:
            self.tau_logit = None
            self._tau = float(tau)

    @property
    def tau(self) -> float | Tensor | None:
        if self.tau_logit is not None:
            return torch.sigmoid(self.tau_logit)
        return self._tau

    def _maybe(self, X: Tensor, place: DeescPlace) -> Tensor:
        if self.tau is not None and self.deesc_place == place:
            return deescalate(X, self.tau)
        return X

    def trace(self, X: Tensor) -> PostNormTrace:
        X = self._maybe(X, "input")
        SA, P = self.attn(X)                                 # step 0 and P X W
        Y1 = self._maybe(self.alpha * SA + X, "after_attention")  # step 1
        Y2 = self._maybe(self.ln1(Y1), "ffn_input")          # step 2
        Y3 = self.ffn(Y2) + Y2                               # step 3
        Y4 = self._maybe(self.ln2(Y3), "output")             # step 4
        return PostNormTrace(X, Y1, Y2, Y3, Y4, P)

    def forward(self, X: Tensor) -> Tensor:
        return self.trace(X).Y4


@dataclass
class PreNormTrace:
    X: Tensor
    Xhat: Tensor
    attn_out: Tensor   # P(X̂)X̂W
    Y: Tensor
    Z: Tensor
    P: Tensor


class PreNormBlock(nn.Module):
    """Z = PreLN(X), Yu & Zhang eq. (19); `alpha` scales the SA branch (1 in the paper)."""

    def __init__(self, d: int, heads: int, ffn_dim: int, alpha: float = 1.0, value_scale: float = 1.0,
                 ffn_init: FfnInit = "xavier") -> None:
        super().__init__()
        self.attn = SoftmaxAttention(d, heads, value_scale)
        self.ln1, self.ln2 = ScalarLayerNorm(), ScalarLayerNorm()
        self.ffn = FFN(d, ffn_dim, ffn_init)
        self.alpha = alpha

    def trace(self, X: Tensor) -> PreNormTrace:
        Xh = self.ln1(X)
        A, P = self.attn(Xh)
        Y = X + self.alpha * A
        Z = Y + self.ffn(self.ln2(Y))
        return PreNormTrace(X, Xh, self.alpha * A, Y, Z, P)

    def forward(self, X: Tensor) -> Tensor:
        return self.trace(X).Z


# --- the standard block: per-channel LayerNorm, projections with biases, a two-layer FFN -------------------

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
        return self.out(y.transpose(1, 2).reshape(B, n, d))  # (B, n, h, dh) -> (B, n, d)


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


#: where the standard block can de-escalate: two of `DEESCALATION_PLACES` (it has no separate attention step)
StandardDeescPlace = Literal["ffn_input", "output"]
STANDARD_DEESC_PLACES: tuple[StandardDeescPlace, ...] = typing.get_args(StandardDeescPlace)


class StandardBlock(nn.Module):
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
    (LayerNorm with one scalar γ and λ, `ScalarLayerNorm`), `bias=False` (no biases in the
    projections and the FFN; LayerNorm keeps its own), `out_proj=False` (no attention output
    projection), `activation="relu"`."""

    def __init__(self, d: int, heads: int, d_ff: int, variant: Variant = "post-norm", tau: float = 1.0,
                 causal: bool = True, deesc_place: StandardDeescPlace = "ffn_input", activation: Activation = "relu",
                 norm: Norm = "channel", bias: bool = True, out_proj: bool = True,
                 deesc_mean: DeescMean | None = None) -> None:
        super().__init__()
        if deesc_mean is not None:
            choice("deesc_mean", deesc_mean, DeescMean)
        self.deesc_mean = deesc_mean or ("prefix" if causal else "sequence")
        choice("variant", variant, Variant)
        choice("deesc_place", deesc_place, StandardDeescPlace)
        self.variant, self.tau, self.causal, self.deesc_place = variant, tau, causal, deesc_place
        choice("activation", activation, Activation)
        choice("norm", norm, Norm)
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
        return deescalate(x, self.tau)

    def trace(self, x: Tensor) -> tuple[Tensor, Tensor | None]:
        if self.variant == "pre-norm":
            x = x + self.attn(self.ln1(x))
            return x + self.ffn(self.ln2(x)), None
        x = self.ln1(x + self.attn(x))  # (B, n, d) throughout
        before = None
        if self.variant == "de-escalated" and self.deesc_place == "ffn_input":
            before, x = x, self._deesc(x)
        x = self.ln2(x + self.ffn(x))
        if self.variant == "de-escalated" and self.deesc_place == "output":
            before, x = x, self._deesc(x)
        return x, before

    def forward(self, x: Tensor) -> Tensor:
        return self.trace(x)[0]
