"""The queries-and-keys chapter (Godey et al. 2024, §5 and Appendices C–D): the dynamics of the
mean query and the mean key of every head along pretraining (Figures 11–15, 19–23).

`run(params)`, per seed: pretrain our small MLM BERT (`helpers.train.mlm`, checkpoints at `steps`)
or, with `source="multiberts"`, load the paper's MultiBERT checkpoints by hub id; record the queries,
keys and attention of every checkpoint on the same analysis samples (`helpers.hf.qk`); analyse the
trajectory (`helpers.core.qk`); each seed's analysis is read back from the committed results when
its settings match. `compare_runs` reads the trajectories of all seeds as the chapter's numbers.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal

import numpy as np
from torch import Tensor

from ..book import results, runtime
from ..book.params import ChapterParams, ParameterError, check_heads, nonneg, positive, rules
from ..core.findings import Finding
from ..core.qk import (
    alignment_summary,
    analyse,
    chance_aligned_share,
    end_state,
    mean_abs_cos_random,
    pick_steps,
)
from ..core.stats import Interval, t_interval
from ..hf import models
from ..hf.qk import MULTIBERT_STEPS, end_state_moments, multibert_id, step_statistics
from ..train import mlm

#: how far below the unigram predictor the held-out MLM loss must go for "a model that uses its context"
#: (the bar the book's CPU runs do not reach and `LONG_PRETRAINING` is sized for)
TARGET_BELOW_UNIGRAM = 1.5
#: MultiBERT's pretraining (BERT-base's): 2M steps of 256 sequences of 512 tokens (Sellam et al. 2022)
MULTIBERT_TOKENS = 2_000_000 * 256 * 512
#: "almost all heads" (the caption of the paper's Fig. 13) read as a share: nine heads in ten
ALMOST_ALL = 0.9
#: the command that trains the model the chapter's loss bar needs (a GPU; README, "GPU")
LONG_COMMAND = "make grid CHAPTER=qk SCALE=book GRID_ARGS='--recipe long --gpus 0'"

#: bump when the analysis changes what a trajectory's results hold (part of every cache key)
ANALYSIS_VERSION = 2


#: The pretraining the 1.5-nat bar needs, for a GPU (`LONG_COMMAND`: the grid runner's `--recipe long`
#: over the book preset, every seed plain and centred): the book runs see 15.4M tokens and end 0.56 nats below unigram;
#: the recipe probes (`recipe_probes`, one seed each) found no change from a 3x lower learning rate or a 4x
#: larger batch at the same tokens (model size, a higher rate and the vocabulary were not probed); this sees 27x
#: more — 50,000 steps of batch 64 x 128 (410M tokens, ~160 passes over the mixed
#: corpus, hence BERT's dropout 0.1) — with log-spaced checkpoints from step 0.
LONG_PRETRAINING: dict[str, Any] = dict(
    batch_size=64, dropout=0.1, resume_every=1000,
    steps=(0, 10, 30, 100, 300, 1000, 2000, 3000, 5000, 10000, 20000, 30000, 50000))
#: named sets of overrides the grid runner takes (`scripts/grid.py qk --recipe long`)
RECIPES: dict[str, dict[str, Any]] = {"long": LONG_PRETRAINING}


#: real models that learned, measured at the end of their own pretraining against their untrained twins,
#: by the names `helpers.hf.models.load` takes; "byte-MLM" is the anisotropy chapter's byte-level MLM, measured
#: only when its checkpoint is on this machine (never trained for this chapter)
END_STATE_MODELS = ("AntiBERTy", "rxnmapper-ALBERT", "all-MiniLM-L6-v2", "SmolLM2-135M-Instruct", "byte-MLM")
#: the Params fields the end-state measurements depend on; the trajectories' cache keys leave them out
END_STATE_FIELDS = ("end_state", "end_state_samples", "end_state_length")


@dataclass(frozen=True)
class Params(ChapterParams):
    """Godey et al. §5, App. C-D: queries and keys along pretraining (Figures 11-15, 19-23).

    `source="pretrain"` (ci, book): our own small MLM BERT trained from scratch here, checkpointed at
    `steps`, for run seeds `seed`, `seed`+1, … (`seeds` of them); `source="multiberts"` (paper):
    google/multiberts-seed_{run seed}-step_{step/1000}k from the hub. `seed` also draws the analysis samples."""

    source: Literal["pretrain", "multiberts"] = "pretrain"
    seeds: int = 2
    steps: tuple[int, ...] = (0, 10, 20, 50, 100, 200, 300, 500, 700, 1000, 1500, 2000, 3000)  # 0 = initialisation
    n_samples: int = 128              # §5: "128 samples from Wikitext-103" (test split paragraphs, drawn with `seed`)
    max_length: int = 128
    svd_fraction: float = 0.2         # §5 footnote: 20 % of the representations for the SVD
    n_display: int = 200              # tokens per step in the scatter plots (Figs. 11, 19, 20)
    threshold: float = 0.5            # |cos(Q̄, K̄)| from which a head counts as aligned (reading of Fig. 13)
    # our pretraining (ignored for multiberts)
    layers: int = 4
    d_model: int = 256
    n_heads: int = 4
    d_ff: int = 1024
    seq_len: int = 128
    batch_size: int = 8
    lr: float = 1e-3
    warmup: float = 0.06
    weight_decay: float = 0.01
    mask_prob: float = 0.15
    train_split: Literal["validation", "test"] = "validation"
    #: "validation": WikiText-103 validation only (the committed book runs); "mixed": validation + test
    #: minus the analysis and held-out paragraphs + the mirror's GLUE/STS sentences (`mlm.corpus`, ~2.5M
    #: tokens), with the unigram baseline recorded beside the held-out loss
    corpus: Literal["validation", "mixed"] = "validation"
    dropout: float = 0.1              # BERT's; 0 learns faster on a small budget
    #: the causal test: subtract every block output's token mean during pretraining (and
    #: analysis), so the hidden states cannot drift along a common direction (Q̄ = b_Q, K̄ = b_K)
    centre: bool = False
    #: the centring ablation beside the plain runs: every seed is also pretrained with `centre=True`
    #: (same data, steps and initialisation seed), and the chapter compares loss, entropy and alignment
    ablation: bool = False
    resume_every: int = 100
    #: "auto": bf16 autocast for pretraining where the device computes bf16 natively (≥ 2× faster on an
    #: AVX-512-BF16 CPU; tests/test_train.py checks it follows fp32), fp32 elsewhere; the committed book
    #: trajectories are bf16 (the book preset pins it)
    precision: Literal["fp32", "bf16", "auto"] = "auto"
    #: the end state of real pretraining: these models (`END_STATE_MODELS`) as released and as
    #: untrained twins (same architecture, random init), each on `end_state_samples` in-domain sequences of at
    #: most `end_state_length` tokens
    end_state: tuple[str, ...] = ()
    end_state_samples: int = 256
    end_state_length: int = 128

    CHAPTER: ClassVar[str] = "qk"
    #: resume points and the reading threshold do not change a trajectory's results
    CACHE_EXCLUDE: ClassVar[tuple[str, ...]] = ("resume_every", "threshold")
    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {
        "ci": dict(layers=2, d_model=128, n_heads=2, d_ff=512, seq_len=64, batch_size=8, lr=1e-3,
                   steps=(0, 5, 15, 30, 60), n_samples=32, max_length=64, n_display=100, resume_every=30,
                   ablation=True, end_state=("rxnmapper-ALBERT",), end_state_samples=16, end_state_length=64),
        # the mixed corpus, 15,000 steps, no dropout, bf16, with the centring ablation; three seeds
        # (one single-threaded process per run, ≈ 45-55 min each on this CPU; six runs committed)
        "book": dict(corpus="mixed", dropout=0.0, precision="bf16", seeds=3, ablation=True, resume_every=250,
                     steps=(0, 10, 20, 50, 100, 200, 500, 1000, 2000, 3000, 5000, 7500, 10000, 15000),
                     end_state=END_STATE_MODELS),
        "paper": dict(source="multiberts", seeds=5, steps=MULTIBERT_STEPS, n_samples=128),
    }
    RULES: ClassVar = rules(
        seeds=positive,
        steps=(lambda v: len(v) >= 2 and all(b > a for a, b in zip(v, v[1:], strict=False)) and v[0] >= 0,
               "needs >= 2 increasing checkpoint steps >= 0"),
        n_samples=(lambda v: v >= 2, "needs >= 2 samples"),
        max_length=(lambda v: 8 <= v <= 512, "must lie in [8, 512]"),
        svd_fraction=(lambda v: 0 < v <= 1, "must lie in (0, 1]"), n_display=positive,
        threshold=(lambda v: 0 < v < 1, "must lie in (0, 1)"),
        layers=positive, d_model=positive, n_heads=positive, d_ff=positive,
        seq_len=(lambda v: 8 <= v <= 512, "must lie in [8, 512]"), batch_size=positive, lr=positive,
        warmup=(lambda v: 0 <= v < 1, "must lie in [0, 1)"), weight_decay=nonneg,
        mask_prob=(lambda v: 0 < v < 1, "must lie in (0, 1)"), resume_every=positive,
        dropout=(lambda v: 0 <= v < 1, "must lie in [0, 1)"),
        end_state=(lambda v: all(m in END_STATE_MODELS for m in v), f"models must be among {END_STATE_MODELS}"),
        end_state_samples=(lambda v: v >= 2, "needs >= 2 sequences"),
        end_state_length=(lambda v: 8 <= v <= 512, "must lie in [8, 512]"),
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.source == "multiberts":
            bad = [s for s in self.steps if s not in MULTIBERT_STEPS]
            if bad:
                raise ParameterError(f"parameter 'steps': {bad} are not released MultiBERT checkpoints "
                                     "(every 20k steps to 200k, every 100k to 2M)")
            if self.seed + self.seeds > 5:
                raise ParameterError("parameter 'seeds': MultiBERT intermediate checkpoints exist for seeds 0-4 only "
                                     f"(asked for seeds {runtime.run_seeds(self.seed, self.seeds)})")
        else:
            check_heads(self)

    @property
    def d_k(self) -> int:
        return self.d_model // self.n_heads if self.source == "pretrain" else 64


@dataclass
class Result(results.Result):
    """The trajectories of every seed and the numbers the chapter reads from them.

    `runs[str(seed)]`: one seed's analysis (see `core.qk.analyse`: cos, dot, cos_concat, entropy,
    entropy_layer (S, layers[, heads]); means/sv1_share per SVD basis; display heads) plus its
    pretraining history (train_loss per step, eval_loss per checkpoint step, timings) and
    `summary` (`alignment_summary`). `comparison`: `compare_runs` over all seeds, extended with the
    first seed's reading of the common SVD (`union_*`)."""

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
    runs: dict[str, dict] = field(default_factory=dict)
    comparison: dict = field(default_factory=dict)
    from_cache: bool = False
    #: the centring ablation: the centred twin of every seed (same keys as `runs`) and `ablation_summary`
    ablation: dict[str, dict] = field(default_factory=dict)
    ablation_summary: dict = field(default_factory=dict)
    #: the committed recipe probes of the book model (`recipe_probes`), read by `run`
    probes: list[dict] = field(default_factory=list)
    scale: str = ""                  # the preset the run was made at (ci, book, paper)
    #: the end state of real pretraining: model -> `measure_end_state` record; and the models not measured, why
    end_state: dict[str, dict] = field(default_factory=dict)
    end_state_missing: dict[str, str] = field(default_factory=dict)

    @property
    def first(self) -> dict:
        """The first seed's trajectory (the one Figures 11-14 and 19-22 show)."""
        return self.runs[str(self.seeds[0])]

    def stacked(self, name: str) -> np.ndarray:
        """`name` (cos, dot, entropy_layer, cos_concat, …) of every seed, stacked: (seeds, S, …)."""
        return np.stack([np.asarray(self.runs[str(s)][name], dtype=float) for s in self.seeds])

    @property
    def n_layers(self) -> int:
        return int(np.asarray(self.first["cos"]).shape[1])

    @property
    def n_heads(self) -> int:
        return int(np.asarray(self.first["cos"]).shape[2])

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
        return float(self.first["tokens"]) / self.n_samples

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

    def layer_rows(self) -> list[dict]:
        """Per layer: aligned heads per seed (t-interval over seeds, clipped to 0..heads) and the final mean
        |cos(Q̄, K̄)| per seed (t-interval over seeds, clipped to [0, 1]),
        common / opposite heads over all seeds, the mean final cos; mean |Q̄·K̄| over seeds and heads at the
        first and last step (and, with the centring ablation, the centred model's at the last step); the
        attention entropy at the first and last step, its lowest point and when (Figs. 13-15)."""
        fin, al = self.final_cos(), self.aligned()
        absdot = np.abs(self.stacked("dot")).mean((0, 3))                           # (S, layers)
        c = self.comparison
        centred = (self.ablation_summary or {}).get("centred", {}).get("abs_dot_final_layer")
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
                "entropy_first": float(c["entropy_first"][li]), "entropy_final": float(c["entropy_final"][li]),
                "entropy_lowest": float(c["entropy_lowest"][li]),
                "entropy_lowest_step": int(c["entropy_lowest_step"][li])})
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
        return t_interval(self.aligned().mean((1, 2)))

    def first_layer_cos(self) -> Interval:
        """The final cos(Q̄, K̄) of layer 0, mean over its heads, per seed (the paper: common direction, > 0)."""
        return t_interval(self.final_cos()[:, 0].mean(1))

    def dot_growth(self) -> Interval:
        """log10 of the growth of |Q̄·K̄| (mean over a layer's heads) from the first to the last step, in the
        layer where it grows least, per seed (Fig. 14: the magnitude grows)."""
        d = np.abs(self.stacked("dot")).mean(3)                                      # (seeds, S, layers)
        return t_interval(np.log10(d[:, -1] / d[:, 0]).min(1))

    def entropy_fall(self) -> Interval:
        """The fall of the mean attention entropy from the first to the last step, in the layer where it falls
        least, per seed, nats (Fig. 15: it decays in every layer)."""
        e = self.stacked("entropy_layer")                                            # (seeds, S, layers)
        return t_interval((e[:, 0] - e[:, -1]).min(1))

    def first_layer_sharper(self) -> Interval:
        """Final attention entropy of the last layer minus the first, per seed, nats (Fig. 15: the first layers
        stay sharper than the last)."""
        e = self.stacked("entropy_layer")[:, -1]
        return t_interval(e[:, -1] - e[:, 0])

    def ablation_interval(self, name: str) -> Interval:
        """The t-interval over seeds of an `ablation_summary` list of seed-paired differences, centred − plain:
        "diff_eval_final", "diff_entropy_drop", "diff_abs_cos_final"."""
        return t_interval(self.ablation_summary[name])

    def later_interval(self, name: str) -> Interval:
        """The t-interval over seeds of the attention entropy in layers 1.. (`ablation_summary["later"]`):
        "diff_drop", "diff_final" (centred − plain), "plain_drop", "centred_drop" (first − last step)."""
        later = self.ablation_summary["later"]
        if name in ("plain_drop", "centred_drop"):
            return t_interval(later[name.split("_")[0]]["drop"])
        return t_interval(later[name])

    def later_layer_rows(self) -> list[dict]:
        """Per layer from 1 (where centring acts): final attention entropy, plain and centred (mean over seeds),
        and centred − plain seed by seed with its t-interval."""
        a = self.ablation_summary
        later = a["later"]
        return [{"layer": li, "plain": float(a["plain"]["entropy_final_layer"][li]),
                 "centred": float(a["centred"]["entropy_final_layer"][li]), "diff": t_interval(d)}
                for li, d in zip(later["layers"], later["layer_diff_final"], strict=True)]

    def late_loss_change(self) -> dict:
        """The held-out loss change over the last checkpoint interval (mean over seeds, last minus the one
        before) of each variant: is either still learning at the end?"""
        a = self.ablation_summary
        return {"from": a["steps"][-2], "to": a["steps"][-1],
                **{name: float(np.mean(np.asarray(a[name]["eval"], dtype=float)[:, -1]
                                       - np.asarray(a[name]["eval"], dtype=float)[:, -2]))
                   for name in ("plain", "centred")}}

    def example_label(self, key: str) -> str:
        """How the figures name the example head `key` ("similar": the largest final cos(Q̄, K̄); "opposite":
        the smallest): by the paper's name only when the head is aligned that way (|cos| ≥ `threshold`),
        otherwise as what it is — the most positive / most negative head, unaligned."""
        cos = self.first["display"][key]["cos_final"]
        if key == "similar":
            return "similar" if cos >= self.threshold else "most positive (unaligned)"
        return "opposite" if cos <= -self.threshold else "most negative (unaligned)"

    def pretraining_rows(self) -> list[dict]:
        """Per seed: training loss early and late, held-out MLM loss at the first and last step, timings."""
        first, last = str(self.steps[0]), str(self.steps[-1])
        rows = []
        for s in self.seeds:
            r = self.runs[str(s)]
            tl = np.asarray(r["train_loss"], dtype=float)
            wall = r["pretrain_wall_time_s"]
            rows.append({"seed": s, "train_first": float(tl[:20].mean()) if tl.size else float("nan"),
                         "train_last": float(tl[-50:].mean()) if tl.size else float("nan"),
                         "eval_first": float(r["eval_loss"].get(first, np.nan)),
                         "eval_final": float(r["eval_loss"].get(last, np.nan)),
                         "pretrain_s": float(wall) if wall is not None else float("nan"),
                         "steps_per_s": len(tl) / wall if wall else float("nan"),
                         "analysis_s": float(r["analysis_wall_time_s"])})
        return rows

    def pretraining_reading(self) -> dict:
        """The held-out and training loss over seeds, the uniform and unigram baselines and the gap to unigram."""
        rows = self.pretraining_rows()
        uni = float(self.first.get("unigram_nats") or np.nan)
        final = float(np.mean([r["eval_final"] for r in rows]))
        available = self.first.get("train_tokens_available") or np.nan
        return {"eval_first": float(np.mean([r["eval_first"] for r in rows])), "eval_final": final,
                "train_final": float(np.mean([r["train_last"] for r in rows])),
                "uniform": float(np.log(30522)), "unigram": uni, "below_unigram": uni - final,
                "passes": self.tokens_seen / available, "available": float(available),
                "pretrain_hours": float(np.nansum([r["pretrain_s"] for r in rows]) / 3600)}

    def probe_rows(self) -> list[dict]:
        """The recipe probes (`probes`) as rows: name, learning rate, batch, corpus weighting, dropout, steps,
        tokens seen, held-out MLM loss at the last checkpoint and how far below the unigram predictor."""
        rows = []
        for r in self.probes:
            last = max(r["eval_loss"], key=int)
            rows.append({"probe": r["name"], "lr": float(r["lr"]), "batch": int(r["batch"]),
                         "wiki_weighted": bool(r["wiki_weighted"]), "dropout": float(r["dropout"] or 0),
                         "steps": int(last), "mtokens": int(last) * r["tokens_seen"] / r["steps"] / 1e6,
                         "eval_final": float(r["eval_loss"][last]),
                         "below_unigram": float(r["unigram_nats"]) - float(r["eval_loss"][last])})
        return rows

    def probe_reading(self) -> dict:
        """What the chapter says of the probes: the spread of the final held-out loss of the probes that see the
        most common token budget (that budget, how many), the book runs' final held-out loss below their mean,
        and the corpus-weighting probe minus the book run of its seed at their last common step."""
        out = {"n": 0, "mtokens": float("nan"), "spread": float("nan"), "book_gain": float("nan"),
               "weighting_diff": float("nan"), "weighting_step": 0}
        rows = [r for r in self.probe_rows() if not r["wiki_weighted"]]
        if not rows:
            return out
        budgets = [r["mtokens"] for r in rows]
        budget = max(set(budgets), key=budgets.count)
        same = [r["eval_final"] for r in rows if r["mtokens"] == budget]
        out.update(n=len(same), mtokens=float(budget), spread=float(max(same) - min(same)))
        if self.source == "pretrain":
            finals = [float(r["eval_loss"][str(self.steps[-1])]) for r in self.runs.values()]
            out["book_gain"] = float(np.mean(same) - np.mean(finals))
        weighted = [r for r in self.probes if r["wiki_weighted"]]
        book = self.runs["0"].get("eval_loss", {}) if self.source == "pretrain" and "0" in self.runs else {}
        common_steps = [k for k in (weighted[0]["eval_loss"] if weighted else {}) if k in book]
        if common_steps:
            step = max(common_steps, key=int)
            out.update(weighting_diff=float(weighted[0]["eval_loss"][step] - book[step]), weighting_step=int(step))
        return out

    def long_run_factor(self) -> float:
        """How many times this run's tokens per seed `LONG_PRETRAINING` sees (the GPU run)."""
        steps = max(LONG_PRETRAINING["steps"])
        return steps * LONG_PRETRAINING["batch_size"] * self.seq_len / self.tokens_seen


    # --- the end state of real pretraining -----------------------------------------------------------

    def end_state_heads(self, kind: str = "trained", key: str = "qk") -> dict[str, dict[str, np.ndarray]]:
        """Per measured model, `kind` ("trained" or "twin") and where (`key`: "qk"; "qk_pre_rotary" for a
        rotary model, before the rotation): |cos|, |dot|, mean_share, drift_share, q_norm, k_norm as
        (layers, heads) arrays."""
        out = {}
        for name, rec in self.end_state.items():
            r = rec[kind if key == "qk" else f"{kind}_pre_rotary"] if (key == "qk" or rec.get("rotary")) else None
            if r is None:
                continue
            out[name] = {k: np.abs(np.asarray(r[k], dtype=float)) for k in
                         ("cos", "dot", "mean_share", "drift_share", "q_norm", "k_norm")}
        return out

    def end_state_chance_share(self) -> float:
        """Pr(|cos| ≥ threshold) for random directions, averaged over every measured head (each model's d_k)."""
        n = [(rec["d_k"], np.asarray(rec["trained"]["cos"]).size) for rec in self.end_state.values()]
        return float(sum(chance_aligned_share(d, self.threshold) * k for d, k in n) / max(1, sum(k for _, k in n)))

    def end_state_aligned(self, kind: str = "trained", draws: int = 4000) -> Interval:
        """The share of heads with |cos(Q̄, K̄)| ≥ threshold over every measured model (`kind`: trained or
        twin), with a percentile bootstrap over heads, resampled within each model (seeded)."""
        heads = [h["cos"].ravel() >= self.threshold for h in self.end_state_heads(kind).values()]
        if not heads:
            return Interval(float("nan"), float("nan"), float("nan"), 0, "bootstrap")
        est = float(np.concatenate(heads).mean())
        rng = np.random.default_rng(0)
        n = sum(len(a) for a in heads)
        boot = sum(a[rng.integers(0, len(a), (draws, len(a)))].sum(1) for a in heads) / n
        return Interval.from_draws(boot, estimate=est)

    def end_state_rows(self) -> list[dict]:
        """Per measured model: d_k, layers, heads, chance |cos|; trained and twin: mean |cos(Q̄, K̄)| over heads
        (percentile bootstrap over heads), aligned heads, median |Q̄·K̄|, median share of the score carried by
        the mean and median share of what the softmax sees carried by the mean query."""
        rows = []
        trained, twin = self.end_state_heads("trained"), self.end_state_heads("twin")
        rng = np.random.default_rng(0)
        for name, rec in self.end_state.items():
            row = {"model": name, "d_k": rec["d_k"], "layers": trained[name]["cos"].shape[0],
                   "heads": trained[name]["cos"].shape[1], "chance": mean_abs_cos_random(rec["d_k"]),
                   "tokens": rec["tokens"], "data": rec["data"], "rotary": bool(rec.get("rotary"))}
            for kind, h in (("trained", trained[name]), ("twin", twin[name])):
                signed = np.asarray(rec[kind]["cos"], dtype=float).ravel()
                c = h["cos"].ravel()
                boot = c[rng.integers(0, c.size, (4000, c.size))].mean(1)
                row[kind] = {"abs_cos": Interval.from_draws(boot, estimate=float(c.mean())),
                             "aligned": int((c >= self.threshold).sum()),
                             "common": int((signed >= self.threshold).sum()),
                             "opposite": int((signed <= -self.threshold).sum()),
                             "abs_dot": float(np.median(h["dot"])), "mean_share": float(np.median(h["mean_share"])),
                             "drift_share": float(np.median(h["drift_share"]))}
            rows.append(row)
        return rows

    def end_state_layer_rows(self, name: str, key: str = "qk") -> list[dict]:
        """Model `name` per layer: mean over heads of |cos(Q̄, K̄)|, |Q̄·K̄|, the mean's share of the score and
        the mean query's share of what the softmax sees, trained and twin; heads aligned (trained)."""
        tr, tw = self.end_state_heads("trained", key)[name], self.end_state_heads("twin", key)[name]
        return [{"layer": li, **{f"{kind}_{k}": float(h[k][li].mean()) for kind, h in (("trained", tr), ("twin", tw))
                                 for k in ("cos", "dot", "mean_share", "drift_share")},
                 "aligned": int((tr["cos"][li] >= self.threshold).sum()), "heads": int(tr["cos"].shape[1])}
                for li in range(tr["cos"].shape[0])]

    def end_state_summary(self) -> dict:
        """What the chapter says of the end state: per model the layers with the most aligned heads and the
        layer-0 |cos|; the rotary model's mean |cos| before and after the rotation."""
        out: dict[str, Any] = {"models": list(self.end_state), "n_heads": 0}
        for name, h in self.end_state_heads("trained").items():
            out["n_heads"] += int(h["cos"].size)
            per_layer = (h["cos"] >= self.threshold).sum(1)
            out[name] = {"aligned_per_layer": per_layer.tolist(), "layer0_abs_cos": float(h["cos"][0].mean()),
                         "best_layer": int(per_layer.argmax())}
        pre = self.end_state_heads("trained", "qk_pre_rotary")
        for name, h in pre.items():
            out[name]["pre_rotary_abs_cos"] = float(h["cos"].mean())
            out[name]["pre_rotary_aligned"] = int((h["cos"] >= self.threshold).sum())
        return out

    # --- the findings -------------------------------------------------------------------------------

    def _measured(self) -> str:
        if self.source == "multiberts":
            return f"MultiBERT checkpoints of {len(self.seeds)} seeds at steps {self.steps[0]:,}–{self.steps[-1]:,}"
        return (f"{self.what}, pretrained here: {len(self.seeds)} seeds × {max(self.steps):,} steps of "
                f"{self.batch_size} × {self.seq_len} tokens; read on {self.n_samples} held-out WikiText-103 paragraphs")

    def _scale(self) -> str:
        if self.source == "multiberts":
            return "paper: MultiBERT"
        return f"{self.scale}: {self.tokens_seen:,} tokens per seed"     # the share of MultiBERT's: `_reduced`


    def _reduced(self) -> str:
        """How the trajectories fall short of the paper's setting: "" on MultiBERT's checkpoints."""
        if self.source == "multiberts":
            return ""
        return (f"on the book's own {self.what.removeprefix('our ').split(',')[0]} BERT at about "
                f"1/{float(f'{MULTIBERT_TOKENS / self.tokens_seen:.2g}'):,.0f} of MultiBERT's tokens")

    def cannot_test_trajectory(self) -> str:
        """Why these trajectories cannot test the paper's claims on BERT's pretraining ("" when they can: on
        MultiBERT's checkpoints, or on a model whose held-out loss ends `TARGET_BELOW_UNIGRAM` nats or more below
        the unigram predictor)."""
        if self.source == "multiberts":
            return ""
        below = self.pretraining_reading()["below_unigram"]
        if np.isfinite(below) and below >= TARGET_BELOW_UNIGRAM:
            return ""
        ends = (f"ends {below:.2f} nats below the unigram predictor" if np.isfinite(below)
                else "has no unigram baseline recorded")
        return (f"the book's own model {ends}, short of the {TARGET_BELOW_UNIGRAM} nats of a model that uses its "
                "context: its trajectory cannot stand for BERT's pretraining (section 'How far the model learned')")

    def findings(self) -> list[Finding]:
        """Godey et al. §5's claims on these runs: alignment of Q̄ and K̄ beyond chance (Fig. 13), its sign in
        the first layer, the growth of |Q̄·K̄| (Fig. 14), the fall of attention entropy (Fig. 15) — read from
        the book's own pretraining, which gives no verdict while that model has not learned
        (`cannot_test_trajectory`) —, the released models' end state, the centring test (the book's own
        question), and the trained-model bar a CPU cannot reach."""
        traj = dict(reduced=self._reduced(), cannot_test=self.cannot_test_trajectory())
        base = dict(paper="godey2024", chapter="qk", measured=self._measured(), scale=self._scale(),
                    reduced=traj["reduced"])
        rows = self.layer_rows()
        per_layer = ", ".join(f"layer {r['layer']} {r['aligned'].estimate:.1f}" for r in rows)   # mean over seeds
        layers = self.aligned_layers()
        where_aligned = ("no layer" if not layers else f"layer {layers[0]}" if len(layers) == 1 else
                         "layers " + ", ".join(str(li) for li in layers[:-1]) + f" and {layers[-1]}")
        out = [
            Finding(key="qk-aligned-heads", where="Fig. 13", section="qk-alignment",
                    claim_id="godey-fig13-aligned", cannot_test=traj["cannot_test"], **{**base, "measured":
                    f"{base['measured']}; aligned heads per seed of {self.n_heads}: {per_layer} "
                    f"(aligned heads only in {where_aligned})"},
                    claim="Almost all heads see the mean query and the mean key align, in common or opposite "
                          "directions, along training; in a 64-dimensional head such an alignment is very "
                          "unlikely by chance.",
                    quantity=f"share of heads with |cos(Q̄, K̄)| ≥ {self.threshold} at the last step",
                    effect=self.aligned_share(), direction="above", reference=self.chance_share,
                    reference_label=f"chance {self.chance_share:.1e}", paper_value=ALMOST_ALL, digits=2),
            Finding(key="qk-first-layer-common", where="Fig. 13, §5", section="qk-alignment",
                    claim_id="godey-fig13-layers", cannot_test=traj["cannot_test"], **base,
                    claim="The first layers display a common-direction dynamic (cos(Q̄, K̄) increases); the last "
                          "layers an opposite-direction one.",
                    quantity="final cos(Q̄, K̄) of layer 0, mean over its heads",
                    effect=self.first_layer_cos(), direction="above", reference=0.0, digits=2),
            Finding(key="qk-dot-growth", where="Fig. 14", section="qk-scalar-products",
                    claim_id="godey-fig14-dot", cannot_test=traj["cannot_test"], **base,
                    claim="The drift of the mean query and key increases the magnitude of their scalar product.",
                    quantity="log10 growth of |Q̄·K̄| from step 0 to the last step, in the layer where it grows least",
                    effect=self.dot_growth(), direction="above", reference=0.0,
                    reference_label="0 (no growth)", digits=2),
            Finding(key="qk-entropy-falls", where="Fig. 15", section="qk-entropy",
                    claim_id="godey-fig15-entropy", cannot_test=traj["cannot_test"], **base,
                    claim="Training induces a decay of the attention entropy in all layers.",
                    quantity="fall of the mean attention-row entropy from step 0 to the last step, in the layer "
                             "where it falls least (nats)",
                    effect=self.entropy_fall(), direction="above", reference=0.0, digits=2),
        ]
        # one finding on either branch: measured, or what it needs
        centring = dict(key="qk-centring", where="§6–7, Limitations", section="qk-centring",
                        claim_id="godey-s6-sharp-attention", kind="extension")
        if self.ablation_summary:
            out.append(Finding(
                **centring, **{**base, "measured":
                    f"{base['measured']}; each seed also pretrained with every block output centred over its "
                    "sequence (same initialisation and batches); layers 1 and up, where centring removes the drift"},
                claim="The drift of queries and keys along a common direction allows sharper attention patterns "
                      "(the paper does not prove that sharp attention cannot emerge without it).",
                quantity="entropy fall with centred blocks minus with plain blocks, layers 1 and up, seed-paired "
                         "(nats)",
                effect=self.later_interval("diff_drop"), direction="below", reference=0.0, digits=2))
        else:
            out.append(Finding(
                **centring, **base,
                claim="The drift of queries and keys along a common direction allows sharper attention patterns.",
                quantity="entropy fall with centred minus plain blocks, layers 1 and up (nats)", effect=None,
                needs="our own pretraining (not MultiBERT)", command="make rerun CHAPTER=qk SCALE=book"))
        if self.end_state:
            tw = self.end_state_aligned("twin")
            names = ", ".join(self.end_state)
            missing = (f"; not measured: {', '.join(self.end_state_missing)}" if self.end_state_missing else "")
            out.append(Finding(
                key="qk-end-state", paper="godey2024", chapter="qk", where="Fig. 13, §5", section="qk-end-state",
                claim_id="godey-fig13-aligned",
                reduced=f"on {len(self.end_state)} released models' end state in place of MultiBERT's trajectory",
                measured=f"{names}, as released, on about {max(r['n_sequences'] for r in self.end_state.values())} "
                         "in-domain sequences each (antibody chains, reaction SMILES, WikiText-103); rotary queries "
                         "and keys after the rotation; the untrained twins (same architectures, random init) have "
                         f"{tw.estimate:.1%} of heads aligned{missing}",
                scale="the released models' own pretraining (no trajectory: the end state only)",
                claim="Almost all heads see the mean query and the mean key align, in common or opposite "
                      "directions, along training; in a 64-dimensional head such an alignment is very unlikely "
                      "by chance.",
                quantity=f"share of heads with |cos(Q̄, K̄)| ≥ {self.threshold} in the pretrained models, pooled "
                         "(bootstrap over heads within each model)",
                effect=self.end_state_aligned(), direction="above", reference=self.end_state_chance_share(),
                reference_label=f"chance {self.end_state_chance_share():.1e}", paper_value=ALMOST_ALL, digits=2))
        out.append(Finding(
            key="qk-trained-model", where="§5", section="qk-pretraining", claim_id="godey-s5-multibert", **base,
            claim="These dynamics are those of BERT's pretraining to its end (MultiBERT: 2M steps of 256 × 512 "
                  "tokens), in a model that has learned to use its context.",
            quantity=f"the same measurements on a model whose held-out MLM loss ends {TARGET_BELOW_UNIGRAM} nats "
                     "or more below the unigram predictor",
            effect=None, needs="a GPU", command=LONG_COMMAND))
        return out


