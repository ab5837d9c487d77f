"""The synthesis chapter: the three papers' measures on the same models, through `tokuni diagnose`.

For every offline model and its untrained twins (the same architecture with random weights, several seeds):
every measure per layer with bootstrap draws over the probe's inputs (`helpers.diagnose`), and where the model is
unlike a new draw from its twins by `tokuni diagnose`'s own twin test (`diagnose.measures.TwinTest`: the twins'
spread beside the probe's sampling, Benjamini–Hochberg over the model's cells); from the same draws, how well the
measures agree on which layers are most collapsed (Spearman correlation across layers); at the layer the model's
EV₁ rates most collapsed, what three operations do to each input's EV₁ and t_sim — SoftDecay (Yan et al.
Algorithm 1), whitening, and removing the input's mean token (Π₁^⊥, de-escalation's operation, Yu & Zhang eq. 21)
— against an isotropic Gaussian matrix of each input's shape; and, for a text-like model, Yu & Zhang's t_cos with
the special tokens kept, beside Godey et al.'s average cosine across the probe without them.

A statement across models is a claim about models, so its interval is taken over the models: a mean over
models is read with the Student-t interval of the per-model values (a correlation on Fisher's z, so its interval
stays inside [−1, 1]); the models are the ones that load offline, and the interval says how far the mean would move
with other models like them. With one model (the `ci` preset) there are no models to resample, and the mean's
interval is that model's percentile interval over its probe's inputs (`unit` says which). Per model, a rank
correlation across layers has its layers as the unit (Fisher's z over the layers, with Bonett and Wright's
standard error), and a change under an operation the percentile interval of its draws over the inputs."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from itertools import combinations
from typing import Any, ClassVar

import numpy as np
import torch
from scipy import stats as sps

from ..book import results
from ..book.params import ChapterParams, rules
from ..book.runtime import choose_device, run_seeds, seed_everything
from ..core import measures as M
from ..core.findings import Finding, Spec
from ..core.papers import SOFTDECAY_ALPHA
from ..core.softdecay import softdecay_transform, whitening_apply, whitening_fit
from ..core.stats import Interval, fisher_t_interval, rank_interval, t_interval
from ..diagnose import measures as DM
from ..diagnose.capture import capture
from ..diagnose.probe import default_probe
from ..diagnose.run import modality_of
from ..hf import models as HM

#: the measures whose rank agreement across layers the chapter reads (sign: + where a larger value is more
#: collapsed; the participation ratio falls as a cloud collapses)
RANKED = ("cos", "cos_centred", "drift", "pr", "top3", "ev1", "tokenuni", "rbf_dis", "skew", "t_sim")
#: the three papers' headline measures
HEADLINE = {"godey2024": "cos", "yan2022": "ev1", "yu2024": "t_sim"}
#: the operations applied to one layer
OPERATIONS = ("softdecay", "whitening", "centred")
LEVEL = 0.95


@dataclass(frozen=True)
class Params(ChapterParams):
    """The three papers' measures side by side on the offline models and their untrained twins."""

    models: tuple[str, ...] = ("all-MiniLM-L6-v2", "all-mpnet-base-v2", "SmolLM2-135M-Instruct", "AntiBERTy",
                               "rxnmapper-ALBERT", "DINOv2-S/14", "EfficientNet-Lite0", "whisper-tiny.en",
                               "whisper-base")
    text_inputs: int = 96          # sentences (and antibody chains, SMILES) in each text-like probe
    image_inputs: int = 32
    audio_inputs: int = 12
    draws: int = 200
    twins: int = 5                 # untrained twins per model (seeds seed, seed + 1, …)
    max_tokens: int = 128          # a text cut to its first 128 tokens; at most 128 patches / frames per input
    alpha: float = SOFTDECAY_ALPHA            # SoftDecay's α (Yan et al.'s default)

    CHAPTER: ClassVar[str] = "synthesis"
    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {
        "ci": dict(models=("all-MiniLM-L6-v2",), text_inputs=32, draws=100),
        "book": dict(),
        "paper": dict(text_inputs=128, image_inputs=48, audio_inputs=32, max_tokens=256),
    }
    RULES: ClassVar = rules(
        models=(lambda v: len(v) >= 1, "needs at least one model"),
        text_inputs=(lambda v: v >= 8, "needs at least 8 inputs"),
        image_inputs=(lambda v: v >= 8, "needs at least 8 inputs"),
        audio_inputs=(lambda v: v >= 4, "needs at least 4 inputs"),
        draws=(lambda v: v >= 20, "needs at least 20 bootstrap draws"),
        twins=(lambda v: v >= 2, "needs at least 2 twins (the spread of random initialisations)"),
        alpha=(lambda v: -1 <= v < 0, "SoftDecay's α lies in [−1, 0)"),
    )


