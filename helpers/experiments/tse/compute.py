"""The tse chapter's computations: the loops over trials, τ and random initialisations, and `run`, which reads
every piece back from the committed results (`results/tse/book/`) when its parameters match.

Device: Figure 1's transformers models and the synthetic stacks of Figures 2-5 run on
`machinery.runtime.choose_device(p.device)` — the stacks inside `with torch.device(...)`, so
`core.escalation` builds its blocks there and moves its CPU-generator draws there: the same X on every
device, while the blocks' weights come from that device's RNG (seeded alike, so a GPU run draws other
weights than a CPU run; CPU reruns stay bit-identical). The float64 identity checks, Figure 8 and the
bounds (11) are small and stay on CPU.
The mathematics of one trajectory is in `helpers.core.escalation`; the transformers models in
`helpers.hf.escalation`."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import torch

from helpers.core import escalation as E
from helpers.core import measures as M
from helpers.data import load_glue
from helpers.hf import models
from helpers.hf.escalation import escalation_profile, kept_encoders, random_encoder, step_log_odds
from helpers.hf.models import quiet_loading
from helpers.machinery import results
from helpers.machinery.runtime import choose_device, progress, seed_everything

from .params import STEP_FIELDS, SWEEP_FIELDS, TOKENIZER_MODEL, Params, paper_levels
from .result import Result


def postnorm_trials(n: int, d: int, heads: int, depth: int, trials: int, alpha: float = 1.0,
                    value_scale: float = 1.0, ffn_mult: int = 4, seed: int = 0, tau: float | None = None,
                    deesc_place: str = "output", desc: str = "post-norm trials", ffn_init: str = "xavier",
                    ffn_kind: str = "relu") -> dict[str, np.ndarray]:
    """`trials` independent Algorithm-1 stacks (`core.escalation.postnorm_trajectory`, trial t with
    seed seed·100003 + t), stacked: t_sim, t_cos (trials, depth+1), xi_ratio (trials, depth, 4),
    delta, omega (trials, depth)."""
    runs = [E.postnorm_trajectory(n, d, heads, depth, seed * 100_003 + t, alpha, value_scale, ffn_mult, tau,
                                  deesc_place, ffn_init, ffn_kind)
            for t in progress(range(trials), desc=desc, total=trials)]
    return {k: np.stack([r[k] for r in runs]) for k in runs[0]}


def prenorm_trials(n: int, d: int, heads: int, depth: int, trials: int, alpha: float = 1.0,
                   value_scale: float = 1.0, ffn_mult: int = 4, seed: int = 0,
                   ffn_init: str = "xavier") -> dict[str, np.ndarray]:
    """Figure 4: `trials` eq.-(19) stacks (`core.escalation.prenorm_trajectory`), each key (trials, depth)."""
    runs = [E.prenorm_trajectory(n, d, heads, depth, seed * 100_003 + t, alpha, value_scale, ffn_mult, ffn_init)
            for t in progress(range(trials), desc="pre-norm trials", total=trials)]
    return {k: np.stack([r[k] for r in runs]) for k in runs[0]}


def deescalated_diversity(n: int, d: int, heads: int, depth: int, runs: int, taus: tuple[float, ...],
                          alpha: float = 1.0, value_scale: float = 1.0, ffn_mult: int = 4,
                          seed: int = 0, ffn_init: str = "xavier") -> dict[float, np.ndarray]:
    """Figure 5: token diversity t_div of each block output with de-escalation (eq. 21) after each
    block, for every τ; returns {τ: (runs, depth+1)} (column 0 is the input)."""
    return {tau: 1 - postnorm_trials(n, d, heads, depth, runs, alpha, value_scale, ffn_mult, seed, tau=tau,
                                     deesc_place="output", desc=f"tau={tau}", ffn_init=ffn_init)["t_sim"]
            for tau in taus}


def figure1_batch(p: Params):
    """Figure 1's input: `hf_batch` CoLA validation sentences (every 8th), BERT's uncased tokenizer, truncated at
    `hf_seq_len` and padded to the longest. Returns (sentences, encoding)."""
    with quiet_loading():
        tokenizer = models.load(TOKENIZER_MODEL).tokenizer
    sentences = load_glue("CoLA", "validation").sentence1[: p.hf_batch * 8][::8][: p.hf_batch]
    return sentences, tokenizer(sentences, padding="longest", truncation=True, max_length=p.hf_seq_len,
                                return_tensors="pt")


def figure1(p: Params, device: torch.device | str = "cpu") -> dict[str, dict[str, np.ndarray]]:
    """Random-init BERT and ALBERT of depth `hf_depth` on a batch of `hf_batch` CoLA validation
    sentences (every 8th) tokenised with BERT's uncased tokenizer, truncated at `hf_seq_len` and padded
    to the longest (padding masked); gradient norms for BERT only. The weights are drawn on CPU
    (the same model on every device) and moved to `device` with the batch."""
    sentences, enc = figure1_batch(p)
    out = {}
    for kind in ("bert", "albert"):
        model = random_encoder(kind, p.hf_depth, p.hf_hidden, p.hf_heads, p.hf_intermediate, p.seed).to(device)
        ids = enc["input_ids"].clamp(max=model.config.vocab_size - 1).to(device)
        out[kind] = escalation_profile(model, ids, enc["attention_mask"].to(device), grad=(kind == "bert"))
        out[kind]["real_tokens"] = int(enc["attention_mask"].sum())
        out[kind]["sentences"] = len(sentences)
        del model
    return out


def figure1_steps(p: Params, device: torch.device | str = "cpu") -> dict[str, np.ndarray]:
    """Figure 1's BERT step by step (`hf.escalation.step_log_odds`), for `hf_inits` random initialisations
    (seeds p.seed, p.seed + 1, …; the first is Figure 1's model) on Figure 1's CoLA batch."""
    sentences, enc = figure1_batch(p)
    runs = []
    for i in progress(range(p.hf_inits), desc="BERT per step", total=p.hf_inits):
        model = random_encoder("bert", p.hf_depth, p.hf_hidden, p.hf_heads, p.hf_intermediate, p.seed + i).to(device)
        ids = enc["input_ids"].clamp(max=model.config.vocab_size - 1).to(device)
        runs.append(step_log_odds(model, ids, enc["attention_mask"].to(device)))
        del model
    return {k: np.stack([r[k] for r in runs]) for k in runs[0]}


def figure1_sentences(p: Params, device: torch.device | str = "cpu") -> dict[str, np.ndarray]:
    """Figure 1's BERT and ALBERT (the same models and batch as `figure1`) per input sentence: each sentence's
    last-layer t_sim over its real tokens, so that the mean over sentences gets an interval."""
    sentences, enc = figure1_batch(p)
    out = {}
    for kind in ("bert", "albert"):
        model = random_encoder(kind, p.hf_depth, p.hf_hidden, p.hf_heads, p.hf_intermediate, p.seed).to(device)
        ids = enc["input_ids"].clamp(max=model.config.vocab_size - 1).to(device)
        mask = enc["attention_mask"].to(device)
        with torch.no_grad():
            last = model(input_ids=ids, attention_mask=mask).last_hidden_state
        out[kind] = M.t_sim(last, mask.bool()).cpu().numpy()
        del model
    return out


def lemma24_single(p: Params) -> dict[str, float]:
    """Lemma 2.4 with one head: head 0's attention of the block `core.escalation.lemma24_at_init` draws (same X,
    same P), a d × d value map of variance `value_scale`/d, `lemma_trials` draws."""
    torch.manual_seed(p.seed)
    blk = E.PostNormBlock(p.d_model, p.n_heads, p.ffn_mult * p.d_model, value_scale=p.value_scale,
                          ffn_init=p.ffn_init)
    X = E.random_input(p.n_tokens, p.d_model, p.seed)
    with torch.no_grad():
        P = blk.attn.attention(X)
    return dict(E.lemma24_monte_carlo(X, P[:1], p.alpha, p.value_scale, p.lemma_trials, p.seed).__dict__)



def _figure8(p: Params) -> dict[str, Any]:
    """Figure 8 with the paper's 50 draws of W and with `eta_draws_precise` draws (same X and P)."""
    return {name: E.eta_concentration(p.eta_n, p.eta_dims, p.eta_ts, draws, p.seed, p.alpha)
            for name, draws in (("paper", p.eta_draws), ("precise", p.eta_draws_precise))}


