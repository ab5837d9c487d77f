"""The book's one training loop. GLUE fine-tuning (`train.glue`), ViT training (`train.vit`) and MLM
pretraining (`train.mlm`) are small `Task` adapters around `fit`.

What `fit` guarantees, for every task:

* **Deterministic data.** A task's batch `i` of epoch `e` is a pure function of (run seed, e, i): the
  order of examples and any augmentation or masking are drawn from generators seeded with
  `machinery.runtime.stream_seed`. So a run resumed in the middle of an epoch draws exactly the batches an
  uninterrupted run draws; only dropout and initialisation use torch's global RNG, whose state the
  checkpoint carries.
* **One checkpoint format** (`train.checkpoint`): model, optimiser, schedule, history, global step,
  the task's settings and every RNG state, written atomically at the end of every epoch and every
  `task.save_every` steps. Resuming with other settings raises.
* **Precision.** `precision="bf16"` runs forward and loss under `torch.autocast` (CPU or CUDA) with
  fp32 weights and optimiser; `"fp32"` (default) runs plain. A chapter's `precision="auto"` resolves to
  bf16 only where the device computes it natively (`machinery.runtime.native_bf16`); `fit` warns when asked
  for bf16 on a CPU that would emulate it.
* **One device.** `task.build` puts the model on `device` and `task.batch` its batches; the tasks draw
  batches and masks from CPU generators and move the result, so a GPU run sees the batches a CPU run
  sees (only initialisation and dropout use the device's own RNG). There is no multi-GPU path (no
  accelerate / DDP). `tests/test_device.py` runs every task's steps, checkpoint and resume on a
  placeholder device (what that does and does not verify is said there).
* **Compiled, sync-free steps** (`compile=`, on by default on CUDA, off elsewhere). The model's repeated
  blocks (every child of a `ModuleList` of one class) are compiled one by one with `torch.compile`, so
  blocks of one shape share one compiled graph and an 80-block model compiles in the time of one block;
  a model without repeated blocks is compiled whole. The step then reads nothing back from the device:
  statistics (the loss, the tasks' per-step numbers, which they return as tensors) are collected on the
  device and read in one transfer every `sync_every` steps, at an epoch's end, at a checkpoint, and
  before a step whose hook needs the model at that step (`Task.hook_needs_model`); a non-finite loss
  raises at the step it occurred, as before. Compilation changes results only by round-off (fused
  kernels); the parameters' names, the checkpoints and the histories are the same. With compilation off
  `fit` reads each step back as it ends (`sync_every=1`), the eager path it has always run.
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Iterable
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from ..machinery.runtime import native_bf16, progress
from .checkpoint import load_checkpoint, save_checkpoint

PRECISIONS = ("fp32", "bf16")


class Task:
    """What `fit` needs from an experiment. Subclasses set the attributes and override the methods
    marked below; the hooks default to doing nothing."""

    #: a label for progress bars
    name: str = "task"
    #: optimiser steps per epoch, and epochs (MLM pretraining: one epoch of `steps` steps)
    steps_per_epoch: int = 1
    epochs: int = 1
    #: also checkpoint every this many steps (None: at epoch ends only)
    save_every: int | None = None
    #: clip the global gradient norm to this value (None: no clipping)
    clip_norm: float | None = None
    #: whether `fit(compile=None)` compiles this task's model on CUDA (False: a model whose blocks keep
    #: Python state between calls, which compiled code would guard on or recompile for)
    compilable: bool = True

    def settings(self) -> dict[str, Any]:
        """Every setting of the run (checked against a checkpoint before resuming). Override."""
        raise NotImplementedError

    def build(self, device: torch.device) -> tuple[nn.Module, torch.optim.Optimizer, Any]:
        """(model on `device`, optimiser, scheduler stepped once per step or None). Override."""
        raise NotImplementedError

    def batch(self, epoch: int, index: int, device: torch.device) -> Any:
        """Batch `index` of epoch `epoch`, on `device`: a pure function of the run seed, epoch, index. Override."""
        raise NotImplementedError

    def loss(self, model: nn.Module, batch: Any) -> tuple[Tensor, dict[str, float], int]:
        """(loss to minimise, per-example statistics to average over the epoch, examples in the batch). Override."""
        raise NotImplementedError

    def new_history(self) -> dict[str, Any]:
        """The empty history this task fills in its hooks."""
        return {}

    def after_step(self, model: nn.Module, step: int, stats: dict[str, float], history: dict) -> None:
        """Called after optimiser step `step` (1-based) with that step's statistics."""

    def after_epoch(self, model: nn.Module, epoch: int, means: dict[str, float], history: dict) -> None:
        """Called after epoch `epoch` (1-based) with the epoch's example-weighted means of the statistics."""

    def before_training(self, model: nn.Module, history: dict) -> None:
        """Called once before the first step of a fresh (not resumed) run."""

    def hook_needs_model(self, step: int) -> bool:
        """Whether `after_step(step)` reads the model (evaluates, saves weights), so that a sync-free `fit`
        must run it before step `step + 1`. Default: every step (a task that only records its statistics
        overrides this)."""
        return True


