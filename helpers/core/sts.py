"""Unsupervised STS scoring (Yan et al. §5.1, App. B-C): sentence pooling from per-layer token states,
the post-processing methods of Table 1, Spearman scoring, Table 4's uniformity metrics and LSDS
(Fig. 6). torch/numpy/scipy only: the model forward pass lives in `helpers.hf.sts`."""

from __future__ import annotations

import hashlib
import typing
from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch
from scipy import stats
from torch import Tensor

from . import measures as M
from .blocks import deescalate
from .config import choice
from .kept import Kept
from .papers import SOFTDECAY_ALPHA
from .softdecay import softdecay_flipfree, softdecay_transform, whitening_apply, whitening_fits
from .stats import Interval
from .stats import Method as IntervalMethod

#: how a sentence is pooled from its token states (`pool`)
Pooling = Literal["first_last", "first_last_l1", "last", "cls"]
POOLINGS: tuple[Pooling, ...] = typing.get_args(Pooling)
#: every post-processing method the chapter scores, by the name its runs store it under (`METHOD_SPECS`)
Method = Literal["vanilla", "whitening", "whitening-256", "de-escalation", "SoftDecay (sentence)", "SoftDecay (token)",
                 "SoftDecay (σ/√N)", "SoftDecay (σ/σ_max)", "SoftDecay (clamped)", "SoftDecay (rescaled)"]
#: what a method does to the sentence embeddings: nothing, BERT-whitening, de-escalation (eq. 21), SoftDecay
Family = Literal["raw", "whitening", "de-escalation", "SoftDecay"]


@dataclass(frozen=True)
class MethodSpec:
    """One method of `METHOD_SPECS`: its family and the options of its variant, which `apply_method` reads.

    * `k`: whitening keeps the first k directions of W (None: all);
    * `level`: SoftDecay on each sentence matrix (`"sentence"`) or on each sentence's token states at encoding time
      (`"token"`, the identity here);
    * `flipfree`: SoftDecay with property 1 kept (`core.softdecay.softdecay_flipfree`'s `how`);
    * `scaled_by`: SoftDecay of X/c scaled back (`softdecay_scaled`'s `by`);
    * `paper`: a row of the paper's Table 1 (or our reading of one), not one of our flip-free variants."""

    family: Family
    k: int | None = None
    level: Literal["sentence", "token"] | None = None
    flipfree: Literal["clamp", "rescale"] | None = None
    scaled_by: Literal["sqrt_n", "max"] | None = None
    paper: bool = True


#: the registry: every method name the chapter uses (and its committed runs store) to what it is
METHOD_SPECS: dict[Method, MethodSpec] = {
    "vanilla": MethodSpec("raw"),
    "whitening": MethodSpec("whitening"),
    "whitening-256": MethodSpec("whitening", k=256),
    "de-escalation": MethodSpec("de-escalation"),
    "SoftDecay (sentence)": MethodSpec("SoftDecay", level="sentence"),
    "SoftDecay (token)": MethodSpec("SoftDecay", level="token"),
    "SoftDecay (σ/√N)": MethodSpec("SoftDecay", level="sentence", scaled_by="sqrt_n"),
    "SoftDecay (σ/σ_max)": MethodSpec("SoftDecay", level="sentence", scaled_by="max"),
    "SoftDecay (clamped)": MethodSpec("SoftDecay", level="sentence", flipfree="clamp", paper=False),
    "SoftDecay (rescaled)": MethodSpec("SoftDecay", level="sentence", flipfree="rescale", paper=False),
}
assert tuple(METHOD_SPECS) == typing.get_args(Method), "the registry and `Method` list the same names"
METHODS: tuple[Method, ...] = tuple(m for m, s in METHOD_SPECS.items() if s.paper)
#: SoftDecay with property 1 kept (no direction changes sign): σ clamped at |α|, or the spectrum rescaled so
#: its smallest live value sits at |α| (`core.softdecay.softdecay_flipfree`); our variants, not the paper's
FLIP_FREE: tuple[Method, ...] = tuple(m for m, s in METHOD_SPECS.items() if s.flipfree)


