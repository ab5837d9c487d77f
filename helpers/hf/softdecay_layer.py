"""SoftDecay as a trainable layer inside a Hugging Face encoder (Yan et al. §5.2, App. B): inserted before
the last layer's final LayerNorm of BERT, RoBERTa, ALBERT or DistilBERT, on each sentence's real tokens."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from ..core.softdecay import SoftDecay, softdecay_transform
from .walk import final_layernorm

ALPHA_BOUNDS = (-0.999, -0.001)


class SoftDecayBeforeLayerNorm(nn.Module):
    """LayerNorm(SoftDecay(x)) in place of the last layer's LayerNorm(x) (App. B), with the
    attention mask of the current forward pass (set by a pre-hook on the model) so that Algorithm 1
    sees each sentence's real tokens only. For shared layers (ALBERT) only the `apply_on_call`-th
    call of a forward pass is transformed."""

    def __init__(self, layer_norm: nn.Module, alpha: float, trainable: bool = True, apply_on_call: int = 1) -> None:
        super().__init__()
        self.layer_norm = layer_norm
        self.softdecay = SoftDecay(alpha, trainable=trainable)
        self.apply_on_call = apply_on_call
        self.mask: Tensor | None = None
        self.calls = 0
        self.capture = False                                          # keep (input, SoftDecay output) for figures
        self.captured: tuple[Tensor, Tensor] | None = None

    @property
    def alpha(self) -> float:
        return float(self.softdecay.alpha.detach())

    def forward(self, x: Tensor) -> Tensor:                          # x (B, L, d)
        self.calls += 1
        if self.calls != self.apply_on_call:
            return self.layer_norm(x)
        mask = self.mask
        if mask is not None and mask.shape != x.shape[:2]:
            raise RuntimeError(f"attention mask {tuple(mask.shape)} does not match hidden states {tuple(x.shape)}")
        alpha = self.softdecay.alpha.clamp(*ALPHA_BOUNDS)
        # Algorithm 1 in float32 even under bf16 autocast (its eigendecomposition is float64 inside):
        # a bf16 Gram matrix X Xᵀ and reconstruction would perturb the spectrum SoftDecay reshapes
        with torch.autocast(x.device.type, enabled=False):
            y = softdecay_transform(x.float(), alpha.float(), mask).to(x.dtype)   # (B, L, d), padded rows unchanged
        if self.capture:
            self.captured = (x.detach(), y.detach())
        return self.layer_norm(y)


def insert_softdecay(model: nn.Module, alpha: float = -0.5, trainable: bool = True) -> SoftDecayBeforeLayerNorm:
    """Put SoftDecay before the last layer's final LayerNorm of `model` (in place) and return the
    new module (its `.softdecay.alpha` is the trainable α)."""
    if not -1.0 <= alpha < 0:
        raise ValueError(f"initial alpha must lie in [-1, 0) (the paper's range), got {alpha}")
    parent, name, calls = final_layernorm(model)
    ln = getattr(parent, name)
    if isinstance(ln, SoftDecayBeforeLayerNorm):
        raise ValueError("SoftDecay is already inserted in this model")
    wrapped = SoftDecayBeforeLayerNorm(ln, alpha, trainable, apply_on_call=calls)
    setattr(parent, name, wrapped)

    def pre_hook(_module, args, kwargs):
        wrapped.calls = 0
        mask = kwargs.get("attention_mask")
        if mask is None and len(args) > 1 and isinstance(args[1], Tensor):
            mask = args[1]
        ids = kwargs.get("input_ids", args[0] if args else None)
        if mask is None and isinstance(ids, Tensor):
            mask = torch.ones(ids.shape[:2], dtype=torch.bool, device=ids.device)
        wrapped.mask = None if mask is None else mask.bool()

    model.register_forward_pre_hook(pre_hook, with_kwargs=True)
    return wrapped


def find_softdecay(model: nn.Module) -> SoftDecayBeforeLayerNorm | None:
    for m in model.modules():
        if isinstance(m, SoftDecayBeforeLayerNorm):
            return m
    return None
