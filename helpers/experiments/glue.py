"""The GLUE chapter (Yan et al. §5.2, App. B, D): the grid of fine-tuning runs (models × tasks × variants
× initial α × seeds) through the results cache, per-layer spectra of the fine-tuned models, and the
tables set beside the paper's Table 2 and Table 6. One run is `helpers.train.glue.finetune`; the
spectra and the architecture check are `helpers.hf.glue`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

import numpy as np
import pandas as pd

from .. import data as D
from ..book import results
from ..book.params import ChapterParams, nonneg, positive, rules
from ..book.runtime import REPO_ROOT, run_seeds, seed_everything
from ..core.findings import Finding, finding_key
from ..core.stats import Interval, t_interval
from ..data.glue import TASK_METRICS, _int_label, encode_task, glue_metrics
from ..hf.glue import architecture_check, layer_spectra
from ..hf.models import DESCRIPTIONS, quiet_loading
from ..train.glue import FinetuneConfig, finetune, load_classifier

Task = Literal["CoLA", "SST-2", "MRPC", "QNLI", "RTE"]
Variant = Literal["baseline", "softdecay", "expdecay"]
Reading = Literal["top5", "all", "squared"]

#: the finding key of SoftDecay − baseline on each task (Table 2)
SOFTDECAY_KEYS = {"CoLA": "glue-softdecay-cola", "SST-2": "glue-softdecay-sst-2", "MRPC": "glue-softdecay-mrpc",
                  "QNLI": "glue-softdecay-qnli", "RTE": "glue-softdecay-rte"}
#: the finding key of ExpDecay − baseline under each reading (Table 6)
EXPDECAY_KEYS = {"top5": "glue-expdecay-top5", "all": "glue-expdecay-all", "squared": "glue-expdecay-squared"}
#: how a finding says each ExpDecay reading
READING_TEXT = {"top5": "the five largest singular values, the authors' commented-out K",
                "all": "every singular value, the formula as printed",
                "squared": "the squared form of Wang et al. (2020)"}
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
        "ci": dict(tasks=("RTE", "MRPC"), train_examples=48, eval_examples=48, batch_size=8, max_length=48,
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


@dataclass
class Result(results.Result):
    """Everything the chapter shows. `runs`: one record per fine-tuning run (model, task, `variant`
    label — baseline, softdecay, `expdecay (<reading>)` —, initial α (None but for SoftDecay), learning
    rate, seed, `stage` (selection or comparison), whether it came from the committed results, and its
    `history`: per-epoch training loss, validation metrics, α, seconds, and `spectra`). The tables are
    lists of records: `selection` (every candidate's score and the choice), `summary` (Table 2 / 6
    counterpart over the comparison seeds), `paired` (per-seed difference to the baseline with a 95 %
    interval), `paper_gains` (the paper's Δ% for BERT-base), `spectrum` (last-layer spectrum statistics
    of the first comparison seed), `alphas` (learned α), `architectures` (the surgery check on four
    random tiny classifiers), `timing` (seconds per epoch)."""

    models: list[str]
    tasks: list[str]
    seeds: list[int]
    scale: str
    epochs: int
    train_examples: int
    runs: list[dict]
    selection: list[dict]
    summary: list[dict]
    paired: list[dict]
    paper_gains: list[dict]
    spectrum: list[dict]
    alphas: list[dict]
    architectures: list[dict]
    timing: list[dict]
    #: the pretrained encoder's per-layer spectra on each task's validation examples before any fine-tuning
    #: (`raw_spectra`: {model: {task: layer_spectra rows}}), and how many examples the spectra read
    raw: dict = field(default_factory=dict)
    #: the selection repeated on a held-out share of the training split (`holdout_selection`; committed runs
    #: only, [] when they are not committed): the selection table's rows plus `holdout`
    holdout_selection: list = field(default_factory=list)
    spectra_examples: int = 0
    #: the larger encoder fine-tuned on RTE beside the grid (`Params.wide_model`; "" and [] when none): one record
    #: per run (model, task, variant, alpha, lr, seed, from_cache, `final` scores, per-epoch `val_acc`,
    #: `val_loss`, `train_loss` and learned `alpha_path`, train_examples, epoch_seconds), and the majority class's
    #: scores on that task
    wide_model: str = ""
    wide: list = field(default_factory=list)
    wide_majority: dict = field(default_factory=dict)

    def run_for(self, task: str, variant: str, seed: int, model: str | None = None) -> dict | None:
        """The comparison run record of (model, task, variant label, seed), or None."""
        model = model or self.models[0]
        return next((r for r in self.runs if r["stage"] == "comparison" and
                     (r["model"], r["task"], r["variant"], r["seed"]) == (model, task, variant, seed)), None)

    # --- the statistics the chapter reads (figures/glue.py only formats them) ---------------------

    def differences(self, task: str, variant: str = "softdecay", metric: str | None = None,
                    model: str | None = None) -> list[float]:
        """Per-seed `variant` − baseline final validation score (points of `metric`, default the task's
        first) on every comparison seed both ran, in seed order."""
        metric = metric or primary_metric(task)
        out = []
        for seed in self.seeds:
            a, b = self.run_for(task, variant, seed, model), self.run_for(task, "baseline", seed, model)
            if a is not None and b is not None:
                out.append(a["history"]["final"][metric] - b["history"]["final"][metric])
        return out

    def paired_interval(self, task: str, variant: str = "softdecay", metric: str | None = None,
                        model: str | None = None) -> Interval:
        """Mean paired difference `variant` − baseline with its 95 % Student-t interval over seeds."""
        return t_interval(self.differences(task, variant, metric, model))

    def detectable(self, task: str, variant: str = "softdecay", metric: str | None = None,
                   power: float = 0.8) -> float:
        """The smallest true difference these seeds would detect (interval excluding 0) with probability
        `power`, given the seed-to-seed spread of the paired differences (`detectable_effect`)."""
        return detectable_effect(self.differences(task, variant, metric), power)

    def paper_gain(self, task: str, metric: str | None = None) -> float:
        """The paper's SoftDecay − baseline (Table 2, points) for the model set beside ours (NaN if absent)."""
        metric = metric or primary_metric(task)
        row = next((r for r in self.summary if (r["model"], r["task"], r["metric"]) == (self.models[0], task, metric)),
                   None)
        if row is None or row.get("paper softdecay") is None or row.get("paper baseline") is None:
            return float("nan")
        return float(row["paper softdecay"]) - float(row["paper baseline"])

    def flattening(self, model: str | None = None) -> Interval:
        """App. Fig. 9: SoftDecay − baseline median normalised singular value of the fine-tuned model's
        last-layer output, averaged over the tasks for each seed, with its t interval over seeds."""
        per_seed = []
        for seed in self.seeds:
            d = []
            for task in self.tasks:
                a, b = self.run_for(task, "softdecay", seed, model), self.run_for(task, "baseline", seed, model)
                if a is not None and b is not None:
                    d.append(a["history"]["spectra"]["layers"][-1]["median"]
                             - b["history"]["spectra"]["layers"][-1]["median"])
            if d:
                per_seed.append(float(np.mean(d)))
        return t_interval(per_seed) if per_seed else Interval(float("nan"), float("nan"), float("nan"), 0, "t")

    def majority_margins(self) -> dict[str, float]:
        """Per task: the tuned baseline's mean score minus the majority class's (first metric, points)."""
        out = {}
        for r in self.summary:
            if r["model"] == self.models[0] and r["metric"] == primary_metric(r["task"]):
                out[r["task"]] = float(r["baseline"]) - float(r["majority class"])
        return out

    def alpha_max_move(self) -> float:
        """The largest |mean α after the last epoch − α₀| over tasks; NaN without SoftDecay runs."""
        moves = []
        for r in self.alphas:
            last = max((k for k in r if k.startswith("α after epoch") and k.endswith("mean")),
                       key=lambda k: int(k.split()[3]), default=None)
            if last is not None:
                moves.append(abs(r[last] - r["initial α"]))
        return float(max(moves)) if moves else float("nan")

    def expdecay_signs(self) -> dict[str, int]:
        """The sign pattern of ExpDecay − baseline over every (task, metric, reading): how many mean
        differences and how many single-seed differences are below zero, out of how many, and how many
        95 % intervals lie wholly below and wholly above zero."""
        rows = [r for r in self.paired if r["variant"].startswith("expdecay")]
        seeds = [d for r in rows for d in r["differences"]]

        def bound(r, k):
            return r[k] if r[k] is not None else float("nan")        # None: NaN read back from JSON
        return {"means": len(rows), "means_below": sum(r["mean difference"] < 0 for r in rows),
                "seeds": len(seeds), "seeds_below": sum(d < 0 for d in seeds),
                "intervals_below": sum(bound(r, "95% high") < 0 for r in rows),
                "intervals_above": sum(bound(r, "95% low") > 0 for r in rows)}

    def expdecay_widths(self, task: str, metric: str | None = None) -> tuple[float, float]:
        """The narrowest and the widest 95 % t interval (high − low, points) of ExpDecay − baseline over the
        readings, on `task`'s `metric` (default its first); NaNs without ExpDecay runs."""
        metric = metric or primary_metric(task)
        w = [r["95% high"] - r["95% low"] for r in self.paired
             if r["variant"].startswith("expdecay") and (r["task"], r["metric"]) == (task, metric)
             and r["95% low"] is not None and r["95% high"] is not None     # None: NaN read back from JSON
             and np.isfinite(r["95% high"] - r["95% low"])]
        return (float(min(w)), float(max(w))) if w else (float("nan"), float("nan"))

    def size_tasks(self) -> list[str]:
        """The tasks in order of their training-set size (the paper's Fig. 8 reads size), smallest first."""
        n = {t: r["history"]["train_examples"] for t in self.tasks
             if (r := self.run_for(t, "baseline", self.seeds[0])) is not None}
        return sorted(n, key=n.get)

    def value_at(self, task: str, level: float = 0.8, layer: int = -1, source: str = "baseline",
                 model: str | None = None) -> Interval:
        """The paper's Fig. 8 reading: the normalised singular value at which `layer`'s CDF reaches `level`
        (the `level` quantile of the pooled values; the paper compares the layers' values "for the same
        percentage 0.8"), on `task`'s validation examples. `source` "baseline": the fine-tuned baselines,
        mean and t interval over the comparison seeds; "raw": the pretrained encoder before fine-tuning
        (one measurement, no interval)."""
        model = model or self.models[0]
        if source == "raw":
            rows = self.raw.get(model, {}).get(task)
            vals = [] if rows is None else [_quantile_at(rows[layer]["quantiles"], level)]
            return (Interval(vals[0], float("nan"), float("nan"), 1, "exact") if vals else
                    Interval(float("nan"), float("nan"), float("nan"), 0, "t"))
        vals = [_quantile_at(r["history"]["spectra"]["layers"][layer]["quantiles"], level) for seed in self.seeds
                if (r := self.run_for(task, "baseline", seed, model)) is not None]
        return t_interval(vals) if vals else Interval(float("nan"), float("nan"), float("nan"), 0, "t")

    def finetuning_shift(self, task: str, level: float = 0.8, layer: int = -1, model: str | None = None) -> Interval:
        """Fine-tuned baseline − pretrained encoder: the change fine-tuning makes to `value_at`, with the t
        interval over the comparison seeds (the raw encoder is one fixed measurement)."""
        model = model or self.models[0]
        raw = self.value_at(task, level, layer, "raw", model).estimate
        vals = [_quantile_at(r["history"]["spectra"]["layers"][layer]["quantiles"], level) - raw
                for seed in self.seeds if (r := self.run_for(task, "baseline", seed, model)) is not None]
        return t_interval(vals) if vals and np.isfinite(raw) else Interval(float("nan"), float("nan"),
                                                                            float("nan"), 0, "t")

    def raw_range(self, level: float = 0.8) -> tuple[tuple[str, float], tuple[str, float]]:
        """The tasks where the pretrained encoder's last-layer `value_at` is lowest and highest, with the values
        (("–", NaN) twice without the raw spectra)."""
        vals = {t: self.value_at(t, level, source="raw").estimate for t in self.tasks}
        vals = {t: v for t, v in vals.items() if np.isfinite(v)}
        if not vals:
            return ("–", float("nan")), ("–", float("nan"))
        lo, hi = min(vals, key=vals.get), max(vals, key=vals.get)
        return (lo, vals[lo]), (hi, vals[hi])

    def spectra_n(self, task: str) -> int:
        """How many validation examples the spectra of `task` read: `spectra_examples`, or the split if smaller."""
        r = self.run_for(task, "baseline", self.seeds[0])
        return min(self.spectra_examples, r["history"]["eval_examples"]) if r is not None else 0

    def expdecay_labels(self) -> list[str]:
        """The ExpDecay variant labels of the comparison runs, in `READINGS` order."""
        made = {r["variant"] for r in self.runs if r["stage"] == "comparison"}
        return [label for _s, label in READINGS.values() if label in made]

    def expdecay_effect(self, label: str, model: str | None = None) -> Interval:
        """Table 6 for one ExpDecay reading (`label`, e.g. "expdecay (all)"): per comparison seed the mean over
        the tasks of ExpDecay − baseline on each task's first metric (points), with its t interval over the
        seeds every task ran (as `flattening` pools the tasks)."""
        per_task = {t: dict(zip(self.seeds, [None] * len(self.seeds), strict=True)) for t in self.tasks}
        for task in self.tasks:
            metric = primary_metric(task)
            for seed in self.seeds:
                a, b = self.run_for(task, label, seed, model), self.run_for(task, "baseline", seed, model)
                if a is not None and b is not None:
                    per_task[task][seed] = a["history"]["final"][metric] - b["history"]["final"][metric]
        per_seed = [float(np.mean([per_task[t][s] for t in self.tasks])) for s in self.seeds
                    if all(per_task[t][s] is not None for t in self.tasks)]
        return t_interval(per_seed) if per_seed else Interval(float("nan"), float("nan"), float("nan"), 0, "t")

    def paper_expdecay_gain(self) -> float:
        """The paper's ExpDecay − baseline (Table 6 against Table 2, points) averaged over this run's tasks, on
        each task's first metric, for the model set beside ours (NaN where a task has no paper number)."""
        model = self.models[0]
        vals = []
        for task in self.tasks:
            row = next((r for r in self.summary
                        if (r["model"], r["task"], r["metric"]) == (model, task, primary_metric(task))), None)
            got = [None if row is None else row.get(k) for k in ("paper expdecay", "paper baseline")]
            vals.append(float("nan") if None in got else float(got[0]) - float(got[1]))
        return float(np.mean(vals)) if vals else float("nan")

    def size_effect(self, level: float = 0.8, model: str | None = None) -> Interval:
        """App. D.2 (Fig. 8): the change fine-tuning makes to the last layer's `value_at` on the task with the
        largest training set minus that on the task with the smallest (per comparison seed; each task's
        pretrained value subtracted, so the sentences' own spectra drop out), with its t interval over seeds.
        Below 0: the larger training set leaves the more skewed spectrum, the paper's reading."""
        model = model or self.models[0]
        tasks = self.size_tasks()
        if len(tasks) < 2:
            return Interval(float("nan"), float("nan"), float("nan"), 0, "t")
        small, large = tasks[0], tasks[-1]
        raw = {t: self.value_at(t, level, source="raw", model=model).estimate for t in (small, large)}
        vals = []
        for seed in self.seeds:
            a, b = self.run_for(large, "baseline", seed, model), self.run_for(small, "baseline", seed, model)
            if a is None or b is None:
                continue
            va, vb = (_quantile_at(r["history"]["spectra"]["layers"][-1]["quantiles"], level) for r in (a, b))
            vals.append((va - raw[large]) - (vb - raw[small]))
        ok = vals and all(np.isfinite(v) for v in raw.values())
        return t_interval(vals) if ok else Interval(float("nan"), float("nan"), float("nan"), 0, "t")

    def train_sizes(self) -> dict[str, int]:
        """Training examples per task (of the first comparison seed's baseline), in `size_tasks` order."""
        return {t: self.run_for(t, "baseline", self.seeds[0])["history"]["train_examples"] for t in self.size_tasks()}

    def expdecay_margin(self) -> float:
        """What "no substantial improvement" allows (Table 6, App. D.1): the largest |ExpDecay − baseline| the
        paper reports for BERT-base on any task and metric while calling none of them substantial (points)."""
        t = paper_tables()
        bert = t[t.model == "bert-base-uncased"]
        base = bert[bert.variant == "baseline"].set_index(["task", "metric"]).value
        exp = bert[bert.variant == "expdecay"].set_index(["task", "metric"]).value
        return float((exp - base.reindex(exp.index)).abs().max())

    def run_hours(self, variant_prefix: str = "", stage: str | None = None) -> float:
        """Hours of training (the runs' epoch times, one process per run) of the runs whose variant label
        starts with `variant_prefix` and, if given, of that `stage`."""
        return float(sum(sum(r["history"]["epoch_seconds"]) for r in self.runs
                         if r["variant"].startswith(variant_prefix) and stage in (None, r["stage"])) / 3600)

    # --- the larger encoder on RTE (`wide`) ------------------------------------------------------------------

    def wide_seeds(self) -> list[int]:
        """The seeds on which the larger encoder ran both the baseline and SoftDecay, in order."""
        by = {v: {r["seed"] for r in self.wide if r["variant"] == v} for v in ("baseline", "softdecay")}
        return sorted(by["baseline"] & by["softdecay"])

    def wide_run(self, variant: str, seed: int) -> dict | None:
        """The larger encoder's run record of `variant` on `seed`, or None."""
        return next((r for r in self.wide if (r["variant"], r["seed"]) == (variant, seed)), None)

    def wide_scores(self, variant: str = "baseline", metric: str = "acc") -> list[float]:
        """The larger encoder's final validation `metric` of `variant` on every seed it ran, in seed order."""
        return [r["final"][metric] for r in sorted(self.wide, key=lambda r: r["seed"]) if r["variant"] == variant]

    def wide_differences(self, metric: str = "acc") -> list[float]:
        """Per seed: the larger encoder's SoftDecay − baseline final validation `metric` (points), in seed order."""
        return [self.wide_run("softdecay", s)["final"][metric] - self.wide_run("baseline", s)["final"][metric]
                for s in self.wide_seeds()]

    def wide_interval(self, metric: str = "acc") -> Interval:
        """The larger encoder's mean paired SoftDecay − baseline with its 95 % Student-t interval over seeds."""
        return _t_or_nan(self.wide_differences(metric))

    def wide_score(self, variant: str = "baseline", metric: str = "acc") -> Interval:
        """The larger encoder's mean final validation `metric` of `variant` with its t interval over seeds."""
        return _t_or_nan(self.wide_scores(variant, metric))

    def wide_over_majority(self, metric: str = "acc") -> Interval:
        """The larger encoder's baseline minus the majority class (a fixed score), t interval over seeds:
        above 0 when it learns the task beyond always answering the most frequent label."""
        major = self.wide_majority.get(metric, float("nan"))
        return _t_or_nan([s - major for s in self.wide_scores("baseline", metric)])

    def minilm_scores(self, task: str = "RTE", metric: str | None = None) -> list[float]:
        """The grid model's (`models[0]`) tuned baseline on `task`: final validation score per comparison seed."""
        metric = metric or primary_metric(task)
        return [r["history"]["final"][metric] for s in self.seeds
                if (r := self.run_for(task, "baseline", s)) is not None]

    def minilm_score(self, task: str = "RTE", metric: str | None = None) -> Interval:
        """The grid model's tuned baseline on `task`: mean over the comparison seeds with its t interval."""
        return _t_or_nan(self.minilm_scores(task, metric))

    def wide_over_grid(self, metric: str = "acc") -> Interval:
        """The larger encoder's baseline minus the grid model's tuned baseline on the same task (different seeds
        and learning rates, so unpaired): difference of the means with Welch's 95 % t interval."""
        task = self.wide[0]["task"] if self.wide else "RTE"
        return welch_interval(self.wide_scores("baseline", metric), self.minilm_scores(task, metric))

    def wide_detectable(self, metric: str = "acc", power: float = 0.8) -> float:
        """The smallest true SoftDecay − baseline these seeds of the larger encoder detect with `power`."""
        return detectable_effect(self.wide_differences(metric), power)

    def wide_final_losses(self, variant: str = "baseline") -> list[float]:
        """The larger encoder's training loss after the last epoch of `variant`, per seed in seed order."""
        return [r["train_loss"][-1] for r in sorted(self.wide, key=lambda r: r["seed"]) if r["variant"] == variant]

    def wide_final_loss(self, variant: str = "baseline") -> Interval:
        """The mean of `wide_final_losses` with its t interval over seeds."""
        return _t_or_nan(self.wide_final_losses(variant))

    def wide_alpha(self) -> float:
        """The initial α of the larger encoder's SoftDecay runs (NaN without them)."""
        return next((float(r["alpha"]) for r in self.wide if r["variant"] == "softdecay"), float("nan"))

    def wide_hours(self) -> float:
        """Hours of training of the larger encoder's runs (their epoch times, one process per run)."""
        return float(sum(sum(r["epoch_seconds"]) for r in self.wide) / 3600)

    def wide_paper(self, metric: str = "acc") -> tuple[float, float]:
        """The paper's (baseline, SoftDecay) on the larger encoder's task for the model set beside it (Table 2)."""
        task = self.wide[0]["task"] if self.wide else WIDE_TASK
        model = paper_model_for(self.wide_model, set(paper_tables().model))
        return paper_value(model, task, metric, "baseline"), paper_value(model, task, metric, "softdecay")

    def wide_finding(self) -> Finding | None:
        """Table 2's RTE gain tested on the larger encoder (None without its runs), listed after the grid's
        per-task findings; a reduced test in the claim's scope, it decides beside them (`core.findings.judge`)."""
        d = self.wide_differences()
        if not d:
            return None
        model, first = self.wide_model, self.wide_run("softdecay", self.wide_seeds()[0])
        task, lr, alpha = first["task"], first["lr"], first["alpha"]
        paper_model = paper_model_for(model, set(paper_tables().model))
        base, sd = self.wide_paper()
        what = DESCRIPTIONS.get(model, "").split(": ", 1)[-1]
        return Finding(
            key=finding_key(WIDE_KEYS, (task, model), "glue.WIDE_KEYS"), paper="yan2022",
            where="Table 2", claim_id="yan-table2-gain",
            claim=f"Fine-tuning {paper_model} with SoftDecay raises its {task} validation accuracy from {base:.2f} "
                  f"to {sd:.2f}",
            measured=(f"{model} fine-tuned on {task} ({first['train_examples']:,} training examples, "
                      f"{len(first['val_acc'])} epochs, lr {lr:g}, α₀ {alpha:+.1f}, neither selected), {len(d)} seeds "
                      "paired with the baseline" + (f"; {model} is {what}" if what else "")),
            quantity=f"SoftDecay − baseline validation accuracy on {task}, points",
            effect=t_interval(d), direction="above", reference=0.0, reference_label="0", paper_value=sd - base,
            digits=2, reduced=f"on {model} in place of {paper_model}, with α₀ {alpha:+.1f} fixed, not selected",
            label=f"{task}, {model}",
            scale=(f"{self.scale}: {model} in place of {paper_model}; {len(d)} seeds where the paper reports one run; "
                   f"lr {lr:g} (the paper's) and α₀ {alpha:+.1f} fixed, where the paper selects α₀ from -0.2, -0.5 "
                   "and -0.8"),
            section="glue-rte-wide", chapter="glue", extra={"detectable_80": self.wide_detectable()})

    def findings(self) -> list[Finding]:
        """The chapter's findings: SoftDecay − baseline per task (Table 2), then on RTE with the larger encoder
        (`wide_finding`, after the grid's; it decides beside them), the flatter last-layer spectrum
        (App. Fig. 9), ExpDecay − baseline per reading over the tasks (Table 6: "no substantial improvement",
        read as alike within the paper's own largest ExpDecay change; the printed formula first), the
        training-set size (App. D.2, Fig. 8), and the paper's own models (not testable offline)."""
        model = self.models[0]
        out = []
        reported = set(paper_tables().model)
        paper_model = paper_model_for(model, reported)
        reduced = "" if model == paper_model else f"on {model} in place of {paper_model}"
        for task in self.tasks:
            d = self.differences(task)
            if not d:
                continue
            metric = primary_metric(task)
            row = next(r for r in self.summary if (r["model"], r["task"], r["metric"]) == (model, task, metric))
            run = self.run_for(task, "softdecay", self.seeds[0], model)
            n_train = run["history"]["train_examples"]
            name = METRIC_NAMES[metric]
            out.append(Finding(
                key=finding_key(SOFTDECAY_KEYS, task, "glue.SOFTDECAY_KEYS"), paper="yan2022", where="Table 2",
                claim_id="yan-table2-gain",
                claim=(f"Fine-tuning {paper_model} with SoftDecay raises its {task} validation {name} "
                       f"from {row['paper baseline']:.2f} to {row['paper softdecay']:.2f}"),
                measured=(f"{model} fine-tuned on {task} ({n_train:,} training examples, {self.epochs} epochs, "
                          f"lr {row['lr']:g}, α₀ {row['α₀']:+.1f}), {len(d)} seeds paired with the baseline"),
                quantity=f"SoftDecay − baseline validation {name}, points",
                effect=t_interval(d), direction="above", reference=0.0, reference_label="0",
                paper_value=self.paper_gain(task), digits=2, reduced=reduced, label=f"{task}, {model}",
                scale=(f"{self.scale}: {model} in place of {paper_model}; {len(d)} seeds where the paper "
                       "reports one run"),
                section="glue-scores", chapter="glue",
                extra={"detectable_80": self.detectable(task)}))
        wide = self.wide_finding()
        if wide is not None:
            out.append(wide)
        flat = self.flattening()
        if flat.n:
            out.append(Finding(
                key="glue-flatter-spectrum", paper="yan2022", where="App. D, Fig. 9", claim_id="yan-fig9-flatter",
                claim=(f"Fine-tuned with SoftDecay, {paper_model}'s last layer has a flatter singular-value CDF "
                       f"than fine-tuned without it"),
                measured=(f"{model} fine-tuned on {', '.join(self.tasks)} with and without SoftDecay, "
                          f"{flat.n} paired seeds, validation sentences"),
                quantity="SoftDecay − baseline median normalised singular value of the last layer (mean over tasks)",
                effect=flat, direction="above", digits=3, section="glue-spectra", chapter="glue", reduced=reduced,
                scale=f"{self.scale}: {model} in place of {paper_model}"))
        size = self.size_effect()
        if size.n:
            sizes = self.train_sizes()
            small, large = next(iter(sizes)), list(sizes)[-1]
            out.append(Finding(
                key="glue-size", paper="yan2022", where="App. D.2, Fig. 8", claim_id="yan-size-uniformity",
                claim=("Fine-tuned on a larger training set, a model's last layer has a more skewed spectrum (a "
                       "smaller normalised singular value at CDF 0.8): QNLI (105k) against RTE (2.5k) for BERT"),
                measured=(f"{model} fine-tuned without SoftDecay on {large} ({sizes[large]:,} training examples) and "
                          f"{small} ({sizes[small]:,}), {size.n} seeds; {self.spectra_n(large)} validation examples "
                          "each, read before and after fine-tuning"),
                quantity=(f"change fine-tuning makes to the last layer's value at CDF 0.8, {large} − {small}"),
                effect=size, direction="below", digits=3, section="glue-fig8", chapter="glue",
                reduced=(f"on {model}, {large} against {small}, in place of {paper_model}, QNLI against RTE"
                         if model != paper_model else ""),
                scale=f"{self.scale}: {model} in place of {paper_model}; {large} and {small} in place of QNLI and RTE"))
        paper_ed, margin = self.paper_expdecay_gain(), self.expdecay_margin()
        tasks = ", ".join(self.tasks)
        order = [READINGS[r][1] for r in ("all", "top5", "squared")]        # the formula as printed first
        for label in sorted(self.expdecay_labels(), key=order.index):
            reading = next(k for k, (_s, lab) in READINGS.items() if lab == label)
            eff = self.expdecay_effect(label)
            if not eff.n:
                continue
            out.append(Finding(
                key=finding_key(EXPDECAY_KEYS, reading, "glue.EXPDECAY_KEYS"),
                paper="yan2022", where="Table 6, App. D.1",
                claim_id="yan-table6-expdecay",
                claim=(f"An exponential-decay regulariser of the singular values (ExpDecay) brings no substantial "
                       f"improvement: on {tasks} it changes {paper_model}'s score by {paper_ed:+.2f} points on "
                       "average"),
                measured=(f"{model} fine-tuned on {tasks} with ExpDecay read as `{reading}` "
                          f"({READING_TEXT[reading]}), {eff.n} seeds paired with the baseline"),
                quantity=f"ExpDecay ({reading}) − baseline, mean over {tasks} of each task's first metric, points",
                effect=eff, direction="at most", margin=margin, reference=0.0,
                reference_label=f"+{margin:.2f} (no substantial improvement: at most the largest change the paper "
                                "still calls none; a loss does not contradict it)",
                paper_value=None if np.isnan(paper_ed) else paper_ed, digits=2, reduced=reduced, label=reading,
                scale=f"{self.scale}: {model} in place of {paper_model}; {eff.n} seeds where the paper reports one run",
                section="glue-expdecay", chapter="glue"))
        if not set(self.models) & reported:
            out.append(Finding(
                key="glue-paper-models", paper="yan2022", where="Table 2, Table 6", claim_id="yan-table2-gain",
                claim=("SoftDecay improves BERT-base, ALBERT and DistilBERT on most of CoLA, SST-2, MRPC, QNLI "
                       "and RTE, and ExpDecay brings no substantial improvement"),
                measured="not run: the paper's models and QNLI's training split come from the Hugging Face hub",
                quantity="SoftDecay − baseline per model and task, points", effect=None,
                needs="the Hugging Face hub (and a GPU for SST-2 and QNLI in hours, not days)",
                command="make rerun CHAPTER=glue SCALE=paper", section="glue-differs", chapter="glue"))
        return out


