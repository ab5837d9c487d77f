"""Figures and tables of the GLUE chapter, drawn from `experiments.glue.Result` (the statistics are the
Result's methods; here they are only drawn and formatted)."""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from ..experiments import about
from ..experiments.glue import HOLDOUT, METRIC_NAMES, Result, rte_probe, selection_changes, side_measurements
from . import common

CHAPTER = "glue"
#: figure width (inches) and the smallest font (points) used at it: text stays >= ~8 pt at a 7-inch page
WIDTH, FONT = 8.0, 9.5



def _and(items: list[str]) -> str:
    """"a, b and c"."""
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


_SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


def _power_grid(values: list[float]) -> str:
    """A grid of rates over one power of ten, as the paper writes it: [2e-5, 5e-5, 1e-4] -> "{2, 5, 10} × 10⁻⁵"."""
    if not values:
        return "—"
    e = math.floor(math.log10(min(values)))
    mantissas = ", ".join(f"{round(v / 10 ** e, 6):g}" for v in values)
    return f"{{{mantissas}}} × 10{str(e).translate(_SUPERSCRIPT)}"


def frame(records: list[dict]) -> pd.DataFrame:
    """Records (as read back from JSON: NaN stored as None) as a DataFrame with NaN restored."""
    df = pd.DataFrame(records)
    return df.astype(object).where(df.notna(), np.nan).infer_objects()


def _legible(fig: plt.Figure) -> plt.Figure:
    """Every tick, label, title and legend text of `fig` at least `FONT` points."""
    for text in fig.findobj(plt.Text):
        if text.get_fontsize() < FONT:
            text.set_fontsize(FONT)
    return fig


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


def _pct(new: float, base: float) -> str:
    return "" if pd.isna(new) or pd.isna(base) or not base else f"{100 * (new - base) / abs(base):+.1f}"


def _task_metric(task: str, metric: str) -> str:
    return f"{task} ({METRIC_NAMES[metric]})"


def summary_table(res: Result):
    """The paper's Table 2 beside ours, key columns first: the majority-class floor, our baseline and
    SoftDecay (mean ± sd over seeds, Δ% as the paper's), then the paper's baseline → SoftDecay (Δ%)."""
    t = frame(res.summary)
    shown = format_pm(t)
    out = pd.DataFrame({"task (metric)": [_task_metric(a, b) for a, b in zip(t.task, t.metric, strict=True)]})
    if len(res.models) > 1:
        out.insert(0, "model", t.model)
    out["majority class"] = shown["majority class"]
    out["baseline"] = shown["baseline"]
    if "softdecay" in t:
        out["SoftDecay (Δ %)"] = [f"{a} ({b})" for a, b in zip(shown["softdecay"], shown["softdecay Δ%"], strict=True)]
    out["paper: baseline → SoftDecay (Δ %)"] = [
        "" if pd.isna(a) or pd.isna(b) else f"{b:.2f} → {a:.2f} ({_pct(a, b)})"
        for a, b in zip(t["paper softdecay"], t["paper baseline"], strict=True)]
    return common.table(out)


def paired_table(res: Result):
    """SoftDecay minus the baseline, seed by seed: mean difference with its 95 % t interval, how many
    seeds are above 0, the smallest effect these seeds detect with 80 % power, the paper's gain."""
    df = frame(res.paired)
    df = df[df.variant == "softdecay"]
    rows = []
    for _, r in df.iterrows():
        paper = res.paper_gain(r.task, r.metric)
        rows.append({"task (metric)": _task_metric(r.task, r.metric),
                     "SoftDecay − baseline [95 % interval]": res.paired_interval(r.task, "softdecay", r.metric).text(2),
                     "seeds above 0": f"{r.wins} of {r.seeds}", "detectable (80 % power)": f"{r.detectable:.1f}",
                     "paper gain": "" if pd.isna(paper) else f"{paper:+.2f}"})
    return common.table(pd.DataFrame(rows))


def expdecay_table(res: Result):
    """ExpDecay minus the baseline per task and reading: every seed's difference (its sign pattern), their
    mean with its 95 % t interval over the seeds, beside the paper's Table 6 difference."""
    df = frame(res.paired)
    df = df[df.variant.str.startswith("expdecay")]
    summary = frame(res.summary)
    rows = []
    for _, r in df.iterrows():
        s = summary[(summary.task == r.task) & (summary.metric == r.metric) & (summary.model == r.model)].iloc[0]
        paper = s["paper expdecay"] - s["paper baseline"]
        rows.append({"task (metric)": _task_metric(r.task, r.metric),
                     "reading": r.variant.removeprefix("expdecay (").rstrip(")"),
                     "per-seed differences": ", ".join(f"{d:+.1f}" for d in r.differences),
                     "mean [95 % interval]": res.paired_interval(r.task, r.variant, r.metric).text(1),
                     "paper": "" if pd.isna(paper) else f"{paper:+.2f}"})
    return common.table(pd.DataFrame(rows))