def _synthetic(p: Params, device: torch.device | str = "cpu") -> dict[str, Any]:
    """Figures 2-5 and the FFN variants: every synthetic stack of §2.4-3.2, built and run on `device`."""
    with torch.device(device):
        return _synthetic_here(p)


def _synthetic_here(p: Params) -> dict[str, Any]:
    synth = dict(n=p.n_tokens, d=p.d_model, heads=p.n_heads, alpha=p.alpha, ffn_mult=p.ffn_mult, seed=p.seed)
    post = dict(depth=p.depth, trials=p.trials, **synth)
    out: dict[str, Any] = {
        "figure2": postnorm_trials(value_scale=p.value_scale, ffn_init=p.ffn_init, **post),
        "figure2_other": postnorm_trials(value_scale=p.other_value_scale, ffn_init=p.ffn_init,
                                         desc="other reading", **post),
        "figure2_init": postnorm_trials(value_scale=p.value_scale, ffn_init=p.other_ffn_init,
                                        desc=f"{p.other_ffn_init} FFN", **post),
    }
    out["figure2_ablation"] = {
        kind: {k: v for k, v in postnorm_trials(value_scale=p.value_scale, ffn_init=p.ffn_init, ffn_kind=kind,
                                                desc=f"FFN {kind}", **post).items() if k in ("t_sim", "xi_ratio")}
        for kind in ("none", "centred-relu")}
    out["figure3"] = E.w_resampling(depth=p.depth, draws=p.w_trials, value_scale=p.value_scale,
                                    ffn_init=p.ffn_init, **synth)
    out["figure4"] = prenorm_trials(depth=p.prenorm_depth, trials=p.prenorm_trials, value_scale=p.value_scale,
                                    ffn_init=p.ffn_init, **synth)
    for key, vs in (("figure5", p.value_scale), ("figure5_other", p.other_value_scale)):
        out[key] = {str(t): v for t, v in deescalated_diversity(depth=p.deesc_depth, runs=p.deesc_runs, taus=p.taus,
                                                                value_scale=vs, ffn_init=p.ffn_init,
                                                                **synth).items()}
    return out