def compare_runs(runs: dict, steps: Iterable[int], threshold: float = 0.5, rebound_nats: float = 0.1) -> dict:
    """The numbers behind the chapter's reading of Figures 12–15, 19–23, over all seeds of `runs`
    (seed -> result of `trajectory`). Per head the final cos(Q̄, K̄) classifies it as
    common (≥ threshold) or opposite (≤ −threshold) as in `alignment_summary`; per layer the counts
    over all seeds; onsets grouped by the final sign; |Q̄·K̄| growth (Fig. 14); per-layer entropy at
    the first and last step, its lowest point and the layers that rebound by more than
    `rebound_nats` (Fig. 15); the concatenated-head cosine per seed (Fig. 23); for the first
    seed, how far the *other* mean moves along the first direction of the K-only / Q-only SVD (App. C);
    and `per_seed`, the timing claims seed by seed (head counts, median onsets, the entropy dip averaged
    over layers and its step, the final held-out loss), so that the chapter states their spread."""
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
    per_seed = []
    for i, (name, r) in enumerate(runs.items()):
        e = np.asarray(r["entropy_layer"], dtype=float)                                   # (S, L)
        em = e.mean(1)
        on = {"common": [], "opposite": []}
        for li, row in enumerate(alignment_summary(cos[i], steps, threshold)["onset"]):
            for hi, o in enumerate(row):
                if o is not None:
                    on["common" if final[i, li, hi] > 0 else "opposite"].append(o)
        ev = r.get("eval_loss") or {}
        per_seed.append({
            "seed": int(r.get("seed", name)), "n_common": int((final[i] >= threshold).sum()),
            "n_opposite": int((final[i] <= -threshold).sum()),
            "median_onset": {k: (int(np.median(v)) if v else None) for k, v in on.items()},
            "abs_cos_final": float(np.abs(final[i]).mean()),
            "entropy_first": float(em[0]), "entropy_final": float(em[-1]), "entropy_lowest": float(em.min()),
            "entropy_lowest_step": steps[int(em.argmin())],
            "entropy_rebound_layers": [li for li in range(e.shape[1]) if e[-1, li] - e[:, li].min() > rebound_nats],
            "eval_final": float(ev[str(steps[-1])]) if str(steps[-1]) in ev else None})
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
        "other_mean": other, "per_seed": per_seed,
    }




