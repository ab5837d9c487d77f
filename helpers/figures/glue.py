"""Figures and tables of the GLUE chapter, drawn from `experiments.glue.Result`."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from ..experiments.glue import Result
from . import common

CHAPTER = "glue"


def frame(records: list[dict]) -> pd.DataFrame:
    """Records (as read back from JSON: NaN stored as None) as a DataFrame with NaN restored."""
    df = pd.DataFrame(records)
    return df.astype(object).where(df.notna(), np.nan).infer_objects()


def architecture_table(res: Result):
    """SoftDecay inserted into four small random classifiers: loss, gradients, earlier layers untouched."""
    return common.table(frame(res.architectures), digits=5)


def format_pm(table: pd.DataFrame) -> pd.DataFrame:
    """`mean ± sd` strings for display, one column per variant, Δ% and the paper's columns beside."""
    out = table[["model", "task", "metric"]].copy()
    variants = [c for c in table.columns if f"{c} sd" in table.columns]
    for v in variants:
        out[v] = [common.mean_sd(m, s, 2) for m, s in zip(table[v], table[f"{v} sd"].astype(float), strict=True)]
        if f"{v} Δ%" in table.columns:
            out[f"{v} Δ%"] = table[f"{v} Δ%"].map(lambda x: f"{x:+.2f}")
    if "paper model" in table.columns:
        out["paper model"] = table["paper model"]
    for c in [c for c in table.columns if (c.startswith("paper ") and c != "paper model") or c == "majority class"]:
        out[c] = table[c].map(lambda x: "" if pd.isna(x) else f"{x:.2f}")
    return out


def summary_table(res: Result):
    """Table 2 / Table 6 counterpart: mean ± sd over seeds, Δ% against our baseline, the paper's
    BERT-base numbers and the majority-class floor."""
    return common.table(format_pm(frame(res.summary)))


def selection_table(res: Result):
    """Every candidate learning rate (baseline) and initial α (SoftDecay) with its validation score on
    the selection seed, and the one chosen."""
    df = frame(res.selection)
    if df.empty:
        return common.table(pd.DataFrame({"selection": ["none: a single learning rate and α₀"]}))
    df["value"] = [f"{v:g}" for v in df["value"]]
    return common.table(df, digits=2)


def paired_table(res: Result):
    """Each modified variant minus the baseline, seed by seed (same seed: same head initialisation and
    batch order): mean difference in points with its 95 % t interval, wins out of seeds, verdict."""
    return common.table(frame(res.paired), digits=2)


def paired_figure(res: Result) -> plt.Figure:
    """The paired differences to the baseline with their 95 % intervals, one panel per task (primary metric)."""
    df = frame(res.paired)
    tasks = [t for t in res.tasks if t in set(df.task)]
    fig, axes = plt.subplots(1, max(1, len(tasks)), figsize=(4.2 * max(1, len(tasks)), 3.6), squeeze=False)
    for ax, task in zip(axes[0], tasks, strict=False):
        rows = df[(df.task == task) & (df.metric == df[df.task == task].metric.iloc[0])]
        y = np.arange(len(rows))
        lo = (rows["mean difference"] - rows["95% low"]).fillna(0).to_numpy()
        hi = (rows["95% high"] - rows["mean difference"]).fillna(0).to_numpy()
        ax.errorbar(rows["mean difference"], y, xerr=[lo, hi], fmt="o", capsize=4)
        ax.axvline(0, color="0.5", lw=1, ls="--")
        ax.set_yticks(y, rows["variant"])
        ax.set_xlabel(f"{rows.metric.iloc[0]} − baseline (points)")
        ax.set_title(task)
    fig.suptitle(f"Paired difference to the baseline, mean and 95 % interval over seeds ({res.scale} scale)")
    fig.tight_layout()
    return fig


def paper_gains_table(res: Result):
    """The paper's BERT-base-uncased Table 2: baseline, SoftDecay and the relative gain."""
    return common.table(frame(res.paper_gains), digits=2)


def alpha_figure(res: Result) -> plt.Figure:
    """The learned α per epoch of every SoftDecay run."""
    fig, ax = plt.subplots(figsize=(10, 4))
    for r in res.runs:
        if r["variant"] != "softdecay" or r.get("stage") != "comparison":
            continue
        h = r["history"]
        ax.plot([0, *h["epoch"]], [r["alpha"], *h["alpha"]], marker="o",
                label=f"{r['task']} α₀={r['alpha']:+.1f} seed {r['seed']}")
    ax.set_xlabel("epoch")
    ax.xaxis.set_major_locator(plt.MaxNLocator(integer=True))
    ax.set_ylabel("α")
    ax.set_title(f"Learned α ({', '.join(res.models)}, {res.scale} scale)")
    ax.legend(fontsize=8, ncol=2, loc="center left", bbox_to_anchor=(1.0, 0.5))
    return fig


