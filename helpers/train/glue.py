"""Supervised GLUE fine-tuning with a trainable SoftDecay layer (Yan et al. §5.2, App. B, App. D).

What the paper says and what we do:

* *Where.* "We apply SoftDecay to the output of the last layer of a PTLM … before layer
  normalisation" (App. B) with the layer of eq. (1), x^L = LayerNorm(Φ(v^L) + x^{L−1}). So the last
  layer becomes x^L = LayerNorm(SoftDecay(Φ(v^L) + x^{L−1})): the residual is added once, and the
  baseline is the unmodified model (the authors' code adds the residual twice and also inserts a
  fresh LayerNorm and dropout into its "baseline").
* *Padding.* Algorithm 1 runs on each sentence's real tokens only (`softdecay_transform` with the
  attention mask), so the result does not depend on how a batch is padded.
* *α.* Trainable, in its own optimiser group with its own learning rate (2e-3; the model 2e-5),
  initial value from [−0.2, −0.5, −0.8] (App. B). α is kept inside [−0.999, −0.001] during
  training: eq. (2) is undefined at α = 0 and its argument may vanish at α ≤ −1.
* *Every architecture.* The final LayerNorm of the last layer is found for BERT, RoBERTa, ALBERT
  (whose layers are shared: SoftDecay is applied only on the last of its calls) and DistilBERT.
  The backward is the Daleckii–Krein one of `helpers.softdecay` — finite at repeated and zero
  singular values, where the SVD backward (the authors' "SVD error" on RoBERTa) is not.
* *ExpDecay* (App. D.1): γ_e Σ_k (λ_k − c1·e^{−c2·k^γ}) on the singular values λ_k of each
  example's last-layer output, c1 = c2 = 1, γ = 2, γ_e = 1e-4, as printed (the constant prior
  term does not change the gradient, so the printed form is a nuclear-norm penalty); `squared=True`
  gives Wang et al. (2020)'s squared-distance form.

Training goes through the book's one loop (`helpers.train.loop.fit`) on one device (CPU or a GPU):
batch 32, max length 128, 3 epochs, linear schedule, a checkpoint after every epoch, and resume.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from ..core.config import StoredNames
from ..core.softdecay import expdecay_penalty
from ..data.glue import TASK_METRICS, Encoded, collate, encode_task, glue_metrics, length_batches
from ..hf import models as Mo
from ..hf.softdecay_layer import find_softdecay, insert_softdecay
from ..machinery.runtime import choose_device, stream_seed
from .loop import Task, adamw, fit

VARIANTS = ("baseline", "softdecay", "expdecay")


@dataclass
class FinetuneConfig(StoredNames):
    """One fine-tuning run: batch 32, max length 128, 3 epochs and a linear schedule from the authors'
    `run_glue_no_trainer.sh` (App. B says only "default parameters"); learning rates 2e-5 for the model and
    2e-3 for α and the initial α from [−0.2, −0.5, −0.8] (App. B)."""

    task: str = "RTE"
    model: str = "all-MiniLM-L6-v2"
    variant: str = "baseline"
    alpha: float = -0.5
    lr: float = 2e-5
    alpha_lr: float = 2e-3
    epochs: int = 3
    batch_size: int = 32
    max_length: int = 128
    warmup_ratio: float = 0.0
    weight_decay: float = 0.0
    train_examples: int = 0              # 0 = the whole training split
    eval_examples: int = 0               # 0 = the whole validation split
    seed: int = 0
    expdecay: dict[str, float] = field(default_factory=lambda: dict(c1=1.0, c2=1.0, gamma=2.0, gamma_e=1e-4))

    def __post_init__(self) -> None:
        if self.task not in TASK_METRICS:
            raise ValueError(f"task {self.task!r}: one of {sorted(TASK_METRICS)}")
        if self.variant not in VARIANTS:
            raise ValueError(f"variant {self.variant!r}: one of {VARIANTS}")
        if not -1.0 <= self.alpha < 0:
            raise ValueError(f"alpha must lie in [-1, 0), got {self.alpha}")
        for name in ("lr", "alpha_lr", "epochs", "batch_size", "max_length"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)}")


def load_classifier(cfg: FinetuneConfig, num_labels: int,
                    model_factory: Callable[[], tuple[nn.Module, Any]] | None = None):
    """The pretrained model with a fresh classification head (seeded by cfg.seed), and SoftDecay
    inserted for the `softdecay` variant. `model_factory` (tests) returns (model, tokenizer)."""
    from transformers import AutoModelForSequenceClassification

    torch.manual_seed(cfg.seed)
    if model_factory is not None:
        model, tok = model_factory()
    else:
        source = Mo.resolve_source(cfg.model)
        try:
            tok = Mo.pretrained_tokenizer(source)       # at hub.lock's commit, once per process
            model = Mo.load_pretrained(AutoModelForSequenceClassification, source, num_labels=num_labels,
                                       attn_implementation="eager", trust_remote_code=False)
        except (OSError, ValueError) as err:
            raise Mo.ModelUnavailable(
                f"cannot load {cfg.model!r} for fine-tuning: not an offline package or local folder, and the hub is "
                f"not reachable ({str(err).splitlines()[0][:160]}). Offline: all-MiniLM-L6-v2.") from None
    if cfg.variant == "softdecay":
        insert_softdecay(model, cfg.alpha, trainable=True)
    return model, tok


def _optimizer(model: nn.Module, cfg: FinetuneConfig) -> torch.optim.Optimizer:
    alpha_params = [p for n, p in model.named_parameters() if n.endswith("softdecay.alpha")]
    ids = {id(p) for p in alpha_params}
    rest = [p for p in model.parameters() if id(p) not in ids and p.requires_grad]
    groups = [{"params": rest, "lr": cfg.lr, "weight_decay": cfg.weight_decay}]
    if alpha_params:
        groups.append({"params": alpha_params, "lr": cfg.alpha_lr, "weight_decay": 0.0})
    return adamw(groups)


@torch.no_grad()
def evaluate_glue(model: nn.Module, ev: Encoded, pad_id: int, batch: int = 64,
                  device: torch.device | str = "cpu") -> dict:
    """Validation loss and the task's metrics."""
    model.eval()
    preds = np.zeros(len(ev), dtype=np.int64)
    tot = 0.0
    for idx in length_batches(ev.lengths(), batch, None):
        b = {k: v.to(device) for k, v in collate([ev.features[i] for i in idx], [ev.labels[i] for i in idx],
                                                  pad_id).items()}
        out = model(**b)
        tot += float(out.loss) * len(idx)
        preds[idx] = out.logits.argmax(-1).cpu().numpy()
    p = preds
    return {"loss": tot / len(ev), **glue_metrics(ev.task, p, np.asarray(ev.labels))}


