"""The queries-and-keys chapter (Godey et al. 2024, §5 and Appendices C–D): the dynamics of the mean query and the
mean key of every head along pretraining (Figures 11–15, 19–23), a centring ablation that removes the drift, and
the end state of released models that learned, each beside its untrained twin.

Read in this order: `params` (Params, presets, the chapter's constants), `compute` (the runs and readings, through
the results cache, and `run`), `records` (the typed records a stored run is read into), `result` (`Result` and its
statistics across the records), `findings` (the claims). The mathematics is `helpers.core.qk`; the forward pass
`helpers.hf.qk`."""

from .compute import (
                      ablation_summary,
                      compare_runs,
                      end_state_data,
                      end_state_name,
                      end_state_runs,
                      end_state_spec,
                      export_model,
                      later_layer_entropy,
                      measure_end_state,
                      pretrain_config,
                      pretrain_weights,
                      recipe_probes,
                      run,
                      run_name,
                      run_seed,
                      run_spec,
                      runs,
                      trajectory,
                      union_reading,
)
from .findings import cannot_test_trajectory, findings
from .params import (
                      ALMOST_ALL,
                      ANALYSIS_VERSION,
                      BERT_VOCAB,
                      END_STATE_FIELDS,
                      END_STATE_MODELS,
                      FIRST_RUN_STEPS,
                      LONG_COMMAND,
                      LONG_PRETRAINING,
                      MULTIBERT_CHECKPOINT_MB,
                      MULTIBERT_STEPS,
                      MULTIBERT_TOKENS,
                      PAPER_CHECKPOINTS,
                      RECIPES,
                      TARGET_BELOW_UNIGRAM,
                      Params,
)
from .records import Ablation, Comparison, EndState, Probe, Trajectory
from .result import Result

__all__ = [
    "ALMOST_ALL", "ANALYSIS_VERSION", "Ablation", "BERT_VOCAB", "Comparison", "END_STATE_FIELDS",
    "END_STATE_MODELS", "EndState", "FIRST_RUN_STEPS", "LONG_COMMAND", "LONG_PRETRAINING", "MULTIBERT_CHECKPOINT_MB",
    "MULTIBERT_STEPS", "MULTIBERT_TOKENS", "PAPER_CHECKPOINTS", "Params", "Probe", "RECIPES", "Result",
    "TARGET_BELOW_UNIGRAM", "Trajectory", "end_state_spec", "run_spec", "ablation_summary", "cannot_test_trajectory",
    "compare_runs", "end_state_data", "end_state_name", "end_state_runs", "export_model", "findings",
    "later_layer_entropy", "measure_end_state", "pretrain_config", "pretrain_weights", "recipe_probes", "run",
    "run_name", "run_seed", "runs", "trajectory", "union_reading",
]