def union_reading(run: dict) -> dict:
    """Figures 11-12 read on one seed: on the common SVD, the share of σ₁² in σ₁²+σ₂², how many heads'
    mean query and key both move away from the origin along the first direction between the first
    and the last step, and how many end with the same / opposite sign of that coordinate."""
    u = run["means"]["union"]
    share = np.asarray(run["sv1_share"]["union"], dtype=float)
    qd, kd = np.asarray(u["q"], dtype=float)[..., 0], np.asarray(u["k"], dtype=float)[..., 0]   # (S, layers, h)
    same = np.sign(qd[-1]) == np.sign(kd[-1])
    grow = (np.abs(qd[-1]) > np.abs(qd[0])) & (np.abs(kd[-1]) > np.abs(kd[0]))
    return {"union_share_mean": float(share.mean()), "union_share_min": float(share.min()),
            "union_share_max": float(share.max()), "union_grow": int(grow.sum()), "union_heads": int(grow.size),
            "union_same_sign": int(same.sum()), "union_opposite_sign": int((~same).sum())}


def ablation_summary(plain: dict, centred: dict, steps: Iterable[int]) -> dict:
    """Plain against centred pretraining (seed by seed, both over all seeds): held-out MLM loss at the
    last step, mean attention entropy over layers and heads (first, lowest, last step), the mean
    |cos(Q̄, K̄)| at the last step; ‖K̄‖ of layers 1.. (mean over them and their heads) at every step
    (`k_norm_later`); per layer at the last step (mean over seeds and heads) the entropy,
    |cos(Q̄, K̄)|, |Q̄·K̄|, ‖Q̄‖ and ‖K̄‖; and per-seed differences centred − plain (held-out loss, entropy drop
    from the first to the last step, final mean |cos|; `Result.ablation_interval` gives their t-intervals);
    `later`: the same entropy comparison over layers 1.. only, where centring acts (`later_layer_entropy`)."""
    steps = list(steps)
    out: dict = {"steps": steps, "seeds": sorted(plain, key=int)}
    for name, runs in (("plain", plain), ("centred", centred)):
        ev = np.array([[float(r["eval_loss"][str(s)]) for s in steps] for r in runs.values()])       # (seeds, S)
        ent = np.stack([np.asarray(r["entropy_layer"], dtype=float).mean(1) for r in runs.values()])  # (seeds, S)
        cos = np.stack([np.abs(np.asarray(r["cos"], dtype=float)).mean((1, 2)) for r in runs.values()])
        knorm = np.stack([np.asarray(r["k_norm"], dtype=float)[:, 1:].mean((1, 2)) for r in runs.values()])
        out[name] = {"eval": ev.tolist(), "entropy": ent.tolist(), "abs_cos": cos.tolist(),
                     "k_norm_later": knorm.tolist(),
                     "eval_final": float(ev[:, -1].mean()), "eval_best": float(ev.min(1).mean()),
                     "entropy_first": float(ent[:, 0].mean()), "entropy_lowest": float(ent.min(1).mean()),
                     "entropy_final": float(ent[:, -1].mean()),
                     "entropy_drop": float((ent[:, 0] - ent[:, -1]).mean()),
                     "abs_cos_final": float(cos[:, -1].mean()),
                     "entropy_final_layer": np.stack([np.asarray(r["entropy_layer"], dtype=float)[-1]
                                                      for r in runs.values()]).mean(0).tolist(),
                     **{f"{k}_final_layer": np.stack([np.abs(np.asarray(r[src], dtype=float))[-1].mean(-1)
                                                      for r in runs.values()]).mean(0).tolist()
                        for k, src in (("abs_cos", "cos"), ("abs_dot", "dot"), ("q_norm", "q_norm"),
                                       ("k_norm", "k_norm"))}}
    common = [k for k in plain if k in centred]
    last = str(steps[-1])
    out["diff_eval_final"] = [float(centred[k]["eval_loss"][last]) - float(plain[k]["eval_loss"][last])
                              for k in common]
    idx = {name: {k: i for i, k in enumerate(runs)} for name, runs in (("plain", plain), ("centred", centred))}

    def diff(key: str, f) -> list[float]:
        return [f(np.asarray(out["centred"][key][idx["centred"][k]]))
                - f(np.asarray(out["plain"][key][idx["plain"][k]])) for k in common]
    out["diff_entropy_drop"] = diff("entropy", lambda e: float(e[0] - e[-1]))
    out["diff_abs_cos_final"] = diff("abs_cos", lambda c: float(c[-1]))
    out["unigram_nats"] = next(iter(plain.values())).get("unigram_nats")
    out["later"] = later_layer_entropy(plain, centred, steps)
    return out


