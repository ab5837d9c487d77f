"""The deep causal language model chapter (Yu & Zhang §3.4, Figure 7): post-norm vs pre-norm vs de-escalated
post-norm (the de-escalation step at every FFN's input) in a deep, narrow causal Transformer LM trained on
WikiText-103 text, with a leakage control, control τ runs and a budget curve carried to the paper's steps.

Read in this order: `params` (Params, presets, the chapter's names and constants), `compute` (the runs, `run`),
`result` (`Result`: the histories and the statistics across them), `findings` (the findings as a table). The
model is `helpers.core.causal_lm`; its training loop `helpers.train.lm`."""

from .compute import curve_budgets, curve_params, curve_runs, run, runs
from .params import (
    CURVE_FORMS,
    CURVE_GAPS,
    FINAL_WINDOW,
    LEAKY,
    PLATEAU_TOL,
    VARIANTS,
    Params,
    tau_arm,
)
from .result import Result

__all__ = ["CURVE_FORMS", "CURVE_GAPS", "FINAL_WINDOW", "LEAKY", "PLATEAU_TOL", "VARIANTS", "Params", "Result",
           "curve_budgets", "curve_params", "curve_runs", "run", "runs", "tau_arm"]