def method_spec(method: str) -> MethodSpec:
    """The registry's entry of `method`; an unknown name raises a `ValueError` that names it and the known ones."""
    if method not in METHOD_SPECS:
        raise ValueError(f"unknown method {method!r}; known: {list(METHOD_SPECS)}")
    return METHOD_SPECS[method]


def check_methods(methods) -> tuple[Method, ...]:
    """`methods` as a tuple, each checked against the registry (`method_spec`)."""
    methods = tuple(methods)
    for m in methods:
        method_spec(m)
    return methods


#: the two ways of scoring a year's file: the paper's (transform fitted on the whole file, Spearman per
#: subset, mean over subsets, as `SequentialEvaluator(..., np.mean)` does) and one pooled Spearman
Protocol = Literal["subset-mean", "pooled"]
PROTOCOLS: tuple[Protocol, ...] = typing.get_args(Protocol)


@dataclass
class TokenStates:
    """What one encoder pass keeps per sentence: the masked mean of every layer (N, layers, d), the
    last layer's [CLS] (N, d), and the masked mean of the last layer after token-level SoftDecay (N, d)."""

    layer_means: Tensor
    cls_last: Tensor
    token_sd_last: Tensor | None


def pool(e: TokenStates, pooling: Pooling = "first_last", token_level: bool = False) -> Tensor:
    """Sentence embeddings (N, d). `first_last`: mean over real tokens of (h₀ + h_L)/2, the authors'
    code (embedding output + last layer); `first_last_l1`: (h₁ + h_L)/2, as SimCSE later corrected
    it; `last`: mean of h_L; `cls`: h_L[CLS]. `token_level` swaps h_L for its token-level SoftDecay."""
    choice("pooling", pooling, Pooling)
    last = e.layer_means[:, -1]                        # (N, d): layer L's masked mean
    if token_level:
        if e.token_sd_last is None:
            raise ValueError("the token states were encoded without token-level SoftDecay (token_alpha=None)")
        if pooling == "cls":
            raise ValueError("token-level SoftDecay is pooled by means, not [CLS]")
        last = e.token_sd_last
    if pooling == "first_last":
        return (e.layer_means[:, 0] + last) / 2  # (N, d): (h₀ + h_L)/2
    if pooling == "first_last_l1":
        return (e.layer_means[:, 1] + last) / 2  # (N, d): (h₁ + h_L)/2
    if pooling == "last":
        return last
    return e.cls_last


def spearman100(e1: Tensor, e2: Tensor, gold: list[float]) -> float:
    """Spearman ×100 between gold scores and the cosine similarity of paired embeddings."""
    cos = torch.nn.functional.cosine_similarity(e1.double(), e2.double(), dim=-1).numpy()
    return float(stats.spearmanr(cos, np.asarray(gold)).statistic * 100)


def softdecay_scaled(X: Tensor, alpha: float, by: Literal["sqrt_n", "max"]) -> Tensor:
    """Our normalised SoftDecay (not in the paper): Algorithm 1 applied to X/c and scaled back, so f
    sees σ/c — c = √N (`"sqrt_n"`: the spectrum of the second-moment matrix, the same for a set and
    for that set repeated, so independent of how many sentences are scored together) or c = σ_max
    (`"max"`: invariant to the scale of X). Eq. (2) crosses zero at λ = |α|, so every σ/c below |α|
    changes sign; `sign_flips` counts them."""
    if choice("by", by, ("sqrt_n", "max")) == "sqrt_n":
        c = X.shape[0] ** 0.5
    else:
        c = float(torch.linalg.matrix_norm(X.double(), ord=2))
    return softdecay_transform(X / c, alpha) * c


def sign_flips(sv: Tensor | np.ndarray, alpha: float, scale: float = 1.0, floor: float = 1e-10) -> int:
    """How many live singular values σ (σ > floor·σ_max) have σ/scale < |α|, where eq. (2) is negative,
    so that Algorithm 1 (K > 0) flips the sign of their direction (property 1 broken)."""
    s = np.asarray(sv, dtype=float)
    live = s[s > floor * s.max()]
    return int((live / scale < -alpha).sum())


