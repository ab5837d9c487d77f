"""GLUE tasks for fine-tuning: tokenised splits, dynamic padding, length-grouped seeded batches, metrics."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor

from . import loaders as D

#: task -> metric names (the first is the headline number of Table 2)
TASK_METRICS = {"CoLA": ("mcc",), "SST-2": ("acc",), "MRPC": ("acc", "f1"), "QNLI": ("acc",), "RTE": ("acc",)}


#: string labels of the GLUE tsv files -> the hub's integer labels
_LABELS = {"entailment": 0, "not_entailment": 1}


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


def int_label(v: Any) -> int:
    if isinstance(v, str):
        if v not in _LABELS:
            raise ValueError(f"unknown GLUE label {v!r}")
        return _LABELS[v]
    return int(v)


def encode_task(tokenizer, task: str, split: str, n: int = 0, seed: int = 0, max_length: int = 128,
                source: str = "auto", first: int = 0) -> Encoded:
    """Tokenise a GLUE split (mirror or hub through `data.load_glue`); `n` > 0 keeps a random
    subset of n examples drawn with `seed` (ci scale); else `first` > 0 keeps the first `first` examples
    (what a reading of the first examples needs: each example is tokenised on its own, so they are the
    same as the first of the whole split)."""
    if task not in TASK_METRICS:
        raise ValueError(f"unknown GLUE task {task!r}; known: {sorted(TASK_METRICS)}")
    ds = D.load_glue(task, split, source)
    idx = list(range(len(ds)))
    if 0 < n < len(ds):
        idx = sorted(torch.randperm(len(ds), generator=torch.Generator().manual_seed(seed))[:n].tolist())
    elif n <= 0 < first:
        idx = idx[:first]
    s1 = [ds.sentence1[i] for i in idx]
    s2 = [ds.sentence2[i] for i in idx] if ds.sentence2 is not None else None
    enc = (tokenizer(s1, s2, truncation=True, max_length=max_length) if s2 else
           tokenizer(s1, truncation=True, max_length=max_length))
    keys = [k for k in ("input_ids", "token_type_ids", "attention_mask") if k in enc]
    feats = [{k: enc[k][i] for k in keys} for i in range(len(idx))]
    return Encoded(task, split, feats, [int_label(ds.labels[i]) for i in idx])


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


def length_batches(lengths: list[int], batch: int, seed: int | None, group: int = 50) -> list[list[int]]:
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
