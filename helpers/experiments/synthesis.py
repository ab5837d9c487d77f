"""The synthesis chapter: the three papers' measures on the same models, through `tokuni diagnose`.

For every offline model and its untrained twin: every measure per layer with bootstrap draws over the probe's
inputs (`helpers.diagnose`); from the same draws, how well the measures agree on which layers are most
collapsed (Spearman correlation across layers); and at the layer the model's EV₁ rates most collapsed, what
three operations do to each input's EV₁ and t_sim — SoftDecay (Yan et al. Algorithm 1), whitening, and removing
the input's mean token (Π₁^⊥, de-escalation's operation, Yu & Zhang eq. 21) — against an isotropic Gaussian
matrix of each input's shape."""

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
from ..book.runtime import choose_device, seed_everything
from ..core import measures as M
from ..core.findings import Finding
from ..core.softdecay import softdecay_transform, whitening_apply, whitening_fit
from ..core.stats import Interval
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
    max_tokens: int = 128          # vectors kept per input (evenly spaced)
    alpha: float = -0.6            # SoftDecay's α (Yan et al.'s default)

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
        alpha=(lambda v: -1 <= v < 0, "SoftDecay's α lies in [−1, 0)"),
    )


def _inputs(p: Params, modality: str) -> int:
    return {"vision": p.image_inputs, "audio": p.audio_inputs}.get(modality, p.text_inputs)


def _centre(draws: np.ndarray, estimate: float) -> np.ndarray:
    """Bootstrap draws moved so that their median sits on the full-sample estimate (as `diagnose` reads them)."""
    return np.asarray(draws, dtype=float) - np.nanmedian(draws) + estimate


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