class GlueTask(Task):
    """One GLUE fine-tuning run as a `fit` task: seeded length-grouped batches per epoch, cross-entropy
    (+ the ExpDecay penalty for that variant), validation metrics after every epoch."""

    #: eager on every device: the SoftDecay layer counts its calls and reads the forward pass's mask
    compilable = False

    def __init__(self, cfg: FinetuneConfig, model: nn.Module, tok: Any, train_set: Encoded, eval_set: Encoded) -> None:
        self.cfg, self.tok, self.train_set, self.eval_set = cfg, tok, train_set, eval_set
        self._model = model
        self.pad_id = tok.pad_token_id if tok.pad_token_id is not None else 0
        self.name = f"{cfg.task} {cfg.variant}"
        self.epochs = cfg.epochs
        self.steps_per_epoch = len(self._plan(0))
        self._plans: dict[int, list[list[int]]] = {}

    def _plan(self, epoch: int) -> list[list[int]]:
        return length_batches(self.train_set.lengths(), self.cfg.batch_size,
                              stream_seed(self.cfg.seed, "glue-order", epoch))

    def settings(self) -> dict[str, Any]:
        return self.cfg.stored()

    def build(self, device: torch.device):
        model = self._model.to(device)
        opt = _optimizer(model, self.cfg)
        total = self.steps_per_epoch * self.cfg.epochs
        from transformers import get_linear_schedule_with_warmup

        return model, opt, get_linear_schedule_with_warmup(opt, int(self.cfg.warmup_ratio * total), total)

    def batch(self, epoch: int, index: int, device: torch.device) -> dict[str, Tensor]:
        if epoch not in self._plans:
            self._plans = {epoch: self._plan(epoch)}
        idx = self._plans[epoch][index]
        b = collate([self.train_set.features[i] for i in idx], [self.train_set.labels[i] for i in idx], self.pad_id)
        return {k: v.to(device) for k, v in b.items()}

    def loss(self, model: nn.Module, batch: dict[str, Tensor]):
        expdecay = self.cfg.variant == "expdecay"
        out = model(**batch, output_hidden_states=expdecay)
        stats = {"train_loss": float(out.loss.detach())}
        loss = out.loss
        if expdecay:
            pen = expdecay_penalty(out.hidden_states[-1], batch["attention_mask"].bool(), **self.cfg.expdecay)
            loss = loss + pen
            stats["penalty"] = float(pen.detach())
        return loss, stats, len(batch["labels"])

    def new_history(self) -> dict[str, Any]:
        return {"epoch": [], "train_loss": [], "penalty": [], "alpha": [], "eval": [], "epoch_seconds": [],
                "steps_per_epoch": self.steps_per_epoch, "train_examples": len(self.train_set),
                "eval_examples": len(self.eval_set)}

    def after_epoch(self, model: nn.Module, epoch: int, means: dict[str, float], history: dict) -> None:
        sd = find_softdecay(model)
        history["epoch"].append(epoch)
        history["train_loss"].append(means["train_loss"])
        history["penalty"].append(means.get("penalty", 0.0))
        history["alpha"].append(sd.alpha if sd is not None else None)
        history["eval"].append(evaluate_glue(model, self.eval_set, self.pad_id, device=next(model.parameters()).device))
        history["epoch_seconds"].append(history["wall_time_s"] - sum(history["epoch_seconds"]))


