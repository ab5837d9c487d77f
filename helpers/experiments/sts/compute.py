"""The STS chapter's computations: per encoder the main run (`run_model`: Table 1 under both protocols with
paired bootstrap intervals, the α sweep, Table 4 and its control, LSDS, sign flips, planted anisotropy), the
readings under each pooling (`readings`), the same-fit procedures of whitening − SoftDecay (`samefit`), the
t-SNE maps (`maps`), and `run`, which takes each through the results cache and hands them to `Result`. The
mathematics is `helpers.core.sts`; the encoder pass `helpers.hf.sts`."""

from __future__ import annotations

import json
import time
from dataclasses import replace

import numpy as np
import pandas as pd
import torch
from torch import Tensor

from ...core import sts as C
from ...core.softdecay import softdecay_transform
from ...core.sts import (
    FLIP_FREE,
    METHODS,
    PROTOCOLS,
    apply_method,
    apply_methods,
    lsds_score,
    pool,
    uniformity_metrics,
)
from ...data import load_sts
from ...hf import models as hm
from ...hf.models import ModelUnavailable, quiet_loading
from ...hf.sts import SoftDecayEncoder, encode, kept_encodings
from ...machinery import results
from ...machinery.runtime import REPO_ROOT, choose_device, seed_everything
from .params import (
    BOOK_BERT,
    COMMANDS,
    DEMO_SENTENCES,
    EXTRA_FIELDS,
    MAP_FIELDS,
    MAP_METHODS,
    NOT_READINGS,
    PLANT_METHODS,
    READING_FIELDS,
    READING_METHODS,
    REFIT_METHODS,
    Params,
    reading_bootstrap,
    refit_draws,
)
from .result import Result


def subsample_idx(n: int, max_pairs: int, seed: int) -> list[int]:
    """The pairs a run of `max_pairs` (0: all) scores out of `n`: a sorted draw without replacement."""
    if not max_pairs or n <= max_pairs:
        return list(range(n))
    return sorted(np.random.default_rng(seed).choice(n, max_pairs, replace=False).tolist())


def take(ds, idx: list[int]):
    def pick(xs):
        return [xs[i] for i in idx]

    return type(ds)(ds.name, pick(ds.sentence1), pick(ds.sentence2), pick(ds.scores), pick(ds.subsets))


def subsample_pairs(ds, max_pairs: int, seed: int):
    if not max_pairs or len(ds) <= max_pairs:
        return ds
    return take(ds, subsample_idx(len(ds), max_pairs, seed))


def _rows(e, rows: Tensor):
    return C.TokenStates(e.layer_means[rows], e.cls_last[rows],
                         None if e.token_sd_last is None else e.token_sd_last[rows])


def _reading_cosines(f1, f2, pooling: str, p: Params) -> tuple[dict, dict, Tensor, Tensor, dict]:
    """Cosines of every `READING_METHODS` row under `pooling`, the sign flips of each SoftDecay variant
    (`core.sts.count_flips`, both sentence matrices), the pooled embeddings and each method's output."""
    p1, p2 = pool(f1, pooling), pool(f2, pooling)
    cos, flips = {}, {}
    outs = apply_methods(READING_METHODS, p1, p2, p.alpha, p.tau)
    for m, (a, b) in outs.items():
        cos[m] = C.cosines(a, b)
        if m in ("SoftDecay (sentence)", *FLIP_FREE):
            flips[m] = C.count_flips(p1, a) + C.count_flips(p2, b)
    flips["directions"] = int(sum((v > 1e-10 * v.max()).sum() for v in
                                  (torch.linalg.svdvals(x.double()) for x in (p1, p2))))
    return cos, flips, p1, p2, outs