def later_layer_entropy(plain: dict, centred: dict, steps: Iterable[int], first_layer: int = 1) -> dict:
    """The attention entropy of the layers centring acts on, seed-paired: layers `first_layer`.. only
    (layer 0 reads the embeddings, which centring does not touch), mean over those layers and their heads.

    Per variant: per seed the entropy at the first and last step and its drop, and their means over seeds.
    Paired by seed (same initialisation seed, same batches), centred − plain: the drop (`diff_drop`) and the
    final entropy (`diff_final`), and per later layer the final entropy's difference per seed
    (`layer_diff_final`, one list per layer). `Result.later_interval` gives their t-intervals."""
    steps = list(steps)
    keys = [k for k in plain if k in centred]
    if not keys:
        raise ValueError("later_layer_entropy needs at least one seed run both plain and centred")

    def ent(runs: dict) -> np.ndarray:                                             # (seeds, S, later layers)
        e = np.stack([np.asarray(runs[k]["entropy_layer"], dtype=float) for k in keys])
        if e.shape[1] != len(steps) or e.shape[2] <= first_layer:
            raise ValueError(f"entropy_layer {e.shape[1:]} does not fit {len(steps)} steps and layers "
                             f"from {first_layer}")
        return e[:, :, first_layer:]
    p, c = ent(plain), ent(centred)
    out: dict = {"layers": list(range(first_layer, first_layer + p.shape[2])), "seeds": [int(k) for k in keys]}
    for name, e in (("plain", p), ("centred", c)):
        m = e.mean(2)                                                              # (seeds, S)
        drop = m[:, 0] - m[:, -1]
        out[name] = {"first": m[:, 0].tolist(), "final": m[:, -1].tolist(), "drop": drop.tolist(),
                     "first_mean": float(m[:, 0].mean()), "final_mean": float(m[:, -1].mean()),
                     "final_layer": e[:, -1].mean(0).tolist()}
    out["diff_drop"] = [a - b for a, b in zip(out["centred"]["drop"], out["plain"]["drop"], strict=True)]
    out["diff_final"] = [a - b for a, b in zip(out["centred"]["final"], out["plain"]["final"], strict=True)]
    layer_diff = c[:, -1] - p[:, -1]                                               # (seeds, later layers)
    out["layer_diff_final"] = layer_diff.T.tolist()
    return out