def apply_method(method: Method, e1: Tensor, e2: Tensor, alpha: float = SOFTDECAY_ALPHA,
                 tau: float = 1.0) -> tuple[Tensor, Tensor]:
    """The post-processing of one row of Table 1 applied to the two sentence-embedding matrices:
    whitening (and -256) fitted on their concatenation — the test pairs themselves, as WhiteBERT
    (Huang et al.) does, not on NLI as the paper's "BERT-whitening (NLI)" rows; de-escalation (Yu &
    Zhang eq. 21, τ of the mean of the concatenation removed); SoftDecay on each N × d matrix
    separately, as the authors' code does, and our scale-normalised variants (`softdecay_scaled`).
    `SoftDecay (token)` is applied at encoding time: here the identity. What each name does is its entry of
    `METHOD_SPECS`; an unknown name is refused with the known ones."""
    spec = method_spec(method)
    n = e1.shape[0]
    both = torch.cat([e1, e2])                                  # (2N, d): the two sides, fitted together
    if spec.family == "raw" or spec.level == "token":
        return e1, e2
    if spec.family == "whitening":
        mu, W = whitening(both, min(spec.k, both.shape[1]) if spec.k else None)
        out = whitening_apply(both, mu, W)
        return out[:n], out[n:]
    if spec.family == "de-escalation":
        out = deescalate(both, tau)
        return out[:n], out[n:]
    if spec.flipfree:
        return softdecay_flipfree(e1, alpha, spec.flipfree), softdecay_flipfree(e2, alpha, spec.flipfree)
    if spec.scaled_by:
        return softdecay_scaled(e1, alpha, spec.scaled_by), softdecay_scaled(e2, alpha, spec.scaled_by)
    return softdecay_transform(e1, alpha), softdecay_transform(e2, alpha)


#: the whitening fits kept inside `kept_fits()`: (rows' dtype, shape, digest, k) -> (μ, W)
_FITS = Kept(64 * 2**20, lambda fit: fit[0].nbytes + fit[1].nbytes)


def kept_fits(max_bytes: int | None = None):
    """Within this block a whitening fitted before on the same rows (the same bytes) is handed back, not
    refitted: the same numbers. Runs meet the same rows again where a planted size of 0 adds nothing, where a
    set is read twice, and where the cross-fit's halves are the half-samples (both drawn from one seed). The
    oldest fits are let go beyond `max_bytes` (64 MiB)."""
    return _FITS.scope(max_bytes)


def _fits(both: Tensor, ks: tuple[int | None, ...]) -> list[tuple[Tensor, Tensor]]:
    if not _FITS.active:
        return whitening_fits(both, ks)
    rows = both.detach().cpu().contiguous()
    head = (rows.dtype, tuple(rows.shape), hashlib.sha1(rows.view(torch.uint8).numpy().tobytes()).hexdigest())
    missing = tuple(dict.fromkeys(k for k in ks if (*head, k) not in _FITS))
    new = dict(zip(missing, whitening_fits(both, missing), strict=True)) if missing else {}
    out = [new[k] if k in new else _FITS.get((*head, k)) for k in ks]
    for k, fit in new.items():
        _FITS.put((*head, k), fit)
    return out


def whitening(both: Tensor, k: int | None = None) -> tuple[Tensor, Tensor]:
    """BERT-whitening's (μ, W) fitted on `both` (`softdecay.whitening_fit`), once per rows inside `kept_fits()`."""
    return _fits(both, (k,))[0]


def _whitenings(both: Tensor, methods) -> dict[str, tuple[Tensor, Tensor]]:
    """(μ, W) of each whitening variant among `methods`, fitted on `both` as `apply_method` fits it, from one
    decomposition (`softdecay.whitening_fits`: whitening-256 keeps the first columns of whitening's W)."""
    names = [m for m in methods if method_spec(m).family == "whitening"]
    ks = tuple(min(k, both.shape[1]) if (k := METHOD_SPECS[m].k) else None for m in names)
    return dict(zip(names, _fits(both, ks), strict=True)) if names else {}


