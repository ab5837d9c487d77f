"""The GLUE chapter's runs: the grid of fine-tuning runs (models × tasks × variants × initial α × seeds) through
the results cache, with its selection stage, the larger encoder's runs beside it, the spectra of the pretrained
encoders, and the tables set beside the paper's Table 2 and Table 6; `run(p)` makes the `Result`. One run is
`helpers.train.glue.finetune`; the spectra and the architecture check are `helpers.hf.glue`."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ...core.stats import t_interval
from ...data.glue import TASK_METRICS, encode_task
from ...hf.glue import architecture_check, layer_spectra
from ...hf.models import quiet_loading
from ...machinery import results
from ...machinery.runtime import REPO_ROOT, seed_everything
from ...train.glue import FinetuneConfig, finetune, load_classifier
from .params import (
    READINGS,
    WIDE_ALPHA,
    WIDE_LR,
    WIDE_TASK,
    Params,
    majority_baseline,
    paper_gains,
    paper_model_for,
    paper_tables,
    primary_metric,
)
from .records import Choice, Run
from .result import Result, detectable_effect


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
    return [_spec(q, q.wide_model, WIDE_TASK, kind, WIDE_ALPHA if kind == "softdecay" else None, None, WIDE_LR,
                  seed) for kind in q.variants for seed in q.comparison_seeds()]



def raw_spectra(p: Params) -> dict:
    """The paper's Fig. 8 control: each model's per-layer spectra (`hf.glue.layer_spectra`, as the fine-tuned
    runs measure them) on the first `spectra_examples` validation examples of every task, before any
    fine-tuning (the pretrained encoder; the untrained classification head does not enter the hidden states, so
    one load of each model serves every task)."""
    out: dict = {}
    for model in p.models:
        out[model] = {}
        fc = FinetuneConfig(model=model, variant="baseline", seed=p.seed, max_length=p.max_length)
        m, tok = load_classifier(fc, 2) if p.tasks else (None, None)
        for task in p.tasks:
            ev = encode_task(tok, task, "validation", 0, 0, p.max_length, first=p.spectra_examples)
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
    every epoch under `machinery.results.checkpoint_dir("glue", key)` and a rerun after a kill resumes;
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
    ev = encode_task(tok, task, "validation", 0, 0, p.max_length, first=p.spectra_examples)
    h["spectra"] = layer_spectra(m, tok, ev, n=p.spectra_examples, device=next(m.parameters()).device)
    return h


#: the Params fields a single run replaces by its own values in the cache key
GRID = ("models", "tasks", "variants", "alphas", "lrs", "seeds", "seed", "expdecay_readings", "expdecay_seeds",
        "selection_holdout", "wide_model", "wide_seeds")


def _run_values(model, task, kind, alpha, reading, lr, seed, holdout: float = 0.0) -> dict[str, Any]:
    """A run's own values in its cache key; `holdout` only when > 0 (the validation-scored runs' keys stay)."""
    out = dict(model=model, task=task, variant=kind, alpha=alpha, reading=reading, lr=lr, seed=seed)
    return out | ({"selection_holdout": holdout} if holdout else {})




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


def _plan_task(p: Params, model: str, task: str, one) -> list[Choice]:
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


def holdout_selection(p: Params, fraction: float = HOLDOUT) -> list[Choice]:
    """The selection repeated with `selection_holdout=fraction` (candidates trained on the training split
    less a fixed held-out share and scored on it), read from the committed runs only — never trained here
    (`make grid CHAPTER=glue SCALE=book PARAMS='-p selection_holdout 0.1'` makes them). One row per task
    whose selection runs are all present: the selection table's rows with `holdout` set. [] at `ci`, or
    under a `p` that already selects on a held-out share."""
    if p.scale == "ci" or p.selection_holdout:
        return []
    q = p.with_(selection_holdout=fraction)
    rows: list[Choice] = []

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


def selection_changes(selection: list[Choice], held: list[Choice]) -> pd.DataFrame:
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
    records: list[Run] = []

    def one(model, task, kind, alpha, reading, lr, seed, stage) -> dict:
        h, hit = results.execute(_spec(p, model, task, kind, alpha, reading, lr, seed, stage),
                                 train_missing=p.train_missing)
        label = READINGS[reading][1] if reading else kind
        records.append(Run.from_history(h, model=model, task=task, variant=label, alpha=alpha, reading=reading,
                                        lr=lr, seed=seed, stage=stage, from_cache=hit))
        return h

    selection = []
    with quiet_loading():
        for model in p.models:
            for task in p.tasks:
                selection += _plan_task(p, model, task, one)
    grid = {(r.model, r.task, r.variant, r.seed): r for r in records if r.stage == "comparison"}
    table = summary_table(grid)
    timing = [{"task": r.task, "variant": r.variant, "seed": r.seed, "steps/epoch": r.steps_per_epoch,
               "s/epoch": float(np.mean(r.epoch_seconds))} for r in records]
    first = p.comparison_seeds()[0]
    specs = wide_specs(p)
    with quiet_loading():
        wide = [Run.from_history(h, **{k: s.extra[k] for k in ("model", "task", "variant", "alpha", "lr", "seed")},
                                 from_cache=hit)
                for s, (h, hit) in zip(specs, results.execute_all(specs, train_missing=p.train_missing), strict=True)]
    with quiet_loading():
        raw, _ = results.cached(p, "glue-raw-spectra", lambda: raw_spectra(p),
                                drop=tuple(f for f in p.cache_key() if f not in
                                           ("models", "tasks", "seed", "max_length", "spectra_examples")))
    return Result(models=list(p.models), tasks=list(p.tasks), seeds=p.comparison_seeds(), scale=p.scale,
                  lr_grid=list(p.lrs), alpha_grid=list(p.alphas),
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



def summary_table(grid: dict[tuple, Run]) -> pd.DataFrame:
    """Table 2 / Table 6 counterpart: for each (model, task, metric) our final validation score per
    variant as mean ± std over the comparison seeds, the relative change Δ% against our baseline (as the
    paper's Δ%), the learning rate and α₀ used, and the paper's numbers for that model
    (`paper_model_for`) beside them. `grid`: (model, task, variant label, seed) -> `Run`."""
    paper = paper_tables()
    reported = set(paper.model)
    rows = []
    combos = sorted({(m, t) for (m, t, _v, _s) in grid}, key=lambda x: (x[0], list(TASK_METRICS).index(x[1])))
    for model, task in combos:
        runs = {(v, seed): r for (m, t, v, seed), r in grid.items() if (m, t) == (model, task)}
        alphas = {r.alpha for r in runs.values() if r.alpha is not None}
        for metric in TASK_METRICS[task]:
            row: dict[str, Any] = {"model": model, "task": task, "metric": metric,
                                   "lr": next(iter(runs.values())).lr,
                                   "α₀": next(iter(alphas)) if len(alphas) == 1 else None}
            scores: dict[str, list[float]] = {}
            for (variant, _seed), r in runs.items():
                scores.setdefault(variant, []).append(r.final[metric])
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


def paired_differences(grid: dict[tuple, Run]) -> pd.DataFrame:
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
                d = [grid[(model, task, v, s)].final[metric] - grid[(model, task, "baseline", s)].final[metric]
                     for s in seeds]
                if not d:
                    continue
                ti = t_interval(d)
                rows.append({"model": model, "task": task, "metric": metric, "variant": v, "seeds": len(d),
                             "mean difference": ti.estimate, "95% low": ti.low, "95% high": ti.high,
                             "wins": int(np.sum(np.asarray(d) > 0)), "detectable": detectable_effect(d),
                             "differences": [float(x) for x in d]})
    return pd.DataFrame(rows, columns=["model", "task", "metric", "variant", "seeds", "mean difference", "95% low",
                                       "95% high", "wins", "detectable", "differences"])



def spectrum_summary(grid: dict[tuple, Run], seed: int) -> pd.DataFrame:
    """Per (model, task, variant) of one seed: median, skewness and TokenUni of the last layer's
    normalised singular values, and for SoftDecay runs the same before and after the transform
    (Figure 5). Rows keep the model and α₀ apart (a pivot over them would mix models)."""
    rows = []
    for (model, task, variant, s), r in grid.items():
        if s != seed:
            continue
        last = r.spectra["layers"][-1]
        row = {"model": model, "task": task, "variant": variant, "initial α": r.alpha,
               "last layer median": last.median,
               "last layer skewness": last.skewness, "last layer TokenUni": last.token_uni}
        if "softdecay" in r.spectra:
            before, after = r.spectra["softdecay"]
            row.update({"median before SD": before.median, "median after SD": after.median,
                        "skew before SD": before.skewness, "skew after SD": after.skewness})
        rows.append(row)
    return pd.DataFrame(rows)


def alpha_table(grid: dict[tuple, Run]) -> pd.DataFrame:
    """The learned α per task: initial value, value after each epoch (mean over seeds) and its spread."""
    rows = []
    for (model, task, variant, seed), r in grid.items():
        if variant != "softdecay":
            continue
        rows.append({"model": model, "task": task, "initial α": r.alpha, "seed": seed,
                     **{f"α after epoch {e}": a for e, a in zip(r.epochs, r.alpha_path, strict=True)}})
    df = pd.DataFrame(rows)
    if df.empty:
        return df
    agg = df.drop(columns="seed").groupby(["model", "task", "initial α"]).agg(["mean", "std"])
    agg.columns = [f"{c} {'mean' if s == 'mean' else 'sd'}" for c, s in agg.columns]
    return agg.reset_index()