def selection_table(res: Result):
    """Every candidate learning rate (baseline) and initial α (SoftDecay) with its validation score on
    the selection seed, and the one chosen."""
    df = frame(res.selection)
    if df.empty:
        return common.table(pd.DataFrame({"selection": ["none: a single learning rate and α₀"]}))
    df = df.drop(columns=["model"] if len(res.models) == 1 else [])
    df["value"] = [f"{v:g}" for v in df["value"]]
    df["task (metric)"] = [_task_metric(a, b) for a, b in zip(df["task"], df["metric"], strict=True)]
    df["chosen"] = df["chosen"].map({True: "✓", False: ""})
    df = df.drop(columns=["task", "metric"])
    return common.table(df[["task (metric)", *[c for c in df.columns if c != "task (metric)"]]], digits=2)


def holdout_table(res: Result):
    """Each choice made on the validation split beside the same choice made on a held-out share of the
    training split (`experiments.glue.selection_changes`), with each selection's winning score."""
    df = selection_changes(res.selection, res.holdout_selection)
    if df.empty:
        return common.table(pd.DataFrame({"held-out selection": ["not committed at this scale"]}))
    out = pd.DataFrame({"task": df["task"], "choice": df["choice"],
                        "chosen on validation (score)": [f"{v:g} ({s:.2f})" for v, s in
                                                         zip(df["on validation"], df["validation score"], strict=True)],
                        "chosen on held-out train (score)": [f"{v:g} ({s:.2f})" for v, s in
                                                             zip(df["on held-out train"], df["held-out score"],
                                                                 strict=True)],
                        "same": df["same"].map({True: "✓", False: "✗"})})
    if len(res.models) > 1:
        out.insert(0, "model", df["model"])
    return common.table(out)


def paired_figure(res: Result) -> plt.Figure:
    """Per task (primary metric): SoftDecay − baseline, mean and 95 % interval over seeds; each
    ExpDecay reading's per-seed differences (dots), their mean (bar) and its 95 % interval (line)."""
    df = frame(res.paired)
    tasks = [t for t in res.tasks if t in set(df.task)]
    fig, axes = plt.subplots(len(tasks), 1, figsize=(WIDTH, 1.0 + 1.3 * len(tasks)), squeeze=False, sharex=False)
    for ax, task in zip(axes[:, 0], tasks, strict=True):
        metric = df[df.task == task].metric.iloc[0]
        rows = df[(df.task == task) & (df.metric == metric)].sort_values("variant", key=lambda v: v != "softdecay")
        for y, (_, r) in enumerate(rows.iterrows()):
            if r.variant == "softdecay":
                e = res.paired_interval(task, "softdecay", metric)
                ax.errorbar([e.estimate], [y], xerr=[[e.estimate - e.low], [e.high - e.estimate]], fmt="o",
                            capsize=4, color="C0")
            else:
                ax.plot(r.differences, [y] * len(r.differences), "o", mfc="none", color="C1")
                ax.plot([r["mean difference"]], [y], "|", ms=14, mew=2, color="C1")
                e = res.paired_interval(task, r.variant, metric)
                if e.has_interval:
                    ax.plot([e.low, e.high], [y, y], "-", lw=1.5, color="C1")
        ax.axvline(0, color="0.5", lw=1, ls="--")
        ax.set_yticks(range(len(rows)), list(rows.variant))
        ax.set_ylim(-0.6, len(rows) - 0.4)
        ax.set_title(f"{task}: {METRIC_NAMES[metric]} − baseline (points)", loc="left")
    fig.tight_layout()
    return _legible(fig)