def alpha_max_move(res: Result) -> float:
    """The largest |α after the last epoch − initial α| over tasks (means over seeds); NaN without
    SoftDecay runs."""
    al = frame(res.alphas)
    cols = [c for c in al.columns if c.startswith("α after epoch") and c.endswith("mean")]
    if al.empty or not cols:
        return float("nan")
    last = max(cols, key=lambda c: int(c.split()[3]))
    return float((al[last] - al["initial α"]).abs().max())


def alpha_table(res: Result):
    return common.table(frame(res.alphas), digits=4)


def training_curves(res: Result) -> plt.Figure:
    """Training loss per epoch, per task, mean and spread over seeds for each variant."""
    fig, axes = plt.subplots(1, len(res.tasks), figsize=(max(10, 4.2 * len(res.tasks)), 4), squeeze=False)
    for ax, task in zip(axes[0], res.tasks, strict=True):
        curves: dict[str, list] = {}
        for r in res.runs:
            if r["task"] == task and r.get("stage") == "comparison":
                curves.setdefault(r["variant"], []).append(r["history"]["train_loss"])
        common.layer_curves(ax, {k: np.array(v) for k, v in curves.items()}, x0=1, xlabel="epoch",
                            ylabel="training loss", title=task)
    fig.suptitle(f"Training loss, mean and spread over {common.seeds_text(len(res.seeds))} ({res.scale} scale)")
    return fig


def cdf_figure(res: Result) -> plt.Figure:
    """Figures 5 and 9–13: per model and task (rows) the per-layer CDFs of normalised singular values
    of the fine-tuned baseline, of the model fine-tuned with SoftDecay, and of the last layer just
    before and after the SoftDecay transform inside that model (base seed). Every model of the grid
    gets its rows (at `paper` scale: BERT = Fig. 9, ALBERT = Figs. 10–11, DistilBERT = Figs. 12–13)."""
    seed = res.seeds[0]
    rows = [(m, t) for m in res.models for t in res.tasks]
    fig, axes = plt.subplots(len(rows), 3, figsize=(14, 3.6 * len(rows)), squeeze=False)
    for row, (model, task) in zip(axes, rows, strict=True):
        base, sd = res.run_for(task, "baseline", seed, model), res.run_for(task, "softdecay", seed, model)
        label = task if len(res.models) == 1 else f"{model} {task}"
        panels = [(base, "layers", "baseline"), (sd, "layers", "with SoftDecay"),
                  (sd, "softdecay", "last layer, inside the SoftDecay model")]
        for ax, (r, part, title) in zip(row, panels, strict=True):
            if r is None or part not in r["history"]["spectra"]:
                ax.set_axis_off()
                continue
            common.spectrum_cdfs(ax, [(x["label"], np.asarray(x["quantiles"])) for x in r["history"]["spectra"][part]],
                                 title=f"{label}: {title}")
    fig.suptitle(f"Singular-value CDFs per layer after fine-tuning, {', '.join(res.models)}, seed {seed}")
    return fig


def spectrum_table(res: Result):
    """Median, skewness and TokenUni of the last layer's normalised singular values per task and
    variant, and for SoftDecay the same just before and after the transform."""
    return common.table(frame(res.spectrum))


def timing_table(res: Result):
    df = frame(res.timing).groupby(["task", "variant"], as_index=False)[["steps/epoch", "s/epoch"]].mean()
    return common.table(df, digits=1)


def _range(values) -> str:
    v = [float(x) for x in values if x is not None and np.isfinite(x)]
    if not v:
        return "–"
    lo, hi = min(v), max(v)
    return f"{lo:.3f}" if abs(hi - lo) < 5e-4 else f"{lo:.3f}–{hi:.3f}"


def median_note(last: dict) -> str:
    """The parenthesis after the last-layer medians: ranges over the tasks, and "–" explained only when
    some variant has no value (was not run)."""
    missing = [v for v, vals in last.items() if _range(vals) == "–"]
    return "(ranges over the tasks" + ("; – where a variant was not run)" if missing else ")")


def _verdicts(paired: pd.DataFrame, first: pd.DataFrame, prefix: str) -> str:
    """One clause per (task, variant starting with `prefix`) on the task's first metric: mean paired
    difference, its 95 % interval and the verdict."""
    out = []
    for _, f in first.iterrows():
        rows = paired[(paired.task == f.task) & (paired.metric == f.metric) & paired.variant.str.startswith(prefix)]
        for _, r in rows.iterrows():
            ci = "" if pd.isna(r["95% low"]) else f" [{r['95% low']:+.1f}, {r['95% high']:+.1f}]"
            who = "" if r.variant == prefix else f"{r.variant.removeprefix(prefix).strip()} "
            out.append(f"{f.task} {who}{r['mean difference']:+.1f}{ci} ({r.verdict})")
    return "; ".join(out) or "not run"


