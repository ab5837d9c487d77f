"""ViT training on CIFAR-10 as Yu & Zhang §3.3 (AdamW, step decay, AutoAugment) through the training core."""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from torch import Tensor, nn

from ..book.runtime import progress
from ..core.vit import ViT, ViTConfig
from ..data.augment import autoaugment, to_tensor


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
