"""A Vision Transformer whose blocks are exactly Yu & Zhang's (Algorithm 1 post-norm, eq. 19 pre-norm,
Algorithm 1 + eq. 21 de-escalation): the model of their §3.3 experiment (Figure 6)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import torch
from torch import Tensor, nn

from . import measures as M
from .blocks import VARIANTS as VARIANTS  # the vit chapter reads the variants here
from .blocks import DeescPlace, PostNormBlock, PreNormBlock, StandardBlock, Variant, ffn_weight_variances
from .config import StoredNames, choice

#: "algorithm1": Yu & Zhang's blocks as written (scalar-γ LN, per-head value maps, no output projection, no
#: biases); "standard": a block in the style of the vit-pytorch code the paper points to (per-channel LN with bias,
#: an output projection, a GELU FFN with biases), in the same three variants. It is not vit-pytorch's block: there
#: `to_qkv` has no bias (`nn.Linear(dim, inner_dim * 3, bias=False)`, at the commit matching the paper and today)
#: where ours has Q/K/V biases, and the stock ViT around it (LayerNorm → Linear → LayerNorm patch embedding,
#: N(0, 1) positions and [CLS], a final LayerNorm at every depth) is not `ViT` below
#: the block ablation: a standard block with one part put back to Algorithm 1's, or all four
STANDARD_REVERTS: dict[str, dict] = {
    "standard-scalar-ln": dict(norm="scalar"),     # LayerNorm with one scalar γ, λ
    "standard-no-bias": dict(bias=False),          # no biases in the projections and the FFN
    "standard-no-proj": dict(out_proj=False),      # no attention output projection (heads concatenated)
    "standard-relu": dict(activation="relu"),      # ReLU FFN instead of GELU
    # all four at once: Algorithm 1's block in the standard block's code, PyTorch's default initialisation
    # (what is then left between it and "algorithm1" is §2.1's initialisation)
    "standard-all-four": dict(norm="scalar", bias=False, out_proj=False, activation="relu"),
}
#: and Algorithm 1's block with one part of its initialisation (§2.1) replaced by PyTorch's default, the one
#: a standard block has: the FFN maps (U(±1/√fan_in) instead of Xavier) or the value maps (variance 1/(3d)
#: instead of 1/d, `value_scale` = 1/3); Q and K are U(±1/√d) in both
ALGORITHM1_INITS: dict[str, dict] = {
    "algorithm1-torch-ffn-init": dict(ffn_init="torch"),
    "algorithm1-torch-v-init": dict(value_scale=1 / 3),
}
#: the FFN-scale sweep: Algorithm 1's block with PyTorch's FFN initialisation whose two FFN maps have
#: their variance multiplied by this factor (1 is "algorithm1-torch-ffn-init"; Xavier's variance is 2× PyTorch's
#: for W₁ and 4× for W₂ at width 96, FFN 192); every other weight is drawn as in "algorithm1-torch-ffn-init"
FFN_SCALES: dict[str, float] = {"algorithm1-torch-ffn-init-x0.5": 0.5, "algorithm1-torch-ffn-init-x2": 2.0,
                                "algorithm1-torch-ffn-init-x4": 4.0}
#: the FFN-scale sweep moves the FFN's initial scale and, under AdamW (steps of about the learning rate whatever
#: the weights' scale), its relative step size together. These blocks move one without the other: Algorithm 1's
#: block (Xavier FFN, its initial scale) whose FFN maps take steps as large *relative to their initial scale* as
#: PyTorch-initialised ones — each map's learning rate multiplied by Xavier's initial std over PyTorch's
#: (`ffn_step_scales`; √2 for W₁ and 2 for W₂ at width 96, FFN 192). The model carries the multipliers
#: (`ViT.lr_scales`), the trainer gives those maps their own learning rate.
FFN_STEPS: tuple[str, ...] = ("algorithm1-torch-ffn-steps",)
BLOCKS = ("algorithm1", "standard", *STANDARD_REVERTS, *ALGORITHM1_INITS, *FFN_SCALES, *FFN_STEPS)


def ffn_step_scales(d: int, q: int) -> tuple[float, float]:
    """The learning-rate multipliers of W₁ and W₂ that give Xavier-initialised FFN maps the relative step size
    (step over initial std) of PyTorch-initialised ones under AdamW: Xavier's initial std over PyTorch's,
    √(2/(d+q) · 3d) and √(2/(d+q) · 3q) (`blocks.ffn_weight_variances`)."""
    (x1, x2), (t1, t2) = ffn_weight_variances(d, q, "xavier"), ffn_weight_variances(d, q, "torch")
    return float(np.sqrt(x1 / t1)), float(np.sqrt(x2 / t2))


@dataclass
class ViTConfig(StoredNames):
    """Table 1 of Yu & Zhang: depth 80, hidden 192, FFN 384, 8 heads of 24 (4×4 patches, 32 px)."""

    STORED_AS: ClassVar[dict[str, str]] = {"d_model": "hidden", "d_ff": "ffn", "n_heads": "heads"}

    variant: Variant = "post-norm"
    depth: int = 80
    d_model: int = 192
    d_ff: int = 384
    n_heads: int = 8
    patch: int = 4
    image: int = 32
    classes: int = 10
    tau: float = 1.0
    deesc_place: DeescPlace = "output"
    learnable_tau: bool = False
    block: str = "algorithm1"

    def __post_init__(self) -> None:
        choice("block", self.block, BLOCKS)
        if not self.block.startswith("algorithm1") and self.deesc_place not in ("ffn_input", "output"):
            raise ValueError(f"the standard block de-escalates at 'ffn_input' or 'output', not {self.deesc_place!r}")
        choice("variant", self.variant, Variant)
        if self.image % self.patch:
            raise ValueError(f"image size {self.image} must be divisible by the patch size {self.patch}")
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model {self.d_model} must be divisible by n_heads {self.n_heads}")


class ViT(nn.Module):
    """Patch embedding (4×4, linear), learned [CLS] and positions, `depth` blocks of the chosen
    variant, a final LayerNorm for the pre-norm variant (as pre-norm transformers need), and a
    linear head on [CLS]."""

    def __init__(self, cfg: ViTConfig) -> None:
        super().__init__()
        self.cfg = cfg
        n = (cfg.image // cfg.patch) ** 2
        self.embed = nn.Linear(3 * cfg.patch * cfg.patch, cfg.d_model)
        self.cls = nn.Parameter(torch.zeros(1, 1, cfg.d_model))
        self.pos = nn.Parameter(torch.randn(1, n + 1, cfg.d_model) * 0.02)
        init = ALGORITHM1_INITS.get(cfg.block, dict(ffn_init="torch") if cfg.block in FFN_SCALES else {})
        if not cfg.block.startswith("algorithm1"):
            parts = dict(activation="gelu") | STANDARD_REVERTS.get(cfg.block, {})
            self.blocks = nn.ModuleList(
                StandardBlock(cfg.d_model, cfg.n_heads, cfg.d_ff, cfg.variant, cfg.tau, causal=False,
                              deesc_place=cfg.deesc_place, **parts) for _ in range(cfg.depth))
            self.final_norm: nn.Module = nn.LayerNorm(cfg.d_model) if cfg.variant == "pre-norm" else nn.Identity()
        elif cfg.variant == "pre-norm":
            self.blocks = nn.ModuleList(PreNormBlock(cfg.d_model, cfg.n_heads, cfg.d_ff, **init)
                                        for _ in range(cfg.depth))
            self.final_norm = nn.LayerNorm(cfg.d_model)
        else:
            tau = cfg.tau if cfg.variant == "de-escalated" else None
            self.blocks = nn.ModuleList(
                PostNormBlock(cfg.d_model, cfg.n_heads, cfg.d_ff, tau=tau, deesc_place=cfg.deesc_place,
                              learnable_tau=cfg.learnable_tau, **init) for _ in range(cfg.depth))
            self.final_norm = nn.Identity()
        self.head = nn.Linear(cfg.d_model, cfg.classes)
        #: learning-rate multipliers by parameter name (the trainer's groups); empty but for `FFN_STEPS` blocks
        self.lr_scales: dict[str, float] = {}
        if cfg.block in FFN_STEPS:
            s1, s2 = ffn_step_scales(cfg.d_model, cfg.d_ff)
            self.lr_scales = {f"blocks.{i}.ffn.{w}.weight": s for i in range(cfg.depth)
                              for w, s in (("w1", s1), ("w2", s2))}
        if cfg.block in FFN_SCALES:                  # after every draw: the same weights, the FFN maps rescaled
            with torch.no_grad():
                for blk in self.blocks:
                    blk.ffn.w1.weight.mul_(FFN_SCALES[cfg.block] ** 0.5)
                    blk.ffn.w2.weight.mul_(FFN_SCALES[cfg.block] ** 0.5)

    def patches(self, x: Tensor) -> Tensor:
        """(B, 3, H, W) -> (B, N, 3·p·p)."""
        p = self.cfg.patch
        B, C, H, W = x.shape
        x = x.reshape(B, C, H // p, p, W // p, p).permute(0, 2, 4, 1, 3, 5)  # (B, H/p, W/p, C, p, p)
        return x.reshape(B, (H // p) * (W // p), C * p * p)  # (B, N, C·p·p), N = (H/p)(W/p) patches

    def forward(self, x: Tensor, return_states: bool = False):
        h = self.embed(self.patches(x))                                   # (B, N, d)
        h = torch.cat([self.cls.expand(h.shape[0], -1, -1), h], dim=1) + self.pos  # (B, N + 1, d): [CLS] first
        states = [h]
        for blk in self.blocks:
            h = blk(h)
            if return_states:
                states.append(h)
        logits = self.head(self.final_norm(h)[:, 0])  # [CLS] (B, d) -> (B, classes)
        return (logits, states) if return_states else logits

    @torch.no_grad()
    def block_similarity(self, x: Tensor) -> np.ndarray:
        """t_sim of the input to every block and of the output (Yu & Zhang Def. 1.1), batch mean."""
        _, states = self.forward(x, return_states=True)
        return np.array([float(M.t_sim(s).mean()) for s in states])  # (depth + 1,): each state (B, N + 1, d)

    @torch.no_grad()
    def similarity_before_deescalation(self, x: Tensor) -> np.ndarray | None:
        """For the de-escalated variant: t_sim of every block's state just *before* its de-escalation
        step (after it, eq. 21 with τ = 1 makes the token mean zero, so t_sim there is 0 by
        construction and says nothing about escalation). None for the other variants."""
        if self.cfg.variant != "de-escalated":
            return None
        h = self.embed(self.patches(x))
        h = torch.cat([self.cls.expand(h.shape[0], -1, -1), h], dim=1) + self.pos  # (B, N + 1, d): [CLS] first
        out = []
        for blk in self.blocks:
            if isinstance(blk, StandardBlock):
                h, before = blk.trace(h)
            else:
                tr = blk.trace(h)
                place = blk.deesc_place
                before = {"input": h, "after_attention": blk.alpha * blk.attn(tr.X)[0] + tr.X,
                          "ffn_input": blk.ln1(tr.Y1), "output": blk.ln2(tr.Y3)}[place]
                h = tr.Y4
            out.append(float(M.t_sim(before).mean()))
        return np.array(out)
