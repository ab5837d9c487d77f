"""The synthesis chapter: the three papers' measures on the same models, through `tokuni diagnose`.

For every offline model and its untrained twins (the same architecture with random weights, several seeds):
every measure per layer with bootstrap draws over the probe's inputs (`helpers.diagnose`), and where the model
lies outside its twins' spread combined with the probe's interval (`diagnose.measures.compare`); from the same
draws, how well the measures agree on which layers are most collapsed (Spearman correlation across layers); and
at the layer the model's EV₁ rates most collapsed, what three operations do to each input's EV₁ and t_sim —
SoftDecay (Yan et al. Algorithm 1), whitening, and removing the input's mean token (Π₁^⊥, de-escalation's
operation, Yu & Zhang eq. 21) — against an isotropic Gaussian matrix of each input's shape.

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
from ..core.findings import Finding, Partial, Spec
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


def model_study(p: Params, name: str) -> dict[str, Any]:
    """One model and its twins: every measure per layer (estimates, intervals; the twins' mean, spread and
    band; model − twins with the rule that calls a layer different), the rank agreement of the measures, and
    the three operations at the model's most collapsed layer by EV₁."""
    seed_everything(p.seed)
    dev = choose_device(p.device)
    modality = modality_of(name)
    probe = default_probe(modality, _inputs(p, modality), p.seed)
    tok_modality = "text" if modality in ("protein", "chem") else modality
    batch = 16 if modality in ("vision", "audio", "protein", "chem") else 32
    loaded = HM.load(name, device=dev, modality=tok_modality)
    description = loaded.description
    cap = capture(loaded, probe, dev, batch, p.max_tokens)
    del loaded
    W = DM.bootstrap_weights(cap.n_inputs, p.draws, p.seed)
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
    curves: dict[str, Any] = {}
    for meas in got.estimate:
        lo, hi = DM.interval(got.draws[meas], got.estimate[meas], LEVEL)
        t_est = np.stack([t.estimate[meas] for t in twins])
        t_draws = np.stack([t.draws[meas] for t in twins])
        band = DM.twin_band(t_est, t_draws, LEVEL)
        diff = DM.compare(got.estimate[meas], got.draws[meas], t_est, t_draws, LEVEL, cells)
        curves[meas] = {
            "model": {"estimate": got.estimate[meas].tolist(), "low": lo.tolist(), "high": hi.tolist()},
            "twin": {k: band[k].tolist() for k in ("estimate", "low", "high")},
            "twin_spread": band["spread"].tolist(), "twins": t_est.tolist(),
            "difference": {k: diff[k].tolist() for k in ("estimate", "low", "high")},
            "differs": diff["differs"].tolist()}
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
            "dims": got.dims, "layers": len(cap.layers), "twin_seeds": seeds, "cells": cells, "curves": curves,
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

    def differing_share(self) -> Interval:
        """Mean over models of the share of (layer, measure) cells of `RANKED` where the model lies outside its
        twins' spread combined with the probe's interval (`diagnose.measures.compare`), with the models' range."""
        shares = [self.differing_share_of(r["name"]) for r in self.runs]
        return Interval(float(np.mean(shares)), float(min(shares)), float(max(shares)), len(shares), "range")

    def differing_share_of(self, name: str) -> float:
        r = self.run_of(name)
        cells = [bool(d) for meas in RANKED
                 for d, e in zip(r["curves"][meas]["differs"], r["curves"][meas]["difference"]["estimate"],
                                 strict=True) if e is not None and not math.isnan(e)]
        return float(np.mean(cells))

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


#: the columns of a finding that two measures rank a model's layers alike (`Result.agreement`)
AGREE = dict(quantity="Spearman correlation across layers, mean over models", section="synthesis-agree")
#: the section of a finding on what an operation does at the most collapsed layer: after − before (`Result.change`)
OPERATION = dict(section="synthesis-operations")
#: t_sim after an operation against before
TSIM = "t_sim after − before, mean over inputs and models"

FINDINGS: tuple[Spec, ...] = (
    Spec("synthesis-agree-cos-ev1", "§3 (mean cosine) with Yan eq. (5)",
         "Godey et al.'s anisotropy (mean cosine) and Yan et al.'s EV₁ rank a model's layers alike",
         read=lambda res: Partial(res.agreement("cos", "ev1")), more=GODEY, **AGREE),
    Spec("synthesis-agree-tsim-ev1", "Def. 1.1 (t_sim) with Yan eq. (5)",
         "Yu & Zhang's t_sim and Yan et al.'s EV₁ rank a model's layers alike",
         read=lambda res: Partial(res.agreement("t_sim", "ev1")), more=YU, **AGREE),
    Spec("synthesis-agree-cos-tsim", "§3 (mean cosine) with Yu Def. 1.1",
         "Godey et al.'s mean cosine over the whole probe and Yu & Zhang's within-input t_sim rank a model's layers "
         "alike", read=lambda res: Partial(res.agreement("cos", "t_sim")), more=GODEY, **AGREE),
    Spec("synthesis-softdecay-ev1", "Algorithm 1", "SoftDecay applied to the most collapsed layer lowers each "
         "input's EV₁", quantity="EV₁ after − before, mean over inputs and models", direction="below",
         read=lambda res: Partial(res.change("ev1_softdecay", "ev1_raw")), more=YAN, **OPERATION),
    Spec("synthesis-softdecay-tsim", "Algorithm 1 with Yu Def. 1.1",
         "SoftDecay applied to the most collapsed layer lowers each input's t_sim too", quantity=TSIM,
         direction="below", read=lambda res: Partial(res.change("t_sim_softdecay", "t_sim_raw")), more=YAN,
         **OPERATION),
    Spec("synthesis-whitening-tsim", "§5 (whitening baseline)",
         "whitening the most collapsed layer lowers each input's t_sim", quantity=TSIM, direction="below",
         read=lambda res: Partial(res.change("t_sim_whitening", "t_sim_raw")), more=YAN, **OPERATION),
    Spec("synthesis-centring-anisotropy", "§3 (mean cosine)", "removing the mean vector removes the anisotropy of "
         "the most collapsed layer", quantity="pooled mean cosine after − before removing the probe's mean",
         direction="below", read=lambda res: Partial(res.change("cos_pooled_centred", "cos_pooled_raw")),
         more=GODEY, **OPERATION),
    Spec("synthesis-centring-skew", "eq. (21) (de-escalation's Π₁^⊥)",
         "removing each input's mean token leaves a dominant direction: EV₁ stays above an isotropic matrix's of "
         "the same shape", quantity="EV₁ of the centred input − EV₁ of an isotropic Gaussian input, mean over models",
         direction="above", read=lambda res: Partial(res.change("ev1_centred", "ev1_isotropic")), more=YU,
         **OPERATION),
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


__all__ = ["Params", "Result", "run", "model_study", "RANKED", "HEADLINE", "OPERATIONS"]
