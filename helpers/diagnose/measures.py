"""Every measure of the book, per layer, with a bootstrap over the probe's inputs.

One set of bootstrap weights (a multinomial draw of the N inputs, `draws` times) is shared by every layer, every
measure, the model and its untrained twin: so a curve's interval, the model-minus-twin difference's interval
(paired: the same inputs in each draw) and any statistic across layers (a rank agreement) all come from the
same draws. Each measure is computed from per-input sums, so a draw is a weighted sum, never a re-run.

The measures (one row per layer; the three papers' names):

* `cos` — anisotropy (Godey et al. §3): the mean cosine over all pairs of vectors of the probe;
  `cos_centred` the same once the probe's mean vector is removed (what is left that is not a common drift);
* `drift` — ‖x̄‖ / √(E‖x − x̄‖²): the norm of the mean vector against the spread around it;
* `pr` — the participation ratio (Σλ)²/Σλ² of the centred covariance's eigenvalues (d if isotropic);
  `top3` — the share of the centred variance in its top three directions;
* `ev1`, `tokenuni`, `rbf_dis` — Yan et al.'s EV₁ (eq. 5), TokenUni (eq. 3) and log RBF_dis (eq. 4) within
  each input, averaged over inputs; `skew` — the skewness of the inputs' singular values pooled and scaled by
  the largest (Yan et al. §3.2, the subspace chapter);
* `t_sim` — Yu & Zhang's token similarity ‖Π₁X‖²/‖X‖² within each input, averaged;
* `qk_cos` — the cosine between the mean query and the mean key of each head (Godey et al. §5), averaged over
  the heads of a block (per head in `Measured.qk_heads`).
"""

from __future__ import annotations

import warnings
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import torch
from torch import Tensor

from ..core import measures as M
from ..machinery.runtime import progress

#: measure -> (label, what it says, the value of an isotropic cloud in d dimensions or None)
MEASURES: dict[str, tuple[str, str]] = {
    "cos": ("mean cosine", "anisotropy: average cosine over all pairs of vectors (Godey et al.)"),
    "cos_centred": ("mean cosine, centred", "the same once the mean vector is removed"),
    "drift": ("drift ‖x̄‖/σ", "norm of the mean vector against the spread around it"),
    "pr": ("participation ratio", "directions the centred cloud spreads over (d if isotropic)"),
    "top3": ("top-3 share", "share of the centred variance in its top 3 directions (3/d if isotropic)"),
    "ev1": ("EV₁", "share of an input's energy in its first singular direction (Yan et al. eq. 5)"),
    "tokenuni": ("TokenUni", "average cosine of an input's tokens (Yan et al. eq. 3)"),
    "rbf_dis": ("log RBF_dis", "log mean exp(−2‖x̂ᵢ − x̂ⱼ‖²) within an input (Yan et al. eq. 4); lower = more uniform"),
    "skew": ("singular-value skew", "skewness of the inputs' normalised singular values (Yan et al. §3.2)"),
    "t_sim": ("t_sim", "token similarity ‖Π₁X‖²/‖X‖² within an input (Yu & Zhang Def. 1.1)"),
    "qk_cos": ("cos(q̄, k̄)", "cosine of the mean query and mean key, averaged over a block's heads (Godey et al. §5)"),
}
#: the measures that rise as a representation collapses (for rank agreement: `pr` and `rbf_dis` fall)
COLLAPSE_SIGN = {"cos": 1, "cos_centred": 1, "drift": 1, "pr": -1, "top3": 1, "ev1": 1, "tokenuni": 1,
                 "rbf_dis": 1, "skew": 1, "t_sim": 1}


def bootstrap_weights(n: int, draws: int, seed: int) -> Tensor:
    """(draws, n) multinomial counts: draw b resamples the n inputs with replacement."""
    g = torch.Generator().manual_seed(seed)
    idx = torch.randint(0, n, (draws, n), generator=g)
    W = torch.zeros(draws, n, dtype=torch.float64)
    W.scatter_add_(1, idx, torch.ones_like(idx, dtype=torch.float64))
    return W