def apply_methods(methods, e1: Tensor, e2: Tensor, alpha: float = SOFTDECAY_ALPHA,
                  tau: float = 1.0) -> dict[str, tuple[Tensor, Tensor]]:
    """`apply_method` of each of `methods`: {method: (e1', e2')}, the same numbers, with the whitening variants
    fitted from one decomposition of the covariance."""
    methods = check_methods(methods)
    n = e1.shape[0]
    fits = _whitenings(torch.cat([e1, e2]), methods)
    out = {}
    for m in methods:
        if m in fits:
            y = whitening_apply(torch.cat([e1, e2]), *fits[m])  # (2N, k): back to (N, k) each
            out[m] = (y[:n], y[n:])
        else:
            out[m] = apply_method(m, e1, e2, alpha, tau)
    return out


def count_flips(X: Tensor, Y: Tensor, floor: float = 1e-10) -> int:
    """How many live directions of X (singular triplets u, σ, v with σ > floor·σ_max) a transform X → Y
    turns around: uᵀ Y v < 0. For Algorithm 1, Y = U diag(K f(σ)) Vᵀ, so this counts the σ with f(σ) < 0."""
    U, s, Vh = torch.linalg.svd(X.double(), full_matrices=False)
    proj = ((U.T @ Y.double()) * Vh).sum(-1)                   # uᵢᵀ Y vᵢ
    live = s > floor * s.max()
    return int((proj[live] < -1e-6 * float(s.max())).sum())     # float32 round-off of a zeroed direction is not a flip


def mean_share(E: Tensor) -> float:
    """The share of the rows' second moment that is their common mean, ‖μ‖² / mean ‖xᵢ‖² (1: every row the
    same vector; 0: centred rows): how much of an anisotropy is a common vector rather than a spread."""
    E = E.double()
    return float(E.mean(0).square().sum() / E.square().sum(-1).mean())  # ‖μ‖², μ (d,) / mean ‖xᵢ‖² over (N,)


def ev1_centred(E: Tensor) -> float:
    """EV₁ (eq. 5) of the centred rows: the share of the variance along the top principal direction (a
    dominant variance direction, which no common vector explains)."""
    E = E.double()
    return float(M.explained_variance(E - E.mean(0), 1))


def cosines(e1: Tensor, e2: Tensor) -> np.ndarray:
    """Cosine similarity of each pair (float64)."""
    return torch.nn.functional.cosine_similarity(e1.double(), e2.double(), dim=-1).numpy()


def _rank_rows(x: np.ndarray) -> np.ndarray:
    """Average ranks (1-based; ties share the mean of their positions) along the last axis: what
    `scipy.stats.rankdata(x, axis=-1)` returns, bit for bit, without its per-call overhead (the bootstraps
    rank tens of thousands of short rows). Rows holding a NaN go to scipy (it ranks them all NaN)."""
    x = np.asarray(x, dtype=float)
    if x.size == 0 or np.isnan(x).any():
        return stats.rankdata(x, axis=-1)
    n = x.shape[-1]
    rows = x.reshape(-1, n)  # (rows, n): every leading axis flattened
    order = np.argsort(rows, axis=-1, kind="stable")
    ordered = np.take_along_axis(rows, order, -1)
    starts = np.ones(rows.shape, dtype=bool)              # a tie group starts here (and at every row's start)
    starts[:, 1:] = ordered[:, 1:] != ordered[:, :-1]
    group = np.cumsum(starts.ravel()) - 1
    first = np.tile(np.arange(n, dtype=float), len(rows))[starts.ravel()]
    mean_rank = first + (np.bincount(group) - 1) / 2 + 1
    out = np.empty(rows.shape)
    np.put_along_axis(out, order, mean_rank[group].reshape(rows.shape), -1)
    return out.reshape(x.shape)  # back to (…, n)


