"""Token similarity escalation experiments (Yu & Zhang §1-3.2): the computations behind Figures 1-5."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import torch
from torch import Tensor

from ..book.params import ChapterParams, ParameterError, positive, rules
from ..book.runtime import progress
from ..core import measures as M
from ..core.blocks import PostNormBlock, PreNormBlock, deescalate


@dataclass(frozen=True)
class Params(ChapterParams):
    """Yu & Zhang §1-3.2: token similarity escalation (Figures 1-5)."""

    # Figures 2-5: the synthetic post-norm / pre-norm stacks of §2.4
    n_tokens: int = 64
    d_model: int = 512
    n_heads: int = 8
    alpha: float = 1.0
    depth: int = 20
    trials: int = 50
    ffn_mult: int = 4
    #: variance of the per-head value maps W_k is value_scale / d; 1 = Lemma 2.4 / Thm 2.6 reading
    #: (sigma = 1/sqrt(d)), n_heads = the literal "N(0, (h/d) I)" of §2.4
    value_scale: float = 1.0
    w_trials: int = 1000          # Figure 3: draws of W in step 1
    lemma_trials: int = 2000      # Lemma 2.4 Monte Carlo
    prenorm_depth: int = 50       # Figure 4
    deesc_depth: int = 50         # Figure 5
    deesc_runs: int = 20
    taus: tuple[float, ...] = (0.1, 0.5, 1.0)
    # Figure 1: transformers BERT / ALBERT, random init
    hf_depth: int = 100
    hf_hidden: int = 768
    hf_heads: int = 12
    hf_intermediate: int = 3072
    hf_batch: int = 4
    hf_seq_len: int = 128

    CHAPTER: ClassVar[str] = "tse"
    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {
        "ci": dict(trials=6, depth=12, w_trials=200, lemma_trials=400, prenorm_depth=16, deesc_depth=16,
                   deesc_runs=4, hf_depth=12, hf_batch=2, hf_seq_len=32, d_model=256),
        "book": dict(hf_batch=2, hf_seq_len=64),
        "paper": dict(),
    }
    RULES: ClassVar = rules(
        n_tokens=(lambda v: v >= 2, "needs at least 2 tokens"),
        d_model=positive, n_heads=positive, alpha=positive, depth=positive, trials=positive,
        ffn_mult=positive, value_scale=positive, w_trials=(lambda v: v >= 2, "needs >= 2 draws"),
        lemma_trials=(lambda v: v >= 2, "needs >= 2 draws"), prenorm_depth=positive,
        deesc_depth=positive, deesc_runs=positive,
        taus=(lambda v: len(v) > 0 and all(0 < t <= 1 for t in v), "every tau must lie in (0, 1] (eq. 21)"),
        hf_depth=positive, hf_hidden=positive, hf_heads=positive, hf_intermediate=positive,
        hf_batch=positive, hf_seq_len=(lambda v: 2 <= v <= 512, "must lie in [2, 512]"),
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.d_model % self.n_heads:
            raise ParameterError(f"parameter 'd_model' = {self.d_model} must be divisible by n_heads = {self.n_heads}")
        if self.hf_hidden % self.hf_heads:
            raise ParameterError(f"parameter 'hf_hidden' = {self.hf_hidden} must be divisible by hf_heads")


STEPS = ("step 1: SA + residual", "step 2: LN", "step 3: FFN + residual", "step 4: LN")


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def random_input(n: int, d: int, seed: int, batch: tuple[int, ...] = ()) -> Tensor:
    """X with i.i.d. N(0, 1) entries, as in §2.4."""
    return torch.randn(*batch, n, d, generator=_gen(seed))


# ------------------------------------------------------------------ Lemma 2.4 / Prop 2.3


@dataclass
class Lemma24Check:
    mc_xi1: float
    mc_xi2: float
    mc_xi1_se: float
    mc_xi2_se: float
    formula_xi1: float
    formula_xi2: float


def lemma24_monte_carlo(X: Tensor, P: Tensor, alpha: float, value_scale: float, draws: int, seed: int,
                        chunk: int = 250) -> Lemma24Check:
    """Monte Carlo over W ~ N(0, c/d) of (ξ₁, ξ₂) for Y = X + α[P_kXW_k]_k, against Lemma 2.4 / Prop. 2.9:
    E[ξ_i] = 1 + α² d σ² μ̄_i² with d σ² = c. `P` is (h, n, n), X (n, d)."""
    h, n, _ = P.shape
    d = X.shape[-1]
    g = _gen(seed)
    PX = P @ X                                                   # (h, n, d)
    x1s, x2s = [], []
    for start in range(0, draws, chunk):
        b = min(chunk, draws - start)
        W = torch.randn(b, h, d, d // h, generator=g, dtype=X.dtype) * math.sqrt(value_scale / d)
        SA = (PX.unsqueeze(0) @ W).transpose(1, 2).flatten(-2)   # (b, n, d)
        x1, x2 = M.xi(X, X + alpha * SA)
        x1s.append(x1)
        x2s.append(x2)
    x1, x2 = torch.cat(x1s), torch.cat(x2s)
    f1, f2 = M.expected_xi(X, P, alpha, value_scale)
    se = lambda v: float(v.std() / math.sqrt(v.numel()))  # noqa: E731
    return Lemma24Check(float(x1.mean()), float(x2.mean()), se(x1), se(x2), float(f1), float(f2))


# ------------------------------------------------------------------ Figure 2: post-norm at init


def postnorm_trials(n: int, d: int, heads: int, depth: int, trials: int, alpha: float = 1.0,
                    value_scale: float = 1.0, ffn_mult: int = 4, seed: int = 0, tau: float | None = None,
                    deesc_place: str = "output", desc: str = "post-norm trials") -> dict[str, np.ndarray]:
    """Run `trials` independent Algorithm-1 stacks on X ~ N(0, 1) and record, per block:

    * `t_sim` (trials, depth+1): similarity of the block inputs and the final output,
    * `xi_ratio` (trials, depth, 4): ξ₁/ξ₂ of each of the four steps of Algorithm 1 (NaN once
      diversity is below float32 round-off),
    * `delta`, `omega` (trials, depth): averaged over heads (eq. 12),
    * `t_cos` (trials, depth+1).
    """
    ts = np.zeros((trials, depth + 1))
    tc = np.zeros((trials, depth + 1))
    xr = np.zeros((trials, depth, 4))
    de = np.zeros((trials, depth))
    om = np.zeros((trials, depth))
    for t in progress(range(trials), desc=desc, total=trials):
        torch.manual_seed(seed * 100_003 + t)
        X = random_input(n, d, seed * 100_003 + t + 7)
        with torch.no_grad():
            for layer in range(depth):
                blk = PostNormBlock(d, heads, ffn_mult * d, alpha=alpha, value_scale=value_scale,
                                    tau=tau, deesc_place=deesc_place)
                tr = blk.trace(X)
                ts[t, layer], tc[t, layer] = float(M.t_sim(tr.X)), float(M.t_cos(tr.X))
                pairs = ((tr.X, tr.Y1), (tr.Y1, tr.Y2), (tr.Y2, tr.Y3), (tr.Y3, tr.Y4))
                for s, (a, b) in enumerate(pairs):
                    x1, x2 = M.xi(a, b)
                    # once t_div < 1e-9 in float32, ξ₂ is round-off: record NaN rather than noise
                    ok = float(M.t_div(a)) > 1e-9 and float(M.t_div(b)) > 1e-9
                    xr[t, layer, s] = float(x1 / x2) if ok else np.nan
                de[t, layer] = float(M.delta(tr.P).mean())
                om[t, layer] = float(M.omega(tr.X, tr.P).mean())
                X = tr.Y4
            ts[t, depth], tc[t, depth] = float(M.t_sim(X)), float(M.t_cos(X))
    return {"t_sim": ts, "t_cos": tc, "xi_ratio": xr, "delta": de, "omega": om}


# ------------------------------------------------------------------ Figure 3: resampling W only


def w_resampling(n: int, d: int, heads: int, depth: int, draws: int, alpha: float = 1.0,
                 value_scale: float = 1.0, ffn_mult: int = 4, seed: int = 0,
                 chunk: int = 100) -> dict[str, np.ndarray]:
    """Figure 3: one post-norm trajectory X₀ → X₁ → …; at every block ℓ keep X_ℓ and P(X_ℓ) fixed
    and redraw only the step-1 value maps W `draws` times. Returns per block: `t_sim` of X_ℓ, the
    sample means of ξ₁/ξ₂ − 1 and of r(X_ℓ, Y₁), Estimates 1 and 2 (eqs. 16, 17) with the
    corresponding r-estimates 1 + E·t_sim, and the Lemma 2.4 check (MC vs formula E[ξ₁], E[ξ₂])."""
    keys = ("t_sim", "xi_minus_1", "xi_minus_1_se", "r", "r_se", "est1", "est2", "r_est1", "r_est2",
            "exact_ratio_minus_1", "mc_xi1", "mc_xi2", "formula_xi1", "formula_xi2")
    out = {k: np.zeros(depth) for k in keys}
    torch.manual_seed(seed)
    X = random_input(n, d, seed + 7)
    g = _gen(seed + 11)
    with torch.no_grad():
        for layer in progress(range(depth), desc="blocks (W resampled)", total=depth):
            blk = PostNormBlock(d, heads, ffn_mult * d, alpha=alpha, value_scale=value_scale)
            P = blk.attn.attention(X)                        # (h, n, n), fixed
            PX = P @ X                                       # (h, n, d)
            ratios, rates, x1s, x2s = [], [], [], []
            for start in range(0, draws, chunk):
                b = min(chunk, draws - start)
                W = torch.randn(b, heads, d, d // heads, generator=g) * math.sqrt(value_scale / d)
                Y1 = X + alpha * (PX.unsqueeze(0) @ W).transpose(1, 2).flatten(-2)   # (b, n, d)
                x1, x2 = M.xi(X, Y1)
                ratios.append(x1 / x2)
                rates.append(M.escalation_rate(X, Y1))
                x1s.append(x1)
                x2s.append(x2)
            ratio, rate = torch.cat(ratios), torch.cat(rates)
            ts = float(M.t_sim(X))
            f1, f2 = M.expected_xi(X, P, alpha, value_scale)
            e1 = float(M.estimate1(X, P, alpha))
            e2 = float(M.estimate2(P, head_axis=True))
            vals = dict(t_sim=ts, xi_minus_1=float(ratio.mean() - 1),
                        xi_minus_1_se=float(ratio.std() / math.sqrt(draws)),
                        r=float(rate.mean()), r_se=float(rate.std() / math.sqrt(draws)), est1=e1, est2=e2,
                        r_est1=1 + e1 * ts, r_est2=1 + e2 * ts, exact_ratio_minus_1=float(f1 / f2 - 1),
                        mc_xi1=float(torch.cat(x1s).mean()), mc_xi2=float(torch.cat(x2s).mean()),
                        formula_xi1=float(f1), formula_xi2=float(f2))
            for k, v in vals.items():
                out[k][layer] = v
            X = blk(X)
    return out


# ------------------------------------------------------------------ Figure 4: pre-norm


def prenorm_trials(n: int, d: int, heads: int, depth: int, trials: int, alpha: float = 1.0,
                   value_scale: float = 1.0, ffn_mult: int = 4, seed: int = 0) -> dict[str, np.ndarray]:
    """Figure 4: per block of an eq.-(19) stack, t_sim of the input and the Frobenius norms of
    X, X̂ = LN(X) and P(X̂)X̂W, each (trials, depth)."""
    out = {k: np.zeros((trials, depth)) for k in ("t_sim", "norm_X", "norm_Xhat", "norm_attn")}
    for t in progress(range(trials), desc="pre-norm trials", total=trials):
        torch.manual_seed(seed * 100_003 + t)
        X = random_input(n, d, seed * 100_003 + t + 7)
        with torch.no_grad():
            for layer in range(depth):
                tr = PreNormBlock(d, heads, ffn_mult * d, alpha=alpha, value_scale=value_scale).trace(X)
                out["t_sim"][t, layer] = float(M.t_sim(X))
                out["norm_X"][t, layer] = float(X.norm())
                out["norm_Xhat"][t, layer] = float(tr.Xhat.norm())
                out["norm_attn"][t, layer] = float(tr.attn_out.norm())
                X = tr.Z
    return out


# ------------------------------------------------------------------ Figure 1: transformers models


def hf_model(kind: str, depth: int, hidden: int, heads: int, intermediate: int, seed: int):
    """A randomly initialised transformers BERT or ALBERT of the given depth (no download).

    BERT: `BertConfig` defaults (bert-base) with `num_hidden_layers=depth`. ALBERT: the albert-base
    sizes (embedding 128) — the `AlbertConfig()` default is xxlarge (4096 wide), which the paper's
    Figure 1 cannot have used at depth 100 on one GPU. Eager attention, eval mode (no dropout).
    """
    from transformers import AlbertConfig, AlbertModel, BertConfig, BertModel

    torch.manual_seed(seed)
    common = dict(num_hidden_layers=depth, hidden_size=hidden, num_attention_heads=heads,
                  intermediate_size=intermediate, attn_implementation="eager")
    if kind == "bert":
        model = BertModel(BertConfig(**common))
    elif kind == "albert":
        model = AlbertModel(AlbertConfig(embedding_size=128, **common))
    else:
        raise ValueError(f"kind {kind!r}: use 'bert' or 'albert'")
    return model.eval()


def hf_escalation(model, input_ids: Tensor, attention_mask: Tensor, grad: bool = True) -> dict[str, np.ndarray]:
    """Figure 1: t_sim and t_cos of every hidden state (embedding output = block 0), averaged over
    the batch with padding masked, and — when `grad` — the gradient norm of each encoder layer's
    parameters for a token-reconstruction loss: cross-entropy of logits H_last Eᵀ (E the word
    embedding table, as a tied MLM decoder without its transform) against the input tokens, over
    real tokens. The paper does not name its loss; this one depends on every layer, whereas a
    function of ‖H_last‖ alone would be flattened by the final LayerNorm."""
    model.zero_grad(set_to_none=True)
    with torch.set_grad_enabled(grad):
        out = model(input_ids=input_ids, attention_mask=attention_mask, output_hidden_states=True)
        hs = out.hidden_states
        mask = attention_mask.bool()
        ts = np.array([float(M.t_sim(h.detach(), mask).mean()) for h in hs])
        tc = np.array([float(M.t_cos(h.detach(), mask).mean()) for h in hs])
        res = {"t_sim": ts, "t_cos": tc}
        if grad:
            emb = model.get_input_embeddings().weight                        # (vocab, d or e)
            last = hs[-1][mask]                                              # (real tokens, d)
            if last.shape[-1] != emb.shape[-1]:
                raise ValueError("token-reconstruction loss needs hidden size == embedding size")
            loss = torch.nn.functional.cross_entropy(last @ emb.T, input_ids[mask])
            loss.backward()
            layers = _encoder_layers(model)
            gn = [math.sqrt(sum(float(p.grad.square().sum()) for p in lay.parameters() if p.grad is not None))
                  for lay in layers]
            res["grad_norm"] = np.array(gn)
    return res


def _encoder_layers(model) -> list:
    enc = model.encoder
    if hasattr(enc, "layer"):
        return list(enc.layer)
    return list(enc.albert_layer_groups)  # ALBERT: one shared group


def deescalated_diversity(n: int, d: int, heads: int, depth: int, runs: int, taus: tuple[float, ...],
                          alpha: float = 1.0, value_scale: float = 1.0, ffn_mult: int = 4,
                          seed: int = 0) -> dict[float, np.ndarray]:
    """Figure 5: token diversity t_div of each block output with de-escalation (eq. 21) after each
    block, for every τ; returns {τ: (runs, depth+1)} (column 0 is the input)."""
    out = {}
    for tau in taus:
        r = postnorm_trials(n, d, heads, depth, runs, alpha, value_scale, ffn_mult, seed, tau=tau,
                            deesc_place="output", desc=f"tau={tau}")
        out[tau] = 1 - r["t_sim"]
    return out


__all__ = ["STEPS", "random_input", "lemma24_monte_carlo", "postnorm_trials", "w_resampling",
           "prenorm_trials", "hf_model", "hf_escalation", "deescalated_diversity", "deescalate"]
