"""The synthesis chapter's `Result`: the stored runs, one per model, and the statistics across them (rank
agreement, changes under an operation, the twin test through `diagnose.measures.TwinTest`, the drift identity, the
average cosine against t_cos), read on demand; `findings()` builds the chapter's findings (`findings.FINDINGS`)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from itertools import combinations
from typing import Any

import numpy as np
from scipy import stats as sps

from ...core.findings import Finding
from ...core.stats import Interval, fisher_t_interval, rank_interval, t_interval
from ...diagnose import measures as DM
from ...machinery import results
from .findings import FINDINGS, SCALE
from .params import HEADLINE, LEVEL, RANKED, as_floats


@dataclass
class Result(results.Result):
    """`runs`: one record per model (`model_study`)."""

    settings: dict[str, Any]          # the Params the run was made with, as stored (a Params field each)
    runs: list[dict[str, Any]]        # one `model_study` record per model, as stored (read by `curves_record`)
    draws: int
    level: float = LEVEL
    missing: dict[str, str] = field(default_factory=dict)

    # ------------------------------------------------------------------ reading the runs

    @property
    def names(self) -> list[str]:
        return [r["name"] for r in self.runs]

    def run_of(self, name: str) -> dict[str, Any]:
        return next(r for r in self.runs if r["name"] == name)

    def _mean_over_models(self, get, correlation: bool = False) -> Interval:
        """The mean over the models of a per-model statistic (`get(run)`: its estimate and its draws over the
        inputs), with its interval over the models: Student-t of the per-model estimates, on Fisher's z for a
        `correlation` (each read over its model's layers). With one model, that model's percentile interval over
        its inputs (the draws as they are)."""
        est = np.array([get(r)["estimate"] for r in self.runs], dtype=float)
        if len(self.runs) >= 2:
            if correlation:
                return fisher_t_interval(est, n_points=min(self.n_layers(r) for r in self.runs), level=self.level)
            return t_interval(est, self.level)
        return self.per_model(get)[self.runs[0]["name"]]

    @staticmethod
    def n_layers(run: dict[str, Any]) -> int:
        """How many layers a model's curves have (the points of its rank correlations)."""
        return int(run["layers"])

    def unit(self) -> tuple[str, int]:
        """What a mean over models is taken over, and how many: the models, or (one model) its inputs."""
        if len(self.runs) >= 2:
            return "models", len(self.runs)
        r = self.runs[0]
        return "inputs of one model", int(r["inputs"])

    def per_model(self, get) -> dict[str, Interval]:
        """Per model, the statistic with the percentile interval of its bootstrap draws over the inputs (none
        moved)."""
        out = {}
        for r in self.runs:
            g = get(r)
            d = np.asarray(g["draws"], dtype=float)
            lo, hi = np.nanpercentile(d, [50 * (1 - self.level), 50 * (1 + self.level)])
            out[r["name"]] = Interval(g["estimate"], float(lo), float(hi), int(np.isfinite(d).sum()), "bootstrap",
                                      self.level)
        return out

    def _pair(self, a: str, b: str, which: str) -> str:
        return f"{a}|{b}" if f"{a}|{b}" in self.runs[0]["ranked"][which] else f"{b}|{a}"

    def agreement(self, a: str, b: str, which: str = "model") -> Interval:
        """Mean over models of the Spearman correlation across layers of measures `a` and `b` (`which`: "model",
        or "twin": each model's twins' correlation averaged over its twins), with its interval over the models."""
        key = self._pair(a, b, which)
        return self._mean_over_models(lambda r: r["ranked"][which][key], correlation=True)

    def agreement_matrix(self, which: str = "model") -> np.ndarray:
        """(measures × measures) mean Spearman estimates over models (1 on the diagonal)."""
        n = len(RANKED)
        A = np.eye(n)
        for i, j in combinations(range(n), 2):
            A[i, j] = A[j, i] = self.agreement(RANKED[i], RANKED[j], which).estimate
        return A

    def most_collapsed(self, measure: str) -> dict[str, int]:
        """Per model, the layer the measure rates most collapsed."""
        sign = DM.COLLAPSE_SIGN[measure]
        return {r["name"]: int(np.nanargmax(sign * np.array(r["curves"][measure]["model"]["estimate"], dtype=float)))
                for r in self.runs}

    def headline_same_layer(self) -> int:
        """Models where the three papers' headline measures pick the same most-collapsed layer."""
        picks = [self.most_collapsed(m) for m in HEADLINE.values()]
        return sum(len({p[n] for p in picks}) == 1 for n in self.names)

    def change(self, after: str, before: str) -> Interval:
        """Mean over models of the per-input mean of `after` − `before` (e.g. "ev1_softdecay", "ev1_raw")."""
        def get(r):
            a, b = r["operations"][after], r["operations"][before]
            return {"estimate": a["estimate"] - b["estimate"],
                    "draws": (np.array(a["draws"]) - np.array(b["draws"])).tolist()}
        return self._mean_over_models(get)

    def change_per_model(self, after: str, before: str) -> dict[str, Interval]:
        def get(r):
            a, b = r["operations"][after], r["operations"][before]
            return {"estimate": a["estimate"] - b["estimate"],
                    "draws": (np.array(a["draws"]) - np.array(b["draws"])).tolist()}
        return self.per_model(get)

    def agreement_per_model(self, a: str, b: str, which: str = "model") -> dict[str, Interval]:
        """Per model, the Spearman correlation across layers of `a` and `b` with its interval over the layers
        (Fisher's z with Bonett and Wright's standard error √((1 + ρ²/2)/(n − 3)), n layers: the points the
        correlation is computed on); None-width where a model has fewer than 4 layers."""
        key = self._pair(a, b, which)
        out = {}
        for r in self.runs:
            rho, n = float(r["ranked"][which][key]["estimate"]), self.n_layers(r)
            out[r["name"]] = (rank_interval(rho, n, self.level) if n >= 4
                              else Interval(rho, math.nan, math.nan, n, "fisher-z", self.level))
        return out

    def least_agreeing(self, a: str, b: str) -> tuple[str, Interval]:
        """The model whose layers `a` and `b` rank least alike, and its correlation."""
        per = self.agreement_per_model(a, b)
        name = min(per, key=lambda n: per[n].estimate)
        return name, per[name]

    def not_both(self, op: str) -> list[str]:
        """Models where `op` does not lower EV₁ and t_sim both beyond their intervals."""
        ev, ts = self.change_per_model(f"ev1_{op}", "ev1_raw"), self.change_per_model(f"t_sim_{op}", "t_sim_raw")
        return [n for n in self.names if not (ev[n].high < 0 and ts[n].high < 0)]

    def largest_centred_excess(self) -> tuple[str, Interval]:
        """The model whose centred inputs keep the most dominant direction (EV₁ − isotropic), and its value."""
        per = self.change_per_model("ev1_centred", "ev1_isotropic")
        name = max(per, key=lambda n: per[n].estimate)
        return name, per[name]

    def lowered_both(self, op: str) -> int:
        """Models where `op` lowers EV₁ and t_sim both beyond their intervals."""
        ev, ts = self.change_per_model(f"ev1_{op}", "ev1_raw"), self.change_per_model(f"t_sim_{op}", "t_sim_raw")
        return sum(ev[n].high < 0 and ts[n].high < 0 for n in self.names)

    def twin_test(self, name: str) -> DM.TwinTest:
        """`tokuni diagnose`'s twin test of one model against its twins (`diagnose.measures.TwinTest`), over every
        (layer, measure) cell the run stored: the same rule, from the same moments, as the tool's report."""
        c = self.run_of(name)["curves"]
        return DM.TwinTest.of({m: as_floats(c[m]["model"]["estimate"]) for m in c},
                              {m: np.array(c[m]["twins"], dtype=float) for m in c},
                              {m: as_floats(c[m]["paired_var"]) for m in c}, self.level)

    def twin_curve(self, name: str, measure: str) -> dict[str, np.ndarray]:
        """Per layer the twins' mean with the twin test's prediction interval for a new draw from them."""
        return self.twin_test(name).band(measure)

    def differing_share(self) -> Interval:
        """Mean over models of the share of (layer, measure) cells of `RANKED` where the model is flagged as
        unlike a new draw from its twins (`twin_test`), with the models' range."""
        shares = [self.differing_share_of(r["name"]) for r in self.runs]
        return Interval(float(np.mean(shares)), float(min(shares)), float(max(shares)), len(shares), "range")

    def differing_share_of(self, name: str) -> float:
        test = self.twin_test(name)
        cells = [bool(f) for meas in RANKED
                 for f, e in zip(test.differs(meas), test.tested[meas]["estimate"], strict=True) if np.isfinite(e)]
        return float(np.mean(cells))

    def power(self) -> dict[str, float]:
        """The twin test's power across the models: the median over models of each model's median smallest
        flagged shift, in twin standard deviations, for a cell that moves alone (`one_sd`) and where every cell
        moves (`all_sd`) (`diagnose.measures.TwinTest.power`)."""
        per = [self.twin_test(n).power() for n in self.names]
        return {k: float(np.median([q[k] for q in per])) for k in ("one_sd", "all_sd")}

    def cos_against_t_cos(self, name: str) -> dict[str, Any]:
        """Godey et al.'s average cosine (the `cos` curve: every pair of vectors across the probe, special tokens
        left out) against Yu & Zhang's t_cos (pairs within one input, special tokens kept), per layer of one
        model: both curves, their difference t_cos − cos, its largest absolute value over the middle layers
        (blocks 2 to L − 1) and its value at the last layer."""
        r = self.run_of(name)
        cos = as_floats(r["curves"]["cos"]["model"]["estimate"])
        t_cos = as_floats(r["t_cos_specials"]["estimate"])
        gap = t_cos - cos
        mid = gap[2:-1]
        return {"cos": cos, "t_cos": t_cos, "gap": gap, "mid_low": float(mid.min()), "mid_high": float(mid.max()),
                "last": float(gap[-1]), "cos_last": float(cos[-1]), "t_cos_last": float(t_cos[-1]),
                "specials": float(r["t_cos_specials"]["specials_per_input"])}

    def drift_identity(self) -> dict[str, dict[str, float]]:
        """How close the mean cosine is to a function of the drift D = ‖x̄‖/σ alone: with vectors of one norm r,
        r² = ‖x̄‖² + σ² and the mean cosine over pairs is about ‖x̄‖²/r² = D²/(1 + D²). Per model: the Spearman
        correlation across layers of the mean cosine with D²/(1 + D²), and the largest gap between the two."""
        out = {}
        for r in self.runs:
            cos = np.array(r["curves"]["cos"]["model"]["estimate"], dtype=float)
            d = np.array(r["curves"]["drift"]["model"]["estimate"], dtype=float)
            pred = d**2 / (1 + d**2)
            out[r["name"]] = {"rho": float(sps.spearmanr(cos, pred).statistic),
                              "gap": float(np.nanmax(np.abs(cos - pred)))}
        return out

    def drift_identity_holds(self, gap: float = 0.1) -> dict[str, Any]:
        """The models whose mean cosine lies within `gap` of D²/(1 + D²) at every layer (`holds`), the others
        (`apart`), and the largest gap among the others (`apart_gap`, 0 when there are none)."""
        per = self.drift_identity()
        apart = [n for n, v in per.items() if v["gap"] > gap]
        return {"holds": [n for n in per if n not in apart], "apart": apart,
                "apart_gap": max((per[n]["gap"] for n in apart), default=0.0)}

    def reduced(self) -> str:
        n = len(self.runs)
        return (f"on {n} offline model{'s' if n > 1 else ''} and probes of {self.settings['text_inputs']} "
                f"sentences or sequences, {self.settings['image_inputs']} images, {self.settings['audio_inputs']} "
                "recordings")

    def measured(self) -> str:
        """What every finding measured: the models, the draws, how the mean over models is read."""
        if len(self.runs) < 2:
            return (f"{', '.join(self.names)}; {self.draws} bootstrap draws over the probe's inputs (one model: the "
                    "interval is over its inputs)")
        return (f"{', '.join(self.names)}; the mean over these {len(self.runs)} models with its Student-t interval "
                "over the models (a correlation on Fisher's z)")

    def findings(self) -> list[Finding]:
        """The chapter's questions across the three papers' measures (`FINDINGS`), each an extension."""
        unit, n = self.unit()
        return [spec.finding(self, chapter="synthesis", kind="extension", unit=unit, units=n,
                             reduced=Result.reduced, measured=Result.measured, scale=SCALE) for spec in FINDINGS]
