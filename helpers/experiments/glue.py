"""The GLUE chapter (Yan et al. §5.2, App. B, D): the grid of fine-tuning runs (models × tasks × variants
× initial α × seeds) through the results cache, per-layer spectra of the fine-tuned models, and the
tables set beside the paper's Table 2 and Table 6. One run is `helpers.train.glue.finetune`; the
spectra and the architecture check are `helpers.hf.glue`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import numpy as np
import pandas as pd

from .. import data as D
from ..book import results
from ..book.params import ChapterParams, nonneg, positive, rules
from ..book.runtime import REPO_ROOT, run_seeds, seed_everything
from ..core.stats import t_interval, verdict
from ..data.glue import TASK_METRICS, _int_label, encode_task, glue_metrics
from ..hf.glue import architecture_check, layer_spectra
from ..hf.models import quiet_loading
from ..train.glue import FinetuneConfig, finetune

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
    #: "auto": bf16 autocast for training where the device computes bf16 natively (3x faster on an
    #: AVX-512-BF16 CPU, tests/test_train.py checks it follows fp32), fp32 elsewhere; the committed book
    #: runs are bf16 (the book preset pins it); SoftDecay's eigendecomposition runs in float64 either way
    precision: Literal["fp32", "bf16", "auto"] = "auto"

    CHAPTER: ClassVar[str] = "glue"
    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {
        "ci": dict(tasks=("RTE", "MRPC"), train_examples=48, eval_examples=48, batch_size=8, max_length=48,
                   epochs=2, seeds=2, spectra_examples=24, lrs=(2e-5, 1e-4), alphas=(-0.2, -0.5),
                   expdecay_readings=("top5", "all"), expdecay_seeds=1),
        # ExpDecay's three readings run at the selected learning rate on the first 3 comparison seeds (CPU time)
        "book": dict(lrs=(2e-5, 5e-5, 1e-4), alphas=(-0.2, -0.5, -0.8), seeds=5,
                     variants=("baseline", "softdecay", "expdecay"), expdecay_readings=("top5", "all", "squared"),
                     expdecay_seeds=3, precision="bf16"),
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
        train_examples=nonneg, eval_examples=nonneg, spectra_examples=(lambda v: v >= 2, "needs >= 2 examples"),
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

    def run_for(self, task: str, variant: str, seed: int, model: str | None = None) -> dict | None:
        """The comparison run record of (model, task, variant label, seed), or None."""
        model = model or self.models[0]
        return next((r for r in self.runs if r["stage"] == "comparison" and
                     (r["model"], r["task"], r["variant"], r["seed"]) == (model, task, variant, seed)), None)


def _run_name(model: str, task: str, kind: str, alpha: float | None, reading: str | None, lr: float,
              seed: int) -> str:
    tag = kind + (f"{alpha:+.1f}" if alpha is not None else "") + (f"-{reading}" if reading else "")
    return f"{model.replace('/', '_')}-{task}-{tag}-lr{lr:g}-seed{seed}"


def finetune_one(p: Params, model: str, task: str, kind: str, alpha: float | None, reading: str | None,
                 lr: float, seed: int) -> dict:
    """One fine-tuning run and the spectra of the fine-tuned model. Outside `ci` it checkpoints after
    every epoch under `book.results.checkpoint_dir("glue", key)` and a rerun after a kill resumes;
    the checkpoint is removed once the run is done."""
    fc = FinetuneConfig(task=task, model=model, variant=kind, alpha=alpha if alpha is not None else -0.5,
                        lr=lr, alpha_lr=p.alpha_lr, epochs=p.epochs, batch=p.batch_size, max_length=p.max_length,
                        train_examples=p.train_examples, eval_examples=p.eval_examples, seed=seed)
    if reading is not None:
        fc.expdecay.update(READINGS[reading][0])
    key = p.cache_key(drop=GRID, **_run_values(model, task, kind, alpha, reading, lr, seed))
    ckpt = None if p.scale == "ci" else results.checkpoint_dir("glue", key) / "finetune.pt"
    h = finetune(fc, device=p.device, keep_model=True, checkpoint=ckpt, precision=p.precision)
    if ckpt is not None:
        ckpt.unlink(missing_ok=True)
    m, tok = h.pop("_model"), h.pop("_tokenizer")
    ev = encode_task(tok, task, "validation", 0, 0, p.max_length)
    h["spectra"] = layer_spectra(m, tok, ev, n=p.spectra_examples, device=next(m.parameters()).device)
    return h


#: the Params fields a single run replaces by its own values in the cache key
GRID = ("models", "tasks", "variants", "alphas", "lrs", "seeds", "seed", "expdecay_readings", "expdecay_seeds")


def _run_values(model, task, kind, alpha, reading, lr, seed) -> dict[str, Any]:
    return dict(model=model, task=task, variant=kind, alpha=alpha, reading=reading, lr=lr, seed=seed)


def primary_metric(task: str) -> str:
    """The metric a selection maximises: the task's first (accuracy; MCC for CoLA; Pearson for STS-B)."""
    return TASK_METRICS[task][0]