#: the larger encoder's runs (`Params.wide_model`): the task, the paper's learning rate (App. B) and the middle of
#: its α₀ grid, both fixed (no selection stage)
WIDE_TASK, WIDE_LR, WIDE_ALPHA = "RTE", 2e-5, -0.5
#: the finding key of the larger encoder's test, by (task, model)
WIDE_KEYS = {("RTE", "all-mpnet-base-v2"): "glue-softdecay-rte-mpnet",
             ("RTE", "all-MiniLM-L6-v2"): "glue-softdecay-rte-minilm"}


def _t_or_nan(values) -> Interval:
    """`t_interval` of `values`, or an all-NaN interval of n 0 when there are none."""
    return t_interval(values) if len(values) else Interval(float("nan"), float("nan"), float("nan"), 0, "t")


def welch_interval(a, b, level: float = 0.95) -> Interval:
    """mean(a) − mean(b) of two independent samples with Welch's Student-t interval (Welch–Satterthwaite
    degrees of freedom); NaN bounds when either sample has fewer than two values, all NaN when one is empty."""
    from scipy import stats

    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if not a.size or not b.size:
        return Interval(float("nan"), float("nan"), float("nan"), 0, "t", level)
    diff = float(a.mean() - b.mean())
    if a.size < 2 or b.size < 2:
        return Interval(diff, float("nan"), float("nan"), int(a.size + b.size), "t", level)
    va, vb = a.var(ddof=1) / a.size, b.var(ddof=1) / b.size
    if va + vb == 0:
        return Interval(diff, diff, diff, int(a.size + b.size), "t", level)
    df = (va + vb) ** 2 / (va ** 2 / (a.size - 1) + vb ** 2 / (b.size - 1))
    half = float(stats.t.ppf(0.5 + level / 2, df) * np.sqrt(va + vb))
    return Interval(diff, diff - half, diff + half, int(a.size + b.size), "t", level)


