"""A Vision Transformer whose blocks are exactly Yu & Zhang's (Algorithm 1 post-norm, eq. 19
pre-norm, Algorithm 1 + eq. 21 de-escalation), CIFAR-10 AutoAugment, and a training loop with
checkpoint/resume — the building blocks of the de-escalated deep post-norm ViT experiment (§3.3).

The chapter is `book/vit.md` (Figure 6 at the scale a CPU allows; Figure 7 not done).
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import torch
from PIL import Image, ImageEnhance, ImageOps
from torch import Tensor, nn

from ..book.params import ChapterParams, ParameterError, nonneg, positive, rules
from ..book.runtime import progress
from ..core import measures as M
from ..core.blocks import PostNormBlock, PreNormBlock


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


VARIANTS = ("post-norm", "pre-norm", "de-escalated")


@dataclass
class ViTConfig:
    """Table 1 of Yu & Zhang: depth 80, hidden 192, FFN 384, 8 heads of 24 (4×4 patches, 32 px)."""

    variant: str = "post-norm"
    depth: int = 80
    hidden: int = 192
    ffn: int = 384
    heads: int = 8
    patch: int = 4
    image: int = 32
    classes: int = 10
    tau: float = 1.0
    deesc_place: str = "output"
    learnable_tau: bool = False

    def __post_init__(self) -> None:
        if self.variant not in VARIANTS:
            raise ValueError(f"variant {self.variant!r}: use one of {VARIANTS}")
        if self.image % self.patch:
            raise ValueError(f"image size {self.image} must be divisible by the patch size {self.patch}")
        if self.hidden % self.heads:
            raise ValueError(f"hidden {self.hidden} must be divisible by heads {self.heads}")


class ViT(nn.Module):
    """Patch embedding (4×4, linear), learned [CLS] and positions, `depth` blocks of the chosen
    variant, a final LayerNorm for the pre-norm variant (as pre-norm transformers need), and a
    linear head on [CLS]."""

    def __init__(self, cfg: ViTConfig) -> None:
        super().__init__()
        self.cfg = cfg
        n = (cfg.image // cfg.patch) ** 2
        self.embed = nn.Linear(3 * cfg.patch * cfg.patch, cfg.hidden)
        self.cls = nn.Parameter(torch.zeros(1, 1, cfg.hidden))
        self.pos = nn.Parameter(torch.randn(1, n + 1, cfg.hidden) * 0.02)
        if cfg.variant == "pre-norm":
            self.blocks = nn.ModuleList(PreNormBlock(cfg.hidden, cfg.heads, cfg.ffn) for _ in range(cfg.depth))
            self.final_norm: nn.Module = nn.LayerNorm(cfg.hidden)
        else:
            tau = cfg.tau if cfg.variant == "de-escalated" else None
            self.blocks = nn.ModuleList(
                PostNormBlock(cfg.hidden, cfg.heads, cfg.ffn, tau=tau, deesc_place=cfg.deesc_place,
                              learnable_tau=cfg.learnable_tau) for _ in range(cfg.depth))
            self.final_norm = nn.Identity()
        self.head = nn.Linear(cfg.hidden, cfg.classes)

    def patches(self, x: Tensor) -> Tensor:
        """(B, 3, H, W) -> (B, N, 3·p·p)."""
        p = self.cfg.patch
        B, C, H, W = x.shape
        x = x.reshape(B, C, H // p, p, W // p, p).permute(0, 2, 4, 1, 3, 5)
        return x.reshape(B, (H // p) * (W // p), C * p * p)

    def forward(self, x: Tensor, return_states: bool = False):
        h = self.embed(self.patches(x))                                   # (B, N, d)
        h = torch.cat([self.cls.expand(h.shape[0], -1, -1), h], dim=1) + self.pos
        states = [h]
        for blk in self.blocks:
            h = blk(h)
            if return_states:
                states.append(h)
        logits = self.head(self.final_norm(h)[:, 0])
        return (logits, states) if return_states else logits

    @torch.no_grad()
    def block_similarity(self, x: Tensor) -> np.ndarray:
        """t_sim of the input to every block and of the output (Yu & Zhang Def. 1.1), batch mean."""
        _, states = self.forward(x, return_states=True)
        return np.array([float(M.t_sim(s).mean()) for s in states])


# ------------------------------------------------------------------ AutoAugment (CIFAR-10 policy)

def _op(img: Image.Image, name: str, mag: float) -> Image.Image:
    fill = (128, 128, 128)
    if name == "ShearX":
        return img.transform(img.size, Image.AFFINE, (1, mag, 0, 0, 1, 0), fillcolor=fill)
    if name == "ShearY":
        return img.transform(img.size, Image.AFFINE, (1, 0, 0, mag, 1, 0), fillcolor=fill)
    if name == "TranslateX":
        return img.transform(img.size, Image.AFFINE, (1, 0, mag * img.size[0], 0, 1, 0), fillcolor=fill)
    if name == "TranslateY":
        return img.transform(img.size, Image.AFFINE, (1, 0, 0, 0, 1, mag * img.size[1]), fillcolor=fill)
    if name == "Rotate":
        return img.rotate(mag, fillcolor=fill)
    if name == "Color":
        return ImageEnhance.Color(img).enhance(1 + mag)
    if name == "Posterize":
        return ImageOps.posterize(img, int(mag))
    if name == "Solarize":
        return ImageOps.solarize(img, int(mag))
    if name == "Contrast":
        return ImageEnhance.Contrast(img).enhance(1 + mag)
    if name == "Sharpness":
        return ImageEnhance.Sharpness(img).enhance(1 + mag)
    if name == "Brightness":
        return ImageEnhance.Brightness(img).enhance(1 + mag)
    if name == "AutoContrast":
        return ImageOps.autocontrast(img)
    if name == "Equalize":
        return ImageOps.equalize(img)
    if name == "Invert":
        return ImageOps.invert(img)
    raise ValueError(name)


_MAG = {  # magnitude bins 0..9 -> value, as in Cubuk et al.'s reference implementation
    "ShearX": np.linspace(0, 0.3, 10), "ShearY": np.linspace(0, 0.3, 10),
    "TranslateX": np.linspace(0, 150 / 331, 10), "TranslateY": np.linspace(0, 150 / 331, 10),
    "Rotate": np.linspace(0, 30, 10), "Color": np.linspace(0.0, 0.9, 10),
    "Posterize": np.round(np.linspace(8, 4, 10)), "Solarize": np.linspace(256, 0, 10),
    "Contrast": np.linspace(0.0, 0.9, 10), "Sharpness": np.linspace(0.0, 0.9, 10),
    "Brightness": np.linspace(0.0, 0.9, 10), "AutoContrast": [0] * 10, "Equalize": [0] * 10, "Invert": [0] * 10,
}
_SIGNED = {"ShearX", "ShearY", "TranslateX", "TranslateY", "Rotate", "Color", "Contrast", "Sharpness", "Brightness"}

#: the 25 CIFAR-10 sub-policies of AutoAugment (Cubuk et al. 2019): (op, prob, magnitude bin) × 2
CIFAR10_POLICY = (
    (("Invert", 0.1, 7), ("Contrast", 0.2, 6)), (("Rotate", 0.7, 2), ("TranslateX", 0.3, 9)),
    (("Sharpness", 0.8, 1), ("Sharpness", 0.9, 3)), (("ShearY", 0.5, 8), ("TranslateY", 0.7, 9)),
    (("AutoContrast", 0.5, 8), ("Equalize", 0.9, 2)), (("ShearY", 0.2, 7), ("Posterize", 0.3, 7)),
    (("Color", 0.4, 3), ("Brightness", 0.6, 7)), (("Sharpness", 0.3, 9), ("Brightness", 0.7, 9)),
    (("Equalize", 0.6, 5), ("Equalize", 0.5, 1)), (("Contrast", 0.6, 7), ("Sharpness", 0.6, 5)),
    (("Color", 0.7, 7), ("TranslateX", 0.5, 8)), (("Equalize", 0.3, 7), ("AutoContrast", 0.4, 8)),
    (("TranslateY", 0.4, 3), ("Sharpness", 0.2, 6)), (("Brightness", 0.9, 6), ("Color", 0.2, 8)),
    (("Solarize", 0.5, 2), ("Invert", 0.0, 3)), (("Equalize", 0.2, 0), ("AutoContrast", 0.6, 0)),
    (("Equalize", 0.2, 8), ("Equalize", 0.6, 4)), (("Color", 0.9, 9), ("Equalize", 0.6, 6)),
    (("AutoContrast", 0.8, 4), ("Solarize", 0.2, 8)), (("Brightness", 0.1, 3), ("Color", 0.7, 0)),
    (("Solarize", 0.4, 5), ("AutoContrast", 0.9, 3)), (("TranslateY", 0.9, 9), ("TranslateY", 0.7, 9)),
    (("AutoContrast", 0.9, 2), ("Solarize", 0.8, 3)), (("Equalize", 0.8, 8), ("Invert", 0.1, 3)),
    (("TranslateY", 0.7, 9), ("AutoContrast", 0.9, 1)),
)


def autoaugment(img: Image.Image, rng: random.Random) -> Image.Image:
    """Apply one randomly chosen CIFAR-10 AutoAugment sub-policy (the paper enables AutoAugment)."""
    for name, prob, bin_ in rng.choice(CIFAR10_POLICY):
        if rng.random() < prob:
            mag = float(_MAG[name][bin_])
            if name in _SIGNED and rng.random() < 0.5:
                mag = -mag
            img = _op(img, name, mag)
    return img


CIFAR_MEAN = (0.4914, 0.4822, 0.4465)
CIFAR_STD = (0.2470, 0.2435, 0.2616)


def to_tensor(images: list[Image.Image]) -> Tensor:
    """PIL images -> normalised float tensor (B, 3, 32, 32)."""
    x = torch.from_numpy(np.stack([np.asarray(im, dtype=np.float32) / 255.0 for im in images])).permute(0, 3, 1, 2)
    mean = torch.tensor(CIFAR_MEAN).view(1, 3, 1, 1)
    std = torch.tensor(CIFAR_STD).view(1, 3, 1, 1)
    return (x - mean) / std


# ------------------------------------------------------------------ training with checkpoint / resume


@dataclass
class TrainConfig:
    """§3.3: AdamW β = (0.9, 0.999), weight decay 0.1, batch 128, ×0.2 at 70 % and 90 % of
    training, lr 1e-4 (5e-5 for plain post-norm), AutoAugment."""

    epochs: int = 150
    batch: int = 128
    lr: float | None = None          # None: 5e-5 for post-norm, 1e-4 otherwise (as the paper)
    weight_decay: float = 0.1
    augment: bool = True
    seed: int = 0
    sim_every: int = 1               # epochs between t_sim measurements


def _lr(variant: str, lr: float | None) -> float:
    return lr if lr is not None else (5e-5 if variant == "post-norm" else 1e-4)


def train(model: ViT, train_set: tuple[list, list], test_set: tuple[list, list], tc: TrainConfig,
          checkpoint: str | Path | None = None, stop_after_epochs: int | None = None,
          device: str | torch.device = "cpu") -> dict:
    """Train `model`, evaluating train/test loss and accuracy every epoch and t_sim per block every
    `sim_every` epochs on a fixed test batch. With `checkpoint`, the full state (model, optimiser,
    scheduler, RNG states, history) is saved after every epoch and training resumes from it, so a
    killed run continues to the same final numbers. `stop_after_epochs` simulates a kill."""
    torch.manual_seed(tc.seed)
    dev = torch.device(device)
    model.to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=_lr(model.cfg.variant, tc.lr), betas=(0.9, 0.999),
                            weight_decay=tc.weight_decay)
    milestones = [max(1, int(0.7 * tc.epochs)), max(1, int(0.9 * tc.epochs))]
    sched = torch.optim.lr_scheduler.MultiStepLR(opt, milestones=milestones, gamma=0.2)
    history: dict = {"epoch": [], "train_loss": [], "train_acc": [], "test_loss": [], "test_acc": [], "t_sim": {}}
    start = 0
    rng = random.Random(tc.seed)
    ckpt = Path(checkpoint) if checkpoint else None
    if ckpt is not None and ckpt.is_file():
        state = torch.load(ckpt, weights_only=False, map_location=dev)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        sched.load_state_dict(state["sched"])
        torch.set_rng_state(state["torch_rng"].cpu())
        rng.setstate(state["py_rng"])
        history, start = state["history"], state["epoch"]
    images, labels = train_set
    test_x, test_y = to_tensor(test_set[0]).to(dev), torch.tensor(test_set[1]).to(dev)
    probe = test_x[: min(64, len(test_x))]
    for epoch in range(start, tc.epochs):
        if stop_after_epochs is not None and epoch >= stop_after_epochs:
            break
        model.train()
        order = torch.randperm(len(images)).tolist()
        tot, correct, n = 0.0, 0, 0
        for i in progress(range(0, len(order), tc.batch), desc=f"epoch {epoch + 1}"):
            idx = order[i:i + tc.batch]
            batch = [autoaugment(images[j], rng) if tc.augment else images[j] for j in idx]
            x, y = to_tensor(batch).to(dev), torch.tensor([labels[j] for j in idx]).to(dev)
            logits = model(x)
            loss = nn.functional.cross_entropy(logits, y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            tot += float(loss.detach()) * len(idx)
            correct += int((logits.argmax(-1) == y).sum())
            n += len(idx)
        sched.step()
        test_loss, test_acc = evaluate(model, test_x, test_y, tc.batch)
        for k, v in (("epoch", epoch + 1), ("train_loss", tot / n), ("train_acc", correct / n),
                     ("test_loss", test_loss), ("test_acc", test_acc)):
            history[k].append(v)
        if (epoch + 1) % tc.sim_every == 0 or epoch + 1 == tc.epochs:
            model.eval()
            history["t_sim"][str(epoch + 1)] = model.block_similarity(probe).tolist()
        if ckpt is not None:
            ckpt.parent.mkdir(parents=True, exist_ok=True)
            torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "sched": sched.state_dict(),
                        "torch_rng": torch.get_rng_state(), "py_rng": rng.getstate(), "history": history,
                        "epoch": epoch + 1, "config": asdict(model.cfg), "train_config": asdict(tc)}, ckpt)
    return history


@torch.no_grad()
def evaluate(model: ViT, x: Tensor, y: Tensor, batch: int = 256) -> tuple[float, float]:
    model.eval()
    tot, correct = 0.0, 0
    for i in range(0, len(x), batch):
        logits = model(x[i:i + batch])
        tot += float(nn.functional.cross_entropy(logits, y[i:i + batch], reduction="sum"))
        correct += int((logits.argmax(-1) == y[i:i + batch]).sum())
    return tot / len(x), correct / len(x)


def run_variant(variant: str, depth: int, hidden: int, ffn: int, heads: int, patch: int, tau: float,
                deesc_place: str, tc: TrainConfig, train_set, test_set, checkpoint: str | Path | None = None,
                device: str | torch.device = "cpu") -> dict:
    """Build one variant (seeded by `tc.seed`), train it, and return its history with the wall time."""
    import time

    torch.manual_seed(tc.seed)
    model = ViT(ViTConfig(variant=variant, depth=depth, hidden=hidden, ffn=ffn, heads=heads, patch=patch, tau=tau,
                          deesc_place=deesc_place))
    t = time.perf_counter()
    hist = train(model, train_set, test_set, tc, checkpoint=checkpoint, device=device)
    hist["wall_time_s"] = time.perf_counter() - t
    hist["lr"] = _lr(variant, tc.lr)
    return hist


__all__ = ["VARIANTS", "ViTConfig", "ViT", "autoaugment", "CIFAR10_POLICY", "to_tensor", "TrainConfig", "train",
           "evaluate", "run_variant"]