def _spearman_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Spearman ×100 of each row pair of (B, n) arrays (average ranks for ties, as scipy)."""
    ra, rb = _rank_rows(a), _rank_rows(b)
    ra = ra - ra.mean(-1, keepdims=True)  # (B, n) − (B, 1)
    rb = rb - rb.mean(-1, keepdims=True)
    den = np.sqrt((ra * ra).sum(-1) * (rb * rb).sum(-1))
    return 100 * (ra * rb).sum(-1) / np.where(den > 0, den, np.nan)  # (B,)


def score(cos: np.ndarray, gold, subsets, protocol: Protocol = "subset-mean") -> float:
    """Spearman ×100 of cosines against gold: `pooled` over all pairs, or `subset-mean` — per subset,
    then the mean over subsets (the evaluation scripts the paper used)."""
    return float(score_draws(cos[None], np.asarray(gold, float)[None], subsets, protocol)[0])  # one row: (1, n)


def score_draws(cos: np.ndarray, gold: np.ndarray, subsets, protocol: Protocol) -> np.ndarray:
    """`score` of each row of (B, n) cosines and gold scores whose columns keep the subset labels."""
    if choice("protocol", protocol, Protocol) == "pooled":
        return _spearman_rows(cos, gold)
    sub = np.asarray(subsets)
    # (subsets, B) -> (B,)
    return np.mean([_spearman_rows(cos[:, sub == s], gold[:, sub == s]) for s in dict.fromkeys(sub.tolist())], 0)


def bootstrap_indices(subsets, draws: int, seed: int) -> np.ndarray:
    """(draws, n) resampled pair indices, stratified by subset (each subset keeps its size), so the
    subset-mean protocol stays defined; the same indices serve every method (a paired bootstrap)."""
    sub = np.asarray(subsets)
    rng = np.random.default_rng(seed)
    out = np.empty((draws, len(sub)), dtype=np.int64)
    for s in dict.fromkeys(sub.tolist()):
        where = np.flatnonzero(sub == s)
        out[:, where] = where[rng.integers(0, len(where), (draws, len(where)))]
    return out


def paired_bootstrap(cos_a: np.ndarray, cos_b: np.ndarray, gold, subsets, protocol: Protocol = "subset-mean",
                     draws: int = 1000, seed: int = 0, idx: np.ndarray | None = None) -> np.ndarray:
    """Bootstrap draws of score(b) − score(a): sentence pairs resampled with replacement within each
    subset, the same resample for both methods (the transforms stay as fitted on the full set)."""
    idx = bootstrap_indices(subsets, draws, seed) if idx is None else idx
    g = np.asarray(gold, float)[idx]  # (draws, n)
    sub = np.asarray(subsets)[idx[0]]           # stratified: every row keeps the column's subset
    return score_draws(cos_b[idx], g, sub, protocol) - score_draws(cos_a[idx], g, sub, protocol)  # (draws,)


def refit_bootstrap(e1: Tensor, e2: Tensor, gold, subsets, methods: tuple[Method, ...], draws: int = 200, seed: int = 0,
                    alpha: float = SOFTDECAY_ALPHA, protocol: Protocol = "subset-mean") -> dict[str, np.ndarray]:
    """Bootstrap draws of each method's score with its transform *refitted on every resample*: sentence
    pairs resampled with replacement within each subset (the same resample for every method, so the
    draws are paired), each transform fitted on the resampled pairs as `apply_method` fits it (whitening
    on their concatenation, SoftDecay on each sentence matrix), then scored. Fitting once on the full set
    and resampling only the scores leaves out the transforms' own sampling variance. Returns
    {method: (draws,) scores}."""
    methods = check_methods(methods)
    idx = bootstrap_indices(subsets, draws, seed)
    g, sub = np.asarray(gold, float), np.asarray(subsets)
    cos = {m: np.empty(idx.shape) for m in methods}  # (draws, n) per method
    for b in range(draws):
        i = torch.as_tensor(idx[b])
        for m, (x, y) in apply_methods(methods, e1[i], e2[i], alpha).items():
            cos[m][b] = cosines(x, y)
    # every draw scored at once (row by row, as `score` scores one): stratified, so subsets keep their place
    return {m: score_draws(c, g[idx], sub, protocol) for m, c in cos.items()}


def half_sample_indices(subsets, draws: int, seed: int) -> list[np.ndarray]:
    """`draws` half-samples of the pairs without replacement, stratified by subset (each subset gives
    ⌊n_s/2⌋ of its n_s pairs, at least one): sorted index arrays. No pair appears twice in a half-sample, so a
    transform fitted on it sees only distinct rows."""
    sub = np.asarray(subsets)
    rng = np.random.default_rng(seed)
    groups = [np.flatnonzero(sub == s) for s in dict.fromkeys(sub.tolist())]
    return [np.sort(np.concatenate([rng.choice(g, max(1, len(g) // 2), replace=False) for g in groups]))
            for _ in range(draws)]


def halfsample_refit(e1: Tensor, e2: Tensor, gold, subsets, methods: tuple[Method, ...], draws: int = 100,
                     seed: int = 0, alpha: float = SOFTDECAY_ALPHA,
                     protocol: Protocol = "subset-mean") -> dict[str, np.ndarray]:
    """Subsampling without replacement (m-out-of-n with m = n/2; Politis & Romano 1994): on each of `draws`
    stratified half-samples every transform is fitted on the half-sample's own pairs, as `apply_method` fits
    it on a whole set, and scored there. With m = n/2 the finite-population factor (1 − m/n)/m equals 1/n, so the
    spread of the half-sample scores is the sampling spread of a score on n pairs without rescaling; their
    mean estimates the score of a transform fitted on n/2 distinct pairs. Estimate and interval come from the
    same fits (`same_fit_interval`). Returns {method: (draws,) scores}, paired across methods."""
    methods = check_methods(methods)
    g, sub = np.asarray(gold, float), np.asarray(subsets)
    halves = np.stack(half_sample_indices(sub, draws, seed))    # sorted, ⌊n_s/2⌋ per subset: one layout for all
    cos = {m: np.empty(halves.shape) for m in methods}
    for b, idx in enumerate(halves):
        i = torch.as_tensor(idx)
        for m, (x, y) in apply_methods(methods, e1[i], e2[i], alpha).items():
            cos[m][b] = cosines(x, y)
    return {m: score_draws(c, g[halves], sub[halves[0]], protocol) for m, c in cos.items()}


def fitted_map(method: Method, e1: Tensor, e2: Tensor, alpha: float = SOFTDECAY_ALPHA):
    """The transform of `apply_method` fitted on (e1, e2), as a function that applies it to other rows
    (x1, x2) -> (y1, y2): whitening's (μ, W) from the concatenation; SoftDecay's linear map from each sentence
    matrix X = U diag(σ) Vᵀ to Algorithm 1's output, V diag(K f(σ)/σ) Vᵀ over the live directions (the map
    that sends X to `softdecay_transform(X)`), applied to the new rows of the same side."""
    spec = method_spec(method)
    if spec.family == "raw" or spec.level == "token":
        return lambda x1, x2: (x1, x2)
    if spec.family == "whitening":
        return _whitening_map(*_whitenings(torch.cat([e1, e2]), (method,))[method])
    if method == "SoftDecay (sentence)":
        def linear(X: Tensor) -> Tensor:
            X64 = X.double()
            U, sv, Vh = torch.linalg.svd(X64, full_matrices=False)  # U (N, r), σ (r,), Vᵀ (r, d)
            live = sv > 1e-10 * sv.max()
            Y = softdecay_transform(X64, alpha)
            gain = ((U.T @ Y) * Vh).sum(-1) / sv.clamp_min(1e-300)      # K f(σ)/σ per direction
            V = Vh[live].T  # (d, live)
            return V @ torch.diag(gain[live]) @ V.T  # (d, d): rows x (·, d) map to x @ it
        M1, M2 = linear(e1), linear(e2)
        return lambda x1, x2: ((x1.double() @ M1).to(x1.dtype), (x2.double() @ M2).to(x2.dtype))
    raise ValueError(f"no out-of-sample map for {method!r}; maps exist for the raw, whitening and "
                     "SoftDecay (sentence) methods")


def _whitening_map(mu: Tensor, W: Tensor):
    return lambda x1, x2: (whitening_apply(x1, mu, W), whitening_apply(x2, mu, W))


def fitted_maps(methods, e1: Tensor, e2: Tensor, alpha: float = SOFTDECAY_ALPHA) -> dict:
    """`fitted_map` of each of `methods`, the whitening variants fitted from one decomposition (the same maps)."""
    methods = check_methods(methods)
    fits = _whitenings(torch.cat([e1, e2]), methods)
    return {m: _whitening_map(*fits[m]) if m in fits else fitted_map(m, e1, e2, alpha) for m in methods}


def crossfit(e1: Tensor, e2: Tensor, gold, subsets, methods: tuple[Method, ...], splits: int = 20, boot: int = 50,
             seed: int = 0, alpha: float = SOFTDECAY_ALPHA,
             protocol: Protocol = "subset-mean") -> dict[str, np.ndarray]:
    """Cross-fitting: the pairs split at random into two halves (stratified by subset), each transform fitted
    on one half and applied to the other (`fitted_map`), and the other way round, so every pair is scored by a
    transform that never saw it; repeated over `splits` random splits. For each split, `boot` paired bootstrap
    resamples of the scored pairs (the fitted transforms held fixed) give the score's sampling spread.
    Returns {method: (splits, boot + 1) scores}: column 0 each split's score on all pairs, the rest its
    resamples — paired across methods (same splits, same resamples)."""
    methods = check_methods(methods)
    g, sub = np.asarray(gold, float), np.asarray(subsets)
    n = len(g)
    out = {m: np.empty((splits, boot + 1)) for m in methods}  # (splits, boot + 1) per method
    for k, half in enumerate(half_sample_indices(sub, splits, seed)):
        a = np.zeros(n, bool)
        a[half] = True
        ia, ib = torch.as_tensor(np.flatnonzero(a)), torch.as_tensor(np.flatnonzero(~a))
        idx = bootstrap_indices(sub, boot, seed + 1 + k)
        cos = {m: np.empty(n) for m in methods}
        for fit, apply in ((ia, ib), (ib, ia)):
            for m, f in fitted_maps(methods, e1[fit], e2[fit], alpha).items():
                cos[m][apply.numpy()] = cosines(*f(e1[apply], e2[apply]))
        for m in methods:
            out[m][k, 0] = score(cos[m], g, sub, protocol)
            out[m][k, 1:] = score_draws(cos[m][idx], g[idx], sub[idx[0]], protocol)  # (boot,)
    return out


def same_fit_interval(draws: np.ndarray, level: float = 0.95, method: IntervalMethod = "subsample") -> Interval:
    """A difference's estimate and interval from one set of fits: for half-samples, the mean of the draws and
    their percentile interval; for cross-fitting ((splits, boot + 1) draws), the mean of the splits' scores and
    the percentile interval of every split's resamples pooled (the split's own randomness and the pairs')."""
    d = np.asarray(draws, float)
    if d.ndim == 2:
        est, pool_ = float(d[:, 0].mean()), d[:, 1:].ravel()  # d (splits, boot + 1): pooled (splits·boot,)
    else:
        est, pool_ = float(d.mean()), d
    lo, hi = np.nanpercentile(pool_, [50 * (1 - level), 50 * (1 + level)])
    return Interval(est, float(lo), float(hi), int(pool_.size), method, level)


