"""The GLUE chapter's settings: `Params` with its presets and rules, the ExpDecay readings, the larger encoder's
fixed settings (`WIDE_*`), and the paper's Table 2 and Table 6 (`paper_tables`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import numpy as np
import pandas as pd

from ... import data as D
from ...data.glue import TASK_METRICS, glue_metrics, int_label
from ...machinery.params import ChapterParams, nonneg, positive, rules
from ...machinery.runtime import REPO_ROOT, run_seeds

Task = Literal["CoLA", "SST-2", "MRPC", "QNLI", "RTE"]
Variant = Literal["baseline", "softdecay", "expdecay"]
Reading = Literal["top5", "all", "squared"]

#: ExpDecay readings (App. D.1 never defines K): settings of `core.softdecay.expdecay_penalty` and labels
READINGS: dict[str, tuple[dict[str, Any], str]] = {
    "top5": (dict(top_k=5, squared=False), "expdecay (top-5)"),        # the authors' commented-out code
    "all": (dict(top_k=None, squared=False), "expdecay (all)"),        # the formula as printed
    "squared": (dict(top_k=None, squared=True), "expdecay (squared)"),  # Wang et al.'s squared form
}


@dataclass(frozen=True)
class Params(ChapterParams):
    """Yan et al. §5.2, App. B, App. D: SoftDecay fine-tuning on GLUE (Table 2, Table 6, Figs. 5, 9-13).

    Selection (when `lrs` or `alphas` has more than one value): on the selection seed (`seed`) the
    baseline is fine-tuned at every learning rate of `lrs` and the best validation score of the task's
    first metric picks the rate every variant then uses; SoftDecay is fine-tuned at every α₀ of
    `alphas` at that rate and the best picks α₀ (the paper's search, App. B). The comparison then runs
    `seeds` fresh seeds (seed+1, …), so the selection does not also score the comparison."""

    models: tuple[str, ...] = ("all-MiniLM-L6-v2",)
    tasks: tuple[Task, ...] = ("RTE", "MRPC", "CoLA")
    variants: tuple[Variant, ...] = ("baseline", "softdecay", "expdecay")
    alphas: tuple[float, ...] = (-0.5,)          # candidate initial α of SoftDecay (the paper: -0.2, -0.5, -0.8)
    lrs: tuple[float, ...] = (2e-5,)             # candidate model learning rates (the paper: 2e-5 only)
    alpha_lr: float = 2e-3
    epochs: int = 3
    batch_size: int = 32
    max_length: int = 128
    seeds: int = 2                               # comparison seeds per (task, variant)
    expdecay_readings: tuple[Reading, ...] = ("all",)
    expdecay_seeds: int = 0                      # comparison seeds of each ExpDecay reading; 0 = `seeds`
    train_examples: int = 0                      # 0 = the whole training split
    eval_examples: int = 0                       # 0 = the whole validation split
    spectra_examples: int = 256
    #: where the selection scores its candidates: 0 = the validation split (the paper's App. B, and the
    #: committed book runs); a fraction in (0, 1) = that share of the training split, held out from the
    #: selection runs' training (one fixed draw), so the validation split only scores the comparison
    selection_holdout: float = 0.0
    #: "auto": bf16 autocast for training where the device computes bf16 natively (3x faster on an
    #: AVX-512-BF16 CPU, tests/test_train.py checks it follows fp32), fp32 elsewhere; the committed book
    #: runs are bf16 (the book preset pins it); SoftDecay's eigendecomposition runs in float64 either way
    precision: Literal["fp32", "bf16", "auto"] = "auto"
    #: a larger encoder fine-tuned on RTE beside the grid ("" = none): its baseline and SoftDecay at the paper's
    #: learning rate and one α₀ (`WIDE_LR`, `WIDE_ALPHA`; nothing selected) on `wide_seeds` seeds from `seed`, every
    #: other setting the grid's (`wide_params`)
    wide_model: str = ""
    wide_seeds: int = 3

    CHAPTER: ClassVar[str] = "glue"
    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {
        "ci": dict(tasks=("RTE", "MRPC"), train_examples=16, eval_examples=16, batch_size=8, max_length=32,
                   epochs=2, seeds=2, spectra_examples=24, lrs=(2e-5, 1e-4), alphas=(-0.2, -0.5),
                   expdecay_readings=("top5", "all"), expdecay_seeds=1),
        # ExpDecay's three readings run at the selected learning rate on the 5 comparison seeds, as SoftDecay
        "book": dict(lrs=(2e-5, 5e-5, 1e-4), alphas=(-0.2, -0.5, -0.8), seeds=5,
                     variants=("baseline", "softdecay", "expdecay"), expdecay_readings=("top5", "all", "squared"),
                     expdecay_seeds=5, precision="bf16", wide_model="all-mpnet-base-v2", wide_seeds=3),
        "paper": dict(models=("bert-base-uncased", "albert-base-v1", "distilbert-base-uncased", "roberta-base"),
                      tasks=("CoLA", "SST-2", "MRPC", "QNLI", "RTE"), alphas=(-0.2, -0.5, -0.8), seeds=3,
                      expdecay_readings=("top5", "all", "squared"), spectra_examples=1000),
    }
    RULES: ClassVar = rules(
        models=(lambda v: len(v) > 0, "needs at least one model"),
        tasks=(lambda v: len(v) > 0, "needs at least one task"),
        variants=(lambda v: len(v) > 0 and "baseline" in v, "needs the baseline (and optionally softdecay, expdecay)"),
        alphas=(lambda v: len(v) > 0 and all(-1.0 <= a < 0 for a in v), "every initial alpha must lie in [-1, 0)"),
        lrs=(lambda v: len(v) > 0 and all(x > 0 for x in v), "needs at least one learning rate, each > 0"),
        expdecay_readings=(lambda v: len(v) > 0 and len(set(v)) == len(v), "needs at least one reading, no repeats"),
        alpha_lr=positive, epochs=positive, batch_size=positive, expdecay_seeds=nonneg,
        max_length=(lambda v: 8 <= v <= 512, "must lie in [8, 512]"), seeds=positive,
        train_examples=nonneg, eval_examples=nonneg, wide_seeds=positive,
        selection_holdout=(lambda v: 0 <= v < 1, "must lie in [0, 1): 0 selects on the validation split"),
        spectra_examples=(lambda v: v >= 2, "needs >= 2 examples"),
    )

    @property
    def selects(self) -> bool:
        """Whether a learning rate or α₀ is selected (then the comparison seeds follow the selection seed)."""
        return len(self.lrs) > 1 or ("softdecay" in self.variants and len(self.alphas) > 1)

    def comparison_seeds(self) -> list[int]:
        return run_seeds(self.seed + 1 if self.selects else self.seed, self.seeds)



#: the larger encoder's runs (`Params.wide_model`): the task, the paper's learning rate (App. B) and the middle of
#: its α₀ grid, both fixed (no selection stage)
WIDE_TASK, WIDE_LR, WIDE_ALPHA = "RTE", 2e-5, -0.5

#: how the chapter names each metric
METRIC_NAMES = {"acc": "accuracy", "f1": "F1", "mcc": "Matthews correlation", "pearson": "Pearson correlation",
                "spearman": "Spearman correlation"}


def primary_metric(task: str) -> str:
    """The metric a selection maximises: the task's first (accuracy; MCC for CoLA; Pearson for STS-B)."""
    return TASK_METRICS[task][0]


def paper_tables() -> pd.DataFrame:
    """Yan et al. Table 2 and Table 6 (data/yan_2022_table{2,6}.csv) in long form:
    task, metric, model, variant, value, significance."""
    t2 = pd.read_csv(REPO_ROOT / "data" / "yan_2022_table2.csv", keep_default_na=False)
    t6 = pd.read_csv(REPO_ROOT / "data" / "yan_2022_table6.csv", keep_default_na=False).assign(significance="")
    return pd.concat([t2, t6], ignore_index=True)


def majority_baseline(task: str, source: str = "auto") -> dict[str, float]:
    """The task's metrics for always predicting the validation split's majority class (MCC is 0;
    MRPC's F1 is high because its majority class is the positive one): the floor a fine-tuned
    model must clear."""
    ev = D.load_glue(task, "validation", source)
    labels = np.asarray([int_label(v) for v in ev.labels])
    major = np.bincount(labels).argmax()
    return glue_metrics(task, np.full_like(labels, major), labels)


def paper_model_for(model: str, reported: set[str], fallback: str = "bert-base-uncased") -> str:
    """The paper's model whose numbers sit beside `model`'s rows: the same model where Table 2 reports
    it (bert-base-uncased, albert-base-v1, distilbert-base-uncased), BERT-base otherwise (RoBERTa is not
    in Table 2; MiniLM is not in the paper); the table names which in its `paper model` column."""
    return model if model in reported else fallback



def paper_value(model: str, task: str, metric: str, variant: str) -> float:
    """One number of the paper's Table 2 / Table 6 (NaN where it reports none)."""
    t = paper_tables()
    hit = t[(t.model == model) & (t.task == task) & (t.metric == metric) & (t.variant == variant)]
    return float(hit.value.iloc[0]) if len(hit) else float("nan")


def expdecay_margin() -> float:
    """What "no substantial improvement" allows (Table 6, App. D.1): the largest |ExpDecay − baseline| the
    paper reports for BERT-base on any task and metric while calling none of them substantial (points)."""
    t = paper_tables()
    bert = t[t.model == "bert-base-uncased"]
    base = bert[bert.variant == "baseline"].set_index(["task", "metric"]).value
    exp = bert[bert.variant == "expdecay"].set_index(["task", "metric"]).value
    return float((exp - base.reindex(exp.index)).abs().max())


def paper_gains(model: str = "bert-base-uncased") -> pd.DataFrame:
    """The paper's relative change Δ% of SoftDecay over its baseline (Table 2), per task and metric."""
    paper = paper_tables().query("model == @model")
    wide = paper.pivot_table(index=["task", "metric"], columns="variant", values="value").reset_index()
    wide["gain %"] = 100.0 * (wide["softdecay"] - wide["baseline"]) / wide["baseline"].abs()
    return wide[["task", "metric", "baseline", "softdecay", "gain %"]]
