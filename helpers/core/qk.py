"""Godey et al. (2024) §5 and Appendices C–D, the mathematics: per-checkpoint statistics of the
queries and keys of every head, and the analyses of a training trajectory built from them.

The work is streamed: per checkpoint, one pass over the samples keeps per head the exact token
means, the Gram matrices ΣqqT and ΣkkT of a fixed 20 % token sample (the right singular vectors
of the stacked sample are the eigenvectors of its Gram matrix, so the SVD of the union over all
steps is the eigendecomposition of the summed Grams: no step's vectors need to be kept), a few
hundred display vectors for the scatter plots, and the attention entropies. Means are over real
tokens ([CLS] and [SEP] included, padding excluded), as the paper's "all tokens in the batch".
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from . import measures as M


def attention_from_qk(q: Tensor, k: Tensor, mask: Tensor) -> Tensor:
    """softmax(QKᵀ/√d_k) with padded keys masked out: (B, h, L, d_k) ×2, (B, L) -> (B, h, L, L).
    What a BERT layer computes from the captured Q and K (used to check the hooks)."""
    scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])                       # (B, h, L, L)
    scores = scores.masked_fill(~mask[:, None, None, :].bool(), float("-inf"))
    return torch.softmax(scores, dim=-1)



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
                # (B, h, L): per query row
                rows = M.attention_entropy(p[li].double(), mask[:, None, :].expand(-1, ql.shape[1], -1), reduce=False)
                ents.append(rows.sum((0, 2)))                                          # (h,) summed over real rows
        return cls(q_sum=torch.stack(sums_q).cpu(), k_sum=torch.stack(sums_k).cpu(), count=int(mask.sum()),
                   gram_q=torch.stack(gq).cpu(), gram_k=torch.stack(gk).cpu(), n_svd=int(sv.sum()),
                   ent_sum=torch.stack(ents).cpu(), disp_q=torch.stack(dq).cpu(), disp_k=torch.stack(dk).cpu())

    def __add__(self, other: StepStats) -> StepStats:
        """Merge the statistics of two batches of the same checkpoint."""
        return StepStats(self.q_sum + other.q_sum, self.k_sum + other.k_sum, self.count + other.count,
                         self.gram_q + other.gram_q, self.gram_k + other.gram_k, self.n_svd + other.n_svd,
                         # (layers, h, n_a + n_b, d_k)
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
    flat = real.flatten().nonzero().squeeze(1)  # (n_real,) flat positions
    pick = flat[torch.randperm(len(flat), generator=g)[: min(n_display, len(flat))]]
    disp = torch.zeros(real.numel(), dtype=torch.bool)
    disp[pick] = True
    return svd, disp.view(real.shape)  # (N, L) each



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
    return V * torch.where(sign == 0, torch.ones_like(sign), sign).unsqueeze(-2)  # (…, d, k) · (…, 1, k)


def cosine(a: Tensor, b: Tensor) -> Tensor:
    """cos(a, b) along the last axis."""
    return (a * b).sum(-1) / (a.norm(dim=-1) * b.norm(dim=-1)).clamp_min(1e-30)  # (…, d) -> (…,)


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
    dot = (qm * km).sum(-1)  # (S, layers, h)
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
    # (layers, h)
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



def mean_abs_cos_random(d: int) -> float:
    """E|cos| of two independent uniformly random directions in R^d: Γ(d/2) / (√π Γ((d+1)/2))
    (≈ √(2/(πd)); 1/√d is the root mean square, not the mean). The chance level of |cos(Q̄, K̄)|."""
    from scipy.special import gammaln

    return float(np.exp(gammaln(d / 2) - gammaln((d + 1) / 2)) / np.sqrt(np.pi))


def chance_aligned_share(d: int, threshold: float) -> float:
    """Pr(|cos| ≥ threshold) for two independent uniformly random directions in R^d: cos² follows
    Beta(1/2, (d − 1)/2). The share of heads that would count as aligned by chance."""
    from scipy.stats import beta

    return float(beta.sf(threshold ** 2, 0.5, (d - 1) / 2))


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



# --- the end state of pretraining: Q̄ and K̄ of a model that learned (no trajectory) ---------------------

@dataclass
class QKMoments:
    """First and second moments of every head's queries and keys over the real tokens of a corpus
    (float64): q_sum/k_sum (layers, h, d_k), q_gram/k_gram (layers, h, d_k, d_k) = Σ qqᵀ, Σ kkᵀ over
    `count` tokens. Enough for Q̄, K̄ and for the mean square of every query-key score (`score_parts`)."""

    q_sum: Tensor
    k_sum: Tensor
    q_gram: Tensor
    k_gram: Tensor
    count: int

    @classmethod
    def from_batch(cls, q: list[Tensor], k: list[Tensor], mask: Tensor) -> QKMoments:
        """Per layer q, k (B, h, L, d_k) and the real-token mask (B, L)."""
        m = mask.bool()
        qs, ks, gq, gk = [], [], [], []
        for ql, kl in zip(q, k, strict=True):
            qv = ql.double().permute(1, 0, 2, 3)[:, m]                                  # (h, n, d_k)
            kv = kl.double().permute(1, 0, 2, 3)[:, m]
            qs.append(qv.sum(1))  # (h, d_k)
            ks.append(kv.sum(1))
            gq.append(qv.transpose(1, 2) @ qv)  # (h, d_k, d_k)
            gk.append(kv.transpose(1, 2) @ kv)
        return cls(torch.stack(qs).cpu(), torch.stack(ks).cpu(), torch.stack(gq).cpu(), torch.stack(gk).cpu(),
                   int(m.sum()))

    def __add__(self, other: QKMoments) -> QKMoments:
        return QKMoments(self.q_sum + other.q_sum, self.k_sum + other.k_sum, self.q_gram + other.q_gram,
                         self.k_gram + other.k_gram, self.count + other.count)


def score_parts(q_mean: Tensor, k_mean: Tensor, q_second: Tensor, k_second: Tensor) -> dict[str, Tensor]:
    """What the mean query Q̄ and the mean key K̄ are to the attention scores q_i·k_j, from the means
    (…, d) and the second moments M_q = E[qqᵀ], M_k = E[kkᵀ] (…, d, d), with i and j drawn independently
    from all real tokens (Godey et al. §5: means over "all tokens in the batch").

    * ``cos``, ``dot``, ``q_norm``, ``k_norm``: cos(Q̄, K̄) (Fig. 13), Q̄·K̄ (Fig. 14), ‖Q̄‖, ‖K̄‖;
    * ``mean_share`` = (Q̄·K̄)² / E[(q_i·k_j)²], with E[(q_i·k_j)²] = tr(M_q M_k): the share of the scores'
      mean square that their mean Q̄·K̄ = E[q_i·k_j] accounts for (in [0, 1] by Jensen);
    * ``drift_share`` = Q̄ᵀC_kQ̄ / tr(M_q C_k), C_k = M_k − K̄K̄ᵀ: what the softmax sees of a row is
      q_i·(k_j − K̄) (terms constant over j cancel), whose mean square tr(M_q C_k) = Q̄ᵀC_kQ̄ + tr(C_q C_k)
      splits into the mean query's per-key bias Q̄·(k_j − K̄) and the rest; this is the bias's share."""
    dot = (q_mean * k_mean).sum(-1)  # (…,)
    ms = (q_second * k_second.transpose(-1, -2)).sum((-1, -2))                        # tr(M_q M_k)
    ck = k_second - k_mean.unsqueeze(-1) * k_mean.unsqueeze(-2)  # C_k = M_k − K̄K̄ᵀ: (…, d, d)
    # Q̄ᵀC_kQ̄: (1, d)(d, d)(d, 1) -> (…,)
    bias = (q_mean.unsqueeze(-2) @ ck @ q_mean.unsqueeze(-1)).squeeze(-1).squeeze(-1)
    row = (q_second * ck.transpose(-1, -2)).sum((-1, -2))                             # tr(M_q C_k)
    return {"cos": cosine(q_mean, k_mean), "dot": dot, "q_norm": q_mean.norm(dim=-1), "k_norm": k_mean.norm(dim=-1),
            "mean_share": dot ** 2 / ms.clamp_min(1e-300), "drift_share": bias / row.clamp_min(1e-300)}


def end_state(m: QKMoments) -> dict[str, list]:
    """`score_parts` of every layer and head of one model from its moments, as (layers, h) lists."""
    n = m.count
    out = score_parts(m.q_sum / n, m.k_sum / n, m.q_gram / n, m.k_gram / n)
    return {k: v.tolist() for k, v in out.items()}


__all__ = ["attention_from_qk", "QKMoments", "score_parts", "end_state", "StepStats", "token_selections",
           "top_directions", "orient", "cosine", "analyse", "mean_abs_cos_random", "chance_aligned_share",
           "alignment_summary", "pick_steps"]