def pretrain_config(p: Params, seed: int) -> mlm.PretrainConfig:
    """The MLM pretraining of run seed `seed` of `p`."""
    return mlm.PretrainConfig(layers=p.layers, d_model=p.d_model, n_heads=p.n_heads, d_ff=p.d_ff,
                              seq_len=p.seq_len, batch_size=p.batch_size, steps=max(p.steps), lr=p.lr, warmup=p.warmup,
                              weight_decay=p.weight_decay, mask_prob=p.mask_prob, dropout=p.dropout,
                              centre=p.centre, seed=seed,
                              checkpoint_steps=tuple(p.steps), resume_every=p.resume_every)


def pretrain_weights(p: Params, seed: int, device: Any = "cpu") -> tuple[dict, Tensor, dict]:
    """Run seed `seed`'s MLM pretraining into its checkpoint folder (`checkpoint_dir("qk", <settings>)`;
    resumes from `resume.pt`, returns at once on a finished folder): (history, training chunks, the
    corpus facts the trajectory records)."""
    tok = mlm.tokenizer()
    pc = pretrain_config(p, seed)
    folder = results.checkpoint_dir("qk", {**pc.stored(), "precision": p.precision})
    if p.corpus == "mixed":
        c = mlm.corpus(tok, p.seq_len, p.n_samples, analysis_seed=p.seed)
        chunks, held_out = c["train"], c["held_out"]
        extra = {"unigram_nats": c["unigram_nats"], "corpus_sources": c["sources"]}
    else:
        chunks = mlm.training_chunks(tok, p.seq_len, p.train_split)
        held_out = mlm.training_chunks(tok, p.seq_len, "test")[:64]
        extra = {}
    history = mlm.pretrain(pc, chunks, folder, tok=tok, eval_chunks=held_out, device=device, precision=p.precision)
    return history, chunks, extra


