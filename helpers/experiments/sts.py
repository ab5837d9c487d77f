"""The STS chapter (Yan et al. §5.1, App. B-C): SoftDecay and its baselines on unsupervised STS, per
model through the results cache — Table 1 scores, the α sweep, Table 4's uniformity metrics, LSDS
(Fig. 6), per-layer singular values (Fig. 3) and t-SNE maps (Fig. 4). The mathematics is
`helpers.core.sts`; the encoder pass `helpers.hf.sts`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

import numpy as np
import pandas as pd
import torch
from torch import Tensor

from ..book import results
from ..book.params import ChapterParams, nonneg, positive, rules
from ..book.runtime import REPO_ROOT, seed_everything
from ..core.softdecay import softdecay_transform
from ..core.sts import METHODS, apply_method, lsds_score, pool, spearman100, uniformity_metrics
from ..data import load_sts
from ..hf import models as hm
from ..hf.models import quiet_loading
from ..hf.sts import SoftDecayEncoder, encode

STS_DATASETS = ("STS-B", "STS12", "STS13", "STS14", "STS15", "STS16", "SICK-R")
DEMO_SENTENCES = {"guitar": "A man is playing a guitar.", "instrument": "Someone plays an instrument.",
                  "stocks": "The stock market fell."}


@dataclass(frozen=True)
class Params(ChapterParams):
    """Yan et al. §5.1, App. B-C: SoftDecay on unsupervised STS (Table 1, Table 4, Figures 3, 4, 6)."""

    models: tuple[str, ...] = ("all-MiniLM-L6-v2",)
    datasets: tuple[Literal["STS-B", "STS12", "STS13", "STS14", "STS15", "STS16", "SICK-R"], ...] = STS_DATASETS
    source: Literal["whiteningbert", "official", "hub"] = "whiteningbert"
    pooling: Literal["first_last", "first_last_l1", "last", "cls"] = "first_last"
    alpha: float = -0.6
    alphas: tuple[float, ...] = (-0.2, -0.4, -0.6, -0.8, -1.0)
    tau: float = 1.0
    max_pairs: int = 0               # 0 = every pair of every set
    max_length: int = 128
    batch_size: int = 64
    lsds_points: int = 2000
    tsne_pairs: int = 400

    CHAPTER: ClassVar[str] = "sts"
    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {
        "ci": dict(max_pairs=150, lsds_points=300, tsne_pairs=60, alphas=(-0.2, -0.6, -1.0)),
        "book": dict(),
        "paper": dict(models=("bert-base-cased", "distilbert-base-uncased", "albert-base-v2", "roberta-base")),
    }
    RULES: ClassVar = rules(
        models=(lambda v: len(v) > 0, "needs at least one model"),
        datasets=(lambda v: len(v) > 0, "needs at least one dataset"),
        alpha=(lambda v: -1.0 <= v < 0, "must lie in [-1, 0) (the paper's range; eq. 2 is undefined at 0)"),
        alphas=(lambda v: len(v) > 0 and all(-1.0 <= a < 0 for a in v), "every alpha must lie in [-1, 0)"),
        tau=(lambda v: 0 < v <= 1, "must lie in (0, 1] (eq. 21)"),
        max_pairs=nonneg, max_length=(lambda v: 8 <= v <= 512, "must lie in [8, 512]"), batch_size=positive,
        lsds_points=(lambda v: v >= 20, "needs >= 20 points"), tsne_pairs=(lambda v: v >= 10, "needs >= 10 pairs"),
    )


@dataclass
class Result(results.Result):
    """Everything the chapter shows. `runs[model]` holds, per dataset: `table1` (Spearman ×100 per
    method), `alpha_sweep` (per α of sentence-level SoftDecay), `table4` (EV1, RBF_dis, TokenUni of
    vanilla / whitening / SoftDecay), `lsds` (whitening / SoftDecay), `pairs`; and `cdf` (per-layer
    singular values before/after SoftDecay, STS-B) and `tsne` (Fig. 4 panels, STS15) when those sets
    were run. `averages[model][method]` is the Table 1 mean over the sets (NaN rows excluded)."""

    models: list[str]
    datasets: list[str]
    pooling: str
    alpha: float
    scale: str
    runs: dict[str, dict]
    from_cache: dict[str, bool]
    averages: dict[str, dict[str, float]]
    lsds_wins: dict[str, int]
    paper_table1: list[dict] = field(default_factory=list)
    paper_table4: list[dict] = field(default_factory=list)
    encoder_demo: dict = field(default_factory=dict)


def _subsample(ds, max_pairs: int, seed: int):
    if not max_pairs or len(ds) <= max_pairs:
        return ds
    idx = sorted(np.random.default_rng(seed).choice(len(ds), max_pairs, replace=False).tolist())

    def pick(xs):
        return [xs[i] for i in idx]

    return type(ds)(ds.name, pick(ds.sentence1), pick(ds.sentence2), pick(ds.scores), pick(ds.subsets))


def _tsne_panels(p1: Tensor, p2: Tensor, alpha: float, seed: int) -> dict:
    """t-SNE maps (Fig. 4) of paired embeddings for vanilla, whitening and SoftDecay, with the four
    metrics of each transformed set."""
    from sklearn.manifold import TSNE

    k = p1.shape[0]
    panels = {}
    base = torch.cat([p1, p2])
    for method in ("vanilla", "whitening", "SoftDecay (sentence)"):
        a, b = apply_method(method, p1, p2, alpha)
        E = torch.cat([a, b])
        xy = TSNE(n_components=2, perplexity=min(30, max(5, k // 4)), init="pca", random_state=seed).fit_transform(
            E.double().numpy())
        panels[method] = {"xy": xy.tolist(), "n": k, **uniformity_metrics(E),
                          "LSDS": lsds_score(base, E, min(12, 2 * k - 1), 10 ** 9, seed)}
    return panels


def run_model(loaded, p: Params, cdf_dataset: str = "STS-B", tsne_dataset: str = "STS15") -> dict:
    """Everything the chapter shows for one model, as plain numbers (cached and committed at `book`
    scale): Table 1 scores per method and dataset, the α sweep, Table 4 metrics, LSDS (Fig. 6),
    per-layer singular values before/after SoftDecay (Fig. 3) and t-SNE inputs (Fig. 4)."""
    out: dict = {"table1": {}, "alpha_sweep": {}, "table4": {}, "lsds": {}, "pairs": {}}
    alpha, seed = p.alpha, p.seed
    for name in p.datasets:
        ds = _subsample(load_sts(name, p.source), p.max_pairs, seed)
        e1 = encode(loaded, ds.sentence1, p.max_length, p.batch_size, alpha, desc=f"{name} s1")
        e2 = encode(loaded, ds.sentence2, p.max_length, p.batch_size, alpha, desc=f"{name} s2")
        out["pairs"][name] = len(ds)
        p1, p2 = pool(e1, p.pooling), pool(e2, p.pooling)
        row = {}
        for method in METHODS:
            if method == "SoftDecay (token)":
                if p.pooling == "cls":
                    continue
                a, b = pool(e1, p.pooling, True), pool(e2, p.pooling, True)
            else:
                a, b = apply_method(method, p1, p2, alpha, p.tau)
            row[method] = spearman100(a, b, ds.scores)
        out["table1"][name] = row
        out["alpha_sweep"][name] = {str(a): spearman100(*apply_method("SoftDecay (sentence)", p1, p2, a), ds.scores)
                                    for a in p.alphas}
        both = torch.cat([p1, p2])
        w1, w2 = apply_method("whitening", p1, p2)
        s1, s2 = apply_method("SoftDecay (sentence)", p1, p2, alpha)
        white, soft = torch.cat([w1, w2]), torch.cat([s1, s2])
        out["table4"][name] = {"vanilla": uniformity_metrics(both), "whitening": uniformity_metrics(white),
                               "SoftDecay": uniformity_metrics(soft)}
        out["lsds"][name] = {"whitening": lsds_score(both, white, 12, p.lsds_points, seed),
                             "SoftDecay": lsds_score(both, soft, 12, p.lsds_points, seed)}
        if name == cdf_dataset:
            per_layer = torch.cat([e1.layer_means, e2.layer_means])            # (2N, layers, d)
            out["cdf"] = {"before": [torch.linalg.svdvals(per_layer[:, i].double()).tolist()
                                     for i in range(per_layer.shape[1])],
                          "after": [torch.linalg.svdvals(softdecay_transform(per_layer[:, i].double(), alpha)).tolist()
                                    for i in range(per_layer.shape[1])]}
        if name == tsne_dataset:
            k = min(p.tsne_pairs, len(ds))
            out["tsne"] = _tsne_panels(p1[:k], p2[:k], alpha, seed)
    return out


def averages(run: dict, datasets: list[str]) -> dict[str, float]:
    """Table 1's `Avg` column: the mean over the sets of each method's score (methods not run: NaN)."""
    out = {}
    for method in METHODS:
        vals = [run["table1"][d].get(method, np.nan) for d in datasets]
        out[method] = float(np.nanmean(vals)) if np.isfinite(vals).any() else float("nan")
    return out


def encoder_demo(loaded, alpha: float) -> dict:
    """Cosine similarities of three sentences under `SoftDecayEncoder(mode="token")`."""
    emb = SoftDecayEncoder(loaded, alpha=alpha, mode="token").encode(list(DEMO_SENTENCES.values()))
    norms = np.linalg.norm(emb, axis=1)
    return {"labels": list(DEMO_SENTENCES), "cosine": (emb @ emb.T / np.outer(norms, norms)).tolist()}


def run(p: Params) -> Result:
    """Every model of `p`, each through the committed-results cache (key: the Params with `models`
    replaced by the run's `model`), then the paper's tables and the encoder demo."""
    seed_everything(p.seed)
    runs, from_cache, loaded = {}, {}, {}

    def compute(name: str) -> dict:
        loaded[name] = hm.load(name)
        return run_model(loaded[name], p)

    with quiet_loading():
        for name in p.models:
            runs[name], from_cache[name] = results.cached(p, f"sts-{name.replace('/', '_')}",
                                                          lambda n=name: compute(n), drop=("models",), model=name)
        first = p.models[0]
        demo = encoder_demo(loaded.get(first) or hm.load(first), p.alpha)
    avgs = {m: averages(runs[m], list(p.datasets)) for m in p.models}
    wins = {m: int(sum(v["SoftDecay"] < v["whitening"] for v in runs[m]["lsds"].values())) for m in p.models}
    paper1 = pd.read_csv(REPO_ROOT / "data" / "yan_2022_table1.csv").to_dict("records")
    paper4 = pd.read_csv(REPO_ROOT / "data" / "yan_2022_table4.csv").to_dict("records")
    return Result(models=list(p.models), datasets=list(p.datasets), pooling=p.pooling, alpha=p.alpha, scale=p.scale,
                  runs=runs, from_cache=from_cache, averages=avgs, lsds_wins=wins, paper_table1=paper1,
                  paper_table4=paper4, encoder_demo=demo)