def tau_sweep(p: Params, device: torch.device | str = "cpu") -> dict[str, Any]:
    """The τ sweep: `sweep_runs` stacks of depth `deesc_depth` per τ in `sweep_taus` (τ = 0: no
    de-escalation), each with eq. (21) after every block (`core.escalation.deescalated_diversity_trajectory`;
    run r has the seed of run r of Figure 5). Returns `taus`, `runs`, `t_div_last` (taus, runs), `t_div`
    (taus, depth+1) and `block_odds` (taus, depth), the last two averaged over runs."""
    last, mean, odds = [], [], []
    with torch.device(device):
        for tau in progress(p.sweep_taus, desc="tau sweep", total=len(p.sweep_taus)):
            runs = [E.deescalated_diversity_trajectory(p.n_tokens, p.d_model, p.n_heads, p.deesc_depth,
                                                       p.seed * 100_003 + r, float(tau), p.alpha, p.value_scale,
                                                       p.ffn_mult, p.ffn_init) for r in range(p.sweep_runs)]
            tdiv = np.stack([r["t_div"] for r in runs])
            last.append(tdiv[:, -1])
            mean.append(tdiv.mean(0))
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                odds.append(np.nanmean(np.stack([r["block_odds"] for r in runs]), 0))
    return {"taus": list(p.sweep_taus), "runs": p.sweep_runs, "t_div_last": np.stack(last), "t_div": np.stack(mean),
            "block_odds": np.stack(odds)}


def run(p: Params) -> Result:
    """Every computation of the chapter, in the order of its sections. At `book` scale every piece —
    the identities, Figure 1, the synthetic stacks, Figure 8 and the bounds (11) — is read back from
    `results/tse/book/` when its parameters match (computing them took 28 minutes on two busy CPU
    cores; reading them, seconds)."""
    seed_everything(p.seed)
    device = choose_device(p.device)

    def identities() -> dict[str, Any]:
        lemma = E.lemma24_at_init(p.n_tokens, p.d_model, p.n_heads, p.alpha, p.value_scale, p.lemma_trials,
                                  p.seed, p.ffn_mult, p.ffn_init)
        return {"lemma24": dict(lemma.__dict__), "prop23": E.prop23_error(p.n_tokens, p.d_model, p.seed)}

    old = dict(drop=SWEEP_FIELDS + STEP_FIELDS)    # the pieces computed before the sweep: keyed without its fields
    with kept_encoders():               # Figure 1's pieces draw the same random BERT and ALBERT: each built once
        ident, _ = results.cached(p, "identities", identities, **old)
        fig1, _ = results.cached(p, "figure1", lambda: figure1(p, device), **old)
        pieces, _ = results.cached(p, "synthetic", lambda: _synthetic(p, device), **old)
        appendix, _ = results.cached(p, "appendix", lambda: {
            "figure8": _figure8(p), "bounds11": E.bounds11_check(p.bound_n, p.bound_d, p.bound_samples, p.seed)},
            **old)
        sweep, _ = results.cached(p, "tau_sweep", lambda: tau_sweep(p, device), drop=STEP_FIELDS)
        steps, _ = results.cached(p, "figure1_steps", lambda: figure1_steps(p, device))
        sentences, _ = results.cached(p, "figure1_sentences", lambda: figure1_sentences(p, device))
        single, _ = results.cached(p, "lemma24_single", lambda: lemma24_single(p))
    return Result(
        settings=p, prop23_max_abs_error=ident["prop23"], lemma24=ident["lemma24"],
        other_value_scale=p.other_value_scale, paper_fig5=paper_levels(), figure1=fig1,
        figure8=appendix["figure8"], bounds11=appendix["bounds11"], tau_sweep=sweep, figure1_steps=steps,
        figure1_sentences=sentences, lemma24_single=single, scale=p.scale, **pieces)
