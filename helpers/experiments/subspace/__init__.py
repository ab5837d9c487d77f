"""The subspace chapter (Yan et al. §3, Appendix A): the singular-value subspace theorem on random
matrices and on a real model's hidden states, the case-study probability bound (eq. 8) against its
exact value and Monte Carlo, and the layer-by-layer singular-value CDFs of §3.2.

Read in this order: `params` (Params, presets, the chapter's constants), `compute` (the runs and `run`), `records`
(the typed records a stored run is read into), `result` (`Result`), `findings` (the findings as a table). The
mathematics is `helpers.core.subspace`."""

from .compute import case_summary, random_matrices, run
from .params import BOOTSTRAP, EXACT_TOLERANCE, QUANTILES, Params
from .records import CaseSummary
from .result import Result

__all__ = ["BOOTSTRAP", "EXACT_TOLERANCE", "QUANTILES", "CaseSummary", "Params", "Result", "case_summary",
           "random_matrices", "run"]
