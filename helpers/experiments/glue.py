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

Training uses `accelerate` (the same loop on a CPU, one GPU or several), batch 32, max length 128,
3 epochs, linear schedule, a checkpoint after every epoch (`helpers.train`) and resume.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pandas as pd
import torch
from torch import Tensor, nn

from .. import data as D
from ..book.params import ChapterParams, nonneg, positive, rules
from ..book.runtime import progress
from ..core import subspace
from ..core.softdecay import SoftDecay, softdecay_transform
from ..hf import models as Mo
from ..train.checkpoint import load_checkpoint, save_checkpoint


@dataclass(frozen=True)
class Params(ChapterParams):
    """Yan et al. §5.2, App. B, App. D: SoftDecay fine-tuning on GLUE (Table 2, Table 6, Figs. 5, 8-13)."""

    models: tuple[str, ...] = ("all-MiniLM-L6-v2",)
    tasks: tuple[str, ...] = ("RTE", "MRPC", "CoLA")
    variants: tuple[str, ...] = ("baseline", "softdecay", "expdecay")
    alphas: tuple[float, ...] = (-0.5,)          # initial α of SoftDecay (the paper searches -0.2, -0.5, -0.8)
    lr: float = 2e-5
    alpha_lr: float = 2e-3
    epochs: int = 3
    batch: int = 32
    max_length: int = 128
    seeds: int = 2
    train_examples: int = 0                      # 0 = the whole training split
    eval_examples: int = 0                       # 0 = the whole validation split
    spectra_examples: int = 256
    expdecay_squared: bool = False               # False: App. D.1 as printed; True: Wang et al.'s squared form

    CHAPTER: ClassVar[str] = "glue"
    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {
        "ci": dict(tasks=("RTE", "MRPC"), train_examples=48, eval_examples=48, batch=8, max_length=48, epochs=2,
                   seeds=2, spectra_examples=24),
        "book": dict(),
        "paper": dict(models=("bert-base-uncased", "albert-base-v1", "distilbert-base-uncased", "roberta-base"),
                      tasks=("CoLA", "SST-2", "MRPC", "QNLI", "RTE"), alphas=(-0.2, -0.5, -0.8), seeds=3,
                      spectra_examples=1000),
    }
    RULES: ClassVar = rules(
        models=(lambda v: len(v) > 0, "needs at least one model"),
        tasks=(lambda v: len(v) > 0 and all(t in ("CoLA", "SST-2", "MRPC", "QNLI", "RTE") for t in v),
               "each must be one of CoLA, SST-2, MRPC, QNLI, RTE"),
        variants=(lambda v: len(v) > 0 and all(x in ("baseline", "softdecay", "expdecay") for x in v),
                  "each must be baseline, softdecay or expdecay"),
        alphas=(lambda v: len(v) > 0 and all(-1.0 <= a < 0 for a in v), "every initial alpha must lie in [-1, 0)"),
        lr=positive, alpha_lr=positive, epochs=positive, batch=positive,
        max_length=(lambda v: 8 <= v <= 512, "must lie in [8, 512]"), seeds=positive,
        train_examples=nonneg, eval_examples=nonneg, spectra_examples=(lambda v: v >= 2, "needs >= 2 examples"),
    )


#: task -> metric names (the first is the headline number of Table 2)
TASK_METRICS = {"CoLA": ("mcc",), "SST-2": ("acc",), "MRPC": ("acc", "f1"), "QNLI": ("acc",), "RTE": ("acc",)}
#: string labels of the GLUE tsv files -> the hub's integer labels
_LABELS = {"entailment": 0, "not_entailment": 1}
VARIANTS = ("baseline", "softdecay", "expdecay")
ALPHA_BOUNDS = (-0.999, -0.001)


# ------------------------------------------------------------------ the SoftDecay insertion


def final_layernorm(model: nn.Module) -> tuple[nn.Module, str, int]:
    """(parent module, attribute name, calls per forward) of the last layer's final LayerNorm of a
    BERT / RoBERTa / ALBERT / DistilBERT model (with or without a task head)."""
    base = getattr(model, "base_model", model)
    cfg = base.config
    kind = cfg.model_type
    if kind in ("bert", "roberta", "xlm-roberta", "electra", "camembert"):
        return base.encoder.layer[-1].output, "LayerNorm", 1
    if kind == "distilbert":
        return base.transformer.layer[-1], "output_layer_norm", 1
    if kind == "albert":
        groups = cfg.num_hidden_groups
        # layer i uses group int(i / (num_hidden_layers / num_hidden_groups)); the last group runs
        # num_hidden_layers / num_hidden_groups times, each time through all of its inner layers
        calls = cfg.num_hidden_layers // groups
        return base.encoder.albert_layer_groups[-1].albert_layers[-1], "full_layer_layer_norm", calls
    raise ValueError(f"SoftDecay insertion is implemented for bert, roberta, albert and distilbert, not {kind!r}")