def _planted_directions(p1: Tensor, p2: Tensor, ds, p: Params) -> dict:
    """The planted experiment over `plant_directions` random directions at no plant and at the largest size:
    {kind: {method: [size][direction] score}} (paper protocol), each direction a fresh random unit vector
    (`core.sts.plant`; the main run has the curve over every size for one direction)."""
    n = p1.shape[0]
    both = torch.cat([p1, p2])
    out: dict = {}
    sizes = (0.0, max(p.plant_sizes))
    for kind in ("mean", "spike"):
        out[kind] = {m: [[None] * p.plant_directions for _ in sizes] for m in PLANT_METHODS}
        for i, size in enumerate(sizes):
            for k in range(p.plant_directions):
                X = C.plant(both, kind, size, p.seed + 7919 * k)
                for m in PLANT_METHODS:
                    a, b = apply_method(m, X[:n], X[n:], p.alpha, p.tau)
                    out[kind][m][i][k] = C.score(C.cosines(a, b), ds.scores, ds.subsets, "subset-mean")
    return out


def _lsds_readings(p1: Tensor, p2: Tensor, p: Params) -> dict:
    """LSDS of identity, whitening and SoftDecay under the three readings of eq. (6): weights normalised to
    sum to one, eq. (6)'s raw RBF weights, and the authors' code (LLE barycentre weights, self included,
    Frobenius norm; `core.sts.lsds_lle`)."""
    both = torch.cat([p1, p2])
    maps = {"identity": both, "whitening": torch.cat(apply_method("whitening", p1, p2)),
            "SoftDecay": torch.cat(apply_method("SoftDecay (sentence)", p1, p2, p.alpha))}
    out = {}
    for m, F in maps.items():
        out[f"{m} (normalised)"] = lsds_score(both, F, 12, p.lsds_points, p.seed, normalise=True)
        out[f"{m} (eq. 6)"] = lsds_score(both, F, 12, p.lsds_points, p.seed, normalise=False)
        out[f"{m} (authors)"] = C.lsds_lle(both, F, 12, p.lsds_points, p.seed)
    return out


def readings(loaded, p: Params, max_pairs: int, draws: int, planted: bool) -> dict:
    """One encoder under every pooling of `p.poolings`, from one encoding of each set (the union of the
    `draws` subsamples of `max_pairs` pairs, seeds seed, seed+1, …; every pair when `max_pairs` is 0):

    * `draws[d]`: per pooling and set, each `READING_METHODS` score (paper protocol) and the sign flips of
      SoftDecay and its flip-free variants, for draw d;
    * `intervals[pooling][method]`: method − raw, mean over the sets, paired bootstrap (transforms fitted once), draw 0;
    * `refit[paper_pooling][whitening]`: whitening − SoftDecay, mean over the sets, paired bootstrap with both
      transforms refitted on every resample (`core.sts.refit_bootstrap`), draw 0;
    * `anisotropies[pooling][set]`: EV₁ before and after whitening, EV₁ of the centred rows, the mean's share;
    * `planted`, `lsds` (first model only): `_planted_directions` and `_lsds_readings` under `paper_pooling`;
    * `cpu_s`: the process CPU seconds it took."""
    t0 = time.process_time()
    per_draw = [{"pairs": {}, "scores": {q: {} for q in p.poolings}, "flips": {q: {} for q in p.poolings}}
                for _ in range(draws)]
    diffs: dict = {q: {m: [] for m in READING_METHODS[1:]} for q in p.poolings}
    refit: dict = {q: {m: [] for m in REFIT_METHODS} for q in p.poolings}
    out: dict = {"anisotropies": {q: {} for q in p.poolings}, "planted": {}}
    plant_sets: list[dict] = []
    for name in p.datasets:
        full = load_sts(name, p.source)
        picks = [subsample_idx(len(full), max_pairs, p.seed + d) for d in range(draws)]
        union = sorted(set().union(*picks))
        where = {i: k for k, i in enumerate(union)}
        e1 = encode(loaded, [full.sentence1[i] for i in union], p.max_length, p.batch_size, None, desc=f"{name} s1")
        e2 = encode(loaded, [full.sentence2[i] for i in union], p.max_length, p.batch_size, None, desc=f"{name} s2")
        for d, idx in enumerate(picks):
            rows = torch.tensor([where[i] for i in idx])
            ds, f1, f2 = take(full, idx), _rows(e1, rows), _rows(e2, rows)
            per_draw[d]["pairs"][name] = len(idx)
            gold, sub = np.asarray(ds.scores, float), np.asarray(ds.subsets)
            for q in p.poolings:
                cos, flips, p1, p2, outs = _reading_cosines(f1, f2, q, p)
                per_draw[d]["scores"][q][name] = {m: C.score(c, gold, sub) for m, c in cos.items()}
                per_draw[d]["flips"][q][name] = flips
                if d:
                    continue
                idx_b = C.bootstrap_indices(sub, reading_bootstrap(p.bootstrap), p.seed)
                base = C.score_draws(cos["vanilla"][idx_b], gold[idx_b], sub[idx_b[0]], "subset-mean")
                for m in READING_METHODS[1:]:
                    diffs[q][m].append(C.score_draws(cos[m][idx_b], gold[idx_b], sub[idx_b[0]], "subset-mean") - base)
                if q == p.paper_pooling:
                    for m, r in C.refit_bootstrap(p1, p2, gold, sub, REFIT_METHODS, refit_draws(p.bootstrap), p.seed,
                                                  p.alpha).items():
                        refit[q][m].append(r)
                both = torch.cat([p1, p2])
                white = torch.cat(outs["whitening"]).double()
                out["anisotropies"][q][name] = {
                    "EV1": float(C.M.explained_variance(both.double(), 1)),
                    "EV1_whitened": float(C.M.explained_variance(white, 1)),
                    "EV1_centred": C.ev1_centred(both), "mean_share": C.mean_share(both)}
                if planted and q == p.paper_pooling:
                    plant_sets.append(_planted_directions(p1, p2, ds, p))
                    out.setdefault("lsds", {})[name] = _lsds_readings(p1, p2, p)
    s0 = per_draw[0]["scores"]
    out["draws"] = per_draw
    out["intervals"] = {q: {m: [float(np.mean([s0[q][d][m] - s0[q][d]["vanilla"] for d in p.datasets])),
                         *C.interval(np.mean(diffs[q][m], 0))] for m in READING_METHODS[1:]} for q in p.poolings}
    sd = "SoftDecay (sentence)"
    out["refit"] = {q: {w: [float(np.mean([s0[q][d][w] - s0[q][d][sd] for d in p.datasets])),
                            *C.interval(np.mean(refit[q][w], 0) - np.mean(refit[q][sd], 0))]
                        for w in REFIT_METHODS[:2]} for q in p.poolings if refit[q][sd]}
    if plant_sets:
        out["planted"] = {k: {m: np.mean([ps[k][m] for ps in plant_sets], 0).tolist() for m in PLANT_METHODS}
                          for k in ("mean", "spike")}
    out["cpu_s"] = time.process_time() - t0
    return out


