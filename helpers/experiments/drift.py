"""The drift chapter (Godey et al. §4): an untrained BERT block fed inputs sharing a common bias of
growing norm N, over several seeds; the norm fixed point N*; and, beside it, the hidden-state norms
of a real pretrained model."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import torch

from ..book import results
from ..book.params import ChapterParams, ParameterError, positive, rules
from ..book.runtime import choose_device, progress, run_seeds, seed_everything, stream_seed
from ..core.anisotropy import BLOCK_STATS, block_statistics, drift_bias, find_fixed_point
from ..data import load_glue
from ..hf import models
from ..hf.drift import bert_block, block_with_qk


@dataclass(frozen=True)
class Params(ChapterParams):
    """Godey et al. §4: an untrained BERT block fed drifted inputs (Figures 6-10)."""

    n_seq: int = 16
    seq_len: int = 512
    norm_min: float = 0.1
    norm_max: float = 3000.0
    n_norms: int = 19
    hist_norms: tuple[float, ...] = (0.0, 10.0, 100.0, 1000.0)
    hist_samples: int = 20_000
    seeds: int = 3
    d_model: int = 768
    n_heads: int = 12
    d_ff: int = 3072
    reference_model: str = "all-MiniLM-L6-v2"
    reference_sentences: int = 256

    CHAPTER: ClassVar[str] = "drift"
    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {
        "ci": dict(n_seq=4, seq_len=128, n_norms=8, seeds=2, reference_sentences=32),
        "book": dict(),
        "paper": dict(seeds=5, n_norms=31, reference_model="bert-base-uncased", reference_sentences=1024),
    }
    RULES: ClassVar = rules(
        n_seq=positive, seq_len=(lambda v: 2 <= v <= 512, "must lie in [2, 512] (BERT positions)"),
        norm_min=positive, norm_max=positive, n_norms=(lambda v: v >= 3, "needs >= 3 bias norms"),
        hist_norms=(lambda v: all(x >= 0 for x in v), "bias norms must be >= 0"),
        hist_samples=(lambda v: v >= 100, "needs >= 100 score samples"),
        seeds=positive, d_model=positive, n_heads=positive, d_ff=positive,
        reference_sentences=(lambda v: v >= 2, "needs >= 2 sentences"),
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.norm_max <= self.norm_min:
            raise ParameterError(f"parameter 'norm_max' = {self.norm_max} must exceed norm_min = {self.norm_min}")
        if self.d_model % self.n_heads:
            raise ParameterError(f"parameter 'd_model' = {self.d_model} must be divisible by n_heads = {self.n_heads}")

    def grid(self) -> list[float]:
        """The bias norms swept: `n_norms` log-spaced from norm_min to norm_max, plus `hist_norms`."""
        logs = np.geomspace(self.norm_min, self.norm_max, self.n_norms).round(6).tolist()
        return sorted(set(logs) | set(self.hist_norms))


@dataclass
class Result(results.Result):
    """Everything the drift chapter shows. `stats[name]` is (seeds, norms) for every name of
    `core.anisotropy.BLOCK_STATS`; `hists[s][j]` the histogram (bin edges, densities) of the
    pre-softmax scores of seed s at `hist_norms[j]`."""

    norms: list[float]
    seeds: list[int]
    stats: dict[str, list[list[float]]]
    hist_norms: list[float]
    hists: list[list[dict[str, list[float]]]]
    fixed_point_per_seed: list[float | None]
    fixed_point_refined: float | None
    n_seq: int
    seq_len: int
    hidden: int
    norm_min: float
    reference: dict[str, Any] = field(default_factory=dict)

    def stat(self, name: str) -> np.ndarray:
        """One statistic as a (seeds, norms) array."""
        return np.asarray(self.stats[name], dtype=float)


@torch.no_grad()
def drift_sweep(E: torch.Tensor, layer, norms: list[float], n_seq: int, seq_len: int, seed: int,
                hist_norms: tuple[float, ...] = (), hist_samples: int = 20_000, hist_bins: int = 80,
                desc: str = "bias norms") -> dict[str, Any]:
    """Godey et al. §4: `n_seq` sequences of length `seq_len` drawn uniformly from E, a common bias
    of norm N added (direction b_u from `seed`), one block applied; for every N the statistics of
    `core.anisotropy.block_statistics`, and at `hist_norms` a histogram of `hist_samples` pre-softmax
    scores (Figure 7). Returns {stat: array over norms, "hists": [(edges, density) per hist norm]}."""
    g = torch.Generator().manual_seed(stream_seed(seed, "tokens"))
    ids = torch.randint(0, E.shape[0], (n_seq, seq_len), generator=g)
    x = E[ids.to(E.device)]                                        # (B, L, d)
    bias_dir = drift_bias(x.shape[-1], 1.0, stream_seed(seed, "bias")).to(x.device)
    gh = torch.Generator().manual_seed(stream_seed(seed, "scores"))
    out: dict[str, Any] = {k: np.zeros(len(norms)) for k in BLOCK_STATS}
    hists = {}
    for i, N in enumerate(progress(norms, desc=desc, total=len(norms))):
        xb = x + N * bias_dir
        r = block_with_qk(layer, xb)
        for name, v in block_statistics(xb, r["out"], r["q"], r["k"], r["scores"]).items():
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
    """Mean hidden-state norm of real tokens per layer of the reference model on MRPC sentences."""
    ref = models.load(p.reference_model, device=device)
    texts = load_glue("MRPC", "validation").texts()[: p.reference_sentences]
    layers, mask = models.hidden_states(ref, texts, 128, 32, desc=p.reference_model)
    return {"model": p.reference_model, "description": ref.description, "sentences": len(texts),
            "layer_norms": [float(h[mask].norm(dim=-1).mean()) for h in layers], "d": int(layers[0].shape[-1])}


def run(p: Params) -> Result:
    """The sweep over bias norms for every seed (each seed draws a new layer, table, token sample
    and bias direction), the fixed point per seed (interpolated) and for the first seed (refined by
    Brent's method on exact evaluations), and the reference model's layer norms."""
    seed_everything(p.seed)
    device = choose_device(p.device)
    grid = p.grid()
    seeds = run_seeds(p.seed, p.seeds)
    sweeps, blocks = [], []
    for s in seeds:
        E, layer = bert_block(s, p.d_model, p.n_heads, p.d_ff)
        E, layer = E.to(device), layer.to(device)
        blocks.append((E, layer))
        sweeps.append(drift_sweep(E, layer, grid, p.n_seq, p.seq_len, s, p.hist_norms, p.hist_samples,
                                  desc=f"seed {s}"))
    stats = {k: [sw[k].tolist() for sw in sweeps] for k in BLOCK_STATS}

    def gap(n: float) -> float:   # E‖T(x + b)‖ − E‖x + b‖ of the first seed, evaluated exactly at n
        sw = drift_sweep(*blocks[0], [float(n)], p.n_seq, p.seq_len, seeds[0], desc="refine")
        return float(sw["out_norm"][0] - sw["in_norm"][0])

    gaps = [np.asarray(sw["out_norm"]) - np.asarray(sw["in_norm"]) for sw in sweeps]
    return Result(
        norms=grid, seeds=seeds, stats=stats, hist_norms=list(p.hist_norms), hists=[sw["hists"] for sw in sweeps],
        fixed_point_per_seed=[find_fixed_point(grid, g) for g in gaps],
        fixed_point_refined=find_fixed_point(grid, gaps[0], refine=gap),
        n_seq=p.n_seq, seq_len=p.seq_len, hidden=p.d_model, norm_min=p.norm_min,
        reference=reference_norms(p, device),
    )
