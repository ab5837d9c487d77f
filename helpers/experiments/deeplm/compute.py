"""The deep causal language model chapter (Yu & Zhang §3.4, Figure 7): post-norm vs pre-norm vs
de-escalated post-norm (the de-escalation step at every FFN's input) in a deep, narrow causal
Transformer LM trained on WikiText-103 text.

`run(params)` trains every variant for every seed through `helpers.train.lm` (the book's one loop;
checkpoints under `_build/checkpoints/deeplm/`, resumed after a kill), each run read back from the
committed results when its settings match, and summarises the histories: the last steps' training
loss, the held-out loss, t_sim per block, and the paired (same seed) differences between variants.
"""

from __future__ import annotations

import math

import numpy as np

from ...core.causal_lm import VARIANTS, CausalLM, LMConfig, parameter_count
from ...core.scale import doubling_budgets
from ...machinery import results, runtime
from ...train import lm
from .params import LEAKY, Params, tau_arm
from .result import Result


def _unigram(train: np.ndarray, held: np.ndarray, vocab: int) -> float:
    counts = np.bincount(train.ravel(), minlength=vocab).astype(float) + 1.0
    logp = np.log(counts / counts.sum())
    return float(-logp[held.ravel()].mean())


class _Trainer:
    """Trains one variant and run seed of `p` (`train(variant, seed, checkpoint)`); the text is read once per
    process. An object rather than a closure, so a grid job (`make grid`) can carry it to another process."""

    def __init__(self, p: Params):
        self.p, self._data = p, None

    def sequences(self):
        p = self.p
        if self._data is None:
            self._data = (lm.sequences(lm.token_stream("validation", p.tokens), p.seq_len + 1),
                          lm.sequences(lm.token_stream("test", p.tokens), p.seq_len + 1)[: p.eval_sequences])
        return self._data

    def __call__(self, variant: str, s: int, ckpt):
        p, leaky = self.p, variant == LEAKY
        cfg = LMConfig(variant="de-escalated" if leaky else variant, vocab=lm.vocabulary_size(p.tokens),
                       depth=p.depth, d_model=p.d_model, n_heads=p.n_heads, d_ff=p.d_ff, seq_len=p.seq_len,
                       tau=p.tau, deesc_mean="sequence" if leaky else "prefix")
        tc = lm.LMTrainConfig(steps=p.steps, batch_size=p.batch_size, lr=p.lr, warmup=p.warmup,
                              eval_every=p.eval_every, seed=s, resume_every=p.resume_every, schedule=p.schedule)
        h = lm.train_lm(cfg, tc, *self.sequences(), checkpoint=ckpt, device=runtime.choose_device(p.device),
                        precision=p.precision)
        h["loss"] = [round(x, 5) if math.isfinite(x) else None for x in h["loss"]]
        h.pop("_epoch_sums", None)
        return h


def _grid(p: Params, trainer: _Trainer) -> list[results.RunSpec]:
    # τ acts only in the de-escalated variants: the others run (and are cached) under τ = 1, so a run with
    # another τ retrains only the de-escalated models
    # the control τ runs are the de-escalated model's specs at that τ (named like it: a committed run of
    # another τ is the file `de-escalated-seed<s>@<hash>.json`; `_arm` tells them apart)
    # a run under another schedule than the cosine is named for it (`constant-lr-post-norm-seed0`)
    seeds = runtime.run_seeds(p.seed, p.seeds)
    pre = "" if p.schedule == "cosine" else f"{p.schedule}-lr-"
    plain = [v for v in p.variants if not v.startswith("de-escalated")]
    deesc = [v for v in p.variants if v.startswith("de-escalated")]
    specs = ((results.variant_specs(p.with_(tau=1.0), plain, seeds, trainer, pre) if plain else [])
             + (results.variant_specs(p, deesc, seeds, trainer, pre) if deesc else []))
    specs = [s for s in specs if s.extra["variant"] != LEAKY or s.extra["run_seed"] in seeds[: p.leak_seeds]]
    for t in p.control_taus:
        if t == p.tau and "de-escalated" in p.variants:
            continue
        specs += results.variant_specs(p.with_(tau=t), ["de-escalated"], seeds[: p.tau_seeds], _Trainer(p.with_(tau=t)))
    return specs


def _arm(p: Params, spec: results.RunSpec) -> str:
    """The arm a run of `_grid(p)` belongs to: its variant, or `tau_arm(τ)` for a control τ run."""
    v = spec.extra["variant"]
    return tau_arm(spec.params.tau) if v == "de-escalated" and spec.params.tau != p.tau else v


