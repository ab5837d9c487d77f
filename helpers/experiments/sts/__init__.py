"""The STS chapter (Yan et al. §5.1, App. B-C): SoftDecay and its baselines on unsupervised STS, per
model through the results cache — Table 1 scores under the paper's protocol (per subset, mean over
subsets) and pooled, with paired bootstrap intervals against the raw model, the α sweep, Table 4's
uniformity metrics and a control, LSDS (Fig. 6), per-layer singular values and SoftDecay's sign
flips (Fig. 3), t-SNE maps (Figs. 4, 7), and the planted-anisotropy experiment.

Read in this order: `params` (Params, presets, the chapter's names), `compute` (the runs and readings, `run`),
`records` (the typed records a run is read into), `result` (`Result`), `findings` (the findings as a table).
The mathematics is `helpers.core.sts`; the encoder pass `helpers.hf.sts`."""

from .compute import (
                      CROSSFIT_SPLITS,
                      averages,
                      encoder_demo,
                      map_panels,
                      maps,
                      reading_draws,
                      readings,
                      readings_cached,
                      run,
                      run_model,
                      samefit,
                      samefit_cached,
                      samefit_models,
                      samefit_settings,
                      subsample_idx,
                      subsample_pairs,
                      take,
)
from .findings import FINDINGS, FIRST, Spec, build
from .params import (
                      ALPHA_MARGIN,
                      BOOK_BERT,
                      COMMANDS,
                      CONTRASTIVE_SCOPE,
                      CROSSFIT_HOW,
                      DEMO_SENTENCES,
                      KIND_TEXT,
                      LABEL,
                      MAP_METHODS,
                      MPNET,
                      PAPER_BERT,
                      PLANT_METHODS,
                      POOLING_LABEL,
                      POOLING_TEXT,
                      READING_METHODS,
                      REFIT_METHODS,
                      SIZE_TEXT,
                      SMOL,
                      STS_DATASETS,
                      Params,
                      reading_bootstrap,
                      refit_draws,
)
from .records import Draw, Reading, Record, Run, SameFit
from .result import Result

__all__ = ["ALPHA_MARGIN", "BOOK_BERT", "COMMANDS",
           "CONTRASTIVE_SCOPE", "CROSSFIT_HOW", "DEMO_SENTENCES", "FINDINGS", "FIRST",
           "KIND_TEXT", "LABEL", "MAP_METHODS", "MPNET", "PAPER_BERT", "PLANT_METHODS", "POOLING_LABEL",
           "POOLING_TEXT", "READING_METHODS", "REFIT_METHODS", "SIZE_TEXT", "SMOL", "STS_DATASETS", "Draw", "Params",
           "Reading", "Record", "Result", "Run", "SameFit", "Spec", "subsample_pairs", "subsample_idx", "take",
           "averages", "build", "encoder_demo", "map_panels", "maps", "reading_bootstrap", "reading_draws",
           "readings", "readings_cached", "refit_draws", "run", "run_model", "samefit", "samefit_cached",
           "samefit_models", "samefit_settings", "CROSSFIT_SPLITS"]
