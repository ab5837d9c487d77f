"""Unsupervised STS with SoftDecay (Yan et al. §5.1, App. B-C): encoding with the authors' pooling
and its corrected variants, the post-processing methods, Spearman scoring, and an encoder with
the sentence-transformers `encode` interface."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import torch
from scipy import stats
from torch import Tensor

from ..book.params import ChapterParams, nonneg, positive, rules
from ..book.runtime import progress
from ..core import measures as M
from ..core.softdecay import deescalate_rows, softdecay_transform, whitening_apply, whitening_fit


@dataclass(frozen=True)
class Params(ChapterParams):
    """Yan et al. §5.1, App. B-C: SoftDecay on unsupervised STS (Table 1, Table 4, Figures 3, 4, 6)."""

    models: tuple[str, ...] = ("all-MiniLM-L6-v2",)
    datasets: tuple[str, ...] = ("STS-B", "STS12", "STS13", "STS14", "STS15", "STS16", "SICK-R")
    source: str = "whiteningbert"
    pooling: str = "first_last"
    alpha: float = -0.6
    alphas: tuple[float, ...] = (-0.2, -0.4, -0.6, -0.8, -1.0)
    tau: float = 1.0
    max_pairs: int = 0               # 0 = every pair of every set
    max_length: int = 128
    batch_size: int = 64
    lsds_points: int = 2000
    tsne_pairs: int = 400

    CHAPTER: ClassVar[str] = "sts"
    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {
        "ci": dict(max_pairs=150, lsds_points=300, tsne_pairs=60, alphas=(-0.2, -0.6, -1.0)),
        "book": dict(),
        "paper": dict(models=("bert-base-cased", "distilbert-base-uncased", "albert-base-v2", "roberta-base")),
    }
    RULES: ClassVar = rules(
        models=(lambda v: len(v) > 0, "needs at least one model"),
        datasets=(lambda v: len(v) > 0 and all(d in ("STS-B", "STS12", "STS13", "STS14", "STS15", "STS16", "SICK-R")
                                               for d in v), "each must be one of STS-B, STS12..STS16, SICK-R"),
        source=(lambda v: v in ("whiteningbert", "official", "hub"), "must be whiteningbert, official or hub"),
        pooling=(lambda v: v in ("first_last", "first_last_l1", "last", "cls"),
                 "must be first_last, first_last_l1, last or cls"),
        alpha=(lambda v: -1.0 <= v < 0, "must lie in [-1, 0) (the paper's range; eq. 2 is undefined at 0)"),
        alphas=(lambda v: len(v) > 0 and all(-1.0 <= a < 0 for a in v), "every alpha must lie in [-1, 0)"),
        tau=(lambda v: 0 < v <= 1, "must lie in (0, 1] (eq. 21)"),
        max_pairs=nonneg, max_length=(lambda v: 8 <= v <= 512, "must lie in [8, 512]"), batch_size=positive,
        lsds_points=(lambda v: v >= 20, "needs >= 20 points"), tsne_pairs=(lambda v: v >= 10, "needs >= 10 pairs"),
    )


POOLINGS = ("first_last", "first_last_l1", "last", "cls")
METHODS = ("vanilla", "whitening", "whitening-256", "de-escalation", "SoftDecay (sentence)", "SoftDecay (token)")


@dataclass
class Encoded:
    """Per sentence: the masked mean of every layer (N, layers, d), the last layer's [CLS] (N, d),
    and the masked mean of the last layer after token-level SoftDecay (N, d)."""

    layer_means: Tensor
    cls_last: Tensor
    token_sd_last: Tensor | None


@torch.no_grad()
def encode(loaded, texts: list[str], max_length: int = 128, batch_size: int = 32, token_alpha: float | None = -0.6,
           desc: str = "encode") -> Encoded:
    """Run the model once over `texts` (batched by length) and keep only pooled quantities.
    With `token_alpha`, Algorithm 1 is applied to each sentence's last-layer token matrix (real
    tokens only, `helpers.softdecay`) before pooling — SoftDecay at the token level, as §4.3 states."""
    model, tok = loaded.model, loaded.tokenizer
    dev = next(model.parameters()).device
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    means, cls, tsd = [], [], []
    batches = [order[i:i + batch_size] for i in range(0, len(order), batch_size)]
    for idx in progress(batches, desc=desc, total=len(batches)):
        enc = tok([texts[i] for i in idx], padding=True, truncation=True, max_length=max_length,
                  return_tensors="pt").to(dev)
        hs = model(**enc, output_hidden_states=True).hidden_states
        mask = enc["attention_mask"].bool()
        means.append(torch.stack([M.row_mean(h.float(), mask) for h in hs], 1).cpu())   # (b, layers, d)
        cls.append(hs[-1][:, 0].float().cpu())
        if token_alpha is not None:
            tsd.append(M.row_mean(softdecay_transform(hs[-1].float(), token_alpha, mask), mask).cpu())
    inv = torch.empty(len(order), dtype=torch.long)
    inv[torch.tensor(order)] = torch.arange(len(order))
    return Encoded(torch.cat(means)[inv], torch.cat(cls)[inv], torch.cat(tsd)[inv] if tsd else None)


def pool(e: Encoded, pooling: str = "first_last", token_level: bool = False) -> Tensor:
    """Sentence embeddings (N, d). `first_last`: mean over real tokens of (h₀ + h_L)/2, the authors'
    code (embedding output + last layer); `first_last_l1`: (h₁ + h_L)/2, as SimCSE later corrected
    it; `last`: mean of h_L; `cls`: h_L[CLS]. `token_level` swaps h_L for its token-level SoftDecay."""
    if pooling not in POOLINGS:
        raise ValueError(f"pooling {pooling!r}: use one of {POOLINGS}")
    last = e.layer_means[:, -1]
    if token_level:
        if e.token_sd_last is None:
            raise ValueError("encode(..., token_alpha=...) was not run")
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
    as the authors' code does."""
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
        out = deescalate_rows(both, tau)
        return out[:n], out[n:]
    if method == "SoftDecay (sentence)":
        return softdecay_transform(e1, alpha), softdecay_transform(e2, alpha)
    raise ValueError(f"unknown method {method!r}; known: {METHODS}")