class SoftDecayBeforeLayerNorm(nn.Module):
    """LayerNorm(SoftDecay(x)) in place of the last layer's LayerNorm(x) (App. B), with the
    attention mask of the current forward pass (set by a pre-hook on the model) so that Algorithm 1
    sees each sentence's real tokens only. For shared layers (ALBERT) only the `apply_on_call`-th
    call of a forward pass is transformed."""

    def __init__(self, layer_norm: nn.Module, alpha: float, trainable: bool = True, apply_on_call: int = 1) -> None:
        super().__init__()
        self.layer_norm = layer_norm
        self.softdecay = SoftDecay(alpha, trainable=trainable)
        self.apply_on_call = apply_on_call
        self.mask: Tensor | None = None
        self.calls = 0
        self.capture = False                                          # keep (input, SoftDecay output) for figures
        self.captured: tuple[Tensor, Tensor] | None = None

    @property
    def alpha(self) -> float:
        return float(self.softdecay.alpha.detach())

    def forward(self, x: Tensor) -> Tensor:                          # x (B, L, d)
        self.calls += 1
        if self.calls != self.apply_on_call:
            return self.layer_norm(x)
        mask = self.mask
        if mask is not None and mask.shape != x.shape[:2]:
            raise RuntimeError(f"attention mask {tuple(mask.shape)} does not match hidden states {tuple(x.shape)}")
        alpha = self.softdecay.alpha.clamp(*ALPHA_BOUNDS)
        y = softdecay_transform(x, alpha, mask)                      # (B, L, d), padded rows unchanged
        if self.capture:
            self.captured = (x.detach(), y.detach())
        return self.layer_norm(y)


def insert_softdecay(model: nn.Module, alpha: float = -0.5, trainable: bool = True) -> SoftDecayBeforeLayerNorm:
    """Put SoftDecay before the last layer's final LayerNorm of `model` (in place) and return the
    new module (its `.softdecay.alpha` is the trainable α)."""
    if not -1.0 <= alpha < 0:
        raise ValueError(f"initial alpha must lie in [-1, 0) (the paper's range), got {alpha}")
    parent, name, calls = final_layernorm(model)
    ln = getattr(parent, name)
    if isinstance(ln, SoftDecayBeforeLayerNorm):
        raise ValueError("SoftDecay is already inserted in this model")
    wrapped = SoftDecayBeforeLayerNorm(ln, alpha, trainable, apply_on_call=calls)
    setattr(parent, name, wrapped)

    def pre_hook(_module, args, kwargs):
        wrapped.calls = 0
        mask = kwargs.get("attention_mask")
        if mask is None and len(args) > 1 and isinstance(args[1], Tensor):
            mask = args[1]
        ids = kwargs.get("input_ids", args[0] if args else None)
        if mask is None and isinstance(ids, Tensor):
            mask = torch.ones(ids.shape[:2], dtype=torch.bool, device=ids.device)
        wrapped.mask = None if mask is None else mask.bool()

    model.register_forward_pre_hook(pre_hook, with_kwargs=True)
    return wrapped


def find_softdecay(model: nn.Module) -> SoftDecayBeforeLayerNorm | None:
    for m in model.modules():
        if isinstance(m, SoftDecayBeforeLayerNorm):
            return m
    return None


def expdecay_penalty(H: Tensor, mask: Tensor | None = None, c1: float = 1.0, c2: float = 1.0, gamma: float = 2.0,
                     gamma_e: float = 1e-4, squared: bool = False) -> Tensor:
    """ExpDecay regulariser (Yan et al. App. D.1, after Wang et al. 2020): γ_e Σ_k (λ_k − c1 e^{−c2 k^γ})
    over the singular values λ_1 ≥ λ_2 ≥ … of each example's output matrix H (B, L, d) (real rows
    only), averaged over the batch. `squared=True`: γ_e Σ_k (λ_k − c1 e^{−c2 k^γ})²."""
    Hm = H if mask is None else H * mask.unsqueeze(-1).to(H.dtype)
    lam = torch.linalg.svdvals(Hm.float())                             # (B, min(L, d)), descending
    k = torch.arange(1, lam.shape[-1] + 1, dtype=lam.dtype, device=lam.device)
    prior = c1 * torch.exp(-c2 * k.pow(gamma))                         # (K,)
    diff = lam - prior
    if mask is not None:                                               # only the rank a sentence can have
        live = k.unsqueeze(0) <= mask.sum(-1, keepdim=True).to(lam.dtype)
        diff = diff * live
    per = diff.square().sum(-1) if squared else diff.sum(-1)
    return gamma_e * per.mean()


