"""The STS chapter's parameters: `Params` with its presets and rules, the names the chapter's runs and findings
share (methods, poolings, encoders), the cache-key field groups and the draw counts derived from `bootstrap`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from ...core.papers import SOFTDECAY_ALPHA, SOFTDECAY_ALPHAS
from ...core.sts import FLIP_FREE, Method, Pooling, check_methods
from ...machinery.params import ChapterParams, nonneg, positive, rules
from ..qk.params import Params as QkParams

STS_DATASETS = ("STS-B", "STS12", "STS13", "STS14", "STS15", "STS16", "SICK-R")
DEMO_SENTENCES = {"guitar": "A man is playing a guitar.", "instrument": "Someone plays an instrument.",
                  "stocks": "The stock market fell."}


#: the book MLM's checkpoints read along Table 1's axis: every checkpoint its pretraining saves (the queries-and-keys
#: chapter's `book` preset) from step 200 on, leaving out the untrained step 0 and the first 100 steps, when the raw
#: score has barely moved from the untrained model's
PATH_STEPS = tuple(s for s in QkParams.PRESETS["book"]["steps"] if s >= 200)


@dataclass(frozen=True)
class Params(ChapterParams):
    """Yan et al. §5.1, App. B-C: SoftDecay on unsupervised STS (Table 1, Table 4, Figures 3, 4, 6-8).

    `extra_models` are run on `extra_max_pairs` pairs per set with `extra_pooling`: the anisotropic
    encoders of the mechanism test (SmolLM2-135M-Instruct; the `book` preset adds `book-mlm-bert`, the
    book's own MLM BERT, which loads once `scripts/export_book_model.py` has exported it)."""

    models: tuple[str, ...] = ("all-MiniLM-L6-v2",)
    datasets: tuple[Literal["STS-B", "STS12", "STS13", "STS14", "STS15", "STS16", "SICK-R"], ...] = STS_DATASETS
    source: Literal["whiteningbert", "official", "hub", "auto"] = "whiteningbert"
    pooling: Pooling = "first_last"
    alpha: float = SOFTDECAY_ALPHA
    alphas: tuple[float, ...] = SOFTDECAY_ALPHAS
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
    extra_pooling: Pooling = "last"
    # the readings (`readings`): every encoder under each pooling, from one encoding
    paper_pooling: Pooling = "first_last_l1"
    poolings: tuple[Literal["first_last", "first_last_l1", "last"], ...] = ("first_last_l1", "first_last")
    reading_pairs: int = 0           # pairs per set of the main models' re-reading (0: as max_pairs)
    reread_extras: tuple[str, ...] = ("book-mlm-bert",)   # extra models re-read under `poolings`
    draws: int = 1                   # subsample draws of an encoder scored on a subsample (seeds seed, seed+1, ...)
    extra_draws: int = 1             # subsample draws of each re-read extra encoder (`reread_extras`)
    plant_directions: int = 5        # random directions of the planted experiment
    full_readings: tuple[str, ...] = ()   # encoders re-read under `poolings` on every pair of every set (Table 1)
    # the book MLM BERT's own path along Table 1's axis: its pretraining checkpoints (the queries-and-keys chapter's
    # `book` pretraining, seeds `path_seeds`, steps `path_steps`) each read on every pair under `paper_pooling`
    path_seeds: tuple[int, ...] = ()
    path_steps: tuple[int, ...] = ()

    CHAPTER: ClassVar[str] = "sts"
    #: which checkpoints are read does not change any other result (each path reading has its own key)
    CACHE_EXCLUDE: ClassVar[tuple[str, ...]] = ("path_seeds", "path_steps")
    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {
        "ci": dict(max_pairs=150, lsds_points=300, tsne_pairs=20, alphas=(-0.2, -0.6, -1.0), bootstrap=200,
                   extra_models=(), plant_sizes=(0.0, 1.0, 4.0), source="auto", draws=2,
                   plant_directions=3),
        # the book's own MLM BERT (the queries-and-keys chapter's pretraining, scripts/export_book_model.py)
        # SmolLM2 re-read under both poolings on 3 subsample draws (its readings: ~20 CPU-minutes); Table 1 on every
        # pair: all-mpnet-base-v2 (BERT-base's size, contrastive) is read there only (~40 CPU-minutes)
        "book": dict(extra_models=("SmolLM2-135M-Instruct", "book-mlm-bert"), reading_pairs=400,
                     reread_extras=("book-mlm-bert", "SmolLM2-135M-Instruct"), extra_draws=3,
                     full_readings=("all-MiniLM-L6-v2", "SmolLM2-135M-Instruct", "book-mlm-bert",
                                    "all-mpnet-base-v2"),
                     path_seeds=(0, 1), path_steps=PATH_STEPS),
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
        extra_max_pairs=positive,
        poolings=(lambda v: len(v) > 0, "needs at least one pooling"), draws=positive, extra_draws=positive,
        reading_pairs=nonneg,
        plant_directions=(lambda v: v >= 2, "needs >= 2 directions (an interval across them)"),
        path_steps=(lambda v: all(s > 0 for s in v), "checkpoint steps are positive (step 0 is the untrained model)"),
    )


#: SoftDecay − each whitening variant gets a paired bootstrap with the transforms refitted on every resample
REFIT_METHODS: tuple[Method, ...] = ("whitening", "whitening-256", "SoftDecay (sentence)")


def refit_draws(bootstrap: int) -> int:
    """Refitted bootstrap draws per set (and same-fit half-samples): a tenth of `bootstrap`, at least 20 (each
    draw refits three transforms; 100 at book scale)."""
    return max(20, bootstrap // 10)


def reading_bootstrap(bootstrap: int) -> int:
    """Paired bootstrap draws (transforms fitted once) of the readings: a fifth of `bootstrap`, at least 20."""
    return max(20, bootstrap // 5)


#: what the readings score under every pooling: the paper's rows, de-escalation and the two flip-free SoftDecay
#: variants (token-level SoftDecay is in the main runs)
READING_METHODS: tuple[Method, ...] = ("vanilla", "whitening", "whitening-256", "de-escalation", "SoftDecay (sentence)",
                                      *FLIP_FREE)
#: the Params fields only the readings use (dropped from the other runs' cache keys)
READING_FIELDS = ("paper_pooling", "poolings", "draws", "extra_draws", "plant_directions", "reading_pairs",
                   "reread_extras", "full_readings")
#: the Params fields the readings do not use
NOT_READINGS = ("models", "extra_models", "extra_pooling", "extra_max_pairs", "max_pairs", "pooling", "tsne_pairs",
                 "alphas", "draws", "extra_draws", "reading_pairs", "reread_extras",
                 "full_readings")
#: how each pooling is named in tables: the authors' two readings and the mechanism test's
POOLING_LABEL = {"first_last_l1": "layers 1 + L", "first_last": "embeddings + layer L", "last": "layer L",
                 "cls": "[CLS]"}
PLANT_METHODS: tuple[Method, ...] = ("vanilla", "whitening", "de-escalation", "SoftDecay (sentence)",
                                    "SoftDecay (σ/√N)")
#: how the cross-fitted interval of whitening − SoftDecay is made, as a finding says it
CROSSFIT_HOW = ("cross-fitted: each pair scored by transforms fitted on the other half, 20 random splits, pairs "
                "resampled within each")
#: the likeness margin of App. B's claim that the STS results "do not change significantly" across α (Spearman ×100,
#: Table 1 average): one point, a constant of the registry's, fixed whatever a run's noise; the paper states none
ALPHA_MARGIN = 1.0
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
#: the transforms the t-SNE maps (Figs. 4, 7) show, and the name each has in Table 4 and the LSDS runs
MAP_METHODS: dict[Method, tuple[str, str]] = {"vanilla": ("vanilla", "identity"),
                                              "whitening": ("whitening", "whitening"),
                                              "SoftDecay (sentence)": ("SoftDecay", "SoftDecay")}
#: the Params fields the maps use (the rest are dropped from their cache key)
MAP_FIELDS = ("seed", "datasets", "source", "pooling", "alpha", "tau", "max_pairs", "max_length", "batch_size",
               "lsds_points", "tsne_pairs")
#: the Params fields only the anisotropic encoders' runs use (dropped from the main runs' cache keys)
EXTRA_FIELDS = ("extra_models", "extra_max_pairs", "extra_pooling")

# the rule where the chapter's method names enter: every table above names methods of the registry
# (`core.sts.METHOD_SPECS`), checked once on import; an unknown name is refused with the known ones
check_methods((*REFIT_METHODS, *READING_METHODS, *PLANT_METHODS, *MAP_METHODS))
