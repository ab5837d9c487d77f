"""The drift chapter's typed records: the reference model's layers (`Reference`, `compute.reference_norms`) and one
histogram of pre-softmax scores (`Histogram`, `compute.drift_sweep`). Each is read from the dict a results file
stores (`of`) and, a dataclass whose fields are the stored keys in their stored order, written back as that dict
(`machinery.results.jsonable`), so committed results keep their layout and their cache keys."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Reference:
    """The trained model the paper compares N* with (§4.2), read on `sentences` MRPC sentences: its `model` name and
    `description`, per layer (embeddings first) the mean hidden-state norm of real tokens (`layer_norms`) and their
    average cosine (`layer_cos`), and its width `d`."""

    model: str = ""
    description: str = ""
    sentences: int = 0
    layer_norms: tuple[float, ...] = ()
    layer_cos: tuple[float, ...] = ()
    d: int = 0

    @classmethod
    def of(cls, d: Reference | dict) -> Reference:
        """The record of a stored dict (a record is returned as it is)."""
        if isinstance(d, cls):
            return d
        return cls(**{**d, "layer_norms": tuple(d.get("layer_norms", ())), "layer_cos": tuple(d.get("layer_cos", ()))})


@dataclass(frozen=True)
class Histogram:
    """A histogram of pre-softmax scores (Figure 7): bin `edges` (one more than the bins) and `density` per bin."""

    edges: tuple[float, ...]
    density: tuple[float, ...]

    @classmethod
    def of(cls, d: Histogram | dict) -> Histogram:
        return d if isinstance(d, cls) else cls(edges=tuple(d["edges"]), density=tuple(d["density"]))