#: the cross-fit procedure's splits (each fits on one half of the pairs and scores the other, then swaps)
CROSSFIT_SPLITS = 20


def samefit_settings(p: Params) -> dict[str, int]:
    """The same-fit procedures' sizes: half-samples (as many as the refitted bootstrap's draws), cross-fit
    splits, and bootstrap resamples of the scored pairs per split."""
    return {"halves": refit_draws(p.bootstrap), "splits": CROSSFIT_SPLITS, "split_boot": max(20, p.bootstrap // 20)}


def _pooled(loaded, name: str, ds, pooling: str, p: Params, tag: str) -> tuple[Tensor, Tensor]:
    """The two sentence matrices of `ds` under `pooling`, kept on disk under `_build/sts-embeddings/` (never
    committed: a re-reading of the same sentences by the same encoder then skips the encoder pass)."""
    import hashlib

    root = (results.cache_dir() or REPO_ROOT / "_build") / "sts-embeddings"
    h = hashlib.sha256("\x1f".join([name, tag, pooling, str(p.max_length), p.source, *ds.sentence1,
                                     *ds.sentence2]).encode()).hexdigest()[:16]
    path = root / f"{name.replace('/', '_')}-{tag}-{pooling}-{h}.pt"
    if path.is_file():
        got = torch.load(path)
        return got["p1"], got["p2"]
    model = loaded()
    e1 = encode(model, list(ds.sentence1), p.max_length, p.batch_size, None, desc=f"{tag} s1")
    e2 = encode(model, list(ds.sentence2), p.max_length, p.batch_size, None, desc=f"{tag} s2")
    p1, p2 = pool(e1, pooling), pool(e2, pooling)
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"p1": p1, "p2": p2}, path)
    return p1, p2


