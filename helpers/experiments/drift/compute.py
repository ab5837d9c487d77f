"""The drift chapter's runs: the sweep over bias norms of an untrained BERT block (`drift_sweep`), the reference
model's layers (`reference_norms`), and `run`, which takes every piece through the results cache
(`results/drift/book/` at `book` scale)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from ...core.anisotropy import block_statistics, drift_bias, find_fixed_point
from ...core.drift import drift_statistics
from ...core.measures import pairwise_cosine_mean
from ...data import load_glue
from ...hf import models
from ...hf.drift import bert_embeddings_and_block, block_with_qk, embed
from ...machinery import results
from ...machinery.runtime import choose_device, progress, run_seeds, seed_everything, stream_seed
from .params import STATS, Params
from .result import Result


@torch.no_grad()
def drift_sweep(E: torch.Tensor, layer, norms: list[float], n_seq: int, seq_len: int, seed: int,
                hist_norms: tuple[float, ...] = (), hist_samples: int = 20_000, hist_bins: int = 80,
                desc: str = "bias norms", emb=None) -> dict[str, Any]:
    """Godey et al. §4: `n_seq` sequences of length `seq_len` drawn uniformly from E, a common bias
    of norm N added (direction b_u from `seed`), one block applied; for every N the statistics of
    `core.anisotropy.block_statistics` and `core.drift.drift_statistics`, and at `hist_norms` a
    histogram of `hist_samples` pre-softmax scores (Figure 7). With `emb` (BERT's embedding layer)
    the same token ids go through it — LN(word + position + token type) — instead of being looked
    up in E. Returns {stat: array over norms, "hists": [(edges, density) per hist norm]}."""
    g = torch.Generator().manual_seed(stream_seed(seed, "tokens"))
    ids = torch.randint(0, E.shape[0], (n_seq, seq_len), generator=g)
    x = E[ids.to(E.device)] if emb is None else embed(emb, ids.to(E.device))   # (B, L, d)
    bias_dir = drift_bias(x.shape[-1], 1.0, stream_seed(seed, "bias")).to(x.device)
    gh = torch.Generator().manual_seed(stream_seed(seed, "scores"))
    out: dict[str, Any] = {k: np.zeros(len(norms)) for k in STATS}
    hists = {}
    for i, N in enumerate(progress(norms, desc=desc, total=len(norms))):
        xb = x + N * bias_dir
        r = block_with_qk(layer, xb)
        vals = block_statistics(xb, r["out"], r["q"], r["k"], r["scores"]) | drift_statistics(r["scores"], r["P"])
        for name, v in vals.items():
            out[name][i] = v
        for hn in hist_norms:
            if math.isclose(N, hn, rel_tol=1e-9, abs_tol=1e-12):
                s = r["scores"].flatten().cpu()
                sample = s[torch.randint(0, s.numel(), (hist_samples,), generator=gh)].numpy()
                density, edges = np.histogram(sample, bins=hist_bins, density=True)
                hists[hn] = {"edges": edges.tolist(), "density": density.tolist()}
    out["hists"] = [hists[hn] for hn in hist_norms]
    return out


def reference_norms(p: Params, device: torch.device) -> dict[str, Any]:
    """Mean hidden-state norm and average cosine of real tokens per layer of the reference model on
    MRPC sentences."""
    ref = models.load(p.reference_model, device=device)
    texts = load_glue("MRPC", "validation").texts()[: p.reference_sentences]
    layers, mask = models.hidden_states(ref, texts, 128, 32, desc=p.reference_model)
    return {"model": p.reference_model, "description": ref.description, "sentences": len(texts),
            "layer_norms": [float(h[mask].norm(dim=-1).mean()) for h in layers],
            "layer_cos": [float(pairwise_cosine_mean(h[mask].double())) for h in layers],
            "d": int(layers[0].shape[-1])}


def _sweeps(p: Params, variant: str, device: torch.device) -> list[dict[str, Any]]:
    """The sweep over bias norms of every seed, for one input variant (JSON-able)."""
    out = []
    for s in run_seeds(p.seed, p.seeds if variant == "table" else min(p.seeds, p.variant_seeds)):
        emb, layer = bert_embeddings_and_block(s, p.d_model, p.n_heads, p.d_ff)
        emb, layer = emb.to(device), layer.to(device)
        sw = drift_sweep(emb.word_embeddings.weight.detach(), layer, p.grid(), p.n_seq, p.seq_len, s, p.hist_norms,
                         p.hist_samples, desc=f"{variant}, seed {s}", emb=emb if variant == "embedding-layer" else None)
        out.append({k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in sw.items()})
    return out


def run(p: Params) -> Result:
    """The sweep over bias norms for every seed and input variant (each seed draws a new layer,
    table, token sample and bias direction), the fixed point per seed (interpolated) and for the
    first seed (refined by Brent's method on exact evaluations), and the reference model's layer
    norms and cosines. At `book` scale each piece is read back from `results/drift/book/` when its
    parameters match."""
    seed_everything(p.seed)
    device = choose_device(p.device)
    grid = p.grid()
    seeds = run_seeds(p.seed, p.seeds)
    by_variant = {v: results.cached(p, f"sweeps-{v}", lambda v=v: _sweeps(p, v, device))[0] for v in p.variants}
    sweeps = by_variant["table"]
    gaps = [np.asarray(sw["out_norm"]) - np.asarray(sw["in_norm"]) for sw in sweeps]

    def refined() -> float | None:
        E, layer = bert_embeddings_and_block(seeds[0], p.d_model, p.n_heads, p.d_ff)
        E, layer = E.word_embeddings.weight.detach().to(device), layer.to(device)

        def gap(n: float) -> float:   # E‖T(x + b)‖ − E‖x + b‖ of the first seed, evaluated exactly at n
            sw = drift_sweep(E, layer, [float(n)], p.n_seq, p.seq_len, seeds[0], desc="refine")
            return float(sw["out_norm"][0] - sw["in_norm"][0])
        return find_fixed_point(grid, gaps[0], refine=gap)

    n_star, _ = results.cached(p, "fixed-point", lambda: {"refined": refined()})
    reference, _ = results.cached(p, "reference", lambda: reference_norms(p, device))
    stat_table = lambda sws: {k: [list(map(float, sw[k])) for sw in sws] for k in STATS}  # noqa: E731
    return Result(
        norms=grid, seeds=seeds, stats=stat_table(sweeps), hist_norms=list(p.hist_norms),
        hists=[sw["hists"] for sw in sweeps],
        fixed_point_per_seed=[find_fixed_point(grid, g) for g in gaps],
        fixed_point_refined=n_star["refined"],
        n_seq=p.n_seq, seq_len=p.seq_len, hidden=p.d_model, norm_min=p.norm_min, reference=reference,
        variant_stats={v: stat_table(sws) for v, sws in by_variant.items() if v != "table"},
        uniform_tol=p.uniform_tol,
    )