# ------------------------------------------------------------------ data


@dataclass
class Encoded:
    """Tokenised examples of one task split (unpadded), with integer labels."""

    task: str
    split: str
    features: list[dict[str, list[int]]]
    labels: list[int]

    def __len__(self) -> int:
        return len(self.labels)

    def lengths(self) -> list[int]:
        return [len(f["input_ids"]) for f in self.features]


def _int_label(v: Any) -> int:
    if isinstance(v, str):
        if v not in _LABELS:
            raise ValueError(f"unknown GLUE label {v!r}")
        return _LABELS[v]
    return int(v)


def encode_task(tokenizer, task: str, split: str, n: int = 0, seed: int = 0, max_length: int = 128,
                source: str = "auto") -> Encoded:
    """Tokenise a GLUE split (mirror or hub through `data.load_glue`); `n` > 0 keeps a random
    subset of n examples drawn with `seed` (ci scale)."""
    if task not in TASK_METRICS:
        raise ValueError(f"unknown GLUE task {task!r}; known: {sorted(TASK_METRICS)}")
    ds = D.load_glue(task, split, source)
    idx = list(range(len(ds)))
    if 0 < n < len(ds):
        idx = sorted(torch.randperm(len(ds), generator=torch.Generator().manual_seed(seed))[:n].tolist())
    s1 = [ds.sentence1[i] for i in idx]
    s2 = [ds.sentence2[i] for i in idx] if ds.sentence2 is not None else None
    enc = tokenizer(s1, s2, truncation=True, max_length=max_length) if s2 else \
        tokenizer(s1, truncation=True, max_length=max_length)
    keys = [k for k in ("input_ids", "token_type_ids", "attention_mask") if k in enc]
    feats = [{k: enc[k][i] for k in keys} for i in range(len(idx))]
    return Encoded(task, split, feats, [_int_label(ds.labels[i]) for i in idx])


def collate(features: list[dict[str, list[int]]], labels: list[int] | None, pad_id: int) -> dict[str, Tensor]:
    """Pad a batch to its longest example (dynamic padding)."""
    L = max(len(f["input_ids"]) for f in features)
    out: dict[str, Tensor] = {}
    for k in features[0]:
        fill = pad_id if k == "input_ids" else 0
        out[k] = torch.tensor([f[k] + [fill] * (L - len(f[k])) for f in features], dtype=torch.long)
    if labels is not None:
        out["labels"] = torch.tensor(labels, dtype=torch.long)
    return out


def _batches(lengths: list[int], batch: int, seed: int | None, group: int = 50) -> list[list[int]]:
    """Index batches. Training (`seed` given): a permutation drawn with a generator seeded by
    (seed, epoch) — so a resumed run draws the same batches as an uninterrupted one — cut into
    mega-batches of `group` batches, each sorted by length and split, and the batches shuffled
    (transformers' group_by_length: far less padding, same distribution of examples per batch).
    Evaluation (`seed=None`): sorted by length."""
    n = len(lengths)
    if seed is None:
        order = sorted(range(n), key=lambda i: lengths[i])
        return [order[i:i + batch] for i in range(0, n, batch)]
    g = torch.Generator().manual_seed(seed)
    order = torch.randperm(n, generator=g).tolist()
    mega = batch * group
    out: list[list[int]] = []
    for i in range(0, n, mega):
        chunk = sorted(order[i:i + mega], key=lambda j: -lengths[j])
        out += [chunk[k:k + batch] for k in range(0, len(chunk), batch)]
    perm = torch.randperm(len(out), generator=g).tolist()
    return [out[p] for p in perm]


# ------------------------------------------------------------------ metrics


def glue_metrics(task: str, preds: np.ndarray, labels: np.ndarray) -> dict[str, float]:
    """Matthews correlation (CoLA), accuracy (SST-2, QNLI, RTE), accuracy and F1 (MRPC), ×100."""
    from sklearn.metrics import f1_score, matthews_corrcoef

    out = {}
    for m in TASK_METRICS[task]:
        if m == "acc":
            out[m] = 100.0 * float((preds == labels).mean())
        elif m == "f1":
            out[m] = 100.0 * float(f1_score(labels, preds))
        elif m == "mcc":
            out[m] = 100.0 * float(matthews_corrcoef(labels, preds))
    return out


# ------------------------------------------------------------------ fine-tuning


