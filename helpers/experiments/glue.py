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
from ..data.glue import TASK_METRICS, _int_label, encode_task, glue_metrics
from ..hf.glue import architecture_check, layer_spectra
from ..hf.models import quiet_loading
from ..train.glue import FinetuneConfig, finetune

Task = Literal["CoLA", "SST-2", "MRPC", "QNLI", "RTE"]
Variant = Literal["baseline", "softdecay", "expdecay"]


@dataclass(frozen=True)
class Params(ChapterParams):
    """Yan et al. §5.2, App. B, App. D: SoftDecay fine-tuning on GLUE (Table 2, Table 6, Figs. 5, 9-13)."""

    models: tuple[str, ...] = ("all-MiniLM-L6-v2",)
    tasks: tuple[Task, ...] = ("RTE", "MRPC", "CoLA")
    variants: tuple[Variant, ...] = ("baseline", "softdecay", "expdecay")
    alphas: tuple[float, ...] = (-0.5,)          # initial α of SoftDecay (the paper searches -0.2, -0.5, -0.8)
    lr: float = 2e-5
    alpha_lr: float = 2e-3
    epochs: int = 3
    batch_size: int = 32
    max_length: int = 128
    seeds: int = 2
    train_examples: int = 0                      # 0 = the whole training split
    eval_examples: int = 0                       # 0 = the whole validation split
    spectra_examples: int = 256
    expdecay_squared: bool = False               # False: App. D.1 as printed; True: Wang et al.'s squared form
    #: bf16 autocast for training (3x faster here, tests/test_train.py checks it follows fp32); SoftDecay's
    #: eigendecomposition runs in float64 either way; the committed book grid is fp32
    precision: Literal["fp32", "bf16"] = "bf16"

    CHAPTER: ClassVar[str] = "glue"
    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {
        "ci": dict(tasks=("RTE", "MRPC"), train_examples=48, eval_examples=48, batch_size=8, max_length=48,
                   epochs=2, seeds=2, spectra_examples=24),
        "book": dict(precision="fp32"),
        "paper": dict(models=("bert-base-uncased", "albert-base-v1", "distilbert-base-uncased", "roberta-base"),
                      tasks=("CoLA", "SST-2", "MRPC", "QNLI", "RTE"), alphas=(-0.2, -0.5, -0.8), seeds=3,
                      spectra_examples=1000),
    }
    RULES: ClassVar = rules(
        models=(lambda v: len(v) > 0, "needs at least one model"),
        tasks=(lambda v: len(v) > 0, "needs at least one task"),
        variants=(lambda v: len(v) > 0, "needs at least one variant"),
        alphas=(lambda v: len(v) > 0 and all(-1.0 <= a < 0 for a in v), "every initial alpha must lie in [-1, 0)"),
        lr=positive, alpha_lr=positive, epochs=positive, batch_size=positive,
        max_length=(lambda v: 8 <= v <= 512, "must lie in [8, 512]"), seeds=positive,
        train_examples=nonneg, eval_examples=nonneg, spectra_examples=(lambda v: v >= 2, "needs >= 2 examples"),
    )


@dataclass
class Result(results.Result):
    """Everything the chapter shows. `runs`: one record per fine-tuning run (model, task, variant,
    initial α (None but for SoftDecay), seed, whether it came from the committed results, and its
    `history`: per-epoch training loss, validation metrics, α, seconds, and `spectra`). The tables are
    lists of records: `summary` (Table 2 / 6 counterpart), `verdicts` (difference to the baseline
    against the seed spread), `paper_gains` (the paper's Δ% for BERT-base), `spectrum` (last-layer
    spectrum statistics of the base seed), `alphas` (learned α), `architectures` (the surgery check
    on four random tiny classifiers), `timing` (seconds per epoch)."""

    models: list[str]
    tasks: list[str]
    seeds: list[int]
    scale: str
    epochs: int
    train_examples: int
    runs: list[dict]
    summary: list[dict]
    verdicts: list[dict]
    paper_gains: list[dict]
    spectrum: list[dict]
    alphas: list[dict]
    architectures: list[dict]
    timing: list[dict]

    def run_for(self, task: str, variant: str, seed: int, model: str | None = None) -> dict | None:
        """The first run record of (model, task, variant, seed), or None."""
        model = model or self.models[0]
        return next((r for r in self.runs if (r["model"], r["task"], r["variant"], r["seed"])
                     == (model, task, variant, seed)), None)


def _run_name(model: str, task: str, variant: str, alpha: float | None, seed: int) -> str:
    return f"{model.replace('/', '_')}-{task}-{variant}" + (f"{alpha:+.1f}" if alpha is not None else "") + \
        f"-seed{seed}"


