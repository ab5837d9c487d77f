"""The GLUE chapter's `Result`: the fine-tuning runs (`records.Run`, held as `records.Runs`), the chapter's tables,
and the statistics it reads off them (paired differences, the larger encoder's comparisons, the spectra's shift)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ...core.findings import Finding
from ...core.stats import NAN_INTERVAL, Interval, t_interval, t_or_nan, welch_interval
from ...machinery import results
from .params import READINGS, WIDE_TASK, expdecay_margin, paper_model_for, paper_tables, paper_value, primary_metric
from .records import Choice, LayerSpectrum, Run, Runs, quantile_at, spectra_of


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


def _nan(x) -> float:
    return float("nan") if x is None else x        # None: NaN read back from JSON


class LargerEncoder:
    """The statistics of the larger encoder's runs on RTE beside the grid (`Result.wide`), against the paper, the
    majority class and the grid model's tuned baseline; a part of `Result`."""

    wide: Runs
    wide_model: str
    wide_majority: dict[str, float]

    def wide_seeds(self) -> list[int]:
        """The seeds on which the larger encoder ran both the baseline and SoftDecay, in order."""
        return self.wide.paired_seeds("softdecay")

    def wide_run(self, variant: str, seed: int) -> Run | None:
        return self.wide.find(variant=variant, seed=seed)

    def wide_task(self) -> str:
        return self.wide[0].task if self.wide else WIDE_TASK

    def wide_scores(self, variant: str = "baseline", metric: str = "acc") -> list[float]:
        return [r.score(metric) for r in self.wide.where(variant=variant)]

    def wide_differences(self, metric: str = "acc") -> list[float]:
        return self.wide.differences("softdecay", metric)

    def wide_interval(self, metric: str = "acc") -> Interval:
        """The larger encoder's mean paired SoftDecay − baseline with its 95 % Student-t interval over seeds."""
        return t_or_nan(self.wide_differences(metric))

    def wide_score(self, variant: str = "baseline", metric: str = "acc") -> Interval:
        return t_or_nan(self.wide_scores(variant, metric))

    def wide_over_majority(self, metric: str = "acc") -> Interval:
        """The larger encoder's baseline minus the majority class (a fixed score), t interval over seeds."""
        major = self.wide_majority.get(metric, float("nan"))
        return t_or_nan([s - major for s in self.wide_scores("baseline", metric)])

    def minilm_scores(self, task: str = "RTE", metric: str | None = None) -> list[float]:
        """The grid model's (`models[0]`) tuned baseline on `task`: final validation score per comparison seed."""
        return [r.score(metric) for r in self.comparison(task).where(variant="baseline")]

    def minilm_score(self, task: str = "RTE", metric: str | None = None) -> Interval:
        return t_or_nan(self.minilm_scores(task, metric))

    def wide_over_grid(self, metric: str = "acc") -> Interval:
        """The larger encoder's baseline minus the grid model's tuned baseline on the same task (different seeds
        and learning rates, so unpaired): difference of the means with Welch's 95 % t interval."""
        return welch_interval(self.wide_scores("baseline", metric), self.minilm_scores(self.wide_task(), metric))

    def wide_detectable(self, metric: str = "acc", power: float = 0.8) -> float:
        return detectable_effect(self.wide_differences(metric), power)

    def wide_final_losses(self, variant: str = "baseline") -> list[float]:
        """The larger encoder's training loss after the last epoch of `variant`, per seed in seed order."""
        return [r.train_loss[-1] for r in self.wide.where(variant=variant)]

    def wide_final_loss(self, variant: str = "baseline") -> Interval:
        return t_or_nan(self.wide_final_losses(variant))

    def wide_alpha(self) -> float:
        """The initial α of the larger encoder's SoftDecay runs (NaN without them)."""
        return next((float(r.alpha) for r in self.wide if r.variant == "softdecay"), float("nan"))

    def wide_hours(self) -> float:
        """Hours of training of the larger encoder's runs (their epoch times, one process per run)."""
        return float(sum(sum(r.epoch_seconds) for r in self.wide) / 3600)

    def wide_paper(self, metric: str = "acc") -> tuple[float, float]:
        """The paper's (baseline, SoftDecay) on the larger encoder's task for the model set beside it (Table 2)."""
        model = paper_model_for(self.wide_model, set(paper_tables().model))
        return (paper_value(model, self.wide_task(), metric, "baseline"),
                paper_value(model, self.wide_task(), metric, "softdecay"))