def uniformity_metrics(E: Tensor) -> dict[str, float]:
    """Table 4's uniformity metrics of a set of embeddings (N, d): EV₁ (eq. 5), log RBF_dis with
    t = 0.5 on unit vectors (eq. 4, App. B), TokenUni (eq. 3)."""
    return {"EV1": float(M.explained_variance(E, 1)), "RBF_dis": float(M.rbf_dis(E, t=0.5)),
            "TokenUni": float(M.token_uni(E))}


def lsds_score(E: Tensor, F: Tensor, k: int = 12, max_points: int = 3000, seed: int = 0) -> float:
    """LSDS (eq. 6) with k = 12 neighbours (App. B), on unit-normalised embeddings, t = 0.5, and
    neighbour weights normalised to sum to one (our reading of "a linear combination weighted by
    the distance"); at most `max_points` points (a fixed random subset)."""
    if E.shape[0] > max_points:
        idx = torch.randperm(E.shape[0], generator=torch.Generator().manual_seed(seed))[:max_points]
        E, F = E[idx], F[idx]
    unit = lambda x: x / x.norm(dim=-1, keepdim=True).clamp_min(1e-12)  # noqa: E731
    return float(M.lsds(unit(E.double()), unit(F.double()), k=k, t=0.5, normalise_weights=True))


class SoftDecayEncoder:
    """A sentence encoder with the sentence-transformers interface `encode(list[str]) -> ndarray`,
    so MTEB or sentence-transformers users can evaluate SoftDecay like any other encoder.

    `mode="token"` applies Algorithm 1 to each sentence's last-layer tokens (batch-independent);
    `mode="sentence"` applies it to the matrix of all sentences passed in one `encode` call (as the
    authors' STS code does per sentence set), so results depend on what is encoded together.
    """

    def __init__(self, loaded, alpha: float = -0.6, pooling: str = "first_last", mode: str = "token",
                 max_length: int = 128, batch_size: int = 32) -> None:
        if mode not in ("token", "sentence", "none"):
            raise ValueError(f"mode {mode!r}: use 'token', 'sentence' or 'none'")
        self.loaded, self.alpha, self.pooling, self.mode = loaded, alpha, pooling, mode
        self.max_length, self.batch_size = max_length, batch_size

    def encode(self, sentences: list[str], batch_size: int | None = None, convert_to_numpy: bool = True,
               **_: object) -> np.ndarray | Tensor:
        if isinstance(sentences, str):
            sentences = [sentences]
        e = encode(self.loaded, list(sentences), self.max_length, batch_size or self.batch_size,
                   token_alpha=self.alpha if self.mode == "token" else None, desc="SoftDecayEncoder")
        out = pool(e, self.pooling, token_level=self.mode == "token")
        if self.mode == "sentence" and out.shape[0] > 1:
            out = softdecay_transform(out, self.alpha)
        return out.numpy() if convert_to_numpy else out