def curve_params(p: Params) -> Params | None:
    """The budget curve's settings: `p` under a constant learning rate, with the variants of `VARIANTS` it runs and
    no control; None when `p` reads no curve (`curve_budgets` 0, or `p` itself under a constant rate)."""
    if not p.curve_budgets or p.schedule != "cosine":
        return None
    return p.with_(schedule="constant", variants=tuple(v for v in VARIANTS if v in p.variants), control_taus=(),
                   curve_budgets=0)


def curve_budgets(p: Params) -> list[int]:
    """The budgets the curve is read at: `steps`, `steps`/2, … (`curve_budgets` of them, `core.scale.doubling_budgets`),
    ascending."""
    return doubling_budgets(p.steps, p.curve_budgets)


def curve_runs(p: Params) -> list[results.RunSpec]:
    """The budget curve's runs, seed by seed (a seed's three variants, then the next seed's)."""
    q = curve_params(p)
    if q is None:
        return []
    order = {v: i for i, v in enumerate(q.variants)}
    return sorted(_grid(q, _Trainer(q)), key=lambda s: (s.extra["run_seed"], order[s.extra["variant"]]))


def runs(p: Params, curve: bool = True) -> list[results.RunSpec]:
    """The heavy runs of `p` — every variant and seed, then the budget curve's (unless `curve` is False) — as the
    grid runner takes them (`make grid`)."""
    return _grid(p, _Trainer(p)) + (curve_runs(p) if curve else [])


def run(p: Params) -> Result:
    """Train (or read back) every variant for every seed of `p` (`runs(p)`, in order)."""
    trainer = _Trainer(p)
    vocab = lm.vocabulary_size(p.tokens)
    specs = _grid(p, trainer)
    outs = results.execute_all(specs, train_missing=p.train_missing)
    histories: dict[str, list[dict]] = {}
    for spec, (hist, _) in zip(specs, outs, strict=True):
        histories.setdefault(_arm(p, spec), []).append(hist)
    hits = [hit for _, hit in outs]
    for runs in histories.values():
        for hist in runs:
            hist["loss"] = [np.nan if x is None else x for x in hist["loss"]]
    train, held = trainer.sequences()
    paper = Params.resolve("paper")
    budget = {k: {"steps": q.steps, "batch_size": q.batch_size, "seq_len": q.seq_len, "depth": q.depth,
                  "d_model": q.d_model, "d_ff": q.d_ff, "lr": q.lr} for k, q in (("ours", p), ("paper", paper))}
    curve, missing = _curve(p)
    n_params = parameter_count(CausalLM(LMConfig(vocab=vocab, depth=p.depth, d_model=p.d_model, n_heads=p.n_heads,
                                                 d_ff=p.d_ff, seq_len=p.seq_len)))
    return Result(variants=list(p.variants), seeds=runtime.run_seeds(p.seed, p.seeds), depth=p.depth, steps=p.steps,
                  tokens=p.tokens, parameters=n_params, uniform_nats=math.log(vocab),
                  unigram_nats=_unigram(train[:, 1:].numpy(), held[:, 1:].numpy(), vocab), scale=p.scale,
                  histories=histories, from_cache=all(hits), budget=budget, tau=p.tau,
                  control_taus=[t for t in p.control_taus if tau_arm(t) in histories], curve=curve,
                  curve_steps=curve_budgets(p) if curve else [], curve_missing=missing)


def _curve(p: Params) -> tuple[dict[str, list[dict | None]], list[str]]:
    """The budget curve's runs (`curve_runs`): trained where missing when `p.train_missing`, else those the results
    hold (the others None, named in the list returned beside)."""
    specs = curve_runs(p)
    if not specs:
        return {}, []
    held = [s for s in specs if p.train_missing or s.done()]
    outs = dict(zip((s.name for s in held), results.execute_all(held, train_missing=p.train_missing), strict=True))
    seeds = runtime.run_seeds(p.seed, p.seeds)
    curve: dict[str, list[dict | None]] = {v: [None] * len(seeds) for v in curve_params(p).variants}
    for s in specs:
        if s.name in outs:
            h = outs[s.name][0]
            curve[s.extra["variant"]][seeds.index(s.extra["run_seed"])] = {
                "loss": h["loss"], "wall_time_s": h.get("wall_time_s"), "diverged": h.get("diverged")}
    return curve, [s.name for s in specs if s.name not in outs]