@dataclass
class Result(LargerEncoder, results.Result):
    """Everything the chapter shows: `runs`, the grid's fine-tuning runs (`Run`); `wide`, the larger encoder's
    runs on RTE (`Params.wide_model`), `wide_majority` the majority class's scores there; the tables made by
    `compute` as lists of records (`summary`: Table 2 / 6 counterpart, `paired`: per-seed differences to the
    baseline, `spectrum`, `alphas`, `selection`, `holdout_selection`, …); `raw`: the pretrained encoders' spectra."""

    models: list[str]
    tasks: list[str]
    seeds: list[int]
    scale: str
    epochs: int
    train_examples: int
    runs: list[Run]
    selection: list[Choice]
    summary: list[dict]
    paired: list[dict]
    paper_gains: list[dict]
    spectrum: list[dict]
    alphas: list[dict]
    architectures: list[dict]
    timing: list[dict]
    #: the pretrained encoders' spectra before fine-tuning: model -> task -> per hidden state
    raw: dict[str, dict[str, tuple[LayerSpectrum, ...]]] = field(default_factory=dict)
    holdout_selection: list[Choice] = field(default_factory=list)
    spectra_examples: int = 0
    wide_model: str = ""
    wide: list[Run] = field(default_factory=list)
    wide_majority: dict[str, float] = field(default_factory=dict)
    lr_grid: list[float] = field(default_factory=list)       # the learning rates the baseline selects from
    alpha_grid: list[float] = field(default_factory=list)    # the α₀ SoftDecay selects from

    def __post_init__(self):
        self.runs = Runs(r if isinstance(r, Run) else Run.read(r) for r in self.runs)
        self.wide = Runs(r if isinstance(r, Run) else Run.read(r) for r in self.wide)
        self.raw = {model: spectra_of(tasks) for model, tasks in self.raw.items()}

    def comparison(self, task: str, model: str | None = None) -> Runs:
        return self.runs.where(stage="comparison", model=model or self.models[0], task=task)

    def run_for(self, task: str, variant: str, seed: int, model: str | None = None) -> Run | None:
        """The comparison run of (model, task, variant label, seed), or None."""
        return self.comparison(task, model).find(variant=variant, seed=seed)

    # --- the statistics the chapter reads (figures/glue.py only formats them) ---------------------

    def differences(self, task: str, variant: str = "softdecay", metric: str | None = None,
                    model: str | None = None) -> list[float]:
        """Per comparison seed both ran: `variant` − baseline final validation score (points of `metric`,
        default the task's first), in seed order."""
        return self.comparison(task, model).differences(variant, metric or primary_metric(task))

    def paired_interval(self, task: str, variant: str = "softdecay", metric: str | None = None,
                        model: str | None = None) -> Interval:
        """Mean paired difference `variant` − baseline with its 95 % Student-t interval over seeds."""
        return t_interval(self.differences(task, variant, metric, model))

    def detectable(self, task: str, variant: str = "softdecay", metric: str | None = None,
                   power: float = 0.8) -> float:
        """The smallest true difference these seeds would detect with probability `power` (`detectable_effect`)."""
        return detectable_effect(self.differences(task, variant, metric), power)

    def summary_row(self, task: str, metric: str | None = None) -> dict | None:
        """The `summary` row of the grid model on (task, metric), or None."""
        key = (self.models[0], task, metric or primary_metric(task))
        return next((r for r in self.summary if (r["model"], r["task"], r["metric"]) == key), None)

    def paper_gain(self, task: str, metric: str | None = None, variant: str = "softdecay") -> float:
        """The paper's `variant` − baseline (Table 2 / 6, points) for the model set beside ours (NaN if absent)."""
        row = self.summary_row(task, metric) or {}
        got = [row.get(f"paper {variant}"), row.get("paper baseline")]
        return float("nan") if None in got else float(got[0]) - float(got[1])

    def _pair(self, task: str, seed: int, variant: str, model: str | None, read) -> float | None:
        a, b = self.run_for(task, variant, seed, model), self.run_for(task, "baseline", seed, model)
        return None if a is None or b is None else read(a) - read(b)

    def flattening(self, model: str | None = None) -> Interval:
        """App. Fig. 9: SoftDecay − baseline median normalised singular value of the fine-tuned model's
        last-layer output, averaged over the tasks for each seed, with its t interval over seeds."""
        def median(r: Run) -> float:
            return r.spectra["layers"][-1].median
        per_seed = [[x for t in self.tasks if (x := self._pair(t, s, "softdecay", model, median)) is not None]
                    for s in self.seeds]
        return t_or_nan([float(np.mean(d)) for d in per_seed if d])

    def expdecay_effect(self, label: str, model: str | None = None) -> Interval:
        """Table 6 for one ExpDecay reading (`label`, e.g. "expdecay (all)"): per comparison seed the mean over
        the tasks of ExpDecay − baseline on each task's first metric (points), with its t interval over the
        seeds every task ran."""
        per_task = {t: {s: self._pair(t, s, label, model, Run.score) for s in self.seeds} for t in self.tasks}
        return t_or_nan([float(np.mean([per_task[t][s] for t in self.tasks])) for s in self.seeds
                         if all(per_task[t][s] is not None for t in self.tasks)])

    def paper_expdecay_gain(self) -> float:
        """The paper's ExpDecay − baseline (Table 6 against Table 2, points) averaged over this run's tasks, on
        each task's first metric, for the model set beside ours (NaN where a task has no paper number)."""
        vals = [self.paper_gain(t, variant="expdecay") for t in self.tasks]
        return float(np.mean(vals)) if vals else float("nan")

    def majority_margins(self) -> dict[str, float]:
        """Per task: the tuned baseline's mean score minus the majority class's (first metric, points)."""
        return {r["task"]: float(r["baseline"]) - float(r["majority class"]) for r in self.summary
                if r["model"] == self.models[0] and r["metric"] == primary_metric(r["task"])}

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
        return {"means": len(rows), "means_below": sum(r["mean difference"] < 0 for r in rows),
                "seeds": len(seeds), "seeds_below": sum(d < 0 for d in seeds),
                "intervals_below": sum(_nan(r["95% high"]) < 0 for r in rows),
                "intervals_above": sum(_nan(r["95% low"]) > 0 for r in rows)}

    def expdecay_widths(self, task: str, metric: str | None = None) -> tuple[float, float]:
        """The narrowest and the widest 95 % t interval (high − low, points) of ExpDecay − baseline over the
        readings, on `task`'s `metric` (default its first); NaNs without ExpDecay runs."""
        metric = metric or primary_metric(task)
        w = [_nan(r["95% high"]) - _nan(r["95% low"]) for r in self.paired
             if r["variant"].startswith("expdecay") and (r["task"], r["metric"]) == (task, metric)]
        w = [x for x in w if np.isfinite(x)]
        return (float(min(w)), float(max(w))) if w else (float("nan"), float("nan"))

    def expdecay_margin(self) -> float:
        """What "no substantial improvement" allows, in points (`params.expdecay_margin`)."""
        return expdecay_margin()

    def expdecay_labels(self) -> list[str]:
        """The ExpDecay variant labels of the comparison runs, in `READINGS` order."""
        made = {r.variant for r in self.runs if r.stage == "comparison"}
        return [label for _s, label in READINGS.values() if label in made]

    # --- training-set size and the pretrained encoder (the paper's Fig. 8) -----------------------------------

    def size_tasks(self) -> list[str]:
        """The tasks in order of their training-set size (the paper's Fig. 8 reads size), smallest first."""
        n = {t: r.train_examples for t in self.tasks if (r := self.run_for(t, "baseline", self.seeds[0])) is not None}
        return sorted(n, key=n.get)

    def train_sizes(self) -> dict[str, int]:
        """Training examples per task (of the first comparison seed's baseline), in `size_tasks` order."""
        return {t: self.run_for(t, "baseline", self.seeds[0]).train_examples for t in self.size_tasks()}

    def raw_value(self, task: str, level: float = 0.8, layer: int = -1, model: str | None = None) -> float:
        """`Run.value_at` of the pretrained encoder before fine-tuning (one measurement; NaN without it)."""
        rows = self.raw.get(model or self.models[0], {}).get(task)
        return float("nan") if rows is None else quantile_at(rows[layer].quantiles, level)

    def value_at(self, task: str, level: float = 0.8, layer: int = -1, source: str = "baseline",
                 model: str | None = None) -> Interval:
        """The paper's Fig. 8 reading (`Run.value_at`) on `task`'s validation examples: `source` "baseline", the
        fine-tuned baselines (mean and t interval over the comparison seeds); "raw", the pretrained encoder."""
        if source == "raw":
            if self.raw.get(model or self.models[0], {}).get(task) is None:
                return NAN_INTERVAL
            return Interval(self.raw_value(task, level, layer, model), float("nan"), float("nan"), 1, "exact")
        return t_or_nan([r.value_at(level, layer) for r in self.comparison(task, model).where(variant="baseline")])

    def finetuning_shift(self, task: str, level: float = 0.8, layer: int = -1, model: str | None = None) -> Interval:
        """Fine-tuned baseline − pretrained encoder: the change fine-tuning makes to `value_at`, with the t
        interval over the comparison seeds (the raw encoder is one fixed measurement)."""
        raw = self.raw_value(task, level, layer, model)
        vals = [r.value_at(level, layer) - raw for r in self.comparison(task, model).where(variant="baseline")]
        return t_or_nan(vals) if np.isfinite(raw) else NAN_INTERVAL

    def size_effect(self, level: float = 0.8, model: str | None = None) -> Interval:
        """App. D.2 (Fig. 8): the `finetuning_shift` of each comparison seed on the task with the largest training
        set minus that on the smallest (the sentences' own spectra drop out), t interval over seeds. Below 0: the
        larger training set leaves the more skewed spectrum, the paper's reading."""
        tasks = self.size_tasks()
        if len(tasks) < 2:
            return NAN_INTERVAL
        small, large = tasks[0], tasks[-1]
        raw = {t: self.raw_value(t, level, model=model) for t in (small, large)}
        vals = [(a.value_at(level) - raw[large]) - (b.value_at(level) - raw[small]) for seed in self.seeds
                if (a := self.run_for(large, "baseline", seed, model)) and (b := self.run_for(small, "baseline", seed,
                                                                                             model))]
        return t_or_nan(vals) if all(np.isfinite(v) for v in raw.values()) else NAN_INTERVAL

    def raw_range(self, level: float = 0.8) -> tuple[tuple[str, float], tuple[str, float]]:
        """The tasks where the pretrained encoder's last-layer value is lowest and highest, with the values
        (("–", NaN) twice without the raw spectra)."""
        vals = {t: v for t in self.tasks if np.isfinite(v := self.raw_value(t, level))}
        if not vals:
            return ("–", float("nan")), ("–", float("nan"))
        lo, hi = min(vals, key=vals.get), max(vals, key=vals.get)
        return (lo, vals[lo]), (hi, vals[hi])

    def spectra_n(self, task: str) -> int:
        """How many validation examples the spectra of `task` read: `spectra_examples`, or the split if smaller."""
        r = self.run_for(task, "baseline", self.seeds[0])
        return min(self.spectra_examples, r.eval_examples) if r is not None else 0

    def run_hours(self, variant_prefix: str = "", stage: str | None = None) -> float:
        """Hours of training (the runs' epoch times, one process per run) of the runs whose variant label
        starts with `variant_prefix` and, if given, of that `stage`."""
        return float(sum(sum(r.epoch_seconds) for r in self.runs
                         if r.variant.startswith(variant_prefix) and stage in (None, r.stage)) / 3600)

    def findings(self) -> list[Finding]:
        """The chapter's findings, built from the table `findings.FINDINGS`."""
        from .findings import findings

        return findings(self)

    def timing_means(self):
        """Per task and variant, the steps and seconds per epoch averaged over the timed runs (a DataFrame)."""
        import pandas as pd

        df = pd.DataFrame(self.timing)
        df = df.astype(object).where(df.notna(), np.nan).infer_objects()
        return df.groupby(["task", "variant"], as_index=False)[["steps/epoch", "s/epoch"]].mean()