def _subsample(ds, max_pairs: int, seed: int):
    if not max_pairs or len(ds) <= max_pairs:
        return ds
    idx = sorted(np.random.default_rng(seed).choice(len(ds), max_pairs, replace=False).tolist())
    pick = lambda xs: [xs[i] for i in idx]  # noqa: E731
    return type(ds)(ds.name, pick(ds.sentence1), pick(ds.sentence2), pick(ds.scores), pick(ds.subsets))


def run_model(loaded, datasets: tuple[str, ...], source: str, pooling: str, alpha: float, alphas: tuple[float, ...],
              tau: float, max_pairs: int, max_length: int, batch_size: int, lsds_points: int, tsne_pairs: int,
              seed: int, cdf_dataset: str = "STS-B", tsne_dataset: str = "STS15") -> dict:
    """Everything the STS chapter shows for one model, as plain numbers (so that a `book` run can be
    cached and committed): Table 1 scores per method and dataset, the α sweep, Table 4 metrics, LSDS
    (Fig. 6), per-layer singular values before/after SoftDecay (Fig. 3) and t-SNE inputs (Fig. 4)."""
    from ..data import load_sts

    out: dict = {"table1": {}, "alpha_sweep": {}, "table4": {}, "lsds": {}, "pairs": {}}
    for name in datasets:
        ds = _subsample(load_sts(name, source), max_pairs, seed)
        e1 = encode(loaded, ds.sentence1, max_length, batch_size, alpha, desc=f"{name} s1")
        e2 = encode(loaded, ds.sentence2, max_length, batch_size, alpha, desc=f"{name} s2")
        out["pairs"][name] = len(ds)
        p1, p2 = pool(e1, pooling), pool(e2, pooling)
        row = {}
        for method in METHODS:
            if method == "SoftDecay (token)":
                if pooling == "cls":
                    continue
                a, b = pool(e1, pooling, True), pool(e2, pooling, True)
            else:
                a, b = apply_method(method, p1, p2, alpha, tau)
            row[method] = spearman100(a, b, ds.scores)
        out["table1"][name] = row
        out["alpha_sweep"][name] = {str(a): spearman100(*apply_method("SoftDecay (sentence)", p1, p2, a), ds.scores)
                                    for a in alphas}
        both = torch.cat([p1, p2])
        w1, w2 = apply_method("whitening", p1, p2)
        s1, s2 = apply_method("SoftDecay (sentence)", p1, p2, alpha)
        white, soft = torch.cat([w1, w2]), torch.cat([s1, s2])
        out["table4"][name] = {"vanilla": uniformity_metrics(both), "whitening": uniformity_metrics(white),
                               "SoftDecay": uniformity_metrics(soft)}
        out["lsds"][name] = {"whitening": lsds_score(both, white, 12, lsds_points, seed),
                             "SoftDecay": lsds_score(both, soft, 12, lsds_points, seed)}
        if name == cdf_dataset:
            per_layer = torch.cat([e1.layer_means, e2.layer_means])            # (2N, layers, d)
            out["cdf"] = {"before": [torch.linalg.svdvals(per_layer[:, i].double()).tolist()
                                     for i in range(per_layer.shape[1])],
                          "after": [torch.linalg.svdvals(softdecay_transform(per_layer[:, i].double(), alpha)).tolist()
                                    for i in range(per_layer.shape[1])]}
        if name == tsne_dataset:
            k = min(tsne_pairs, len(ds))
            out["tsne"] = _tsne_panels(p1[:k], p2[:k], alpha, seed)
    return out


def _tsne_panels(p1: Tensor, p2: Tensor, alpha: float, seed: int) -> dict:
    """t-SNE maps (Fig. 4) of paired embeddings for vanilla, whitening and SoftDecay, with the four
    metrics of each transformed set."""
    from sklearn.manifold import TSNE

    k = p1.shape[0]
    panels = {}
    base = torch.cat([p1, p2])
    for method in ("vanilla", "whitening", "SoftDecay (sentence)"):
        a, b = apply_method(method, p1, p2, alpha)
        E = torch.cat([a, b])
        xy = TSNE(n_components=2, perplexity=min(30, max(5, k // 4)), init="pca", random_state=seed).fit_transform(
            E.double().numpy())
        panels[method] = {"xy": xy.tolist(), "n": k, **uniformity_metrics(E),
                          "LSDS": lsds_score(base, E, min(12, 2 * k - 1), 10 ** 9, seed)}
    return panels