@dataclass
class FinetuneConfig:
    """One fine-tuning run (App. B: batch 32, max length 128, 3 epochs, linear schedule; learning
    rates 2e-5 for the model and 2e-3 for α; initial α from [−0.2, −0.5, −0.8])."""

    task: str = "RTE"
    model: str = "all-MiniLM-L6-v2"
    variant: str = "baseline"
    alpha: float = -0.5
    lr: float = 2e-5
    alpha_lr: float = 2e-3
    epochs: int = 3
    batch: int = 32
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
        for name in ("lr", "alpha_lr", "epochs", "batch", "max_length"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)}")


def build_model(cfg: FinetuneConfig, num_labels: int, model_factory: Callable[[], tuple[nn.Module, Any]] | None = None):
    """The pretrained model with a fresh classification head (seeded by cfg.seed), and SoftDecay
    inserted for the `softdecay` variant. `model_factory` (tests) returns (model, tokenizer)."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    torch.manual_seed(cfg.seed)
    if model_factory is not None:
        model, tok = model_factory()
    else:
        source = Mo.resolve_source(cfg.model)
        try:
            tok = AutoTokenizer.from_pretrained(source)
            model = AutoModelForSequenceClassification.from_pretrained(source, num_labels=num_labels,
                                                                       attn_implementation="eager")
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
    return torch.optim.AdamW(groups)


@torch.no_grad()
def evaluate(model: nn.Module, ev: Encoded, pad_id: int, batch: int = 64, device: torch.device | str = "cpu") -> dict:
    """Validation loss and the task's metrics."""
    model.eval()
    preds = np.zeros(len(ev), dtype=np.int64)
    tot = 0.0
    for idx in _batches(ev.lengths(), batch, None):
        b = {k: v.to(device) for k, v in collate([ev.features[i] for i in idx], [ev.labels[i] for i in idx],
                                                  pad_id).items()}
        out = model(**b)
        tot += float(out.loss) * len(idx)
        preds[idx] = out.logits.argmax(-1).cpu().numpy()
    p = preds
    return {"loss": tot / len(ev), **glue_metrics(ev.task, p, np.asarray(ev.labels))}


def finetune(cfg: FinetuneConfig, train_set: Encoded | None = None, eval_set: Encoded | None = None,
             checkpoint: str | Path | None = None, stop_after_epochs: int | None = None,
             device: str = "auto", model_factory=None, keep_model: bool = False) -> dict:
    """Fine-tune one (task, model, variant, seed): per epoch the training loss, validation metrics,
    α and wall time. With `checkpoint`, the whole state (model, optimiser, schedule, RNG, history)
    is saved after every epoch and a rerun resumes from it; `stop_after_epochs` simulates a kill.
    Runs through `accelerate.Accelerator`, so the same code uses a CPU, one GPU or several."""
    from accelerate import Accelerator
    from transformers import get_linear_schedule_with_warmup

    accelerator = Accelerator(cpu=device == "cpu" or not torch.cuda.is_available())
    dev = accelerator.device
    model, tok = build_model(cfg, 2, model_factory)
    pad_id = tok.pad_token_id if tok.pad_token_id is not None else 0
    if train_set is None:
        train_set = encode_task(tok, cfg.task, "train", cfg.train_examples, cfg.seed, cfg.max_length)
    if eval_set is None:
        eval_set = encode_task(tok, cfg.task, "validation", cfg.eval_examples, cfg.seed + 1, cfg.max_length)
    steps_per_epoch = len(_batches(train_set.lengths(), cfg.batch, cfg.seed))
    total = steps_per_epoch * cfg.epochs
    opt = _optimizer(model, cfg)
    sched = get_linear_schedule_with_warmup(opt, int(cfg.warmup_ratio * total), total)
    history: dict[str, Any] = {"epoch": [], "train_loss": [], "penalty": [], "alpha": [], "eval": [],
                               "epoch_seconds": [], "steps_per_epoch": steps_per_epoch,
                               "train_examples": len(train_set), "eval_examples": len(eval_set)}
    state = load_checkpoint(checkpoint, map_location="cpu")
    start = 0
    if state is not None:
        if state.get("config") != asdict(cfg):
            raise ValueError(f"checkpoint {checkpoint} was written with other settings; delete it or change the path")
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        sched.load_state_dict(state["sched"])
        history, start = state["history"], state["epoch"]
    model, opt, sched = accelerator.prepare(model, opt, sched)
    sd = find_softdecay(model)
    ed = cfg.expdecay
    for epoch in range(start, cfg.epochs):
        if stop_after_epochs is not None and epoch >= stop_after_epochs:
            break
        t0 = time.perf_counter()
        model.train()
        tot, pen_tot, n = 0.0, 0.0, 0
        for idx in progress(_batches(train_set.lengths(), cfg.batch, cfg.seed * 1000 + epoch),
                            desc=f"{cfg.task} {cfg.variant} epoch {epoch + 1}", total=steps_per_epoch):
            b = collate([train_set.features[i] for i in idx], [train_set.labels[i] for i in idx], pad_id)
            b = {k: v.to(dev) for k, v in b.items()}
            out = model(**b, output_hidden_states=cfg.variant == "expdecay")
            loss = out.loss
            if cfg.variant == "expdecay":
                pen = expdecay_penalty(out.hidden_states[-1], b["attention_mask"].bool(), **ed)
                loss = loss + pen
                pen_tot += float(pen.detach()) * len(idx)
            opt.zero_grad(set_to_none=True)
            accelerator.backward(loss)
            opt.step()
            sched.step()
            tot += float(out.loss.detach()) * len(idx)
            n += len(idx)
        ev = evaluate(model, eval_set, pad_id, device=dev)
        history["epoch"].append(epoch + 1)
        history["train_loss"].append(tot / n)
        history["penalty"].append(pen_tot / n)
        history["alpha"].append(sd.alpha if sd is not None else None)
        history["eval"].append(ev)
        history["epoch_seconds"].append(time.perf_counter() - t0)
        if checkpoint is not None and accelerator.is_main_process:
            save_checkpoint(checkpoint, model=accelerator.unwrap_model(model).state_dict(), opt=opt.state_dict(),
                            sched=sched.state_dict(), history=history, epoch=epoch + 1, config=asdict(cfg))
    history["final"] = history["eval"][-1] if history["eval"] else None
    history["device"] = str(dev)
    if keep_model:
        history["_model"] = accelerator.unwrap_model(model)
        history["_tokenizer"] = tok
    return history


