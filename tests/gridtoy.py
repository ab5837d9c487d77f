"""A toy chapter for the grid runner's tests: a grid of variant × seed "training runs" — a small linear
model fitted by SGD, deterministic, resumable from a checkpoint, optionally slow (`step_s`) so a test can kill
it mid-run. Not registered as a chapter of the book."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import torch

from helpers.machinery import results
from helpers.machinery.params import CHAPTERS, ChapterParams
from helpers.machinery.runtime import run_seeds


@dataclass(frozen=True)
class Params(ChapterParams):
    variants: tuple[str, ...] = ("a", "b")
    seeds: int = 2
    steps: int = 30
    step_s: float = 0.0
    checkpoint_every: int = 5

    CHAPTER: ClassVar[str] = "gridtoy"
    CACHE_EXCLUDE: ClassVar[tuple[str, ...]] = ("step_s", "checkpoint_every")
    PRESETS: ClassVar[dict] = {"ci": {}, "book": {}, "paper": {}}


CHAPTERS.pop("gridtoy", None)          # a test fixture, not a chapter of the book


def train(p: Params, variant: str, seed: int, checkpoint: Path | None) -> dict:
    g = torch.Generator().manual_seed(1000 * seed + (variant == "b"))
    x = torch.randn(64, 8, generator=g)
    y = x @ torch.randn(8, 1, generator=g) + 0.1 * torch.randn(64, 1, generator=g)
    w = torch.zeros(8, 1)
    start, losses = 0, []
    if checkpoint is not None and checkpoint.is_file():
        state = torch.load(checkpoint)
        start, w, losses = state["step"], state["w"], state["losses"]
        g.set_state(state["rng"])
    lr = 0.05 if variant == "a" else 0.02
    for step in range(start, p.steps):
        idx = torch.randint(0, 64, (16,), generator=g)
        err = x[idx] @ w - y[idx]
        losses.append(float((err ** 2).mean()))
        w = w - lr * 2 * x[idx].T @ err / 16
        if p.step_s:
            time.sleep(p.step_s)
        if checkpoint is not None and (step + 1) % p.checkpoint_every == 0:
            tmp = checkpoint.with_suffix(".tmp")
            torch.save({"step": step + 1, "w": w, "losses": losses, "rng": g.get_state()}, tmp)
            tmp.replace(checkpoint)
    return {"loss": losses, "final": losses[-1]}


def runs(p: Params):
    return results.variant_specs(p, p.variants, run_seeds(p.seed, p.seeds), _trainer(p))


def _trainer(p: Params):
    return _Train(p)


@dataclass(frozen=True)
class _Train:
    p: Params

    def __call__(self, variant: str, seed: int, checkpoint: Path | None) -> dict:
        return train(self.p, variant, seed, checkpoint)


def run(p: Params) -> dict:
    hist, hits = results.variant_runs(p, p.variants, run_seeds(p.seed, p.seeds), _trainer(p))
    return {"histories": hist, "hits": hits}
