"""The drift chapter's experiment: parameters, run, result."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from ..book.params import ChapterParams, ParameterError, positive, rules


@dataclass(frozen=True)
class Params(ChapterParams):
    """Godey et al. §4: an untrained BERT block fed drifted inputs (Figures 6-10)."""

    n_seq: int = 16
    seq_len: int = 512
    norm_min: float = 0.1
    norm_max: float = 3000.0
    n_norms: int = 19
    hist_norms: tuple[float, ...] = (0.0, 10.0, 100.0, 1000.0)
    seeds: int = 3
    hidden: int = 768
    heads: int = 12
    intermediate: int = 3072
    reference_model: str = "all-MiniLM-L6-v2"
    reference_sentences: int = 256

    CHAPTER: ClassVar[str] = "drift"
    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {
        "ci": dict(n_seq=4, seq_len=128, n_norms=8, seeds=2, reference_sentences=32),
        "book": dict(),
        "paper": dict(seeds=5, n_norms=31, reference_model="bert-base-uncased", reference_sentences=1024),
    }
    RULES: ClassVar = rules(
        n_seq=positive, seq_len=(lambda v: 2 <= v <= 512, "must lie in [2, 512] (BERT positions)"),
        norm_min=positive, norm_max=positive, n_norms=(lambda v: v >= 3, "needs >= 3 bias norms"),
        hist_norms=(lambda v: all(x >= 0 for x in v), "bias norms must be >= 0"),
        seeds=positive, hidden=positive, heads=positive, intermediate=positive,
        reference_sentences=(lambda v: v >= 2, "needs >= 2 sentences"),
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.norm_max <= self.norm_min:
            raise ParameterError(f"parameter 'norm_max' = {self.norm_max} must exceed norm_min = {self.norm_min}")
        if self.hidden % self.heads:
            raise ParameterError(f"parameter 'hidden' = {self.hidden} must be divisible by heads = {self.heads}")
