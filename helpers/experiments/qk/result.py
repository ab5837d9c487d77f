"""The queries-and-keys chapter's `Result`: every seed's trajectory, plain and centred, the reading across them,
the released models' end states and the recipe probes (`records`), and the statistics that read across records
(intervals over seeds, the alignment beyond chance, the pooled end state); the findings are `findings.py`'s."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np

from ...core.findings import Finding
from ...core.qk import chance_aligned_share, mean_abs_cos_random
from ...core.scale import MIN_POINTS, Extrapolation, extrapolate
from ...core.stats import Interval, t_interval
from ...machinery import results
from ...machinery.results import jsonable, stored_layout
from ..findings import corrected
from .params import BERT_VOCAB, LONG_PRETRAINING, MULTIBERT_TOKENS, PRETRAINING_TOKENS, TREND_FORMS, TREND_WHY
from .records import Ablation, Comparison, EndState, Probe, Trajectory


@dataclass
class Result(results.Result):
    """The trajectories of every seed and the numbers the chapter reads from them.

    `runs[str(seed)]`: one seed's `Trajectory` (`ablation`: its centred twin's, when the centring ablation ran);
    `comparison`: the reading over all seeds (`Comparison`); `ablation_summary`: plain against centred
    (`Ablation`, None without the ablation); `end_state[model]`: one released model's `EndState`, and
    `end_state_missing` the models not measured, why; `probes`: the committed recipe probes (`Probe`). Stored
    dicts become records here (a saved Result and the committed runs read back as they were written)."""

    source: str
    what: str                        # the model, in words
    steps: list[int]
    seeds: list[int]
    shown: list[int]                 # the steps of the scatter panels (Figs. 11, 19, 20)
    n_samples: int
    batch_size: int
    seq_len: int
    d_k: int
    threshold: float
    max_length: int = 128            # analysis samples are cut at this many tokens
    n_display: int = 200             # tokens per step in the scatter panels
    runs: dict[str, Trajectory] = field(default_factory=dict)
    comparison: Comparison | None = None
    from_cache: bool = False
    ablation: dict[str, Trajectory] = field(default_factory=dict)
    ablation_summary: Ablation | None = None
    probes: list[Probe] = field(default_factory=list)
    scale: str = ""                  # the preset the run was made at (ci, book, paper)
    end_state: dict[str, EndState] = field(default_factory=dict)
    end_state_missing: dict[str, str] = field(default_factory=dict)
    #: the pretraining settings the prose states (our own pretraining; a MultiBERT run keeps the defaults)
    mask_prob: float = 0.15
    dropout: float = 0.1
    precision: str = "fp32"
    svd_fraction: float = 0.2
    warmup: float = 0.06             # the share of the steps with a linear warm-up (then linear decay to 0)

    def __post_init__(self) -> None:
        """The converter: each stored dict becomes its record (an empty one: none)."""
        self.runs = {s: Trajectory.of(r) for s, r in self.runs.items()}
        self.ablation = {s: Trajectory.of(r) for s, r in self.ablation.items()}
        self.comparison = Comparison.of(self.comparison) if self.comparison else None
        self.ablation_summary = Ablation.of(self.ablation_summary) if self.ablation_summary else None
        self.probes = [Probe.of(r) for r in self.probes]
        self.end_state = {m: EndState.of(r) for m, r in self.end_state.items()}

    def to_json(self) -> dict[str, Any]:
        empty = ("comparison", "ablation_summary")
        return jsonable({f.name: {} if f.name in empty and getattr(self, f.name) is None else
                          stored_layout(getattr(self, f.name)) for f in fields(self)})

    # --- the trajectories ---------------------------------------------------------------------------

    @property
    def first(self) -> Trajectory:
        """The first seed's trajectory (the one Figures 11-14 and 19-22 show)."""
        return self.runs[str(self.seeds[0])]

    def stacked(self, name: str) -> np.ndarray:
        """`name` (cos, dot, entropy_layer, cos_concat, …) of every seed, stacked: (seeds, S, …)."""
        return np.stack([self.runs[str(s)].array(name) for s in self.seeds])

    @property
    def n_layers(self) -> int:
        return int(self.first.array("cos").shape[1])

    @property
    def n_heads(self) -> int:
        return int(self.first.array("cos").shape[2])

    # --- what the chapter reads: computed from the runs (intervals over seeds recomputed, never stored) ---

    @property
    def chance(self) -> float:
        """Mean |cos| of two random directions in R^{d_k}: the chance level of |cos(Q̄, K̄)|."""
        return mean_abs_cos_random(self.d_k)

    @property
    def chance_share(self) -> float:
        """The share of heads with |cos(Q̄, K̄)| ≥ `threshold` if Q̄ and K̄ pointed at random."""
        return chance_aligned_share(self.d_k, self.threshold)

    @property
    def tokens_per_sample(self) -> float:
        return float(self.first.tokens) / self.n_samples

    @property
    def tokens_seen(self) -> int:
        """Tokens one seed's pretraining sees (steps × batch × sequence length)."""
        return max(self.steps) * self.batch_size * self.seq_len

    def final_cos(self) -> np.ndarray:
        """cos(Q̄, K̄) at the last step: (seeds, layers, heads)."""
        return self.stacked("cos")[:, -1]

    def aligned(self) -> np.ndarray:
        """Whether each head ends aligned, |cos(Q̄, K̄)| ≥ threshold: (seeds, layers, heads)."""
        return np.abs(self.final_cos()) >= self.threshold

    def per_checkpoint(self, quantity: str) -> np.ndarray:
        """A trajectory finding's quantity at every checkpoint, per seed: (seeds, S). "aligned": the share of heads
        with |cos(Q̄, K̄)| ≥ threshold; "first_layer_cos": cos(Q̄, K̄) of layer 0, mean over its heads;
        "dot_growth": log10 of the growth of |Q̄·K̄| (mean over a layer's heads) since step 0, in the layer where it
        grew least; "entropy_fall": the fall of the mean attention entropy since step 0, in the layer where it fell
        least (nats). Its last column is the finding's per-seed effect."""
        if quantity == "aligned":
            return (np.abs(self.stacked("cos")) >= self.threshold).mean((2, 3))
        if quantity == "first_layer_cos":
            return self.stacked("cos")[:, :, 0].mean(2)
        if quantity == "dot_growth":
            d = np.abs(self.stacked("dot")).mean(3)                                  # (seeds, S, layers)
            return np.log10(d / d[:, :1]).min(2)
        if quantity == "entropy_fall":
            e = self.stacked("entropy_layer")                                        # (seeds, S, layers)
            return (e[:, :1] - e).min(2)
        raise ValueError(f"no quantity {quantity!r} per checkpoint")

    # --- the trend to MultiBERT's tokens ------------------------------------------------------------

    def checkpoint_tokens(self) -> np.ndarray:
        """The tokens one seed has seen at each checkpoint (step × batch × sequence length): (S,)."""
        return np.asarray(self.steps, dtype=float) * self.batch_size * self.seq_len

    @property
    def warmup_steps(self) -> int:
        """The step at which warm-up ends and the learning rate starts its linear decay to zero at the last step
        (`train.mlm`'s schedule)."""
        return max(1, int(round(self.warmup * max(self.steps))))

    def trend_steps(self) -> list[int]:
        """The checkpoints a trend is read from: those from the end of warm-up on (while the rate rises, a
        checkpoint reflects the warm-up more than the tokens; from there the rate decays linearly, so each
        checkpoint is a point of one run's decay, not the end of a shorter run: `TREND_WHY`)."""
        return [s for s in self.steps if s >= self.warmup_steps]

    def trend(self, quantity: str) -> Extrapolation | None:
        """`per_checkpoint(quantity)` along the tokens seen, at the checkpoints of `trend_steps`, read at
        MultiBERT's tokens with `TREND_FORMS` (the band: `core.scale`; nothing clipped, so a share's band may
        leave [0, 1]). None on MultiBERT's own checkpoints (the paper's setting) or with fewer than `MIN_POINTS`
        such checkpoints."""
        keep = [i for i, s in enumerate(self.steps) if s in self.trend_steps()]
        if self.source == "multiberts" or len(keep) < MIN_POINTS:
            return None
        y = self.per_checkpoint(quantity)[:, keep]
        return extrapolate(self.checkpoint_tokens()[keep], y.mean(0), MULTIBERT_TOKENS, TREND_FORMS, per_unit=y,
                           axis="training tokens", why=TREND_WHY)

    def trend_finding(self, quantity: str) -> Finding | None:
        """The finding whose trend is `per_checkpoint(quantity)`'s (None where none has one), corrected within its
        paper's families (`experiments.findings.corrected`: the band the findings page reads)."""
        return next((f for f in corrected(self.findings()) if f.at_scale is not None
                     and f.extra.get("trend") == quantity), None)

    def end_state_budgets(self) -> list[dict]:
        """The end-state models whose pretraining tokens a source here states (`PRETRAINING_TOKENS`): model,
        tokens, and the share of its heads with |cos(Q̄, K̄)| ≥ threshold. Other models, other data: shown beside a
        trend, never in it."""
        return [{"model": m, "tokens": float(PRETRAINING_TOKENS[m]),
                 "aligned": float((rec.heads("trained")["cos"] >= self.threshold).mean())}
                for m, rec in self.end_state.items() if m in PRETRAINING_TOKENS]

    def layer_rows(self) -> list[dict]:
        """Per layer: aligned heads per seed (t-interval over seeds, clipped to 0..heads) and the final mean
        |cos(Q̄, K̄)| per seed (t-interval over seeds, clipped to [0, 1]),
        common / opposite heads over all seeds, the mean final cos; mean |Q̄·K̄| over seeds and heads at the
        first and last step (and, with the centring ablation, the centred model's at the last step); the
        attention entropy at the first and last step, its lowest point and when (Figs. 13-15)."""
        fin, al = self.final_cos(), self.aligned()
        absdot = np.abs(self.stacked("dot")).mean((0, 3))                           # (S, layers)
        centred = self.ablation_summary.centred.get("abs_dot_final_layer") if self.ablation_summary else None
        rows = []
        for li in range(self.n_layers):
            rows.append({
                "layer": li, "aligned": t_interval(al[:, li].sum(1)).clip(0, self.n_heads), "heads": self.n_heads,
                "common": int((fin[:, li] >= self.threshold).sum()),
                "opposite": int((fin[:, li] <= -self.threshold).sum()),
                "abs_cos": t_interval(np.abs(fin[:, li]).mean(1)).clip(0, 1), "cos": float(fin[:, li].mean()),
                "abs_dot_first": float(absdot[0, li]), "abs_dot_final": float(absdot[-1, li]),
                "abs_dot_growth": float(absdot[-1, li] / max(absdot[0, li], 1e-300)),
                "abs_dot_centred": float(centred[li]) if centred else float("nan"),
                **self.comparison.entropy_row(li)})
        return rows

    def aligned_layers(self) -> list[int]:
        """The layers with at least one aligned head on some seed (chance: `chance_share` per head)."""
        return [li for li in range(self.n_layers) if self.aligned()[:, li].any()]

    def alignment_by_layer(self) -> dict:
        """Where the alignment is beyond chance: the layers with aligned heads (`aligned_layers`), the aligned
        heads in them over all seeds and how many heads they have over all seeds; the layers whose final mean
        |cos(Q̄, K̄)| has an interval over seeds that reaches down to chance (`chance`)."""
        rows, al = self.layer_rows(), self.aligned()
        layers = self.aligned_layers()
        return {"layers": layers, "aligned": int(al[:, layers].sum()), "heads": int(al[:, layers].size),
                "at_chance": [r["layer"] for r in rows if r["abs_cos"].low <= self.chance]}

    def aligned_share(self) -> Interval:
        """The share of heads that end aligned (|cos| ≥ threshold), per seed, t-interval over seeds."""
        return t_interval(self.per_checkpoint("aligned")[:, -1])

    def first_layer_cos(self) -> Interval:
        """The final cos(Q̄, K̄) of layer 0, mean over its heads, per seed (the paper: common direction, > 0)."""
        return t_interval(self.per_checkpoint("first_layer_cos")[:, -1])

    def dot_growth(self) -> Interval:
        """log10 of the growth of |Q̄·K̄| (mean over a layer's heads) from the first to the last step, in the
        layer where it grows least, per seed (Fig. 14: the magnitude grows)."""
        return t_interval(self.per_checkpoint("dot_growth")[:, -1])

    def entropy_fall(self) -> Interval:
        """The fall of the mean attention entropy from the first to the last step, in the layer where it falls
        least, per seed, nats (Fig. 15: it decays in every layer)."""
        return t_interval(self.per_checkpoint("entropy_fall")[:, -1])

    def example_label(self, key: str) -> str:
        """How the figures name the example head `key` ("similar": the largest final cos(Q̄, K̄); "opposite":
        the smallest): by the paper's name only when the head is aligned that way (|cos| ≥ `threshold`),
        otherwise as what it is — the most positive / most negative head, unaligned."""
        cos = self.first.example(key)["cos_final"]
        if key == "similar":
            return "similar" if cos >= self.threshold else "most positive (unaligned)"
        return "opposite" if cos <= -self.threshold else "most negative (unaligned)"

    # --- how far the model learned ------------------------------------------------------------------

    def pretraining_rows(self) -> list[dict]:
        """Per seed: training loss early and late, held-out MLM loss at the first and last step, timings."""
        return [self.runs[str(s)].pretraining_row(self.steps[0], self.steps[-1]) for s in self.seeds]

    def pretraining_reading(self) -> dict:
        """The held-out and training loss over seeds, the uniform and unigram baselines and the gap to unigram."""
        rows = self.pretraining_rows()
        uni = float(self.first.unigram_nats or np.nan)
        final = float(np.mean([r["eval_final"] for r in rows]))
        available = self.first.train_tokens_available or np.nan
        return {"eval_first": float(np.mean([r["eval_first"] for r in rows])), "eval_final": final,
                "train_final": float(np.mean([r["train_last"] for r in rows])),
                "uniform": float(np.log(BERT_VOCAB)), "unigram": uni, "below_unigram": uni - final,
                "passes": self.tokens_seen / available, "available": float(available),
                "pretrain_hours": float(np.nansum([r["pretrain_s"] for r in rows]) / 3600)}

    def probe_reading(self) -> dict:
        """What the chapter says of the probes: the spread of the final held-out loss of the probes that see the
        most common token budget (that budget, how many), the book runs' final held-out loss below their mean,
        and the corpus-weighting probe minus the book run of its seed at their last common step."""
        out = {"n": 0, "mtokens": float("nan"), "spread": float("nan"), "book_gain": float("nan"),
               "weighting_diff": float("nan"), "weighting_step": 0}
        rows = [p.row() for p in self.probes if not p.wiki_weighted]
        if not rows:
            return out
        budgets = [r["mtokens"] for r in rows]
        budget = max(set(budgets), key=budgets.count)
        same = [r["eval_final"] for r in rows if r["mtokens"] == budget]
        out.update(n=len(same), mtokens=float(budget), spread=float(max(same) - min(same)))
        if self.source == "pretrain":
            out["book_gain"] = float(np.mean(same) - np.mean([r.eval_at(self.steps[-1]) for r in self.runs.values()]))
        weighted = [p for p in self.probes if p.wiki_weighted]
        book = self.runs["0"].eval_loss if self.source == "pretrain" and "0" in self.runs else {}
        common_steps = [k for k in (weighted[0].eval_loss if weighted else {}) if k in book]
        if common_steps:
            step = max(common_steps, key=int)
            out.update(weighting_diff=float(weighted[0].eval_loss[step] - book[step]), weighting_step=int(step))
        return out

    def long_run_factor(self) -> float:
        """How many times this run's tokens per seed `LONG_PRETRAINING` sees (the GPU run)."""
        steps = max(LONG_PRETRAINING["steps"])
        return steps * LONG_PRETRAINING["batch_size"] * self.seq_len / self.tokens_seen

    # --- the end state of real pretraining: pooled over the measured models --------------------------

    def end_state_chance_share(self) -> float:
        """Pr(|cos| ≥ threshold) for random directions, averaged over every measured head (each model's d_k)."""
        n = [(rec.d_k, np.asarray(rec.trained["cos"]).size) for rec in self.end_state.values()]
        return float(sum(chance_aligned_share(d, self.threshold) * k for d, k in n) / max(1, sum(k for _, k in n)))

    def end_state_aligned(self, kind: str = "trained", draws: int = 4000) -> Interval:
        """The share of heads with |cos(Q̄, K̄)| ≥ threshold over every measured model (`kind`: trained or
        twin), with a percentile bootstrap over heads, resampled within each model (seeded)."""
        heads = [rec.heads(kind)["cos"].ravel() >= self.threshold for rec in self.end_state.values()]
        if not heads:
            return Interval(float("nan"), float("nan"), float("nan"), 0, "bootstrap")
        est = float(np.concatenate(heads).mean())
        rng = np.random.default_rng(0)
        n = sum(len(a) for a in heads)
        boot = sum(a[rng.integers(0, len(a), (draws, len(a)))].sum(1) for a in heads) / n
        return Interval.from_draws(boot, estimate=est)

    def end_state_rows(self) -> list[dict]:
        """Per measured model, `EndState.row` (one seeded generator draws every model's bootstrap in turn)."""
        rng = np.random.default_rng(0)
        return [rec.row(self.threshold, rng) for rec in self.end_state.values()]

    def end_state_summary(self) -> dict:
        """What the chapter says of the end state: per model the layers with the most aligned heads and the
        layer-0 |cos|; the rotary model's mean |cos| before and after the rotation."""
        out: dict[str, Any] = {"models": list(self.end_state), "n_heads": 0}
        for name, rec in self.end_state.items():
            h = rec.heads("trained")
            out["n_heads"] += int(h["cos"].size)
            per_layer = (h["cos"] >= self.threshold).sum(1)
            out[name] = {"aligned_per_layer": per_layer.tolist(), "layer0_abs_cos": float(h["cos"][0].mean()),
                         "best_layer": int(per_layer.argmax())}
            pre = rec.heads("trained", "qk_pre_rotary")
            if pre is not None:
                out[name]["pre_rotary_abs_cos"] = float(pre["cos"].mean())
                out[name]["pre_rotary_aligned"] = int((pre["cos"] >= self.threshold).sum())
        return out

    def findings(self) -> list[Finding]:
        """Godey et al. §5's claims on these runs (`findings.findings`)."""
        from .findings import findings

        return findings(self)

    def entropy_means(self) -> tuple[float, float]:
        """The attention entropy averaged over the layers at the first and at the final step (each layer's
        `comparison.entropy_first` / `entropy_final`, itself a mean over seeds and heads)."""
        c = self.comparison
        return float(np.mean(c.entropy_first)), float(np.mean(c.entropy_final))

    def ablation_curve(self, name: str, key: str) -> tuple[np.ndarray, np.ndarray]:
        """The centring ablation's `key` ("eval", "entropy", "k_norm_later") along pretraining for the `name`
        blocks ("plain", "centred"): per seed (seeds, steps), and its mean over seeds."""
        arr = np.asarray(self.ablation_summary.variant(name)[key], dtype=float)
        return arr, arr.mean(0)

    def abs_dot_over_heads(self) -> list[np.ndarray]:
        """Per layer, |Q̄_s·K̄_s| averaged over the layer's heads: (seeds, steps) each (Fig. 14's right panel)."""
        absdot = np.abs(self.stacked("dot"))                                       # (seeds, S, layers, heads)
        return [absdot[:, :, li].mean(-1) for li in range(self.n_layers)]
