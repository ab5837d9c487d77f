"""The STS chapter (Yan et al. §5.1, App. B-C): SoftDecay and its baselines on unsupervised STS, per
model through the results cache — Table 1 scores under the paper's protocol (per subset, mean over
subsets) and pooled, with paired bootstrap intervals against the raw model, the α sweep, Table 4's
uniformity metrics and a control, LSDS (Fig. 6), per-layer singular values and SoftDecay's sign
flips (Fig. 3), t-SNE maps (Figs. 4, 7), and the planted-anisotropy experiment. The mathematics is
`helpers.core.sts`; the encoder pass `helpers.hf.sts`."""

from __future__ import annotations

import math
import time
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
from ..core.findings import Finding, finding_key
from ..core.findings import verdict as verdict_of
from ..core.softdecay import softdecay_transform
from ..core.stats import Interval, t_interval
from ..core.sts import FLIP_FREE, METHODS, PROTOCOLS, apply_method, lsds_score, pool, uniformity_metrics
from ..data import load_sts
from ..hf import models as hm
from ..hf.models import ModelUnavailable, quiet_loading
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
    cdf_pairs: int = 500             # not read (Fig. 8 is the GLUE chapter's, from its fine-tuned baselines)
    # the readings (`readings`): every encoder under each pooling, from one encoding
    paper_pooling: Literal["first_last", "first_last_l1", "last", "cls"] = "first_last_l1"
    poolings: tuple[Literal["first_last", "first_last_l1", "last"], ...] = ("first_last_l1", "first_last")
    reading_pairs: int = 0           # pairs per set of the main models' re-reading (0: as max_pairs)
    reread_extras: tuple[str, ...] = ("book-mlm-bert",)   # extra models re-read under `poolings`
    draws: int = 1                   # subsample draws of an encoder scored on a subsample (seeds seed, seed+1, ...)
    extra_draws: int = 1             # subsample draws of each re-read extra encoder (`reread_extras`)
    plant_directions: int = 5        # random directions of the planted experiment
    full_readings: tuple[str, ...] = ()   # encoders re-read under `poolings` on every pair of every set (Table 1)

    CHAPTER: ClassVar[str] = "sts"
    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {
        "ci": dict(max_pairs=150, lsds_points=300, tsne_pairs=40, alphas=(-0.2, -0.6, -1.0), bootstrap=200,
                   extra_models=(), plant_sizes=(0.0, 1.0, 4.0), cdf_pairs=100, source="auto", draws=2,
                   plant_directions=3),
        # the book's own MLM BERT (the queries-and-keys chapter's pretraining, scripts/export_book_model.py)
        # SmolLM2 re-read under both poolings on 3 subsample draws (its readings: ~20 CPU-minutes); Table 1 on every
        # pair: all-mpnet-base-v2 (BERT-base's size, contrastive) is read there only (~40 CPU-minutes)
        "book": dict(extra_models=("SmolLM2-135M-Instruct", "book-mlm-bert"), reading_pairs=400,
                     reread_extras=("book-mlm-bert", "SmolLM2-135M-Instruct"), extra_draws=3,
                     full_readings=("all-MiniLM-L6-v2", "SmolLM2-135M-Instruct", "book-mlm-bert",
                                    "all-mpnet-base-v2")),
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
        poolings=(lambda v: len(v) > 0, "needs at least one pooling"), draws=positive, extra_draws=positive,
        reading_pairs=nonneg,
        plant_directions=(lambda v: v >= 2, "needs >= 2 directions (an interval across them)"),
    )


#: SoftDecay − each whitening variant gets a paired bootstrap with the transforms refitted on every resample
REFIT_METHODS = ("whitening", "whitening-256", "SoftDecay (sentence)")


def refit_draws(p: Params) -> int:
    """Refitted bootstrap draws per set: a tenth of `bootstrap`, at least 20 (each draw refits three
    transforms; 100 at book scale)."""
    return refit_draws_n(p.bootstrap)


