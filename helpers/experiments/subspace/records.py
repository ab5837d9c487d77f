"""The subspace chapter's typed records: the settings a run was made with (`Settings`, its cache key), the summary
of Appendix A's cases (`CaseSummary`, with its `Worst` case) and the sentence bootstrap of the §3.2 changes
(`SentenceDraws`). Each is a frozen dataclass whose fields are the stored keys in their stored order: read from the
stored dict (`of`) and written back as that dict (`machinery.results.jsonable`), so a saved Result and the committed
runs read back as they were written. The rows of the chapter's tables are typed dicts (`MatrixCheck`, `LayerCheck`,
`Case`, `LayerStats`, `GammaStep`), kept as the dicts the computations return and the results store."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, NotRequired, TypedDict


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


class MatrixCheck(TypedDict):
    """The theorem on one random m × d matrix (`core.subspace.theorem_check`): the worst slack C − ‖x − x′‖ over rows
    and cuts, relative to the largest singular value, and the largest and median ‖x − x′‖ / λₖ₊₁."""

    m: int
    d: int
    matrix: str
    worst_slack: float
    worst_slack_rel: float
    max_ratio: float
    median_ratio: float


class LayerCheck(TypedDict):
    """The theorem on one hidden state of the model (`core.subspace.theorem_check`), and the mean over cuts of
    max ‖x − x′‖ / λₖ₊₁ (`core.subspace.tightness_by_cut`)."""

    layer: int
    worst_slack: float
    worst_slack_rel: float
    max_ratio: float
    median_ratio: float
    mean_cut_ratio: float


class Case(TypedDict):
    """One case (n, k, d) of Appendix A (`compute.case_study`): eq. (8)'s bound, the exact ℓ2 probability, the Monte
    Carlo estimates of the ℓ2 and ℓ1 readings, and whether each breaks the bound (ℓ2: exactly, and by more than four
    times; ℓ1: by more than 4 standard errors)."""

    n: int
    k: int
    d: float
    bound: float
    exact_l2: float
    mc_l2: float
    mc_l1: float
    l2_violates: bool
    l2_violates_x4: NotRequired[bool]
    l1_violates: bool


class LayerStats(TypedDict):
    """§3.2's statistics of one hidden state (`core.subspace.layer_spectrum_stats`) of `model` ("pretrained",
    "untrained twin"): the median and skewness of the normalised singular values, token and [CLS] uniformity, EV₁."""

    model: str
    layer: int
    median: float
    skewness: float
    token_uni: float
    cls_uni: float
    ev1: float


class GammaStep(TypedDict):
    """The constant of the line before eq. (8) against eq. (8)'s, for one (n, k) (`core.subspace.gamma_step`): their
    logarithms (the printed line, the printed next line, the corrected one) and the ratio of the first two."""

    n: int
    k: int
    log_printed_line: float
    log_printed_next: float
    log_corrected: float
    ratio: float
