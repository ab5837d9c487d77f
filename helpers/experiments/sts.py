"""The STS chapter (Yan et al. §5.1, App. B-C): SoftDecay and its baselines on unsupervised STS, per
model through the results cache — Table 1 scores under the paper's protocol (per subset, mean over
subsets) and pooled, with paired bootstrap intervals against the raw model, the α sweep, Table 4's
uniformity metrics and a control, LSDS (Fig. 6), per-layer singular values and SoftDecay's sign
flips (Fig. 3), t-SNE maps (Figs. 4, 7), and the planted-anisotropy experiment. The mathematics is
`helpers.core.sts`; the encoder pass `helpers.hf.sts`."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, ClassVar, Literal

import numpy as np
import pandas as pd
import torch
from torch import Tensor

from ..book import results
from ..book.params import ChapterParams, nonneg, positive, rules
from ..book.runtime import REPO_ROOT, choose_device, seed_everything
from ..core import sts as C
from ..core.softdecay import softdecay_transform
from ..core.sts import METHODS, PROTOCOLS, apply_method, lsds_score, pool, uniformity_metrics
from ..data import load_glue, load_sts
from ..hf import models as hm
from ..hf.models import quiet_loading
from ..hf.sts import SoftDecayEncoder, encode

STS_DATASETS = ("STS-B", "STS12", "STS13", "STS14", "STS15", "STS16", "SICK-R")
DEMO_SENTENCES = {"guitar": "A man is playing a guitar.", "instrument": "Someone plays an instrument.",
                  "stocks": "The stock market fell."}


@dataclass(frozen=True)
class Params(ChapterParams):
    """Yan et al. §5.1, App. B-C: SoftDecay on unsupervised STS (Table 1, Table 4, Figures 3, 4, 6-8).

    `extra_models` are run on `extra_max_pairs` pairs per set with `extra_pooling`: the anisotropic
    encoders of the mechanism test (SmolLM2-135M-Instruct; the `book` preset adds `book-mlm-bert`, the
    book's own MLM BERT, which loads once `scripts/export_book_model.py` has exported it)."""

    models: tuple[str, ...] = ("all-MiniLM-L6-v2",)
    datasets: tuple[Literal["STS-B", "STS12", "STS13", "STS14", "STS15", "STS16", "SICK-R"], ...] = STS_DATASETS
    source: Literal["whiteningbert", "official", "hub", "auto"] = "whiteningbert"
    pooling: Literal["first_last", "first_last_l1", "last", "cls"] = "first_last"
    alpha: float = -0.6
    alphas: tuple[float, ...] = (-0.2, -0.4, -0.6, -0.8, -1.0)
    tau: float = 1.0
    max_pairs: int = 0               # 0 = every pair of every set
    max_length: int = 128
    batch_size: int = 64
    lsds_points: int = 2000
    tsne_pairs: int = 300
    bootstrap: int = 1000            # paired bootstrap draws per set
    plant_sizes: tuple[float, ...] = (0.0, 0.5, 1.0, 2.0, 4.0)
    extra_models: tuple[str, ...] = ("SmolLM2-135M-Instruct",)
    extra_max_pairs: int = 400
    extra_pooling: Literal["first_last", "first_last_l1", "last", "cls"] = "last"
    cdf_pairs: int = 500             # GLUE dev pairs per task for Fig. 8 (QNLI vs RTE)

    CHAPTER: ClassVar[str] = "sts"
    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {
        "ci": dict(max_pairs=150, lsds_points=300, tsne_pairs=40, alphas=(-0.2, -0.6, -1.0), bootstrap=200,
                   extra_models=(), plant_sizes=(0.0, 1.0, 4.0), cdf_pairs=100, source="auto"),
        # the book's own MLM BERT (the queries-and-keys chapter's pretraining, scripts/export_book_model.py)
        "book": dict(extra_models=("SmolLM2-135M-Instruct", "book-mlm-bert")),
        "paper": dict(models=("bert-base-cased", "distilbert-base-uncased", "albert-base-v2", "roberta-base"),
                      extra_models=(), source="hub"),
    }
    RULES: ClassVar = rules(
        models=(lambda v: len(v) > 0, "needs at least one model"),
        datasets=(lambda v: len(v) > 0, "needs at least one dataset"),
        alpha=(lambda v: -1.0 <= v < 0, "must lie in [-1, 0) (the paper's range; eq. 2 is undefined at 0)"),
        alphas=(lambda v: len(v) > 0 and all(-1.0 <= a < 0 for a in v), "every alpha must lie in [-1, 0)"),
        tau=(lambda v: 0 < v <= 1, "must lie in (0, 1] (eq. 21)"),
        max_pairs=nonneg, max_length=(lambda v: 8 <= v <= 512, "must lie in [8, 512]"), batch_size=positive,
        lsds_points=(lambda v: v >= 20, "needs >= 20 points"), tsne_pairs=(lambda v: v >= 10, "needs >= 10 pairs"),
        bootstrap=(lambda v: v >= 20, "needs >= 20 draws"),
        plant_sizes=(lambda v: len(v) > 0 and all(x >= 0 for x in v), "sizes must be >= 0"),
        extra_max_pairs=positive, cdf_pairs=(lambda v: v >= 10, "needs >= 10 pairs"),
    )


PLANT_METHODS = ("vanilla", "whitening", "de-escalation", "SoftDecay (sentence)", "SoftDecay (σ/√N)")


@dataclass
class Result(results.Result):
    """Everything the chapter shows. `runs[model]` holds, per dataset: `scores[protocol]` (Spearman
    ×100 per method under `subset-mean`, the paper's protocol, and `pooled`), `ci[protocol]`
    ([difference, low, high] of each method against vanilla, paired bootstrap, 95 %), `avg_ci`
    (the same for the mean over the sets), `alpha_sweep`, `table4` (EV1, RBF_dis, TokenUni of vanilla
    / whitening / SoftDecay), `control` (the same metrics of shuffled and Gaussian sets before and
    after SoftDecay), `lsds` (normalised and eq.-6 weights, identity beside), `flips` (sign-flipped
    directions), `planted` (scores under planted anisotropy), `pairs`, `subsets`; `cdf` (per-layer
    singular values, STS-B), `tsne` (per set). `extras` holds the anisotropic encoders' runs (same
    layout, fewer pairs), `glue_cdf` Fig. 8's spectra. `averages[model][protocol][method]` is the
    Table 1 mean over the sets."""

    models: list[str]
    datasets: list[str]
    pooling: str
    alpha: float
    scale: str
    runs: dict[str, dict]
    from_cache: dict[str, bool]
    averages: dict[str, dict[str, dict[str, float]]]
    lsds_wins: dict[str, int]
    plant_sizes: list[float] = field(default_factory=list)
    extras: dict[str, dict] = field(default_factory=dict)
    extra_pooling: str = "last"
    glue_cdf: dict = field(default_factory=dict)
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
    """t-SNE maps (Figs. 4, 7) of paired embeddings for vanilla, whitening and SoftDecay, with the
    four metrics of each transformed set."""
    from sklearn.manifold import TSNE

    k = p1.shape[0]
    panels = {}
    base = torch.cat([p1, p2])
    for method in ("vanilla", "whitening", "SoftDecay (sentence)"):
        a, b = apply_method(method, p1, p2, alpha)
        E = torch.cat([a, b])
        xy = TSNE(n_components=2, perplexity=min(30, max(5, k // 4)), init="pca", random_state=seed).fit_transform(
            E.double().numpy())
        panels[method] = {"xy": np.round(xy, 2).tolist(), "n": k, **uniformity_metrics(E),
                          "LSDS": lsds_score(base, E, min(12, 2 * k - 1), 10 ** 9, seed)}
    return panels


def _control(both: Tensor, alpha: float, seed: int) -> dict:
    """Table 4's control: the uniformity metrics of sets with no sentence structure — each column of
    the embeddings permuted on its own (`shuffled`), and Gaussian rows with the same mean and column
    spread (`gaussian`) — before and after SoftDecay (each half transformed on its own, as the STS
    rows are). What SoftDecay does to these it imposes by itself."""
    g = torch.Generator().manual_seed(seed)
    n = both.shape[0]
    shuffled = torch.stack([both[torch.randperm(n, generator=g), j] for j in range(both.shape[1])], 1)
    gauss = both.mean(0) + torch.randn(both.shape, generator=g, dtype=both.dtype) * both.std(0)
    out = {}
    for name, X in (("shuffled", shuffled), ("gaussian", gauss)):
        h = n // 2
        after = torch.cat([softdecay_transform(X[:h], alpha), softdecay_transform(X[h:], alpha)])
        out[name] = {"before": uniformity_metrics(X), "after": uniformity_metrics(after)}
    return out


def _scores_and_intervals(cos: dict[str, np.ndarray], ds, draws: int, seed: int) -> tuple[dict, dict, dict]:
    """Both protocols' scores per method, the paired bootstrap draws of each method minus vanilla, and
    their 95 % intervals."""
    idx = C.bootstrap_indices(ds.subsets, draws, seed)
    gold = np.asarray(ds.scores, float)
    scores, diffs, ci = {}, {}, {}
    for prot in PROTOCOLS:
        scores[prot] = {m: C.score(c, gold, ds.subsets, prot) for m, c in cos.items()}
        g, sub = gold[idx], np.asarray(ds.subsets)[idx[0]]
        base = C.score_draws(cos["vanilla"][idx], g, sub, prot)
        diffs[prot], ci[prot] = {}, {}
        for m, c in cos.items():
            if m == "vanilla":
                continue
            d = C.score_draws(c[idx], g, sub, prot) - base
            diffs[prot][m] = d
            ci[prot][m] = [scores[prot][m] - scores[prot]["vanilla"], *C.interval(d)]
    return scores, diffs, ci


def _planted(p1: Tensor, p2: Tensor, ds, p: Params) -> dict:
    """Scores (paper protocol) of each method on embeddings with planted anisotropy of each size: a
    common mean (`mean`) or a dominant direction (`spike`) added to both sentence sets together."""
    n = p1.shape[0]
    both = torch.cat([p1, p2])
    out: dict = {}
    for kind in ("mean", "spike"):
        out[kind] = {m: [] for m in PLANT_METHODS}
        for size in p.plant_sizes:
            X = C.plant(both, kind, size, p.seed)
            for m in PLANT_METHODS:
                a, b = apply_method(m, X[:n], X[n:], p.alpha, p.tau)
                out[kind][m].append(C.score(C.cosines(a, b), ds.scores, ds.subsets, "subset-mean"))
    return out


def run_model(loaded, p: Params, cdf_dataset: str = "STS-B", light: bool = False) -> dict:
    """Everything the chapter shows for one model, as plain numbers (cached and committed at `book`
    scale). `light` (the anisotropic encoders) skips LSDS, the control, t-SNE and the planted runs."""
    out: dict = {k: {} for k in ("scores", "ci", "alpha_sweep", "table4", "lsds", "control", "flips", "planted",
                                 "pairs", "subsets", "tsne")}
    out["scores"] = {prot: {} for prot in PROTOCOLS}
    out["ci"] = {prot: {} for prot in PROTOCOLS}
    alpha, seed = p.alpha, p.seed
    all_diffs: dict = {prot: {} for prot in PROTOCOLS}
    for name in p.datasets:
        ds = _subsample(load_sts(name, p.source), p.max_pairs, seed)
        e1 = encode(loaded, ds.sentence1, p.max_length, p.batch_size, alpha, desc=f"{name} s1")
        e2 = encode(loaded, ds.sentence2, p.max_length, p.batch_size, alpha, desc=f"{name} s2")
        out["pairs"][name], out["subsets"][name] = len(ds), len(set(ds.subsets))
        p1, p2 = pool(e1, p.pooling), pool(e2, p.pooling)
        cos = {}
        for method in METHODS:
            if method == "SoftDecay (token)":
                if p.pooling == "cls":
                    continue
                a, b = pool(e1, p.pooling, True), pool(e2, p.pooling, True)
            else:
                a, b = apply_method(method, p1, p2, alpha, p.tau)
            cos[method] = C.cosines(a, b)
        scores, diffs, ci = _scores_and_intervals(cos, ds, p.bootstrap, seed)
        for prot in PROTOCOLS:
            out["scores"][prot][name], out["ci"][prot][name] = scores[prot], ci[prot]
            for m, d in diffs[prot].items():
                all_diffs[prot].setdefault(m, []).append(d)
        out["alpha_sweep"][name] = {
            str(a): C.score(C.cosines(*apply_method("SoftDecay (sentence)", p1, p2, a)), ds.scores, ds.subsets)
            for a in p.alphas}
        sv = {k: torch.linalg.svdvals(X.double()).numpy() for k, X in (("s1", p1), ("s2", p2))}
        out["flips"][name] = {
            "raw": sum(C.sign_flips(v, alpha) for v in sv.values()),
            "sqrt_n": sum(C.sign_flips(v, alpha, len(ds) ** 0.5) for v in sv.values()),
            "max": sum(C.sign_flips(v, alpha, v.max()) for v in sv.values()),
            "rank": int(sum((v > 1e-10 * v.max()).sum() for v in sv.values())),
            "sigma_min": float(min(v[v > 1e-10 * v.max()].min() for v in sv.values())),
            "sigma_max": float(max(v.max() for v in sv.values()))}
        both = torch.cat([p1, p2])
        w1, w2 = apply_method("whitening", p1, p2)
        s1, s2 = apply_method("SoftDecay (sentence)", p1, p2, alpha)
        white, soft = torch.cat([w1, w2]), torch.cat([s1, s2])
        out["table4"][name] = {"vanilla": uniformity_metrics(both), "whitening": uniformity_metrics(white),
                               "SoftDecay": uniformity_metrics(soft)}
        if name == cdf_dataset:
            per_layer = torch.cat([e1.layer_means, e2.layer_means]).double()         # (2N, layers, d)
            before = [torch.linalg.svdvals(per_layer[:, i]).numpy() for i in range(per_layer.shape[1])]
            out["cdf"] = {"before": [v.tolist() for v in before],
                          "after": [torch.linalg.svdvals(softdecay_transform(per_layer[:, i], alpha)).tolist()
                                    for i in range(per_layer.shape[1])],
                          "flips": [C.sign_flips(v, alpha) for v in before]}
        if light:
            continue
        out["lsds"][name] = {f"{m} ({w})": lsds_score(both, F, 12, p.lsds_points, seed, normalise=w == "normalised")
                             for w in ("normalised", "eq. 6") for m, F in
                             (("identity", both), ("whitening", white), ("SoftDecay", soft))}
        out["control"][name] = _control(both, alpha, seed)
        out["planted"][name] = _planted(p1, p2, ds, p)
        k = min(p.tsne_pairs, len(ds))
        out["tsne"][name] = _tsne_panels(p1[:k], p2[:k], alpha, seed)
    out["avg_ci"] = {prot: {m: [float(np.mean(
        [out["scores"][prot][d][m] - out["scores"][prot][d]["vanilla"] for d in p.datasets])),
        *C.interval(np.mean(ds_draws, 0))] for m, ds_draws in all_diffs[prot].items()} for prot in PROTOCOLS}
    return out


def averages(run: dict, datasets: list[str], protocol: str = "subset-mean") -> dict[str, float]:
    """Table 1's `Avg` column: the mean over the sets of each method's score (methods not run: NaN)."""
    out = {}
    for method in METHODS:
        got = [run["scores"][protocol][d].get(method) for d in datasets]     # None: not run, or undefined
        vals = np.array([np.nan if v is None else v for v in got], dtype=float)
        out[method] = float(np.nanmean(vals)) if np.isfinite(vals).any() else float("nan")
    return out


def glue_cdf(loaded, p: Params) -> dict:
    """Fig. 8 without training: the singular values of each layer's sentence-embedding matrix of the
    vanilla model on QNLI and RTE dev (first `cdf_pairs` pairs, both sentences mean-pooled)."""
    out = {}
    for task in ("QNLI", "RTE"):
        try:
            ds = load_glue(task, "validation")
        except Exception as err:  # noqa: BLE001 — a missing task is shown, not fatal
            out[task] = {"error": f"{type(err).__name__}: {err}"}
            continue
        n = min(p.cdf_pairs, len(ds.labels))
        texts = list(ds.sentence1[:n]) + list(ds.sentence2[:n])
        e = encode(loaded, texts, p.max_length, p.batch_size, None, desc=task)
        out[task] = {"n": len(texts), "layers": [torch.linalg.svdvals(e.layer_means[:, i].double()).tolist()
                                                 for i in range(e.layer_means.shape[1])]}
    return out


def encoder_demo(loaded, alpha: float) -> dict:
    """Cosine similarities of three sentences under `SoftDecayEncoder(mode="token")`."""
    emb = SoftDecayEncoder(loaded, alpha=alpha, mode="token").encode(list(DEMO_SENTENCES.values()))
    norms = np.linalg.norm(emb, axis=1)
    return {"labels": list(DEMO_SENTENCES), "cosine": (emb @ emb.T / np.outer(norms, norms)).tolist()}


_EXTRA_FIELDS = ("extra_models", "extra_max_pairs", "extra_pooling")


def run(p: Params) -> Result:
    """Every model of `p`, each through the committed-results cache (key: the Params with `models`
    replaced by the run's `model`), the anisotropic `extra_models` (fewer pairs, `extra_pooling`),
    then the paper's tables, Fig. 8's spectra and the encoder demo."""
    seed_everything(p.seed)
    device = choose_device(p.device)
    runs, from_cache, loaded, extras = {}, {}, {}, {}

    def compute(name: str, q: Params, light: bool):
        loaded[name] = hm.load(name, device=device)
        return run_model(loaded[name], q, light=light)

    with quiet_loading():
        for name in p.models:
            runs[name], from_cache[name] = results.cached(
                p, f"sts-{name.replace('/', '_')}", lambda n=name: compute(n, p, False),
                drop=("models", *_EXTRA_FIELDS, "cdf_pairs"), model=name)
        q = replace(p, max_pairs=p.extra_max_pairs, pooling=p.extra_pooling)
        for name in p.extra_models:
            extras[name], from_cache[name] = results.cached(
                q, f"sts-extra-{name.replace('/', '_')}", lambda n=name: compute(n, q, True),
                drop=("models", "extra_models", "cdf_pairs", "lsds_points", "tsne_pairs", "plant_sizes"), model=name)
        first = p.models[0]
        model = loaded.get(first) or hm.load(first, device=device)
        glue, _ = results.cached(p, "sts-glue-cdf", lambda: glue_cdf(model, p),
                                 drop=tuple(f for f in p.cache_key() if f not in ("seed", "cdf_pairs", "max_length")),
                                 model=first)
        demo = encoder_demo(model, p.alpha)
    avgs = {m: {prot: averages(r, list(p.datasets), prot) for prot in PROTOCOLS} for m, r in {**runs, **extras}.items()}
    wins = {m: int(sum(v["SoftDecay (normalised)"] < v["whitening (normalised)"] for v in runs[m]["lsds"].values()))
            for m in p.models}
    paper1 = pd.read_csv(REPO_ROOT / "data" / "yan_2022_table1.csv").to_dict("records")
    paper4 = pd.read_csv(REPO_ROOT / "data" / "yan_2022_table4.csv").to_dict("records")
    return Result(models=list(p.models), datasets=list(p.datasets), pooling=p.pooling, alpha=p.alpha, scale=p.scale,
                  runs=runs, from_cache=from_cache, averages=avgs, lsds_wins=wins, plant_sizes=list(p.plant_sizes),
                  extras=extras, extra_pooling=p.extra_pooling, glue_cdf=glue, paper_table1=paper1,
                  paper_table4=paper4, encoder_demo=demo)