def paper_value(model: str, task: str, metric: str, variant: str) -> float:
    """One number of the paper's Table 2 / Table 6 (NaN where it reports none)."""
    t = paper_tables()
    hit = t[(t.model == model) & (t.task == task) & (t.metric == metric) & (t.variant == variant)]
    return float(hit.value.iloc[0]) if len(hit) else float("nan")


def wide_params(p: Params) -> Params | None:
    """The Params of the larger encoder's runs (None when `p.wide_model` is ""): `wide_model` on `WIDE_TASK`,
    baseline and SoftDecay at `WIDE_LR` and `WIDE_ALPHA` (so no selection: the seeds start at `p.seed`),
    `wide_seeds` seeds; every other setting (epochs, batch, length, precision, …) is `p`'s."""
    if not p.wide_model:
        return None
    return p.with_(models=(p.wide_model,), tasks=(WIDE_TASK,), variants=("baseline", "softdecay"), lrs=(WIDE_LR,),
                   alphas=(WIDE_ALPHA,), seeds=p.wide_seeds, expdecay_readings=("all",), expdecay_seeds=1,
                   selection_holdout=0.0)


def wide_specs(p: Params) -> list[results.RunSpec]:
    """The larger encoder's runs as the grid runner takes them: baseline then SoftDecay, each on every seed."""
    q = wide_params(p)
    if q is None:
        return []
    return [_spec(q, q.wide_model, WIDE_TASK, kind, WIDE_ALPHA if kind == "softdecay" else None, None, WIDE_LR, seed)
            for kind in q.variants for seed in q.comparison_seeds()]


