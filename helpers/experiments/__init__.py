"""One module per chapter: its `Params` (presets), `run(params) -> Result`, and the computations only
that chapter needs. Chapters import this layer and `helpers.figures`, nothing else."""

from . import anisotropy, deeplm, drift, glue, qk, sts, subspace, tse, vit

__all__ = ["anisotropy", "deeplm", "drift", "glue", "qk", "sts", "subspace", "tse", "vit"]