def _first_seeds(seeds: pd.Series) -> str:
    n = int(seeds.max()) if len(seeds) else 0
    if n == 0:
        return "no seed (not run)"
    return "the first comparison seed" if n == 1 else f"the first {n} comparison seeds"


def side_numbers() -> dict[str, object]:
    """Glue values of the RTE epoch probe and the SST-2 timing (`experiments.glue.side_measurements`)."""
    from ..experiments.glue import side_measurements

    m, out = side_measurements(), {}
    for run in (m["rte_probe"] or {}).get("runs", []):
        tag, acc = f"{run['lr']:g}", run["val_acc"]
        peak = int(np.argmax(acc))
        out.update({f"probe-{tag}-train-first": run["train_loss"][0], f"probe-{tag}-train-last": run["train_loss"][-1],
                    f"probe-{tag}-peak": acc[peak], f"probe-{tag}-peak-epoch": peak + 1,
                    f"probe-{tag}-last": acc[-1]})
    t = m["sst2_time"]
    if t:
        out.update({"sst2-steps": t["steps"], "sst2-sample": f"{t['train_examples']:,}",
                    "sst2-train": f"{t['full_train_examples']:,}", "sst2-seconds": t["epoch_seconds"],
                    "sst2-steps-per-epoch": f"{t['steps_per_full_epoch']:,}",
                    "sst2-run-minutes": t["estimated_seconds_per_3_epoch_run"] / 60,
                    "sst2-grid-hours": t["estimated_cpu_hours_per_task_grid"]})
    return out


def publish(res: Result) -> None:
    """Glue the figures and every number the prose quotes (`glue-*`)."""
    from IPython.display import Markdown

    common.set_theme()
    gains = frame(res.paper_gains)
    paired = frame(res.paired)
    summary = frame(res.summary)
    first = summary.drop_duplicates(["model", "task"])              # each task's primary metric
    clears = first["baseline"] - first["majority class"]
    spec = frame(res.spectrum)
    sd_rows = spec.dropna(subset=["median after SD"]) if "median after SD" in spec else spec.iloc[0:0]
    last = {v: spec.loc[spec.variant.str.startswith(v), "last layer median"]
            for v in ("baseline", "softdecay", "expdecay")}
    common.publish(CHAPTER, {
        "runs": len(res.runs), "from-cache": sum(bool(r["from_cache"]) for r in res.runs),
        "seeds": len(res.seeds), "epochs": res.epochs,
        "train-examples": Markdown("all" if not res.train_examples else str(res.train_examples)),
        "models": Markdown(", ".join(res.models)),
        "gain-min": float(gains["gain %"].min()), "gain-max": float(gains["gain %"].max()),
        "gain-max-task": Markdown(str(gains.loc[gains["gain %"].idxmax(), "task"])),
        "softdecay-verdicts": Markdown(_verdicts(paired, first, "softdecay")),
        "expdecay-verdicts": Markdown(_verdicts(paired, first, "expdecay")),
        "expdecay-seeds": Markdown(_first_seeds(paired.loc[paired.variant.str.startswith("expdecay"), "seeds"])),
        "comparisons": len(paired), "higher": int((paired.verdict == "higher").sum()),
        "lower": int((paired.verdict == "lower").sum()),
        "clear-min": float(clears.min()), "clear-min-task": Markdown(str(first.task.iloc[int(np.argmin(clears))])),
        "selected": Markdown("; ".join(f"{r.task}: lr {r.lr:g}" + ("" if pd.isna(r["α₀"]) else f", α₀ {r['α₀']:+.1f}")
                                       for _, r in first.iterrows())),
        "sd-median-before": Markdown(_range(sd_rows.get("median before SD", []))),
        "sd-median-after": Markdown(_range(sd_rows.get("median after SD", []))),
        "sd-skew-before": Markdown(_range(sd_rows.get("skew before SD", []))),
        "sd-skew-after": Markdown(_range(sd_rows.get("skew after SD", []))),
        **{f"median-{v}": Markdown(_range(s)) for v, s in last.items()},
        "median-note": Markdown(median_note(last)),
        "alpha-max-move": alpha_max_move(res),
        **side_numbers(),
    })
    common.figure("glue-paired", paired_figure(res))
    common.figure("glue-alpha", alpha_figure(res))
    common.figure("glue-training", training_curves(res))
    common.figure("glue-cdfs", cdf_figure(res))
