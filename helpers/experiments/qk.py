"""Godey et al. (2024) §5 and Appendices C–D: the dynamics of queries and keys along pretraining.

Per checkpoint (step s), layer and head, the paper looks at the query and key vectors Q_s, K_s of
128 WikiText-103 samples and at their means Q̄_s, K̄_s over all tokens:

* Figures 11–12: one SVD of the union of Q_s and K_s over *all* steps (a 20 % uniform sample of
  the vectors), and the projections of Q_s, K_s (11) and of Q̄_s, K̄_s (12) on its first two
  directions; Figures 19–22: the same with the SVD of K_s only and of Q_s only (Appendix C).
* Figure 13: cos(Q̄_s, K̄_s) per head and layer along training; Figure 14: Q̄_s·K̄_s.
* Figure 15: the average entropy of the self-attention rows per layer along training.
* Figure 23 (Appendix D): cos(Q̄_s, K̄_s) with the heads of a layer concatenated, per seed.

The work is streamed: per checkpoint, one pass over the samples keeps per head the exact token
means, the Gram matrices ΣqqT and ΣkkT of a fixed 20 % token sample (the right singular vectors
of the stacked sample are the eigenvectors of its Gram matrix, so the SVD of the union over all
steps is the eigendecomposition of the summed Grams: no step's vectors need to be kept), a few
hundred display vectors for the scatter plots, and the attention entropies. Means are over real
tokens ([CLS] and [SEP] included, padding excluded), as the paper's "all tokens in the batch".
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import torch
from torch import Tensor, nn

from ..book.params import ChapterParams, ParameterError, nonneg, positive, rules
from ..book.runtime import progress
from ..core import measures as M

#: MultiBERT's released intermediate checkpoints (Sellam et al. 2021): every 20k steps to 200k, then every 100k to 2M
MULTIBERT_STEPS = tuple(range(0, 200_000, 20_000)) + tuple(range(200_000, 2_000_001, 100_000))


@dataclass(frozen=True)
class Params(ChapterParams):
    """Godey et al. §5, App. C-D: queries and keys along pretraining (Figures 11-15, 19-23).

    `source="pretrain"` (ci, book): our own small MLM BERT trained from scratch here, checkpointed at
    `steps`; `source="multiberts"` (paper): google/multiberts-seed_{seed}-step_{step/1000}k from the hub."""

    source: str = "pretrain"
    seeds: tuple[int, ...] = (0, 1)
    steps: tuple[int, ...] = (0, 10, 20, 50, 100, 200, 300, 500, 700, 1000, 1500, 2000, 3000)  # 0 = initialisation
    n_samples: int = 128              # §5: "128 samples from Wikitext-103" (test split paragraphs, drawn with `seed`)
    max_length: int = 128
    svd_fraction: float = 0.2         # §5 footnote: 20 % of the representations for the SVD
    n_display: int = 200              # tokens per step in the scatter plots (Figs. 11, 19, 20)
    # our pretraining (ignored for multiberts)
    layers: int = 4
    hidden: int = 256
    heads: int = 4
    intermediate: int = 1024
    seq_len: int = 128
    batch: int = 8
    lr: float = 1e-3
    warmup: float = 0.06
    weight_decay: float = 0.01
    mask_prob: float = 0.15
    train_split: str = "validation"
    resume_every: int = 100

    CHAPTER: ClassVar[str] = "qk"
    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {
        "ci": dict(layers=2, hidden=128, heads=2, intermediate=512, seq_len=64, batch=8, lr=1e-3,
                   steps=(0, 5, 15, 30, 60), n_samples=32, max_length=64, n_display=100, resume_every=30),
        "book": dict(),
        "paper": dict(source="multiberts", seeds=(0, 1, 2, 3, 4), steps=MULTIBERT_STEPS, n_samples=128),
    }
    RULES: ClassVar = rules(
        source=(lambda v: v in ("pretrain", "multiberts"), "must be 'pretrain' or 'multiberts'"),
        seeds=(lambda v: len(v) > 0 and len(set(v)) == len(v) and all(s >= 0 for s in v),
               "needs distinct seeds >= 0"),
        steps=(lambda v: len(v) >= 2 and all(b > a for a, b in zip(v, v[1:], strict=False)) and v[0] >= 0,
               "needs >= 2 increasing checkpoint steps >= 0"),
        n_samples=(lambda v: v >= 2, "needs >= 2 samples"),
        max_length=(lambda v: 8 <= v <= 512, "must lie in [8, 512]"),
        svd_fraction=(lambda v: 0 < v <= 1, "must lie in (0, 1]"), n_display=positive,
        layers=positive, hidden=positive, heads=positive, intermediate=positive,
        seq_len=(lambda v: 8 <= v <= 512, "must lie in [8, 512]"), batch=positive, lr=positive,
        warmup=(lambda v: 0 <= v < 1, "must lie in [0, 1)"), weight_decay=nonneg,
        mask_prob=(lambda v: 0 < v < 1, "must lie in (0, 1)"),
        train_split=(lambda v: v in ("validation", "test"), "must be 'validation' or 'test' (the mirror's splits)"),
        resume_every=positive,
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.source == "multiberts":
            bad = [s for s in self.steps if s not in MULTIBERT_STEPS]
            if bad:
                raise ParameterError(f"parameter 'steps': {bad} are not released MultiBERT checkpoints "
                                     "(every 20k steps to 200k, every 100k to 2M)")
            if any(s > 4 for s in self.seeds):
                raise ParameterError("parameter 'seeds': MultiBERT intermediate checkpoints exist for seeds 0-4 only")
        elif self.hidden % self.heads:
            raise ParameterError(f"parameter 'hidden' = {self.hidden} must be divisible by heads = {self.heads}")


# ------------------------------------------------------------------ capture


def attention_modules(model: nn.Module) -> list[nn.Module]:
    """The self-attention modules of a BERT-family encoder, in layer order: every module with
    `query` and `key` linear maps (BERT, RoBERTa, ELECTRA, … `*SelfAttention`)."""
    mods = [m for m in model.modules()
            if isinstance(getattr(m, "query", None), nn.Linear) and isinstance(getattr(m, "key", None), nn.Linear)]
    if not mods:
        raise ValueError(f"{type(model).__name__} has no self-attention module with `query` and `key` linear maps")
    return mods


def _heads_of(module: nn.Module, model: nn.Module) -> int:
    h = getattr(module, "num_attention_heads", None) or getattr(getattr(model, "config", None),
                                                                  "num_attention_heads", None)
    if not h:
        raise ValueError("cannot tell the number of attention heads")
    return int(h)


class QKCapture:
    """Forward hooks on every layer's `query` and `key` projections. Inside `with QKCapture(model)
    as cap:` each forward pass fills `cap.q[l]` and `cap.k[l]` with the per-head queries and keys
    of layer l, shape (B, h, L, d_k) — the vectors whose scalar products give the attention scores
    QKᵀ/√d_k of Godey et al. §4–5."""

    def __init__(self, model: nn.Module) -> None:
        self.modules = attention_modules(model)
        self.heads = [_heads_of(m, model) for m in self.modules]
        self.q: list[Tensor | None] = [None] * len(self.modules)
        self.k: list[Tensor | None] = [None] * len(self.modules)
        self._handles: list = []

    def _hook(self, store: list, layer: int) -> Callable:
        h = self.heads[layer]

        def hook(_mod, _inp, out: Tensor) -> None:
            B, L, D = out.shape
            store[layer] = out.detach().view(B, L, h, D // h).transpose(1, 2)      # (B, h, L, d_k)
        return hook

    def __enter__(self) -> QKCapture:
        for i, m in enumerate(self.modules):
            self._handles.append(m.query.register_forward_hook(self._hook(self.q, i)))
            self._handles.append(m.key.register_forward_hook(self._hook(self.k, i)))
        return self

    def __exit__(self, *exc) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles.clear()


@torch.no_grad()
def capture(model: nn.Module, input_ids: Tensor, attention_mask: Tensor) -> dict[str, list[Tensor] | Tensor]:
    """One forward pass: per layer Q and K (B, h, L, d_k) and the attention probabilities P
    (B, h, L, L) returned by the model (needs eager attention: `attn_implementation="eager"`),
    plus the boolean padding mask (B, L)."""
    with QKCapture(model) as cap:
        out = model(input_ids=input_ids, attention_mask=attention_mask, output_attentions=True)
    if not out.attentions or out.attentions[0] is None:
        raise ValueError("the model returned no attention probabilities: load it with attn_implementation='eager'")
    return {"q": list(cap.q), "k": list(cap.k), "p": list(out.attentions), "mask": attention_mask.bool()}


def attention_from_qk(q: Tensor, k: Tensor, mask: Tensor) -> Tensor:
    """softmax(QKᵀ/√d_k) with padded keys masked out: (B, h, L, d_k) ×2, (B, L) -> (B, h, L, L).
    What a BERT layer computes from the captured Q and K (used to check the hooks)."""
    scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])                       # (B, h, L, L)
    scores = scores.masked_fill(~mask[:, None, None, :].bool(), float("-inf"))
    return torch.softmax(scores, dim=-1)


# ------------------------------------------------------------------ per-checkpoint statistics


@dataclass
class StepStats:
    """What one checkpoint contributes, per layer and head (float64):
    q_sum/k_sum (layers, h, d_k) and `count` real tokens -> exact means Q̄_s, K̄_s;
    gram_q/gram_k (layers, h, d_k, d_k) = Σ qqᵀ, Σ kkᵀ over the SVD token sample (`n_svd` tokens);
    ent_sum (layers, h): attention-row entropies summed over real query positions (Figure 15);
    disp_q/disp_k (layers, h, n_display, d_k): fixed display tokens for the scatter plots."""

    q_sum: Tensor
    k_sum: Tensor
    count: int
    gram_q: Tensor
    gram_k: Tensor
    n_svd: int
    ent_sum: Tensor
    disp_q: Tensor
    disp_k: Tensor

    @property
    def q_mean(self) -> Tensor:
        return self.q_sum / self.count

    @property
    def k_mean(self) -> Tensor:
        return self.k_sum / self.count

    @property
    def entropy(self) -> Tensor:
        """Mean attention-row entropy over real query positions, (layers, h)."""
        return self.ent_sum / self.count

    @classmethod
    def from_batch(cls, q: list[Tensor], k: list[Tensor], p: list[Tensor] | None, mask: Tensor,
                   svd_sel: Tensor, disp_sel: Tensor) -> StepStats:
        """Statistics of one batch: per layer q, k (B, h, L, d_k), p (B, h, L, L) or None (no
        entropies), `mask` (B, L) real tokens, `svd_sel` / `disp_sel` (B, L) selected real tokens."""
        mask = mask.bool()
        sv, dp = svd_sel.bool() & mask, disp_sel.bool() & mask
        sums_q, sums_k, gq, gk, dq, dk, ents = [], [], [], [], [], [], []
        for li, (ql, kl) in enumerate(zip(q, k, strict=True)):
            ql, kl = ql.double(), kl.double()                                         # (B, h, L, d_k)
            m = mask[:, None, :, None].double()                                       # (B, 1, L, 1)
            sums_q.append((ql * m).sum((0, 2)))                                       # (h, d_k)
            sums_k.append((kl * m).sum((0, 2)))
            qs = ql.permute(1, 0, 2, 3)[:, sv]                                        # (h, n_sel, d_k)
            ks = kl.permute(1, 0, 2, 3)[:, sv]
            gq.append(qs.transpose(1, 2) @ qs)                                        # (h, d_k, d_k)
            gk.append(ks.transpose(1, 2) @ ks)
            dq.append(ql.permute(1, 0, 2, 3)[:, dp].float())                          # (h, n_disp_b, d_k)
            dk.append(kl.permute(1, 0, 2, 3)[:, dp].float())
            if p is None:
                ents.append(torch.zeros(ql.shape[1], dtype=torch.float64, device=ql.device))
            else:
                rows = M.attention_entropy(p[li].double(), mask[:, None, :].expand(-1, ql.shape[1], -1), reduce=False)
                ents.append(rows.sum((0, 2)))                                          # (h,) summed over real rows
        return cls(q_sum=torch.stack(sums_q).cpu(), k_sum=torch.stack(sums_k).cpu(), count=int(mask.sum()),
                   gram_q=torch.stack(gq).cpu(), gram_k=torch.stack(gk).cpu(), n_svd=int(sv.sum()),
                   ent_sum=torch.stack(ents).cpu(), disp_q=torch.stack(dq).cpu(), disp_k=torch.stack(dk).cpu())

    def __add__(self, other: StepStats) -> StepStats:
        """Merge the statistics of two batches of the same checkpoint."""
        return StepStats(self.q_sum + other.q_sum, self.k_sum + other.k_sum, self.count + other.count,
                         self.gram_q + other.gram_q, self.gram_k + other.gram_k, self.n_svd + other.n_svd,
                         self.ent_sum + other.ent_sum, torch.cat([self.disp_q, other.disp_q], dim=2),
                         torch.cat([self.disp_k, other.disp_k], dim=2))


def token_selections(attention_mask: Tensor, fraction: float, n_display: int, seed: int = 0
                     ) -> tuple[Tensor, Tensor]:
    """The fixed token positions (the same at every step and seed): a uniform `fraction` of the
    real tokens for the SVD (Godey et al. §5, footnote: "we uniformly sample 20 % of the whole set
    of representations") and `n_display` real tokens for the scatter plots. Boolean (N, L) each."""
    real = attention_mask.bool()
    g = torch.Generator().manual_seed(seed)
    svd = (torch.rand(real.shape, generator=g) < fraction) & real
    flat = real.flatten().nonzero().squeeze(1)
    pick = flat[torch.randperm(len(flat), generator=g)[: min(n_display, len(flat))]]
    disp = torch.zeros(real.numel(), dtype=torch.bool)
    disp[pick] = True
    return svd, disp.view(real.shape)


@torch.no_grad()
def step_statistics(model: nn.Module, input_ids: Tensor, attention_mask: Tensor, svd_fraction: float = 0.2,
                    n_display: int = 200, batch_size: int = 32, seed: int = 0,
                    device: str | torch.device = "cpu", desc: str = "") -> StepStats:
    """One pass of `model` over the analysis samples (N, L), accumulating `StepStats`."""
    svd_sel, disp_sel = token_selections(attention_mask, svd_fraction, n_display, seed)
    total: StepStats | None = None
    batches = range(0, len(input_ids), batch_size)
    for i in progress(batches, desc=desc or "Q/K capture", total=len(batches)):
        sl = slice(i, i + batch_size)
        out = capture(model, input_ids[sl].to(device), attention_mask[sl].to(device))
        st = StepStats.from_batch(out["q"], out["k"], out["p"], out["mask"], svd_sel[sl].to(device),
                                  disp_sel[sl].to(device))
        total = st if total is None else total + st
    assert total is not None
    return total


# ------------------------------------------------------------------ analyses along training


def top_directions(gram: Tensor, k: int = 2) -> tuple[Tensor, Tensor]:
    """Right singular vectors and singular values of a stacked set of vectors X from its Gram
    matrix XᵀX (…, d, d): eigh, largest first. Uncentred, as an SVD of the raw vectors, so a
    common drift shows up as the first direction (Godey et al. §5: "the first dimension of the SVD
    seems to describe this common drift"). Returns V (…, d, k) and σ (…, k)."""
    evals, evecs = torch.linalg.eigh(gram)                                            # ascending
    V = evecs.flip(-1)[..., :k]                                                       # (…, d, k)
    s = evals.flip(-1)[..., :k].clamp_min(0).sqrt()
    return V, s


def orient(V: Tensor, ref: Tensor) -> Tensor:
    """Flip each direction so that the reference vector `ref` (…, d) projects non-negatively on it
    (an SVD fixes directions only up to sign)."""
    sign = torch.sign((ref.unsqueeze(-2) @ V).squeeze(-2))                           # (…, k)
    return V * torch.where(sign == 0, torch.ones_like(sign), sign).unsqueeze(-2)


def cosine(a: Tensor, b: Tensor) -> Tensor:
    """cos(a, b) along the last axis."""
    return (a * b).sum(-1) / (a.norm(dim=-1) * b.norm(dim=-1)).clamp_min(1e-30)


def analyse(stats: list[StepStats], steps: list[int], display_heads: int = 2,
            display_steps: list[int] | None = None) -> dict:
    """All the §5 / App. C–D analyses of one training trajectory (one seed).

    Returns (numpy / lists, JSON-ready):
      cos, dot, q_norm, k_norm (S, layers, h): cos(Q̄_s, K̄_s) (Fig. 13), Q̄_s·K̄_s (Fig. 14) and norms;
      cos_concat (S, layers): cos with the heads of a layer concatenated (Fig. 23);
      entropy (S, layers, h) and entropy_layer (S, layers) (Fig. 15);
      means[basis] with basis in union | K | Q: {"q","k"} (S, layers, h, 2) — Q̄_s, K̄_s projected
        on the first two directions of the SVD over all steps of Q∪K (Figs. 11–12), K only (19, 21)
        or Q only (20, 22); sv1_share[basis] (layers, h): σ₁² / (σ₁² + σ₂²);
      display: for the heads with the largest and smallest final cos (the paper's "similar" and
        "opposite" examples), the display tokens projected on each basis: {"q","k"} (S', n, 2) at
        the steps `display_steps` (default: all), listed under "steps".
    """
    S = len(stats)
    qm = torch.stack([s.q_mean for s in stats])                                       # (S, layers, h, d_k)
    km = torch.stack([s.k_mean for s in stats])
    cos = cosine(qm, km)                                                              # (S, layers, h)
    dot = (qm * km).sum(-1)
    cos_concat = cosine(qm.flatten(-2), km.flatten(-2))                               # (S, layers)
    entropy = torch.stack([s.entropy for s in stats])                                 # (S, layers, h)
    gq = sum(s.gram_q for s in stats)                                                 # (layers, h, d_k, d_k)
    gk = sum(s.gram_k for s in stats)
    bases = {}
    for name, gram, ref in (("union", gq + gk, km[-1]), ("K", gk, km[-1]), ("Q", gq, qm[-1])):
        V, s = top_directions(gram, 2)                                                # (layers, h, d_k, 2)
        bases[name] = (orient(V, ref), s)
    means = {name: {"q": (qm.unsqueeze(-2) @ V).squeeze(-2), "k": (km.unsqueeze(-2) @ V).squeeze(-2)}
             for name, (V, _) in bases.items()}                                      # (S, layers, h, 2)
    share = {name: (s[..., 0] ** 2 / (s ** 2).sum(-1).clamp_min(1e-30)) for name, (_, s) in bases.items()}
    final = cos[-1]                                                                   # (layers, h)
    flat = final.flatten()
    heads = final.shape[1]
    picks = {"similar": int(flat.argmax()), "opposite": int(flat.argmin())}
    display = {}
    shown = [stats[list(steps).index(x)] for x in display_steps] if display_steps is not None else stats
    for label, idx in list(picks.items())[:display_heads]:
        li, hi = divmod(idx, heads)
        display[label] = {"layer": li, "head": hi, "cos_final": float(final[li, hi]),
                          "steps": list(display_steps) if display_steps is not None else list(steps)}
        for name, (V, _) in bases.items():
            v = V[li, hi].float()                                                     # (d_k, 2)
            display[label][name] = {
                "q": torch.stack([s.disp_q[li, hi] @ v for s in shown]),              # (S', n, 2)
                "k": torch.stack([s.disp_k[li, hi] @ v for s in shown])}
    return {"steps": list(steps), "cos": cos, "dot": dot, "q_norm": qm.norm(dim=-1), "k_norm": km.norm(dim=-1),
            "cos_concat": cos_concat, "entropy": entropy, "entropy_layer": entropy.mean(-1),
            "means": means, "sv1_share": share, "display": display,
            "tokens": stats[0].count, "svd_tokens_per_step": stats[0].n_svd, "n_steps": S}


def alignment_summary(cos: np.ndarray, steps: Iterable[int], threshold: float = 0.5) -> dict:
    """Godey et al. §5 / Fig. 13 read as numbers. `cos` (S, layers, h). A head drifts in a common
    direction when its final cos(Q̄, K̄) ≥ threshold, in opposite directions when ≤ −threshold. For
    each head, `onset` is the first step from which |cos| stays ≥ threshold with the final sign
    (None when never). In R^{d_k} two random directions have |cos| ~ 1/√d_k (0.125 for d_k = 64)."""
    cos = np.asarray(cos, dtype=float)
    steps = list(steps)
    final = cos[-1]
    common = final >= threshold
    opposite = final <= -threshold
    onset = np.full(final.shape, np.nan)
    for li in range(final.shape[0]):
        for hi in range(final.shape[1]):
            sgn = np.sign(final[li, hi])
            ok = sgn * cos[:, li, hi] >= threshold
            if ok[-1]:
                j = len(ok) - 1
                while j > 0 and ok[j - 1]:
                    j -= 1
                onset[li, hi] = steps[j]
    return {"common": common.sum(1).tolist(), "opposite": opposite.sum(1).tolist(),
            "unaligned": (~common & ~opposite).sum(1).tolist(), "final_cos": final.tolist(),
            "onset": [[None if np.isnan(x) else int(x) for x in row] for row in onset], "threshold": threshold}


def compare_runs(runs: dict, steps: Iterable[int], threshold: float = 0.5, rebound_nats: float = 0.1) -> dict:
    """The numbers behind the chapter's reading of Figures 12–15, 19–23, over all seeds of `runs`
    (seed -> result of `run_trajectory`/`analyse`). Per head the final cos(Q̄, K̄) classifies it as
    common (≥ threshold) or opposite (≤ −threshold) as in `alignment_summary`; per layer the counts
    over all seeds; onsets grouped by the final sign; |Q̄·K̄| growth (Fig. 14); per-layer entropy at
    the first and last step, its lowest point and the layers that rebound by more than
    `rebound_nats` (Fig. 15); the concatenated-head cosine per seed (Fig. 23); and, for the first
    seed, how far the *other* mean moves along the first direction of the K-only / Q-only SVD (App. C)."""
    steps = list(steps)
    cos = np.stack([np.asarray(r["cos"], dtype=float) for r in runs.values()])          # (seeds, S, L, H)
    first, final = cos[:, 0], cos[:, -1]
    onsets: dict[str, list[int]] = {"common": [], "opposite": []}
    for i in range(cos.shape[0]):
        summ = alignment_summary(cos[i], steps, threshold)
        for li, row in enumerate(summ["onset"]):
            for hi, o in enumerate(row):
                if o is not None:
                    onsets["common" if final[i, li, hi] > 0 else "opposite"].append(o)
    n_common_l = (final >= threshold).sum((0, 2))
    n_opp_l = (final <= -threshold).sum((0, 2))
    absdot = np.stack([np.abs(np.asarray(r["dot"], dtype=float)) for r in runs.values()])
    ent = np.stack([np.asarray(r["entropy_layer"], dtype=float) for r in runs.values()]).mean(0)   # (S, L)
    cc = np.stack([np.asarray(r["cos_concat"], dtype=float) for r in runs.values()])[:, -1]        # (seeds, L)
    R = next(iter(runs.values()))
    other = {}
    for basis, which in (("K", "q"), ("Q", "k")):
        m = np.asarray(R["means"][basis][which], dtype=float)[..., 0]
        other[basis] = {"moved": int((np.abs(m[-1]) > np.abs(m[0])).sum()), "heads": int(m[-1].size),
                        "first": float(np.abs(m[0]).mean()), "final": float(np.abs(m[-1]).mean())}
    lowest = ent.min(0)
    return {
        "threshold": threshold, "n_heads": int(final.size), "heads_per_layer": int(final.shape[0] * final.shape[2]),
        "abs_cos_first": float(np.abs(first).mean()), "abs_cos_final": float(np.abs(final).mean()),
        "n_common": int(n_common_l.sum()), "n_opposite": int(n_opp_l.sum()),
        "common_per_layer": n_common_l.tolist(), "opposite_per_layer": n_opp_l.tolist(),
        "mean_final_cos_per_layer": final.mean((0, 2)).tolist(),
        "common_layers": [li for li in range(len(n_common_l)) if n_common_l[li] > n_opp_l[li]],
        "opposite_layers": [li for li in range(len(n_common_l)) if n_opp_l[li] > n_common_l[li]],
        "onsets": onsets,
        "median_onset": {k: (int(np.median(v)) if v else None) for k, v in onsets.items()},
        "abs_dot_first": float(absdot[:, 0].mean()), "abs_dot_final": float(absdot[:, -1].mean()),
        "abs_dot_growth": float(absdot[:, -1].mean() / max(absdot[:, 0].mean(), 1e-12)),
        "entropy_first": ent[0].tolist(), "entropy_final": ent[-1].tolist(), "entropy_lowest": lowest.tolist(),
        "entropy_lowest_step": [steps[i] for i in ent.argmin(0)],
        "entropy_falls": int((ent[-1] < ent[0]).sum()),
        "entropy_rebound_layers": [li for li in range(ent.shape[1]) if ent[-1, li] - lowest[li] > rebound_nats],
        "concat_final": cc.tolist(), "concat_spread": float(cc.std(0).mean()) if cc.shape[0] > 1 else 0.0,
        "concat_same_sign_layers": int((np.abs(np.sign(cc).sum(0)) == cc.shape[0]).sum()),
        "other_mean": other,
    }


# ------------------------------------------------------------------ figures


def pick_steps(steps: list[int], fractions: tuple[float, ...] = (0.0, 0.02, 0.1, 1.0)) -> list[int]:
    """The checkpoints nearest (in log scale) to the paper's panels of Figs. 11, 19, 20: step 0,
    40k, 200k and 2M of 2M, i.e. 0, 2 %, 10 % and 100 % of training."""
    last = max(steps)
    out = []
    for f in fractions:
        target = f * last
        best = min(steps, key=lambda s: abs(math.log1p(s) - math.log1p(target)))
        if best not in out:
            out.append(best)
    return out


def scatter_panels(axes, head: dict, basis: str, steps: list[int], shown: list[int], lim: float | None = None) -> None:
    """Figs. 11, 19, 20: the display tokens' Q_s (blue) and K_s (orange) projected on the first two
    directions of `basis` (union | K | Q), one panel per step in `shown`; crosses mark the means."""
    import seaborn as sns

    blue, orange = sns.color_palette("colorblind")[:2]
    q, k = np.asarray(head[basis]["q"]), np.asarray(head[basis]["k"])               # (S', n, 2)
    at = list(head.get("steps", steps))                                             # the steps stored
    if lim is None:
        lim = 1.05 * float(np.abs(np.concatenate([q[[at.index(s) for s in shown]],
                                                  k[[at.index(s) for s in shown]]])).max())
    for ax, s in zip(axes, shown, strict=True):
        i = at.index(s)
        ax.scatter(q[i, :, 0], q[i, :, 1], s=4, alpha=0.45, color=blue, label="queries Q_s")
        ax.scatter(k[i, :, 0], k[i, :, 1], s=4, alpha=0.45, color=orange, label="keys K_s")
        ax.scatter(*q[i].mean(0), marker="X", s=70, color=blue, edgecolor="k")
        ax.scatter(*k[i].mean(0), marker="X", s=70, color=orange, edgecolor="k")
        ax.axhline(0, color="grey", lw=0.5)
        ax.axvline(0, color="grey", lw=0.5)
        ax.set_xlim(-lim, lim)
        ax.set_ylim(-lim, lim)
        ax.set_title(f"step {s}")
        ax.set_xlabel("SVD dim 1")
    axes[0].set_ylabel("SVD dim 2")
    axes[0].legend(fontsize=7, loc="lower left", markerscale=3)


def mean_arrows(ax, q: np.ndarray, k: np.ndarray, title: str = "") -> None:
    """Figs. 12, 21, 22: the trajectories of Q̄_s and K̄_s (S, 2), one arrow per checkpoint."""
    import seaborn as sns

    blue, orange = sns.color_palette("colorblind")[:2]
    for pts, color, label in ((np.asarray(q), blue, "mean query Q̄_s"), (np.asarray(k), orange, "mean key K̄_s")):
        for a, b in zip(pts[:-1], pts[1:], strict=True):
            ax.annotate("", xy=b, xytext=a, arrowprops=dict(arrowstyle="->", color=color, lw=1.4))
        ax.scatter(*pts[0], color=color, s=25, marker="o", label=f"{label} (step 0 = dot)")
    allp = np.concatenate([q, k])
    lim = 1.15 * float(np.abs(allp).max()) + 1e-9
    ax.set_xlim(-lim, lim)
    ax.set_ylim(-lim, lim)
    ax.axhline(0, color="grey", lw=0.5)
    ax.axvline(0, color="grey", lw=0.5)
    ax.set_xlabel("SVD dim 1")
    ax.set_ylabel("SVD dim 2")
    ax.set_title(title)
    ax.legend(fontsize=7)


# ------------------------------------------------------------------ one trajectory, end to end

#: the released MultiBERT intermediate checkpoints (seeds 0-4): every 20k steps to 200k, every 100k to 2M


def multibert_id(seed: int, step: int) -> str:
    """Hub id of a MultiBERT checkpoint (Sellam et al. 2021), e.g. google/multiberts-seed_0-step_40k."""
    if step % 1000:
        raise ValueError(f"MultiBERT steps are whole thousands, got {step}")
    return f"google/multiberts-seed_{seed}-step_{step // 1000}k"


def pretrain_config(cfg, seed: int):
    """The `helpers.pretrain.PretrainConfig` of one seed of a `QKParams`."""
    from ..train.mlm import PretrainConfig

    return PretrainConfig(layers=cfg.layers, hidden=cfg.hidden, heads=cfg.heads, intermediate=cfg.intermediate,
                          seq_len=cfg.seq_len, batch=cfg.batch, steps=max(cfg.steps), lr=cfg.lr, warmup=cfg.warmup,
                          weight_decay=cfg.weight_decay, mask_prob=cfg.mask_prob, seed=seed,
                          checkpoint_steps=tuple(cfg.steps), resume_every=cfg.resume_every)


def checkpoint_folder(cfg, seed: int) -> Path:
    """Git-ignored home of one pretraining run's weights: _build/checkpoints/qk/<hash of its settings>/."""
    from dataclasses import asdict

    from ..book.results import settings_hash
    from ..book.runtime import REPO_ROOT

    return REPO_ROOT / "_build" / "checkpoints" / "qk" / settings_hash(asdict(pretrain_config(cfg, seed)))


def trajectory_key(cfg, seed: int) -> dict:
    """Every setting one seed's results depend on (the key of `runtime.cached_run`)."""
    names = ("source", "steps", "n_samples", "max_length", "svd_fraction", "n_display", "seed")
    if cfg.source == "pretrain":
        names += ("layers", "hidden", "heads", "intermediate", "seq_len", "batch", "lr", "warmup", "weight_decay",
                  "mask_prob", "train_split")
    return {"seed": seed, "analysis_version": ANALYSIS_VERSION, **{n: getattr(cfg, n) for n in names}}


ANALYSIS_VERSION = 2


def _rounded(x, decimals: int = 5):
    if isinstance(x, dict):
        return {k: _rounded(v, decimals) for k, v in x.items()}
    if isinstance(x, Tensor):
        return np.round(x.detach().cpu().double().numpy(), decimals).tolist()
    return x


def run_trajectory(cfg, seed: int, device: str | torch.device = "cpu", fresh: bool = False) -> dict:
    """Pretrain (or, with `cfg.source == "multiberts"`, load from the hub) the checkpoints of one
    seed and run every analysis on them. With `fresh` the pretraining folder is wiped first (the
    `ci` scale always recomputes); otherwise an interrupted pretraining resumes and a finished one is
    reused. Returns the JSON-ready `analyse` output plus the summary, training history and timings."""
    import shutil
    import time

    from ..hf import models
    from ..train import mlm as PT

    t0 = time.perf_counter()
    history: dict = {}
    if cfg.source == "multiberts":
        first = models.load(multibert_id(seed, cfg.steps[0]), device=device)       # ModelUnavailable offline
        tok = first.tokenizer

        def model_at(step: int):
            return first.model if step == cfg.steps[0] else models.load(multibert_id(seed, step), device=device).model
        what = f"MultiBERT seed {seed} (google/multiberts-seed_{seed}-step_*)"
    else:
        tok = PT.tokenizer()
        pc = pretrain_config(cfg, seed)
        folder = checkpoint_folder(cfg, seed)
        if fresh and folder.exists():
            shutil.rmtree(folder)
        chunks = PT.training_chunks(tok, cfg.seq_len, cfg.train_split)
        held_out = PT.training_chunks(tok, cfg.seq_len, "test")[:64]
        history = PT.pretrain(pc, chunks, folder, tok=tok, eval_chunks=held_out, device=device)

        def model_at(step: int):
            return PT.load_step(pc, folder, step, len(tok), device=device)
        what = (f"our {cfg.layers}-layer, {cfg.hidden}-wide MLM BERT (seed {seed}, {max(cfg.steps)} steps of batch "
                f"{cfg.batch}x{cfg.seq_len} on WikiText-103 {cfg.train_split})")
    samples = PT.analysis_samples(tok, cfg.n_samples, cfg.max_length, seed=cfg.seed)
    t1 = time.perf_counter()
    stats = [step_statistics(model_at(s), samples["input_ids"], samples["attention_mask"], cfg.svd_fraction,
                             cfg.n_display, seed=cfg.seed, device=device, desc=f"seed {seed} step {s}")
             for s in progress(cfg.steps, desc=f"checkpoints, seed {seed}", total=len(cfg.steps))]
    res = analyse(stats, list(cfg.steps), display_steps=pick_steps(list(cfg.steps)))
    out = _rounded({k: v for k, v in res.items() if k != "display"})
    out["display"] = _rounded(res["display"], 3)
    out["summary"] = alignment_summary(res["cos"].numpy(), cfg.steps)
    out["model"] = what
    out["seed"] = seed
    out["train_loss"] = [round(x, 4) for x in history.get("loss", [])]
    out["eval_loss"] = history.get("eval_loss", {})
    out["pretrain_wall_time_s"] = history.get("wall_time_s")
    out["train_tokens_available"] = int(chunks.numel()) if cfg.source == "pretrain" else None
    out["analysis_wall_time_s"] = time.perf_counter() - t1
    out["wall_time_s"] = time.perf_counter() - t0
    return out


__all__ = ["attention_modules", "QKCapture", "capture", "attention_from_qk", "StepStats", "token_selections",
           "step_statistics", "top_directions", "orient", "cosine", "analyse", "alignment_summary", "pick_steps",
           "scatter_panels", "mean_arrows", "MULTIBERT_STEPS", "multibert_id", "pretrain_config",
           "checkpoint_folder", "trajectory_key", "run_trajectory"]