def wide_record(spec: results.RunSpec, h: dict, hit: bool) -> dict:
    """One run of the larger encoder as the Result keeps it: its settings, final scores and per-epoch curves."""
    v = spec.extra
    return {"model": v["model"], "task": v["task"], "variant": v["variant"], "alpha": v["alpha"], "lr": v["lr"],
            "seed": v["seed"], "from_cache": hit, "final": h["final"],
            "val_acc": [e.get("acc") for e in h.get("eval", [])],
            "val_loss": [e.get("loss") for e in h.get("eval", [])],
            "train_loss": list(h.get("train_loss", [])), "alpha_path": list(h.get("alpha", [])),
            "train_examples": h.get("train_examples"), "epoch_seconds": list(h.get("epoch_seconds", []))}


def _quantile_at(quantiles: list[float], level: float) -> float:
    """The `level` quantile of a CDF stored as equally spaced quantiles (level 0 .. 1), interpolated."""
    q = np.asarray(quantiles, dtype=float)
    return float(np.interp(level, np.linspace(0, 1, q.size), q))


def raw_spectra(p: Params) -> dict:
    """The paper's Fig. 8 control: each model's per-layer spectra (`hf.glue.layer_spectra`, as the fine-tuned
    runs measure them) on the first `spectra_examples` validation examples of every task, before any
    fine-tuning (the pretrained encoder; the untrained classification head does not enter the hidden states)."""
    out: dict = {}
    for model in p.models:
        out[model] = {}
        for task in p.tasks:
            fc = FinetuneConfig(task=task, model=model, variant="baseline", seed=p.seed, max_length=p.max_length)
            m, tok = load_classifier(fc, 2)
            ev = encode_task(tok, task, "validation", 0, 0, p.max_length)
            out[model][task] = layer_spectra(m, tok, ev, n=p.spectra_examples)["layers"]
    return out