def model_study(p: Params, name: str) -> dict[str, Any]:
    """One model and its twin: every measure per layer (estimates, intervals, paired differences), the rank
    agreement of the measures, and the three operations at the model's most collapsed layer by EV₁."""
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
    twin_loaded = HM.load(name, untrained=True, device=dev, modality=tok_modality)
    tcap = capture(twin_loaded, probe, dev, batch, p.max_tokens, qk=cap.qk is not None)
    del twin_loaded
    twin = DM.measure(tcap.layers, W, tcap.qk, with_isoscore=False)
    curves: dict[str, Any] = {}
    for meas in got.estimate:
        row = {}
        for which, est, dr in (("model", got.estimate[meas], got.draws[meas]),
                               ("twin", twin.estimate[meas], twin.draws[meas]),
                               ("difference", got.estimate[meas] - twin.estimate[meas],
                                got.draws[meas] - twin.draws[meas])):
            lo, hi = DM.interval(dr, est, LEVEL)
            row[which] = {"estimate": est.tolist(), "low": lo.tolist(), "high": hi.tolist()}
        curves[meas] = row
    ranked = {w: _spearman_rows(g.estimate, g.draws) for w, g in (("model", got), ("twin", twin))}
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
            "dims": got.dims, "layers": len(cap.layers), "curves": curves, "ranked": ranked,
            "qk_skipped": cap.qk_skipped if cap.qk is None else "", "operation_layer": layer,
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

    def _mean_over_models(self, get) -> Interval:
        """The mean over models of a per-model statistic, with a two-level bootstrap interval: draw b resamples
        the models (with replacement) and takes draw b of each model chosen (its probe's inputs resampled; each
        model's draws centred on its estimate). So the interval holds both what another set of models and what
        other inputs would give; with one model it is the bootstrap over that model's inputs."""
        est = np.array([get(r)["estimate"] for r in self.runs], dtype=float)
        dr = np.array([_centre(get(r)["draws"], e) for r, e in zip(self.runs, est, strict=True)])   # (K, B)
        K, B = dr.shape
        pick = np.random.default_rng(self.settings.get("seed", 0)).integers(0, K, (B, K))
        means = np.nanmean(dr[pick, np.arange(B)[:, None]], axis=1)
        lo, hi = np.nanpercentile(means, [50 * (1 - self.level), 50 * (1 + self.level)])
        e = float(np.nanmean(est))
        return Interval(e, min(float(lo), e), max(float(hi), e), B, "bootstrap", self.level)

    def per_model(self, get) -> dict[str, Interval]:
        out = {}
        for r in self.runs:
            g = get(r)
            d = _centre(g["draws"], g["estimate"])
            lo, hi = np.nanpercentile(d, [50 * (1 - self.level), 50 * (1 + self.level)])
            out[r["name"]] = Interval(g["estimate"], float(lo), float(hi), len(d), "bootstrap", self.level)
        return out

    def agreement(self, a: str, b: str, which: str = "model") -> Interval:
        """Mean over models of the Spearman correlation across layers of measures `a` and `b`."""
        key = f"{a}|{b}" if f"{a}|{b}" in self.runs[0]["ranked"][which] else f"{b}|{a}"
        return self._mean_over_models(lambda r: r["ranked"][which][key]).clip(-1.0, 1.0)

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
        """Per model, the Spearman correlation across layers of `a` and `b` with its interval over inputs."""
        key = f"{a}|{b}" if f"{a}|{b}" in self.runs[0]["ranked"][which] else f"{b}|{a}"
        return {n: i.clip(-1.0, 1.0) for n, i in self.per_model(lambda r: r["ranked"][which][key]).items()}

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
        """Mean over models of the share of (layer, measure) cells where the model differs from its twin."""
        shares = []
        for r in self.runs:
            cells = [(lo > 0 or hi < 0) for meas in RANKED
                     for lo, hi in zip(r["curves"][meas]["difference"]["low"], r["curves"][meas]["difference"]["high"],
                                       strict=True) if lo is not None and not math.isnan(lo)]
            shares.append(np.mean(cells))
        return Interval(float(np.mean(shares)), float(min(shares)), float(max(shares)), len(shares), "range")

    def reduced(self) -> str:
        n = len(self.runs)
        return (f"on {n} offline model{'s' if n > 1 else ''} and probes of {self.settings['text_inputs']} "
                f"sentences or sequences, {self.settings['image_inputs']} images, {self.settings['audio_inputs']} "
                "recordings")

    # ------------------------------------------------------------------ findings

    def findings(self) -> list[Finding]:
        red = self.reduced()
        measured = f"{', '.join(self.names)}; {self.draws} bootstrap draws over each probe's inputs"
        common = dict(chapter="synthesis", kind="extension", claim_id="", reduced=red, measured=measured,
                      scale="the book's offline models; the papers measure one model family each")
        return [
            Finding(key="synthesis-agree-cos-ev1", paper="godey2024", where="§3 (mean cosine) with Yan eq. (5)",
                    claim="Godey et al.'s anisotropy (mean cosine) and Yan et al.'s EV₁ rank a model's layers alike",
                    quantity="Spearman correlation across layers, mean over models", section="synthesis-agree",
                    effect=self.agreement("cos", "ev1"), direction="above", **common),
            Finding(key="synthesis-agree-tsim-ev1", paper="yu2024", where="Def. 1.1 (t_sim) with Yan eq. (5)",
                    claim="Yu & Zhang's t_sim and Yan et al.'s EV₁ rank a model's layers alike",
                    quantity="Spearman correlation across layers, mean over models", section="synthesis-agree",
                    effect=self.agreement("t_sim", "ev1"), direction="above", **common),
            Finding(key="synthesis-agree-cos-tsim", paper="godey2024", where="§3 (mean cosine) with Yu Def. 1.1",
                    claim="Godey et al.'s mean cosine over the whole probe and Yu & Zhang's within-input t_sim rank "
                          "a model's layers alike",
                    quantity="Spearman correlation across layers, mean over models", section="synthesis-agree",
                    effect=self.agreement("cos", "t_sim"), direction="above", **common),
            Finding(key="synthesis-softdecay-ev1", paper="yan2022", where="Algorithm 1",
                    claim="SoftDecay applied to the most collapsed layer lowers each input's EV₁",
                    quantity="EV₁ after − before, mean over inputs and models", section="synthesis-operations",
                    effect=self.change("ev1_softdecay", "ev1_raw"), direction="below", **common),
            Finding(key="synthesis-softdecay-tsim", paper="yan2022", where="Algorithm 1 with Yu Def. 1.1",
                    claim="SoftDecay applied to the most collapsed layer lowers each input's t_sim too",
                    quantity="t_sim after − before, mean over inputs and models", section="synthesis-operations",
                    effect=self.change("t_sim_softdecay", "t_sim_raw"), direction="below", **common),
            Finding(key="synthesis-whitening-tsim", paper="yan2022", where="§5 (whitening baseline)",
                    claim="whitening the most collapsed layer lowers each input's t_sim",
                    quantity="t_sim after − before, mean over inputs and models", section="synthesis-operations",
                    effect=self.change("t_sim_whitening", "t_sim_raw"), direction="below", **common),
            Finding(key="synthesis-centring-anisotropy", paper="godey2024", where="§3 (mean cosine)",
                    claim="removing the mean vector removes the anisotropy of the most collapsed layer",
                    quantity="pooled mean cosine after − before removing the probe's mean",
                    section="synthesis-operations",
                    effect=self.change("cos_pooled_centred", "cos_pooled_raw"), direction="below", **common),
            Finding(key="synthesis-centring-skew", paper="yu2024", where="eq. (21) (de-escalation's Π₁^⊥)",
                    claim="removing each input's mean token leaves a dominant direction: EV₁ stays above an "
                          "isotropic matrix's of the same shape",
                    quantity="EV₁ of the centred input − EV₁ of an isotropic Gaussian input, mean over models",
                    section="synthesis-operations",
                    effect=self.change("ev1_centred", "ev1_isotropic"), direction="above", **common),
        ]


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