def _arr(values: list) -> np.ndarray:
    """A stored list (None where a value is missing) as floats, NaN for None."""
    return np.array([np.nan if v is None else v for v in values], dtype=float)


def _inputs(p: Params, modality: str) -> int:
    return {"vision": p.image_inputs, "audio": p.audio_inputs}.get(modality, p.text_inputs)




def _spearman_rows(est: dict[str, np.ndarray], draws: dict[str, np.ndarray]) -> dict[str, dict[str, Any]]:
    """Spearman correlation across layers of every pair of `RANKED` measures (sign-adjusted so that + means
    they agree on which layers are most collapsed), for the estimate and each draw."""
    out = {}
    for a, b in combinations(RANKED, 2):
        sa, sb = DM.COLLAPSE_SIGN[a], DM.COLLAPSE_SIGN[b]
        e = sps.spearmanr(sa * est[a], sb * est[b]).statistic
        d = [sps.spearmanr(sa * x, sb * y).statistic for x, y in zip(draws[a], draws[b], strict=True)]
        out[f"{a}|{b}"] = {"estimate": float(e), "draws": [float(x) for x in d]}
    return out


def _operations(X: torch.Tensor, m: torch.Tensor, alpha: float, seed: int) -> dict[str, np.ndarray]:
    """Per input: EV₁ and t_sim of the layer as it is, after SoftDecay, after whitening (fitted on the layer's
    pooled vectors), after removing the input's mean token; EV₁ of an isotropic Gaussian matrix of the input's
    shape; and the pooled mean cosine before and after removing the probe's mean vector."""
    Xd = X.double()
    mu, W = whitening_fit(Xd[m])
    whitened = whitening_apply(Xd, mu, W) * m.unsqueeze(-1)
    soft = softdecay_transform(Xd, alpha, mask=m)
    centred = M.project_ones_perp(Xd, m)
    g = torch.Generator().manual_seed(seed)
    iso = torch.randn(Xd.shape, generator=g, dtype=torch.float64) * m.unsqueeze(-1)
    out = {}
    for name, Y in (("raw", Xd), ("softdecay", soft), ("whitening", whitened), ("centred", centred)):
        out[f"ev1_{name}"] = M.explained_variance(Y, 1, m).numpy()
        out[f"t_sim_{name}"] = M.t_sim(Y, m).numpy()
    out["ev1_isotropic"] = M.explained_variance(iso, 1, m).numpy()
    out["tokenuni_raw"] = M.token_uni(Xd, m).numpy()
    out["tokenuni_centred"] = M.token_uni(centred, m).numpy()
    return out


