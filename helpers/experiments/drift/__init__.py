"""The drift chapter (Godey et al. §4): an untrained BERT block fed inputs sharing a common bias of
growing norm N, over several seeds — rows of the embedding table as the paper describes, and (a
variant) the output of BERT's whole embedding layer; the norm fixed point N*; what of the score
spread the softmax sees; and, beside it, the hidden-state norms and average cosines of a real
pretrained model. At `book` scale the sweeps go through the committed-results cache
(`results/drift/book/`).

Read in this order: `params` (Params, presets, the chapter's names), `compute` (the sweeps and `run`), `records`
(the typed records a stored run is read into), `result` (`Result`), `findings` (the findings as a table)."""

from .compute import drift_sweep, run
from .params import Params
from .result import Result

__all__ = ["Params", "Result", "drift_sweep", "run"]
