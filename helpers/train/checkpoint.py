"""Training plumbing shared by the book's training loops (GLUE fine-tuning, MLM pretraining):
atomic checkpoints that carry every RNG state, so that a run killed between two checkpoints and
resumed ends with the same numbers as one that was never interrupted."""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Any

import numpy as np
import torch


def rng_state() -> dict[str, Any]:
    """Every random state a training loop may draw from: python, numpy, torch CPU (and CUDA)."""
    state = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    """Restore what `rng_state` captured."""
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"].cpu())
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all([s.cpu() for s in state["cuda"]])


def save_checkpoint(path: str | os.PathLike, **state: Any) -> Path:
    """Write `state` (state dicts, history, counters) plus the RNG states to `path` atomically:
    a kill during the write leaves the previous checkpoint intact."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    torch.save({**state, "rng": rng_state()}, tmp)
    os.replace(tmp, path)
    return path


def load_checkpoint(path: str | os.PathLike | None, map_location: str | torch.device = "cpu",
                    restore_rng: bool = True) -> dict[str, Any] | None:
    """The checkpoint at `path` (RNG states restored), or None when there is none."""
    if path is None or not Path(path).is_file():
        return None
    state = torch.load(path, weights_only=False, map_location=map_location)
    if restore_rng and "rng" in state:
        set_rng_state(state["rng"])
    return state


__all__ = ["rng_state", "set_rng_state", "save_checkpoint", "load_checkpoint"]