# ------------------------------------------------------------------ singular-value CDFs (Figs. 5, 8-13)


def _cdf_rows(per_layer: list[Tensor], mask: Tensor, labels: list[str], quantiles: int) -> list[dict]:
    rows = subspace.layer_spectrum_stats(per_layer, mask)
    qs = torch.linspace(0, 1, quantiles, dtype=torch.float64)
    for r, label in zip(rows, labels, strict=True):
        v = r.pop("values").to(torch.float64)
        r["label"] = label
        r["quantiles"] = torch.quantile(v, qs).tolist()
    return rows


@torch.no_grad()
def layer_spectra(model: nn.Module, tok, ev: Encoded, n: int = 256, batch: int = 32, quantiles: int = 201,
                  device: str | torch.device = "cpu") -> dict[str, list[dict]]:
    """Per-layer singular-value statistics of a (fine-tuned) model on the first `n` validation
    examples, as `subspace.layer_spectrum_stats` (each sentence's token matrix, values normalised by
    the largest; median, skewness, token uniformity), with each CDF kept as `quantiles` quantiles
    (small enough to commit). For a model with SoftDecay, `softdecay` also holds the last layer's
    matrix just before and just after the SoftDecay transform (before the LayerNorm)."""
    model.eval()
    pad_id = tok.pad_token_id if tok.pad_token_id is not None else 0
    feats = ev.features[:n]
    sd = find_softdecay(model)
    if sd is not None:
        sd.capture = True
    chunks: list[list[Tensor]] = []
    masks: list[Tensor] = []
    try:
        for idx in [list(range(i, min(i + batch, len(feats)))) for i in range(0, len(feats), batch)]:
            b = {k: v.to(device) for k, v in collate([feats[i] for i in idx], None, pad_id).items()}
            out = model(**b, output_hidden_states=True)
            extra = [t.float().cpu() for t in sd.captured] if sd is not None else []
            chunks.append([h.float().cpu() for h in out.hidden_states] + extra)
            masks.append(b["attention_mask"].bool().cpu())
    finally:
        if sd is not None:
            sd.capture, sd.captured = False, None
    L = max(m.shape[1] for m in masks)
    pad = lambda t: torch.nn.functional.pad(t, (0, 0, 0, L - t.shape[1]))  # noqa: E731
    per_layer = [torch.cat([pad(c[i]) for c in chunks]) for i in range(len(chunks[0]))]   # (N, L, d) each
    mask = torch.cat([torch.nn.functional.pad(m, (0, L - m.shape[1])) for m in masks])   # (N, L)
    n_layers = len(per_layer) - (2 if sd is not None else 0)
    labels = ["embeddings"] + [f"layer {i}" for i in range(1, n_layers)]
    out = {"layers": _cdf_rows(per_layer[:n_layers], mask, labels, quantiles)}
    if sd is not None:
        out["softdecay"] = _cdf_rows(per_layer[n_layers:], mask, ["before SoftDecay", "after SoftDecay"], quantiles)
    return out


