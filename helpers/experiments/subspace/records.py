"""The subspace chapter's typed records: the settings a run was made with (`Settings`, its cache key), the summary
of Appendix A's cases (`CaseSummary`, with its `Worst` case) and the sentence bootstrap of the §3.2 changes
(`SentenceDraws`). Each is a frozen dataclass whose fields are the stored keys in their stored order: read from the
stored dict (`of`) and written back as that dict (`book.results._jsonable`), so a saved Result and the committed
runs read back as they were written."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar


@dataclass(frozen=True)
class Settings:
    """The settings the run depends on, as `Params.cache_key` gives them (every `Params` field but those that do not
    change results)."""

    seed: int
    model: str
    task: str
    second_task: str
    n_sentences: int
    max_length: int
    batch_size: int
    random_shapes: tuple[int, ...]
    random_dim: int
    mc_samples: int
    sphere_dims: tuple[int, ...]
    radii: tuple[float, ...]
    untrained_twin: bool

    @classmethod
    def of(cls, d: Settings | dict) -> Settings:
        """The record of a cache key (a record is returned as it is)."""
        if isinstance(d, cls):
            return d
        return cls(**{**d, **{k: tuple(d[k]) for k in ("random_shapes", "sphere_dims", "radii")}})


@dataclass(frozen=True)
class Worst:
    """The case (n, k, d) where eq. (8) fails by the most: its bound and the exact ℓ2 probability."""

    n: int
    k: int
    d: float
    bound: float
    exact_l2: float


@dataclass(frozen=True)
class CaseSummary:
    """Appendix A's cases (`compute.case_summary`): how many, how many break eq. (8) in the ℓ2 reading (exactly),
    in the ℓ1 reading (Monte Carlo), and by more than four times the bound; the cases and failures at k = n/4; the
    median looseness (bound / exact) where it holds; and the `worst` failure (None when none fails)."""

    cases: int
    l2_violations: int
    l1_violations: int
    l2_violations_x4: int
    quarter_cases: int
    quarter_violations: int
    median_looseness: float
    worst: Worst | None = None

    @classmethod
    def of(cls, d: CaseSummary | dict) -> CaseSummary:
        if isinstance(d, cls):
            return d
        worst, loose = d.get("worst"), d.get("median_looseness")
        return cls(**{**d, "worst": None if worst is None else Worst(**worst),
                      "median_looseness": float("nan") if loose is None else loose})   # JSON's null: NaN


@dataclass(frozen=True)
class SentenceDraws:
    """The §3.2 changes on the second task (last − first hidden state; [CLS]: last − layer 1) over resamples of its
    `n` sentences with replacement (`compute.sentence_bootstrap`): one value per resample of each."""

    median: tuple[float, ...] = ()
    token_uni: tuple[float, ...] = ()
    cls_uni: tuple[float, ...] = ()
    n: int = 0

    #: the statistics drawn, by the names `Result.trend` reads them
    STATS: ClassVar[tuple[str, ...]] = ("median", "token_uni", "cls_uni")

    @classmethod
    def of(cls, d: SentenceDraws | dict) -> SentenceDraws:
        if isinstance(d, cls):
            return d
        return cls(**{k: tuple(d[k]) for k in cls.STATS if k in d}, n=d.get("n", 0))

    def of_stat(self, stat: str) -> tuple[float, ...]:
        """The draws of `stat` ("median", "token_uni", "cls_uni")."""
        return getattr(self, stat)

