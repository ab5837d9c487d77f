"""Causal language-model training (Yu & Zhang §3.4, Figure 7) through the training core.

Text: WikiText-103 article text from the mirror, as UTF-8 bytes (a 256-symbol vocabulary: the output
layer costs nothing, so a CPU's time goes into the deep stack) or as BERT's uncased WordPiece tokens,
concatenated and cut into sequences of `seq_len + 1` tokens (the model reads `seq_len` and predicts
the next token at each). Training draws sequences from the
validation split; the held-out loss is measured on fixed sequences of the test split.

Optimiser as Transformer-XL's base WikiText-103 recipe, which Yu & Zhang kept "intact": Adam(W) with
learning rate 2.5e-4, cosine decay to zero over the run, no warm-up, and — as their run — no dropout
and no gradient clipping. A constant learning rate (`schedule="constant"`) makes every prefix of a run stand
for a shorter run, so one run gives the losses at every smaller budget.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import ClassVar

import torch
from torch import Tensor, nn

from ..core import measures as M
from ..core.causal_lm import CausalLM, LMConfig
from ..core.config import StoredNames
from ..machinery.runtime import seed_everything, stream_seed
from .loop import Task, adamw, decay_groups, fit


@dataclass(frozen=True)
class LMTrainConfig(StoredNames):
    STORED_UNLESS_DEFAULT: ClassVar[tuple[str, ...]] = ("schedule",)

    steps: int = 1000
    batch_size: int = 16
    lr: float = 2.5e-4
    warmup: int = 0                  # Transformer-XL base: no warm-up
    weight_decay: float = 0.0        # Transformer-XL uses plain Adam
    eval_every: int = 50
    seed: int = 0
    resume_every: int = 100
    #: the learning rate after the warm-up: "cosine" decays it to zero over `steps` (Transformer-XL's recipe);
    #: "constant" holds it, so that the first b steps of a run are a run of b steps (a budget curve from one run)
    schedule: str = "cosine"


SCHEDULES = ("cosine", "constant")
TOKENS = ("bytes", "wordpiece")


def vocabulary_size(tokens: str) -> int:
    if tokens == "bytes":
        return 256
    from .mlm import tokenizer

    return len(tokenizer())


def token_stream(split: str, tokens: str = "bytes") -> Tensor:
    """The split's article text (headings and blank lines dropped, paragraphs joined by newlines) as
    one stream of token ids: UTF-8 bytes, or BERT's uncased WordPiece ids."""
    from ..data import load_wikitext103

    if tokens not in TOKENS:
        raise ValueError(f"tokens {tokens!r}: use one of {TOKENS}")
    paras = [ln.strip() for ln in load_wikitext103(split).splitlines()
             if ln.strip() and not ln.strip().startswith("=")]
    if tokens == "bytes":
        return torch.frombuffer(bytearray("\n".join(paras).encode("utf-8")), dtype=torch.uint8).long()
    from .mlm import tokenised, tokenizer

    return torch.tensor(tokenised(tokenizer(), paras))


def sequences(stream: Tensor, length: int) -> Tensor:
    """Cut a token stream into (n, length) non-overlapping sequences."""
    n = len(stream) // length
    if n < 1:
        raise ValueError(f"a stream of {len(stream)} tokens holds no sequence of {length}")
    return stream[: n * length].view(n, length)


