"""The STS chapter's `Result`: every encoder's records (`records`: `Run`, `Reading`, `SameFit`), the paper's
tables, and the statistics that read across records (whitening − SoftDecay under its procedures, the planted
experiment, the paper's values); the findings are `findings.py`'s table."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np
import pandas as pd

from ...core.findings import Finding
from ...core.scale import MIN_POINTS, Extrapolation, extrapolate
from ...core.stats import Interval, Trend, against_trend, fit_trend, t_interval
from ...machinery import results
from ...machinery.results import jsonable
from .params import BOOK_BERT, CROSSFIT_HOW, PAPER_BERT, PLANT_METHODS, SMOL
from .records import SD, Demo, Maps, Reading, Record, Run, SameFit


@dataclass
class Result(results.Result):
    """Everything the chapter shows. `runs[model]` (the main models) and `extras[model]` (the anisotropic
    encoders: fewer pairs, `extra_pooling`) are `Run`s; `readings[model]` the subsample readings under each
    pooling and `full_readings[model]` those on every pair (`Reading`s); `samefit[model]` whitening − SoftDecay
    under the same-fit procedures (`SameFit`); `maps` the t-SNE maps of the first model's sets;
    `averages[model][protocol][method]` the Table 1 mean over the sets. Stored dicts become records here (a
    saved Result and the committed runs read back as they were written)."""

    models: list[str]
    datasets: list[str]
    pooling: str
    alpha: float
    scale: str
    runs: dict[str, Run]
    from_cache: dict[str, bool]
    averages: dict[str, dict[str, dict[str, float]]]
    lsds_wins: dict[str, int]
    plant_sizes: list[float] = field(default_factory=list)
    extras: dict[str, Run] = field(default_factory=dict)
    extra_pooling: str = "last"
    paper_table1: list[dict] = field(default_factory=list)
    paper_table4: list[dict] = field(default_factory=list)
    encoder_demo: Demo = field(default_factory=dict)
    bootstrap: int = 0
    max_pairs: int = 0
    extra_max_pairs: int = 0
    readings: dict[str, Reading] = field(default_factory=dict)
    unavailable: dict[str, str] = field(default_factory=dict)
    paper_pooling: str = "first_last_l1"
    poolings: list[str] = field(default_factory=list)
    plant_directions: int = 0
    reading_pairs: int = 0
    maps: Maps = field(default_factory=dict)
    full_readings: dict[str, Reading] = field(default_factory=dict)
    samefit: dict[str, SameFit] = field(default_factory=dict)
    path: dict[str, Reading] = field(default_factory=dict)
    #: the figures' runs of the encoders other than the first model (`figure_runs.figure_run`): LSDS, planted, maps
    figure_runs: dict[str, dict] = field(default_factory=dict)

    def __post_init__(self) -> None:
        """The converter: each stored dict becomes its record, given the settings it reads itself with."""
        sets = tuple(self.datasets)
        self.runs = {m: Run.of(r, encoder=m, sets=sets, bootstrap=self.bootstrap) for m, r in self.runs.items()}
        self.extras = {m: Run.of(r, encoder=m, sets=sets, bootstrap=self.bootstrap) for m, r in self.extras.items()}
        common = dict(pooling=self.paper_pooling, sets=sets, bootstrap=self.bootstrap)
        self.readings = {m: Reading.of(r, encoder=m, per_set=self.per_reading(m), **common)
                         for m, r in self.readings.items()}
        self.full_readings = {m: Reading.of(r, encoder=m, per_set=0, **common) for m, r in self.full_readings.items()}
        self.samefit = {m: SameFit.of(r, encoder=m) for m, r in self.samefit.items()}
        self.path = {k: Reading.of(r, encoder=BOOK_BERT, per_set=0, **common) for k, r in self.path.items()}

    def to_json(self) -> dict[str, Any]:
        def plain(v):
            return {k: x.to_json() for k, x in v.items()} if isinstance(v, dict) and any(
                isinstance(x, Record) for x in v.values()) else v
        return jsonable({f.name: plain(getattr(self, f.name)) for f in fields(self)})

    # --- the records ----------------------------------------------------------------------------------

    def all_runs(self) -> dict[str, Run]:
        """Every encoder's main run: the main models, then the anisotropic ones."""
        return {**self.runs, **self.extras}

    def run_of(self, model: str) -> Run:
        return self.all_runs()[model]

    def read(self, model: str) -> Reading | None:
        """`model`'s subsample reading (None when it was not run: a model not on this machine)."""
        return self.readings.get(model)

    def per_reading(self, model: str) -> int:
        """Pairs per set of `model`'s subsample reading."""
        return self.extra_max_pairs if model in self.extras else self.reading_pairs

    def per_run(self, model: str) -> int:
        """Pairs per set of `model`'s main run (0: every pair)."""
        return self.extra_max_pairs if model in self.extras else self.max_pairs

    def full_only(self) -> list[str]:
        """The encoders read on every pair and nowhere else (no subsample re-reading): all-mpnet-base-v2."""
        return [m for m in self.full_readings if self.read(m) is None]

    # --- whitening − SoftDecay ------------------------------------------------------------------------

    def white_minus_sd(self, model: str, whitening: str = "whitening",
                       pooling: str | None = None) -> tuple[Interval, str]:
        """whitening − SoftDecay (mean over the sets, Spearman ×100) under a procedure whose estimate and interval
        come from the same fits, and how it was made: cross-fitting where the encoder's same-fit run exists
        (`samefit`), else the encoder's subsample draws, each fitted on its own pairs (Student-t over the draws),
        else — one draw only — the paired bootstrap that refits both transforms on every resample (its resamples
        repeat pairs, which handicaps whitening: `Reading.refit_shift`). For an encoder without readings the
        committed run's per-set differences give a Student-t interval over the sets."""
        q = pooling or self.paper_pooling
        same, rd = self.samefit.get(model), self.read(model)
        if same is not None and q == same.pooling:
            return same.iv(whitening), CROSSFIT_HOW
        if rd is not None and rd.n_draws > 1:
            return (rd.over_draws(whitening, SD, q),
                    f"subsamples of {rd.per_set} pairs per set without replacement, each fitted on its "
                    f"own pairs; Student-t over {rd.n_draws} draws")
        if rd is not None:
            return (rd.refit_iv(whitening, q),
                    "paired bootstrap, both transforms refitted on every resample (resamples repeat pairs)")
        return self.run_of(model).across_sets(whitening, SD), "t-interval over the seven sets"


    def white_sd_procedures(self) -> list[dict]:
        """whitening − SoftDecay (full whitening, mean over the sets) per encoder under every procedure this scale
        ran: cross-fitted and half-sampled (`samefit`, same fits for estimate and interval), over subsample draws
        each fitted on its own pairs, the paired bootstrap that refits on every resample (its resamples repeat
        pairs: shown, never deciding), and the transforms fitted once on all pairs (a point). Each: encoder,
        procedure, Interval (or a bare point), whether a finding reads it."""
        out = []
        for model in [*dict.fromkeys([BOOK_BERT, SMOL, self.models[0], *self.full_readings])]:
            if (same := self.samefit.get(model)) is not None:
                n = same.n_pairs
                out += [{"encoder": model, "procedure": f"cross-fitted, {n:,} pairs", "effect": same.iv(),
                         "decides": True},
                        {"encoder": model, "procedure": f"half-samples without replacement, {n:,} pairs",
                         "effect": same.iv(how="halfsample"), "decides": True},
                        {"encoder": model, "procedure": f"fitted once on all {n:,} pairs (a point)",
                         "effect": Interval(same.point(), math.nan, math.nan, 1, "t"), "decides": False}]
            if (rd := self.read(model)) is not None:
                if rd.n_draws > 1:
                    what = f"{rd.n_draws} subsamples of {rd.per_set} pairs per set, each fitted on its own pairs"
                    out.append({"encoder": model, "procedure": what, "decides": model not in self.samefit,
                                "effect": rd.over_draws("whitening", SD)})
                out.append({"encoder": model, "procedure": "bootstrap refitted on every resample (repeats pairs)",
                            "effect": rd.refit_iv(), "decides": False})
        return out

    def match_margin(self) -> float:
        """What 'whitening matches SoftDecay' allows: the smallest SoftDecay − WhiteBERT gap the paper
        reports as a win over its four PTLMs (Table 1 Avg)."""
        models = {r["model"] for r in self.paper_table1}
        gaps = [self.paper_value("SoftDecay", m, "WhiteBERT") for m in models
                if {"SoftDecay", "WhiteBERT"} <= {r["method"] for r in self.paper_table1 if r["model"] == m}]
        return float(min(gaps))


    # --- planted anisotropy and LSDS (the first model) --------------------------------------------------

    def planted(self, kind: str) -> pd.DataFrame:
        """Mean over the sets of each method's score (paper protocol) per planted size (first model)."""
        return self.runs[self.models[0]].planted_curve(kind, self.plant_sizes)

    def recovered(self, kind: str, method: str) -> float:
        """The fraction of the raw score lost at the largest planted size that `method` keeps."""
        df = self.planted(kind)
        lost = float(df["vanilla"].iloc[0] - df["vanilla"].iloc[-1])
        return float(df[method].iloc[-1] - df["vanilla"].iloc[-1]) / lost if lost > 0 else float("nan")

    def planted_dirs(self, kind: str, method: str) -> np.ndarray:
        """(sizes, directions) mean-over-sets scores of the planted experiment (first model, paper pooling)."""
        return self.readings[self.models[0]].planted_dirs(kind, method)


    def recovered_iv(self, kind: str, method: str) -> Interval:
        """The share of the raw score lost at the largest planted size that `method` wins back, per random
        direction, as the mean with its Student-t interval over the directions."""
        raw, m = self.planted_dirs(kind, "vanilla"), self.planted_dirs(kind, method)
        return t_interval((m[-1] - raw[-1]) / (raw[0] - raw[-1]))

    def planted_change(self, kind: str, method: str) -> Interval:
        """`method` − raw at the largest planted size, per direction: mean with its t-interval."""
        return t_interval(self.planted_dirs(kind, method)[-1] - self.planted_dirs(kind, "vanilla")[-1])

    def lsds_readings(self) -> pd.DataFrame:
        """LSDS of SoftDecay − of whitening per set under the three readings of eq. (6) (first model, paper
        pooling)."""
        return self.readings[self.models[0]].lsds_table()

    def lsds_reading_gap(self, weights: str = "authors") -> Interval:
        """LSDS of SoftDecay − of whitening under one reading, mean with its t-interval over the sets."""
        return t_interval(self.lsds_readings()[weights].to_numpy())

    # --- the paper's tables ----------------------------------------------------------------------------

    def paper_value(self, method: str, model: str = PAPER_BERT, against: str | None = "vanilla") -> float:
        """The paper's Table 1 Avg of `method` for `model` (data/yan_2022_table1.csv), minus `against`'s."""
        avg = {r["method"]: float(r["Avg"]) for r in self.paper_table1 if r["model"] == model}
        return avg[method] - (avg[against] if against else 0.0)

    def paper_trend(self, method: str, against: str = "vanilla") -> Trend:
        """The paper's own models as an axis (Table 1 Avg): each model's raw score against its `method` −
        `against` difference, with the least-squares line through them (`core.stats.fit_trend`)."""
        models = sorted({r["model"] for r in self.paper_table1})
        have = [m for m in models if {method, against, "vanilla"} <= {r["method"] for r in self.paper_table1
                                                                      if r["model"] == m}]
        return fit_trend([self.paper_value("vanilla", m, None) for m in have],
                         [self.paper_value(method, m, against) for m in have])

    def trend_reading(self, effect: Interval, raw: float, method: str, against: str = "vanilla") -> str:
        """A stand-in's effect against the paper's trend at the stand-in's own raw score, in words: the trend's
        prediction there with its 95 % prediction interval, the leave-one-model-out range, and where the effect
        lies (`core.stats.against_trend`)."""
        t = self.paper_trend(method, against)
        band, (lo, hi) = t.predict(raw), t.leave_one_out(raw)
        where = "inside" if t.within_range(raw) else "beyond"
        return (f"the paper's {t.n} models' trend (raw score against this difference) predicts {band.text(2)} at raw "
                f"STS {raw:.2f}, {where} their range (leaving one model out: {lo:+.2f} to {hi:+.2f}): "
                f"{against_trend(effect, t, raw)}")

    # --- the book MLM's own path along Table 1's axis ---------------------------------------------------------

    def path_points(self, method: str = SD, against: str = "vanilla") -> pd.DataFrame:
        """The book MLM BERT's pretraining checkpoints (`path`): per seed and step, its raw Table 1 Avg (every pair,
        the paper-comparison pooling), `method` − `against` there, and its held-out MLM loss; sorted by seed and
        step. Empty when no checkpoint was read."""
        rows = []
        for k, r in self.path.items():
            seed, step = (int(v) for v in k.split(":"))
            rows.append(dict(seed=seed, step=step, raw=r.avg("vanilla"), effect=r.avg(method) - r.avg(against),
                             held_out=r.other.get("held_out_mlm_nats")))
        cols = ["seed", "step", "raw", "effect", "held_out"]
        return pd.DataFrame(rows, columns=cols).sort_values(["seed", "step"]).reset_index(drop=True)

    #: the forms of the book MLM's path: the paper's own models' relation is a straight line in the raw score (its
    #: trend), so the path is read the same way, with a log form beside it as the sensitivity to a bend
    PATH_FORMS = ("linear", "log")

    def path_trend(self, method: str = SD, against: str = "vanilla") -> Extrapolation | None:
        """The book MLM's path (`path_points`) as a trend of `method` − `against` against its raw score, read at
        BERT-base-cased's raw score (the paper's Table 1 Avg): every checkpoint a point, each seed a unit whose own
        fit widens the band (`core.scale.extrapolate`). None with fewer than `core.scale.MIN_POINTS` checkpoints."""
        pts = self.path_points(method, against)
        if pts["raw"].nunique() < MIN_POINTS:
            return None
        return extrapolate(pts["raw"], pts["effect"], self.paper_value("vanilla", against=None), self.PATH_FORMS,
                           axis="raw STS (Table 1 Avg)", groups=pts["seed"].tolist(),
                           why="one model's own checkpoints, each at its own raw score: the paper's own models lie on "
                               "a straight line in the raw score, and a log form reads a bend toward the paper's "
                               "point")

    def paper_table4_value(self, dataset: str, metric: str, column: str) -> float:
        """One cell of the paper's Table 4 as printed (data/yan_2022_table4.csv); NaN when absent."""
        for r in self.paper_table4:
            if r["dataset"] == dataset and r["metric"] == metric:
                return float(r.get(column, np.nan))
        return float("nan")

    def paper_table4_change(self, metric: str, model: str = "BERT") -> float:
        """The paper's Table 4: `model`+SoftDecay − `model` for `metric`, mean over the sets as printed, leaving
        out a cell whose SoftDecay value is not below the raw one for EV₁ or TokenUni (STS14's EV₁, evidently
        transposed: `data/README.md`)."""
        diffs = [float(r[f"{model}+SoftDecay"]) - float(r[model]) for r in self.paper_table4 if r["metric"] == metric
                 and (metric == "RBF_dis" or float(r[f"{model}+SoftDecay"]) < float(r[model]))]
        return float(np.mean(diffs)) if diffs else float("nan")

    def findings(self) -> list[Finding]:
        """The paper's claims this chapter tests, built from `findings.FINDINGS` (verdict by the one rule)."""
        from .findings import build

        return build(self)

    # --- what the figures and the prose read across the records: extremes over the sets, the figure runs ----------

    def flips_over_sets(self, model: str, column: str = "raw", how: str = "max", reading: str | None = None,
                        pooling: str | None = None):
        """The fewest (`how="min"`) or most (`"max"`) of one column over the sets: of `model`'s main-run flips table
        (`Run.flips`: counts, `rank`, `sigma_min`, `sigma_max`), or with `reading="draws"` / `"every pair"` of its
        subsample / every-pair reading's flip counts under `pooling` (`Reading.flip_counts`: per method, and
        `directions`)."""
        if reading is None:
            table = self.run_of(model).flips()
        else:
            table = (self.read(model) if reading == "draws" else self.full_readings[model]).flip_counts(pooling)
        return getattr(table[column], how)().item()

    def lsds_reading_wins(self, weights: str = "authors") -> int:
        """On how many sets SoftDecay has the lower LSDS than whitening under one reading of eq. (6) (first model,
        paper pooling: `lsds_readings`)."""
        return int((self.lsds_readings()[weights] < 0).sum())

    def map_pairs(self) -> int | float:
        """The fewest pairs a t-SNE map of the first model shows (NaN when none was drawn)."""
        return min((pn["n"] for panels in self.maps.get("sets", {}).values() for pn in panels.values()),
                   default=float("nan"))

    def path_summary(self) -> dict:
        """The book MLM BERT's pretraining path (`path_points`) in the numbers the prose gives: checkpoints, seeds,
        each seed's last step (most first), the range of the raw score and of SoftDecay − raw, and seed
        `min(seeds)`'s last raw score. Empty when no checkpoint was read."""
        pts = self.path_points()
        if pts.empty:
            return {}
        last = pts.groupby("seed")["step"].max()
        return {"n": len(pts), "seeds": pts["seed"].nunique(), "last_steps": sorted(last.unique(), reverse=True),
                "raw_lo": float(pts["raw"].min()), "raw_hi": float(pts["raw"].max()),
                "sd_lo": float(pts["effect"].min()), "sd_hi": float(pts["effect"].max()),
                "end_raw": float(pts[pts["seed"] == pts["seed"].min()].iloc[-1]["raw"])}

    def figure_models(self) -> list[str]:
        """The encoders the LSDS, planted and t-SNE figures draw: those with a figure run (in the claims' scope)
        first, then the first model."""
        return [*self.figure_runs, self.models[0]]

    def lsds_of(self, model: str) -> dict:
        """`model`'s LSDS per set ({set: {"<map> (<weights>)": value}}): the first model's main run, else its
        figure run."""
        return self.runs[model].lsds if model in self.runs else self.figure_runs[model]["lsds"]

    def lsds_wins_of(self, model: str, weights: str = "normalised") -> int:
        """On how many sets SoftDecay has the lower LSDS than whitening for `model` (`weights`: "normalised" or
        "eq. 6")."""
        return int(sum(v[f"SoftDecay ({weights})"] < v[f"whitening ({weights})"] for v in self.lsds_of(model).values()))

    def lsds_gap_of(self, model: str, weights: str = "normalised") -> Interval:
        """LSDS of SoftDecay − of whitening per set for `model`, mean with its t-interval over the sets."""
        ls = self.lsds_of(model)
        return t_interval([ls[d][f"SoftDecay ({weights})"] - ls[d][f"whitening ({weights})"] for d in ls])

    def planted_of(self, model: str, kind: str) -> pd.DataFrame:
        """Mean over the sets of each method's score per planted size for `model`: the first model's main run
        (`planted`), else its figure run."""
        if model in self.runs:
            return self.planted(kind)
        pl = self.figure_runs[model]["planted"]
        df = pd.DataFrame({m: np.mean([pl[d][kind][m] for d in pl], 0) for m in PLANT_METHODS}, index=self.plant_sizes)
        df.index.name = "planted size (× RMS norm)"
        return df

    def maps_of(self, model: str) -> dict:
        """`model`'s t-SNE maps per set ({set: {method: panel}}): the first model's `maps`, else its figure run."""
        return self.maps.get("sets", {}) if model in self.runs else self.figure_runs[model]["maps"]