def recentre(point: float, low: float, high: float) -> tuple[float, float]:
    """A refitted bootstrap interval moved onto the full-set estimate: (point + low − c, point + high − c),
    c the midpoint of [low, high]. A resample holds about 63 % distinct pairs, and a transform fitted on
    fewer distinct rows is worse (whitening in d dimensions from about 1.3 d distinct rows most of all), so
    the refitted draws sit off the full-set estimate by an amount that is not sampling variance; their
    spread is kept, that shift removed."""
    c = (low + high) / 2
    return point + low - c, point + high - c


def interval(draws: np.ndarray, level: float = 0.95) -> tuple[float, float]:
    """The bounds of the percentile interval of bootstrap draws (`stats.Interval.from_draws`), as the
    committed result tables store them beside their estimate."""
    i = Interval.from_draws(draws, level=level)
    return i.low, i.high


#: the two planted anisotropies (`plant`): a common vector, a common direction
Plant = Literal["mean", "spike"]


def plant(E: Tensor, kind: Plant, size: float, seed: int = 0) -> Tensor:
    """Planted anisotropy on sentence embeddings (N, d): a common vector of norm size·r added to every
    row (`mean`), or a common direction with a per-row N(0, 1) coefficient (`spike`, a dominant
    variance direction), r the RMS row norm of E; the direction is a fixed random unit vector."""
    choice("kind", kind, Plant)
    g = torch.Generator().manual_seed(seed)
    u = torch.randn(E.shape[1], generator=g, dtype=torch.float64)
    u = u / u.norm()
    r = E.double().norm(dim=-1).square().mean().sqrt()  # () from (N,) row norms
    if kind == "mean":
        return (E.double() + size * r * u).to(E.dtype)
    z = torch.randn(E.shape[0], 1, generator=torch.Generator().manual_seed(seed + 1), dtype=torch.float64)   # spike
    return (E.double() + size * r * z * u).to(E.dtype)


