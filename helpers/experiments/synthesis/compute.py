"""The synthesis chapter's runs: one model and its untrained twins through `tokuni diagnose`'s capture and
measures (`model_study`), what the chapter keeps of them (`curves_record`, `t_cos_with_specials`), the operations at
the most collapsed layer, and `run(params) -> Result` through the results cache."""

from __future__ import annotations

from itertools import combinations
from typing import Any

import numpy as np
import torch
from scipy import stats as sps

from ...core import measures as M
from ...core.softdecay import softdecay_transform, whitening_apply, whitening_fit
from ...diagnose import measures as DM
from ...diagnose.capture import capture
from ...diagnose.probe import default_probe
from ...diagnose.run import modality_of
from ...hf import models as HM
from ...machinery import results
from ...machinery.runtime import choose_device, run_seeds, seed_everything
from .params import LEVEL, RANKED, Params, probe_size
from .result import Result


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
    probe = default_probe(modality, probe_size(p, modality), p.seed)
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
