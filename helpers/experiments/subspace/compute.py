"""The subspace chapter's runs: the random matrices (`random_study`), Appendix A's cases (`case_study`), the model
part (`model_study`: the theorem on every hidden state and the §3.2 per-layer statistics), the sentence bootstrap
(`sentence_bootstrap`), and `run`, which takes the heavy parts through the results cache.

The mathematics is in `helpers.core.subspace`; here are the matrices, the model runs, the loops and the numbers
the chapter quotes."""

from __future__ import annotations

import csv
from typing import Any

import numpy as np
import torch

from ...core import subspace as S
from ...data import load_glue
from ...hf import models
from ...hf.models import quiet_loading
from ...machinery import results
from ...machinery.runtime import choose_device, seed_everything
from .params import BOOTSTRAP, NOT_MODEL, PAPER_MEDIANS, QUANTILES, STAT_KEYS, Params
from .records import Case, CaseSummary, LayerStats, MatrixCheck
from .result import Result


def random_matrices(m: int, d: int, g: torch.Generator) -> dict[str, torch.Tensor]:
    """Three kinds of m × d token matrices: i.i.d. Gaussian (a flat spectrum), Gaussian with a
    geometrically decaying spectrum (an "anisotropic" layer), rank 4 plus small noise."""
    f64 = torch.float64
    return {
        "gaussian": torch.randn(m, d, generator=g, dtype=f64),
        "decaying spectrum": torch.randn(m, d, generator=g, dtype=f64)
        @ torch.diag(torch.logspace(0, -4, d, dtype=f64)),
        "rank 4 + noise": torch.randn(m, 4, generator=g, dtype=f64) @ torch.randn(4, d, generator=g, dtype=f64)
        + 1e-3 * torch.randn(m, d, generator=g, dtype=f64),
    }


def random_study(p: Params) -> tuple[list[MatrixCheck], dict[str, np.ndarray]]:
    """The theorem check on every kind of random matrix and shape; tightness by cut for the largest m."""
    g = torch.Generator().manual_seed(p.seed)
    rows, curves = [], {}
    for m in p.random_shapes:
        for kind, X in random_matrices(m, p.random_dim, g).items():
            rows.append({"m": m, "d": p.random_dim, "matrix": kind, **S.theorem_check(X)})
            if m == max(p.random_shapes):
                curves[kind] = S.tightness_by_cut(X)
    return rows, curves


