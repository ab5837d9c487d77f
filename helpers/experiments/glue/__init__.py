"""The GLUE chapter (Yan et al. §5.2, App. B, D), one module per concern: `params` (the settings, the presets and
the paper's tables), `compute` (the grid of fine-tuning runs through the results cache, and `run`), `records`
(the typed records `Run`, `Runs`, `LayerSpectrum`, `Choice`), `result` (the `Result` with its statistics) and
`findings` (the chapter's findings, declared as a table)."""

from ...data.glue import TASK_METRICS
from .compute import (
                      GRID,
                      HOLDOUT,
                      alpha_table,
                      finetune_one,
                      holdout_selection,
                      paired_differences,
                      raw_spectra,
                      rte_probe,
                      run,
                      runs,
                      selection_changes,
                      side_measurements,
                      spectrum_summary,
                      summary_table,
                      wide_params,
                      wide_specs,
)
from .findings import FINDINGS, READING_TEXT, Spec, findings
from .params import (
                      METRIC_NAMES,
                      READINGS,
                      WIDE_ALPHA,
                      WIDE_LR,
                      WIDE_TASK,
                      Params,
                      expdecay_margin,
                      majority_baseline,
                      paper_gains,
                      paper_model_for,
                      paper_tables,
                      paper_value,
                      primary_metric,
)
from .records import LayerSpectrum, Run, Runs, quantile_at
from .result import Result, detectable_effect, welch_interval

__all__ = ["FINDINGS", "GRID", "HOLDOUT", "METRIC_NAMES", "READINGS", "READING_TEXT", "TASK_METRICS", "WIDE_ALPHA",
           "WIDE_LR", "WIDE_TASK", "LayerSpectrum", "Params", "Result", "Run", "Runs", "Spec", "alpha_table",
           "detectable_effect",
           "expdecay_margin", "finetune_one", "findings", "holdout_selection", "majority_baseline",
           "paired_differences", "paper_gains", "paper_model_for", "paper_tables", "paper_value", "primary_metric",
           "quantile_at", "raw_spectra", "rte_probe", "run", "runs", "selection_changes", "side_measurements",
           "spectrum_summary", "summary_table", "welch_interval", "wide_params", "wide_specs"]