@dataclass
class Measured:
    """`estimate[m]` (L,) and `draws[m]` (B, L) per measure m; `qk_heads` (L, h) the per-head cosines (NaN at
    the embeddings); `isoscore` (L,) the IsoScore of each layer's vectors where the package is installed."""

    estimate: dict[str, np.ndarray]
    draws: dict[str, np.ndarray]
    qk_heads: np.ndarray | None = None
    isoscore: np.ndarray | None = None
    dims: list[int] = field(default_factory=list)
    vectors: list[int] = field(default_factory=list)


def _weighted(W: Tensor, per_input: Tensor) -> Tensor:
    """(B, …) weighted sums of per-input (N, …) values: the full sample is W = 1."""
    return (W @ per_input.reshape(per_input.shape[0], -1).double()).reshape(W.shape[0], *per_input.shape[1:])


def _mean_cos(S: Tensor, n_self: Tensor, N: Tensor) -> Tensor:
    """Mean cosine over distinct pairs from the sum S of unit vectors: (‖S‖² − n) / (N(N − 1))."""
    return (S.square().sum(-1) - n_self) / (N * (N - 1)).clamp_min(1)


def _unit(X: Tensor, m: Tensor) -> Tensor:
    return X / X.norm(dim=-1, keepdim=True).clamp_min(1e-30) * m.unsqueeze(-1)


def pooled_measures(X: Tensor, m: Tensor, W: Tensor, k: int = 3, r: int = 32) -> dict[str, Tensor]:
    """cos, cos_centred, drift, pr and top-k share of the vectors of all inputs pooled, for the full sample
    (row 0) and each bootstrap draw (rows 1…): returns (B + 1,) tensors.

    A draw's centred covariance is C_b = A_b/N_b − μ_bμ_bᵀ with A_b = Σᵢ wᵢ Cᵢ the weighted sum of the inputs'
    second moments Cᵢ = XᵢᵀXᵢ. Its participation ratio needs tr C_b and ‖C_b‖²_F, both exact from the inputs'
    Gram matrix of second moments ⟨Cᵢ, Cⱼ⟩ and ‖Xᵢμ_b‖²; its top-k share takes the top-k Ritz values of C_b in
    the full sample's top-r principal subspace (exact for the full sample; for a draw a lower bound whose error
    is of second order in the draw's perturbation)."""
    Wf = torch.cat([torch.ones(1, W.shape[1], dtype=W.dtype), W])
    n_in = X.shape[0]
    owner = torch.arange(n_in).unsqueeze(1).expand_as(m)[m]         # the input of each real vector
    P = X[m].double()                                               # (T, d): the real vectors, packed

    def per_input(v: Tensor) -> Tensor:                             # (T, …) -> (N, …): sums within each input
        return torch.zeros((n_in, *v.shape[1:]), dtype=v.dtype).index_add_(0, owner, v)

    def unit_sums(V: Tensor) -> Tensor:
        return per_input(V / V.norm(dim=-1, keepdim=True).clamp_min(1e-30))

    n = m.double().sum(1)
    N = Wf @ n
    mean = _weighted(Wf, per_input(P)) / N.unsqueeze(-1)            # (B+1, d)
    out = {"cos": _mean_cos(_weighted(Wf, unit_sums(P)), N, N)}
    xbar = mean[0]
    out["cos_centred"] = _mean_cos(_weighted(Wf, unit_sums(P - xbar)), N, N)
    sq = Wf @ per_input(P.square().sum(-1))                         # Σ w ‖x‖² = tr A_b
    var = (sq / N - mean.square().sum(-1)).clamp_min(1e-300)          # tr C_b
    out["drift"] = mean.norm(dim=-1) / var.sqrt()
    X32 = X * m.unsqueeze(-1)
    C_in = torch.einsum("nld,nle->nde", X32, X32).reshape(X.shape[0], -1)      # (N, d²)
    G = (C_in @ C_in.T).double()                                    # ⟨Cᵢ, Cⱼ⟩_F
    del C_in
    AA = ((Wf @ G) * Wf).sum(-1)                                    # ‖A_b‖²_F
    XmuSq = per_input((P @ mean.T).square()).T                      # (B+1, N): ‖Xᵢμ_b‖²
    muAmu = (Wf * XmuSq).sum(-1)                                    # μ_bᵀ A_b μ_b
    mu2 = mean.square().sum(-1)
    fro2 = AA / N.square() - 2 * muAmu / N + mu2.square()
    out["pr"] = var.square() / fro2.clamp_min(1e-300)
    d = X.shape[-1]
    full = (P.T @ P) / N[0] - torch.outer(xbar, xbar)
    r = min(d, max(r, k + 1))
    Q = torch.linalg.eigh(full).eigenvectors[:, -r:]                # (d, r)
    XQ = P @ Q                                                      # (T, r)
    QCQ_in = per_input(XQ.unsqueeze(-1) * XQ.unsqueeze(-2))         # (N, r, r): Qᵀ Cᵢ Q
    muQ = mean @ Q                                                  # (B+1, r)
    QCQ = _weighted(Wf, QCQ_in) / N[:, None, None] - torch.einsum("br,bs->brs", muQ, muQ)
    ritz = torch.linalg.eigvalsh(QCQ).flip(-1)
    out["top3"] = ritz[:, :min(k, d)].sum(-1) / var
    return out