def _mean_ranked(rows: list[dict[str, dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """The twins' rank correlations averaged over the twins, for the estimate and each draw."""
    return {k: {"estimate": float(np.mean([r[k]["estimate"] for r in rows])),
                "draws": np.mean([r[k]["draws"] for r in rows], axis=0).tolist()} for k in rows[0]}


def curves_record(got: DM.Measured, twins: list[DM.Measured], level: float = LEVEL) -> dict[str, Any]:
    """Per measure what the chapter keeps of a model and its twins: the model's estimate per layer with its
    percentile interval over the inputs, every twin's estimate, and `paired_var`, the bootstrap variance of the
    model's paired difference from the twins' mean (`diagnose.measures.paired_variance`) — with the twins'
    estimates, all that `tokuni diagnose`'s twin test reads (`Result.twin_test`)."""
    out = {}
    for meas in got.estimate:
        lo, hi = DM.interval(got.draws[meas], got.estimate[meas], level)
        t_draws = np.stack([t.draws[meas] for t in twins])
        out[meas] = {"model": {"estimate": got.estimate[meas].tolist(), "low": lo.tolist(), "high": hi.tolist()},
                     "twins": np.stack([t.estimate[meas] for t in twins]).tolist(),
                     "paired_var": DM.paired_variance(got.draws[meas], t_draws).tolist()}
    return out


def t_cos_with_specials(cap, W: torch.Tensor, level: float = LEVEL) -> dict[str, list[float]]:
    """Yu & Zhang's t_cos (eq. 1: the mean cosine over the pairs of one sequence's tokens, special tokens kept),
    averaged over the inputs, per layer, with its percentile interval over the inputs (the draws `W`)."""
    est, low, high = [], [], []
    Wf = W.double()
    for X, m in cap.layers:
        v = M.t_cos(X.double(), m)
        draws = ((Wf @ v) / Wf.sum(1)).numpy()[:, None]
        lo, hi = DM.interval(draws, np.array([float(v.mean())]), level)
        est.append(float(v.mean()))
        low.append(float(lo[0]))
        high.append(float(hi[0]))
    return {"estimate": est, "low": low, "high": high}


def model_study(p: Params, name: str) -> dict[str, Any]:
    """One model and its twins: every measure per layer (estimates, intervals; the twins' estimates and what the
    twin test reads), the rank agreement of the measures, the three operations at the model's most collapsed layer
    by EV₁, and for a text-like model t_cos with its special tokens kept."""
    seed_everything(p.seed)
    dev = choose_device(p.device)
    modality = modality_of(name)
    probe = default_probe(modality, _inputs(p, modality), p.seed)
    tok_modality = "text" if modality in ("protein", "chem") else modality
    batch = 16 if modality in ("vision", "audio", "protein", "chem") else 32
    loaded = HM.load(name, device=dev, modality=tok_modality)
    description = loaded.description
    cap = capture(loaded, probe, dev, batch, p.max_tokens)
    W = DM.bootstrap_weights(cap.n_inputs, p.draws, p.seed)
    t_cos = None
    if tok_modality == "text":
        spec = capture(loaded, probe, dev, batch, p.max_tokens, qk=False, specials=True)
        if spec.n_inputs == cap.n_inputs:
            t_cos = {**t_cos_with_specials(spec, W),
                     "specials_per_input": float((spec.layers[0][1].sum() - cap.layers[0][1].sum()) / cap.n_inputs)}
        del spec
    del loaded
    got = DM.measure(cap.layers, W, cap.qk, with_isoscore=False)
    seeds = run_seeds(p.seed, p.twins)
    twins = []
    for s in seeds:
        twin_loaded = HM.load(name, untrained=True, device=dev, modality=tok_modality, seed=s)
        tcap = capture(twin_loaded, probe, dev, batch, p.max_tokens, qk=cap.qk is not None)
        del twin_loaded
        twins.append(DM.measure(tcap.layers, W, tcap.qk, with_isoscore=False))
        del tcap
    cells = int(sum(np.isfinite(got.estimate[m]).sum() for m in got.estimate))
    ranked = {"model": _spearman_rows(got.estimate, got.draws),
              "twin": _mean_ranked([_spearman_rows(t.estimate, t.draws) for t in twins])}
    layer = int(np.nanargmax(got.estimate["ev1"]))
    X, m = cap.layers[layer]
    ops = _operations(X, m, p.alpha, p.seed)
    Wn = W.numpy()
    op_draws = {k: {"estimate": float(v.mean()), "draws": ((Wn @ v) / Wn.sum(1)).tolist()} for k, v in ops.items()}
    pooled = {k: DM.pooled_measures(X, m, W)[k].numpy() for k in ("cos", "cos_centred")}
    op_draws["cos_pooled_raw"] = {"estimate": float(pooled["cos"][0]), "draws": pooled["cos"][1:].tolist()}
    op_draws["cos_pooled_centred"] = {"estimate": float(pooled["cos_centred"][0]),
                                      "draws": pooled["cos_centred"][1:].tolist()}
    return {"name": name, "description": description, "modality": modality, "units": cap.units,
            "probe": probe.description, "inputs": cap.n_inputs, "vectors": int(cap.layers[-1][1].sum()),
            "dims": got.dims, "layers": len(cap.layers), "twin_seeds": seeds, "cells": cells,
            "curves": curves_record(got, twins), "t_cos_specials": t_cos,
            "ranked": ranked, "qk_skipped": cap.qk_skipped if cap.qk is None else "", "operation_layer": layer,
            "operations": op_draws}


@dataclass
class Result(results.Result):
    """`runs`: one record per model (`model_study`)."""

    settings: dict[str, Any]
    runs: list[dict[str, Any]]
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
        return DM.TwinTest.of({m: _arr(c[m]["model"]["estimate"]) for m in c},
                              {m: np.array(c[m]["twins"], dtype=float) for m in c},
                              {m: _arr(c[m]["paired_var"]) for m in c}, self.level)

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
        cos = _arr(r["curves"]["cos"]["model"]["estimate"])
        t_cos = _arr(r["t_cos_specials"]["estimate"])
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


# ------------------------------------------------------------------ the findings

#: the setting every finding is read at
SCALE = ("the book's offline models (those that load offline, not a sample of a population); the papers measure one "
         "model family each")
#: the paper whose measure a finding puts first
GODEY, YAN, YU = (dict(paper=p) for p in ("godey2024", "yan2022", "yu2024"))


def agree(key: str, where: str, claim: str, a: str, b: str, paper: dict[str, str]) -> Spec:
    """A finding that measures `a` and `b` rank a model's layers alike (`Result.agreement`)."""
    return Spec(key, where, claim, quantity="Spearman correlation across layers, mean over models",
                effect=lambda res: res.agreement(a, b), section="synthesis-agree", more=paper)


def change(key: str, where: str, claim: str, quantity: str, after: str, before: str, paper: dict[str, str],
           direction: str = "below") -> Spec:
    """A finding on what an operation does at the most collapsed layer: `after` − `before` (`Result.change`)."""
    return Spec(key, where, claim, quantity=quantity, effect=lambda res: res.change(after, before),
                direction=direction, section="synthesis-operations", more=paper)


#: t_sim after an operation against before
TSIM = "t_sim after − before, mean over inputs and models"

FINDINGS: tuple[Spec, ...] = (
    agree("synthesis-agree-cos-ev1", "§3 (mean cosine) with Yan eq. (5)",
          "Godey et al.'s anisotropy (mean cosine) and Yan et al.'s EV₁ rank a model's layers alike",
          "cos", "ev1", GODEY),
    agree("synthesis-agree-tsim-ev1", "Def. 1.1 (t_sim) with Yan eq. (5)",
          "Yu & Zhang's t_sim and Yan et al.'s EV₁ rank a model's layers alike", "t_sim", "ev1", YU),
    agree("synthesis-agree-cos-tsim", "§3 (mean cosine) with Yu Def. 1.1",
          "Godey et al.'s mean cosine over the whole probe and Yu & Zhang's within-input t_sim rank a model's layers "
          "alike", "cos", "t_sim", GODEY),
    change("synthesis-softdecay-ev1", "Algorithm 1", "SoftDecay applied to the most collapsed layer lowers each "
           "input's EV₁", "EV₁ after − before, mean over inputs and models", "ev1_softdecay", "ev1_raw", YAN),
    change("synthesis-softdecay-tsim", "Algorithm 1 with Yu Def. 1.1",
           "SoftDecay applied to the most collapsed layer lowers each input's t_sim too", TSIM,
           "t_sim_softdecay", "t_sim_raw", YAN),
    change("synthesis-whitening-tsim", "§5 (whitening baseline)",
           "whitening the most collapsed layer lowers each input's t_sim", TSIM, "t_sim_whitening", "t_sim_raw", YAN),
    change("synthesis-centring-anisotropy", "§3 (mean cosine)", "removing the mean vector removes the anisotropy of "
           "the most collapsed layer", "pooled mean cosine after − before removing the probe's mean",
           "cos_pooled_centred", "cos_pooled_raw", GODEY),
    change("synthesis-centring-skew", "eq. (21) (de-escalation's Π₁^⊥)",
           "removing each input's mean token leaves a dominant direction: EV₁ stays above an isotropic matrix's of "
           "the same shape", "EV₁ of the centred input − EV₁ of an isotropic Gaussian input, mean over models",
           "ev1_centred", "ev1_isotropic", YU, direction="above"),
)


def run(p: Params) -> Result:
    """Each model through the committed-results cache (`results/synthesis/book/<model>.json`), then the
    statistics across models (computed on reading)."""
    runs, missing = [], {}
    for name in p.models:
        safe = name.replace("/", "_")
        try:
            rec, _ = results.cached(p, f"model-{safe}", lambda name=name: model_study(p, name), drop=("models",),
                                    model=name)
        except HM.ModelUnavailable as err:
            missing[name] = str(err).splitlines()[0]
            continue
        runs.append(rec)
    if not runs:
        raise HM.ModelUnavailable(f"none of the models could be loaded: {missing}")
    return Result(settings=p.cache_key(drop=("models",)), runs=runs, draws=p.draws, missing=missing)


__all__ = ["Params", "Result", "run", "model_study", "curves_record", "t_cos_with_specials", "RANKED", "HEADLINE",
           "OPERATIONS"]
