"""ViT training on CIFAR-10 as Yu & Zhang §3.3 (AdamW, step decay, AutoAugment) through the training core."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import torch
from torch import Tensor, nn

from ..core.config import StoredNames
from ..core.vit import ViT, ViTConfig
from ..data.augment import autoaugment, to_tensor
from ..machinery.runtime import stream_seed
from .loop import Task, adamw, fit


@dataclass
class TrainConfig(StoredNames):
    """§3.3: AdamW β = (0.9, 0.999), weight decay 0.1, batch 128, ×0.2 at 70 % and 90 % of
    training, lr 1e-4 (5e-5 for plain post-norm), AutoAugment."""

    #: the committed runs were stored before `schedule` existed (all under §3.3's step decay)
    STORED_UNLESS_DEFAULT: ClassVar[tuple[str, ...]] = ("schedule",)

    epochs: int = 150
    batch_size: int = 128
    lr: float | None = None          # None: 5e-5 for post-norm, 1e-4 otherwise (as the paper)
    weight_decay: float = 0.1
    augment: bool = True
    seed: int = 0
    sim_every: int = 1               # epochs between t_sim measurements
    #: "step": §3.3's step decay (×0.2 at 70 % and 90 % of training); "constant": the base rate throughout,
    #: so that the state after any epoch is the end of a shorter run (the budget curve)
    schedule: str = "step"


#: §3.3's learning rates: 1e-4 for pre-norm and de-escalated post-norm, half that for plain post-norm
LR, POST_NORM_LR = 1e-4, 5e-5
#: §3.3's step decay: the rate is multiplied by `DECAY` at each of these fractions of training
DECAY_AT, DECAY = (0.7, 0.9), 0.2


SCHEDULES = ("step", "constant")


def lr_milestones(epochs: int, steps_per_epoch: int, schedule: str = "step") -> list[int]:
    """The optimiser steps after which a run of `epochs` multiplies its rate by `DECAY`: each fraction of
    `DECAY_AT` of the epochs, rounded down to whole epochs (at least one), in steps; none under a constant rate."""
    if schedule not in SCHEDULES:
        raise ValueError(f"schedule must be one of {SCHEDULES}, not {schedule!r}")
    return [] if schedule == "constant" else [max(1, int(f * epochs)) * steps_per_epoch for f in DECAY_AT]


def lr_factors(epochs: int, steps_per_epoch: int, schedule: str = "step") -> list[float]:
    """The rate of every optimiser step of a run of `epochs`, as a multiple of its base rate: step s (1-based)
    runs after s − 1 scheduler steps, at `DECAY` to the number of milestones among them (`MultiStepLR`)."""
    ms = lr_milestones(epochs, steps_per_epoch, schedule)
    return [DECAY ** sum(m <= s for m in ms) for s in range(epochs * steps_per_epoch)]


def model_variant(variant: str) -> str:
    """The model behind a chapter variant (`post-norm-full-lr`, post-norm at the others' rate, is the
    post-norm model)."""
    return "post-norm" if variant == "post-norm-full-lr" else variant


def variant_lr(variant: str, lr: float | None = None) -> float:
    """The one learning-rate rule: `lr` when given; otherwise §3.3's, 5e-5 for plain post-norm and 1e-4 for
    every other variant (`post-norm-full-lr` included: post-norm at the others' rate)."""
    return lr if lr is not None else (POST_NORM_LR if variant == "post-norm" else LR)



def param_groups(model: nn.Module, lr: float) -> list[dict]:
    """AdamW groups: every parameter at `lr`, but those the model names in `lr_scales` (`core.vit.FFN_STEPS`
    blocks) at `lr` times their multiplier, one group per multiplier (the schedule scales every group alike)."""
    scales: dict[str, float] = getattr(model, "lr_scales", {})
    named = dict(model.named_parameters())
    missing = set(scales) - set(named)
    if missing:
        raise ValueError(f"lr_scales names parameters the model lacks: {sorted(missing)[:3]}")
    groups = [{"params": [p for n, p in named.items() if n not in scales], "lr": lr}]
    for f in sorted(set(scales.values())):
        groups.append({"params": [named[n] for n, s in scales.items() if s == f], "lr": lr * f})
    return groups


class ViTTask(Task):
    """ViT training as a `fit` task: a seeded permutation per epoch, AutoAugment drawn from a generator
    seeded per step, cross-entropy; test loss/accuracy every epoch and t_sim per block every
    `sim_every` epochs on a fixed batch of test images."""

    def __init__(self, model: ViT, train_set: tuple[list, list], test_set: tuple[list, list], tc: TrainConfig) -> None:
        self.model, self.tc = model, tc
        self.images, self.labels = train_set
        self.test_x, self.test_y = to_tensor(test_set[0]), torch.tensor(test_set[1])
        self.name = f"ViT {model.cfg.variant}"
        self.epochs = tc.epochs
        self.steps_per_epoch = math.ceil(len(self.images) / tc.batch_size)
        self._order: tuple[int, list[int]] | None = None

    def settings(self) -> dict:
        return {"model": self.model.cfg.stored(), "train": self.tc.stored(), "train_images": len(self.images)}

    def build(self, device: torch.device):
        model = self.model.to(device)
        opt = adamw(param_groups(model, variant_lr(model.cfg.variant, self.tc.lr)), betas=(0.9, 0.999),
                    weight_decay=self.tc.weight_decay)
        milestones = lr_milestones(self.tc.epochs, self.steps_per_epoch, self.tc.schedule)
        return model, opt, torch.optim.lr_scheduler.MultiStepLR(opt, milestones=milestones, gamma=DECAY)

    def batch(self, epoch: int, index: int, device: torch.device) -> tuple[Tensor, Tensor]:
        if self._order is None or self._order[0] != epoch:
            g = torch.Generator().manual_seed(stream_seed(self.tc.seed, "vit-order", epoch))
            self._order = (epoch, torch.randperm(len(self.images), generator=g).tolist())
        idx = self._order[1][index * self.tc.batch_size:(index + 1) * self.tc.batch_size]
        rng = random.Random(stream_seed(self.tc.seed, "vit-augment", epoch * self.steps_per_epoch + index))
        imgs = [autoaugment(self.images[j], rng) if self.tc.augment else self.images[j] for j in idx]
        return to_tensor(imgs).to(device), torch.tensor([self.labels[j] for j in idx]).to(device)

    def loss(self, model: nn.Module, batch: tuple[Tensor, Tensor]):
        x, y = batch
        logits = model(x)
        loss = nn.functional.cross_entropy(logits.float(), y)
        acc = (logits.argmax(-1) == y).float().mean()            # tensors: `fit` reads them back in batches
        return loss, {"train_loss": loss.detach(), "train_acc": acc}, len(y)

    def new_history(self) -> dict:
        # under a constant rate the training loss of every step too (`loss`), so that a budget's final loss is read
        # over the same share of its own steps at every budget (the budget curve)
        steps = {"loss": []} if self.tc.schedule == "constant" else {}
        return {"epoch": [], "train_loss": [], "train_acc": [], "test_loss": [], "test_acc": [], "t_sim": {}, **steps}

    def hook_needs_model(self, step: int) -> bool:
        return False                                           # `after_step` only books the step's loss

    def after_step(self, model: nn.Module, step: int, stats: dict[str, float], history: dict) -> None:
        if "loss" in history:
            history["loss"].append(round(float(stats["train_loss"]), 5))

    def after_epoch(self, model: nn.Module, epoch: int, means: dict[str, float], history: dict) -> None:
        dev = next(model.parameters()).device
        test_loss, test_acc = evaluate_images(model, self.test_x.to(dev), self.test_y.to(dev), self.tc.batch_size)
        for k, v in (("epoch", epoch), ("train_loss", means["train_loss"]), ("train_acc", means["train_acc"]),
                     ("test_loss", test_loss), ("test_acc", test_acc)):
            history[k].append(v)
        if epoch % self.tc.sim_every == 0 or epoch == self.tc.epochs:
            model.eval()
            probe = self.test_x[: min(64, len(self.test_x))].to(dev)
            history["t_sim"][str(epoch)] = model.block_similarity(probe).tolist()
            before = model.similarity_before_deescalation(probe)
            if before is not None:
                history.setdefault("t_sim_before_deescalation", {})[str(epoch)] = before.tolist()


def train(model: ViT, train_set: tuple[list, list], test_set: tuple[list, list], tc: TrainConfig,
          checkpoint: str | Path | None = None, stop_after_epochs: int | None = None,
          device: str | torch.device = "cpu", precision: str = "fp32") -> dict:
    """Train `model` through `fit`, evaluating train/test loss and accuracy every epoch and t_sim per
    block every `sim_every` epochs. With `checkpoint`, the full state is saved after every epoch and
    training resumes from it; `stop_after_epochs` simulates a kill."""
    task = ViTTask(model, train_set, test_set, tc)
    stop = None if stop_after_epochs is None else stop_after_epochs * task.steps_per_epoch
    _, history = fit(task, checkpoint=checkpoint, device=device, precision=precision, stop_after_steps=stop)
    return history


@torch.no_grad()
def evaluate_images(model: ViT, x: Tensor, y: Tensor, batch: int = 256) -> tuple[float, float]:
    model.eval()
    tot, correct = 0.0, 0
    for i in range(0, len(x), batch):
        logits = model(x[i:i + batch])
        tot += float(nn.functional.cross_entropy(logits, y[i:i + batch], reduction="sum"))
        correct += int((logits.argmax(-1) == y[i:i + batch]).sum())
    return tot / len(x), correct / len(x)


def run_variant(p, depth: int, variant: str, seed: int, train_set, test_set,
                checkpoint: str | Path | None = None, device: str | torch.device = "cpu") -> dict:
    """Build one run of a chapter grid and train it: `p` is the chapter's Params (its widths, patch, τ,
    de-escalation place, block, epochs, batch, learning rate, augmentation, t_sim cadence, precision),
    `variant` a chapter variant (`post-norm-full-lr` is the post-norm model at the others' rate), `seed`
    the run seed (it seeds the initial weights, so every variant of a seed starts from the same draws, and
    the data order and augmentation). Returns the history with the wall time and the learning rate."""
    import time

    # the config records the rate only where it is not the model's own rule (post-norm-full-lr, or `p.lr`),
    # as the runs' checkpoints do
    tc = TrainConfig(epochs=p.epochs, batch_size=p.batch_size,
                     lr=p.lr if variant != "post-norm-full-lr" else p.lr or LR,
                     augment=p.augment, seed=seed, sim_every=p.sim_every, schedule=p.schedule)
    torch.manual_seed(seed)
    model = ViT(ViTConfig(variant=model_variant(variant), depth=depth, d_model=p.d_model, d_ff=p.d_ff,
                          n_heads=p.n_heads, patch=p.patch, tau=p.tau, deesc_place=p.deesc_place, block=p.block))
    t = time.perf_counter()
    hist = train(model, train_set, test_set, tc, checkpoint=checkpoint, device=device, precision=p.precision)
    hist["wall_time_s"] = time.perf_counter() - t
    hist["lr"] = variant_lr(model_variant(variant), tc.lr)
    return hist