def alpha_figure(res: Result) -> plt.Figure:
    """The learned α per epoch of every SoftDecay run, one colour per task."""
    fig, ax = plt.subplots(figsize=(WIDTH, 3.4))
    colours = {t: f"C{i}" for i, t in enumerate(res.tasks)}
    seen = set()
    for r in res.runs:
        if r.variant != "softdecay" or r.stage != "comparison":
            continue
        label = None if r.task in seen else f"{r.task} (α₀ = {r.alpha:+.1f})"
        seen.add(r.task)
        ax.plot([0, *r.epochs], [r.alpha, *r.alpha_path], marker="o", color=colours[r.task], label=label, lw=1)
    ax.set_xlabel("epoch")
    ax.xaxis.set_major_locator(plt.MaxNLocator(integer=True))
    ax.set_ylabel("α")
    ax.legend(loc="best")
    return _legible(fig)


def alpha_table(res: Result):
    """The learned α per task: its initial value and its mean ± sd over the seeds after each epoch."""
    df = frame(res.alphas)
    if df.empty:
        return common.table(df)
    out = df[[c for c in ("model", "task", "initial α") if c in df.columns]].copy()
    if len(res.models) == 1 and "model" in out:
        out = out.drop(columns="model")
    epochs = sorted({int(c.split()[3]) for c in df.columns if c.startswith("α after epoch") and c.endswith("mean")})
    for e in epochs:
        out[f"after epoch {e}"] = [common.mean_sd(m, s, 3) for m, s in
                                   zip(df[f"α after epoch {e} mean"], df[f"α after epoch {e} sd"], strict=True)]
    return common.table(out, digits=3)


def training_curves(res: Result) -> plt.Figure:
    """Training loss per epoch, per task, mean and spread over seeds for each variant."""
    fig, axes = plt.subplots(1, len(res.tasks), figsize=(WIDTH, 3.4), squeeze=False, sharey=False)
    for ax, task in zip(axes[0], res.tasks, strict=True):
        curves: dict[str, list] = {}
        for r in res.runs:
            if r.task == task and r.stage == "comparison":
                curves.setdefault(r.variant, []).append(r.train_loss)
        common.layer_curves(ax, {k: np.array(v) for k, v in curves.items()}, x0=1, xlabel="epoch",
                            ylabel="training loss" if ax is axes[0, 0] else "", title=task)
        if ax.get_legend() is not None:
            ax.get_legend().remove()
        ax.xaxis.set_major_locator(plt.MaxNLocator(integer=True))
    handles, labels = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=min(len(labels), 3), frameon=False)
    fig.tight_layout(rect=(0, 0.16, 1, 1))
    return _legible(fig)


def cdf_figure(res: Result) -> plt.Figure:
    """App. Figs. 9–13 and Fig. 5: per model and task (rows) the per-layer CDFs of normalised singular
    values of the fine-tuned baseline, of the model fine-tuned with SoftDecay, and of the last layer just
    before and after the SoftDecay transform inside that model (first comparison seed). Every model of
    the grid gets its rows."""
    seed = res.seeds[0]
    rows = [(m, t) for m in res.models for t in res.tasks]
    fig, axes = plt.subplots(len(rows), 3, figsize=(WIDTH + 0.2, 2.6 * len(rows) + 0.6), squeeze=False,
                             sharex=True, sharey=True)
    for row, (model, task) in zip(axes, rows, strict=True):
        base, sd = res.run_for(task, "baseline", seed, model), res.run_for(task, "softdecay", seed, model)
        label = task if len(res.models) == 1 else f"{model} {task}"
        panels = [(base, "layers", "baseline"), (sd, "layers", "SoftDecay"),
                  (sd, "softdecay", "before/after transform")]
        for ax, (r, part, title) in zip(row, panels, strict=True):
            if r is None or part not in r.spectra:
                ax.set_axis_off()
                continue
            common.spectrum_cdfs(ax, [(x.label, np.asarray(x.quantiles)) for x in r.spectra[part]],
                                 title=f"{label}: {title}", xlabel="")
            if part == "softdecay":
                ax.legend(loc="lower right")
            elif ax.get_legend() is not None:
                ax.get_legend().remove()
    return _shared_legend(fig, axes, axes[0, 0], bottom=0.09)


