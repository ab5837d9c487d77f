"""Figures and tables of the STS chapter, drawn from `experiments.sts.Result`."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from IPython.display import Markdown

from ..core.sts import METHODS
from ..experiments.sts import Result
from . import common

CHAPTER = "sts"
_KEYS = {"vanilla": "vanilla", "whitening": "whitening", "whitening-256": "whitening-256",
         "de-escalation": "deesc", "SoftDecay (sentence)": "sd-sentence", "SoftDecay (token)": "sd-token"}


def _first(res: Result) -> dict:
    return res.runs[res.models[0]]


def runs_table(res: Result):
    """Which model ran, on how many pairs, and whether it was read from the committed results."""
    df = pd.DataFrame([{"model": m, "pairs": int(sum(res.runs[m]["pairs"].values())),
                        "results": "read from committed results" if res.from_cache[m] else "computed now"}
                       for m in res.models])
    return common.table(df)


def table1(res: Result):
    """Table 1: our Spearman ×100 per method and set, with the paper's rows beside."""
    cols = list(res.datasets)
    rows = [{"source": f"ours ({res.scale})", "model": m, "method": method,
             **{d: res.runs[m]["table1"][d].get(method, np.nan) for d in cols}, "Avg": res.averages[m][method]}
            for m in res.models for method in METHODS]
    paper = [{"source": "paper", "model": r["model"], "method": r["method"], **{d: r.get(d, np.nan) for d in cols},
              "Avg": r["Avg"]} for r in res.paper_table1
             if r["method"] in ("vanilla", "whitening", "whitening-256", "SoftDecay")]
    return common.table(pd.DataFrame(rows + paper), digits=2)


def alpha_sweep_frame(res: Result) -> pd.DataFrame:
    sweep = _first(res)["alpha_sweep"]
    df = pd.DataFrame({d: {float(a): v for a, v in sweep[d].items()} for d in res.datasets})
    df.index.name = "α"
    return df


def alpha_sweep_figure(res: Result) -> plt.Figure:
    df = alpha_sweep_frame(res)
    fig, ax = plt.subplots(figsize=(10, 4))
    for d in df.columns:
        ax.plot(df.index, df[d], marker="o", label=d)
    ax.set_xlabel("α")
    ax.set_ylabel("Spearman ×100")
    ax.legend(fontsize=8, ncol=2, loc="center left", bbox_to_anchor=(1.0, 0.5))
    ax.set_title(f"SoftDecay α sweep — {res.models[0]}, {res.pooling} pooling")
    return fig


def alpha_sweep_table(res: Result):
    return common.table(alpha_sweep_frame(res).reset_index(), digits=2)


def table4(res: Result):
    """Table 4: EV₁, log RBF_dis and TokenUni per set and method, the paper's BERT columns beside."""
    t4 = pd.DataFrame([{"dataset": d, "method": method, **m} for d in res.datasets
                       for method, m in _first(res)["table4"][d].items()])
    show = t4.pivot(index="dataset", columns="method", values=["EV1", "RBF_dis", "TokenUni"])
    paper = {(r["dataset"], r["metric"]): r for r in res.paper_table4}
    for metric in ("EV1", "RBF_dis", "TokenUni"):
        for col in ("BERT", "BERT+SoftDecay"):
            show[(metric, f"paper {col}")] = [paper.get((d, metric), {}).get(col, np.nan) for d in show.index]
    return common.table(show.sort_index(axis=1), digits=4, index=True)


def lsds_figure(res: Result) -> plt.Figure:
    """Figure 6: LSDS of whitening and SoftDecay per set (lower keeps more of the neighbourhoods)."""
    ls = pd.DataFrame(_first(res)["lsds"]).T
    fig, ax = plt.subplots(figsize=(10, 4))
    ls.plot.bar(ax=ax, rot=0)
    ax.set_ylabel("LSDS (k = 12)")
    ax.set_title(f"Figure 6 — LSDS of whitening vs SoftDecay, {res.models[0]}")
    return fig


def _missing(title: str, what: str) -> plt.Figure:
    fig, ax = plt.subplots(figsize=(10, 2))
    ax.text(0.5, 0.5, f"{what} was not among the datasets run", ha="center", va="center")
    ax.set_axis_off()
    ax.set_title(title)
    return fig


def cdf_figure(res: Result) -> plt.Figure:
    """Figure 3: CDFs of the normalised singular values of each layer's sentence-embedding matrix
    (STS-B), before and after SoftDecay."""
    title = f"Figure 3 — singular values of the per-layer sentence-embedding matrix, STS-B, {res.models[0]}"
    cdf = _first(res).get("cdf")
    if cdf is None:
        return _missing(title, "STS-B")
    fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
    for ax, which in zip(axes, ("before", "after"), strict=True):
        vals = [(f"layer {i}", np.asarray(v) / max(v)) for i, v in enumerate(cdf[which])]
        common.spectrum_cdfs(ax, vals, title=f"{which} SoftDecay (α = {res.alpha})")
    fig.suptitle(title)
    return fig


def tsne_figure(res: Result) -> plt.Figure:
    """Figure 4: t-SNE of STS-15 pairs under vanilla, whitening and SoftDecay, with their metrics."""
    panels = _first(res).get("tsne")
    if panels is None:
        return _missing(f"Figure 4 — t-SNE of STS-15 pairs, {res.models[0]}", "STS15")
    fig, axes = plt.subplots(1, 3, figsize=(14, 4.6))
    for ax, (method, p) in zip(axes, panels.items(), strict=True):
        xy, k = np.asarray(p["xy"]), p["n"]
        ax.scatter(xy[:k, 0], xy[:k, 1], s=6, c="k", label="sentence 1")
        ax.scatter(xy[k:, 0], xy[k:, 1], s=6, c="tab:red", label="sentence 2")
        ax.set_title(f"{method}\nEV₁ {p['EV1']:.3f} · RBF {p['RBF_dis']:.2f} · TokenUni {p['TokenUni']:.3f} · "
                     f"LSDS {p['LSDS']:.3f}", fontsize=9)
        ax.set_xticks([])
        ax.set_yticks([])
    axes[0].legend(fontsize=8)
    fig.suptitle(f"Figure 4 — t-SNE of {panels['vanilla']['n']} STS-15 pairs, {res.models[0]}")
    return fig


def encoder_table(res: Result):
    """Cosine similarities of the three demo sentences under `SoftDecayEncoder(mode="token")`."""
    d = res.encoder_demo
    return common.table(pd.DataFrame(d["cosine"], index=d["labels"], columns=d["labels"]), index=True)


def publish(res: Result) -> None:
    """Glue the figures and every number the prose quotes (`sts-*`)."""
    common.set_theme()
    m = res.models[0]
    avg = res.averages[m]
    best = max((v, k) for k, v in avg.items() if np.isfinite(v))
    values: dict[str, object] = {f"avg-{_KEYS[k]}": v for k, v in avg.items()}
    values.update({
        "model": Markdown(f"**{m}**"),
        "pairs": int(sum(res.runs[m]["pairs"].values())),
        "cache": Markdown("read from the committed results" if res.from_cache[m] else "computed now"),
        "best-method": Markdown(f"*{best[1]}*"), "best-avg": best[0],
        "lsds-wins": res.lsds_wins[m], "lsds-sets": len(res.runs[m]["lsds"]),
    })
    common.publish(CHAPTER, values)
    common.figure("sts-alpha-sweep", alpha_sweep_figure(res))
    common.figure("sts-fig6", lsds_figure(res))
    common.figure("sts-fig3", cdf_figure(res))
    common.figure("sts-fig4", tsne_figure(res))