def per_input_measures(X: Tensor, m: Tensor) -> dict[str, Tensor]:
    """Yan et al.'s and Yu & Zhang's measures within each input, (N,) each, all from its Gram matrix
    Gᵢ = XᵢXᵢᵀ over its real rows (one batched product, n × n per input, instead of a singular value decomposition
    per input): EV₁ = λ₁/tr G (eq. 5), TokenUni the mean off-diagonal cosine (eq. 3), log RBF_dis from the unit
    rows' distances 2 − 2cos (eq. 4), t_sim = 1ᵀG1/(n tr G) (Def. 1.1); and `s`, the singular values √λ of each
    input, (N, min(n, d)) descending, for the skew (`skew_draws`). `helpers.core.measures` computes each of these
    directly (`tests/test_diagnose_speed.py` holds them to it)."""
    Xd = X.double()
    mf = m.double()
    Xm = Xd * mf.unsqueeze(-1)
    G = Xm @ Xm.transpose(-1, -2)                                   # (N, n, n)
    n = mf.sum(1)
    diag = torch.diagonal(G, dim1=-2, dim2=-1)                      # ‖xᵢ‖²
    total = diag.sum(-1)
    lam = torch.linalg.eigvalsh(G).flip(-1).clamp_min(0)            # λ = σ², descending
    out = {"ev1": lam[:, 0] / total.clamp_min(1e-30)}
    norm = Xd.norm(dim=-1).clamp_min(1e-30)                         # as the book's functions: unmasked rows' norms
    cos = G / (norm.unsqueeze(-1) * norm.unsqueeze(-2))             # masked rows give 0
    out["tokenuni"] = (cos.sum((-2, -1)) - n) / (n * (n - 1)).clamp_min(1)
    unit_sq = torch.diagonal(cos, dim1=-2, dim2=-1)
    pair = mf.unsqueeze(-1) * mf.unsqueeze(-2) * (1 - torch.eye(X.shape[-2], dtype=Xd.dtype))
    dist = (unit_sq.unsqueeze(-1) + unit_sq.unsqueeze(-2) - 2 * cos).clamp_min(0)
    out["rbf_dis"] = torch.log((torch.exp(-dist / 0.5) * pair).sum((-2, -1)) / pair.sum((-2, -1)).clamp_min(1))
    out["t_sim"] = (G.sum((-2, -1)) / n.clamp_min(1) / total.clamp_min(1e-30)).clamp(0.0, 1.0)
    out["s"] = lam[:, :min(X.shape[-2], X.shape[-1])].sqrt()
    return out


