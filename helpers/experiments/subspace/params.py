"""The subspace chapter's settings: `Params` (Yan et al. §3 and Appendix A), its presets and rules, and the
chapter's names and constants."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from ...machinery.params import ChapterParams, positive, rules
from ...machinery.runtime import REPO_ROOT

PAPER_MEDIANS = REPO_ROOT / "data" / "yan_2022_sv_median.csv"
Task = Literal["CoLA", "MRPC", "RTE", "SST-2"]
#: the statistics of `core.subspace.layer_spectrum_stats` kept per layer (its pooled values go to `cdf_values`)
STAT_KEYS = ("layer", "median", "skewness", "token_uni", "cls_uni", "ev1")
#: how many quantiles of each layer's pooled normalised singular values the Result keeps (for the CDF
#: and histogram figures; the medians and skewness are computed from every value)
QUANTILES = 2001
#: the Params fields the model part of the chapter does not depend on (its cache key leaves them out)
NOT_MODEL = ("random_shapes", "random_dim", "mc_samples", "sphere_dims", "radii")
#: resamples of the sentences behind the §3.2 findings' intervals (`sentence_bootstrap`)
BOOTSTRAP = 1000
#: the half-width an exact (unsampled) effect is read with: float64 SVDs and log-space Gamma functions are
#: accurate far below it
EXACT_TOLERANCE = 1e-6


@dataclass(frozen=True)
class Params(ChapterParams):
    """Yan et al. §3 and Appendix A: the singular-value subspace theorem and the CDF study."""

    model: str = "all-MiniLM-L6-v2"
    task: Task = "CoLA"
    second_task: Task = "MRPC"
    n_sentences: int = 512
    max_length: int = 128
    batch_size: int = 32
    random_shapes: tuple[int, ...] = (16, 64, 128)   # token counts m of the random matrices
    random_dim: int = 384
    mc_samples: int = 200_000
    sphere_dims: tuple[int, ...] = (16, 64, 384, 768)
    radii: tuple[float, ...] = (0.1, 0.3, 0.5, 0.7, 0.9)
    untrained_twin: bool = True

    CHAPTER: ClassVar[str] = "subspace"
    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {
        "ci": dict(n_sentences=48, mc_samples=20_000, sphere_dims=(16, 64, 384), random_shapes=(16, 64)),
        "book": dict(),
        "paper": dict(model="bert-base-uncased", n_sentences=1043, random_dim=768),
    }
    RULES: ClassVar = rules(
        n_sentences=(lambda v: v >= 2, "needs at least 2 sentences"),
        max_length=(lambda v: 4 <= v <= 512, "must lie in [4, 512]"),
        batch_size=positive, random_dim=positive,
        random_shapes=(lambda v: len(v) > 0 and all(x >= 2 for x in v), "every m must be >= 2"),
        mc_samples=(lambda v: v >= 100, "needs >= 100 samples"),
        sphere_dims=(lambda v: len(v) > 0 and all(x >= 2 for x in v), "every n must be >= 2"),
        radii=(lambda v: len(v) > 0 and all(0 < x < 1 for x in v), "every radius d must lie in (0, 1)"),
    )