def size_figure(res: Result) -> plt.Figure:
    """The paper's Fig. 8 (QNLI against RTE, from BERT fine-tuned on each): per task, in order of training-set
    size, the per-layer CDFs of the pretrained encoder before fine-tuning (top) and of the fine-tuned
    baseline (bottom, first comparison seed), with F = 0.8 marked."""
    tasks = res.size_tasks()
    seed = res.seeds[0]
    fig, axes = plt.subplots(2, len(tasks), figsize=(WIDTH, 5.6), squeeze=False, sharex=True, sharey=True)
    for j, task in enumerate(tasks):
        base = res.run_for(task, "baseline", seed)
        n_train = base.train_examples
        sources = [("before fine-tuning", res.raw.get(res.models[0], {}).get(task)),
                   ("fine-tuned", base.spectra["layers"])]
        for i, (title, rows) in enumerate(sources):
            ax = axes[i, j]
            if rows is None:
                ax.set_axis_off()
                continue
            common.spectrum_cdfs(ax, [(x.label, np.asarray(x.quantiles)) for x in rows],
                                 title=f"{task}, {n_train:,} training\n{title}" if i == 0 else title, xlabel="")
            ax.axhline(0.8, color="0.5", lw=1, ls=":")
            if j:
                ax.set_ylabel("")
            if ax.get_legend() is not None:
                ax.get_legend().remove()
    return _shared_legend(fig, axes, axes[1, 0], bottom=0.1)


def _shared_legend(fig: plt.Figure, axes, source: plt.Axes, bottom: float) -> plt.Figure:
    """A grid of spectrum-CDF panels finished: the bottom row's axis label, one legend below the grid (the
    entries of panel `source`), the layout above it."""
    for ax in axes[-1]:
        ax.set_xlabel("normalised singular value")
    handles, labels = source.get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=min(len(labels), 4), frameon=False)
    fig.tight_layout(rect=(0, bottom, 1, 1))
    return _legible(fig)


def size_table(res: Result):
    """Per task, in order of training-set size: the normalised singular value where the last layer's CDF
    reaches 0.8, before fine-tuning and fine-tuned (mean and 95 % interval over seeds), and the change."""
    rows = []
    for task in res.size_tasks():
        run = res.run_for(task, "baseline", res.seeds[0])
        rows.append({"task": task, "training examples": f"{run.train_examples:,}",
                     "validation examples": res.spectra_n(task),
                     "before fine-tuning": f"{res.value_at(task, source='raw').estimate:.3f}",
                     "fine-tuned [95 % interval]": res.value_at(task).text(3),
                     "change [95 % interval]": res.finetuning_shift(task).text(3)})
    return common.table(pd.DataFrame(rows))


def spectrum_table(res: Result):
    """Per task and variant (first comparison seed): median, skewness and TokenUni of the last layer's
    normalised singular values, and for SoftDecay the median just before → just after the transform."""
    df = frame(res.spectrum)
    out = pd.DataFrame({"task": df.task, "variant": df.variant, "median": df["last layer median"],
                        "skewness": df["last layer skewness"], "TokenUni": df["last layer TokenUni"]})
    if len(res.models) > 1:
        out.insert(0, "model", df.model)
    if "median before SD" in df:
        out["transform: median before → after"] = [
            "" if pd.isna(b) else f"{b:.3f} → {a:.3f}" for b, a in zip(df["median before SD"], df["median after SD"],
                                                                      strict=True)]
    return common.table(out)


def wide_table(res: Result):
    """The larger encoder on RTE, seed by seed: baseline and SoftDecay final validation accuracy, their
    difference, and the baseline's accuracy after each epoch; then the means with their 95 % t intervals,
    and the paper's BERT-base run beside them."""
    if not res.wide:
        return common.table(pd.DataFrame({res.wide_model or "larger encoder": ["not run at this scale"]}))
    rows = []
    for seed in res.wide_seeds():
        b, s = res.wide_run("baseline", seed), res.wide_run("softdecay", seed)
        rows.append({"seed": str(seed), "baseline": f"{b.score('acc'):.1f}", "SoftDecay": f"{s.score('acc'):.1f}",
                     "SoftDecay − baseline": f"{s.score('acc') - b.score('acc'):+.1f}",
                     "baseline after each epoch": ", ".join(f"{a:.1f}" for a in b.val_acc)})
    rows.append({"seed": "mean [95 % interval]", "baseline": res.wide_score("baseline").text(1, signed=False),
                 "SoftDecay": res.wide_score("softdecay").text(1, signed=False),
                 "SoftDecay − baseline": res.wide_interval().text(1), "baseline after each epoch": ""})
    base, sd = res.wide_paper()
    rows.append({"seed": "paper: BERT-base, one run", "baseline": f"{base:.2f}", "SoftDecay": f"{sd:.2f}",
                 "SoftDecay − baseline": f"{sd - base:+.2f}", "baseline after each epoch": ""})
    return common.table(pd.DataFrame(rows))


def timing_table(res: Result):
    """Steps and seconds per epoch per task and variant (`Result.timing_means`)."""
    return common.table(res.timing_means(), digits=1)


