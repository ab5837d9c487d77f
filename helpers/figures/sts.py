"""Figures and tables of the STS chapter, drawn from `experiments.sts.Result`."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from IPython.display import Markdown

from ..core.sts import METHODS, PROTOCOLS
from ..experiments.sts import PLANT_METHODS, Result
from . import common

CHAPTER = "sts"
_KEYS = {"vanilla": "vanilla", "whitening": "whitening", "whitening-256": "whitening-256",
         "de-escalation": "deesc", "SoftDecay (sentence)": "sd-sentence", "SoftDecay (token)": "sd-token",
         "SoftDecay (σ/√N)": "sd-sqrtn", "SoftDecay (σ/σ_max)": "sd-max"}
_PROT = {"subset-mean": "paper", "pooled": "pooled"}
#: what each of our rows is, said in the table
LABELS = {"vanilla": "raw model", "whitening": "whitening fitted on the test pairs (WhiteBERT-style)",
          "whitening-256": "the same, first 256 directions", "de-escalation": "mean removed (Yu & Zhang eq. 21)",
          "SoftDecay (sentence)": "SoftDecay on the sentence matrix (the paper's)",
          "SoftDecay (token)": "SoftDecay on each sentence's tokens (ours)",
          "SoftDecay (σ/√N)": "SoftDecay of σ/√N (ours)", "SoftDecay (σ/σ_max)": "SoftDecay of σ/σ_max (ours)"}
#: the paper's row that matches each of ours (whitening: WhiteBERT fits on the test set like ours; the
#: paper's "whitening (NLI)" rows fit on NLI, which we do not have)
PAPER_MATCH = {"vanilla": "vanilla", "whitening": "WhiteBERT", "SoftDecay (sentence)": "SoftDecay"}
#: our model name -> the paper's model label in data/yan_2022_table1.csv
PAPER_MODEL = {"bert-base-cased": "bert-base-cased", "distilbert-base-uncased": "distilbert-base-uncased",
               "albert-base-v2": "albert-base", "roberta-base": "roberta-base"}


def _first(res: Result) -> dict:
    return res.runs[res.models[0]]


def _all_runs(res: Result) -> dict[str, dict]:
    return {**res.runs, **res.extras}


def runs_table(res: Result):
    """Which model ran, on how many pairs, and whether it was read from the committed results."""
    df = pd.DataFrame([{"model": m, "pairs": int(sum(r["pairs"].values())),
                        "results": "read from committed results" if res.from_cache[m] else "computed now"}
                       for m, r in _all_runs(res).items()])
    return common.table(df)


def paper_rows(res: Result, model: str) -> tuple[str, list[dict]]:
    """The paper's Table 1 rows to set beside `model`: its own when the paper ran it, else BERT-base's
    as a labelled reference. Returns (the paper's model label, rows)."""
    label = PAPER_MODEL.get(model, "bert-base-cased")
    return label, [r for r in res.paper_table1 if r["model"] == label]


def _ci_text(ci: list[float] | None) -> str:
    if ci is None:
        return ""
    d, lo, hi = ci
    mark = "" if lo <= 0 <= hi else " ✱"
    return f"{d:+.2f} [{lo:+.2f}, {hi:+.2f}]{mark}"


def table1(res: Result, protocol: str = "subset-mean", model: str | None = None):
    """Table 1: our Spearman ×100 per method and set under one protocol, the difference of the Avg
    from the raw model with its 95 % paired bootstrap interval (✱: the interval excludes 0), and the
    paper's matching rows beside (its numbers use the subset-mean protocol)."""
    model = model or res.models[0]
    run = _all_runs(res)[model]
    cols = list(res.datasets)
    rows = []
    for method in METHODS:
        if method not in run["scores"][protocol][cols[0]]:
            continue
        rows.append({"source": f"ours, {model}", "row": LABELS[method],
                     **{d: run["scores"][protocol][d].get(method, np.nan) for d in cols},
                     "Avg": res.averages[model][protocol][method],
                     "Δ Avg vs raw [95 %]": _ci_text(run.get("avg_ci", {}).get(protocol, {}).get(method))})
    label, paper = paper_rows(res, model)
    src = "paper" if label == PAPER_MODEL.get(model) else "paper (BERT-base, another model)"
    for r in paper:
        ours = [k for k, v in PAPER_MATCH.items() if v == r["method"]]
        rows.append({"source": f"{src}, {label}", "row": r["method"] + (f" ↔ {LABELS[ours[0]]}" if ours else ""),
                     **{d: r.get(d, np.nan) for d in cols}, "Avg": r["Avg"], "Δ Avg vs raw [95 %]": ""})
    return common.table(pd.DataFrame(rows), digits=2)


def intervals_frame(res: Result, protocol: str = "subset-mean", model: str | None = None) -> pd.DataFrame:
    """Per set: each method minus the raw model, with its 95 % paired bootstrap interval."""
    model = model or res.models[0]
    ci = _all_runs(res)[model]["ci"][protocol]
    return pd.DataFrame({d: {m: _ci_text(v) for m, v in ci[d].items()} for d in res.datasets})


def intervals_table(res: Result, protocol: str = "subset-mean", model: str | None = None):
    df = intervals_frame(res, protocol, model)
    df.index.name = "method − raw"
    return common.table(df.reset_index())


def significant(res: Result, protocol: str = "subset-mean", model: str | None = None) -> dict[str, dict[str, int]]:
    """Per method: on how many sets the interval lies above 0 (`up`) and below 0 (`down`)."""
    model = model or res.models[0]
    ci = _all_runs(res)[model]["ci"][protocol]
    out: dict[str, dict[str, int]] = {}
    for d in res.datasets:
        for m, (_, lo, hi) in ci[d].items():
            c = out.setdefault(m, {"up": 0, "down": 0})
            c["up"] += lo > 0
            c["down"] += hi < 0
    return out


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
    ax.set_ylabel("Spearman ×100 (mean over subsets)")
    ax.legend(fontsize=8, ncol=2, loc="center left", bbox_to_anchor=(1.0, 0.5))
    ax.set_title(f"SoftDecay α sweep — {res.models[0]}, {res.pooling} pooling")
    return fig


def alpha_sweep_table(res: Result):
    return common.table(alpha_sweep_frame(res).reset_index(), digits=2)


#: the flips table's columns: every count is summed over the two sentence matrices of a set (first and
#: second sentences, N × d each, transformed separately as Algorithm 1 is applied), so a rank can reach 2d
FLIP_COLUMNS = {"rank": "rank (sum of the two sentence matrices)", "sigma_min": "σ_min (both)",
                "sigma_max": "σ_max (both)", "raw": "flipped: σ (sum of both)",
                "sqrt_n": "flipped: σ/√N (sum of both)", "max": "flipped: σ/σ_max (sum of both)"}


def flips_frame(res: Result) -> pd.DataFrame:
    """How many directions SoftDecay flips (live singular values below |α| after the scaling), per set,
    summed over the two sentence matrices, out of their summed rank."""
    rows = [{"model": m, "set": d, **{label: f[k] for k, label in FLIP_COLUMNS.items()}}
            for m, run in _all_runs(res).items() for d, f in run["flips"].items()]
    return pd.DataFrame(rows)


def flips_table(res: Result):
    return common.table(flips_frame(res), digits=3)


def layer_flips(res: Result) -> list[int]:
    cdf = _first(res).get("cdf") or {}
    return list(cdf.get("flips", []))


def paper_table4_value(res: Result, dataset: str, metric: str, column: str) -> float:
    """One cell of the paper's Table 4 as printed (data/yan_2022_table4.csv); NaN when absent."""
    for r in res.paper_table4:
        if r["dataset"] == dataset and r["metric"] == metric:
            return float(r.get(column, np.nan))
    return float("nan")


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


def control_table(res: Result):
    """Table 4's control: the metrics of structureless sets (columns shuffled; Gaussian) before and
    after SoftDecay, beside the real embeddings'."""
    rows = []
    run = _first(res)
    for d in res.datasets:
        t = run["table4"][d]
        rows.append({"set": d, "input": "sentence embeddings", **{f"{k} before": t["vanilla"][k] for k in t["vanilla"]},
                     **{f"{k} after": t["SoftDecay"][k] for k in t["SoftDecay"]}})
        for kind, c in run["control"].get(d, {}).items():
            rows.append({"set": d, "input": kind, **{f"{k} before": v for k, v in c["before"].items()},
                         **{f"{k} after": v for k, v in c["after"].items()}})
    return common.table(pd.DataFrame(rows), digits=3)


def lsds_frame(res: Result) -> pd.DataFrame:
    return pd.DataFrame(_first(res)["lsds"]).T


def lsds_figure(res: Result) -> plt.Figure:
    """Figure 6: LSDS of whitening and SoftDecay per set, with eq. (6)'s raw RBF weights (left) and
    weights normalised to sum to one (right); the identity map's score is the reference."""
    ls = lsds_frame(res)
    fig, axes = plt.subplots(1, 2, figsize=(12, 4))
    for ax, w in zip(axes, ("eq. 6", "normalised"), strict=True):
        ls[[c for c in ls.columns if c.endswith(f"({w})")]].rename(columns=lambda c: c.split(" (")[0]).plot.bar(
            ax=ax, rot=0, color=["0.6", "tab:blue", "tab:orange"])
        ax.set_ylabel(f"LSDS (k = 12, {w} weights)")
        ax.set_title(f"{w} weights")
    fig.suptitle(f"Figure 6 — LSDS of whitening vs SoftDecay, identity map as reference, {res.models[0]}")
    return fig


def _missing(title: str, what: str) -> plt.Figure:
    fig, ax = plt.subplots(figsize=(10, 2))
    ax.text(0.5, 0.5, f"{what} was not among the datasets run", ha="center", va="center")
    ax.set_axis_off()
    ax.set_title(title)
    return fig


def cdf_figure(res: Result) -> plt.Figure:
    """Figure 3: CDFs of the normalised singular values of each layer's sentence-embedding matrix
    (STS-B) before SoftDecay; after it on the last layer only (the paper's figure), and on every
    layer (what we showed before)."""
    title = f"Figure 3 — singular values of the per-layer sentence-embedding matrix, STS-B, {res.models[0]}"
    cdf = _first(res).get("cdf")
    if cdf is None:
        return _missing(title, "STS-B")
    fig, axes = plt.subplots(1, 3, figsize=(15, 4), sharey=True)
    layers = range(len(cdf["before"]))
    before = [(f"layer {i}", np.asarray(cdf["before"][i]) / max(cdf["before"][i])) for i in layers]
    last = len(before) - 1
    common.spectrum_cdfs(axes[0], before, title="before SoftDecay")
    common.spectrum_cdfs(axes[1], before[:-1] + [(f"layer {last} after",
                                                  np.asarray(cdf["after"][-1]) / max(cdf["after"][-1]))],
                         title=f"last layer transformed (as the paper), α = {res.alpha}")
    common.spectrum_cdfs(axes[2], [(f"layer {i}", np.asarray(cdf["after"][i]) / max(cdf["after"][i])) for i in layers],
                         title="every layer transformed")
    fig.suptitle(title)
    return fig


def planted_frame(res: Result, kind: str = "mean") -> pd.DataFrame:
    """Mean over the sets of each method's score (paper protocol) per planted size."""
    pl = _first(res)["planted"]
    df = pd.DataFrame({m: np.mean([pl[d][kind][m] for d in pl], 0) for m in PLANT_METHODS}, index=res.plant_sizes)
    df.index.name = "planted size (× RMS norm)"
    return df


def planted_figure(res: Result) -> plt.Figure:
    fig, axes = plt.subplots(1, 2, figsize=(12, 4), sharey=True)
    for ax, kind in zip(axes, ("mean", "spike"), strict=True):
        df = planted_frame(res, kind)
        for m in df.columns:
            ax.plot(df.index, df[m], marker="o", label=m)
        ax.set_xlabel("planted size (× RMS row norm)")
        ax.set_title({"mean": "a common vector added to every sentence",
                      "spike": "a common direction with a random coefficient"}[kind])
    axes[0].set_ylabel("Spearman ×100, mean over the sets")
    axes[1].legend(fontsize=8)
    fig.suptitle(f"Planted anisotropy on {res.models[0]} embeddings")
    return fig


def planted_table(res: Result):
    parts = [planted_frame(res, k).add_prefix(f"{k}: ") for k in ("mean", "spike")]
    return common.table(pd.concat(parts, axis=1).reset_index(), digits=2)


def extras_table(res: Result):
    """The anisotropic encoders: Avg per method under both protocols, with the paper-protocol interval."""
    rows = []
    for m, run in res.extras.items():
        for method in METHODS:
            if method not in res.averages[m]["subset-mean"]:
                continue
            rows.append({"model": m, "row": LABELS[method],
                         "Avg (paper protocol)": res.averages[m]["subset-mean"][method],
                         "Avg (pooled)": res.averages[m]["pooled"][method],
                         "Δ vs raw [95 %] (paper protocol)": _ci_text(run["avg_ci"]["subset-mean"].get(method))})
    if not rows:
        return Markdown("*No anisotropic encoder was run at this scale (`extra_models` is empty).*")
    return common.table(pd.DataFrame(rows), digits=3)


def extras_intervals(res: Result, model: str | None = None):
    """Per set, an anisotropic encoder's differences from its raw model (paper protocol); default the first."""
    if not res.extras or (model is not None and model not in res.extras):
        return Markdown(f"*{model or 'No anisotropic encoder'} was not run at this scale.*")
    return intervals_table(res, "subset-mean", model or next(iter(res.extras)))


def _tsne_axes(axes, panels: dict, with_titles: bool = True) -> None:
    for ax, (method, p) in zip(axes, panels.items(), strict=True):
        xy, k = np.asarray(p["xy"]), p["n"]
        ax.scatter(xy[:k, 0], xy[:k, 1], s=4, c="k", label="sentence 1")
        ax.scatter(xy[k:, 0], xy[k:, 1], s=4, c="tab:red", label="sentence 2")
        if with_titles:
            ax.set_title(f"{method}\nEV₁ {p['EV1']:.3f} · RBF {p['RBF_dis']:.2f} · TokenUni {p['TokenUni']:.3f} · "
                         f"LSDS {p['LSDS']:.3f}", fontsize=8)
        ax.set_xticks([])
        ax.set_yticks([])


def tsne_figure(res: Result) -> plt.Figure:
    """Figure 4: t-SNE of STS-15 pairs under vanilla, whitening and SoftDecay, with their metrics."""
    panels = _first(res)["tsne"].get("STS15")
    if panels is None:
        return _missing(f"Figure 4 — t-SNE of STS-15 pairs, {res.models[0]}", "STS15")
    fig, axes = plt.subplots(1, 3, figsize=(14, 4.6))
    _tsne_axes(axes, panels)
    axes[0].legend(fontsize=8)
    fig.suptitle(f"Figure 4 — t-SNE of {panels['vanilla']['n']} STS-15 pairs, {res.models[0]}")
    return fig


def tsne_grid(res: Result) -> plt.Figure:
    """Figure 7: t-SNE of every other set, rows vanilla / whitening / SoftDecay."""
    sets = [d for d in res.datasets if d != "STS15" and d in _first(res)["tsne"]]
    if not sets:
        return _missing("Figure 7 — t-SNE of the other sets", "a set other than STS15")
    fig, axes = plt.subplots(3, len(sets), figsize=(2.4 * len(sets), 7.5), squeeze=False)
    for j, d in enumerate(sets):
        panels = _first(res)["tsne"][d]
        _tsne_axes(axes[:, j], panels, with_titles=False)
        axes[0, j].set_title(d, fontsize=10)
        for i, (method, p) in enumerate(panels.items()):
            axes[i, j].set_xlabel(f"EV₁ {p['EV1']:.2f} · LSDS {p['LSDS']:.2f}", fontsize=7)
            if j == 0:
                axes[i, j].set_ylabel(method, fontsize=8)
    fig.suptitle(f"Figure 7 — t-SNE of sentence pairs (black: first, red: second), {res.models[0]}")
    return fig


def glue_cdf_figure(res: Result) -> plt.Figure:
    """Figure 8 without training: per-layer singular-value CDFs of the raw model on QNLI and RTE dev."""
    tasks = [t for t, v in res.glue_cdf.items() if "layers" in v]
    if not tasks:
        return _missing("Figure 8 — QNLI vs RTE", "QNLI or RTE")
    fig, axes = plt.subplots(1, len(tasks), figsize=(6 * len(tasks), 4), sharey=True, squeeze=False)
    for ax, t in zip(axes[0], tasks, strict=True):
        layers = res.glue_cdf[t]["layers"]
        common.spectrum_cdfs(ax, [(f"layer {i}", np.asarray(v) / max(v)) for i, v in enumerate(layers)],
                             title=f"{t} dev, {res.glue_cdf[t]['n']} sentences")
    fig.suptitle(f"Figure 8 — singular values of the sentence matrix per layer, raw {res.models[0]}, no training")
    return fig


def glue_cdf_medians(res: Result) -> dict[str, float]:
    """Median normalised singular value of the last layer per task (Fig. 8's summary)."""
    out = {}
    for t, v in res.glue_cdf.items():
        if "layers" in v:
            s = np.asarray(v["layers"][-1])
            out[t] = float(np.median(s / s.max()))
    return out


def encoder_table(res: Result):
    """Cosine similarities of the three demo sentences under `SoftDecayEncoder(mode="token")`."""
    d = res.encoder_demo
    return common.table(pd.DataFrame(d["cosine"], index=d["labels"], columns=d["labels"]), index=True)


#: the book's own MLM BERT among the anisotropic encoders (glued as `bert-*` when it was run)
BOOK_BERT = "book-mlm-bert"


def compare_intervals(a, b) -> str:
    """How difference `a` stands to difference `b`, each (mean, lo, hi) of a 95 % interval: "beats" when
    a's interval lies wholly above b's, "falls short of" when wholly below, "matches" when they overlap
    (the intervals cannot tell them apart); "–" when either is missing."""
    if a is None or b is None or not np.all(np.isfinite([*a, *b])):
        return "–"
    return "beats" if a[1] > b[2] else "falls short of" if a[2] < b[1] else "matches"


def whitening_vs_softdecay(res: Result) -> dict[str, str]:
    """Per anisotropic encoder (`smol`, `bert`): how whitening (full and 256-direction) compares with
    sentence-level SoftDecay, on their intervals against the raw model (paper protocol); and `summary`,
    the best whitening's reading over both encoders ("matches or beats" when it never falls short)."""
    first = next((e for e in res.extras if e != BOOK_BERT), None)
    out: dict[str, str] = {}
    best = []
    for tag, e in (("smol", first), ("bert", BOOK_BERT if BOOK_BERT in res.extras else None)):
        ci = res.extras[e]["avg_ci"]["subset-mean"] if e else {}
        sd = ci.get("SoftDecay (sentence)")
        words = {k: compare_intervals(ci.get(k), sd) for k in ("whitening", "whitening-256")}
        out.update({f"{tag}-white-vs-sd": words["whitening"], f"{tag}-white256-vs-sd": words["whitening-256"]})
        if e:
            order = ["falls short of", "matches", "beats"]
            ranked = [w for w in words.values() if w in order]
            best.append(max(ranked, key=order.index) if ranked else "–")
    kinds = set(best)
    out["summary"] = ("–" if not kinds or "–" in kinds else "beats" if kinds == {"beats"} else
                      "matches" if kinds == {"matches"} else "matches or beats" if "falls short of" not in kinds
                      else "falls short of" if kinds == {"falls short of"} else "is not consistently level with")
    return out


def _extra_values(res: Result) -> dict[str, object]:
    """`smol-*`: the first anisotropic encoder's numbers; `bert-*`: the book's own MLM BERT's (NaN when
    one was not run, so every role resolves)."""
    first = next((e for e in res.extras if e != BOOK_BERT), None)
    return {**_encoder_values(res, first, "smol"),
            **_encoder_values(res, BOOK_BERT if BOOK_BERT in res.extras else None, "bert")}


def _encoder_values(res: Result, e: str | None, tag: str) -> dict[str, object]:
    run = res.extras.get(e, {}) if e else {}
    nan = float("nan")
    out: dict[str, object] = {f"{tag}-name": Markdown(f"**{e}**" if e else "*(not run at this scale)*")}
    for prot in PROTOCOLS:
        avg = res.averages.get(e, {}).get(prot, {}) if e else {}
        out.update({f"{tag}-avg-{_PROT[prot]}-{_KEYS[k]}": avg.get(k, nan) for k in METHODS})
    ci = run.get("avg_ci", {}).get("subset-mean", {})
    for k in METHODS[1:]:
        d, lo, hi = ci.get(k, (nan, nan, nan))
        out.update({f"{tag}-d-{_KEYS[k]}": d, f"{tag}-lo-{_KEYS[k]}": lo, f"{tag}-hi-{_KEYS[k]}": hi})
    t4 = run.get("table4", {})
    out[f"{tag}-ev1"] = float(np.mean([t["vanilla"]["EV1"] for t in t4.values()])) if t4 else nan
    out[f"{tag}-ev1-sd"] = float(np.mean([t["SoftDecay"]["EV1"] for t in t4.values()])) if t4 else nan
    out[f"{tag}-pairs"] = int(sum(run.get("pairs", {}).values()))
    flips = (run.get("cdf") or {}).get("flips", [])
    out[f"{tag}-flips-first"] = flips[0] if flips else nan
    out[f"{tag}-flips-last"] = flips[-1] if flips else nan
    split = run.get("flips", {}).get("STS-B")
    out[f"{tag}-flips-stsb"] = split["raw"] if split else nan
    out[f"{tag}-flips-stsb-text"] = Markdown(common.plural(split["raw"], "flipped direction") if split else "–")
    out[f"{tag}-rank-stsb"] = split["rank"] if split else nan
    out[f"{tag}-sentences-stsb"] = 2 * run.get("pairs", {}).get("STS-B", 0)
    return out


def publish(res: Result) -> None:
    """Glue the figures and every number the prose quotes (`sts-*`)."""
    common.set_theme()
    m = res.models[0]
    run = _first(res)
    values: dict[str, object] = {
        "model": Markdown(f"**{m}**"),
        "pairs": int(sum(run["pairs"].values())),
        "cache": Markdown("read from the committed results" if res.from_cache[m] else "computed now"),
        "lsds-wins": res.lsds_wins[m], "lsds-sets": len(run["lsds"]),
    }
    for prot in PROTOCOLS:
        tag = _PROT[prot]
        avg = res.averages[m][prot]
        values.update({f"avg-{tag}-{_KEYS[k]}": v for k, v in avg.items()})
        for k, (d, lo, hi) in run["avg_ci"][prot].items():
            values.update({f"d-{tag}-{_KEYS[k]}": d, f"lo-{tag}-{_KEYS[k]}": lo, f"hi-{tag}-{_KEYS[k]}": hi})
        sig = significant(res, prot)
        for k, c in sig.items():
            values.update({f"up-{tag}-{_KEYS[k]}": c["up"], f"down-{tag}-{_KEYS[k]}": c["down"],
                           f"sets-up-{tag}-{_KEYS[k]}": Markdown(common.plural(c["up"], "set")),
                           f"sets-down-{tag}-{_KEYS[k]}": Markdown(common.plural(c["down"], "set"))})
    flips = layer_flips(res)
    values["layer-flips"] = Markdown(", ".join(str(f) for f in flips) or "—")
    fl = run["flips"]
    values.update({"flips-raw-max": max(f["raw"] for f in fl.values()),
                   "flips-sqrtn-min": min(f["sqrt_n"] for f in fl.values()),
                   "flips-max-min": min(f["max"] for f in fl.values()),
                   "rank-min": min(f["rank"] for f in fl.values()),
                   "sigma-min": min(f["sigma_min"] for f in fl.values()),
                   "sigma-max": max(f["sigma_max"] for f in fl.values())})
    if run["planted"]:
        for kind in ("mean", "spike"):
            df = planted_frame(res, kind)
            top = df.index[-1]
            values[f"plant-{kind}-top"] = float(top)
            values.update({f"plant-{kind}-{_KEYS[k]}-0": float(df[k].iloc[0]) for k in df.columns})
            values.update({f"plant-{kind}-{_KEYS[k]}-top": float(df[k].iloc[-1]) for k in df.columns})
            lost = float(df["vanilla"].iloc[0] - df["vanilla"].iloc[-1])
            values.update({f"plant-{kind}-{_KEYS[k]}-recovered": float(df[k].iloc[-1] - df["vanilla"].iloc[-1]) / lost
                           if lost > 0 else float("nan") for k in df.columns})
    values.update(_extra_values(res))
    values.update({k: Markdown(v) for k, v in whitening_vs_softdecay(res).items()})
    values.update({"paper-sts14-ev1-bert-sd": paper_table4_value(res, "STS14", "EV1", "BERT+SoftDecay"),
                   "paper-sts14-ev1-albert": paper_table4_value(res, "STS14", "EV1", "ALBERT")})
    values["minilm-ev1"] = float(np.mean([t["vanilla"]["EV1"] for t in run["table4"].values()]))
    for t, v in glue_cdf_medians(res).items():
        values[f"glue-median-{t}"] = v
    common.publish(CHAPTER, values)
    common.figure("sts-alpha-sweep", alpha_sweep_figure(res))
    common.figure("sts-fig6", lsds_figure(res))
    common.figure("sts-fig3", cdf_figure(res))
    common.figure("sts-fig4", tsne_figure(res))
    common.figure("sts-fig7", tsne_grid(res))
    common.figure("sts-fig8", glue_cdf_figure(res))
    common.figure("sts-planted", planted_figure(res))