def holdout_split(data: Encoded, fraction: float, seed: int = 0) -> tuple[Encoded, Encoded]:
    """`data` split into (the rest, a held-out `fraction` of it), drawn with `seed` (a fixed split: the
    same for every run that passes the same seed); both keep `data`'s order. The held-out part has at
    least one example and leaves at least one."""
    if not 0 < fraction < 1:
        raise ValueError(f"holdout fraction must lie in (0, 1), got {fraction}")
    n = len(data)
    k = min(max(1, round(fraction * n)), n - 1)
    held = set(torch.randperm(n, generator=torch.Generator().manual_seed(seed))[:k].tolist())

    def part(keep: bool, split: str) -> Encoded:
        idx = [i for i in range(n) if (i in held) != keep]
        return Encoded(data.task, split, [data.features[i] for i in idx], [data.labels[i] for i in idx])
    return part(True, f"{data.split}-rest"), part(False, f"{data.split}-heldout")


def finetune(cfg: FinetuneConfig, train_set: Encoded | None = None, eval_set: Encoded | None = None,
             checkpoint: str | Path | None = None, stop_after_epochs: int | None = None,
             device: str = "auto", model_factory=None, keep_model: bool = False, precision: str = "fp32",
             holdout: float = 0.0) -> dict:
    """Fine-tune one (task, model, variant, seed) through `fit`: per epoch the training loss,
    validation metrics, α and wall time. With `checkpoint`, the state is saved after every epoch and a
    rerun resumes from it; `stop_after_epochs` simulates a kill. One device (CPU or one GPU).
    `holdout` > 0 (a selection run): train on the training split less a held-out `holdout` of it
    (`holdout_split`, one fixed draw for every run) and score on that held-out part instead of the
    validation split, so a selection never reads the validation set it is reported on."""
    dev = choose_device(device)
    model, tok = load_classifier(cfg, 2, model_factory)
    if train_set is None:
        train_set = encode_task(tok, cfg.task, "train", cfg.train_examples, cfg.seed, cfg.max_length)
    if holdout > 0:
        train_set, eval_set = holdout_split(train_set, holdout, stream_seed(0, "glue-holdout"))
    if eval_set is None:
        eval_set = encode_task(tok, cfg.task, "validation", cfg.eval_examples, cfg.seed + 1, cfg.max_length)
    task = GlueTask(cfg, model, tok, train_set, eval_set)
    stop = None if stop_after_epochs is None else stop_after_epochs * task.steps_per_epoch
    model, history = fit(task, checkpoint=checkpoint, device=dev, precision=precision, stop_after_steps=stop)
    history["final"] = history["eval"][-1] if history["eval"] else None
    history["device"] = str(dev)
    if keep_model:
        history["_model"] = model
        history["_tokenizer"] = tok
    return history