# ------------------------------------------------------------------ the chapter's grid of runs


def run_key(p, model: str, task: str, variant: str, alpha: float | None, seed: int) -> dict[str, Any]:
    """Every setting one run's result depends on (the committed-results cache key)."""
    return {"model": model, "task": task, "variant": variant, "alpha": alpha, "seed": seed,
            **{k: getattr(p, k) for k in ("lr", "alpha_lr", "epochs", "batch", "max_length", "train_examples",
                                          "eval_examples", "spectra_examples", "expdecay_squared")}}


def run_grid(p, device: str = "auto", command: str | None = None) -> dict[tuple, dict]:
    """Every (model, task, variant, initial α, seed) of a `GlueParams`, each through
    `runtime.cached_run` (book scale: committed results re-read when their settings match).
    Outside `ci`, each run checkpoints after every epoch under `_build/checkpoints/glue/` and a
    rerun after a kill resumes it. Returns {(model, task, variant, alpha, seed): history with `spectra`}."""
    from ..book.results import cached_run, settings_hash
    from ..book.runtime import REPO_ROOT

    out: dict[tuple, dict] = {}
    for model in p.models:
        for task in p.tasks:
            for variant in p.variants:
                for alpha in (p.alphas if variant == "softdecay" else (None,)):
                    for s in range(p.seeds):
                        seed = p.seed + s
                        key = run_key(p, model, task, variant, alpha, seed)
                        name = f"{model.replace('/', '_')}-{task}-{variant}" + \
                            (f"{alpha:+.1f}" if alpha is not None else "") + f"-seed{seed}"

                        def compute(model=model, task=task, variant=variant, alpha=alpha, seed=seed, key=key):
                            fc = FinetuneConfig(task=task, model=model, variant=variant,
                                                alpha=alpha if alpha is not None else -0.5, lr=p.lr,
                                                alpha_lr=p.alpha_lr, epochs=p.epochs, batch=p.batch,
                                                max_length=p.max_length, train_examples=p.train_examples,
                                                eval_examples=p.eval_examples, seed=seed)
                            fc.expdecay["squared"] = p.expdecay_squared
                            # resume after a kill (ci always starts afresh); removed once the run is done
                            ckpt = None if p.scale == "ci" else \
                                REPO_ROOT / "_build" / "checkpoints" / "glue" / f"{settings_hash(key)}.pt"
                            h = finetune(fc, device=device, keep_model=True, checkpoint=ckpt)
                            if ckpt is not None:
                                ckpt.unlink(missing_ok=True)
                            m, tok = h.pop("_model"), h.pop("_tokenizer")
                            ev = encode_task(tok, task, "validation", 0, 0, p.max_length)
                            h["spectra"] = layer_spectra(m, tok, ev, n=p.spectra_examples,
                                                         device=next(m.parameters()).device)
                            return h

                        out[(model, task, variant, alpha, seed)], _ = cached_run(
                            "glue", name, p, key, compute, p.scale, command=command)
    return out


# ------------------------------------------------------------------ tables for the chapter


def paper_tables() -> pd.DataFrame:
    """Yan et al. Table 2 and Table 6 (data/yan_2022_table{2,6}.csv) in long form:
    task, metric, model, variant, value, significance."""
    from ..book.runtime import REPO_ROOT

    t2 = pd.read_csv(REPO_ROOT / "data" / "yan_2022_table2.csv", keep_default_na=False)
    t6 = pd.read_csv(REPO_ROOT / "data" / "yan_2022_table6.csv", keep_default_na=False).assign(significance="")
    return pd.concat([t2, t6], ignore_index=True)


def majority_baseline(task: str, source: str = "auto") -> dict[str, float]:
    """The task's metrics for always predicting the validation split's majority class (MCC is 0;
    MRPC's F1 is high because its majority class is the positive one): the floor a fine-tuned
    model must clear."""
    ev = D.load_glue(task, "validation", source)
    labels = np.asarray([_int_label(v) for v in ev.labels])
    major = np.bincount(labels).argmax()
    return glue_metrics(task, np.full_like(labels, major), labels)