def skew_draws(X: Tensor, m: Tensor, W: Tensor, s: Tensor | None = None) -> Tensor:
    """The skewness of the pooled singular values (scaled by the largest present) for the full sample and
    each draw: (B + 1,). `s`: the inputs' singular values where already computed (`per_input_measures`)."""
    s = M.singular_values(X.double(), m) if s is None else s      # (N, r)
    n = m.sum(1)
    valid = torch.arange(s.shape[1]).unsqueeze(0) < n.clamp(max=s.shape[1]).unsqueeze(1)
    owner = torch.arange(s.shape[0]).unsqueeze(1).expand_as(s)[valid]
    v = s[valid]
    Wf = torch.cat([torch.ones(1, W.shape[1], dtype=W.dtype), W])
    w = Wf[:, owner]                                               # (B+1, T)
    top = torch.where(w > 0, v.expand_as(w), torch.zeros_like(w)).amax(-1, keepdim=True)
    x = v / top
    sw = w.sum(-1, keepdim=True)
    mu = (w * x).sum(-1, keepdim=True) / sw
    c = x - mu
    m2 = (w * c.square()).sum(-1) / sw.squeeze(-1)
    m3 = (w * c.pow(3)).sum(-1) / sw.squeeze(-1)
    return m3 / m2.clamp_min(1e-300).pow(1.5)


def qk_draws(q: Tensor, k: Tensor, n: Tensor, W: Tensor) -> tuple[Tensor, Tensor]:
    """cos(q̄_h, k̄_h) averaged over heads for the full sample and each draw (B + 1,), and per head (h,)."""
    Wf = torch.cat([torch.ones(1, W.shape[1], dtype=W.dtype), W])
    Q, K = _weighted(Wf, q.double()), _weighted(Wf, k.double())    # (B+1, h, d_k); the count cancels
    cos = (Q * K).sum(-1) / (Q.norm(dim=-1) * K.norm(dim=-1)).clamp_min(1e-300)
    return cos.mean(-1), cos[0]


def isoscore(X: Tensor, m: Tensor) -> float:
    """IsoScore (Rudman et al. 2022, the `isoscore` package) of the layer's pooled vectors; NaN without it."""
    try:
        from IsoScore.IsoScore import IsoScore
    except ImportError:
        return float("nan")
    return float(IsoScore(X[m].double().numpy()))