def finetune_one(p: Params, model: str, task: str, variant: str, alpha: float | None, seed: int) -> dict:
    """One fine-tuning run and the spectra of the fine-tuned model. Outside `ci` it checkpoints after
    every epoch under `book.results.checkpoint_dir("glue", key)` and a rerun after a kill resumes;
    the checkpoint is removed once the run is done."""
    fc = FinetuneConfig(task=task, model=model, variant=variant, alpha=alpha if alpha is not None else -0.5,
                        lr=p.lr, alpha_lr=p.alpha_lr, epochs=p.epochs, batch=p.batch_size, max_length=p.max_length,
                        train_examples=p.train_examples, eval_examples=p.eval_examples, seed=seed)
    fc.expdecay["squared"] = p.expdecay_squared
    key = p.cache_key(drop=GRID, model=model, task=task, variant=variant, alpha=alpha, seed=seed)
    ckpt = None if p.scale == "ci" else results.checkpoint_dir("glue", key) / "finetune.pt"
    h = finetune(fc, device=p.device, keep_model=True, checkpoint=ckpt, precision=p.precision)
    if ckpt is not None:
        ckpt.unlink(missing_ok=True)
    m, tok = h.pop("_model"), h.pop("_tokenizer")
    ev = encode_task(tok, task, "validation", 0, 0, p.max_length)
    h["spectra"] = layer_spectra(m, tok, ev, n=p.spectra_examples, device=next(m.parameters()).device)
    return h


#: the Params fields a single run replaces by its own values in the cache key
GRID = ("models", "tasks", "variants", "alphas", "seeds", "seed")


def run(p: Params) -> Result:
    """Every (model, task, variant, initial α, seed) of `p`, each through the committed-results cache
    (book scale: re-read when its settings match), then the chapter's tables."""
    seed_everything(p.seed)
    grid: dict[tuple, dict] = {}
    records = []
    with quiet_loading():
        for model in p.models:
            for task in p.tasks:
                for variant in p.variants:
                    for alpha in (p.alphas if variant == "softdecay" else (None,)):
                        for seed in run_seeds(p.seed, p.seeds):
                            h, hit = results.cached(
                                p, _run_name(model, task, variant, alpha, seed),
                                lambda a=(model, task, variant, alpha, seed): finetune_one(p, *a),
                                drop=GRID, model=model, task=task, variant=variant, alpha=alpha, seed=seed)
                            grid[(model, task, variant, alpha, seed)] = h
                            records.append({"model": model, "task": task, "variant": variant, "alpha": alpha,
                                            "seed": seed, "from_cache": hit, "history": h})
    table = summary_table(grid)
    timing = [{"task": t, "variant": v, "seed": s, "steps/epoch": h["steps_per_epoch"],
               "s/epoch": float(np.mean(h["epoch_seconds"]))} for (_m, t, v, _a, s), h in grid.items()]
    return Result(models=list(p.models), tasks=list(p.tasks), seeds=run_seeds(p.seed, p.seeds), scale=p.scale,
                  epochs=p.epochs, train_examples=p.train_examples, runs=records,
                  summary=table.to_dict("records"), verdicts=seed_verdicts(table).to_dict("records"),
                  paper_gains=paper_gains().to_dict("records"),
                  spectrum=spectrum_summary(grid, p.seed).to_dict("records"),
                  alphas=alpha_table(grid).to_dict("records"), architectures=architecture_check(p.seed),
                  timing=timing)


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
    variant as mean ± std over seeds, the relative change Δ% against our baseline (as the paper's
    Δ%), and the paper's numbers for that model (`paper_model_for`) beside them."""
    paper = paper_tables()
    reported = set(paper.model)
    rows = []
    combos = sorted({(m, t) for (m, t, *_rest) in grid}, key=lambda x: (x[0], list(TASK_METRICS).index(x[1])))
    for model, task in combos:
        for metric in TASK_METRICS[task]:
            row: dict[str, Any] = {"model": model, "task": task, "metric": metric}
            base = None
            for (m, t, variant, alpha, _seed), h in grid.items():
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
            paper_model = paper_model_for(model, reported)
            row["paper model"] = paper_model
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


def spectrum_summary(grid: dict[tuple, dict], seed: int) -> pd.DataFrame:
    """Per (model, task, variant, initial α) of one seed: median, skewness and TokenUni of the last
    layer's normalised singular values, and for SoftDecay runs the same before and after the transform
    (Figure 5). Rows keep the model and α₀ apart (a pivot over them would mix models)."""
    rows = []
    for (model, task, variant, a0, s), h in grid.items():
        if s != seed:
            continue
        last = h["spectra"]["layers"][-1]
        row = {"model": model, "task": task, "variant": variant, "initial α": a0,
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
    for (model, task, variant, alpha, seed), h in grid.items():
        if variant != "softdecay":
            continue
        rows.append({"model": model, "task": task, "initial α": alpha, "seed": seed,
                     **{f"α after epoch {e}": a for e, a in zip(h["epoch"], h["alpha"], strict=True)}})
    df = pd.DataFrame(rows)
    if df.empty:
        return df
    agg = df.drop(columns="seed").groupby(["model", "task", "initial α"]).agg(["mean", "std"])
    agg.columns = [f"{c} {'mean' if s == 'mean' else 'sd'}" for c, s in agg.columns]
    return agg.reset_index()