class LMTask(Task):
    """Next-token training as a `fit` task. Batch t = `batch` sequences drawn with a generator seeded
    by (seed, t); every `eval_every` steps the held-out loss and, on the first held-out batch, the
    average cosine similarity of the tokens after every block (t_sim, Yu & Zhang eq. 4)."""

    def __init__(self, cfg: LMConfig, tc: LMTrainConfig, train_seqs: Tensor, eval_seqs: Tensor) -> None:
        self.cfg, self.tc, self.train_seqs, self.eval_seqs = cfg, tc, train_seqs, eval_seqs
        self.name = f"causal LM {cfg.variant} depth {cfg.depth} seed {tc.seed}"
        self.steps_per_epoch, self.epochs, self.save_every = tc.steps, 1, tc.resume_every

    def settings(self) -> dict:
        return {"model": asdict(self.cfg), "train": self.tc.stored(), "train_sequences": len(self.train_seqs)}

    def build(self, device: torch.device):
        seed_everything(self.tc.seed)
        model = CausalLM(self.cfg).to(device)
        opt = adamw(decay_groups(model, self.tc.weight_decay), lr=self.tc.lr, betas=(0.9, 0.999))
        total, warm, schedule = self.tc.steps, self.tc.warmup, self.tc.schedule
        if schedule not in SCHEDULES:
            raise ValueError(f"schedule {schedule!r}: use one of {SCHEDULES}")

        def f(step: int) -> float:
            if step < warm:
                return (step + 1) / warm
            if schedule == "constant":
                return 1.0
            return 0.5 * (1 + math.cos(math.pi * (step - warm) / max(1, total - warm)))
        return model, opt, torch.optim.lr_scheduler.LambdaLR(opt, f)

    def batch(self, epoch: int, index: int, device: torch.device) -> Tensor:
        g = torch.Generator().manual_seed(stream_seed(self.tc.seed, "lm-batch", index))
        idx = torch.randint(len(self.train_seqs), (self.tc.batch_size,), generator=g)
        return self.train_seqs[idx].to(device)                                        # (B, seq_len + 1)

    def loss(self, model: nn.Module, batch: Tensor):
        loss = model.loss(batch)
        return loss, {"loss": loss.detach()}, len(batch)             # a tensor: `fit` reads it back in batches

    def new_history(self) -> dict:
        return {"loss": [], "eval_step": [], "eval_loss": [], "t_sim": []}

    @torch.no_grad()
    def evaluate(self, model: nn.Module, history: dict, step: int) -> None:
        was = model.training
        model.eval()
        dev = next(model.parameters()).device
        tot = 0.0
        for i in range(0, len(self.eval_seqs), self.tc.batch_size):
            chunk = self.eval_seqs[i:i + self.tc.batch_size]
            tot += float(model.loss(chunk.to(dev))) * len(chunk)
        _, states = model.hidden(self.eval_seqs[: self.tc.batch_size, :-1].to(dev), return_states=True)
        history["eval_step"].append(step)
        history["eval_loss"].append(tot / len(self.eval_seqs))
        history["t_sim"].append([float(M.t_sim(s.float()).mean()) for s in states])
        model.train(was)

    def before_training(self, model: nn.Module, history: dict) -> None:
        self.evaluate(model, history, 0)

    def hook_needs_model(self, step: int) -> bool:
        return step % self.tc.eval_every == 0 or step == self.tc.steps

    def after_step(self, model: nn.Module, step: int, stats: dict[str, float], history: dict) -> None:
        self.history = history
        history["loss"].append(stats["loss"])
        if step % self.tc.eval_every == 0 or step == self.tc.steps:
            self.evaluate(model, history, step)


def train_lm(cfg: LMConfig, tc: LMTrainConfig, train_seqs: Tensor, eval_seqs: Tensor,
             checkpoint: str | Path | None = None, device: str | torch.device = "cpu", precision: str = "fp32",
             stop_after: int | None = None) -> dict:
    """Train one variant to `tc.steps` (resuming from `checkpoint` when present). A loss that turns
    non-finite ends the run early: the history then has `diverged_at` (the failure of a deep
    post-norm stack is a result, not an error)."""
    task = LMTask(cfg, tc, train_seqs, eval_seqs)
    try:
        _, history = fit(task, checkpoint=checkpoint, device=device, precision=precision,
                         stop_after_steps=stop_after)
    except FloatingPointError as e:
        history = {**getattr(task, "history", task.new_history()), "diverged": str(e), "done": True}
        # the loss of the failed step, as the history's last value
        history["loss"] = [*history["loss"], float("nan")]
    history["settings"] = task.settings()
    history.setdefault("diverged", None)
    return history


__all__ = ["SCHEDULES", "TOKENS", "LMTrainConfig", "LMTask", "vocabulary_size", "token_stream", "sequences", "train_lm"]