def compile_blocks(model: nn.Module, **options: Any) -> int:
    """Compile `model` in place with `torch.compile`: each child of every `ModuleList` whose children are
    two or more modules of one class (the repeated blocks: one compiled graph serves every block of a
    shape), or the whole model when it has none. Parameter names and `state_dict` are unchanged. Returns
    how many modules were compiled."""
    lists: list[nn.ModuleList] = []
    prefixes: list[str] = []
    for name, m in model.named_modules():                     # outermost lists only (parents come first)
        if (isinstance(m, nn.ModuleList) and len(m) >= 2 and len({type(b) for b in m}) == 1
                and not any(name.startswith(p) for p in prefixes)):
            lists.append(m)
            prefixes.append(name + ".")
    if not lists:
        model.compile(**options)
        return 1
    for blocks in lists:
        for b in blocks:
            b.compile(**options)
    return sum(len(b) for b in lists)


def _resolve_compile(compile: bool | None, dev: torch.device) -> bool:
    return dev.type == "cuda" if compile is None else bool(compile)


def autocast(device: torch.device, precision: str):
    """The autocast context for `precision` on `device` (a no-op for fp32)."""
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")
    if precision == "fp32":
        return nullcontext()
    return torch.autocast(device_type=device.type, dtype=torch.bfloat16)


def optimiser_step(task: Task, model: nn.Module, batch: Any, opt, sched, params, dev: torch.device,
                   precision: str) -> tuple[Tensor, Any, Any]:
    """One optimiser step on `batch`: the task's loss under `precision`, backward, gradient clipping at the task's
    norm, the optimiser and scheduler steps. Returns the task's (loss, statistics, count), still on the device."""
    with autocast(dev, precision):
        loss, stats, n = task.loss(model, batch)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    if task.clip_norm is not None:
        torch.nn.utils.clip_grad_norm_(params, task.clip_norm)
    opt.step()
    if sched is not None:
        sched.step()
    return loss, stats, n