def _rounded(x, decimals: int = 5):
    if isinstance(x, dict):
        return {k: _rounded(v, decimals) for k, v in x.items()}
    if isinstance(x, Tensor):
        return np.round(x.detach().cpu().double().numpy(), decimals).tolist()
    return x


def trajectory(p: Params, seed: int, device: Any = "cpu") -> dict:
    """Pretrain (or, with `source="multiberts"`, load from the hub) the checkpoints of run seed `seed`
    and analyse them. Pretraining weights live in `checkpoint_dir("qk", <pretraining settings>)`: an
    interrupted run resumes there, a finished one is reused; at `ci` scale the folder is wiped first.
    Returns the JSON-ready analysis plus the summary, training history and timings."""
    t0 = time.perf_counter()
    history: dict = {}
    chunks = None
    if p.source == "multiberts":
        first = models.load(multibert_id(seed, p.steps[0]), device=device)       # ModelUnavailable offline
        tok = first.tokenizer

        def model_at(step: int):
            return first.model if step == p.steps[0] else models.load(multibert_id(seed, step), device=device).model
        what = f"MultiBERT seed {seed} (google/multiberts-seed_{seed}-step_*)"
    else:
        tok = mlm.tokenizer()
        pc = pretrain_config(p, seed)
        folder = results.checkpoint_dir("qk", {**pc.stored(), "precision": p.precision})
        if p.scale == "ci":
            shutil.rmtree(folder)
        history, chunks, history_extra = pretrain_weights(p, seed, device=device)

        def model_at(step: int):
            return mlm.load_step(pc, folder, step, len(tok), device=device)
        what = (f"our {p.layers}-layer, {p.d_model}-wide MLM BERT (seed {seed}, {max(p.steps)} steps of batch "
                f"{p.batch_size}x{p.seq_len} on " + ("the mixed corpus" if p.corpus == "mixed" else
                                                      f"WikiText-103 {p.train_split}") +
                (", block outputs centred" if p.centre else "") + ")")
    samples = mlm.analysis_samples(tok, p.n_samples, p.max_length, seed=p.seed)
    t1 = time.perf_counter()
    stats = [step_statistics(model_at(s), samples["input_ids"], samples["attention_mask"], p.svd_fraction,
                             p.n_display, seed=p.seed, device=device, desc=f"seed {seed} step {s}")
             for s in runtime.progress(p.steps, desc=f"checkpoints, seed {seed}", total=len(p.steps))]
    res = analyse(stats, list(p.steps), display_steps=pick_steps(list(p.steps)))
    out = _rounded({k: v for k, v in res.items() if k != "display"})
    out["display"] = _rounded(res["display"], 3)
    out["summary"] = alignment_summary(res["cos"].numpy(), p.steps)
    out["model"] = what
    out["seed"] = seed
    out["train_loss"] = [round(x, 4) for x in history.get("loss", [])]
    out["eval_loss"] = history.get("eval_loss", {})
    out["pretrain_wall_time_s"] = history.get("wall_time_s")
    if p.source == "pretrain":
        out.update(history_extra)
    out["train_tokens_available"] = int(chunks.numel()) if chunks is not None else None
    out["analysis_wall_time_s"] = time.perf_counter() - t1
    out["wall_time_s"] = time.perf_counter() - t0
    return out