def _range(values) -> str:
    """'0.012–0.034' (min–max over tasks), one value when they agree to the digits shown, '–' when empty."""
    v = [float(x) for x in values if x is not None and np.isfinite(x)]
    if not v:
        return "–"
    lo, hi = min(v), max(v)
    return f"{lo:.3f}" if f"{lo:.3f}" == f"{hi:.3f}" else f"{lo:.3f}–{hi:.3f}"


def _expdecay_text(res: Result, label: str) -> str:
    """ExpDecay − baseline pooled over the tasks as text ('–' when the reading did not run)."""
    return res.expdecay_effect(label).text(2) if label in res.expdecay_labels() else "–"


def publish(res: Result) -> None:
    """Glue the figures and every number the prose quotes (literal dicts of `glue-*` keys, one per section of the
    chapter)."""
    common.set_theme()
    common.publish({**_setup(res), **_power(res), **_holdout(res), **_expdecay(res), **_spectra(res),
                    **_probes(res), **_wide(res)})
    common.figure("glue-paired", paired_figure(res))
    common.figure("glue-alpha", alpha_figure(res))
    common.figure("glue-training", training_curves(res))
    common.figure("glue-cdfs", cdf_figure(res))
    common.figure("glue-fig8", size_figure(res))


def _setup(res: Result) -> dict[str, object]:
    """The grid: runs, seeds, tasks, models, the grids searched; the paper's gains."""
    gains = frame(res.paper_gains)
    return {
        "glue-runs": len(res.runs), "glue-from-cache": sum(r.from_cache for r in res.runs),
        "glue-seeds": len(res.seeds), "glue-epochs": res.epochs, "glue-tasks": _and(res.tasks),
        "glue-lr-grid": _power_grid(res.lr_grid), "glue-alpha-grid": "{" + ", ".join(f"{a:g}".replace("-", "−")
                                                                                for a in res.alpha_grid) + "}",
        "glue-models": ", ".join(res.models), "glue-about-models": "; ".join(about(m) for m in res.models),
        "glue-grid-hours": res.run_hours(),
        "glue-gain-min": float(gains["gain %"].min()), "glue-gain-max": float(gains["gain %"].max()),
        "glue-gain-max-task": str(gains.loc[gains["gain %"].idxmax(), "task"]),
    }


def _power(res: Result) -> dict[str, object]:
    """What the seeds can detect: RTE's paired interval against the paper's gain, the smallest detectable effect
    per task, the margin over the majority class, the flattening and size effects."""
    margins, detectable = res.majority_margins(), [res.detectable(t) for t in res.tasks]
    low_task = min(margins, key=margins.get)
    rte = res.paired_interval("RTE") if "RTE" in res.tasks else None
    return {
        "glue-rte-high": rte.high if rte else float("nan"),
        "glue-rte-low": rte.low if rte else float("nan"),
        "glue-rte-detectable": res.detectable("RTE") if rte else float("nan"),
        "glue-rte-paper-gain": res.paper_gain("RTE"),
        "glue-detectable-min": float(np.nanmin(detectable)), "glue-detectable-max": float(np.nanmax(detectable)),
        "glue-flatter": res.flattening().text(3),
        "glue-size": res.size_effect().text(3),
        "glue-clear-min": margins[low_task], "glue-clear-min-task": str(low_task),
        "glue-alpha-max-move": res.alpha_max_move(),
    }


def _holdout(res: Result) -> dict[str, object]:
    """The selection on a held-out part of the training set against the selection on validation."""
    held = selection_changes(res.selection, res.holdout_selection)
    return {
        "glue-holdout-share": HOLDOUT,
        "glue-holdout-choices": len(held), "glue-holdout-same": int(held["same"].sum()) if len(held) else 0,
        "glue-holdout-tasks": ", ".join(dict.fromkeys(held["task"])) if len(held) else "",
        "glue-holdout-changed": (", ".join(f"{r.task} ({'α₀' if 'α' in r.choice else 'learning rate'})"
                                           for r in held.itertuples() if not r.same) if len(held) else ""),
    }