def run(p: Params) -> Result:
    """The selection runs, then every (model, task, variant, seed) of the comparison, each through the
    committed-results cache (book scale: re-read when its settings match), then the chapter's tables."""
    seed_everything(p.seed)
    records: list[dict] = []

    def one(model, task, kind, alpha, reading, lr, seed, stage) -> dict:
        vals = _run_values(model, task, kind, alpha, reading, lr, seed)
        h, hit = results.cached(p, _run_name(model, task, kind, alpha, reading, lr, seed),
                                lambda: finetune_one(p, model, task, kind, alpha, reading, lr, seed),
                                drop=GRID, **vals)
        label = READINGS[reading][1] if reading else kind
        records.append({"model": model, "task": task, "variant": label, "alpha": alpha, "reading": reading,
                        "lr": lr, "seed": seed, "stage": stage, "from_cache": hit, "history": h})
        return h

    selection = []
    with quiet_loading():
        for model in p.models:
            for task in p.tasks:
                metric = primary_metric(task)
                lr, alpha = p.lrs[0], p.alphas[0]
                if len(p.lrs) > 1:
                    scores = {x: one(model, task, "baseline", None, None, x, p.seed, "selection")["final"][metric]
                              for x in p.lrs}
                    lr = max(scores, key=lambda x: (scores[x], -x))
                    selection += [{"model": model, "task": task, "choice": "learning rate (baseline)", "value": x,
                                   "metric": metric, "score": s, "chosen": x == lr} for x, s in scores.items()]
                if "softdecay" in p.variants and len(p.alphas) > 1:
                    scores = {a: one(model, task, "softdecay", a, None, lr, p.seed, "selection")["final"][metric]
                              for a in p.alphas}
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
    grid = {(r["model"], r["task"], r["variant"], r["seed"]): r for r in records if r["stage"] == "comparison"}
    table = summary_table(grid)
    timing = [{"task": r["task"], "variant": r["variant"], "seed": r["seed"],
               "steps/epoch": r["history"]["steps_per_epoch"], "s/epoch": float(np.mean(r["history"]["epoch_seconds"]))}
              for r in records]
    first = p.comparison_seeds()[0]
    return Result(models=list(p.models), tasks=list(p.tasks), seeds=p.comparison_seeds(), scale=p.scale,
                  epochs=p.epochs, train_examples=p.train_examples, runs=records, selection=selection,
                  summary=table.to_dict("records"), paired=paired_differences(grid).to_dict("records"),
                  paper_gains=paper_gains().to_dict("records"),
                  spectrum=spectrum_summary(grid, first).to_dict("records"),
                  alphas=alpha_table(grid).to_dict("records"), architectures=architecture_check(p.seed),
                  timing=timing)


def side_measurements() -> dict[str, Any]:
    """The committed measurements the chapter's text quotes beside the grid: the RTE 10-epoch probe
    (`results/glue/probe/rte-epochs.json`) and the SST-2 step time (`results/bench/glue-sst2-cpu.json`);
    an entry is None when its file is missing."""
    import json

    paths = {"rte_probe": REPO_ROOT / "results" / "glue" / "probe" / "rte-epochs.json",
             "sst2_time": REPO_ROOT / "results" / "bench" / "glue-sst2-cpu.json"}
    return {k: json.loads(p.read_text()) if p.is_file() else None for k, p in paths.items()}


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
    """For each (model, task, metric) and each modified variant: the per-seed difference variant −
    baseline (same seed: same head initialisation and batch order), its mean with a 95 % t interval
    over the seeds both ran, and the verdict: `higher`/`lower` when the interval excludes 0, `no
    difference detected` otherwise (`one seed` when there is nothing to test)."""
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
                mean, lo, hi = ti["mean"], ti["lo"], ti["hi"]
                rows.append({"model": model, "task": task, "metric": metric, "variant": v, "seeds": len(d),
                             "mean difference": mean, "95% low": lo, "95% high": hi,
                             "wins": int(np.sum(np.asarray(d) > 0)), "verdict": verdict(ti)})
    return pd.DataFrame(rows, columns=["model", "task", "metric", "variant", "seeds", "mean difference", "95% low",
                                       "95% high", "wins", "verdict"])


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