def summary_table(results: dict[tuple, dict], paper_model: str = "bert-base-uncased") -> pd.DataFrame:
    """Table 2 / Table 6 counterpart: for each (model, task, metric) our final validation score per
    variant as mean ± std over seeds, the relative change Δ% against our baseline (as the paper's
    Δ%), and the paper's numbers for `paper_model` beside them."""
    paper = paper_tables()
    rows = []
    combos = sorted({(m, t) for (m, t, *_rest) in results}, key=lambda x: (x[0], list(TASK_METRICS).index(x[1])))
    for model, task in combos:
        for metric in TASK_METRICS[task]:
            row: dict[str, Any] = {"model": model, "task": task, "metric": metric}
            base = None
            for (m, t, variant, alpha, _seed), h in results.items():
                if (m, t) != (model, task):
                    continue
                col = variant if alpha is None else f"{variant} ({alpha:+.1f})"
                row.setdefault(col, []).append(h["final"][metric])
            for col in [c for c in row if isinstance(row[c], list)]:
                v = np.asarray(row[col])
                row[col] = float(v.mean())
                row[f"{col} sd"] = float(v.std(ddof=1)) if v.size > 1 else float("nan")
                row[f"{col} n"] = int(v.size)
            base = row.get("baseline")
            for col in [c for c in list(row) if c not in ("model", "task", "metric", "baseline")
                        and not c.endswith((" sd", " n"))]:
                if base:
                    row[f"{col} Δ%"] = 100.0 * (row[col] - base) / abs(base)
            row["majority class"] = majority_baseline(task)[metric]
            for variant in ("baseline", "softdecay", "expdecay"):
                hit = paper[(paper.task == task) & (paper.metric == metric) & (paper.model == paper_model)
                            & (paper.variant == variant)]
                row[f"paper {variant}"] = float(hit.value.iloc[0]) if len(hit) else float("nan")
            rows.append(row)
    return pd.DataFrame(rows)


def seed_verdicts(table: pd.DataFrame) -> pd.DataFrame:
    """For each (task, metric) and each modified variant of `summary_table`: the difference to our
    baseline in points, the larger of the two seed standard deviations (0 when a single seed), and
    whether the difference lies beyond it. With two or three seeds this is a pointer, not a test."""
    rows = []
    variants = [c for c in table.columns
                if c.startswith(("softdecay", "expdecay")) and not c.endswith((" sd", " n", " Δ%"))]
    for _, r in table.iterrows():
        for col in variants:
            diff = float(r[col] - r["baseline"])
            spread = float(np.nanmax([r.get(f"{col} sd", np.nan), r.get("baseline sd", np.nan), 0.0]))
            rows.append({"task": r["task"], "metric": r["metric"], "variant": col, "diff": diff, "spread": spread,
                         "beyond": abs(diff) > spread})
    return pd.DataFrame(rows, columns=["task", "metric", "variant", "diff", "spread", "beyond"])


def paper_gains(model: str = "bert-base-uncased") -> pd.DataFrame:
    """The paper's relative change Δ% of SoftDecay over its baseline (Table 2), per task and metric."""
    paper = paper_tables().query("model == @model")
    wide = paper.pivot_table(index=["task", "metric"], columns="variant", values="value").reset_index()
    wide["gain %"] = 100.0 * (wide["softdecay"] - wide["baseline"]) / wide["baseline"].abs()
    return wide[["task", "metric", "baseline", "softdecay", "gain %"]]


def spectrum_summary(results: dict[tuple, dict], seed: int) -> pd.DataFrame:
    """Per (task, variant) of one seed: median, skewness and TokenUni of the last layer's normalised
    singular values, and for SoftDecay runs the same before and after the transform (Figure 5)."""
    rows = []
    for (_m, task, variant, _a0, s), h in results.items():
        if s != seed:
            continue
        last = h["spectra"]["layers"][-1]
        row = {"task": task, "variant": variant, "last layer median": last["median"],
               "last layer skewness": last["skewness"], "last layer TokenUni": last["token_uni"]}
        if "softdecay" in h["spectra"]:
            before, after = h["spectra"]["softdecay"]
            row.update({"median before SD": before["median"], "median after SD": after["median"],
                        "skew before SD": before["skewness"], "skew after SD": after["skewness"]})
        rows.append(row)
    return pd.DataFrame(rows)


def format_pm(table: pd.DataFrame) -> pd.DataFrame:
    """`mean ± sd` strings for display, one column per variant, paper columns beside."""
    out = table[["model", "task", "metric"]].copy()
    variants = [c for c in table.columns if f"{c} sd" in table.columns]
    for v in variants:
        out[v] = [f"{m:.2f} ± {s:.2f}" if np.isfinite(s) else f"{m:.2f}" for m, s in zip(table[v], table[f"{v} sd"],
                                                                                       strict=True)]
        if f"{v} Δ%" in table.columns:
            out[f"{v} Δ%"] = table[f"{v} Δ%"].map(lambda x: f"{x:+.2f}")
    for c in [c for c in table.columns if c.startswith("paper ") or c == "majority class"]:
        out[c] = table[c].map(lambda x: "" if pd.isna(x) else f"{x:.2f}")
    return out


