"""Godey et al. (2024) mathematics: streaming layer-wise anisotropy (§3), the drift–anisotropy
correlation tests (§3.3, App. A), the cosine of isotropic Gaussians (App. B), and the statistics of
one Transformer block fed drifted inputs with its norm fixed point (§4)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from scipy import optimize, stats
from torch import Tensor

from .measures import cosine_effective_dim, pairwise_cosine_mean, participation_ratio, top_k_variance_share

# ------------------------------------------------------------------ §3: streaming layer-wise anisotropy


@dataclass
class LayerAccumulator:
    """Streams token vectors of every layer and keeps, per layer: the sum of unit vectors (for the
    exact all-pairs average cosine), the sum of vectors (for the drift ‖x̄‖₂), the sum of norms, the
    count, the vectors at pre-sampled global positions (for the sampled-pairs estimate), and the sum of
    unit vectors of each input (a sequence, a recording, an image: the cluster its tokens belong to), from
    which the all-pairs average cosine is jackknifed over the inputs: the tokens of one input are not
    independent, so the input is the unit a level's interval is taken over."""

    pairs: Tensor                               # (n_pairs, 2) global token indices
    #: keep each layer's second moment Σ x xᵀ (for the centred cloud's spectrum) when d is at most this
    cov_max_dim: int = 2048
    #: keep each input's unit-vector sum (for the jackknife over inputs) when d is at most this (a CNN's whole
    #: flattened maps are read by a bootstrap over images of their own)
    cluster_max_dim: int = 8192
    unit_sum: list[Tensor] = field(default_factory=list)
    vec_sum: list[Tensor] = field(default_factory=list)
    norm_sum: list[float] = field(default_factory=list)
    kept: list[Tensor] = field(default_factory=list)
    second: list[Tensor | None] = field(default_factory=list)
    half_sum: list[Tensor] = field(default_factory=list)       # (2, d): the sums of alternate batches
    half_count: list[int] = field(default_factory=lambda: [0, 0])
    cluster_sums: list[list[Tensor]] = field(default_factory=list)   # per layer, (inputs of a call, d) blocks
    cluster_counts: list[Tensor] = field(default_factory=list)       # per call, the tokens of each of its inputs
    count: int = 0
    calls: int = 0

    def __post_init__(self) -> None:
        self.positions = self.pairs.flatten().unique().contiguous()          # sorted

    def add(self, layers: list[Tensor], half: Tensor | None = None, inputs: Tensor | None = None) -> None:
        """`layers`: one (tokens, d) tensor of real (non-special) token vectors per layer. `half`: for each
        token, which half of the data (0 or 1) it belongs to for the split-half stability of the mean
        (say, the parity of its sequence); by default the whole call goes to one half, alternating. `inputs`:
        for each token, the input of this call it comes from (0, 1, …: the sequences of a batch, the images of
        a batch); by default the whole call is one input (one recording)."""
        n = layers[0].shape[0]
        if not self.unit_sum:
            self.cluster_sums = [[] for _ in layers]
            for h in layers:
                d = h.shape[-1]
                self.unit_sum.append(torch.zeros(d, dtype=torch.float64))
                self.vec_sum.append(torch.zeros(d, dtype=torch.float64))
                self.norm_sum.append(0.0)
                self.kept.append(torch.zeros(len(self.positions), d, dtype=torch.float32))
                self.second.append(torch.zeros(d, d, dtype=torch.float64) if d <= self.cov_max_dim else None)
                self.half_sum.append(torch.zeros(2, d, dtype=torch.float64))
        if half is None:                        # split halves: alternate calls (batches, images, clips)
            half = torch.full((n,), self.calls % 2, dtype=torch.long)
        half = half.long()
        self.half_count[0] += int((half == 0).sum())
        self.half_count[1] += int((half == 1).sum())
        self.calls += 1
        lo, hi = self.count, self.count + n
        sel = (self.positions >= lo) & (self.positions < hi)
        local = self.positions[sel] - lo
        g = torch.zeros(n, dtype=torch.long) if inputs is None else inputs.long()
        k = int(g.max()) + 1 if n else 0
        counts = torch.bincount(g, minlength=k)
        self.cluster_counts.append(counts[counts > 0])
        for li, h in enumerate(layers):
            h64 = h.double()
            norms = h64.norm(dim=-1, keepdim=True)  # (n, 1): h is (n tokens of the call, d)
            unit = h64 / norms.clamp_min(1e-30)
            self.unit_sum[li] += unit.sum(0)  # (d,)
            if h.shape[-1] <= self.cluster_max_dim:       # (inputs of the call, d): each input's unit-vector sum
                self.cluster_sums[li].append(torch.zeros(k, h.shape[-1], dtype=torch.float64)
                                             .index_add_(0, g, unit)[counts > 0])
            self.vec_sum[li] += h64.sum(0)  # (d,)
            self.norm_sum[li] += float(norms.sum())
            self.kept[li][sel] = h[local].float()
            self.half_sum[li].index_add_(0, half, h64)
            if self.second[li] is not None:
                self.second[li] += h64.T @ h64  # (d, d)
        self.count = hi

    def result(self) -> dict[str, np.ndarray]:
        """Per layer: exact all-pairs mean cosine, sampled-pairs mean cosine and its standard error,
        ‖x̄‖₂ (drift norm), the average norm E‖x‖, the normalised drift ‖x̄‖₂ / E‖x‖, and the
        sampled-pairs mean cosine after removing the mean vector x̄ (Biś et al. 2021) with its
        standard error."""
        n = self.count
        if int(self.pairs.max()) >= n:
            raise ValueError("sampled positions beyond the streamed tokens")
        exact = np.array([(float(u.square().sum()) - n) / (n * (n - 1)) for u in self.unit_sum])
        mean_norm = np.array([float((v / n).norm()) for v in self.vec_sum])
        avg_norm = np.array(self.norm_sum) / n
        ia = torch.searchsorted(self.positions, self.pairs[:, 0].contiguous())  # (pairs,): rows of `kept`
        ib = torch.searchsorted(self.positions, self.pairs[:, 1].contiguous())
        samp, se, cen, cen_se = [], [], [], []
        for kept, v in zip(self.kept, self.vec_sum, strict=True):
            c = _pair_cosines(kept, ia, ib)
            samp.append(float(c.mean()))
            se.append(float(c.std() / math.sqrt(c.numel())))
            c = _pair_cosines(kept, ia, ib, centre=(v / n).float())   # Biś et al. (2021): mean vector removed
            cen.append(float(c.mean()))
            cen_se.append(float(c.std() / math.sqrt(c.numel())))
        loo = self.leave_one_input_out()
        if loo is not None:
            out_loo = {"cos_exact_loo": loo, "inputs": loo.shape[1]}
        else:
            out_loo = {}
        out = {**out_loo, "cos_exact": exact, "cos_sampled": np.array(samp), "cos_sampled_se": np.array(se),
               "cos_centred": np.array(cen), "cos_centred_se": np.array(cen_se),
               "mean_norm": mean_norm, "avg_norm": avg_norm, "drift_ratio": mean_norm / avg_norm, "tokens": n,
               "dims": np.array([u.numel() for u in self.unit_sum])}
        if all(s_ is not None for s_ in self.second) and min(self.half_count) > 0:
            shapes = [centred_shape(S, v, hs, self.half_count, n, kept, ia, ib)
                      for S, v, hs, kept in zip(self.second, self.vec_sum, self.half_sum, self.kept, strict=True)]
            out.update({k: np.array([sh[k] for sh in shapes]) for k in shapes[0]})
        return out


    def leave_one_input_out(self) -> np.ndarray | None:
        """(layers, inputs): the all-pairs average cosine of each layer with one input's tokens left out,
        (‖S − sᵢ‖² − (N − nᵢ)) / ((N − nᵢ)(N − nᵢ − 1)) with S the sum of all N unit vectors and sᵢ that of
        input i's nᵢ — the leave-one-out values of a jackknife over the inputs. None with fewer than 3 inputs, or
        where a layer is too wide to keep its inputs' sums."""
        if not self.cluster_sums or any(len(c) != len(self.cluster_counts) for c in self.cluster_sums):
            return None
        counts = torch.cat(self.cluster_counts).double()
        if counts.numel() < 3:
            return None
        rest = self.count - counts
        out = []
        for S, parts in zip(self.unit_sum, self.cluster_sums, strict=True):
            C = torch.cat(parts)                                                   # (inputs, d)
            sq = float(S.square().sum()) - 2 * (C @ S) + C.square().sum(1)        # ‖S − sᵢ‖²
            out.append(((sq - rest) / (rest * (rest - 1)).clamp_min(1)).numpy())
        return np.stack(out)