def run_name(p: Params, seed: int) -> str:
    """The committed file of run seed `seed`: `seed<seed>`, `centred-seed<seed>` for the centring ablation."""
    return f"{'centred-' if p.centre else ''}seed{seed}"


class _Trajectory:
    """Computes one seed's trajectory (`trajectory(p, seed)`), as a run of the grid (its checkpoints are the
    pretraining folder `trajectory` manages). An object rather than a closure, so a grid job can carry it."""

    def __init__(self, p: Params, seed: int, device: Any = None):
        self.p, self.seed, self.device = p, seed, device

    def __call__(self, checkpoint=None) -> dict:
        runtime.seed_everything(self.p.seed)     # before any GEMM on the device (CUBLAS_WORKSPACE_CONFIG)
        return trajectory(self.p, self.seed, device=self.device or runtime.choose_device(self.p.device))


def _spec(p: Params, seed: int, device: Any = None) -> results.RunSpec:
    return results.RunSpec(p.CHAPTER, run_name(p, seed), p, _Trajectory(p, seed, device),
                           drop=("seeds", "ablation", *END_STATE_FIELDS),
                           extra=dict(run_seed=seed, analysis_version=ANALYSIS_VERSION))


def runs(p: Params) -> list[results.RunSpec]:
    """Every heavy run `run(p)` makes, in its order, as the grid runner takes them (`make grid`): each seed's
    trajectory, then (the centring ablation) each seed's centred trajectory."""
    seeds = runtime.run_seeds(p.seed, p.seeds)
    out = [_spec(p, s) for s in seeds]
    if p.ablation and p.source == "pretrain" and not p.centre:
        out += [_spec(p.with_(centre=True, ablation=False), s) for s in seeds]
    return out


# --- the end state of real pretraining ----------------------------------------------------------------

def _encode(tok, texts: list[str], max_length: int) -> dict[str, Tensor]:
    """(N, L) input ids and attention mask of `texts` with the model's special tokens, cut at `max_length`,
    padded on the right: a Hugging Face tokenizer, or the book's vocabulary / byte tokenizers."""
    import torch

    if hasattr(tok, "pad") and hasattr(tok, "model_max_length"):
        enc = tok(texts, truncation=True, max_length=max_length, padding=True, return_tensors="pt")
        return {"input_ids": enc["input_ids"], "attention_mask": enc["attention_mask"]}
    ids = [tok(t, add_special_tokens=True)["input_ids"][:max_length] for t in texts]
    if any(len(i) > 2 and i[-1] != tok.sep_token_id for i in ids):
        ids = [i[: max_length - 1] + [tok.sep_token_id] if len(i) == max_length else i for i in ids]
    L = max(len(i) for i in ids)
    x = torch.full((len(ids), L), tok.pad_token_id, dtype=torch.long)
    mask = torch.zeros((len(ids), L), dtype=torch.long)
    for r, i in enumerate(ids):
        x[r, : len(i)] = torch.tensor(i)
        mask[r, : len(i)] = 1
    return {"input_ids": x, "attention_mask": mask}


def _wikitext_paragraphs(n: int, seed: int) -> list[str]:
    """The chapter's analysis paragraphs (WikiText-103 test, ≥ 20 words, drawn with `seed`), as text."""
    from ..data import load_wikitext103

    paras = mlm._paragraphs(load_wikitext103("test"))
    return [paras[i] for i in mlm._analysis_pick(paras, n, seed, 20)]


def end_state_data(name: str, n: int, seed: int) -> tuple[list[str], str]:
    """The in-domain sequences of model `name` and what they are: antibody chains for AntiBERTy, USPTO-50K
    reactions for rxnmapper's ALBERT, WikiText-103 test paragraphs for the text and byte models."""
    from ..data.sequences import load_antibody_chains, load_uspto50k_reactions

    if name == "AntiBERTy":
        chains = load_antibody_chains()
        pick = sorted({int(i) for i in np.linspace(0, len(chains) - 1, min(n, len(chains))).round()})
        return [chains[i][2] for i in pick], f"{len(pick)} antibody variable-domain chains (Jain et al. 2017)"
    if name == "rxnmapper-ALBERT":
        rx = load_uspto50k_reactions(n, seed)
        return rx, f"{len(rx)} USPTO-50K test reactions (atom maps stripped)"
    return _wikitext_paragraphs(n, seed), f"{n} WikiText-103 test paragraphs"


def _byte_mlm(untrained: bool):
    """The anisotropy chapter's byte-level MLM, only when its final checkpoint is on this machine: this
    chapter never trains it (ModelUnavailable otherwise)."""
    import torch

    from ..hf.bytelevel import VOCAB_SIZE, ByteTokenizer
    from ..hf.loading import ModelUnavailable
    from .anisotropy import BYTE_MLM, BYTE_MLM_DESCRIPTION, byte_mlm_folder

    folder = byte_mlm_folder()
    path = mlm.weights_path(folder, BYTE_MLM.steps)
    if not path.is_file():
        if folder.is_dir() and not any(folder.iterdir()):
            folder.rmdir()                          # the empty folder byte_mlm_folder() just made
        raise ModelUnavailable("byte-MLM: its checkpoint is not on this machine (the anisotropy chapter trains it, "
                               "about 20 CPU-minutes: make rerun CHAPTER=anisotropy SCALE=book); not trained here")
    if untrained:
        torch.manual_seed(0)
        model = mlm.new_mlm(BYTE_MLM, VOCAB_SIZE, attn_implementation="eager").eval()
    else:
        model = mlm.load_step(BYTE_MLM, folder, BYTE_MLM.steps, VOCAB_SIZE)
    kind = "randomly initialised (untrained) twin" if untrained else "trained here"
    return model, ByteTokenizer(), BYTE_MLM_DESCRIPTION + f" [{kind}]"


def _load_end_state(name: str, untrained: bool, device: Any):
    if name == "byte-MLM":
        return _byte_mlm(untrained)
    loaded = models.load(name, untrained=untrained, device=device)
    return loaded.model, loaded.tokenizer, loaded.description


def measure_end_state(name: str, n: int, max_length: int, seed: int = 0, device: Any = "cpu") -> dict:
    """Q̄ and K̄ of every layer (attention call) and head of model `name` as released and of its untrained
    twin (the same architecture from its config with seeded random weights), on `n` in-domain sequences:
    `core.qk.end_state` (cos, dot, norms, the mean's share of the score, the mean query's share of what the
    softmax sees), (layers, heads) each. A rotary model is measured after the rotation (`qk`: its scores
    are products of these vectors) and before it (`*_pre_rotary`)."""
    t0 = time.perf_counter()
    texts, what = end_state_data(name, n, seed)
    out: dict[str, Any] = {"name": name, "data": what, "n_sequences": len(texts), "max_length": max_length}
    for kind, untrained in (("trained", False), ("twin", True)):
        model, tok, description = _load_end_state(name, untrained, device)
        enc = _encode(tok, texts, max_length)
        moments = end_state_moments(model, enc["input_ids"], enc["attention_mask"], device=device,
                                    desc=f"{name} ({kind})")
        out[f"{kind}_description"] = description
        out[kind] = _rounded(end_state(moments["qk"]), 6)
        if "qk_pre_rotary" in moments:
            out[f"{kind}_pre_rotary"] = _rounded(end_state(moments["qk_pre_rotary"]), 6)
        out["tokens"] = moments["qk"].count
        out["d_k"] = int(moments["qk"].q_sum.shape[-1])
        out["rotary"] = "qk_pre_rotary" in moments
        del model
    out["wall_time_s"] = time.perf_counter() - t0
    return out