def _expdecay(res: Result) -> dict[str, object]:
    """ExpDecay, the paper's penalty: its readings against the baseline and the signs of its differences."""
    signs, rte = res.expdecay_signs(), "RTE" in res.tasks
    return {
        "glue-expdecay-seeds": max((len(r["differences"]) for r in res.paired if r["variant"] != "softdecay"),
                                   default=0),
        "glue-expdecay-rte-width-min": res.expdecay_widths("RTE")[0] if rte else float("nan"),
        "glue-expdecay-rte-width-max": res.expdecay_widths("RTE")[1] if rte else float("nan"),
        "glue-expdecay-paper": res.paper_expdecay_gain(),
        "glue-expdecay-margin": res.expdecay_margin(),
        "glue-expdecay-top5": _expdecay_text(res, "expdecay (top-5)"),
        "glue-expdecay-all": _expdecay_text(res, "expdecay (all)"),
        "glue-expdecay-squared": _expdecay_text(res, "expdecay (squared)"),
        "glue-expdecay-means": signs["means"], "glue-expdecay-means-below": signs["means_below"],
        "glue-expdecay-intervals-below": signs["intervals_below"],
        "glue-expdecay-intervals-above": signs["intervals_above"],
        "glue-expdecay-seed-diffs": signs["seeds"], "glue-expdecay-seeds-below": signs["seeds_below"],
    }


def _spectra(res: Result) -> dict[str, object]:
    """Fig. 8: the singular-value spectra, raw and after SoftDecay's transform."""
    spec, raw_range = frame(res.spectrum), res.raw_range()
    sd_rows = spec.dropna(subset=["median after SD"]) if "median after SD" in spec else spec.iloc[0:0]
    return {
        "glue-fig8-n": min((res.spectra_n(t) for t in res.tasks), default=0),
        "glue-fig8-raw-low": raw_range[0][1], "glue-fig8-raw-low-task": raw_range[0][0],
        "glue-fig8-raw-high": raw_range[1][1], "glue-fig8-raw-high-task": raw_range[1][0],
        "glue-sd-median-before": _range(sd_rows.get("median before SD", [])),
        "glue-sd-median-after": _range(sd_rows.get("median after SD", [])),
    }


def _probes(res: Result) -> dict[str, object]:
    """The side measurements: RTE's learning-rate probe and the cost of an SST-2 epoch."""
    probe, sst2 = rte_probe(), side_measurements()["sst2_time"] or {}
    p5, p10 = probe.get(5e-5, {}), probe.get(1e-4, {})
    return {
        "glue-probe-5e-05-train-first": p5.get("train_first"), "glue-probe-5e-05-train-last": p5.get("train_last"),
        "glue-probe-5e-05-peak": p5.get("peak"), "glue-probe-5e-05-peak-epoch": p5.get("peak_epoch"),
        "glue-probe-5e-05-last": p5.get("last"),
        "glue-probe-0.0001-peak": p10.get("peak"), "glue-probe-0.0001-peak-epoch": p10.get("peak_epoch"),
        "glue-probe-0.0001-last": p10.get("last"),
        "glue-sst2-steps": sst2.get("steps"), "glue-sst2-sample": f"{sst2.get('train_examples', 0):,}",
        "glue-sst2-train": f"{sst2.get('full_train_examples', 0):,}", "glue-sst2-seconds": sst2.get("epoch_seconds"),
        "glue-sst2-steps-per-epoch": f"{sst2.get('steps_per_full_epoch', 0):,}",
        "glue-sst2-run-minutes": sst2.get("estimated_seconds_per_3_epoch_run", float("nan")) / 60,
        "glue-sst2-grid-hours": sst2.get("estimated_cpu_hours_per_task_grid"),
    }


def _wide(res: Result) -> dict[str, object]:
    """The larger encoder on RTE."""
    return {
        "glue-wide-model": res.wide_model, "glue-about-wide": about(res.wide_model),
        "glue-wide-seeds": len(res.wide_seeds()),
        "glue-wide-alpha": res.wide_alpha(),
        "glue-wide-base": res.wide_score("baseline").text(1, signed=False),
        "glue-wide-majority": res.wide_majority.get("acc", float("nan")),
        "glue-wide-over-majority": res.wide_over_majority().text(1),
        "glue-wide-minilm": res.minilm_score(res.wide_task()).estimate,
        "glue-wide-over-minilm": res.wide_over_grid().text(1),
        "glue-wide-sd": res.wide_interval().text(2),
        "glue-wide-sd-low": res.wide_interval().low, "glue-wide-sd-high": res.wide_interval().high,
        "glue-wide-detectable": res.wide_detectable(), "glue-wide-hours": res.wide_hours(),
        "glue-wide-loss-base": res.wide_final_loss("baseline").estimate,
        "glue-wide-loss-sd": res.wide_final_loss("softdecay").estimate,
    }
