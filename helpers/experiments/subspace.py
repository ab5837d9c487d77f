"""The subspace chapter (Yan et al. §3, Appendix A): the singular-value subspace theorem on random
matrices and on a real model's hidden states, the case-study probability bound (eq. 8) against its
exact value and Monte Carlo, and the layer-by-layer singular-value CDFs of §3.2.

The mathematics is in `helpers.core.subspace`; here are the matrices, the model runs, the loops and
the numbers the chapter quotes.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

import numpy as np
import torch

from ..book import results
from ..book.params import ChapterParams, positive, rules
from ..book.runtime import REPO_ROOT, choose_device, seed_everything
from ..core import subspace as S
from ..core.findings import Finding, Partial, Spec
from ..core.scale import Distance, model_distance
from ..core.stats import Interval
from ..data import load_glue
from ..hf import models
from ..hf.models import quiet_loading

PAPER_MEDIANS = REPO_ROOT / "data" / "yan_2022_sv_median.csv"
Task = Literal["CoLA", "MRPC", "RTE", "SST-2"]
#: the statistics of `core.subspace.layer_spectrum_stats` kept per layer (its pooled values go to `cdf_values`)
STAT_KEYS = ("layer", "median", "skewness", "token_uni", "cls_uni", "ev1")
#: how many quantiles of each layer's pooled normalised singular values the Result keeps (for the CDF
#: and histogram figures; the medians and skewness are computed from every value)
QUANTILES = 2001
#: the Params fields the model part of the chapter does not depend on (its cache key leaves them out)
NOT_MODEL = ("random_shapes", "random_dim", "mc_samples", "sphere_dims", "radii")
#: resamples of the sentences behind the §3.2 findings' intervals (`sentence_bootstrap`)
BOOTSTRAP = 1000
#: the half-width an exact (unsampled) effect is read with: float64 SVDs and log-space Gamma functions are
#: accurate far below it
EXACT_TOLERANCE = 1e-6


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
    #: the §3.2 changes on `second_task` (last − first hidden state) over sentences resampled with replacement
    #: (`sentence_bootstrap`): "median", "token_uni", "cls_uni" -> draws; "n" the sentences resampled
    sentence_draws: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.tightness = {k: np.asarray(v, dtype=float) for k, v in self.tightness.items()}
        self.cdf_values = _arrays(self.cdf_values)
        self.second_task_values = {k: np.asarray(v, dtype=float) for k, v in self.second_task_values.items()}

    def medians(self, model: str = "pretrained") -> list[float]:
        return [r["median"] for r in self.cdf_stats if r["model"] == model]

    # --- the numbers the chapter reads (figures/subspace.py only formats them) -----------------------

    def max_ratio_by_m(self) -> dict[int, float]:
        """The largest ‖x_i − x_i′‖/λ_{k+1} over kinds of random matrix, per number of tokens m."""
        out: dict[int, float] = {}
        for r in self.random:
            out[r["m"]] = max(out.get(r["m"], 0.0), r["max_ratio"])
        return out

    def middle_radius(self) -> float:
        radii = self.settings["radii"]
        return radii[len(radii) // 2]

    def cliff(self, n: int = 384) -> dict[str, float]:
        """The exact P(‖u_{1..k}‖ ≤ d) at the middle radius d for sphere dimension n: at k = 16, n/4
        and n/2 (NaN where n was not run)."""
        d = self.middle_radius()
        exact = {r["k"]: r["exact_l2"] for r in self.appendix_a if r["n"] == n and r["d"] == d}
        return {"n": n, "d": d, "k16": exact.get(16, math.nan), "quarter": exact.get(n // 4, math.nan),
                "half": exact.get(n // 2, math.nan)}

    def cls_uniformity(self) -> dict[str, float]:
        """[CLS] uniformity of the pretrained model on the second task: at the embeddings (`first`;
        trivially 1 — the [CLS] input is the same vector for every sentence), at layer 1, its lowest
        value over the layers between the first and the last (`mid_min`), and at the last layer."""
        cls = [r["cls_uni"] for r in self.second_task_stats]
        return {"first": cls[0], "layer1": cls[1] if len(cls) > 1 else math.nan,
                "mid_min": min(cls[1:-1]) if len(cls) > 2 else math.nan, "last": cls[-1],
                "last_mid": len(cls) - 2}

    def trend(self, stat: str) -> Interval:
        """The §3.2 change of `stat` ("median", "token_uni", "cls_uni") on the second task — last − first hidden
        state (for [CLS]: last − layer 1, the embeddings' [CLS] being one vector) — with its 95 % percentile
        interval over `BOOTSTRAP` resamples of the sentences."""
        first, last = self.second_task_stats[0], self.second_task_stats[-1]
        est = (self.cls_uniformity()["last"] - self.cls_uniformity()["layer1"] if stat == "cls_uni"
               else last[stat] - first[stat])
        draws = self.sentence_draws.get(stat)
        if not draws:
            return Interval(est, float("nan"), float("nan"), 1, "bootstrap")
        return Interval.from_draws(draws, estimate=est)

    def eq8_excess(self) -> float:
        """The largest exact ℓ2 probability minus eq. (8)'s bound over every (n, k, d) case (> 0: the
        bound fails)."""
        return max(r["exact_l2"] - r["bound"] for r in self.appendix_a)

    def findings(self) -> list[Finding]:
        """The theorem (§3.1) on random matrices and real hidden states, eq. (8) and the Γ-step of
        Appendix A, and the §3.2 layer trends (median, token and [CLS] uniformity) on MRPC (`FINDINGS`)."""
        return [f for spec in FINDINGS for f in spec.findings(self, paper="yan2022", chapter="subspace",
                                                              unit="sentences", units=self.n_sentences)]


# --- the findings, as a table (`core.findings.Spec`): what each row reads of the Result -------------------
def _n_last(res: Result) -> int:
    return len(res.second_task_stats) - 1


def _on_task(res: Result) -> str:
    s = res.settings
    return (f"{s['model']}, {res.n_sentences} {s['second_task']} validation sentences, embeddings to layer "
            f"{_n_last(res)}")


#: the paper's model (BERT-base)
PAPER_MODEL = Params.PRESETS["paper"]["model"]


def _scale(res: Result) -> str:
    model = res.settings["model"]
    return (f"{model} ({_n_last(res)} layers) in place of BERT-base ({models.SIZE[PAPER_MODEL].layers})"
            if model != PAPER_MODEL else "the paper's model")


def _reduced(res: Result) -> str:
    model = res.settings["model"]
    return (f"on {model} ({_n_last(res)} layers) in place of BERT-base ({models.SIZE[PAPER_MODEL].layers}), "
            f"{res.n_sentences} sentences" if model != PAPER_MODEL else "")


def _distance(res: Result) -> tuple[Distance, ...]:
    """How far the run is from the paper's: our model's parameters, layers and width against BERT-base's
    (`hf.models.SIZE`), and the sentences read (the paper does not say how many)."""
    model = res.settings["model"]
    if model == PAPER_MODEL:
        return ()
    return model_distance(models.SIZE.get(model), models.SIZE[PAPER_MODEL]) + (
        Distance("sentences", res.n_sentences, None, "sentences"),)


def _boot(res: Result) -> str:
    return f"{BOOTSTRAP} resamples of the {res.n_sentences} sentences"


def _bound_ratio(res: Result) -> Interval:
    return Interval.exact(max([r["max_ratio"] for r in res.random] + [r["max_ratio"] for r in res.real_model]))


def _exact(why: str, scale: str) -> dict[str, Any]:
    """The columns of a row that is a computation, not a sample: its tolerance, why, and its scale."""
    return dict(tolerance=EXACT_TOLERANCE, reduced="", exact_why=why, scale=scale)


def _trend(name: str, section: str, **more: Any) -> dict[str, Any]:
    """The columns of a §3.2 layer trend on the second task."""
    return dict(read=lambda res: Partial(res.trend(name)), section=section,
                more=dict(scale=_scale, reduced=_reduced, distance=_distance, **more))


FINDINGS = (
    Spec(key="subspace-bound", where="§3.1", claim_id="yan-theorem",
         claim="Every token lies within C of the span of the first k right singular vectors, for any C between "
               "λₖ₊₁ and λₖ",
         measured=lambda res: (f"{len(res.random)} random token matrices ({len(res.settings['random_shapes'])} "
                               f"sizes, 3 kinds) and every hidden state of {res.settings['model']} on "
                               f"{res.n_sentences} {res.settings['task']} validation sentences, every row and cut"),
         quantity="largest distance to the span / λₖ₊₁, over rows, cuts and matrices",
         read=lambda res: Partial(_bound_ratio(res)), direction="below", reference=1.0, reference_label="1 (the bound)",
         section="subspace-random",
         more=_exact("a maximum over every row and cut of fixed matrices: a bound, not a sample",
                     "every row and cut; the paper proves it")),
    Spec(key="subspace-gamma-step", where="App. A, line before eq. (8)", claim_id="yan-eq8-step",
         claim="The constant of the line before eq. (8) is at most eq. (8)'s 2/(k(n−k)·B(k/2, (n−k)/2))",
         measured=lambda res: f"both constants evaluated in log space for {len(res.gamma_steps)} (n, k)",
         quantity="smallest ratio of the line before (8) to eq. (8)'s constant",
         read=lambda res: Partial(Interval.exact(min(r["ratio"] for r in res.gamma_steps))), direction="below",
         reference=1.0, reference_label="1", section="subspace-eq8",
         more=_exact("a ratio of Gamma functions computed for each (n, k): an identity, no sampling", "exact")),
    Spec(key="subspace-eq8", where="App. A, eq. (8)", claim_id="yan-eq8",
         claim="For u uniform on the sphere, P(‖u₁..ₖ‖ ≤ d) is at most "
               "2·d²ᵏ(1 − dⁿ⁻ᵏ) / (k(n−k)·B(k/2, (n−k)/2))",
         measured=lambda res: (f"the exact probability (a Beta law) in {res.appendix_a_summary['cases']} cases "
                               f"(n, k, d), n in {', '.join(map(str, res.settings['sphere_dims']))}; Monte Carlo "
                               "for both readings"),
         quantity="largest exact probability − eq. (8) over the cases",
         read=lambda res: Partial(Interval.exact(res.eq8_excess())), direction="below", reference=0.0,
         section="subspace-eq8",
         more=_exact("the probability is a regularised Beta function evaluated exactly: no sampling",
                     "exact; no sampling")),
    Spec(key="subspace-median", where="§3.2, Fig. 2", claim_id="yan-fig2-median",
         claim=lambda res: (f"The median normalised singular value falls with depth, from {res.paper_medians[0]:g} "
                            f"to {res.paper_medians[-1]:g} (BERT-base, MRPC)"),
         measured=_on_task,
         quantity=lambda res: f"last − first hidden state median normalised singular value ({_boot(res)})",
         direction="below",
         **_trend("median", "subspace-cdf", paper_value=lambda res: res.paper_medians[-1] - res.paper_medians[0])),
    Spec(key="subspace-token-uniformity", where="§3.2, Fig. 2", claim_id="yan-fig2-token-uniformity",
         claim="Token uniformity (the mean cosine between a sentence's tokens) increases as the layers go deeper "
               "(BERT-base, MRPC)",
         measured=_on_task, quantity=lambda res: f"last − first hidden state token uniformity ({_boot(res)})",
         direction="above", **_trend("token_uni", "subspace-cdf")),
    Spec(key="subspace-cls-uniformity", where="§3.2, Fig. 2", claim_id="yan-fig2-cls-uniformity",
         claim="[CLS] uniformity (the mean cosine between sentences' [CLS] vectors) increases as the layers go "
               "deeper (BERT-base, MRPC)",
         measured=lambda res: _on_task(res) + " (from layer 1: at the embeddings every [CLS] vector is the same)",
         quantity=lambda res: f"last layer − layer 1 [CLS] uniformity ({_boot(res)})",
         direction="above", **_trend("cls_uni", "subspace-cls")),
    Spec(key="subspace-bert", where="§3.2, Fig. 1", claim_id="yan-fig1-cdf",
         claim="In BERT-base the singular-value spectrum grows more skewed, layer by layer",
         measured="not run: bert-base-uncased comes from the Hugging Face hub",
         quantity="the §3.2 statistics on BERT-base", section="subspace-differs",
         when=lambda res: res.settings["model"] != "bert-base-uncased",
         more=dict(needs="the Hugging Face hub", command="make rerun CHAPTER=subspace SCALE=paper")),
)


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
    from ..core import measures as M

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


__all__ = ["Params", "Result", "run", "random_matrices", "random_study", "case_study", "case_summary",
           "sentence_bootstrap"]