def case_study(p: Params) -> list[Case]:
    """Appendix A: for every sphere dimension n, cut k and radius d, eq. (8) against the exact ℓ2
    probability and the Monte Carlo estimates of the ℓ2 and ℓ1 readings. The ℓ1 reading violates the
    bound when its estimate exceeds it by more than 4 standard errors."""
    rows = []
    for n in p.sphere_dims:
        ks = sorted({k for k in (1, 2, 4, 8, 16, n // 4, n // 2) if 0 < k < n})
        mc = S.sphere_monte_carlo(n, ks, list(p.radii), p.mc_samples, p.seed)
        for i, k in enumerate(ks):
            for j, d in enumerate(p.radii):
                bound, exact = S.eq8_bound(n, k, d), S.exact_l2_probability(n, k, d)
                se = max(np.sqrt(max(exact * (1 - exact), 1e-12) / p.mc_samples), 1 / p.mc_samples)
                rows.append({"n": n, "k": k, "d": d, "bound": bound, "exact_l2": exact,
                             "mc_l2": float(mc["l2"][i, j]), "mc_l1": float(mc["l1"][i, j]),
                             "l2_violates": bool(exact > bound * (1 + 1e-9) + 1e-15),
                             "l2_violates_x4": bool(exact > 4 * bound * (1 + 1e-9) + 1e-15),
                             "l1_violates": bool(mc["l1"][i, j] > bound + 4 * se)})
    return rows


def case_summary(rows: list[Case]) -> CaseSummary:
    """How often eq. (8) fails, its worst failure (largest exact − bound), and its median looseness
    (bound / exact) where it holds."""
    bad = [r for r in rows if r["l2_violates"]]
    held = [r for r in rows if not r["l2_violates"] and r["exact_l2"] > 0]
    worst = max(bad, key=lambda r: r["exact_l2"] - r["bound"]) if bad else None
    return CaseSummary.of({
            "cases": len(rows), "l2_violations": len(bad), "l1_violations": sum(r["l1_violates"] for r in rows),
            "l2_violations_x4": sum(r.get("l2_violates_x4", False) for r in rows),
            "quarter_cases": sum(r["k"] == r["n"] // 4 for r in rows),
            "quarter_violations": sum(r["l2_violates"] and r["k"] == r["n"] // 4 for r in rows),
            "median_looseness": float(np.median([r["bound"] / r["exact_l2"] for r in held])) if held else float("nan"),
            "worst": None if worst is None else {k: worst[k] for k in ("n", "k", "d", "bound", "exact_l2")}})


def _stats(per_layer, mask, label: str) -> tuple[list[LayerStats], list[np.ndarray]]:
    rows = S.layer_spectrum_stats(per_layer, mask)
    return [{"model": label, **{k: r[k] for k in STAT_KEYS}} for r in rows], [r["values"].numpy() for r in rows]


def paper_medians() -> list[float]:
    with open(PAPER_MEDIANS, encoding="utf-8") as fh:
        return [float(r["median"]) for r in csv.DictReader(fh)]


def _quantiles(values) -> list[float]:
    """`QUANTILES` evenly spaced quantiles of pooled values (what the CDF and histogram figures need)."""
    v = np.asarray(values, dtype=float)
    return np.round(np.quantile(v, np.linspace(0, 1, QUANTILES)), 6).tolist()


def model_study(p: Params) -> dict[str, Any]:
    """The chapter's model part: the theorem on every hidden state of the model, the §3.2 per-layer
    statistics of the pretrained model (and its untrained twin) on `task`, and of the pretrained model
    on `second_task`; the pooled singular values kept as quantiles."""
    device = choose_device(p.device)
    sentences = load_glue(p.task, "validation").texts()[: p.n_sentences]
    with quiet_loading():
        loaded = models.load(p.model, device=device)
    per_layer, mask = models.hidden_states(loaded, sentences, p.max_length, p.batch_size, desc=p.model)
    real_rows = [{"layer": layer, **S.theorem_check(H, mask),    # padded rows are zeroed and left out
                  "mean_cut_ratio": float(np.nanmean(S.tightness_by_cut(H, mask)))}
                 for layer, H in enumerate(per_layer)]
    stats, values = _stats(per_layer, mask, "pretrained")
    cdf_values = {"pretrained": [_quantiles(v) for v in values]}
    if p.untrained_twin:
        with quiet_loading():
            twin = models.load(p.model, untrained=True, device=device)
        twin_layers, _ = models.hidden_states(twin, sentences, p.max_length, p.batch_size, desc="untrained twin")
        twin_stats, twin_values = _stats(twin_layers, mask, "untrained twin")
        cdf_values["untrained twin"] = [_quantiles(v) for v in twin_values]
        stats += twin_stats
    second = load_glue(p.second_task, "validation").texts()[: p.n_sentences]
    second_stats, second_values = _stats(
        *models.hidden_states(loaded, second, p.max_length, p.batch_size, desc=p.second_task), "pretrained")
    last = len(second_values) - 1
    fig2 = {f"layer {i}": _quantiles(second_values[i]) for i in sorted({0, last // 2 + last % 2, last})}
    return {"model_description": loaded.description, "n_sentences": len(sentences), "n_real_tokens": int(mask.sum()),
            "n_hidden_states": len(per_layer), "real_model": real_rows, "cdf_values": cdf_values,
            "cdf_stats": stats, "second_task_stats": second_stats, "second_task_values": fig2}


def sentence_bootstrap(p: Params) -> dict[str, Any]:
    """The §3.2 changes on `second_task` over resampled sentences: the pretrained model's hidden states of the
    first `n_sentences` validation sentences (as `model_study` reads them), then `BOOTSTRAP` resamples of the
    sentences with replacement, each giving last − first hidden state median normalised singular value (the
    resample's pooled values, normalised by their largest), mean token cosine, and last − layer 1 mean [CLS]
    cosine (pairs of distinct sentences: a sentence drawn twice is not paired with itself)."""
    from ...core import measures as M

    device = choose_device(p.device)
    sentences = load_glue(p.second_task, "validation").texts()[: p.n_sentences]
    with quiet_loading():
        loaded = models.load(p.model, device=device)
    per_layer, mask = models.hidden_states(loaded, sentences, p.max_length, p.batch_size, desc=p.second_task)
    lengths = mask.sum(-1)
    ends = (0, len(per_layer) - 1)
    spectra, token_uni = {}, {}
    for layer in ends:
        sv = M.singular_values(per_layer[layer], mask)
        spectra[layer] = [sv[i, : int(min(lengths[i], sv.shape[-1]))].double().numpy() for i in range(len(sentences))]
        token_uni[layer] = M.token_uni(per_layer[layer], mask).double().numpy()
    grams = {}
    for layer in (1, ends[1]):
        cls = per_layer[layer][:, 0, :].double()
        unit = cls / cls.norm(dim=-1, keepdim=True).clamp_min(1e-12)
        grams[layer] = (unit @ unit.T).numpy()
    rng = np.random.default_rng(p.seed)
    n = len(sentences)
    out: dict[str, Any] = {"median": [], "token_uni": [], "cls_uni": [], "n": n}

    def median(layer, idx):
        v = np.concatenate([spectra[layer][i] for i in idx])
        return float(np.median(v / v.max()))

    def cls_mean(layer, counts):
        same = float((counts ** 2).sum())
        return float((counts @ grams[layer] @ counts - same) / (n * n - same))

    for _ in range(BOOTSTRAP):
        idx = rng.integers(0, n, n)
        counts = np.bincount(idx, minlength=n).astype(float)
        out["median"].append(median(ends[1], idx) - median(0, idx))
        out["token_uni"].append(float(token_uni[ends[1]][idx].mean() - token_uni[0][idx].mean()))
        out["cls_uni"].append(cls_mean(ends[1], counts) - cls_mean(1, counts))
    return out


def run(p: Params) -> Result:
    """Every computation of the chapter, in the order of its sections. The model part goes through the
    committed-results cache (`results/subspace/book/model-spectra.json` at `book` scale: read back in
    a second), and so does Appendix A's Monte Carlo (`appendix-a.json`, deterministic: about 10 s to redraw);
    the random matrices take a second and are computed every time."""
    seed_everything(p.seed)
    random_rows, curves = random_study(p)
    part, _ = results.cached(p, "model-spectra", lambda: model_study(p), drop=NOT_MODEL)
    draws, _ = results.cached(p, "sentence-bootstrap", lambda: sentence_bootstrap(p),
                              drop=(*NOT_MODEL, "task", "untrained_twin"), bootstrap=BOOTSTRAP)
    keep = ("seed", "sphere_dims", "radii", "mc_samples")
    cases, _ = results.cached_run(p.CHAPTER, "appendix-a", p, p.cache_key(drop=tuple(f for f in p.cache_key()
                                                                              if f not in keep)),
                                  lambda: case_study(p), p.scale)
    steps = [S.gamma_step(n, k) for n in p.sphere_dims for k in sorted({1, 4, n // 4, n // 2}) if 0 < k < n]
    return Result(
        settings=p.cache_key(), random=random_rows, tightness=curves, tightness_m=max(p.random_shapes),
        appendix_a=cases, appendix_a_summary=case_summary(cases), paper_medians=paper_medians(),
        gamma_steps=steps, sentence_draws=draws, **part)
