"""The subspace chapter (Yan et al. §3, Appendix A): the singular-value subspace theorem on random
matrices and on a real model's hidden states, the case-study probability bound (eq. 8) against its
exact value and Monte Carlo, and the layer-by-layer singular-value CDFs of §3.2.

The mathematics is in `helpers.core.subspace`; here are the matrices, the model runs, the loops and
the numbers the chapter quotes.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

import numpy as np
import torch

from ..book import results
from ..book.params import ChapterParams, positive, rules
from ..book.runtime import REPO_ROOT, choose_device, seed_everything
from ..core import subspace as S
from ..data import load_glue
from ..hf import models
from ..hf.models import quiet_loading

PAPER_MEDIANS = REPO_ROOT / "data" / "yan_2022_sv_median.csv"
Task = Literal["CoLA", "MRPC", "RTE", "SST-2"]
#: the statistics of `core.subspace.layer_spectrum_stats` kept per layer (its pooled values go to `cdf_values`)
STAT_KEYS = ("layer", "median", "skewness", "token_uni", "cls_uni", "ev1")


@dataclass(frozen=True)
class Params(ChapterParams):
    """Yan et al. §3 and Appendix A: the singular-value subspace theorem and the CDF study."""

    model: str = "all-MiniLM-L6-v2"
    task: Task = "CoLA"
    second_task: Task = "MRPC"
    n_sentences: int = 512
    max_length: int = 128
    batch_size: int = 32
    random_shapes: tuple[int, ...] = (16, 64, 128)   # token counts m of the random matrices
    random_dim: int = 384
    mc_samples: int = 200_000
    sphere_dims: tuple[int, ...] = (16, 64, 384, 768)
    radii: tuple[float, ...] = (0.1, 0.3, 0.5, 0.7, 0.9)
    untrained_twin: bool = True

    CHAPTER: ClassVar[str] = "subspace"
    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {
        "ci": dict(n_sentences=48, mc_samples=20_000, sphere_dims=(16, 64, 384), random_shapes=(16, 64)),
        "book": dict(),
        "paper": dict(model="bert-base-uncased", n_sentences=1043, random_dim=768),
    }
    RULES: ClassVar = rules(
        n_sentences=(lambda v: v >= 2, "needs at least 2 sentences"),
        max_length=(lambda v: 4 <= v <= 512, "must lie in [4, 512]"),
        batch_size=positive, random_dim=positive,
        random_shapes=(lambda v: len(v) > 0 and all(x >= 2 for x in v), "every m must be >= 2"),
        mc_samples=(lambda v: v >= 100, "needs >= 100 samples"),
        sphere_dims=(lambda v: len(v) > 0 and all(x >= 2 for x in v), "every n must be >= 2"),
        radii=(lambda v: len(v) > 0 and all(0 < x < 1 for x in v), "every radius d must lie in (0, 1)"),
    )


def _arrays(values: Any) -> Any:
    """`cdf_values` as JSON gives it back (lists) → numpy arrays."""
    return {k: [np.asarray(v, dtype=float) for v in vs] for k, vs in values.items()}


@dataclass
class Result(results.Result):
    """Every number of the chapter. Table rows are dicts with plain keys; `cdf_values[model]` holds,
    per hidden state, the pooled normalised singular values (numpy arrays)."""

    settings: dict[str, Any]
    random: list[dict[str, Any]]             # m, d, matrix, worst_slack, worst_slack_rel, max_ratio, median_ratio
    tightness: dict[str, Any]                # matrix kind -> max_i ‖x_i − x_i′‖/λ_{k+1} per cut k (largest m)
    tightness_m: int
    model_description: str
    n_sentences: int
    n_real_tokens: int
    n_hidden_states: int
    real_model: list[dict[str, Any]]         # per layer: the theorem check and mean_cut_ratio
    appendix_a: list[dict[str, Any]]         # n, k, d, bound, exact_l2, mc_l2, mc_l1, l2_violates, l1_violates
    appendix_a_summary: dict[str, Any]
    cdf_values: dict[str, Any]               # "pretrained" / "untrained twin" -> per layer pooled values
    cdf_stats: list[dict[str, Any]]          # model, layer, median, skewness, token_uni, cls_uni, ev1
    second_task_stats: list[dict[str, Any]]  # the pretrained model on `second_task`, per layer
    paper_medians: list[float]               # BERT-base on MRPC, first and last layer (data/yan_2022_sv_median.csv)
    second_task_values: dict[str, Any] = field(default_factory=dict)   # "layer i" -> pooled values (Fig. 2)
    gamma_steps: list[dict[str, Any]] = field(default_factory=list)    # Appendix A's Γ-step per (n, k)

    def __post_init__(self) -> None:
        self.tightness = {k: np.asarray(v, dtype=float) for k, v in self.tightness.items()}
        self.cdf_values = _arrays(self.cdf_values)
        self.second_task_values = {k: np.asarray(v, dtype=float) for k, v in self.second_task_values.items()}

    def medians(self, model: str = "pretrained") -> list[float]:
        return [r["median"] for r in self.cdf_stats if r["model"] == model]


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


def random_study(p: Params) -> tuple[list[dict[str, Any]], dict[str, np.ndarray]]:
    """The theorem check on every kind of random matrix and shape; tightness by cut for the largest m."""
    g = torch.Generator().manual_seed(p.seed)
    rows, curves = [], {}
    for m in p.random_shapes:
        for kind, X in random_matrices(m, p.random_dim, g).items():
            rows.append({"m": m, "d": p.random_dim, "matrix": kind, **S.theorem_check(X)})
            if m == max(p.random_shapes):
                curves[kind] = S.tightness_by_cut(X)
    return rows, curves


def case_study(p: Params) -> list[dict[str, Any]]:
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


def case_summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """How often eq. (8) fails, its worst failure (largest exact − bound), and its median looseness
    (bound / exact) where it holds."""
    bad = [r for r in rows if r["l2_violates"]]
    held = [r for r in rows if not r["l2_violates"] and r["exact_l2"] > 0]
    worst = max(bad, key=lambda r: r["exact_l2"] - r["bound"]) if bad else None
    return {"cases": len(rows), "l2_violations": len(bad), "l1_violations": sum(r["l1_violates"] for r in rows),
            "l2_violations_x4": sum(r.get("l2_violates_x4", False) for r in rows),
            "quarter_cases": sum(r["k"] == r["n"] // 4 for r in rows),
            "quarter_violations": sum(r["l2_violates"] and r["k"] == r["n"] // 4 for r in rows),
            "median_looseness": float(np.median([r["bound"] / r["exact_l2"] for r in held])) if held else float("nan"),
            "worst": None if worst is None else {k: worst[k] for k in ("n", "k", "d", "bound", "exact_l2")}}


def _stats(per_layer, mask, label: str) -> tuple[list[dict[str, Any]], list[np.ndarray]]:
    rows = S.layer_spectrum_stats(per_layer, mask)
    return [{"model": label, **{k: r[k] for k in STAT_KEYS}} for r in rows], [r["values"].numpy() for r in rows]


def paper_medians() -> list[float]:
    with open(PAPER_MEDIANS, encoding="utf-8") as fh:
        return [float(r["median"]) for r in csv.DictReader(fh)]


def run(p: Params) -> Result:
    """Every computation of the chapter, in the order of its sections (about 30 s at `book` scale)."""
    seed_everything(p.seed)
    device = choose_device(p.device)
    random_rows, curves = random_study(p)
    sentences = load_glue(p.task, "validation").texts()[: p.n_sentences]
    with quiet_loading():
        loaded = models.load(p.model, device=device)
    per_layer, mask = models.hidden_states(loaded, sentences, p.max_length, p.batch_size, desc=p.model)
    real_rows = [{"layer": layer, **S.theorem_check(H, mask),    # padded rows are zeroed and left out
                  "mean_cut_ratio": float(np.nanmean(S.tightness_by_cut(H, mask)))}
                 for layer, H in enumerate(per_layer)]
    stats, values = _stats(per_layer, mask, "pretrained")
    cdf_values = {"pretrained": values}
    if p.untrained_twin:
        with quiet_loading():
            twin = models.load(p.model, untrained=True, device=device)
        twin_layers, _ = models.hidden_states(twin, sentences, p.max_length, p.batch_size, desc="untrained twin")
        twin_stats, cdf_values["untrained twin"] = _stats(twin_layers, mask, "untrained twin")
        stats += twin_stats
    second = load_glue(p.second_task, "validation").texts()[: p.n_sentences]
    second_stats, second_values = _stats(
        *models.hidden_states(loaded, second, p.max_length, p.batch_size, desc=p.second_task), "pretrained")
    last = len(second_values) - 1
    fig2 = {f"layer {i}": second_values[i] for i in sorted({0, last // 2 + last % 2, last})}
    cases = case_study(p)
    steps = [S.gamma_step(n, k) for n in p.sphere_dims for k in sorted({1, 4, n // 4, n // 2}) if 0 < k < n]
    return Result(
        settings=p.cache_key(), random=random_rows, tightness=curves, tightness_m=max(p.random_shapes),
        model_description=loaded.description, n_sentences=len(sentences), n_real_tokens=int(mask.sum()),
        n_hidden_states=len(per_layer), real_model=real_rows, appendix_a=cases, appendix_a_summary=case_summary(cases),
        cdf_values=cdf_values, cdf_stats=stats, second_task_stats=second_stats, paper_medians=paper_medians(),
        second_task_values=fig2, gamma_steps=steps)


__all__ = ["Params", "Result", "run", "random_matrices", "random_study", "case_study", "case_summary"]