def uniformity_metrics(E: Tensor) -> dict[str, float]:
    """Table 4's uniformity metrics of a set of embeddings (N, d): EV₁ (eq. 5), log RBF_dis with
    t = 0.5 on unit vectors (eq. 4, App. B), TokenUni (eq. 3)."""
    return {"EV1": float(M.explained_variance(E, 1)), "RBF_dis": float(M.rbf_dis(E, t=0.5)),
            "TokenUni": float(M.token_uni(E))}


def _unit(x: Tensor) -> Tensor:
    return x / x.norm(dim=-1, keepdim=True).clamp_min(1e-12)


def lsds_score(E: Tensor, F: Tensor, k: int = 12, max_points: int = 3000, seed: int = 0,
               normalise: bool = True) -> float:
    """LSDS (eq. 6) with k = 12 neighbours (App. B), on unit-normalised embeddings, t = 0.5; with
    `normalise` the neighbour weights sum to one (our reading of "a linear combination weighted by
    the distance"), without it they are eq. (6)'s raw RBF weights; at most `max_points` points (a
    fixed random subset)."""
    if E.shape[0] > max_points:
        idx = torch.randperm(E.shape[0], generator=torch.Generator().manual_seed(seed))[:max_points]
        E, F = E[idx], F[idx]
    return float(M.lsds(_unit(E.double()), _unit(F.double()), k=k, t=0.5, normalise_weights=normalise))