def refit_draws_n(bootstrap: int) -> int:
    return max(20, bootstrap // 10)


def reading_bootstrap(p) -> int:
    """Paired bootstrap draws (transforms fitted once) of the readings: a fifth of `bootstrap`, at least 20
    (`p`: the Params, or a Result, which carries its run's `bootstrap`)."""
    return max(20, p.bootstrap // 5)


#: what the readings score under every pooling: the paper's rows, de-escalation and the two flip-free SoftDecay
#: variants (token-level SoftDecay is in the main runs)
READING_METHODS = ("vanilla", "whitening", "whitening-256", "de-escalation", "SoftDecay (sentence)", *FLIP_FREE)
#: the Params fields only the readings use (dropped from the other runs' cache keys)
_READING_FIELDS = ("paper_pooling", "poolings", "draws", "extra_draws", "plant_directions", "reading_pairs",
                   "reread_extras", "full_readings")
#: the Params fields the readings do not use
_NOT_READINGS = ("models", "extra_models", "extra_pooling", "extra_max_pairs", "max_pairs", "pooling", "tsne_pairs",
                 "alphas", "cdf_pairs", "draws", "extra_draws", "reading_pairs", "reread_extras",
                 "full_readings")
#: how each pooling is named in tables: the authors' two readings and the mechanism test's
POOLING_LABEL = {"first_last_l1": "layers 1 + L", "first_last": "embeddings + layer L", "last": "layer L",
                 "cls": "[CLS]"}
PLANT_METHODS = ("vanilla", "whitening", "de-escalation", "SoftDecay (sentence)", "SoftDecay (σ/√N)")
#: how the cross-fitted interval of whitening − SoftDecay is made, as a finding says it
CROSSFIT_HOW = ("cross-fitted: each pair scored by transforms fitted on the other half, 20 random splits, pairs "
                "resampled within each")
#: why the contrastive encoders lie outside the scope of Table 1's and Table 4's claims
CONTRASTIVE_SCOPE = ("a contrastive sentence encoder, trained to spread sentence embeddings apart; the claim is about "
                     "raw pre-trained language models used without training")
#: each encoder's short name among a claim's tests
LABEL = {"book-mlm-bert": "book MLM BERT", "all-MiniLM-L6-v2": "MiniLM", "SmolLM2-135M-Instruct": "SmolLM2",
         "all-mpnet-base-v2": "mpnet"}
#: the anisotropic encoders of the mechanism test, by the names the findings read them under
BOOK_BERT = "book-mlm-bert"
SMOL = "SmolLM2-135M-Instruct"
#: the BERT-base-width encoder, read on every pair only (`full_readings`): a contrastive sentence encoder
MPNET = "all-mpnet-base-v2"
#: the finding keys, by the tag `Result.findings` gives each encoder ("bert": the book's MLM BERT, "minilm": the
#: first of `models`, "smollm2", "mpnet") and, for Table 4, the measure ("ev1", "rbf", "tokenuni")
GAIN_KEYS = {"bert": "sts-gain-bert", "minilm": "sts-gain-minilm", "smollm2": "sts-gain-smollm2",
             "mpnet": "sts-gain-mpnet"}
WHITENING_KEYS = {"bert": "sts-vs-whitening-bert", "minilm": "sts-vs-whitening-minilm",
                  "smollm2": "sts-vs-whitening-smollm2", "mpnet": "sts-vs-whitening-mpnet"}
TABLE4_KEYS = {("ev1", "bert"): "sts-ev1-bert", ("ev1", "minilm"): "sts-ev1-minilm",
               ("ev1", "smollm2"): "sts-ev1-smollm2", ("rbf", "bert"): "sts-rbf-bert",
               ("rbf", "minilm"): "sts-rbf-minilm", ("rbf", "smollm2"): "sts-rbf-smollm2",
               ("tokenuni", "bert"): "sts-tokenuni-bert", ("tokenuni", "minilm"): "sts-tokenuni-minilm",
               ("tokenuni", "smollm2"): "sts-tokenuni-smollm2"}
CONTROL_KEYS = {"ev1": "sts-control-ev1", "rbf": "sts-control-rbf", "tokenuni": "sts-control-tokenuni"}
#: what an encoder is, where a finding names it in place of BERT-base-cased (`hf.models.DESCRIPTIONS`, short)
KIND_TEXT = {MPNET: "a contrastive sentence encoder of BERT-base's size, not a raw MLM"}
#: its size, where a finding says what was measured
SIZE_TEXT = {MPNET: "12 layers × 768, 109.5M parameters"}
#: how each pooling is said in a finding
POOLING_TEXT = {"first_last": "mean over tokens of (h₀ + h_L)/2",
                "first_last_l1": "mean over tokens of (h₁ + h_L)/2, the authors' script's layers 1 and L",
                "last": "mean over tokens of the last layer", "cls": "the last layer's [CLS]"}
#: the paper's name for each of its models in data/yan_2022_table1.csv
PAPER_BERT = "bert-base-cased"
#: what reruns a part of the chapter that a scale did not run
COMMANDS = {"book": "make rerun CHAPTER=sts SCALE=book", "paper": "make rerun CHAPTER=sts SCALE=paper"}


@dataclass
class Result(results.Result):
    """Everything the chapter shows. `runs[model]` holds, per dataset: `scores[protocol]` (Spearman
    ×100 per method under `subset-mean`, the paper's protocol, and `pooled`), `ci[protocol]`
    ([difference, low, high] of each method against vanilla, paired bootstrap, 95 %), `avg_ci`
    (the same for the mean over the sets), `alpha_sweep`, `table4` (EV1, RBF_dis, TokenUni of vanilla
    / whitening / SoftDecay), `control` (the same metrics of shuffled and Gaussian sets before and
    after SoftDecay), `lsds` (normalised and eq.-6 weights, identity beside), `flips` (sign-flipped
    directions), `planted` (scores under planted anisotropy), `pairs`, `subsets`; `cdf` (per-layer
    singular values, STS-B). `maps` (`maps`) holds the t-SNE maps of the first model's sets, each drawn from
    the set as scored, with that set's measures. `extras` holds the anisotropic encoders' runs (same
    layout, fewer pairs). `averages[model][protocol][method]` is the
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
    paper_table1: list[dict] = field(default_factory=list)
    paper_table4: list[dict] = field(default_factory=list)
    encoder_demo: dict = field(default_factory=dict)
    bootstrap: int = 0
    max_pairs: int = 0
    extra_max_pairs: int = 0
    readings: dict[str, dict] = field(default_factory=dict)
    unavailable: dict[str, str] = field(default_factory=dict)
    paper_pooling: str = "first_last_l1"
    poolings: list[str] = field(default_factory=list)
    plant_directions: int = 0
    reading_pairs: int = 0
    maps: dict = field(default_factory=dict)
    #: encoder -> `readings` on every pair of every set (one draw; no planted experiment)
    full_readings: dict = field(default_factory=dict)
    #: encoder -> `samefit`: whitening − SoftDecay under half-sampling and cross-fitting
    samefit: dict = field(default_factory=dict)

    # --- reading the runs -------------------------------------------------------------------------

    def all_runs(self) -> dict[str, dict]:
        """Every encoder's run: the main models, then the anisotropic ones."""
        return {**self.runs, **self.extras}

    def pairs(self, model: str) -> int:
        return int(sum(self.all_runs()[model]["pairs"].values()))

    def vs_raw(self, model: str, method: str, protocol: str = "subset-mean", dataset: str | None = None) -> Interval:
        """`method` − raw model, Spearman ×100 (the mean over the sets, or one set), with its 95 % paired
        bootstrap interval (pairs resampled within each subset; the transforms as fitted on the full set)."""
        run = self.all_runs()[model]
        d, lo, hi = run["avg_ci"][protocol][method] if dataset is None else run["ci"][protocol][dataset][method]
        return Interval(d, lo, hi, self.bootstrap or 1, "bootstrap")

    def set_scores(self, model: str, method: str, protocol: str = "subset-mean") -> np.ndarray:
        """`method`'s Spearman ×100 on each set, in `datasets` order."""
        s = self.all_runs()[model]["scores"][protocol]
        return np.array([np.nan if s[d].get(method) is None else s[d][method] for d in self.datasets], dtype=float)

    def across_sets(self, model: str, a: str, b: str, protocol: str = "subset-mean") -> Interval:
        """Method `a` − method `b` on each set, as the mean over the sets with its Student-t interval
        (the seven sets the unit: does the ordering hold from one STS set to the next?)."""
        return t_interval(self.set_scores(model, a, protocol) - self.set_scores(model, b, protocol))

    def significant(self, model: str, protocol: str = "subset-mean") -> dict[str, dict[str, int]]:
        """Per method: on how many sets its interval against the raw model lies above 0 (`up`), below 0
        (`down`)."""
        out: dict[str, dict[str, int]] = {}
        for rows in self.all_runs()[model]["ci"][protocol].values():
            for m, (_, lo, hi) in rows.items():
                c = out.setdefault(m, {"up": 0, "down": 0})
                c["up"] += int(lo > 0)
                c["down"] += int(hi < 0)
        return out

    def mean_metric(self, model: str, method: str, metric: str = "EV1") -> float:
        """Table 4's `metric` of `method` ("vanilla", "whitening", "SoftDecay"), mean over the sets."""
        t4 = self.all_runs()[model]["table4"]
        return float(np.mean([t[method][metric] for t in t4.values()])) if t4 else float("nan")

    def metric_change(self, model: str, metric: str = "EV1") -> Interval:
        """SoftDecay's change of a Table 4 metric (after − before) per set, mean with its t-interval."""
        t4 = self.all_runs()[model]["table4"]
        return t_interval([t4[d]["SoftDecay"][metric] - t4[d]["vanilla"][metric] for d in self.datasets])

    def control_gap(self, model: str, metric: str = "EV1", kind: str = "gaussian") -> Interval:
        """Table 4's control: `metric` after SoftDecay of a structureless set (`kind`: "gaussian", "shuffled") −
        after SoftDecay of the sentence embeddings, per set, mean with its t-interval over the sets."""
        run = self.all_runs()[model]
        return t_interval([run["control"][d][kind]["after"][metric] - run["table4"][d]["SoftDecay"][metric]
                           for d in self.datasets if d in run["control"]])

    def lsds_gap(self, model: str, weights: str = "normalised") -> Interval:
        """LSDS of SoftDecay − LSDS of whitening per set (k = 12; `weights` "normalised" or "eq. 6"),
        mean with its t-interval over the sets."""
        ls = self.all_runs()[model]["lsds"]
        return t_interval([ls[d][f"SoftDecay ({weights})"] - ls[d][f"whitening ({weights})"] for d in ls])

    def lsds_count(self, model: str, weights: str = "normalised") -> int:
        """On how many sets SoftDecay has the lower LSDS than whitening."""
        ls = self.all_runs()[model]["lsds"]
        return int(sum(v[f"SoftDecay ({weights})"] < v[f"whitening ({weights})"] for v in ls.values()))

    def alpha_scores(self, model: str) -> pd.DataFrame:
        """The α sweep: Spearman ×100 of sentence-level SoftDecay per α (rows) and set (columns)."""
        sweep = self.all_runs()[model]["alpha_sweep"]
        df = pd.DataFrame({d: {float(a): v for a, v in sweep[d].items()} for d in self.datasets})
        df.index.name = "α"
        return df.sort_index(ascending=False)

    def alpha_effect(self, model: str) -> Interval:
        """The α grid's two ends: score at the least negative α − score at the most negative, per set,
        mean with its t-interval over the sets."""
        df = self.alpha_scores(model)
        return t_interval(df.loc[df.index.max()].to_numpy() - df.loc[df.index.min()].to_numpy())

    def flips(self, model: str) -> pd.DataFrame:
        """Per set: SoftDecay's sign-flipped directions (σ, σ/√N, σ/σ_max below |α|) summed over the two
        sentence matrices, their summed rank and the smallest and largest live singular value."""
        df = pd.DataFrame(self.all_runs()[model]["flips"]).T.loc[self.datasets]
        df.index.name = "set"
        return df

    def planted(self, kind: str) -> pd.DataFrame:
        """Mean over the sets of each method's score (paper protocol) per planted size (first model)."""
        pl = self.runs[self.models[0]]["planted"]
        df = pd.DataFrame({m: np.mean([pl[d][kind][m] for d in pl], 0) for m in PLANT_METHODS},
                          index=self.plant_sizes)
        df.index.name = "planted size (× RMS norm)"
        return df

    def recovered(self, kind: str, method: str) -> float:
        """The fraction of the raw score lost at the largest planted size that `method` keeps."""
        df = self.planted(kind)
        lost = float(df["vanilla"].iloc[0] - df["vanilla"].iloc[-1])
        return float(df[method].iloc[-1] - df["vanilla"].iloc[-1]) / lost if lost > 0 else float("nan")

    def drop_one_set(self, model: str, method: str, dataset: str) -> float:
        """`method` − raw, mean over the sets other than `dataset` (what the rest of the sets say)."""
        keep = [i for i, d in enumerate(self.datasets) if d != dataset]
        diff = self.set_scores(model, method) - self.set_scores(model, "vanilla")
        return float(np.mean(diff[keep]))

    # --- the readings: every encoder under each pooling, from one encoding ------------------------

    def read(self, model: str) -> dict | None:
        """`model`'s readings (None when they were not run: a model not on this machine)."""
        return self.readings.get(model)

    def reading_scores(self, model: str, pooling: str | None = None, draw: int = 0) -> pd.DataFrame:
        """Spearman ×100 (paper protocol) of each `READING_METHODS` row (columns) on each set (rows)."""
        s = self.readings[model]["draws"][draw]["scores"][pooling or self.paper_pooling]
        df = pd.DataFrame(s).T.loc[self.datasets]
        df.index.name = "set"
        return df

    def reading_avg(self, model: str, method: str, pooling: str | None = None, draw: int = 0) -> float:
        """`method`'s Table 1 Avg (mean over the sets) under `pooling` (default: the paper-comparison one)."""
        return float(self.reading_scores(model, pooling, draw)[method].mean())

    def reading_vs_raw(self, model: str, method: str, pooling: str | None = None) -> Interval:
        """`method` − raw, mean over the sets, with its 95 % paired bootstrap interval (transforms fitted
        once on the full set; draw 0)."""
        d, lo, hi = self.readings[model]["ci"][pooling or self.paper_pooling][method]
        return Interval(d, lo, hi, reading_bootstrap(self), "bootstrap")

    def reading_diffs(self, model: str, method: str, pooling: str | None = None) -> pd.Series:
        """`method` − raw on each set (draw 0): what drives the mean."""
        df = self.reading_scores(model, pooling)
        return df[method] - df["vanilla"]

    def reading_rest(self, model: str, method: str, dataset: str, pooling: str | None = None) -> float:
        """`method` − raw, mean over the sets other than `dataset`."""
        return float(self.reading_diffs(model, method, pooling).drop(dataset).mean())

    def white_minus_sd(self, model: str, whitening: str = "whitening",
                       pooling: str | None = None) -> tuple[Interval, str]:
        """whitening − SoftDecay (mean over the sets, Spearman ×100) under a procedure whose estimate and interval
        come from the same fits, and how it was made: cross-fitting where the encoder's same-fit run exists
        (`samefit`), else the encoder's subsample draws, each fitted on its own pairs (Student-t over the draws),
        else — one draw only — the paired bootstrap that refits both transforms on every resample (its resamples
        repeat pairs, which handicaps whitening: `refit_shift`). For an encoder without readings the committed
        run's per-set differences give a Student-t interval over the sets."""
        q = pooling or self.paper_pooling
        same = self.samefit.get(model)
        if same is not None and q == same["pooling"]:
            return self.samefit_iv(model, whitening, "crossfit"), CROSSFIT_HOW
        rd = self.read(model)
        if rd is not None and self.n_draws(model) > 1:
            return (self.over_draws(model, whitening, "SoftDecay (sentence)", q),
                    f"subsamples of {self._per_reading(model)} pairs per set without replacement, each fitted on its "
                    f"own pairs; Student-t over {self.n_draws(model)} draws")
        if rd is not None:
            d, lo, hi = rd["refit"][q][whitening]
            return (Interval(d, lo, hi, refit_draws_n(self.bootstrap), "bootstrap"),
                    "paired bootstrap, both transforms refitted on every resample (resamples repeat pairs)")
        return self.across_sets(model, whitening, "SoftDecay (sentence)"), "t-interval over the seven sets"

    def samefit_iv(self, model: str, whitening: str = "whitening", how: str = "crossfit") -> Interval:
        """whitening − SoftDecay from `model`'s same-fit run: "crossfit" (every pair scored by transforms fitted
        on the other half) or "halfsample" (transforms fitted on each half-sample without replacement)."""
        d, lo, hi = self.samefit[model][how][whitening]
        st = self.samefit[model]["settings"]
        n = st["splits"] * st["split_boot"] if how == "crossfit" else st["halves"]
        return Interval(d, lo, hi, n, "cross-fit" if how == "crossfit" else "subsample")

    def fullfit_white_minus_sd(self, model: str, whitening: str = "whitening") -> float:
        """whitening − SoftDecay with both transforms fitted once on every pair (the paper's point estimate; no
        interval of its own)."""
        return float(self.samefit[model]["fullfit"][whitening])

    def _per_reading(self, model: str) -> int:
        return self.extra_max_pairs if model in self.extras else self.reading_pairs

    def refit_shift(self, model: str, whitening: str = "whitening", pooling: str | None = None) -> float:
        """How far the refitted draws of whitening − SoftDecay sit from the full-set estimate (the midpoint of
        their interval minus the estimate; `core.sts.recentre` removes it)."""
        d, lo, hi = self.readings[model]["refit"][pooling or self.paper_pooling][whitening]
        return (lo + hi) / 2 - d

    def white_sd_comparisons(self) -> list[dict]:
        """whitening − SoftDecay per encoder and whitening variant (SmolLM2: the full and the 256-direction
        whitening, each on its own): the interval, how it was made, the verdict on the paper's ordering
        (SoftDecay ahead) and on 'alike within ±`match_margin`'. `key`: the finding it is (None: shown in
        the chapter's table only)."""
        first = self.models[0]
        bert = BOOK_BERT if BOOK_BERT in self.extras else None
        smol = SMOL if SMOL in self.extras else None
        out = []
        for tag, model, white in (("minilm", first, "whitening"), ("smollm2", smol, "whitening"),
                                  (None, smol, "whitening-256"), ("bert", bert, "whitening")):
            key = finding_key(WHITENING_KEYS, tag, "sts.WHITENING_KEYS") if tag else None
            effect, how = self.white_minus_sd(model, white) if model else (None, "")
            reread = model is not None and self.read(model) is not None
            pooled = self.paper_pooling if reread else (self.extra_pooling if model in self.extras else self.pooling)
            what = "whitening" if white == "whitening" else "whitening kept to its first 256 directions"
            out.append({
                "key": key, "model": model, "whitening": white, "effect": effect, "how": how,
                "measured": self._encoder_text(model, pooled if reread else None) if model else "not run at this scale",
                "quantity": f"{what} − SoftDecay, Spearman ×100, mean over the sets ({how or 'not run'})",
                "verdict": verdict_of(effect, "below") if effect is not None else "",
                "likeness": verdict_of(effect, "equal", margin=self.match_margin()) if effect is not None else ""})
        return out

    def white_sd_procedures(self) -> list[dict]:
        """whitening − SoftDecay (full whitening, mean over the sets) per encoder under every procedure this scale
        ran: cross-fitted and half-sampled (`samefit`, same fits for estimate and interval), over subsample draws
        each fitted on its own pairs, the paired bootstrap that refits on every resample (its resamples repeat
        pairs: shown, never deciding), and the transforms fitted once on all pairs (a point). Each: encoder,
        procedure, Interval (or a bare point), whether a finding reads it."""
        out = []
        for model in [*dict.fromkeys([BOOK_BERT, SMOL, self.models[0], *self.full_readings])]:
            if model in self.samefit:
                n = sum(self.samefit[model]["pairs"].values())
                out += [{"encoder": model, "procedure": f"cross-fitted, {n:,} pairs", "effect": self.samefit_iv(model),
                         "decides": True},
                        {"encoder": model, "procedure": f"half-samples without replacement, {n:,} pairs",
                         "effect": self.samefit_iv(model, how="halfsample"), "decides": True},
                        {"encoder": model, "procedure": f"fitted once on all {n:,} pairs (a point)",
                         "effect": Interval(self.fullfit_white_minus_sd(model), math.nan, math.nan, 1, "t"),
                         "decides": False}]
            if self.read(model) is not None:
                k = self.n_draws(model)
                if k > 1:
                    what = f"{k} subsamples of {self._per_reading(model)} pairs per set, each fitted on its own pairs"
                    out.append({"encoder": model, "procedure": what, "decides": model not in self.samefit,
                                "effect": self.over_draws(model, "whitening", "SoftDecay (sentence)")})
                d, lo, hi = self.readings[model]["refit"][self.paper_pooling]["whitening"]
                out.append({"encoder": model, "procedure": "bootstrap refitted on every resample (repeats pairs)",
                            "effect": Interval(d, lo, hi, refit_draws_n(self.bootstrap), "bootstrap"),
                            "decides": False})
        return out

    def match_margin(self) -> float:
        """What 'whitening matches SoftDecay' allows: the smallest SoftDecay − WhiteBERT gap the paper
        reports as a win over its four PTLMs (Table 1 Avg)."""
        models = {r["model"] for r in self.paper_table1}
        gaps = [self.paper_value("SoftDecay", m, "WhiteBERT") for m in models
                if {"SoftDecay", "WhiteBERT"} <= {r["method"] for r in self.paper_table1 if r["model"] == m}]
        return float(min(gaps))

    def likeness(self, model: str, whitening: str = "whitening", pooling: str | None = None) -> str:
        """The verdict on 'whitening matches SoftDecay' (within ±`match_margin`) from the refitted interval."""
        return verdict_of(self.white_minus_sd(model, whitening, pooling)[0], "equal", margin=self.match_margin())

    def n_draws(self, model: str) -> int:
        return len(self.readings[model]["draws"])

    def over_draws(self, model: str, method: str, against: str = "vanilla", pooling: str | None = None) -> Interval:
        """`method` − `against` (mean over the sets) on each subsample draw, as the mean over the draws
        with its Student-t interval: does it hold from one draw of pairs to the next?"""
        vals = [self.reading_avg(model, method, pooling, d) - self.reading_avg(model, against, pooling, d)
                for d in range(self.n_draws(model))]
        return t_interval(vals)

    def flip_counts(self, model: str, pooling: str | None = None) -> pd.DataFrame:
        """Per set: the directions SoftDecay and its flip-free variants turn around (`core.sts.count_flips`,
        both sentence matrices), the largest count over the draws, and the live directions."""
        q = pooling or self.paper_pooling
        draws = self.readings[model]["draws"]
        df = pd.DataFrame({d: {m: max(dr["flips"][q][d][m] for dr in draws)
                               for m in ("SoftDecay (sentence)", *FLIP_FREE, "directions")}
                           for d in self.datasets}).T
        df.index.name = "set"
        return df

    def anisotropy(self, model: str, measure: str = "EV1", pooling: str | None = None) -> float:
        """Mean over the sets of EV₁, EV₁ after whitening, EV₁ of the centred rows or the mean's share."""
        a = self.readings[model]["anisotropy"][pooling or self.paper_pooling]
        return float(np.mean([a[d][measure] for d in self.datasets]))

    def planted_dirs(self, kind: str, method: str) -> np.ndarray:
        """(sizes, directions) mean-over-sets scores of the planted experiment (first model, paper pooling)."""
        return np.asarray(self.readings[self.models[0]]["planted"][kind][method], float)

    def planted_mean(self, kind: str) -> pd.DataFrame:
        """Mean over the directions of each method's score, without a plant and at the largest size."""
        df = pd.DataFrame({m: self.planted_dirs(kind, m).mean(1) for m in PLANT_METHODS},
                          index=[0.0, max(self.plant_sizes)])
        df.index.name = "planted size (× RMS norm)"
        return df

    def recovered_iv(self, kind: str, method: str) -> Interval:
        """The share of the raw score lost at the largest planted size that `method` wins back, per random
        direction, as the mean with its Student-t interval over the directions."""
        raw, m = self.planted_dirs(kind, "vanilla"), self.planted_dirs(kind, method)
        return t_interval((m[-1] - raw[-1]) / (raw[0] - raw[-1]))

    def planted_change(self, kind: str, method: str) -> Interval:
        """`method` − raw at the largest planted size, per direction: mean with its t-interval."""
        return t_interval(self.planted_dirs(kind, method)[-1] - self.planted_dirs(kind, "vanilla")[-1])

    def lsds_readings(self) -> pd.DataFrame:
        """LSDS of SoftDecay − LSDS of whitening per set under the three readings of eq. (6) (first model,
        paper pooling): negative means SoftDecay keeps neighbourhoods better."""
        ls = self.readings[self.models[0]].get("lsds", {})
        df = pd.DataFrame({w: {d: ls[d][f"SoftDecay ({w})"] - ls[d][f"whitening ({w})"] for d in ls}
                           for w in ("normalised", "eq. 6", "authors")})
        df.index.name = "set"
        return df

    def lsds_reading_gap(self, weights: str = "authors") -> Interval:
        """LSDS of SoftDecay − of whitening under one reading, mean with its t-interval over the sets."""
        return t_interval(self.lsds_readings()[weights].to_numpy())

    def paper_value(self, method: str, model: str = PAPER_BERT, against: str | None = "vanilla") -> float:
        """The paper's Table 1 Avg of `method` for `model` (data/yan_2022_table1.csv), minus `against`'s."""
        avg = {r["method"]: float(r["Avg"]) for r in self.paper_table1 if r["model"] == model}
        return avg[method] - (avg[against] if against else 0.0)

    def paper_table4_value(self, dataset: str, metric: str, column: str) -> float:
        """One cell of the paper's Table 4 as printed (data/yan_2022_table4.csv); NaN when absent."""
        for r in self.paper_table4:
            if r["dataset"] == dataset and r["metric"] == metric:
                return float(r.get(column, np.nan))
        return float("nan")

    # --- Table 1 on every pair (`full_readings`) ------------------------------------------------------

    def full_scores(self, model: str, pooling: str | None = None) -> pd.DataFrame:
        """Spearman ×100 (paper protocol) of each `READING_METHODS` row (columns) on each set (rows), on every
        pair of the set, under `pooling` (default: the paper-comparison one)."""
        s = self.full_readings[model]["draws"][0]["scores"][pooling or self.paper_pooling]
        df = pd.DataFrame(s).T.loc[self.datasets]
        df.index.name = "set"
        return df

    def full_vs_raw(self, model: str, method: str = "SoftDecay (sentence)", pooling: str | None = None) -> Interval:
        """`method` − raw on every pair, mean over the sets, with its 95 % paired bootstrap interval (transforms
        fitted once on the full set)."""
        d, lo, hi = self.full_readings[model]["ci"][pooling or self.paper_pooling][method]
        return Interval(d, lo, hi, reading_bootstrap(self), "bootstrap")

    def full_white_minus_sd(self, model: str, whitening: str = "whitening") -> Interval | None:
        """whitening − SoftDecay on every pair under the paper-comparison pooling, mean over the sets, cross-fitted
        (`samefit_iv`); None when the encoder's same-fit run is not here."""
        return self.samefit_iv(model, whitening) if model in self.samefit else None

    def full_pairs(self, model: str) -> int:
        return int(sum(self.full_readings[model]["draws"][0]["pairs"].values()))

    def full_only(self) -> list[str]:
        """The encoders read on every pair and nowhere else (no subsample re-reading): all-mpnet-base-v2."""
        return [m for m in self.full_readings if self.read(m) is None]

    def full_flip_counts(self, model: str, pooling: str | None = None) -> pd.DataFrame:
        """Per set, on every pair: the directions SoftDecay and its flip-free variants turn around
        (`core.sts.count_flips`, both sentence matrices) and the live directions."""
        fl = self.full_readings[model]["draws"][0]["flips"][pooling or self.paper_pooling]
        df = pd.DataFrame({d: {m: fl[d][m] for m in ("SoftDecay (sentence)", *FLIP_FREE, "directions")}
                           for d in self.datasets}).T
        df.index.name = "set"
        return df

    def full_anisotropy(self, model: str, measure: str = "EV1", pooling: str | None = None) -> float:
        """`anisotropy` on every pair: the mean over the sets of EV₁, EV₁ after whitening, EV₁ of the centred rows
        or the mean's share."""
        a = self.full_readings[model]["anisotropy"][pooling or self.paper_pooling]
        return float(np.mean([a[d][measure] for d in self.datasets]))

    def paper_table4_change(self, metric: str, model: str = "BERT") -> float:
        """The paper's Table 4: `model`+SoftDecay − `model` for `metric`, mean over the sets as printed, leaving
        out a cell whose SoftDecay value is not below the raw one for EV₁ or TokenUni (STS14's EV₁, evidently
        transposed: `data/README.md`)."""
        diffs = []
        for r in self.paper_table4:
            if r["metric"] != metric:
                continue
            before, after = float(r[model]), float(r[f"{model}+SoftDecay"])
            if metric != "RBF_dis" and after >= before:
                continue
            diffs.append(after - before)
        return float(np.mean(diffs)) if diffs else float("nan")

    # --- findings ---------------------------------------------------------------------------------

    def _scale_text(self, model: str) -> str:
        """'book: SmolLM2-135M-Instruct on 2,800 of the 18,850 pairs the paper scores' (the total known when the
        first model ran every pair); the encoder is named, as several findings share one claim."""
        n, first = self.pairs(model), self.models[0]
        if self.max_pairs == 0 and set(self.runs[first]["pairs"]) == set(self.all_runs()[model]["pairs"]):
            total = self.pairs(first)
            return f"{self.scale}: {model} on " + ("every pair, as the paper" if n == total else
                                                   f"{n:,} of the {total:,} pairs the paper scores")
        return f"{self.scale}: {model} on {n:,} pairs ({len(self.datasets)} sets)"

    def _reading_scale_text(self, model: str) -> str:
        """The scale of a finding read from `model`'s re-reading: its pairs per set and subsample draws (the
        main run's `_scale_text` when the model was not re-read on a subsample)."""
        per = self.extra_max_pairs if model in self.extras else (self.reading_pairs or self.max_pairs)
        if self.read(model) is None or not per:
            return self._scale_text(model)
        n = self.n_draws(model)
        return f"{self.scale}: {model} on {per:,} pairs per set" + (f", {n} subsample draws" if n > 1 else "")

    def _encoder_text(self, model: str, pooling: str | None = None) -> str:
        """What was run for `model`: its main run, or with `pooling` its re-reading (`readings`)."""
        sets = len(self.all_runs()[model]["pairs"])
        per = self.extra_max_pairs if model in self.extras else self.max_pairs
        if pooling is not None and self.read(model) is not None and model not in self.extras:
            per = self.reading_pairs
        sub = f"{per} pairs per set" if per else "every pair"
        pooling = pooling or (self.extra_pooling if model in self.extras else self.pooling)
        return f"{model}, {sets} STS sets ({sub}), {POOLING_TEXT[pooling]}, α = {self.alpha}"

    def _reduced(self, model: str, per: int = 0, draws: int = 1) -> str:
        """A finding's setting phrase: the encoder in place of the paper's BERT-base-cased, and the subsample
        ("" for BERT-base-cased on every pair, the paper's setting)."""
        what = f" ({KIND_TEXT[model]})" if model in KIND_TEXT else ""
        parts = [] if model == PAPER_BERT else [f"on {model}{what} in place of BERT-base-cased"]
        if per:
            parts.append(f"{per:,} pairs per set" + (f", {draws} subsample draws" if draws > 1 else ""))
        return ", ".join(parts)

    def _per(self, model: str) -> int:
        """Pairs per set of `model`'s main run (0: every pair)."""
        return self.extra_max_pairs if model in self.extras else self.max_pairs

    def _full_text(self, model: str) -> str:
        return (f"{model}, {len(self.datasets)} STS sets (every pair, {self.full_pairs(model):,}), "
                f"{POOLING_TEXT[self.paper_pooling]}, α = {self.alpha}")

    def _table1_gain(self, model: str, method: str = "SoftDecay (sentence)") -> tuple[Interval, str, str, str]:
        """`method` − raw for Table 1 on `model`, read from the closest reading there is: every pair
        (`full_readings`), else the re-reading under the paper-comparison pooling (over its draws), else the
        main run. Returns (effect, measured, how the interval was made, reduced)."""
        if model in self.full_readings:
            return (self.full_vs_raw(model, method), self._full_text(model), "paired bootstrap over the pairs",
                    self._reduced(model))
        if self.read(model) is not None:
            n = self.n_draws(model)
            per = self.extra_max_pairs if model in self.extras else self.reading_pairs
            eff = self.over_draws(model, method) if n > 1 else self.reading_vs_raw(model, method)
            how = f"Student-t over {n} subsample draws" if n > 1 else "paired bootstrap over the pairs"
            return eff, self._encoder_text(model, self.paper_pooling), how, self._reduced(model, per, n)
        return (self.vs_raw(model, method), self._encoder_text(model), "paired bootstrap over the pairs",
                self._reduced(model, self._per(model)))

    def _table1_white(self, model: str) -> tuple[Interval, str, str, str, tuple, str]:
        """whitening − SoftDecay for Table 1 on `model`: cross-fitted, with the half-sampling procedure as its
        alternative, where the encoder's same-fit run exists; else as `white_minus_sd` (one procedure). Returns
        (effect, measured, how the interval was made, reduced, alternatives, caveat)."""
        if model in self.samefit:
            pairs = sum(self.samefit[model]["pairs"].values())
            full = model in self.full_readings and pairs == self.full_pairs(model)
            measured = self._full_text(model) if full else self._encoder_text(model, self.paper_pooling)
            per = 0 if full else self._per_reading(model) or self.max_pairs
            alt = (("half-samples without replacement", self.samefit_iv(model, how="halfsample")),)
            caveat = (f"transforms fitted once on all {pairs:,} pairs (the paper's estimate, no interval of its own): "
                      f"{self.fullfit_white_minus_sd(model):+.2f}")
            return self.samefit_iv(model), measured, CROSSFIT_HOW, self._reduced(model, per), alt, caveat
        effect, how = self.white_minus_sd(model)
        caveat = ("one procedure only: the cross-fitted reading needs the encoder's sentence embeddings"
                  + (", hence its weights (`python scripts/export_book_model.py --train`)" if model == BOOK_BERT
                     else ""))
        if self.read(model) is not None:
            return (effect, self._encoder_text(model, self.paper_pooling), how,
                    self._reduced(model, self._per_reading(model), self.n_draws(model)), (), caveat)
        return effect, self._encoder_text(model), how, self._reduced(model, self._per(model)), (), caveat

    def _standin(self, model: str) -> str:
        """How far `model` is from BERT-base-cased on the baseline the paper reports (Table 1's raw Avg), under
        the reading its Table 1 findings use."""
        if model in self.full_readings:
            raw = float(self.full_scores(model)["vanilla"].mean())
        elif self.read(model) is not None:
            raw = float(np.mean([self.reading_avg(model, "vanilla", None, d) for d in range(self.n_draws(model))]))
        else:
            raw = self.averages[model]["subset-mean"]["vanilla"]
        return (f"raw STS {raw:.2f} against BERT-base-cased's {self.paper_value('vanilla', against=None):.2f} "
                "(Table 1 Avg)")

    def _standin_t4(self, model: str, metric: str, name: str) -> str:
        """How far `model`'s raw embeddings are from the paper's BERT on a Table 4 measure."""
        paper = np.mean([float(r["BERT"]) for r in self.paper_table4 if r["metric"] == metric])
        return f"raw {name} {self.mean_metric(model, 'vanilla', metric):.3f} against BERT's {paper:.3f} (Table 4)"

    def findings(self) -> list[Finding]:
        """The paper's claims this chapter tests, each computed from the runs (verdict by the one rule). Per
        claim the encoder closest to the paper's BERT-base-cased comes first (the book's MLM BERT, as
        anisotropic), then MiniLM and SmolLM2, then all-mpnet-base-v2 (read on every pair only: a contrastive
        sentence encoder of BERT-base's size); Table 1 is read on every pair where that was run."""
        common = dict(paper="yan2022", chapter="sts")
        first = self.models[0]
        bert = BOOK_BERT if BOOK_BERT in self.extras else None
        smol = SMOL if SMOL in self.extras else None
        out: list[Finding] = []
        rerun = dict(needs="the book preset's anisotropic encoders (a run of this scale did not include them)",
                     command=COMMANDS["book"])
        raw, sd, wb = (self.paper_value(m, against=None) for m in ("vanilla", "SoftDecay", "WhiteBERT"))
        encoders = [("bert", bert or BOOK_BERT), ("minilm", first), ("smollm2", smol or SMOL)]
        ran = set(self.all_runs())
        # Table 1 also on the encoders read on every pair only, listed after the others (the first listed decides)
        table1 = [*encoders, ("mpnet", MPNET)]
        ran1 = ran | set(self.full_readings)
        unread = {MPNET: dict(needs=f"{MPNET} read on every pair of the seven sets (the book preset's "
                                    "full_readings; about forty CPU-minutes)", command=COMMANDS["book"])}
        claim_gain = ("SoftDecay applied without training to a pretrained encoder's sentence embeddings raises "
                      f"unsupervised STS: BERT-base-cased from {raw:.2f} to {sd:.2f} average Spearman ×100")
        for tag, model in table1:
            if model not in ran1:
                out.append(Finding(key=finding_key(GAIN_KEYS, tag, "sts.GAIN_KEYS"), where="Table 1", claim=claim_gain,
                                   claim_id="yan-table1-gain", measured="not run at this scale",
                                   label=LABEL.get(model, model), members=(model,),
                                   out_of_scope=CONTRASTIVE_SCOPE if model in (first, MPNET) else "",
                                   quantity="SoftDecay − raw model, Spearman ×100, mean over the sets",
                                   effect=None, section="sts-full" if model in unread else "sts-anisotropic",
                                   **unread.get(model, rerun), **common))
                continue
            eff, measured, how, reduced = self._table1_gain(model)
            scope = dict(label=LABEL.get(model, model), members=(model,), standin=self._standin(model),
                         out_of_scope=CONTRASTIVE_SCOPE if model in (first, MPNET) else "")
            if tag == "bert":
                measured += f"; anisotropic (mean EV₁ {self.mean_metric(model, 'vanilla'):.2f})"
            if model in KIND_TEXT:
                measured += f"; {KIND_TEXT[model]} ({SIZE_TEXT[model]})"
            out.append(Finding(
                key=finding_key(GAIN_KEYS, tag, "sts.GAIN_KEYS"), where="Table 1", claim=claim_gain,
                claim_id="yan-table1-gain",
                measured=measured, quantity=f"SoftDecay − raw model, Spearman ×100, mean over the sets ({how})",
                effect=eff, direction="above", paper_value=self.paper_value("SoftDecay"), reduced=reduced,
                scale=self._reading_scale_text(model) if model not in self.full_readings else
                f"{self.scale}: {model} on every pair",
                section="sts-full" if model in self.full_readings else "sts-anisotropic", digits=2, **scope,
                **common))
        claim_white = ("SoftDecay scores above whitening fitted on the test sentences (WhiteBERT): "
                       f"{sd:.2f} against {wb:.2f} on BERT-base-cased")
        samefit_needs = dict(needs="the encoder's same-fit run on every pair (cross-fitting and half-sampling of "
                                   "whitening − SoftDecay; it encodes every pair again)", command=COMMANDS["book"])
        for tag, model in table1:
            if model not in ran1 or (model not in ran and model not in self.samefit):
                out.append(Finding(key=finding_key(WHITENING_KEYS, tag, "sts.WHITENING_KEYS"), where="Table 1",
                                   claim=claim_white,
                                   claim_id="yan-table1-whitening", measured="not run at this scale",
                                   label=LABEL.get(model, model), members=(model,),
                                   out_of_scope=CONTRASTIVE_SCOPE if model in (first, MPNET) else "",
                                   quantity="whitening − SoftDecay, Spearman ×100, mean over the sets",
                                   effect=None, section="sts-full" if model in unread else "sts-anisotropic",
                                   **(samefit_needs if model in ran1 else unread.get(model, rerun)), **common))
                continue
            eff, measured, how, reduced, alt, caveat = self._table1_white(model)
            scope = dict(label=LABEL.get(model, model), members=(model,), standin=self._standin(model),
                         out_of_scope=CONTRASTIVE_SCOPE if model in (first, MPNET) else "", alternatives=alt,
                         caveat=caveat)
            if model in KIND_TEXT:
                measured += f"; {KIND_TEXT[model]} ({SIZE_TEXT[model]})"
            out.append(Finding(
                key=finding_key(WHITENING_KEYS, tag, "sts.WHITENING_KEYS"), where="Table 1", claim=claim_white,
                claim_id="yan-table1-whitening",
                measured=measured, quantity=f"whitening − SoftDecay, Spearman ×100, mean over the sets ({how})",
                effect=eff, direction="below", paper_value=-self.paper_value("SoftDecay", against="WhiteBERT"),
                reduced=reduced, scale=self._reading_scale_text(model) if model not in self.full_readings else
                f"{self.scale}: {model} on every pair",
                section="sts-full" if model in self.full_readings else "sts-anisotropic", digits=2,
                extra={"likeness": verdict_of(eff, "equal", margin=self.match_margin()),
                       "margin": self.match_margin()}, **scope, **common))
        # flip-free SoftDecay on the anisotropic encoders: the book's own question (the paper's SoftDecay flips)
        reread = [m for m in (bert, smol) if m and self.read(m) is not None]
        model = reread[0] if reread else None
        several = model is not None and self.n_draws(model) > 1
        how = (f"Student-t interval over {self.n_draws(model)} subsample draws" if several else
               "paired bootstrap over the pairs of one subsample draw")
        needs = ("; ".join(v for v in (self.unavailable.get(BOOK_BERT, ""),) if v)
                 or "the anisotropic encoders re-read under the authors' pooling")
        out.append(Finding(
            key="sts-flipfree", where="Table 1, property 1", kind="extension",
            claim="SoftDecay raises unsupervised STS with a transform that keeps the order of the singular values "
                  "and the sign of every direction (property 1)",
            measured=(f"{self._encoder_text(model, self.paper_pooling)}; σ clamped at |α|, so no direction flips"
                      if model else "the book's MLM BERT and SmolLM2 are not re-read here"),
            quantity=f"flip-free SoftDecay (σ clamped at |α|) − raw model, Spearman ×100, mean over the sets ({how})",
            effect=(None if model is None else self.over_draws(model, "SoftDecay (clamped)") if several else
                    self.reading_vs_raw(model, "SoftDecay (clamped)")),
            direction="above", scale=self._reading_scale_text(model) if model else "", section="sts-flips",
            reduced=self._reduced(model, self.extra_max_pairs, self.n_draws(model)) if model else "",
            digits=2,
            **({} if model else dict(needs=needs + "; SmolLM2: re-read by the book preset (3 subsample draws, "
                                     "about twenty CPU-minutes)", command=COMMANDS["book"])), **common))
        # Table 4: one claim per measure, each encoder a finding (the book BERT first: as anisotropic as BERT-base)
        for metric, cid, short, name in (("EV1", "yan-table4-ev1", "ev1", "EV₁"),
                                         ("RBF_dis", "yan-table4-rbf", "rbf", "RBF_dis"),
                                         ("TokenUni", "yan-table4-tokenuni", "tokenuni", "TokenUni")):
            for tag, model in encoders:
                if model not in ran or not self.all_runs()[model]["table4"]:
                    continue
                out.append(Finding(
                    key=finding_key(TABLE4_KEYS, (short, tag), "sts.TABLE4_KEYS"), where="Table 4", claim_id=cid,
                    claim=f"SoftDecay makes sentence embeddings more uniform: {name} falls on every STS set",
                    measured=self._encoder_text(model), quantity=f"{name} after SoftDecay − before, mean over the sets "
                    "(Student-t over the seven sets)",
                    effect=self.metric_change(model, metric), direction="below",
                    paper_value=self.paper_table4_change(metric), reduced=self._reduced(model, self._per(model)),
                    scale=self._scale_text(model), section="sts-uniformity", digits=3, label=LABEL.get(model, model),
                    members=(model,), standin=self._standin_t4(model, metric, name),
                    out_of_scope=CONTRASTIVE_SCOPE if model == first else "", **common))
            control = self.all_runs()[first].get("control") if first in ran else None
            if control:
                out.append(Finding(
                    key=finding_key(CONTROL_KEYS, short, "sts.CONTROL_KEYS"), where="Table 4", claim_id=cid,
                    kind="control",
                    claim=f"SoftDecay's {name} after the transform is what it imposes on any matrix of this shape: a "
                          "Gaussian set with the embeddings' mean and spread ends where the sentence embeddings end",
                    measured=f"{first}, {len(control)} STS sets: each set's sentence embeddings and a Gaussian set of "
                             "the same shape, mean and spread, both through SoftDecay",
                    quantity=f"{name} after SoftDecay of the Gaussian set − of the sentence embeddings, mean over the "
                             "sets (Student-t over the sets)",
                    effect=self.control_gap(first, metric), direction="equal",
                    margin=0.1 * abs(self.metric_change(first, metric).estimate),
                    reference_label="0 (alike within a tenth of the embeddings' own change)",
                    reduced=self._reduced(first, self._per(first)), scale=self._scale_text(first),
                    section="sts-uniformity", digits=3, label=LABEL.get(first, first), **common))
        # Fig. 6: the three readings of eq. (6), the authors' code first (it drew the figure)
        if self.read(first) is not None and self.read(first).get("lsds"):
            reduced = self._reduced(first, self.reading_pairs)
            for key, weights, what in (
                    ("sts-lsds-authors", "authors", "the authors' code: LLE barycentre weights, self included"),
                    ("sts-lsds-eq6", "eq. 6", "eq. (6) as printed: raw RBF weights"),
                    ("sts-lsds", "normalised", "RBF weights normalised to sum to one")):
                out.append(Finding(
                    key=key, where="Fig. 6", claim_id="yan-fig6-lsds",
                    claim="SoftDecay preserves local neighbourhoods better than whitening: lower LSDS on every STS set",
                    measured=f"{self._encoder_text(first, self.paper_pooling)}; LSDS with 12 neighbours, {what}",
                    quantity="LSDS of SoftDecay − LSDS of whitening, mean over the sets (Student-t over the sets)",
                    effect=self.lsds_reading_gap(weights), direction="below", reduced=reduced,
                    scale=self._reading_scale_text(first), section="sts-lsds", digits=3, members=(first,),
                    label={"authors": "the authors' code", "eq. 6": "eq. (6) as printed",
                           "normalised": "normalised weights"}[weights], **common))
        resolution = self.vs_raw(first, "SoftDecay (sentence)")
        out.append(Finding(
            key="sts-alpha", where="App. B", claim_id="yan-alpha",
            claim="The STS results do not change significantly across α ∈ {−0.2, …, −1.0}, so α = −0.6 is fixed",
            measured=f"{first}, {len(self.datasets)} STS sets, α swept over {len(self.alpha_scores(first))} values",
            quantity=(f"score at α = {self.alpha_scores(first).index.max()} − at α = "
                      f"{self.alpha_scores(first).index.min()}, Spearman ×100, mean over the sets"),
            effect=self.alpha_effect(first), direction="equal",
            margin=(resolution.high - resolution.low) / 2, reduced=self._reduced(first, self.max_pairs),
            scale=self._scale_text(first), section="sts-alpha", digits=2, **common))
        return out


def _subsample_idx(n: int, max_pairs: int, seed: int) -> list[int]:
    """The pairs a run of `max_pairs` (0: all) scores out of `n`: a sorted draw without replacement."""
    if not max_pairs or n <= max_pairs:
        return list(range(n))
    return sorted(np.random.default_rng(seed).choice(n, max_pairs, replace=False).tolist())


def _take(ds, idx: list[int]):
    def pick(xs):
        return [xs[i] for i in idx]

    return type(ds)(ds.name, pick(ds.sentence1), pick(ds.sentence2), pick(ds.scores), pick(ds.subsets))


def _subsample(ds, max_pairs: int, seed: int):
    if not max_pairs or len(ds) <= max_pairs:
        return ds
    return _take(ds, _subsample_idx(len(ds), max_pairs, seed))


def _rows(e, rows: Tensor):
    return C.TokenStates(e.layer_means[rows], e.cls_last[rows],
                         None if e.token_sd_last is None else e.token_sd_last[rows])


def _reading_cosines(f1, f2, pooling: str, p: Params) -> tuple[dict, dict, Tensor, Tensor]:
    """Cosines of every `READING_METHODS` row under `pooling`, the sign flips of each SoftDecay variant
    (`core.sts.count_flips`, both sentence matrices) and the pooled embeddings."""
    p1, p2 = pool(f1, pooling), pool(f2, pooling)
    cos, flips = {}, {}
    for m in READING_METHODS:
        a, b = apply_method(m, p1, p2, p.alpha, p.tau)
        cos[m] = C.cosines(a, b)
        if m in ("SoftDecay (sentence)", *FLIP_FREE):
            flips[m] = C.count_flips(p1, a) + C.count_flips(p2, b)
    flips["directions"] = int(sum((v > 1e-10 * v.max()).sum() for v in
                                  (torch.linalg.svdvals(x.double()) for x in (p1, p2))))
    return cos, flips, p1, p2


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
    * `ci[pooling][method]`: method − raw, mean over the sets, paired bootstrap (transforms fitted once), draw 0;
    * `refit[paper_pooling][whitening]`: whitening − SoftDecay, mean over the sets, paired bootstrap with both
      transforms refitted on every resample (`core.sts.refit_bootstrap`), draw 0;
    * `anisotropy[pooling][set]`: EV₁ before and after whitening, EV₁ of the centred rows, the mean's share;
    * `planted`, `lsds` (first model only): `_planted_directions` and `_lsds_readings` under `paper_pooling`;
    * `cpu_s`: the process CPU seconds it took."""
    t0 = time.process_time()
    per_draw = [{"pairs": {}, "scores": {q: {} for q in p.poolings}, "flips": {q: {} for q in p.poolings}}
                for _ in range(draws)]
    diffs: dict = {q: {m: [] for m in READING_METHODS[1:]} for q in p.poolings}
    refit: dict = {q: {m: [] for m in REFIT_METHODS} for q in p.poolings}
    out: dict = {"anisotropy": {q: {} for q in p.poolings}, "planted": {}}
    plant_sets: list[dict] = []
    for name in p.datasets:
        full = load_sts(name, p.source)
        picks = [_subsample_idx(len(full), max_pairs, p.seed + d) for d in range(draws)]
        union = sorted(set().union(*picks))
        where = {i: k for k, i in enumerate(union)}
        e1 = encode(loaded, [full.sentence1[i] for i in union], p.max_length, p.batch_size, None, desc=f"{name} s1")
        e2 = encode(loaded, [full.sentence2[i] for i in union], p.max_length, p.batch_size, None, desc=f"{name} s2")
        for d, idx in enumerate(picks):
            rows = torch.tensor([where[i] for i in idx])
            ds, f1, f2 = _take(full, idx), _rows(e1, rows), _rows(e2, rows)
            per_draw[d]["pairs"][name] = len(idx)
            gold, sub = np.asarray(ds.scores, float), np.asarray(ds.subsets)
            for q in p.poolings:
                cos, flips, p1, p2 = _reading_cosines(f1, f2, q, p)
                per_draw[d]["scores"][q][name] = {m: C.score(c, gold, sub) for m, c in cos.items()}
                per_draw[d]["flips"][q][name] = flips
                if d:
                    continue
                idx_b = C.bootstrap_indices(sub, reading_bootstrap(p), p.seed)
                base = C.score_draws(cos["vanilla"][idx_b], gold[idx_b], sub[idx_b[0]], "subset-mean")
                for m in READING_METHODS[1:]:
                    diffs[q][m].append(C.score_draws(cos[m][idx_b], gold[idx_b], sub[idx_b[0]], "subset-mean") - base)
                if q == p.paper_pooling:
                    for m, r in C.refit_bootstrap(p1, p2, gold, sub, REFIT_METHODS, refit_draws(p), p.seed,
                                                  p.alpha).items():
                        refit[q][m].append(r)
                both = torch.cat([p1, p2])
                white = torch.cat(apply_method("whitening", p1, p2)).double()
                out["anisotropy"][q][name] = {
                    "EV1": float(C.M.explained_variance(both.double(), 1)),
                    "EV1_whitened": float(C.M.explained_variance(white, 1)),
                    "EV1_centred": C.ev1_centred(both), "mean_share": C.mean_share(both)}
                if planted and q == p.paper_pooling:
                    plant_sets.append(_planted_directions(p1, p2, ds, p))
                    out.setdefault("lsds", {})[name] = _lsds_readings(p1, p2, p)
    s0 = per_draw[0]["scores"]
    out["draws"] = per_draw
    out["ci"] = {q: {m: [float(np.mean([s0[q][d][m] - s0[q][d]["vanilla"] for d in p.datasets])),
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


def samefit_settings(p: Params) -> dict[str, int]:
    """The same-fit procedures' sizes: half-samples (as many as the refitted bootstrap's draws), cross-fit
    splits, and bootstrap resamples of the scored pairs per split."""
    return {"halves": refit_draws(p), "splits": 20, "split_boot": max(20, p.bootstrap // 20)}


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
        ds = _take(whole, _subsample_idx(len(whole), max_pairs, p.seed))
        p1, p2 = _pooled(loaded, name, ds, p.paper_pooling, p, dname)
        gold, sub = np.asarray(ds.scores, float), np.asarray(ds.subsets)
        pairs[dname] = len(gold)
        for m, r in C.halfsample_refit(p1, p2, gold, sub, REFIT_METHODS, st["halves"], p.seed, p.alpha).items():
            half[m].append(r)
        for m, r in C.crossfit(p1, p2, gold, sub, REFIT_METHODS, st["splits"], st["split_boot"], p.seed,
                               p.alpha).items():
            cross[m].append(r)
        for m in REFIT_METHODS:
            full[m].append(C.score(C.cosines(*apply_method(m, p1, p2, p.alpha)), gold, sub))

    def iv(draws: dict, w: str, how: str) -> list[float]:
        d = np.mean(draws[w], 0) - np.mean(draws[sd], 0)
        i = C.same_fit_interval(d, method=how)
        return [i.estimate, i.low, i.high]

    return {"pairs": pairs, "settings": st, "pooling": p.paper_pooling,
            "halfsample": {w: iv(half, w, "subsample") for w in whites},
            "crossfit": {w: iv(cross, w, "cross-fit") for w in whites},
            "fullfit": {w: float(np.mean(full[w]) - np.mean(full[sd])) for w in whites},
            "cpu_s": time.process_time() - t0}


#: the transforms the t-SNE maps (Figs. 4, 7) show, and the name each has in Table 4 and the LSDS runs
MAP_METHODS = {"vanilla": ("vanilla", "identity"), "whitening": ("whitening", "whitening"),
               "SoftDecay (sentence)": ("SoftDecay", "SoftDecay")}


def map_panels(p1: Tensor, p2: Tensor, k: int, p: Params) -> dict:
    """The t-SNE maps (Figs. 4, 7) of one set as it is scored: whitening and SoftDecay fitted on every pair
    of the set (each sentence side on its own, as scored), then a random sample of `k` pairs mapped (t-SNE
    of the sample's rows of the transformed set). Per method: the map (`xy`, first `n` rows the first
    sentences), `n`, the set's `pairs`, and the measures of the whole transformed set — Table 4's EV₁,
    RBF_dis, TokenUni (`core.sts.uniformity_metrics`) and LSDS with normalised weights on `lsds_points`
    points — which are the numbers Table 4 and the LSDS figure give for that set."""
    from sklearn.manifold import TSNE

    n = p1.shape[0]
    idx = torch.tensor(_subsample_idx(n, k, p.seed))
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


#: the Params fields the maps use (the rest are dropped from their cache key)
_MAP_FIELDS = ("seed", "datasets", "source", "pooling", "alpha", "tau", "max_pairs", "max_length", "batch_size",
               "lsds_points", "tsne_pairs")


def maps(loaded, p: Params) -> dict:
    """`map_panels` of every set of `p.datasets`, each the set as `run_model` scores it (its `max_pairs`
    subsample, `p.pooling`), with `tsne_pairs` pairs mapped; `cpu_s` the process CPU seconds it took."""
    t0 = time.process_time()
    out: dict = {"sets": {}}
    for name in p.datasets:
        ds = _subsample(load_sts(name, p.source), p.max_pairs, p.seed)
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
    scale). `light` (the anisotropic encoders) skips LSDS, the control and the planted runs; the t-SNE maps
    are `maps`, cached apart (a committed run may still hold the maps it once drew, unread)."""
    out: dict = {k: {} for k in ("scores", "ci", "alpha_sweep", "table4", "lsds", "control", "flips", "planted",
                                 "pairs", "subsets")}
    out["scores"] = {prot: {} for prot in PROTOCOLS}
    out["ci"] = {prot: {} for prot in PROTOCOLS}
    alpha, seed = p.alpha, p.seed
    all_diffs: dict = {prot: {} for prot in PROTOCOLS}
    refit: dict[str, list] = {m: [] for m in REFIT_METHODS}
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
        for m, draws in C.refit_bootstrap(p1, p2, ds.scores, ds.subsets, REFIT_METHODS, refit_draws(p), seed,
                                          alpha).items():
            refit[m].append(draws)
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
    sd = np.mean(refit["SoftDecay (sentence)"], 0)
    out["refit"] = {w: [float(np.mean([out["scores"]["subset-mean"][d]["SoftDecay (sentence)"]
                                       - out["scores"]["subset-mean"][d][w] for d in p.datasets])),
                        *C.interval(sd - np.mean(refit[w], 0))] for w in REFIT_METHODS[:2]}
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


def encoder_demo(loaded, alpha: float) -> dict:
    """Cosine similarities of three sentences under `SoftDecayEncoder(mode="token")`."""
    emb = SoftDecayEncoder(loaded, alpha=alpha, mode="token").encode(list(DEMO_SENTENCES.values()))
    norms = np.linalg.norm(emb, axis=1)
    return {"labels": list(DEMO_SENTENCES), "cosine": (emb @ emb.T / np.outer(norms, norms)).tolist()}


_EXTRA_FIELDS = ("extra_models", "extra_max_pairs", "extra_pooling")



def reading_draws(p: Params, name: str, max_pairs: int) -> int:
    """How many subsample draws `name` is read on: 1 on every pair, else `p.draws` (a main model) or
    `p.extra_draws` (a re-read extra encoder)."""
    return 1 if not max_pairs else p.draws if name in p.models else p.extra_draws


def readings_cached(p: Params, name: str, max_pairs: int, compute) -> tuple[dict, bool]:
    """`readings` of encoder `name` through the results cache (`sts-readings-<name>`) on `reading_draws`
    draws; the planted experiment on the first model only."""
    draws, planted = reading_draws(p, name, max_pairs), name == p.models[0]
    return results.cached(p, f"sts-readings-{name.replace('/', '_')}", compute, drop=_NOT_READINGS, model=name,
                          max_pairs=max_pairs, draws=draws, planted=planted)


def samefit_models(p: Params) -> list[tuple[str, int]]:
    """The encoders whose Table 1 ordering (whitening − SoftDecay) is read under the same-fit procedures, with
    their pairs per set: every encoder read on every pair (`full_readings`), else the first model on its reading
    pairs."""
    return [(m, 0) for m in p.full_readings] or [(p.models[0], p.reading_pairs or p.max_pairs)]


def samefit_cached(p: Params, name: str, max_pairs: int, loaded) -> tuple[dict, bool]:
    """`samefit` of encoder `name` through the results cache (`sts-samefit-<name>`)."""
    return results.cached(p, f"sts-samefit-{name.replace('/', '_')}", lambda: samefit(loaded, name, p, max_pairs),
                          drop=_NOT_READINGS, model=name, max_pairs=max_pairs, **samefit_settings(p))


def run(p: Params) -> Result:
    """Every model of `p`, each through the committed-results cache (key: the Params with `models`
    replaced by the run's `model`), the anisotropic `extra_models` (fewer pairs, `extra_pooling`),
    then the paper's tables, the t-SNE maps and the encoder demo."""
    seed_everything(p.seed)
    device = choose_device(p.device)
    runs, from_cache, loaded, extras = {}, {}, {}, {}

    def compute(name: str, q: Params, light: bool):
        loaded[name] = hm.load(name, device=device)
        return run_model(loaded[name], q, light=light)

    def compute_readings(name: str, max_pairs: int, draws: int, planted: bool):
        if name not in loaded:
            loaded[name] = hm.load(name, device=device)
        return readings(loaded[name], p, max_pairs, draws, planted)

    read, unavailable = {}, {}
    with quiet_loading():
        for name in p.models:
            runs[name], from_cache[name] = results.cached(
                p, f"sts-{name.replace('/', '_')}", lambda n=name: compute(n, p, False),
                drop=("models", *_EXTRA_FIELDS, "cdf_pairs", *_READING_FIELDS), model=name)
        q = replace(p, max_pairs=p.extra_max_pairs, pooling=p.extra_pooling)
        for name in p.extra_models:
            extras[name], from_cache[name] = results.cached(
                q, f"sts-extra-{name.replace('/', '_')}", lambda n=name: compute(n, q, True),
                drop=("models", "extra_models", "cdf_pairs", "lsds_points", "tsne_pairs", "plant_sizes",
                      *_READING_FIELDS), model=name)
        for name, mp in ([(m, p.reading_pairs or p.max_pairs) for m in p.models]
                         + [(m, p.extra_max_pairs) for m in p.extra_models if m in p.reread_extras]):
            nd, planted = reading_draws(p, name, mp), name == p.models[0]
            try:
                read[name], from_cache[f"readings {name}"] = readings_cached(
                    p, name, mp, lambda n=name, m=mp, k=nd, pl=planted: compute_readings(n, m, k, pl))
            except (ModelUnavailable, results.MissingRuns) as err:
                # the book's own model needs its pretraining on this machine; with no committed record and a run
                # that may not measure it (the book build), the chapter says so with the command
                unavailable[name] = str(err)
        full = {}
        for name in p.full_readings:
            try:
                full[name], from_cache[f"full {name}"] = results.cached(
                    p, f"sts-full-{name.replace('/', '_')}", lambda n=name: compute_readings(n, 0, 1, False),
                    drop=_NOT_READINGS, model=name, max_pairs=0, draws=1, planted=False)
            except (ModelUnavailable, results.MissingRuns) as err:
                unavailable[f"{name} (every pair)"] = str(err)
        same = {}
        for name, mp in samefit_models(p):
            def load(n=name):
                if n not in loaded:
                    loaded[n] = hm.load(n, device=device)
                return loaded[n]
            try:
                same[name], from_cache[f"same-fit {name}"] = samefit_cached(p, name, mp, load)
            except (ModelUnavailable, results.MissingRuns) as err:
                unavailable[f"{name} (same-fit procedures)"] = str(err)
        first = p.models[0]
        model = loaded.get(first) or hm.load(first, device=device)
        drawn, from_cache["maps"] = results.cached(
            p, f"sts-maps-{first.replace('/', '_')}", lambda: maps(model, p),
            drop=tuple(f for f in p.cache_key() if f not in _MAP_FIELDS), model=first)
        demo = encoder_demo(model, p.alpha)
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
                  reading_pairs=p.reading_pairs or p.max_pairs, maps=drawn, full_readings=full, samefit=same)