def fit(task: Task, checkpoint: str | Path | None = None, device: str | torch.device = "cpu",
        precision: str = "fp32", stop_after_steps: int | None = None, progress_desc: str | None = None,
        compile: bool | None = None, sync_every: int | None = None) -> tuple[nn.Module, dict[str, Any]]:
    """Train `task` to the end (or to `stop_after_steps` steps: a simulated kill) and return
    (model, history). With `checkpoint`, a run that finds a checkpoint there resumes from it, and one
    that finds a finished run returns at once. History keys besides the task's own: `step`,
    `wall_time_s` (training time summed over resumed segments), `done`, `precision`.

    `compile`: compile the repeated blocks (`compile_blocks`); None (default): on CUDA, for a
    `task.compilable` task. `sync_every`:
    read the step statistics back every this many steps; None (default): 50 when compiled, else 1 (every
    step). Neither is a setting of the run: a run may resume with them changed."""
    dev = torch.device(device)
    compiled = _resolve_compile(compile, dev) and (compile is not None or task.compilable)
    every = max(1, int(sync_every if sync_every is not None else (50 if compiled else 1)))
    own_hook = type(task).after_step is not Task.after_step
    _warn_if_emulated(precision, dev)
    model, opt, sched, history, settings = _start(task, checkpoint, dev, precision)
    if history["done"]:
        return model, history
    if compiled:
        compile_blocks(model)

    def save() -> None:
        if checkpoint is not None:
            save_checkpoint(checkpoint, model=model.state_dict(), opt=opt.state_dict(),
                            sched=sched.state_dict() if sched is not None else None, history=history,
                            settings=settings)

    total = task.epochs * task.steps_per_epoch
    step = history["step"]
    params = [p for p in model.parameters() if p.requires_grad]
    book = _StepBook(task, model, history)
    bar = progress(range(step, total), desc=progress_desc or task.name, total=total - step)
    for _ in _iterate(bar):
        if stop_after_steps is not None and step >= stop_after_steps:
            book.flush()
            history["_epoch_sums"] = book.sums
            return model, history
        epoch, index = divmod(step, task.steps_per_epoch)
        model.train()
        batch = task.batch(epoch, index, dev)
        loss, stats, n = optimiser_step(task, model, batch, opt, sched, params, dev, precision)
        step += 1
        book.pending.append((step, loss.detach(), stats, n))
        epoch_end = step % task.steps_per_epoch == 0
        saving = epoch_end or step == total or bool(task.save_every and step % task.save_every == 0)
        if len(book.pending) >= every or saving or (own_hook and task.hook_needs_model(step)):
            book.flush()
        if epoch_end:
            task.after_epoch(model, step // task.steps_per_epoch, book.epoch_means(), history)
            history["wall_time_s"] = book.wall_time()
        history["done"] = step == total
        if saving:
            history["_epoch_sums"] = book.sums
            save()
            history.pop("_epoch_sums")
    book.flush()
    history["done"] = True
    return model, history


def _warn_if_emulated(precision: str, dev: torch.device) -> None:
    """Warn where bf16 autocast would be emulated on this CPU (one to two orders of magnitude slower than fp32)."""
    if precision == "bf16" and dev.type == "cpu" and not native_bf16(dev):
        warnings.warn("bf16 autocast on a CPU without native bf16 (AVX-512-BF16 or AMX) is emulated, and its matmuls "
                      "run one to two orders of magnitude slower than fp32: choose precision='fp32' (or 'auto')",
                      RuntimeWarning, stacklevel=3)


def _start(task: Task, checkpoint: str | Path | None, dev: torch.device, precision: str):
    """The task's model, optimiser, scheduler, history and settings: fresh, or restored from `checkpoint` (with
    every RNG state), which must have been written with the same settings."""
    model, opt, sched = task.build(dev)
    history: dict[str, Any] = {**task.new_history(), "step": 0, "wall_time_s": 0.0, "done": False,
                               "precision": precision}
    settings = {**task.settings(), "precision": precision}
    state = load_checkpoint(checkpoint, map_location="cpu")                     # restores every RNG state
    if state is not None:
        if state["settings"] != settings:
            raise ValueError(f"checkpoint {checkpoint} was written with other settings; delete it or change the "
                             f"path:\n  saved {state['settings']}\n  now   {settings}")
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        if sched is not None:
            sched.load_state_dict(state["sched"])
        history = state["history"]
    else:
        task.before_training(model, history)
    return model, opt, sched, history, settings


class _StepBook:
    """The steps whose statistics are still on the device, and the epoch's sums they are booked into: `flush` reads
    them back (one transfer) and books them in order, as the eager loop books each step (finiteness, epoch sums,
    the task's step hook); the wall time counts from its creation, on top of the resumed segments'."""

    def __init__(self, task: Task, model: nn.Module, history: dict[str, Any]):
        self.task, self.model, self.history = task, model, history
        self.t0, self.wall0 = time.perf_counter(), history["wall_time_s"]
        self.sums: dict[str, float] = history.pop("_epoch_sums", {})
        self.pending: list[tuple[int, Tensor, dict[str, Any], int]] = []

    def wall_time(self) -> float:
        return self.wall0 + time.perf_counter() - self.t0

    def flush(self) -> None:
        if not self.pending:
            return
        steps = list(self.pending)
        self.pending.clear()
        values = _to_host([(loss, stats) for _, loss, stats, _ in steps])
        for (s, _, _, n), (value, stats) in zip(steps, values, strict=True):
            if not math.isfinite(value):
                raise FloatingPointError(f"{self.task.name}: loss became {value} at step {s}")
            for k, v in stats.items():
                self.sums[k] = self.sums.get(k, 0.0) + v * n
            self.sums["_n"] = self.sums.get("_n", 0.0) + n
            self.history["step"] = s
            self.history["wall_time_s"] = self.wall_time()
            self.task.after_step(self.model, s, stats, self.history)

    def epoch_means(self) -> dict[str, float]:
        """The epoch's statistics averaged over its examples; the sums start again."""
        n_ex = self.sums.pop("_n", 1.0)
        means = {k: v / n_ex for k, v in self.sums.items()}
        self.sums = {}
        return means


def _to_host(items: list[tuple[Tensor, dict[str, Any]]]) -> list[tuple[float, dict[str, float]]]:
    """[(loss, stats)] with tensors → floats, reading every tensor back in one transfer."""
    tensors = [t for loss, stats in items for t in (loss, *stats.values()) if isinstance(t, Tensor)]
    host = torch.stack([t.detach().reshape(()).to(torch.float64) for t in tensors]).tolist() if tensors else []
    it = iter(host)
    out = []
    for loss, stats in items:
        value = next(it) if isinstance(loss, Tensor) else float(loss)
        out.append((value, {k: next(it) if isinstance(v, Tensor) else v for k, v in stats.items()}))
    return out


def _iterate(bar: Iterable) -> Iterable:
    yield from bar


def adamw(params: Any, **kw: Any) -> torch.optim.AdamW:
    """AdamW with the fused kernel (one pass over every parameter; CPU and CUDA, torch >= 2.4): the
    same update as the default implementation up to rounding, several times cheaper per step."""
    return torch.optim.AdamW(params, fused=True, **kw)


def decay_groups(model: nn.Module, weight_decay: float) -> list[dict[str, Any]]:
    """AdamW parameter groups: decay on matrices, none on biases and norm weights (BERT's recipe)."""
    decay = [p for n, p in model.named_parameters() if p.requires_grad and p.ndim >= 2 and "LayerNorm" not in n]
    ids = {id(p) for p in decay}
    rest = [p for p in model.parameters() if p.requires_grad and id(p) not in ids]
    return [{"params": decay, "weight_decay": weight_decay}, {"params": rest, "weight_decay": 0.0}]


__all__ = ["PRECISIONS", "Task", "fit", "optimiser_step", "compile_blocks", "autocast", "adamw", "decay_groups"]
