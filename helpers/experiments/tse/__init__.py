"""The tse chapter (Yu & Zhang §1-3.2, Appendix A): token similarity escalation in random-init
BERT/ALBERT (Figure 1), in the synthetic post-norm, pre-norm and de-escalated stacks of §2.4
(Figures 2-5, with the FFN's share of the escalation and its ablations), the concentration of η
(Figure 8) and the bounds (11) on generic attention matrices.

Read in this order: `params` (Params, presets, the paper's values), `compute` (the loops over trials and τ,
and `run`), `result` (the typed records and the `Result` with the statistics the findings read), `findings`
(the findings, a table of specs). At `book` scale every piece is read back from `results/tse/book/`."""

from .compute import (
    deescalated_diversity,
    figure1,
    figure1_batch,
    figure1_sentences,
    figure1_steps,
    lemma24_single,
    postnorm_trials,
    prenorm_trials,
    run,
    tau_sweep,
)
from .findings import FINDINGS, Spec
from .params import (
    EQ18_FRACTION,
    FFN_INIT_NAMES,
    PAPER_CLAIMS,
    STEP_FIELDS,
    SWEEP_FIELDS,
    TOKENIZER_MODEL,
    Params,
    paper_claims,
    paper_levels,
)
from .result import (
    Bounds,
    Eta,
    PreNorm,
    Profile,
    Record,
    Resampling,
    Result,
    Stacks,
    Steps,
    Summary,
    Sweep,
    summarise,
)

__all__ = ["Params", "Result", "run", "postnorm_trials", "prenorm_trials", "deescalated_diversity", "figure1",
           "figure1_batch", "summarise", "paper_claims", "paper_levels", "tau_sweep", "figure1_steps",
           "figure1_sentences", "lemma24_single", "SWEEP_FIELDS", "STEP_FIELDS", "EQ18_FRACTION", "FFN_INIT_NAMES",
           "PAPER_CLAIMS", "TOKENIZER_MODEL", "FINDINGS", "Spec", "Record", "Profile", "Stacks", "Resampling",
           "PreNorm", "Eta", "Bounds", "Sweep", "Steps", "Summary"]