def _run_name(model: str, task: str, kind: str, alpha: float | None, reading: str | None, lr: float,
              seed: int, holdout: float = 0.0) -> str:
    tag = kind + (f"{alpha:+.1f}" if alpha is not None else "") + (f"-{reading}" if reading else "")
    held = f"-heldout{holdout:g}" if holdout else ""
    return f"{model.replace('/', '_')}-{task}-{tag}-lr{lr:g}-seed{seed}{held}"


def finetune_one(p: Params, model: str, task: str, kind: str, alpha: float | None, reading: str | None,
                 lr: float, seed: int, holdout: float = 0.0) -> dict:
    """One fine-tuning run and the spectra of the fine-tuned model. Outside `ci` it checkpoints after
    every epoch under `book.results.checkpoint_dir("glue", key)` and a rerun after a kill resumes;
    the checkpoint is removed once the run is done."""
    fc = FinetuneConfig(task=task, model=model, variant=kind, alpha=alpha if alpha is not None else -0.5,
                        lr=lr, alpha_lr=p.alpha_lr, epochs=p.epochs, batch_size=p.batch_size, max_length=p.max_length,
                        train_examples=p.train_examples, eval_examples=p.eval_examples, seed=seed)
    if reading is not None:
        fc.expdecay.update(READINGS[reading][0])
    key = p.cache_key(drop=GRID, **_run_values(model, task, kind, alpha, reading, lr, seed, holdout))
    ckpt = None if p.scale == "ci" else results.checkpoint_dir("glue", key) / "finetune.pt"
    h = finetune(fc, device=p.device, keep_model=True, checkpoint=ckpt, precision=p.precision, holdout=holdout)
    if ckpt is not None:
        ckpt.unlink(missing_ok=True)
    m, tok = h.pop("_model"), h.pop("_tokenizer")
    ev = encode_task(tok, task, "validation", 0, 0, p.max_length)
    h["spectra"] = layer_spectra(m, tok, ev, n=p.spectra_examples, device=next(m.parameters()).device)
    return h


