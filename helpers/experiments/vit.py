"""The ViT chapter (Yu & Zhang §3.3, Figure 6): post-norm vs pre-norm vs de-escalated deep ViTs on CIFAR-10."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from ..book.params import ChapterParams, ParameterError, nonneg, positive, rules


@dataclass(frozen=True)
class Params(ChapterParams):
    """Yu & Zhang §3.3: post-norm vs pre-norm vs de-escalated post-norm ViT on CIFAR-10 (Figure 6)."""

    variants: tuple[str, ...] = ("post-norm", "pre-norm", "de-escalated")
    depth: int = 80
    hidden: int = 192
    ffn: int = 384
    heads: int = 8
    patch: int = 4
    epochs: int = 150
    train_images: int = 0            # 0 = all 50,000
    test_images: int = 0             # 0 = all 10,000
    batch: int = 128
    lr: float | None = None          # None: 5e-5 post-norm, 1e-4 otherwise (§3.3)
    tau: float = 1.0
    deesc_place: str = "output"
    augment: bool = True
    seeds: int = 3
    sim_every: int = 1

    CHAPTER: ClassVar[str] = "vit"
    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {
        "ci": dict(depth=4, epochs=1, train_images=256, test_images=128, batch=64, seeds=1),
        "book": dict(depth=24, epochs=4, train_images=2048, test_images=1000, seeds=1),
        "paper": dict(),
    }
    RULES: ClassVar = rules(
        variants=(lambda v: len(v) > 0 and all(x in ("post-norm", "pre-norm", "de-escalated") for x in v),
                  "each must be post-norm, pre-norm or de-escalated"),
        depth=positive, hidden=positive, ffn=positive, heads=positive,
        patch=(lambda v: v > 0 and 32 % v == 0, "must divide 32"), epochs=positive, train_images=nonneg,
        test_images=nonneg, batch=positive, lr=(lambda v: v is None or v > 0, "must be > 0"),
        tau=(lambda v: 0 < v <= 1, "must lie in (0, 1] (eq. 21)"),
        deesc_place=(lambda v: v in ("input", "after_attention", "ffn_input", "output"),
                     "must be input, after_attention, ffn_input or output"),
        seeds=positive, sim_every=positive,
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.hidden % self.heads:
            raise ParameterError(f"parameter 'hidden' = {self.hidden} must be divisible by heads = {self.heads}")
