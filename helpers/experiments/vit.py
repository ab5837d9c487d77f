"""The ViT chapter (Yu & Zhang §3.3, Figure 6): post-norm vs pre-norm vs de-escalated deep ViTs on CIFAR-10.

`run(params)` trains every variant for every seed (through `helpers.train.vit`), each run read back
from the committed results when its settings match, and returns the training histories."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

import numpy as np

from ..book import results, runtime
from ..book.params import ChapterParams, check_heads, nonneg, positive, rules
from ..core.vit import VARIANTS
from ..data import load_cifar10
from ..train import vit as vit_train

Variant = Literal["post-norm", "pre-norm", "de-escalated"]


@dataclass(frozen=True)
class Params(ChapterParams):
    """Yu & Zhang §3.3: post-norm vs pre-norm vs de-escalated post-norm ViT on CIFAR-10 (Figure 6)."""

    variants: tuple[Variant, ...] = ("post-norm", "pre-norm", "de-escalated")
    depth: int = 80
    d_model: int = 192
    d_ff: int = 384
    n_heads: int = 8
    patch: int = 4
    epochs: int = 150
    train_images: int = 0            # 0 = all 50,000
    test_images: int = 0             # 0 = all 10,000
    batch_size: int = 128
    lr: float | None = None          # None: 5e-5 post-norm, 1e-4 otherwise (§3.3)
    tau: float = 1.0
    deesc_place: Literal["input", "after_attention", "ffn_input", "output"] = "output"
    augment: bool = True
    #: "algorithm1": Yu & Zhang's blocks as written (the committed runs); "standard": the vit-pytorch-style
    #: block (per-channel LN with bias, output projection, biases, GELU) in the same three variants
    block: Literal["algorithm1", "standard"] = "algorithm1"
    seeds: int = 3
    sim_every: int = 1
    #: bf16 autocast (fp32 weights and optimiser) is the default: ≥ 2× faster on this CPU and on GPUs,
    #: and follows the fp32 loss curve (tests/test_train.py); the committed book runs are fp32
    precision: Literal["fp32", "bf16"] = "bf16"

    CHAPTER: ClassVar[str] = "vit"
    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {
        "ci": dict(depth=4, epochs=1, train_images=256, test_images=128, batch_size=64, seeds=1),
        "book": dict(depth=24, epochs=4, train_images=2048, test_images=1000, seeds=1, precision="fp32"),
        "paper": dict(),
    }
    RULES: ClassVar = rules(
        variants=(lambda v: len(v) > 0 and len(set(v)) == len(v), "needs distinct variants"),
        depth=positive, d_model=positive, d_ff=positive, n_heads=positive,
        patch=(lambda v: v > 0 and 32 % v == 0, "must divide 32"), epochs=positive, train_images=nonneg,
        test_images=nonneg, batch_size=positive, lr=(lambda v: v is None or v > 0, "must be > 0"),
        tau=(lambda v: 0 < v <= 1, "must lie in (0, 1] (eq. 21)"), seeds=positive, sim_every=positive,
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        check_heads(self)


@dataclass
class Result(results.Result):
    """One training history per variant and seed (`histories[variant][i]` for run seed `seeds[i]`):
    per epoch `train_loss`, `train_acc`, `test_loss`, `test_acc`, `t_sim` (per block, keyed by the
    epoch as a string), plus `lr` and `wall_time_s`."""

    variants: list[str]
    seeds: list[int]
    depth: int
    epochs: int
    train_images: int                # effective number (50,000 when the preset says 0 = all)
    scale: str
    histories: dict[str, list[dict]] = field(default_factory=dict)
    from_cache: bool = False

    def curves(self, key: str) -> dict[str, np.ndarray]:
        """Per variant, (seeds, epochs) of one per-epoch history entry (`train_loss`, `test_acc`, …)."""
        return {v: np.array([h[key] for h in self.histories[v]], dtype=float) for v in self.variants}

    def final(self, key: str) -> dict[str, float]:
        """Per variant, the last epoch's value of `key`, mean over seeds."""
        return {v: float(c[:, -1].mean()) for v, c in self.curves(key).items()}

    def t_sim(self, variant: str, seed_index: int = 0) -> dict[int, np.ndarray]:
        """t_sim per block (block 0 = patch embeddings + positions) after each measured epoch."""
        return {int(e): np.asarray(s, dtype=float) for e, s in self.histories[variant][seed_index]["t_sim"].items()}

    def last_t_sim(self) -> dict[str, float]:
        """t_sim of the last block's output after training (first seed)."""
        return {v: float(self.t_sim(v)[self.epochs][-1]) for v in self.variants}

    def table(self):
        """Final numbers per variant (mean over seeds): lr, losses, accuracy, seconds per epoch."""
        import pandas as pd

        rows = [{"variant": v, "lr": self.histories[v][0]["lr"],
                 "final train loss": self.final("train_loss")[v], "final test loss": self.final("test_loss")[v],
                 "final test acc": self.final("test_acc")[v],
                 "s per epoch": float(np.mean([h["wall_time_s"] for h in self.histories[v]])) / self.epochs}
                for v in self.variants]
        return pd.DataFrame(rows)


def run(p: Params) -> Result:
    """Train (or read back) every variant for every seed of `p`."""
    runtime.seed_everything(p.seed)
    dev = runtime.choose_device(p.device)
    data: dict[str, Any] = {}

    def datasets():
        if not data:
            data["train"] = load_cifar10("train", p.train_images or None, p.seed)
            data["test"] = load_cifar10("test", p.test_images or None, p.seed + 1)
        return data["train"], data["test"]

    def train(variant: str, s: int, ckpt):
        tc = vit_train.TrainConfig(epochs=p.epochs, batch=p.batch_size, lr=p.lr, augment=p.augment, seed=s,
                                   sim_every=p.sim_every)
        train_set, test_set = datasets()
        return vit_train.run_variant(variant, p.depth, p.d_model, p.d_ff, p.n_heads, p.patch, p.tau,
                                     p.deesc_place, tc, train_set, test_set, checkpoint=ckpt, device=dev,
                                     precision=p.precision, block=p.block)

    histories, hits = results.variant_runs(p, p.variants, runtime.run_seeds(p.seed, p.seeds), train)
    return Result(variants=list(p.variants), seeds=runtime.run_seeds(p.seed, p.seeds), depth=p.depth, epochs=p.epochs,
                  train_images=p.train_images or 50_000, scale=p.scale, histories=histories, from_cache=all(hits))


__all__ = ["Params", "Result", "run", "VARIANTS"]