def samefit(loaded, name: str, p: Params, max_pairs: int) -> dict:
    """whitening − SoftDecay (Table 1's ordering) under procedures whose estimate and interval come from the same
    fits, per whitening variant, mean over the sets, under `paper_pooling` (`core.sts.halfsample_refit`,
    `core.sts.crossfit`):

    * `halfsample[w]`: [estimate, low, high] over stratified half-samples without replacement, every transform
      fitted on each half-sample's own pairs (as the paper fits it on the test set);
    * `crossfit[w]`: [estimate, low, high], every pair scored by transforms fitted on the other half;
    * `fullfit[w]`: the difference with the transforms fitted once on all pairs (the paper's estimate, shown
      beside, read by neither procedure);
    * `pairs`, `settings`, `cpu_s`. `loaded` is a function that loads the encoder (called only when an
      embedding is not on disk)."""
    t0 = time.process_time()
    st = samefit_settings(p)
    sd, whites = "SoftDecay (sentence)", REFIT_METHODS[:2]
    half: dict = {m: [] for m in REFIT_METHODS}
    cross: dict = {m: [] for m in REFIT_METHODS}
    full: dict = {m: [] for m in REFIT_METHODS}
    pairs = {}
    for dname in p.datasets:
        whole = load_sts(dname, p.source)
        ds = take(whole, subsample_idx(len(whole), max_pairs, p.seed))
        p1, p2 = _pooled(loaded, name, ds, p.paper_pooling, p, dname)
        gold, sub = np.asarray(ds.scores, float), np.asarray(ds.subsets)
        pairs[dname] = len(gold)
        for m, r in C.halfsample_refit(p1, p2, gold, sub, REFIT_METHODS, st["halves"], p.seed, p.alpha).items():
            half[m].append(r)
        for m, r in C.crossfit(p1, p2, gold, sub, REFIT_METHODS, st["splits"], st["split_boot"], p.seed,
                               p.alpha).items():
            cross[m].append(r)
        for m, ab in apply_methods(REFIT_METHODS, p1, p2, p.alpha).items():
            full[m].append(C.score(C.cosines(*ab), gold, sub))

    def iv(draws: dict, w: str, how: str) -> list[float]:
        d = np.mean(draws[w], 0) - np.mean(draws[sd], 0)
        i = C.same_fit_interval(d, method=how)
        return [i.estimate, i.low, i.high]

    return {"pairs": pairs, "settings": st, "pooling": p.paper_pooling,
            "halfsample": {w: iv(half, w, "subsample") for w in whites},
            "crossfit": {w: iv(cross, w, "cross-fit") for w in whites},
            "fullfit": {w: float(np.mean(full[w]) - np.mean(full[sd])) for w in whites},
            "cpu_s": time.process_time() - t0}


