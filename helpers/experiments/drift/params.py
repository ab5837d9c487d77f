"""The drift chapter's settings: `Params` (Godey et al. §4), its presets and rules, and the chapter's names (what a
sweep records, the input variants, the paper's reference model)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from ...core.anisotropy import BLOCK_STATS
from ...core.drift import DRIFT_STATS
from ...machinery.params import ChapterParams, ParameterError, check_heads, positive, rules

#: what a sweep records per bias norm
STATS = BLOCK_STATS + DRIFT_STATS
#: the inputs: rows of the embedding table E (the paper's description), or the output of BERT's whole
#: embedding layer, LN(word + position + token type) — which the paper's "initialized as in BERT" may mean
VARIANTS = ("table", "embedding-layer")
#: the trained model whose hidden-state norms the paper compares N* with (§4.2)
PAPER_REFERENCE = "bert-base-uncased"


@dataclass(frozen=True)
class Params(ChapterParams):
    """Godey et al. §4: an untrained BERT block fed drifted inputs (Figures 6-10)."""

    n_seq: int = 16
    seq_len: int = 512
    norm_min: float = 0.1
    norm_max: float = 3000.0
    n_norms: int = 19
    hist_norms: tuple[float, ...] = (0.0, 10.0, 100.0, 1000.0)
    hist_samples: int = 20_000
    seeds: int = 3
    d_model: int = 768
    n_heads: int = 12
    d_ff: int = 3072
    reference_model: str = "all-MiniLM-L6-v2"
    reference_sentences: int = 256
    variants: tuple[str, ...] = VARIANTS
    variant_seeds: int = 1        # seeds of the variants other than "table" (the first ones of `seeds`)
    #: attention counts as uniform while the mean row maximum is below this many times 1/L
    uniform_tol: float = 1.05

    CHAPTER: ClassVar[str] = "drift"
    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {
        "ci": dict(n_seq=4, seq_len=128, n_norms=8, seeds=2, reference_sentences=32),
        "book": dict(),
        "paper": dict(seeds=5, n_norms=31, reference_model=PAPER_REFERENCE, reference_sentences=1024),
    }
    RULES: ClassVar = rules(
        n_seq=positive, seq_len=(lambda v: 2 <= v <= 512, "must lie in [2, 512] (BERT positions)"),
        norm_min=positive, norm_max=positive, n_norms=(lambda v: v >= 3, "needs >= 3 bias norms"),
        hist_norms=(lambda v: all(x >= 0 for x in v), "bias norms must be >= 0"),
        hist_samples=(lambda v: v >= 100, "needs >= 100 score samples"),
        seeds=positive, d_model=positive, n_heads=positive, d_ff=positive,
        reference_sentences=(lambda v: v >= 2, "needs >= 2 sentences"),
        variants=(lambda v: len(v) > 0 and v[0] == "table" and all(x in VARIANTS for x in v),
                  f"variants must start with 'table' and come from {VARIANTS}"),
        uniform_tol=(lambda v: v > 1, "must exceed 1"), variant_seeds=positive,
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.norm_max <= self.norm_min:
            raise ParameterError(f"parameter 'norm_max' = {self.norm_max} must exceed norm_min = {self.norm_min}")
        check_heads(self)

    def grid(self) -> list[float]:
        """The bias norms swept: `n_norms` log-spaced from norm_min to norm_max, plus `hist_norms`."""
        logs = np.geomspace(self.norm_min, self.norm_max, self.n_norms).round(6).tolist()
        return sorted(set(logs) | set(self.hist_norms))