#: the Params fields a single run replaces by its own values in the cache key
GRID = ("models", "tasks", "variants", "alphas", "lrs", "seeds", "seed", "expdecay_readings", "expdecay_seeds",
        "selection_holdout", "wide_model", "wide_seeds")


def _run_values(model, task, kind, alpha, reading, lr, seed, holdout: float = 0.0) -> dict[str, Any]:
    """A run's own values in its cache key; `holdout` only when > 0 (the validation-scored runs' keys stay)."""
    out = dict(model=model, task=task, variant=kind, alpha=alpha, reading=reading, lr=lr, seed=seed)
    return out | ({"selection_holdout": holdout} if holdout else {})


#: how the chapter names each metric
METRIC_NAMES = {"acc": "accuracy", "f1": "F1", "mcc": "Matthews correlation", "pearson": "Pearson correlation",
                "spearman": "Spearman correlation"}


def detectable_effect(differences, power: float = 0.8, level: float = 0.95) -> float:
    """The smallest true mean difference a paired t test on these many seeds detects (its `level`
    interval excludes 0) with probability `power`, at the observed seed-to-seed spread:
    (t_{(1+level)/2, n−1} + t_{power, n−1}) · sd / √n. NaN with fewer than two differences."""
    from scipy import stats

    d = np.asarray(differences, dtype=float)
    if d.size < 2:
        return float("nan")
    df = d.size - 1
    return float((stats.t.ppf(0.5 + level / 2, df) + stats.t.ppf(power, df)) * d.std(ddof=1) / np.sqrt(d.size))


def primary_metric(task: str) -> str:
    """The metric a selection maximises: the task's first (accuracy; MCC for CoLA; Pearson for STS-B)."""
    return TASK_METRICS[task][0]


class _Finetune:
    """Fine-tunes one (model, task, kind, α, reading, lr, seed) of the grid (`finetune_one`). An object rather
    than a closure, so a grid job (`make grid`) can carry it to another process."""

    def __init__(self, p: Params, *run: Any, holdout: float = 0.0):
        self.p, self.run, self.holdout = p, run, holdout

    def __call__(self, checkpoint=None) -> dict:
        return finetune_one(self.p, *self.run, holdout=self.holdout)


def _spec(p: Params, model, task, kind, alpha, reading, lr, seed, stage: str = "comparison") -> results.RunSpec:
    """One run of the plan; a selection run under `selection_holdout` > 0 is its own run (name and key)."""
    holdout = p.selection_holdout if stage == "selection" else 0.0
    return results.RunSpec(p.CHAPTER, _run_name(model, task, kind, alpha, reading, lr, seed, holdout), p,
                           _Finetune(p, model, task, kind, alpha, reading, lr, seed, holdout=holdout), drop=GRID,
                           extra=_run_values(model, task, kind, alpha, reading, lr, seed, holdout))


class _Undecided(Exception):
    """A selection score is not in the cache yet: the comparison runs of this task cannot be named."""


def _plan_task(p: Params, model: str, task: str, one) -> list[dict]:
    """The runs of one (model, task), in order: the learning rate and α₀ selected on the selection seed, then
    every variant × comparison seed; `one(model, task, kind, alpha, reading, lr, seed, stage)` makes (or reads)
    a run and returns its history (None: not made, which stops the plan after a selection stage with
    `_Undecided`). Returns the selection table's rows."""
    selection = []
    metric = primary_metric(task)
    lr, alpha = p.lrs[0], p.alphas[0]

    def scores_of(hists: dict) -> dict:
        if any(h is None for h in hists.values()):
            raise _Undecided
        return {k: h["final"][metric] for k, h in hists.items()}
    if len(p.lrs) > 1:
        scores = scores_of({x: one(model, task, "baseline", None, None, x, p.seed, "selection") for x in p.lrs})
        lr = max(scores, key=lambda x: (scores[x], -x))
        selection += [{"model": model, "task": task, "choice": "learning rate (baseline)", "value": x,
                       "metric": metric, "score": s, "chosen": x == lr} for x, s in scores.items()]
    if "softdecay" in p.variants and len(p.alphas) > 1:
        scores = scores_of({a: one(model, task, "softdecay", a, None, lr, p.seed, "selection") for a in p.alphas})
        alpha = max(scores, key=lambda a: (scores[a], a))
        selection += [{"model": model, "task": task, "choice": "initial α (SoftDecay)", "value": a,
                       "metric": metric, "score": s, "chosen": a == alpha} for a, s in scores.items()]
    seeds = p.comparison_seeds()
    n_exp = p.expdecay_seeds or p.seeds
    for kind in p.variants:
        if kind == "expdecay":
            for reading in p.expdecay_readings:
                for seed in seeds[:n_exp]:
                    one(model, task, kind, None, reading, lr, seed, "comparison")
            continue
        for seed in seeds:
            one(model, task, kind, alpha if kind == "softdecay" else None, None, lr, seed, "comparison")
    return selection