def _pair_cosines(kept: Tensor, ia: Tensor, ib: Tensor, centre: Tensor | None = None,
                  max_elements: int = 2**24) -> Tensor:
    """cos(x_a − c, x_b − c) for the pairs (ia, ib) of rows of `kept`: through the Gram matrix when
    there are few distinct rows (whole CNN maps have 400k dims but there are few images), otherwise
    in blocks of pairs holding at most about `max_elements` numbers."""
    if centre is not None:
        kept = kept - centre
    if kept.shape[0] <= 2048:                  # few distinct vectors (whole CNN maps): through their Gram matrix
        k64 = kept.double()
        unit = k64 / k64.norm(dim=1, keepdim=True).clamp_min(1e-30)
        return (unit @ unit.T)[ia, ib].float()  # (rows, rows) -> (pairs,)
    rows = max(1, max_elements // max(1, kept.shape[1]))
    out = []
    for s in range(0, len(ia), rows):
        a, b = kept[ia[s:s + rows]], kept[ib[s:s + rows]]
        out.append(torch.nn.functional.cosine_similarity(a, b, dim=-1))
    return torch.cat(out)


#: k of the top-k principal-component variance shares and of the cosines after removing the top k
SHAPE_K = (1, 3, 10)


def isotropic_participation_ratio(n: int, d: int) -> float:
    """Expected participation ratio (tr C)² / tr C² of the sample covariance C of `n` independent
    N(0, I_d) vectors (centred: m = n − 1 degrees of freedom). For a Wishart W(I_d, m),
    E tr W = m d and E tr W² = m d (m + d + 1), so the ratio is about m d / (m + d + 1): d when n ≫ d,
    and smaller than d for a finite sample — the reference a measured cloud of the same n and d is held to."""
    m = n - 1
    return float(m * d / (m + d + 1))


def centred_shape(second: Tensor, vec_sum: Tensor, half_sum: Tensor, half_count: list[int], n: int,
                  kept: Tensor, ia: Tensor, ib: Tensor) -> dict[str, float]:
    """The shape of one layer's centred cloud, from its streamed sums: the covariance C = Σxxᵀ/n − x̄x̄ᵀ
    and its eigenvalues λ; the participation ratio (Σλ)²/Σλ² (`pr`) against an isotropic Gaussian of the
    same n and d (`pr_iso`); the variance share of the top k principal directions (`top{k}`); the root
    mean square cosine of the sampled pairs once the mean and the top k principal directions are removed
    (`rms_cos_k{k}`, k = 0: mean only; 1/√d for an isotropic cloud — the *average* cosine of a centred
    cloud is ≈ 0 whatever its shape, so its spread is what can tell); the cosine between the means of
    two halves of the data (alternate batches, `mean_split_cos`: 1 for a stable common direction); and
    ‖x̄‖² over the top eigenvalue (`drift_over_top`: how far the mean dominates every centred direction)."""
    d = second.shape[0]
    mean = vec_sum / n
    C = second / n - torch.outer(mean, mean)
    lam, vecs = torch.linalg.eigh(C)
    lam, vecs = lam.flip(0).clamp_min(0), vecs.flip(1)
    tot = float(lam.sum())
    out = {"pr": tot**2 / max(float(lam.square().sum()), 1e-300), "pr_iso": isotropic_participation_ratio(n, d)}
    out.update({f"top{k}": float(lam[:k].sum()) / max(tot, 1e-300) for k in SHAPE_K})
    x = kept.double() - mean
    for k in (0, *SHAPE_K):
        if k:
            top = vecs[:, :k]
            x = kept.double() - mean
            x = x - (x @ top) @ top.T  # (n, d): the top k directions removed
        unit = x / x.norm(dim=1, keepdim=True).clamp_min(1e-30)
        c = (unit[ia] * unit[ib]).sum(1)  # (pairs,)
        out[f"rms_cos_k{k}"] = float(c.square().mean().sqrt())
    a, b = half_sum[0] / half_count[0], half_sum[1] / half_count[1]
    out["mean_split_cos"] = float(a @ b / (a.norm() * b.norm()).clamp_min(1e-300))
    out["drift_over_top"] = float(mean @ mean) / max(float(lam[0]), 1e-300)
    return out


#: a layer's anisotropy is called one common direction when the mean's direction is stable across halves
#: (cosine ≥ MEAN_STABLE) and its centred cloud spreads over at least ISO_SHARE of the directions an
#: isotropic Gaussian of the same n and d spreads over (participation ratios)
MEAN_STABLE, ISO_SHARE = 0.9, 0.5
MAKEUP = ("one common direction", "drift + low-dimensional cloud", "no stable drift")


def anisotropy_makeup(pr: float, pr_iso: float, mean_split_cos: float) -> str:
    """What a layer's anisotropy is made of (one of `MAKEUP`). The average cosine is the squared
    normalised drift (`normalised_drift_tests`), so any anisotropy is a common mean; what can differ is
    the cloud around it: *one common direction* (a stable mean over a centred cloud as spread out as an
    isotropic Gaussian's, by participation ratio: ≥ `ISO_SHARE` of it), *drift + low-dimensional cloud*
    (a stable mean over a centred cloud spread over fewer directions — a narrow cone's shape), or *no
    stable drift* (the means of two halves of the data point apart: cosine < `MEAN_STABLE`)."""
    if mean_split_cos < MEAN_STABLE:
        return MAKEUP[2]
    return MAKEUP[0] if pr >= ISO_SHARE * pr_iso else MAKEUP[1]


def sample_pairs(n_total: int, n_pairs: int, seed: int) -> Tensor:
    """`n_pairs` pairs (i, j), i ≠ j, drawn uniformly from `n_total` positions: (n_pairs, 2)."""
    if n_total < 2:
        raise ValueError("need at least two tokens")
    g = torch.Generator().manual_seed(seed)
    i = torch.randint(0, n_total, (n_pairs,), generator=g)
    j = (i + torch.randint(1, n_total, (n_pairs,), generator=g)) % n_total   # uniform over j ≠ i
    return torch.stack([i, j], dim=1)


def drift_correlation(cos: np.ndarray, mean_norm: np.ndarray) -> dict[str, float]:
    """Godey et al. §3.3 / App. A: Spearman and Pearson tests between ‖x̄‖₂ and the average cosine
    across layers (statistic and two-sided p-value)."""
    s = stats.spearmanr(mean_norm, cos)
    p = stats.pearsonr(mean_norm, cos)
    return {"spearman_r": float(s.statistic), "spearman_p": float(s.pvalue),
            "pearson_r": float(p.statistic), "pearson_p": float(p.pvalue)}


def normalised_drift_tests(cos: np.ndarray, mean_norm: np.ndarray, avg_norm: np.ndarray,
                           tol: float = 0.02) -> dict[str, float]:
    """Why Godey et al.'s Figure 5 test is nearly circular, and the test without the circle.

    The average cosine over all pairs is exactly (n‖ū‖² − 1)/(n − 1), ū the mean of the unit vectors
    x_i/‖x_i‖; when the norms do not depend on the directions ū = x̄ / E‖x‖, so that
    avg cos ≈ (‖x̄‖₂ / E‖x‖)². A Spearman test of ‖x̄‖₂ against the average cosine across layers
    therefore largely tests a definition, blurred by how the overall scale E‖x‖ moves from layer to
    layer. Returns the Spearman and Pearson tests of the *normalised* drift r = ‖x̄‖₂ / E‖x‖ against the
    average cosine, the largest |avg cos − r²| over layers, and the fraction of layers where it is
    below `tol`."""
    ratio = np.asarray(mean_norm, float) / np.asarray(avg_norm, float)
    gap = np.abs(np.asarray(cos, float) - ratio**2)
    out = {f"normalised_{k}": v for k, v in drift_correlation(cos, ratio).items()}
    out.update(identity_gap_max=float(gap.max()), identity_within_tol=float((gap < tol).mean()),
               identity_layers_within=int((gap < tol).sum()), layers=int(gap.size))
    return out


# ------------------------------------------------------------------ Appendix B: isotropic Gaussians


def isotropic_cosine_pdf(c: np.ndarray, d: int) -> np.ndarray:
    """Density of cos(x, y) for independent x, y ~ N(0, I_d): ∝ (1 − c²)^{(d−3)/2} on [−1, 1],
    i.e. (c + 1)/2 ~ Beta((d−1)/2, (d−1)/2)."""
    a = (d - 1) / 2
    return stats.beta.pdf((np.asarray(c) + 1) / 2, a, a) / 2


def isotropic_cosine_quantile(q: float, d: int) -> float:
    """The q-quantile of that cosine distribution (Godey et al. Fig. 18 uses q = 0.95); for large d
    it tends to z_q/√d (1.645/√d at q = 0.95)."""
    a = (d - 1) / 2
    return float(2 * stats.beta.ppf(q, a, a) - 1)


def sample_isotropic_cosines(d: int, n: int, seed: int, chunk_elements: int = 2**22) -> np.ndarray:
    """`n` cosines of independent pairs x, y ~ N(0, I_d) (Monte Carlo check of the density), drawn in
    chunks of about `chunk_elements` numbers per vector set (memory stays small at d = 4096)."""
    g = torch.Generator().manual_seed(seed)
    rows = max(1, chunk_elements // d)
    out = []
    for start in range(0, n, rows):
        m = min(rows, n - start)
        x = torch.randn(m, d, generator=g, dtype=torch.float64)
        y = torch.randn(m, d, generator=g, dtype=torch.float64)
        out.append(torch.nn.functional.cosine_similarity(x, y, dim=-1))
    return torch.cat(out).numpy()


def isotropic_mean_cosine_quantile(q: float, d: int, n_pairs: int) -> float:
    """The q-quantile of the *average* cosine of `n_pairs` independent pairs of isotropic vectors in
    d dimensions: each pair's cosine has mean 0 and variance 1/d, so the average is normal with
    standard deviation 1/√(d·n_pairs). This, not the quantile of a single pair's cosine (Godey et al.
    Fig. 18), is the null for a layer's average over sampled pairs."""
    return float(stats.norm.ppf(q) / math.sqrt(d * n_pairs))


def centred_cosine_resamples(X, groups, counts, block: int = 100) -> tuple[float, float, np.ndarray]:
    """The average cosine of a layer's vectors once their mean is removed (Biś et al. 2021), over all pairs,
    and the same under resamples of the groups the vectors come in (sequences, images, clips), each resample
    centred on its *own* mean.

    `X` (n, d): the layer's vectors; `groups` (n,): the group of each vector, 0 … K−1; `counts` (draws, K): how
    often each group is drawn. With w_i the count of vector i's group, N = Σ w_i and μ = Σ w_i x_i / N, the unit
    centred vectors are u_i = (x_i − μ)/‖x_i − μ‖ and the average cosine over pairs of distinct draws is
    (‖Σ w_i u_i‖² − Σ w_i²)/(N² − Σ w_i²): the pairs of a vector with itself and with its own copies left out.
    ‖x_i − μ‖² = ‖x_i‖² − 2 x_i·μ + ‖μ‖² and Σ w_i u_i = Σ (w_i/r_i) x_i − μ Σ w_i/r_i, so a block of draws
    costs two matrix products. Returns (centred average cosine over all pairs, raw average cosine over all
    pairs — the record's `cos_exact` —, the centred average cosine of each draw)."""
    X = torch.as_tensor(X).double()
    g = torch.as_tensor(np.asarray(groups), dtype=torch.long)
    counts = torch.as_tensor(np.asarray(counts, float), dtype=torch.float64)
    k = int(g.max()) + 1
    sums = torch.zeros(k, X.shape[1], dtype=torch.float64).index_add_(0, g, X)  # (K groups, d)
    q = (X * X).sum(1)  # (n,): ‖x_i‖²

    def centred(c: Tensor) -> Tensor:                         # c: (b, K) counts → (b,) centred average cosines
        w = c[:, g].T                                           # (n, b)
        total, same = w.sum(0), (w * w).sum(0)
        mu = (c @ sums) / total[:, None]                        # (b, d)
        r = (q[:, None] - 2 * (X @ mu.T) + (mu * mu).sum(1)[None, :]).clamp_min(1e-300).sqrt()  # ‖x_i − μ_b‖: (n, b)
        a = w / r
        s = a.T @ X - a.sum(0)[:, None] * mu  # (b, d)
        return ((s * s).sum(1) - same) / (total**2 - same)

    full = float(centred(torch.ones(1, k, dtype=torch.float64))[0])
    unit = X / X.norm(dim=1, keepdim=True).clamp_min(1e-300)
    n = X.shape[0]
    raw = float((unit.sum(0).square().sum() - n) / (n * (n - 1)))
    draws = (torch.cat([centred(counts[i:i + block]) for i in range(0, len(counts), block)]) if len(counts) else
             torch.zeros(0, dtype=torch.float64))
    return full, raw, draws.numpy()


# ------------------------------------------------------------------ the shape of the centred cloud


def planted_clusters_and_drift(n: int = 2000, d: int = 256, clusters: int = 4, drift: float = 2.0,
                               spread: float = 0.05, seed: int = 0) -> Tensor:
    """`n` vectors in `clusters` tight clusters (centres ~ N(0, I_d), within-cluster noise of sd
    `spread`) plus one common drift vector of norm `drift`·√d: a cloud whose raw average cosine is high,
    whose mean-removed average cosine is ≈ 0 by construction, and whose centred cloud is anything but
    isotropic (about `clusters` effective directions). A test that calls this "one common direction"
    cannot tell a drift from a narrow cone."""
    g = torch.Generator().manual_seed(seed)
    centres = torch.randn(clusters, d, generator=g, dtype=torch.float64)
    b = torch.randn(d, generator=g, dtype=torch.float64)
    b = b / b.norm() * drift * math.sqrt(d)
    which = torch.arange(n) % clusters
    return centres[which] + spread * torch.randn(n, d, generator=g, dtype=torch.float64) + b


def cloud_shape(X: Tensor, n_pairs: int = 20_000, seed: int = 0, k: int = 3, batches: int = 10) -> dict[str, Any]:
    """What a cloud's anisotropy is made of, measured as the chapter measures a layer (streamed in
    `batches` shuffled batches through `LayerAccumulator`): its average cosine over all pairs, the average
    cosine of sampled pairs once the mean is removed (Biś et al. 2021), the effective dimension 1/E[cos²]
    of the centred cloud from those pairs, the covariance's participation ratio (checked against
    `core.measures.participation_ratio`) and its isotropic reference, the top-`k` variance share, the
    split-half stability of the mean's direction, and the verdict of `anisotropy_makeup`."""
    g = torch.Generator().manual_seed(seed)
    X = X[torch.randperm(X.shape[0], generator=g)]
    acc = LayerAccumulator(sample_pairs(X.shape[0], n_pairs, seed))
    for chunk in X.double().chunk(batches):
        acc.add([chunk])
    r = {key: (v[0] if isinstance(v, np.ndarray) else v) for key, v in acc.result().items()}
    c = _pair_cosines(X.float(), acc.pairs[:, 0], acc.pairs[:, 1], centre=X.float().mean(0))
    return {"cos": float(pairwise_cosine_mean(X.double())), "cos_centred": float(c.mean()),
            "effective_dim": float(cosine_effective_dim(c)), "participation_ratio": float(participation_ratio(X)),
            "pr": float(r["pr"]), "pr_iso": float(r["pr_iso"]), f"top{k}_share": float(top_k_variance_share(X, k)),
            "mean_split_cos": float(r["mean_split_cos"]), "rms_cos_k0": float(r["rms_cos_k0"]),
            "rms_cos_k3": float(r["rms_cos_k3"]), "makeup": anisotropy_makeup(r["pr"], r["pr_iso"],
                                                                              r["mean_split_cos"]),
            "d": int(X.shape[1]), "n": int(X.shape[0])}


# ------------------------------------------------------------------ §4: drift in an untrained block


def drift_bias(d: int, norm: float, seed: int) -> Tensor:
    """b = N · b_u/‖b_u‖ with b_u ~ N(0, I_d) (Godey et al. §4.1)."""
    g = torch.Generator().manual_seed(seed)
    bu = torch.randn(d, generator=g)
    return bu / bu.norm() * norm


#: the per-bias-norm statistics of `block_statistics`, in order
BLOCK_STATS = ("in_cos", "out_cos", "in_norm", "out_norm", "in_mean_norm", "out_mean_norm", "q_cos", "k_cos",
               "q_norm", "k_norm",
               "row_max", "row_median", "row_min", "seq_max", "seq_min", "score_mean", "score_std")


@torch.no_grad()
def block_statistics(x: Tensor, out: Tensor, q: Tensor, k: Tensor, scores: Tensor) -> dict[str, float]:
    """Godey et al. §4, Figures 6 and 8-10, for one block applied to drifted inputs: `x` and `out`
    (B, L, d) its input and output, `q`, `k` (B, h, L, d_k) the queries and keys per head and
    `scores` (B, h, L, L) the pre-softmax QKᵀ/√d_k. Returns the input/output average cosine (all
    pairs, exact), average norm E‖x‖ and norm of the mean ‖E x‖ (the drift), the cosine and norm of
    Q and K (heads concatenated), the max, median and min of each softmax row averaged over rows,
    heads and batch, the maximum and minimum over whole sequences averaged over the batch, and the
    mean and sd of the scores."""
    d = x.shape[-1]
    flat_in, flat_out = x.reshape(-1, d), out.reshape(-1, d)  # (B·L, d) each
    qc = q.transpose(1, 2).flatten(0, 1).flatten(1)          # (B·L, d): heads concatenated
    kc = k.transpose(1, 2).flatten(0, 1).flatten(1)
    P = torch.softmax(scores, dim=-1)
    vals = dict(
        in_cos=pairwise_cosine_mean(flat_in), out_cos=pairwise_cosine_mean(flat_out),
        in_norm=flat_in.norm(dim=-1).mean(), out_norm=flat_out.norm(dim=-1).mean(),
        in_mean_norm=flat_in.mean(0).norm(), out_mean_norm=flat_out.mean(0).norm(),
        q_cos=pairwise_cosine_mean(qc), k_cos=pairwise_cosine_mean(kc),
        q_norm=qc.norm(dim=-1).mean(), k_norm=kc.norm(dim=-1).mean(),
        # P (B, h, L, L): over rows, heads, batch
        row_max=P.amax(-1).mean(), row_median=P.median(-1).values.mean(), row_min=P.amin(-1).mean(),
        seq_max=P.flatten(1).amax(-1).mean(), seq_min=P.flatten(1).amin(-1).mean(),  # (B, h·L·L) -> (B,) -> ()
        score_mean=scores.mean(), score_std=scores.std(),
    )
    return {name: float(vals[name]) for name in BLOCK_STATS}


def find_fixed_point(norms: np.ndarray, gap: np.ndarray, refine=None) -> float | None:
    """N* where gap(N) = E‖T(x + b_N)‖ − E‖x + b_N‖ changes sign (Godey et al. §4.2): the first
    sign change on the grid, interpolated linearly in N, then refined by Brent's method on `refine`
    (a callable N -> gap) when given. None if the gap never changes sign."""
    norms, gap = np.asarray(norms, float), np.asarray(gap, float)
    sign = np.sign(gap)
    idx = np.nonzero(sign[:-1] * sign[1:] < 0)[0]
    if idx.size == 0:
        return None
    i = int(idx[0])
    a, b = norms[i], norms[i + 1]
    if refine is not None:
        return float(optimize.brentq(refine, a, b, xtol=1e-6 * b, rtol=1e-8))
    t = gap[i] / (gap[i] - gap[i + 1])
    return float(a + t * (b - a))