class _EndState:
    """One model's end-state measurement as a run of the grid (no checkpoint)."""

    def __init__(self, p: Params, name: str, device: Any = None):
        self.p, self.name, self.device = p, name, device

    def __call__(self, checkpoint=None) -> dict:
        runtime.seed_everything(self.p.seed)
        return measure_end_state(self.name, self.p.end_state_samples, self.p.end_state_length, self.p.seed,
                                 device=self.device or runtime.choose_device(self.p.device))


def end_state_name(model: str) -> str:
    """The committed file of one model's end state: `end-state-<model>`."""
    return "end-state-" + model.replace("/", "-")


def _end_state_spec(p: Params, model: str, device: Any = None) -> results.RunSpec:
    keep = ("seed", *END_STATE_FIELDS)
    drop = tuple(f for f in p.cache_key() if f not in keep)
    return results.RunSpec(p.CHAPTER, end_state_name(model), p, _EndState(p, model, device),
                           drop=drop, extra=dict(end_state=model))


def end_state_runs(p: Params, device: Any = None) -> tuple[dict[str, dict], dict[str, str], list[bool]]:
    """Every model of `p.end_state` through the committed-results cache: (records, {model: why it is
    missing}, cache hits). A model whose weights or data are not on this machine is reported, not faked; so is
    one with no committed record when this run may not measure it (`train_missing=False`, the book build: the
    byte-level MLM, whose checkpoint is never committed), with the command that makes it."""
    from ..data import DataUnavailable
    from ..hf.loading import ModelUnavailable

    done, missing, hits = {}, {}, []
    for m in p.end_state:
        try:
            done[m], hit = results.execute(_end_state_spec(p, m, device), train_missing=p.train_missing)
            hits.append(hit)
        except (ModelUnavailable, DataUnavailable, results.MissingRuns) as err:
            missing[m] = str(err).splitlines()[0]
    return done, missing, hits


def run_seed(p: Params, seed: int, device: Any = "cpu") -> tuple[dict, bool]:
    """One seed's trajectory through the committed-results cache: (trajectory, cache hit). Separate
    processes may run different seeds of the same Params (one single-threaded process per core); one
    process trains a run at a time (`results.execute` holds its lock)."""
    return results.execute(_spec(p, seed, device), train_missing=p.train_missing)


def export_model(p: Params, seed: int | None = None, step: int | None = None,
                 name: str = "book-mlm-bert", train: bool = False, device: Any = "cpu") -> Path:
    """Export run seed `seed` (default `p.seed`) of `p`'s pretraining as a Hugging Face folder
    `models.book_model_dir(name)` that `models.load(name)` reads: the `BertForMaskedLM` weights at
    `step` (default: the checkpoint with the lowest held-out MLM loss), BERT's tokenizer, and
    `BOOK_MODEL.json` (settings, step, held-out and unigram losses, commit). The weights are not
    committed: the pretraining must have run on this machine, or `train=True` re-runs it
    (`pretrain_weights`, about an hour on one CPU thread at `book`) and checks that its held-out losses
    equal the committed trajectory's (to 0.02 nats; bf16 on another CPU may differ in the last bits), so
    the exported model is the one the book measured."""
    import json

    if p.source != "pretrain":
        raise ParameterError("only our own pretraining (source='pretrain') can be exported")
    seed = p.seed if seed is None else seed
    traj, _ = run_seed(p, seed)
    evals = {int(k): float(v) for k, v in traj["eval_loss"].items()}
    if step is None:
        step = min((s for s in evals if s in p.steps), key=evals.get)
    pc = pretrain_config(p, seed)
    ckpt = results.checkpoint_dir("qk", {**pc.stored(), "precision": p.precision})
    tok = mlm.tokenizer()
    if train and not mlm.weights_path(ckpt, step).exists():
        history, _, _ = pretrain_weights(p, seed, device=device)
        again = {int(k): float(v) for k, v in history.get("eval_loss", {}).items()}
        off = {s: (evals[s], again.get(s)) for s in evals if again.get(s) is None or abs(again[s] - evals[s]) > 0.02}
        if off:
            raise RuntimeError(f"the re-run pretraining of seed {seed} does not reproduce the committed held-out "
                               f"losses (step: committed, re-run): {off}")
    try:
        model = mlm.load_step(pc, ckpt, step, len(tok))
    except FileNotFoundError:
        raise FileNotFoundError(f"the weights of seed {seed} step {step} are not on this machine ({ckpt}); "
                                "make them with `python scripts/export_book_model.py --train`") from None
    out = models.book_model_dir(name)
    if out.exists():
        shutil.rmtree(out)
    model.save_pretrained(out)
    tok.save_pretrained(out)
    info = {"name": name, "what": traj["model"], "seed": seed, "step": step, "held_out_mlm_nats": evals.get(step),
            "unigram_nats": traj.get("unigram_nats"), "settings": pc.stored(), "precision": p.precision,
            "git_commit": runtime._git_commit(), "versions": runtime.package_versions()}
    (out / "BOOK_MODEL.json").write_text(json.dumps(info, indent=1))
    return out


def recipe_probes() -> list[dict]:
    """The committed recipe probes of the book model (`results/qk/probes/*.json`, written by
    `scripts/qk_recipe_probe.py`): one seed each under another learning rate, batch or corpus weighting,
    with the held-out MLM loss at its checkpoints. Each: the settings, `tokens_seen`, `eval_loss`
    ({step: nats}), `unigram_nats`, the command and wall time. Empty when none are committed."""
    import json

    folder = runtime.REPO_ROOT / "results" / "qk" / "probes"
    out = []
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        rec = json.loads(path.read_text())
        out.append({**rec["results"], "command": rec["provenance"]["command"],
                    "wall_time_s": rec["provenance"]["wall_time_s"]})
    return out


def run(p: Params) -> Result:
    """Every seed's trajectory (read back from the committed results when the settings match) and
    the chapter's reading of them."""
    runtime.seed_everything(p.seed)           # before any GEMM on the device (CUBLAS_WORKSPACE_CONFIG)
    dev = runtime.choose_device(p.device)
    seeds = runtime.run_seeds(p.seed, p.seeds)
    runs, hits = {}, []
    for s in seeds:
        runs[str(s)], hit = run_seed(p, s, device=dev)
        hits.append(hit)
    steps = list(p.steps)
    centred: dict[str, dict] = {}
    if p.ablation and p.source == "pretrain" and not p.centre:
        q = p.with_(centre=True, ablation=False)
        for s in seeds:
            centred[str(s)], hit = run_seed(q, s, device=dev)
            hits.append(hit)
    comparison = {**compare_runs(runs, steps, p.threshold), **union_reading(runs[str(seeds[0])])}
    what = ("MultiBERT (BERT-base)" if p.source == "multiberts" else
            f"our {p.layers}-layer, {p.d_model}-wide MLM BERT")
    ends, missing, end_hits = end_state_runs(p, device=dev)
    return Result(source=p.source, what=what, steps=steps, seeds=seeds, shown=pick_steps(steps),
                  n_samples=p.n_samples, batch_size=p.batch_size, seq_len=p.seq_len, d_k=p.d_k,
                  threshold=p.threshold, max_length=p.max_length, n_display=p.n_display, runs=runs,
                  comparison=comparison, from_cache=all(hits + end_hits),
                  ablation=centred, end_state=ends, end_state_missing=missing,
                  ablation_summary=ablation_summary(runs, centred, steps) if centred else {},
                  probes=recipe_probes() if p.source == "pretrain" else [], scale=p.scale)


__all__ = ["Params", "Result", "run", "runs", "run_seed", "run_name", "export_model", "trajectory", "compare_runs",
           "union_reading", "recipe_probes", "measure_end_state", "end_state_runs", "end_state_name",
           "END_STATE_MODELS",
           "ablation_summary", "later_layer_entropy", "pretrain_config",
           "ANALYSIS_VERSION", "MULTIBERT_STEPS", "LONG_PRETRAINING", "TARGET_BELOW_UNIGRAM", "ALMOST_ALL"]