def runs(p: Params) -> list[results.RunSpec]:
    """The heavy runs `run(p)` makes, as the grid runner takes them (`make grid`), as far as they can be named
    now: a task's comparison runs depend on its selection runs' scores, so until those are in the cache only
    the selection runs are listed (the runner lists again when they are made). The larger encoder's runs
    (`wide_specs`) come last."""
    specs: list[results.RunSpec] = []

    def one(model, task, kind, alpha, reading, lr, seed, stage):
        spec = _spec(p, model, task, kind, alpha, reading, lr, seed, stage)
        specs.append(spec)
        return results.execute(spec)[0] if spec.done() else None
    for model in p.models:
        for task in p.tasks:
            try:
                _plan_task(p, model, task, one)
            except _Undecided:
                continue
    return specs + wide_specs(p)


#: the held-out share of the training split the chapter's second selection is read at (committed runs only)
HOLDOUT = 0.1


def holdout_selection(p: Params, fraction: float = HOLDOUT) -> list[dict]:
    """The selection repeated with `selection_holdout=fraction` (candidates trained on the training split
    less a fixed held-out share and scored on it), read from the committed runs only — never trained here
    (`make grid CHAPTER=glue SCALE=book PARAMS='-p selection_holdout 0.1'` makes them). One row per task
    whose selection runs are all present: the selection table's rows with `holdout` set. [] at `ci`, or
    under a `p` that already selects on a held-out share."""
    if p.scale == "ci" or p.selection_holdout:
        return []
    q = p.with_(selection_holdout=fraction)
    rows: list[dict] = []

    def one(model, task, kind, alpha, reading, lr, seed, stage):
        if stage != "selection":
            return {}
        spec = _spec(q, model, task, kind, alpha, reading, lr, seed, stage)
        return results.execute(spec)[0] if spec.done() else None
    for model in q.models:
        for task in q.tasks:
            try:
                rows += [r | {"holdout": fraction} for r in _plan_task(q, model, task, one)]
            except _Undecided:
                continue
    return rows


def selection_changes(selection: list[dict], held: list[dict]) -> pd.DataFrame:
    """Each choice (model, task, learning rate or α₀) made on the validation split beside the same choice
    made on the held-out share (`holdout_selection`): the value chosen and its score by each, and whether
    they agree. Only choices the held-out selection has made."""
    def chosen(rows):
        return {(r["model"], r["task"], r["choice"]): r for r in rows if r["chosen"]}
    val, out = chosen(selection), []
    for k, h in chosen(held).items():
        v = val.get(k)
        if v is None:
            continue
        out.append({"model": k[0], "task": k[1], "choice": k[2], "metric": h["metric"],
                    "on validation": v["value"], "validation score": v["score"],
                    "on held-out train": h["value"], "held-out score": h["score"],
                    "same": v["value"] == h["value"]})
    return pd.DataFrame(out)


def run(p: Params) -> Result:
    """The selection runs, then every (model, task, variant, seed) of the comparison, each through the
    committed-results cache (book scale: re-read when its settings match), then the chapter's tables."""
    seed_everything(p.seed)
    records: list[dict] = []

    def one(model, task, kind, alpha, reading, lr, seed, stage) -> dict:
        h, hit = results.execute(_spec(p, model, task, kind, alpha, reading, lr, seed, stage),
                                 train_missing=p.train_missing)
        label = READINGS[reading][1] if reading else kind
        records.append({"model": model, "task": task, "variant": label, "alpha": alpha, "reading": reading,
                        "lr": lr, "seed": seed, "stage": stage, "from_cache": hit, "history": h})
        return h

    selection = []
    with quiet_loading():
        for model in p.models:
            for task in p.tasks:
                selection += _plan_task(p, model, task, one)
    grid = {(r["model"], r["task"], r["variant"], r["seed"]): r for r in records if r["stage"] == "comparison"}
    table = summary_table(grid)
    timing = [{"task": r["task"], "variant": r["variant"], "seed": r["seed"],
               "steps/epoch": r["history"]["steps_per_epoch"], "s/epoch": float(np.mean(r["history"]["epoch_seconds"]))}
              for r in records]
    first = p.comparison_seeds()[0]
    specs = wide_specs(p)
    with quiet_loading():
        wide = [wide_record(s, h, hit) for s, (h, hit) in
                zip(specs, results.execute_all(specs, train_missing=p.train_missing), strict=True)]
    with quiet_loading():
        raw, _ = results.cached(p, "glue-raw-spectra", lambda: raw_spectra(p),
                                drop=tuple(f for f in p.cache_key() if f not in
                                           ("models", "tasks", "seed", "max_length", "spectra_examples")))
    return Result(models=list(p.models), tasks=list(p.tasks), seeds=p.comparison_seeds(), scale=p.scale,
                  epochs=p.epochs, train_examples=p.train_examples, runs=records, selection=selection,
                  holdout_selection=holdout_selection(p),
                  summary=table.to_dict("records"), paired=paired_differences(grid).to_dict("records"),
                  paper_gains=paper_gains().to_dict("records"),
                  spectrum=spectrum_summary(grid, first).to_dict("records"),
                  alphas=alpha_table(grid).to_dict("records"), architectures=architecture_check(p.seed),
                  timing=timing, raw=raw, spectra_examples=p.spectra_examples, wide_model=p.wide_model, wide=wide,
                  wide_majority=majority_baseline(WIDE_TASK) if wide else {})


def side_measurements() -> dict[str, Any]:
    """The committed measurements the chapter's text quotes beside the grid: the RTE 10-epoch probe
    (`results/glue/probe/rte-epochs.json`) and the SST-2 step time (`results/bench/glue-sst2-cpu.json`);
    an entry is None when its file is missing."""
    import json

    paths = {"rte_probe": REPO_ROOT / "results" / "glue" / "probe" / "rte-epochs.json",
             "sst2_time": REPO_ROOT / "results" / "bench" / "glue-sst2-cpu.json"}
    return {k: json.loads(p.read_text()) if p.is_file() else None for k, p in paths.items()}