def map_panels(p1: Tensor, p2: Tensor, k: int, p: Params) -> dict:
    """The t-SNE maps (Figs. 4, 7) of one set as it is scored: whitening and SoftDecay fitted on every pair
    of the set (each sentence side on its own, as scored), then a random sample of `k` pairs mapped (t-SNE
    of the sample's rows of the transformed set). Per method: the map (`xy`, first `n` rows the first
    sentences), `n`, the set's `pairs`, and the measures of the whole transformed set — Table 4's EV₁,
    RBF_dis, TokenUni (`core.sts.uniformity_metrics`) and LSDS with normalised weights on `lsds_points`
    points — which are the numbers Table 4 and the LSDS figure give for that set."""
    from sklearn.manifold import TSNE

    n = p1.shape[0]
    idx = torch.tensor(subsample_idx(n, k, p.seed))
    m = len(idx)
    base = torch.cat([p1, p2])
    panels = {}
    for method in MAP_METHODS:
        a, b = apply_method(method, p1, p2, p.alpha, p.tau)
        E = torch.cat([a, b])
        xy = TSNE(n_components=2, perplexity=min(30, max(5, m // 4)), init="pca", random_state=p.seed).fit_transform(
            torch.cat([a[idx], b[idx]]).double().numpy())
        panels[method] = {"xy": np.round(xy, 2).tolist(), "n": m, "pairs": n, **uniformity_metrics(E),
                          "LSDS": lsds_score(base, E, 12, p.lsds_points, p.seed, normalise=True)}
    return panels


def maps(loaded, p: Params) -> dict:
    """`map_panels` of every set of `p.datasets`, each the set as `run_model` scores it (its `max_pairs`
    subsample, `p.pooling`), with `tsne_pairs` pairs mapped; `cpu_s` the process CPU seconds it took."""
    t0 = time.process_time()
    out: dict = {"sets": {}}
    for name in p.datasets:
        ds = subsample_pairs(load_sts(name, p.source), p.max_pairs, p.seed)
        e1 = encode(loaded, ds.sentence1, p.max_length, p.batch_size, None, desc=f"{name} s1")
        e2 = encode(loaded, ds.sentence2, p.max_length, p.batch_size, None, desc=f"{name} s2")
        out["sets"][name] = map_panels(pool(e1, p.pooling), pool(e2, p.pooling), p.tsne_pairs, p)
    out["cpu_s"] = time.process_time() - t0
    return out


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


def planted_scores(p1: Tensor, p2: Tensor, ds, p: Params) -> dict:
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
    scale). `light` (the anisotropic encoders) skips LSDS, the control and the planted runs; the t-SNE maps
    are `maps`, cached apart (a committed run may still hold the maps it once drew, unread)."""
    out: dict = {k: {} for k in ("spearman", "ci", "alpha_sweep", "table4", "lsds", "control", "sign_flips",
                                 "planted", "pairs", "subsets")}
    out["spearman"] = {prot: {} for prot in PROTOCOLS}
    out["ci"] = {prot: {} for prot in PROTOCOLS}
    alpha, seed = p.alpha, p.seed
    all_diffs: dict = {prot: {} for prot in PROTOCOLS}
    refit: dict[str, list] = {m: [] for m in REFIT_METHODS}
    for name in p.datasets:
        ds = subsample_pairs(load_sts(name, p.source), p.max_pairs, seed)
        e1 = encode(loaded, ds.sentence1, p.max_length, p.batch_size, alpha, desc=f"{name} s1")
        e2 = encode(loaded, ds.sentence2, p.max_length, p.batch_size, alpha, desc=f"{name} s2")
        out["pairs"][name], out["subsets"][name] = len(ds), len(set(ds.subsets))
        p1, p2 = pool(e1, p.pooling), pool(e2, p.pooling)
        cos = {}
        outs = apply_methods([m for m in METHODS if m != "SoftDecay (token)"], p1, p2, alpha, p.tau)
        for method in METHODS:
            if method == "SoftDecay (token)":
                if p.pooling == "cls":
                    continue
                a, b = pool(e1, p.pooling, True), pool(e2, p.pooling, True)
            else:
                a, b = outs[method]
            cos[method] = C.cosines(a, b)
        scores, diffs, ci = _scores_and_intervals(cos, ds, p.bootstrap, seed)
        for prot in PROTOCOLS:
            out["spearman"][prot][name], out["ci"][prot][name] = scores[prot], ci[prot]
            for m, d in diffs[prot].items():
                all_diffs[prot].setdefault(m, []).append(d)
        for m, draws in C.refit_bootstrap(p1, p2, ds.scores, ds.subsets, REFIT_METHODS, refit_draws(p.bootstrap), seed,
                                          alpha).items():
            refit[m].append(draws)
        out["alpha_sweep"][name] = {
            str(a): C.score(C.cosines(*apply_method("SoftDecay (sentence)", p1, p2, a)), ds.scores, ds.subsets)
            for a in p.alphas}
        sv = {k: torch.linalg.svdvals(X.double()).numpy() for k, X in (("s1", p1), ("s2", p2))}
        out["sign_flips"][name] = {
            "raw": sum(C.sign_flips(v, alpha) for v in sv.values()),
            "sqrt_n": sum(C.sign_flips(v, alpha, len(ds) ** 0.5) for v in sv.values()),
            "max": sum(C.sign_flips(v, alpha, v.max()) for v in sv.values()),
            "rank": int(sum((v > 1e-10 * v.max()).sum() for v in sv.values())),
            "sigma_min": float(min(v[v > 1e-10 * v.max()].min() for v in sv.values())),
            "sigma_max": float(max(v.max() for v in sv.values()))}
        both = torch.cat([p1, p2])
        (w1, w2), (s1, s2) = outs["whitening"], outs["SoftDecay (sentence)"]       # as scored above
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
        out["planted"][name] = planted_scores(p1, p2, ds, p)
    sd = np.mean(refit["SoftDecay (sentence)"], 0)
    out["refit"] = {w: [float(np.mean([out["spearman"]["subset-mean"][d]["SoftDecay (sentence)"]
                                       - out["spearman"]["subset-mean"][d][w] for d in p.datasets])),
                        *C.interval(sd - np.mean(refit[w], 0))] for w in REFIT_METHODS[:2]}
    out["avg_ci"] = {prot: {m: [float(np.mean(
        [out["spearman"][prot][d][m] - out["spearman"][prot][d]["vanilla"] for d in p.datasets])),
        *C.interval(np.mean(ds_draws, 0))] for m, ds_draws in all_diffs[prot].items()} for prot in PROTOCOLS}
    return out


def averages(run: dict, datasets: list[str], protocol: str = "subset-mean") -> dict[str, float]:
    """Table 1's `Avg` column: the mean over the sets of each method's score (methods not run: NaN)."""
    out = {}
    for method in METHODS:
        got = [run["spearman"][protocol][d].get(method) for d in datasets]     # None: not run, or undefined
        vals = np.array([np.nan if v is None else v for v in got], dtype=float)
        out[method] = float(np.nanmean(vals)) if np.isfinite(vals).any() else float("nan")
    return out


def encoder_demo(loaded, alpha: float) -> dict:
    """Cosine similarities of three sentences under `SoftDecayEncoder(mode="token")`."""
    emb = SoftDecayEncoder(loaded, alpha=alpha, mode="token").encode(list(DEMO_SENTENCES.values()))
    norms = np.linalg.norm(emb, axis=1)
    return {"labels": list(DEMO_SENTENCES), "cosine": (emb @ emb.T / np.outer(norms, norms)).tolist()}


def reading_draws(p: Params, name: str, max_pairs: int) -> int:
    """How many subsample draws `name` is read on: 1 on every pair, else `p.draws` (a main model) or
    `p.extra_draws` (a re-read extra encoder)."""
    return 1 if not max_pairs else p.draws if name in p.models else p.extra_draws


def readings_cached(p: Params, name: str, max_pairs: int, compute) -> tuple[dict, bool]:
    """`readings` of encoder `name` through the results cache (`sts-readings-<name>`) on `reading_draws`
    draws; the planted experiment on the first model only."""
    draws, planted = reading_draws(p, name, max_pairs), name == p.models[0]
    return results.cached(p, f"sts-readings-{name.replace('/', '_')}", compute, drop=NOT_READINGS, model=name,
                          max_pairs=max_pairs, draws=draws, planted=planted)


def samefit_models(p: Params) -> list[tuple[str, int]]:
    """The encoders whose Table 1 ordering (whitening − SoftDecay) is read under the same-fit procedures, with
    their pairs per set: every encoder read on every pair (`full_readings`), else the first model on its reading
    pairs."""
    return [(m, 0) for m in p.full_readings] or [(p.models[0], p.reading_pairs or p.max_pairs)]


def samefit_cached(p: Params, name: str, max_pairs: int, loaded) -> tuple[dict, bool]:
    """`samefit` of encoder `name` through the results cache (`sts-samefit-<name>`)."""
    return results.cached(p, f"sts-samefit-{name.replace('/', '_')}", lambda: samefit(loaded, name, p, max_pairs),
                          drop=NOT_READINGS, model=name, max_pairs=max_pairs, **samefit_settings(p))


#: where a pretraining checkpoint of the book MLM is exported to be read (`path_cached`)
PATH_EXPORT = "book-mlm-bert-path"


def path_key(seed: int) -> str:
    """The settings hash of the book MLM pretraining of `seed` (the queries-and-keys chapter's `book` preset)."""
    from .. import qk

    qp = qk.Params.resolve("book")
    return results.settings_hash({**qk.pretrain_config(qp, seed).stored(), "precision": qp.precision})


def path_cached(p: Params, seed: int, step: int, device) -> tuple[dict, bool]:
    """The book MLM BERT at pretraining step `step` of seed `seed`, read on every pair of every set under
    `paper_pooling` alone (`readings`), through the results cache (`sts-path-book-mlm-bert-seed<s>-step<t>`): one
    point of its own path along Table 1's axis. Computing it needs the checkpoint on this machine
    (`python scripts/export_book_model.py --train --seed <s>`); FileNotFoundError names the command otherwise."""
    from .. import qk

    q = replace(p, poolings=(p.paper_pooling,))

    def compute() -> dict:
        folder = qk.export_model(qk.Params.resolve("book"), seed=seed, step=step, name=PATH_EXPORT)
        loaded = hm.load(str(folder), device=device, modality="text")
        out = readings(loaded, q, 0, 1, False)
        out["held_out_mlm_nats"] = json.loads((folder / "BOOK_MODEL.json").read_text())["held_out_mlm_nats"]
        return out

    return results.cached(q, f"sts-path-{BOOK_BERT}-seed{seed}-step{step}", compute, drop=NOT_READINGS,
                          model=BOOK_BERT, max_pairs=0, draws=1, planted=False, pretraining=path_key(seed),
                          run_seed=seed, step=step)


class _Encoders:
    """The encoders this run reads, each loaded on `device` when first asked for and kept."""

    def __init__(self, device):
        self.device, self.loaded = device, {}

    def __call__(self, name: str):
        if name not in self.loaded:
            self.loaded[name] = hm.load(name, device=self.device)
        return self.loaded[name]


def _main_runs(p: Params, load: _Encoders, from_cache: dict) -> tuple[dict, dict]:
    """`run_model` of every model of `p` and, lighter, of every anisotropic `extra_models` encoder (fewer pairs,
    `extra_pooling`), each through the committed-results cache (key: the Params with `models` replaced by the
    run's `model`)."""
    runs, extras = {}, {}
    for name in p.models:
        runs[name], from_cache[name] = results.cached(
            p, f"sts-{name.replace('/', '_')}", lambda n=name: run_model(load(n), p, light=False),
            drop=("models", *EXTRA_FIELDS, *READING_FIELDS), model=name)
    q = replace(p, max_pairs=p.extra_max_pairs, pooling=p.extra_pooling)
    for name in p.extra_models:
        extras[name], from_cache[name] = results.cached(
            q, f"sts-extra-{name.replace('/', '_')}", lambda n=name: run_model(load(n), q, light=True),
            drop=("models", "extra_models", "lsds_points", "tsne_pairs", "plant_sizes",
                  *READING_FIELDS), model=name)
    return runs, extras


def _all_readings(p: Params, load: _Encoders, from_cache: dict, unavailable: dict) -> tuple[dict, dict]:
    """The subsample readings (the models, and the extras `p.reread_extras` names) and the readings on every pair
    (`p.full_readings`), through the cache; an encoder that cannot be read here goes to `unavailable`, why."""
    read, full = {}, {}
    for name, mp in ([(m, p.reading_pairs or p.max_pairs) for m in p.models]
                     + [(m, p.extra_max_pairs) for m in p.extra_models if m in p.reread_extras]):
        nd, planted = reading_draws(p, name, mp), name == p.models[0]
        try:
            read[name], from_cache[f"readings {name}"] = readings_cached(
                p, name, mp, lambda n=name, m=mp, k=nd, pl=planted: readings(load(n), p, m, k, pl))
        except (ModelUnavailable, results.MissingRuns) as err:
            # the book's own model needs its pretraining on this machine; with no committed record and a run
            # that may not measure it (the book build), the chapter says so with the command
            unavailable[name] = str(err)
    for name in p.full_readings:
        try:
            full[name], from_cache[f"full {name}"] = results.cached(
                p, f"sts-full-{name.replace('/', '_')}", lambda n=name: readings(load(n), p, 0, 1, False),
                drop=NOT_READINGS, model=name, max_pairs=0, draws=1, planted=False)
        except (ModelUnavailable, results.MissingRuns) as err:
            unavailable[f"{name} (every pair)"] = str(err)
    return read, full


def _all_samefits(p: Params, load: _Encoders, from_cache: dict, unavailable: dict) -> dict:
    """`samefit` of every encoder `samefit_models` names, through the cache."""
    same = {}
    for name, mp in samefit_models(p):
        try:
            same[name], from_cache[f"same-fit {name}"] = samefit_cached(p, name, mp, lambda n=name: load(n))
        except (ModelUnavailable, results.MissingRuns) as err:
            unavailable[f"{name} (same-fit procedures)"] = str(err)
    return same


def _path(p: Params, device, from_cache: dict, unavailable: dict) -> dict:
    """The book MLM's path (`path_cached`) at every seed and step of `p`, keyed "seed:step"; the checkpoints neither
    committed nor on this machine are named in `unavailable`, with the command."""
    path, missing = {}, []
    for seed in p.path_seeds:
        for step in p.path_steps:
            try:
                path[f"{seed}:{step}"], from_cache[f"path {seed}:{step}"] = path_cached(p, seed, step, device)
            except (ModelUnavailable, results.MissingRuns, FileNotFoundError):
                missing.append(f"seed {seed} step {step}")
    if missing:
        unavailable[f"{BOOK_BERT} pretraining path"] = (
            f"{len(missing)} of its checkpoints are neither committed nor on this machine ({', '.join(missing[:3])}"
            f"{', …' if len(missing) > 3 else ''}): `python scripts/export_book_model.py --train --seed N`, then "
            f"`{COMMANDS['book']}`")
    return path


def run(p: Params) -> Result:
    """Every model of `p` (`_main_runs`), its readings (`_all_readings`), the same-fit procedures, the book MLM's
    path, the t-SNE maps and the encoder demo, each through the committed-results cache, then the paper's
    tables, handed to `Result`."""
    seed_everything(p.seed)
    device = choose_device(p.device)
    load, from_cache, unavailable = _Encoders(device), {}, {}
    # the main run, the same-fit procedures and the maps read the same sentences through the same encoder: one pass;
    # a whitening fitted on the same rows again is fitted once
    with quiet_loading(), kept_encodings(), C.kept_fits():
        runs, extras = _main_runs(p, load, from_cache)
        read, full = _all_readings(p, load, from_cache, unavailable)
        same = _all_samefits(p, load, from_cache, unavailable)
        path = _path(p, device, from_cache, unavailable)
        first = p.models[0]
        model = load(first)
        drawn, from_cache["maps"] = results.cached(
            p, f"sts-maps-{first.replace('/', '_')}", lambda: maps(model, p),
            drop=tuple(f for f in p.cache_key() if f not in MAP_FIELDS), model=first)
        demo = encoder_demo(model, p.alpha)
        from .figure_runs import figure_runs_cached
        figs = figure_runs_cached(p, load, from_cache, unavailable)
    avgs = {m: {prot: averages(r, list(p.datasets), prot) for prot in PROTOCOLS} for m, r in {**runs, **extras}.items()}
    wins = {m: int(sum(v["SoftDecay (normalised)"] < v["whitening (normalised)"] for v in runs[m]["lsds"].values()))
            for m in p.models}
    paper1 = pd.read_csv(REPO_ROOT / "data" / "yan_2022_table1.csv").to_dict("records")
    paper4 = pd.read_csv(REPO_ROOT / "data" / "yan_2022_table4.csv").to_dict("records")
    return Result(models=list(p.models), datasets=list(p.datasets), pooling=p.pooling, alpha=p.alpha, scale=p.scale,
                  runs=runs, from_cache=from_cache, averages=avgs, lsds_wins=wins, plant_sizes=list(p.plant_sizes),
                  extras=extras, extra_pooling=p.extra_pooling, paper_table1=paper1,
                  paper_table4=paper4, encoder_demo=demo, bootstrap=p.bootstrap, max_pairs=p.max_pairs,
                  extra_max_pairs=p.extra_max_pairs, readings=read, unavailable=unavailable,
                  paper_pooling=p.paper_pooling, poolings=list(p.poolings), plant_directions=p.plant_directions,
                  reading_pairs=p.reading_pairs or p.max_pairs, maps=drawn, full_readings=full, samefit=same,
                  path=path, figure_runs=figs)
