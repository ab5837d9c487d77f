"""Unsupervised STS scoring (Yan et al. §5.1, App. B-C): sentence pooling from per-layer token states,
the post-processing methods of Table 1, Spearman scoring, Table 4's uniformity metrics and LSDS
(Fig. 6). torch/numpy/scipy only: the model forward pass lives in `helpers.hf.sts`."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from scipy import stats
from torch import Tensor

from . import measures as M
from .blocks import deescalate
from .softdecay import softdecay_transform, whitening_apply, whitening_fit

POOLINGS = ("first_last", "first_last_l1", "last", "cls")
METHODS = ("vanilla", "whitening", "whitening-256", "de-escalation", "SoftDecay (sentence)", "SoftDecay (token)")


@dataclass
class TokenStates:
    """What one encoder pass keeps per sentence: the masked mean of every layer (N, layers, d), the
    last layer's [CLS] (N, d), and the masked mean of the last layer after token-level SoftDecay (N, d)."""

    layer_means: Tensor
    cls_last: Tensor
    token_sd_last: Tensor | None


def pool(e: TokenStates, pooling: str = "first_last", token_level: bool = False) -> Tensor:
    """Sentence embeddings (N, d). `first_last`: mean over real tokens of (h₀ + h_L)/2, the authors'
    code (embedding output + last layer); `first_last_l1`: (h₁ + h_L)/2, as SimCSE later corrected
    it; `last`: mean of h_L; `cls`: h_L[CLS]. `token_level` swaps h_L for its token-level SoftDecay."""
    if pooling not in POOLINGS:
        raise ValueError(f"pooling {pooling!r}: use one of {POOLINGS}")
    last = e.layer_means[:, -1]
    if token_level:
        if e.token_sd_last is None:
            raise ValueError("the token states were encoded without token-level SoftDecay (token_alpha=None)")
        if pooling == "cls":
            raise ValueError("token-level SoftDecay is pooled by means, not [CLS]")
        last = e.token_sd_last
    if pooling == "first_last":
        return (e.layer_means[:, 0] + last) / 2
    if pooling == "first_last_l1":
        return (e.layer_means[:, 1] + last) / 2
    if pooling == "last":
        return last
    return e.cls_last


def spearman100(e1: Tensor, e2: Tensor, gold: list[float]) -> float:
    """Spearman ×100 between gold scores and the cosine similarity of paired embeddings."""
    cos = torch.nn.functional.cosine_similarity(e1.double(), e2.double(), dim=-1).numpy()
    return float(stats.spearmanr(cos, np.asarray(gold)).statistic * 100)


def apply_method(method: str, e1: Tensor, e2: Tensor, alpha: float = -0.6, tau: float = 1.0) -> tuple[Tensor, Tensor]:
    """The post-processing of one row of Table 1 applied to the two sentence-embedding matrices:
    whitening (and -256) fitted on their concatenation (WhiteningBERT); de-escalation (Yu & Zhang
    eq. 21, τ of the mean of the concatenation removed); SoftDecay on each N × d matrix separately,
    as the authors' code does. `SoftDecay (token)` is applied at encoding time: here the identity."""
    n = e1.shape[0]
    both = torch.cat([e1, e2])
    if method in ("vanilla", "SoftDecay (token)"):
        return e1, e2
    if method.startswith("whitening"):
        k = 256 if method.endswith("256") else None
        mu, W = whitening_fit(both, min(k, both.shape[1]) if k else None)
        out = whitening_apply(both, mu, W)
        return out[:n], out[n:]
    if method == "de-escalation":
        out = deescalate(both, tau)
        return out[:n], out[n:]
    if method == "SoftDecay (sentence)":
        return softdecay_transform(e1, alpha), softdecay_transform(e2, alpha)
    raise ValueError(f"unknown method {method!r}; known: {METHODS}")


def uniformity_metrics(E: Tensor) -> dict[str, float]:
    """Table 4's uniformity metrics of a set of embeddings (N, d): EV₁ (eq. 5), log RBF_dis with
    t = 0.5 on unit vectors (eq. 4, App. B), TokenUni (eq. 3)."""
    return {"EV1": float(M.explained_variance(E, 1)), "RBF_dis": float(M.rbf_dis(E, t=0.5)),
            "TokenUni": float(M.token_uni(E))}


def _unit(x: Tensor) -> Tensor:
    return x / x.norm(dim=-1, keepdim=True).clamp_min(1e-12)


def lsds_score(E: Tensor, F: Tensor, k: int = 12, max_points: int = 3000, seed: int = 0) -> float:
    """LSDS (eq. 6) with k = 12 neighbours (App. B), on unit-normalised embeddings, t = 0.5, and
    neighbour weights normalised to sum to one (our reading of "a linear combination weighted by
    the distance"); at most `max_points` points (a fixed random subset)."""
    if E.shape[0] > max_points:
        idx = torch.randperm(E.shape[0], generator=torch.Generator().manual_seed(seed))[:max_points]
        E, F = E[idx], F[idx]
    return float(M.lsds(_unit(E.double()), _unit(F.double()), k=k, t=0.5, normalise_weights=True))


__all__ = ["POOLINGS", "METHODS", "TokenStates", "pool", "spearman100", "apply_method", "uniformity_metrics",
           "lsds_score"]