def rte_probe() -> dict[float, dict[str, float]]:
    """The RTE 10-epoch probe of the baseline, per learning rate: training loss after the first and the
    last epoch, the peak validation accuracy and its epoch (1-based), the last epoch's accuracy; {}
    when the probe's file is missing."""
    out = {}
    for run in (side_measurements()["rte_probe"] or {}).get("runs", []):
        acc = run["val_acc"]
        peak = int(np.argmax(acc))
        out[float(run["lr"])] = {"train_first": run["train_loss"][0], "train_last": run["train_loss"][-1],
                                 "peak": acc[peak], "peak_epoch": peak + 1, "last": acc[-1]}
    return out


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
    labels = np.asarray([_int_label(v) for v in ev.labels])
    major = np.bincount(labels).argmax()
    return glue_metrics(task, np.full_like(labels, major), labels)


def paper_model_for(model: str, reported: set[str], fallback: str = "bert-base-uncased") -> str:
    """The paper's model whose numbers sit beside `model`'s rows: the same model where Table 2 reports
    it (bert-base-uncased, albert-base-v1, distilbert-base-uncased), BERT-base otherwise (RoBERTa is not
    in Table 2; MiniLM is not in the paper); the table names which in its `paper model` column."""
    return model if model in reported else fallback


def summary_table(grid: dict[tuple, dict]) -> pd.DataFrame:
    """Table 2 / Table 6 counterpart: for each (model, task, metric) our final validation score per
    variant as mean ± std over the comparison seeds, the relative change Δ% against our baseline (as the
    paper's Δ%), the learning rate and α₀ used, and the paper's numbers for that model
    (`paper_model_for`) beside them. `grid`: (model, task, variant label, seed) -> run record."""
    paper = paper_tables()
    reported = set(paper.model)
    rows = []
    combos = sorted({(m, t) for (m, t, _v, _s) in grid}, key=lambda x: (x[0], list(TASK_METRICS).index(x[1])))
    for model, task in combos:
        runs = {(v, seed): r for (m, t, v, seed), r in grid.items() if (m, t) == (model, task)}
        alphas = {r["alpha"] for r in runs.values() if r["alpha"] is not None}
        for metric in TASK_METRICS[task]:
            row: dict[str, Any] = {"model": model, "task": task, "metric": metric,
                                   "lr": next(iter(runs.values()))["lr"],
                                   "α₀": next(iter(alphas)) if len(alphas) == 1 else None}
            scores: dict[str, list[float]] = {}
            for (variant, _seed), r in runs.items():
                scores.setdefault(variant, []).append(r["history"]["final"][metric])
            for col, vals in scores.items():
                v = np.asarray(vals)
                row[col] = float(v.mean())
                row[f"{col} sd"] = float(v.std(ddof=1)) if v.size > 1 else float("nan")
                row[f"{col} n"] = int(v.size)
            base = row.get("baseline")
            for col in [c for c in scores if c != "baseline"]:
                if base:
                    row[f"{col} Δ%"] = 100.0 * (row[col] - base) / abs(base)
            row["majority class"] = majority_baseline(task)[metric]
            paper_model = paper_model_for(model, reported)
            row["paper model"] = paper_model
            for variant in ("baseline", "softdecay", "expdecay"):
                hit = paper[(paper.task == task) & (paper.metric == metric) & (paper.model == paper_model)
                            & (paper.variant == variant)]
                row[f"paper {variant}"] = float(hit.value.iloc[0]) if len(hit) else float("nan")
            rows.append(row)
    return pd.DataFrame(rows)


def paired_differences(grid: dict[tuple, dict]) -> pd.DataFrame:
    """For each (model, task, metric) and each modified variant: the per-seed differences variant −
    baseline (same seed: same head initialisation and batch order), their mean with a 95 % t interval
    over the seeds both ran, how many are above 0, and the smallest effect these seeds would detect
    with 80 % power (`detectable_effect`)."""
    rows = []
    for model, task in sorted({(m, t) for (m, t, _v, _s) in grid}):
        variants = sorted({v for (m, t, v, _s) in grid if (m, t) == (model, task) and v != "baseline"})
        for metric in TASK_METRICS[task]:
            for v in variants:
                seeds = sorted(s for (m, t, vv, s) in grid if (m, t, vv) == (model, task, v)
                               and (model, task, "baseline", s) in grid)
                d = [grid[(model, task, v, s)]["history"]["final"][metric]
                     - grid[(model, task, "baseline", s)]["history"]["final"][metric] for s in seeds]
                if not d:
                    continue
                ti = t_interval(d)
                rows.append({"model": model, "task": task, "metric": metric, "variant": v, "seeds": len(d),
                             "mean difference": ti.estimate, "95% low": ti.low, "95% high": ti.high,
                             "wins": int(np.sum(np.asarray(d) > 0)), "detectable": detectable_effect(d),
                             "differences": [float(x) for x in d]})
    return pd.DataFrame(rows, columns=["model", "task", "metric", "variant", "seeds", "mean difference", "95% low",
                                       "95% high", "wins", "detectable", "differences"])


def paper_gains(model: str = "bert-base-uncased") -> pd.DataFrame:
    """The paper's relative change Δ% of SoftDecay over its baseline (Table 2), per task and metric."""
    paper = paper_tables().query("model == @model")
    wide = paper.pivot_table(index=["task", "metric"], columns="variant", values="value").reset_index()
    wide["gain %"] = 100.0 * (wide["softdecay"] - wide["baseline"]) / wide["baseline"].abs()
    return wide[["task", "metric", "baseline", "softdecay", "gain %"]]


def spectrum_summary(grid: dict[tuple, dict], seed: int) -> pd.DataFrame:
    """Per (model, task, variant) of one seed: median, skewness and TokenUni of the last layer's
    normalised singular values, and for SoftDecay runs the same before and after the transform
    (Figure 5). Rows keep the model and α₀ apart (a pivot over them would mix models)."""
    rows = []
    for (model, task, variant, s), r in grid.items():
        if s != seed:
            continue
        h = r["history"]
        last = h["spectra"]["layers"][-1]
        row = {"model": model, "task": task, "variant": variant, "initial α": r["alpha"],
               "last layer median": last["median"],
               "last layer skewness": last["skewness"], "last layer TokenUni": last["token_uni"]}
        if "softdecay" in h["spectra"]:
            before, after = h["spectra"]["softdecay"]
            row.update({"median before SD": before["median"], "median after SD": after["median"],
                        "skew before SD": before["skewness"], "skew after SD": after["skewness"]})
        rows.append(row)
    return pd.DataFrame(rows)


def alpha_table(grid: dict[tuple, dict]) -> pd.DataFrame:
    """The learned α per task: initial value, value after each epoch (mean over seeds) and its spread."""
    rows = []
    for (model, task, variant, seed), r in grid.items():
        if variant != "softdecay":
            continue
        h = r["history"]
        rows.append({"model": model, "task": task, "initial α": r["alpha"], "seed": seed,
                     **{f"α after epoch {e}": a for e, a in zip(h["epoch"], h["alpha"], strict=True)}})
    df = pd.DataFrame(rows)
    if df.empty:
        return df
    agg = df.drop(columns="seed").groupby(["model", "task", "initial α"]).agg(["mean", "std"])
    agg.columns = [f"{c} {'mean' if s == 'mean' else 'sd'}" for c, s in agg.columns]
    return agg.reset_index()
