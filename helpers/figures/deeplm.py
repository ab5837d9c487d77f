"""Figures, table and glued numbers of the deep causal LM chapter (Yu & Zhang §3.4, Figure 7)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from IPython.display import Markdown

from ..core.causal_lm import VARIANTS
from ..core.stats import interval_text, moving_average, verdict
from ..experiments.deeplm import Result
from . import common

#: the order of `common.layer_curves` (seaborn palette), so both figures colour the variants alike
COLOURS = {"post-norm": "C0", "pre-norm": "C1", "de-escalated": "C2"}


def fig7(res: Result) -> plt.Figure:
    """Figure 7: training loss per step (moving average; one line per seed) and held-out loss per
    evaluation (mean ± min/max over seeds), with the uniform and unigram baselines."""
    common.set_theme()
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    k = max(1, res.steps // 50)
    for v in res.variants:
        for i, h in enumerate(res.histories[v]):
            y = moving_average(h["loss"], k)
            axes[0].plot(np.arange(len(y)) + k, y, color=COLOURS.get(v), lw=1.2, alpha=0.8,
                         label=v if i == 0 else None)
        ev = np.array([h["eval_loss"] for h in res.histories[v] if not h.get("diverged")], dtype=float)
        if len(ev):
            steps = res.histories[v][0]["eval_step"]
            axes[1].plot(steps, ev.mean(0), color=COLOURS.get(v), marker="o", ms=3, label=v)
            axes[1].fill_between(steps, ev.min(0), ev.max(0), color=COLOURS.get(v), alpha=0.2)
    for ax, title in zip(axes, ("training loss (moving average, each seed)", "held-out loss (range over seeds)"),
                         strict=True):
        ax.axhline(res.uniform_nats, color="grey", ls=":", lw=1, label="uniform")
        ax.axhline(res.unigram_nats, color="grey", ls="--", lw=1, label="unigram")
        ax.set_xlabel("optimiser step")
        ax.set_ylabel("cross-entropy (nats per token)")
        ax.set_title(title)
    axes[1].legend(fontsize=8)
    fig.suptitle(f"Figure 7 counterpart — causal LM, depth {res.depth}, {res.tokens}, {res.steps} steps, "
                 f"{common.seeds_text(len(res.seeds))} ({res.scale} scale)")
    return common.figure("deeplm-fig7", fig)


def tsim(res: Result) -> plt.Figure:
    """t_sim of every block's output on a held-out batch, at initialisation and after training."""
    common.set_theme()
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8), sharey=True)
    for ax, idx, title in zip(axes, (0, -1), ("at initialisation", "after training"), strict=True):
        curves = {v: np.array([h["t_sim"][idx] for h in res.histories[v]], dtype=float) for v in res.variants}
        common.layer_curves(ax, curves, ylabel="t_sim", title=title, markers=False, xlabel="block")
    fig.suptitle("Token similarity t_sim per block (block 0 = embeddings), mean over seeds")
    return common.figure("deeplm-tsim", fig)


def final_table(res: Result):
    """Per variant: final training loss (last 5 % of steps) and held-out loss, mean and range over seeds,
    t_sim of the last block, seconds per step."""
    tr, ev, ts = res.final_train(), res.final_eval(), res.last_t_sim()
    rows = []
    for v in res.variants:
        secs = [h.get("wall_time_s", np.nan) / max(1, len([x for x in h["loss"] if x == x])) for h in res.histories[v]]
        rows.append({"variant": v, "final train loss": np.nanmean(tr[v]),
                     "range over seeds": f"{np.nanmin(tr[v]):.3f}–{np.nanmax(tr[v]):.3f}",
                     "held-out loss": np.nanmean(ev[v]), "last-block t_sim": ts[v],
                     "diverged runs": sum(bool(h.get("diverged")) for h in res.histories[v]),
                     "s per step": float(np.nanmean(secs))})
    return common.table(pd.DataFrame(rows), digits=3)


def publish(res: Result) -> None:
    """Draw and glue the figures, and glue every number the prose quotes."""
    fig7(res)
    tsim(res)
    tr, ev, ts = res.final_train(), res.final_eval(), res.last_t_sim()
    values: dict[str, object] = {"depth": res.depth, "steps": res.steps, "seeds": len(res.seeds),
                                 "params": f"{res.parameters:,}", "tokens": res.tokens,
                                 "uniform": res.uniform_nats, "unigram": res.unigram_nats}
    for v in VARIANTS:
        values[f"train-{v}"] = float(np.nanmean(tr[v])) if v in tr else np.nan
        values[f"eval-{v}"] = float(np.nanmean(ev[v])) if v in ev else np.nan
        values[f"tsim-{v}"] = ts.get(v, np.nan)
        values[f"tsim0-{v}"] = (float(np.mean([h["t_sim"][0][-1] for h in res.histories[v]]))
                                if v in res.histories else np.nan)
    values["seeds-text"] = Markdown(common.seeds_text(len(res.seeds)))
    values["over-seeds"] = Markdown("ranges over the " + common.seeds_text(len(res.seeds)) if len(res.seeds) > 1
                                    else "one seed")
    for a, b in (("post-norm", "pre-norm"), ("de-escalated", "pre-norm"), ("de-escalated", "post-norm")):
        if a in res.variants and b in res.variants:
            d = res.paired(a, b)
            values[f"diff-{a}-{b}"] = d["mean"]
            values[f"diff-{a}-{b}-min"] = d["min"]
            values[f"diff-{a}-{b}-max"] = d["max"]
            values[f"ci-{a}-{b}"] = Markdown(interval_text(d))
            values[f"verdict-{a}-{b}"] = Markdown(verdict(d, above="higher loss", below="lower loss"))
    to3 = res.steps_to(3.0)
    near = res.steps_near(res.unigram_nats, PLATEAU_TOL)
    values["plateau-tol"] = PLATEAU_TOL
    for v in VARIANTS:
        values[f"steps-to-3-{v}"] = _span([s for s in to3.get(v, []) if s is not None], "never")
        values[f"plateau-{v}"] = _span(near.get(v, []), "–")
    ratio = res.token_ratio()
    for who, tag in (("ours", ""), ("paper", "paper-")):
        b = res.budget.get(who, {})
        values[f"{tag}batch"], values[f"{tag}seq-len"] = b.get("batch_size", 0), b.get("seq_len", 0)
    values.update({"step-ratio": ratio.get("steps", np.nan), "token-ratio": ratio.get("tokens", np.nan),
                   "tokens-per-step": ratio.get("ours_per_step", 0),
                   "paper-tokens-per-step": ratio.get("paper_per_step", 0),
                   "mtokens": ratio.get("ours", np.nan) / 1e6, "paper-mtokens": ratio.get("paper", np.nan) / 1e6})
    common.publish("deeplm", values)


#: how close (nats) the moving-average training loss must be to the unigram loss to count as dwelling there
PLATEAU_TOL = 0.05


def _span(values: list[int], empty: str) -> str:
    """'156–190' over seeds ('156' when all agree); `empty` when there is nothing."""
    if not values:
        return empty
    lo, hi = min(values), max(values)
    return f"{lo}" if lo == hi else f"{lo}–{hi}"


__all__ = ["fig7", "tsim", "final_table", "publish"]