def lsds_lle(E: Tensor, F: Tensor, k: int = 12, max_points: int = 3000, seed: int = 0, reg: float = 1e-3) -> float:
    """LSDS as the authors' code computes it (`metrics.py::nearbyloss`, a third reading of eq. 6): rows
    unit-normalised; each point's k nearest neighbours in E, *itself included* (a k-NN query on the fitted
    points); LLE barycentre weights w (min ‖e_i − Σ_j w_j e_j‖² with Σ w = 1, the Gram matrix regularised
    by reg·trace) found in E; the score is the Frobenius norm ‖F − W F‖ of F rebuilt with E's weights. At
    most `max_points` rows (the fixed random subset `lsds_score` uses)."""
    if E.shape[0] > max_points:
        idx = torch.randperm(E.shape[0], generator=torch.Generator().manual_seed(seed))[:max_points]
        E, F = E[idx], F[idx]
    X, Y = _unit(E.double()).numpy(), _unit(F.double()).numpy()
    n = X.shape[0]
    k = min(k, n)
    d2 = (X * X).sum(1)[:, None] + (X * X).sum(1)[None] - 2 * X @ X.T  # (n, n) squared distances
    ind = np.argsort(d2, axis=1, kind="stable")[:, :k]  # (n, k): itself first
    rebuilt = np.empty_like(Y)
    for i in range(n):
        Cm = X[ind[i]] - X[i]  # (k, d)
        G = Cm @ Cm.T  # (k, k)
        tr = np.trace(G)
        G[np.diag_indices(k)] += reg * tr if tr > 0 else reg
        w = np.linalg.solve(G, np.ones(k))
        rebuilt[i] = (w / w.sum()) @ Y[ind[i]]  # (k,) @ (k, d') -> (d',)
    return float(np.linalg.norm(Y - rebuilt))


__all__ = ["Pooling", "POOLINGS", "Method", "Family", "MethodSpec", "METHOD_SPECS", "method_spec", "check_methods",
           "Protocol", "METHODS", "FLIP_FREE", "count_flips", "mean_share", "ev1_centred", "PROTOCOLS",
           "softdecay_scaled", "sign_flips", "recentre", "cosines", "score", "score_draws", "bootstrap_indices",
           "paired_bootstrap", "refit_bootstrap", "interval", "plant", "TokenStates", "pool", "spearman100",
           "apply_method", "apply_methods", "fitted_maps", "kept_fits", "uniformity_metrics", "lsds_score", "lsds_lle"]