@contextmanager
def one_thread():
    """torch on one thread inside, its thread count restored after. The measures' linear algebra works on
    matrices of at most d × d (a layer's covariance, an input's Gram matrix), where a second thread has nothing to
    share and only waits: on two busy cores, the eigenvalues of a 512 × 512 covariance took 0.71 CPU-s on two
    threads against 0.03 on one, its singular values 3.6 against 0.03."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def measure(layers: list[tuple[Tensor, Tensor]], W: Tensor,
            qk: list[tuple[Tensor, Tensor, Tensor]] | None = None, with_isoscore: bool = True,
            label: str | None = None) -> Measured:
    """Every measure at every layer for the full sample and the bootstrap draws `W` (B, N), on one thread
    (`one_thread`); the progress bar reads "<label>: measures per layer"."""
    with one_thread():
        return _measure(layers, W, qk, with_isoscore, label)


def _measure(layers: list[tuple[Tensor, Tensor]], W: Tensor, qk: list[tuple[Tensor, Tensor, Tensor]] | None,
             with_isoscore: bool, label: str | None) -> Measured:
    rows: dict[str, list[Tensor]] = {name: [] for name in MEASURES if name != "qk_cos"}
    iso = []
    Wf = torch.cat([torch.ones(1, W.shape[1], dtype=W.dtype), W])
    for X, m in progress(layers, desc=f"{label}: measures per layer" if label else "measures per layer",
                         total=len(layers)):
        for name, v in pooled_measures(X, m, W).items():
            rows[name].append(v)
        N = Wf.sum(1)
        within = per_input_measures(X, m)
        sv = within.pop("s")
        for name, v in within.items():
            rows[name].append((Wf @ v) / N)
        rows["skew"].append(skew_draws(X, m, W, sv))
        iso.append(isoscore(X, m) if with_isoscore else float("nan"))
    est = {k: torch.stack(v, 1)[0].numpy() for k, v in rows.items()}
    draws = {k: torch.stack(v, 1)[1:].numpy() for k, v in rows.items()}
    heads = None
    if qk is not None:
        per_block = [qk_draws(q, k_, n, W) for q, k_, n in qk]
        mean = torch.stack([torch.full_like(per_block[0][0], float("nan")), *[c for c, _ in per_block]], 1)
        est["qk_cos"], draws["qk_cos"] = mean[0].numpy(), mean[1:].numpy()
        h = per_block[0][1].numel()
        heads = np.stack([np.full(h, np.nan), *[hc.numpy() for _, hc in per_block]])
    return Measured(est, draws, heads, np.array(iso), [int(X.shape[-1]) for X, _ in layers],
                    [int(m.sum()) for _, m in layers])


def paired_variance(model_draws: np.ndarray, twin_draws: np.ndarray) -> np.ndarray:
    """v per layer: the bootstrap variance of m_b − t̄_b over the probe's inputs, the model's draw minus the twins'
    mean on the same draw (paired: the same inputs in each draw for the model and every twin); NaN where a layer
    has no value (q/k at the embeddings). Shapes: model (B, L), twins (K, B, L)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.nanvar(model_draws - twin_draws.mean(0), axis=0, ddof=1)


def twin_test(model_estimate: np.ndarray, model_draws: np.ndarray, twin_estimates: np.ndarray,
              twin_draws: np.ndarray, bound: float = 0.05) -> dict[str, np.ndarray]:
    """Is the model, at each layer, a new draw from its twins' distribution? `twin_test_of` with v, the bootstrap
    variance of the paired difference (`paired_variance`). Shapes: model (L,), (B, L); twins (K, L), (K, B, L)."""
    return twin_test_of(model_estimate, twin_estimates, paired_variance(model_draws, twin_draws), bound)