def alpha_table(results: dict[tuple, dict]) -> pd.DataFrame:
    """The learned α per task: initial value, value after each epoch (mean over seeds) and its spread."""
    rows = []
    for (model, task, variant, alpha, seed), h in results.items():
        if variant != "softdecay":
            continue
        rows.append({"model": model, "task": task, "initial α": alpha, "seed": seed,
                     **{f"α after epoch {e}": a for e, a in zip(h["epoch"], h["alpha"], strict=True)}})
    df = pd.DataFrame(rows)
    if df.empty:
        return df
    return df.drop(columns="seed").groupby(["model", "task", "initial α"], as_index=False).agg(["mean", "std"])


def tiny_classifier(kind: str, hidden: int = 64, layers: int = 4, heads: int = 4, vocab: int = 200,
                    max_positions: int = 64, dropout: float = 0.1, seed: int = 0) -> nn.Module:
    """A small *randomly initialised* 2-class classifier of one of the architectures of §5.2
    (`bert`, `roberta`, `albert`, `distilbert`), for plumbing checks and tests."""
    from transformers import (
        AlbertConfig,
        AlbertForSequenceClassification,
        BertConfig,
        BertForSequenceClassification,
        DistilBertConfig,
        DistilBertForSequenceClassification,
        RobertaConfig,
        RobertaForSequenceClassification,
    )

    common = dict(hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads, intermediate_size=2 * hidden,
                  max_position_embeddings=max_positions, vocab_size=vocab, num_labels=2, hidden_dropout_prob=dropout,
                  attention_probs_dropout_prob=dropout)
    torch.manual_seed(seed)
    if kind == "bert":
        return BertForSequenceClassification(BertConfig(**common))
    if kind == "roberta":
        return RobertaForSequenceClassification(RobertaConfig(**common, pad_token_id=1))
    if kind == "albert":
        return AlbertForSequenceClassification(AlbertConfig(**common, embedding_size=hidden // 2,
                                                            classifier_dropout_prob=dropout))
    if kind == "distilbert":
        return DistilBertForSequenceClassification(DistilBertConfig(
            vocab_size=vocab, dim=hidden, n_layers=layers, n_heads=heads, hidden_dim=2 * hidden,
            max_position_embeddings=max_positions, dropout=dropout, attention_dropout=dropout,
            seq_classif_dropout=dropout, num_labels=2))
    raise ValueError(f"kind {kind!r}: one of bert, roberta, albert, distilbert")


def architecture_check(seed: int = 0) -> pd.DataFrame:
    """SoftDecay inserted into small *randomly initialised* BERT, RoBERTa, ALBERT and DistilBERT
    classifiers (the four architectures of §5.2; the plumbing, not their pretrained weights): loss,
    α gradient, largest parameter gradient, and whether every earlier layer is left untouched."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, 200, (8, 40), generator=g)
    mask = (torch.arange(40).unsqueeze(0) < torch.randint(8, 41, (8, 1), generator=g)).long()   # ragged padding
    ids = ids * mask + (1 - mask)
    labels = torch.randint(0, 2, (8,), generator=g)
    rows = []
    for kind in ("bert", "roberta", "albert", "distilbert"):
        base = tiny_classifier(kind, seed=seed).eval()
        model = tiny_classifier(kind, seed=seed).eval()
        sd = insert_softdecay(model, alpha=-0.5)
        with torch.no_grad():
            h0 = base(input_ids=ids, attention_mask=mask, output_hidden_states=True).hidden_states
        out = model(input_ids=ids, attention_mask=mask, labels=labels, output_hidden_states=True)
        out.loss.backward()
        grads = [p.grad.abs().max() for p in model.parameters() if p.grad is not None]
        untouched = all(torch.equal(a, b) for a, b in zip(h0[:-1], out.hidden_states[:-1], strict=True))
        rows.append({"architecture": kind, "loss": float(out.loss.detach()), "dL/dα": float(sd.softdecay.alpha.grad),
                     "max |grad|": float(torch.stack(grads).max()), "all gradients finite":
                     bool(all(torch.isfinite(x) for x in grads)), "earlier layers untouched": untouched})
    return pd.DataFrame(rows)


__all__ = ["TASK_METRICS", "VARIANTS", "final_layernorm", "SoftDecayBeforeLayerNorm", "insert_softdecay",
           "find_softdecay", "expdecay_penalty", "Encoded", "encode_task", "collate", "glue_metrics",
           "FinetuneConfig", "build_model", "evaluate", "finetune", "layer_spectra", "run_key", "run_grid",
           "paper_tables", "majority_baseline", "summary_table", "format_pm", "alpha_table", "tiny_classifier",
           "architecture_check"]
