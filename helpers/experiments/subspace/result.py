"""The subspace chapter's `Result`: every number of the chapter (the theorem's checks, Appendix A's cases, the
§3.2 per-layer statistics and pooled values) and the statistics the chapter reads off them; the findings are
`findings.py`'s table."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ...core.findings import Finding
from ...core.stats import Interval
from ...machinery import results
from .findings import findings
from .records import Case, CaseSummary, GammaStep, LayerCheck, LayerStats, MatrixCheck, SentenceDraws, Settings


def _arrays(values: dict[str, list]) -> dict[str, list[np.ndarray]]:
    """`cdf_values` as JSON gives it back (lists) → numpy arrays."""
    return {k: [np.asarray(v, dtype=float) for v in vs] for k, vs in values.items()}


@dataclass
class Result(results.Result):
    """Every number of the chapter. Table rows are dicts with plain keys; `cdf_values[model]` holds,
    per hidden state, the pooled normalised singular values (numpy arrays); `settings`, `appendix_a_summary` and
    `sentence_draws` are records (`records`). Stored dicts become records and arrays here (a saved Result and the
    committed runs read back as they were written)."""

    settings: Settings
    random: list[MatrixCheck]
    tightness: dict[str, np.ndarray]         # matrix kind -> max_i ‖x_i − x_i′‖/λ_{k+1} per cut k (largest m)
    tightness_m: int
    model_description: str
    n_sentences: int
    n_real_tokens: int
    n_hidden_states: int
    real_model: list[LayerCheck]
    appendix_a: list[Case]
    appendix_a_summary: CaseSummary
    cdf_values: dict[str, list[np.ndarray]]  # "pretrained" / "untrained twin" -> per layer pooled values
    cdf_stats: list[LayerStats]              # the pretrained model and its untrained twin on `task`, per layer
    second_task_stats: list[LayerStats]      # the pretrained model on `second_task`, per layer
    paper_medians: list[float]               # BERT-base on MRPC, first and last layer (data/yan_2022_sv_median.csv)
    second_task_values: dict[str, np.ndarray] = field(default_factory=dict)   # "layer i" -> pooled values (Fig. 2)
    gamma_steps: list[GammaStep] = field(default_factory=list)    # Appendix A's Γ-step per (n, k)
    #: the §3.2 changes on `second_task` (last − first hidden state) over sentences resampled with replacement
    #: (`compute.sentence_bootstrap`)
    sentence_draws: SentenceDraws = field(default_factory=SentenceDraws)

    def __post_init__(self) -> None:
        """The converter: each stored dict becomes its record, each stored list of numbers an array."""
        self.settings = Settings.of(self.settings)
        self.appendix_a_summary = CaseSummary.of(self.appendix_a_summary)
        self.sentence_draws = SentenceDraws.of(self.sentence_draws)
        self.tightness = {k: np.asarray(v, dtype=float) for k, v in self.tightness.items()}
        self.cdf_values = _arrays(self.cdf_values)
        self.second_task_values = {k: np.asarray(v, dtype=float) for k, v in self.second_task_values.items()}

    def medians(self, model: str = "pretrained") -> list[float]:
        return [r["median"] for r in self.cdf_stats if r["model"] == model]

    # --- the numbers the chapter reads (figures/subspace.py only formats them) -----------------------

    def max_ratio_by_m(self) -> dict[int, float]:
        """The largest ‖x_i − x_i′‖/λ_{k+1} over kinds of random matrix, per number of tokens m."""
        out: dict[int, float] = {}
        for r in self.random:
            out[r["m"]] = max(out.get(r["m"], 0.0), r["max_ratio"])
        return out

    def middle_radius(self) -> float:
        radii = self.settings.radii
        return radii[len(radii) // 2]

    def cliff(self, n: int = 384) -> dict[str, float]:
        """The exact P(‖u_{1..k}‖ ≤ d) at the middle radius d for sphere dimension n: at k = 16, n/4
        and n/2 (NaN where n was not run)."""
        d = self.middle_radius()
        exact = {r["k"]: r["exact_l2"] for r in self.appendix_a if r["n"] == n and r["d"] == d}
        return {"n": n, "d": d, "k16": exact.get(16, math.nan), "quarter": exact.get(n // 4, math.nan),
                "half": exact.get(n // 2, math.nan)}

    def cls_uniformity(self) -> dict[str, float]:
        """[CLS] uniformity of the pretrained model on the second task: at the embeddings (`first`;
        trivially 1 — the [CLS] input is the same vector for every sentence), at layer 1, its lowest
        value over the layers between the first and the last (`mid_min`), and at the last layer."""
        cls = [r["cls_uni"] for r in self.second_task_stats]
        return {"first": cls[0], "layer1": cls[1] if len(cls) > 1 else math.nan,
                "mid_min": min(cls[1:-1]) if len(cls) > 2 else math.nan, "last": cls[-1],
                "last_mid": len(cls) - 2}

    def trend(self, stat: str) -> Interval:
        """The §3.2 change of `stat` ("median", "token_uni", "cls_uni") on the second task — last − first hidden
        state (for [CLS]: last − layer 1, the embeddings' [CLS] being one vector) — with its 95 % percentile
        interval over `BOOTSTRAP` resamples of the sentences."""
        first, last = self.second_task_stats[0], self.second_task_stats[-1]
        est = (self.cls_uniformity()["last"] - self.cls_uniformity()["layer1"] if stat == "cls_uni"
               else last[stat] - first[stat])
        draws = self.sentence_draws.of_stat(stat)
        if not draws:
            return Interval(est, float("nan"), float("nan"), 1, "bootstrap")
        return Interval.from_draws(draws, estimate=est)

    def eq8_excess(self) -> float:
        """The largest exact ℓ2 probability minus eq. (8)'s bound over every (n, k, d) case (> 0: the
        bound fails)."""
        return max(r["exact_l2"] - r["bound"] for r in self.appendix_a)

    def findings(self) -> list[Finding]:
        """The theorem (§3.1) on random matrices and real hidden states, eq. (8) and the Γ-step of
        Appendix A, and the §3.2 layer trends (median, token and [CLS] uniformity) on MRPC (`FINDINGS`)."""
        return findings(self)