def twin_test_of(model_estimate: np.ndarray, twin_estimates: np.ndarray, v: np.ndarray,
                 bound: float = 0.05) -> dict[str, np.ndarray]:
    """The twin test from its moments. The difference from the twins' mean, D = m − t̄, against its standard error
    se = √(s²(1 + 1/K) + v): s² the variance of the K ≥ 2 twins' estimates (how far two random initialisations lie
    apart; the 1/K for the error of their mean), v the bootstrap variance of m_b − t̄_b over the probe's inputs
    (`paired_variance`). t = D/se is read as Student-t's with Welch–Satterthwaite's degrees of freedom, taken with
    the twins' variance at its upper 1 − `bound` confidence bound (a report passes α/cells): K − 1 unless the
    probe's variance outweighs even that, so that twins that agree by chance at one layer of many do not pass for
    a measured spread; `p` its two-sided p-value (1 where D = se = 0). The multiplicity rule over a report's cells
    is `fdr_threshold` (`TwinTest` holds both). Shapes: model (L,), twins (K, L), v (L,); every output (L,)."""
    from scipy import stats

    K = twin_estimates.shape[0]
    if K < 2:
        raise ValueError("the twin test needs at least two twins (their spread)")
    diff = model_estimate - twin_estimates.mean(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        s2 = twin_estimates.var(0, ddof=1)
        init = s2 * (1 + 1 / K)
        se = np.sqrt(init + v)
        hi = init * (K - 1) / stats.chi2.ppf(bound, K - 1)          # the twins' variance at its upper bound
        df = np.where(hi > 0, (K - 1) * ((hi + v) / np.where(hi > 0, hi, 1)) ** 2, np.inf)
        df = np.minimum(df, 1e6)
        t = np.where(se > 0, diff / np.where(se > 0, se, 1), np.where(diff == 0, 0.0, np.sign(diff) * np.inf))
        p = np.where(np.isfinite(diff) & np.isfinite(se), 2 * stats.t.sf(np.abs(t), df), np.nan)
    return {"estimate": diff, "twins_mean": twin_estimates.mean(0), "se": se, "spread": np.sqrt(s2), "df": df, "t": t,
            "p": p}


def prediction_band(tested: dict[str, np.ndarray], level: float = 0.95) -> dict[str, np.ndarray]:
    """The twin test's prediction interval for a new draw from the twins, per layer: t̄ ± q·se, with `twin_test`'s
    se (the twins' variance s²(1 + 1/K) and the probe's variance v of the model's paired difference from them) and
    degrees of freedom, q Student-t's two-sided quantile at `level`. The model lies outside it exactly where that
    cell's p-value, read alone, is below 1 − `level`; a report flags a cell only past the false-discovery
    threshold over all its cells (`fdr_threshold`), which asks for more. `tested`: `twin_test`'s output."""
    mean = tested["twins_mean"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        half = t_quantile(1 - level, tested["df"]) * tested["se"]
    return {"estimate": mean, "low": mean - half, "high": mean + half, "spread": tested["spread"]}


def fdr_threshold(p: np.ndarray, alpha: float = 0.05) -> float:
    """Benjamini–Hochberg's step-up rule over the finite p-values in `p` (any shape): the largest p₍ₖ₎ with
    p₍ₖ₎ ≤ αk/m, every cell with p at or below it flagged; 0.0 when none qualifies (nothing flagged). Where no
    cell differs, the chance of any flag is at most about α (as Bonferroni's); where several do, about a share
    α of the flags are false, and a cell needs p ≤ αk/m rather than α/m — the power kept across layers and
    measures."""
    q = np.sort(np.asarray(p, dtype=float)[np.isfinite(p)])
    if not q.size:
        return 0.0
    ok = np.flatnonzero(q <= alpha * np.arange(1, q.size + 1) / q.size)
    return float(q[ok[-1]]) if ok.size else 0.0


def t_quantile(p_two_sided: float, df: np.ndarray) -> np.ndarray:
    """The |t| beyond which a two-sided p-value is below `p_two_sided`, per cell's degrees of freedom."""
    from scipy import stats

    return stats.t.isf(p_two_sided / 2, np.asarray(df, dtype=float))


@dataclass
class TwinTest:
    """The twin test over every (layer, measure) cell of one model: per measure `twin_test_of`'s arrays (`tested`),
    each read at the bound α/cells, and Benjamini–Hochberg over all `cells` at false-discovery rate 1 − `level`.
    `tokuni diagnose` (`run.Diagnosis`) and the synthesis chapter read a model through this one class, so that they
    say the same thing about the same model. Build it with `of` from per-measure moments."""

    tested: dict[str, dict[str, np.ndarray]]
    cells: int
    level: float = 0.95

    @classmethod
    def of(cls, model: dict[str, np.ndarray], twins: dict[str, np.ndarray], v: dict[str, np.ndarray],
           level: float = 0.95) -> TwinTest:
        """Per measure: the model's estimate (L,), the twins' estimates (K ≥ 2, L) and `paired_variance` (L,). The
        cells are the model's finite estimates over every measure."""
        cells = int(sum(np.isfinite(np.asarray(model[m], dtype=float)).sum() for m in model))
        bound = (1 - level) / max(cells, 1)
        tested = {m: twin_test_of(np.asarray(model[m], dtype=float), np.asarray(twins[m], dtype=float),
                                  np.asarray(v[m], dtype=float), bound=bound) for m in model}
        return cls(tested, cells, level)

    @property
    def alpha(self) -> float:
        return 1 - self.level

    @cached_property
    def threshold(self) -> float:
        """The p-value at or below which a cell is flagged (`fdr_threshold` over every cell); 0.0: none is."""
        return fdr_threshold(np.concatenate([t["p"] for t in self.tested.values()]), self.alpha)

    def differs(self, measure: str) -> np.ndarray:
        """Per layer: the cell's p-value at or below the threshold."""
        p = self.tested[measure]["p"]
        return np.isfinite(p) & (p <= self.threshold)

    def difference(self, measure: str) -> dict[str, np.ndarray]:
        """Model − twins' mean per layer, with the interval that excludes 0 exactly where the cell is flagged:
        ± t·se at the threshold, or at Bonferroni's α/cells where nothing is flagged."""
        t = self.tested[measure]
        p = self.threshold or self.alpha / max(self.cells, 1)
        half = t_quantile(p, t["df"]) * t["se"] * (1 - 1e-9)     # the threshold cell: flagged, so 0 lies outside
        return {"estimate": t["estimate"], "low": t["estimate"] - half, "high": t["estimate"] + half}

    def band(self, measure: str) -> dict[str, np.ndarray]:
        """The twins' mean with the prediction interval for a new draw from them (`prediction_band`)."""
        return prediction_band(self.tested[measure], self.level)

    def detectable(self, measure: str) -> dict[str, np.ndarray]:
        """Per layer, the smallest shift from the twins' mean this run flags: `one`, where it is the only cell
        that moves (the rule then asks p ≤ α/cells, Bonferroni's), and `all`, where every cell moves (p ≤ α), in
        the measure's units, and the same in twin standard deviations (`one_sd`, `all_sd`). A true shift of this
        size is flagged about half the time."""
        t = self.tested[measure]
        one = t_quantile(self.alpha / max(self.cells, 1), t["df"]) * t["se"]
        every = t_quantile(self.alpha, t["df"]) * t["se"]
        with np.errstate(divide="ignore", invalid="ignore"):
            sd = np.where(t["spread"] > 0, t["spread"], np.nan)
            return {"one": one, "all": every, "one_sd": one / sd, "all_sd": every / sd}

    def power(self) -> dict[str, float]:
        """The median over cells of the smallest shift flagged, in twin standard deviations, for one cell moving
        alone (`one_sd`) and for every cell moving (`all_sd`)."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            one = np.concatenate([self.detectable(m)["one_sd"] for m in self.tested])
            every = np.concatenate([self.detectable(m)["all_sd"] for m in self.tested])
            return {"one_sd": float(np.nanmedian(one)), "all_sd": float(np.nanmedian(every))}


def interval(draws: np.ndarray, estimate: np.ndarray, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """Percentile bounds over the draws (axis 0), shifted so that the draws' median sits on the full-sample
    `estimate`: a resample repeats inputs, which biases ratio measures (the participation ratio most: repeated
    vectors concentrate the spectrum), and the shift keeps the spread of the draws without that bias."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)         # a layer without the measure (q/k at embeddings)
        lo, med, hi = np.nanpercentile(draws, [50 * (1 - level), 50, 50 * (1 + level)], axis=0)
    return estimate + lo - med, estimate + hi - med


__all__ = ["MEASURES", "COLLAPSE_SIGN", "Measured", "bootstrap_weights", "measure", "interval", "paired_variance",
           "twin_test", "twin_test_of", "TwinTest", "prediction_band", "fdr_threshold", "t_quantile",
           "pooled_measures", "per_input_measures", "skew_draws", "qk_draws", "isoscore", "one_thread"]
