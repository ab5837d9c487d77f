"""The queries-and-keys chapter's typed records: one seed's trajectory (`Trajectory`, plain or centred), the
reading of all seeds (`Comparison`, from `compute.compare_runs` and `compute.union_reading`), the centring
ablation (`Ablation`, from `compute.ablation_summary`), one released model's end state (`EndState`) and one
recipe probe (`Probe`). Each is read from the dict a results file stores (`StoredRecord.of`, the converter: committed
results keep their layout and their cache keys) and written back in that layout (`StoredRecord.to_json`); a stored
key reads as it did from the dict (`record["cos"]`). The reading threshold a record needs is given by the
`Result` that holds it and never stored."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, TypedDict

import numpy as np

from ...core.qk import mean_abs_cos_random
from ...core.stats import Interval, t_interval
from ...machinery.results import StoredRecord, Unread

#: what `EndState.heads` reads of every head, as absolute values
HEAD_MEASURES = ("cos", "dot", "mean_share", "drift_share", "q_norm", "k_norm")

#: per checkpoint step, layer and head: (S, layers, heads)
PerHead = list[list[list[float]]]
#: per checkpoint step and layer: (S, layers)
PerLayer = list[list[float]]
#: per layer and head: (layers, heads)
Heads = list[list[float]]


class Means(TypedDict):
    """The mean query's and the mean key's coordinates on the first two directions of one SVD basis (`core.qk`),
    (S, layers, heads, 2)."""

    q: list[PerHead]
    k: list[PerHead]


class Shown(TypedDict):
    """One example head's display tokens on one SVD basis: queries and keys, (display steps, tokens, 2)."""

    q: list[list[list[float]]]
    k: list[list[list[float]]]


class Example(TypedDict):
    """One example head (`core.qk.analyse`): where it is, its final cos(Q̄, K̄), the steps shown and its display
    tokens per SVD basis ("union", "K", "Q")."""

    layer: int
    head: int
    cos_final: float
    steps: list[int]
    union: Shown
    K: Shown
    Q: Shown


class Alignment(TypedDict):
    """`core.qk.alignment_summary`: per step the heads common, opposite and unaligned, the final cos (layers,
    heads), each head's onset (None: never aligned) and the threshold."""

    common: list[int]
    opposite: list[int]
    unaligned: list[int]
    final_cos: Heads
    onset: list[list[int | None]]
    threshold: float


class OtherMean(TypedDict):
    """App. C on one one-sided SVD: the heads whose other mean moves out along its first direction, and the
    mean |coordinate| at the first and the last step."""

    moved: int
    heads: int
    first: float
    final: float


class SeedReading(TypedDict):
    """The timing claims on one seed (`compute.compare_runs`)."""

    seed: int
    n_common: int
    n_opposite: int
    median_onset: dict[str, int | None]                 # ["common" | "opposite"]
    abs_cos_final: float
    entropy_first: float
    entropy_final: float
    entropy_lowest: float
    entropy_lowest_step: int
    entropy_rebound_layers: list[int]
    eval_final: float | None


class Variant(TypedDict):
    """One variant of the centring ablation over its seeds (`compute.ablation_summary`): per seed and step the
    held-out loss, entropy, |cos| and ‖K̄‖ of layers 1..; their summaries; per layer at the last step."""

    eval: list[list[float]]
    entropy: list[list[float]]
    abs_cos: list[list[float]]
    k_norm_later: list[list[float]]
    eval_final: float
    eval_best: float
    entropy_first: float
    entropy_lowest: float
    entropy_final: float
    entropy_drop: float
    abs_cos_final: float
    entropy_final_layer: list[float]
    abs_cos_final_layer: list[float]
    abs_dot_final_layer: list[float]
    q_norm_final_layer: list[float]
    k_norm_final_layer: list[float]


class LaterVariant(TypedDict):
    """One variant's attention entropy over layers 1.. (`compute.later_layer_entropy`): per seed at the first and
    last step and its drop, their means, and per later layer at the last step."""

    first: list[float]
    final: list[float]
    drop: list[float]
    first_mean: float
    final_mean: float
    final_layer: list[float]


class Later(TypedDict):
    """`compute.later_layer_entropy`: the later layers, the seeds, each variant, and centred − plain per seed (the
    drop, the final entropy, and per later layer the final entropy)."""

    layers: list[int]
    seeds: list[int]
    plain: LaterVariant
    centred: LaterVariant
    diff_drop: list[float]
    diff_final: list[float]
    layer_diff_final: list[list[float]]


class HeadMeasures(TypedDict):
    """`core.qk.end_state` of one model: per layer and head (layers, heads)."""

    cos: Heads
    dot: Heads
    q_norm: Heads
    k_norm: Heads
    mean_share: Heads
    drift_share: Heads


@dataclass(frozen=True)
class Trajectory(StoredRecord):
    """One seed's trajectory (`compute.trajectory`): per checkpoint step (S) and layer, per head where it has
    one, `cos`, `dot`, `q_norm`, `k_norm` of the mean query and key, `cos_concat` (a layer's heads
    concatenated), `entropy` and `entropy_layer` (attention rows); `means` and `sv1_share` per SVD basis
    (union, K, Q); `display`, the two example heads; `summary` (`core.qk.alignment_summary`); the pretraining
    history (`train_loss` per step, `eval_loss` {step: nats} at the checkpoints, `unigram_nats`,
    `train_tokens_available`) and its timings."""

    steps: list[int] = field(default_factory=list)         # the checkpoint steps (S)
    cos: PerHead = field(default_factory=list)
    dot: PerHead = field(default_factory=list)
    q_norm: PerHead = field(default_factory=list)          # ‖Q̄‖
    k_norm: PerHead = field(default_factory=list)          # ‖K̄‖
    cos_concat: PerLayer = field(default_factory=list)
    entropy: PerHead = field(default_factory=list)
    entropy_layer: PerLayer = field(default_factory=list)
    means: dict[str, Means] = field(default_factory=dict)  # [basis]
    sv1_share: dict[str, Heads] = field(default_factory=dict)  # [basis]
    tokens: int = 0
    display: dict[str, Example] = field(default_factory=dict)  # ["similar" | "opposite"]
    summary: Alignment = field(default_factory=dict)
    model: str = ""
    seed: int | None = None
    train_loss: list[float] = field(default_factory=list)  # per training step
    eval_loss: dict[str, float] = field(default_factory=dict)  # [str(step)]: nats at the checkpoints
    pretrain_wall_time_s: float | None = None
    unigram_nats: float | None = None
    train_tokens_available: int | None = None
    analysis_wall_time_s: float | None = None
    other: Unread = field(default_factory=dict)
    layout: tuple[str, ...] = field(default=(), compare=False, repr=False)

    def array(self, name: str) -> np.ndarray:
        """A per-step measure (cos, dot, entropy_layer, cos_concat, …) as a float array (S, …)."""
        return np.asarray(getattr(self, name), dtype=float)

    def eval_at(self, step: int) -> float:
        """The held-out MLM loss at checkpoint `step` (NaN where none was recorded)."""
        return float(self.eval_loss.get(str(step), np.nan))

    def example(self, key: str) -> Example:
        """The example head `key` ("similar": the largest final cos(Q̄, K̄); "opposite": the smallest): its layer,
        head, final cos and display tokens per SVD basis."""
        return self.display[key]

    def pretraining_row(self, first: int, last: int) -> dict:
        """Training loss early and late, held-out MLM loss at steps `first` and `last`, timings."""
        tl = np.asarray(self.train_loss, dtype=float)
        wall = self.pretrain_wall_time_s
        return {"seed": self.seed, "train_first": float(tl[:20].mean()) if tl.size else float("nan"),
                "train_last": float(tl[-50:].mean()) if tl.size else float("nan"),
                "eval_first": self.eval_at(first), "eval_final": self.eval_at(last),
                "pretrain_s": float(wall) if wall is not None else float("nan"),
                "steps_per_s": len(tl) / wall if wall else float("nan"),
                "analysis_s": float(self.analysis_wall_time_s)}


@dataclass(frozen=True)
class Comparison(StoredRecord):
    """The reading of every seed (`compute.compare_runs`, extended with the first seed's `union_reading`): head
    counts over all seeds (`n_common`, `n_opposite`, per layer), the mean |cos(Q̄, K̄)| at the first and last
    step, the onsets, |Q̄·K̄| and its growth, per layer the attention entropy at the first and last step and its
    lowest point, the concatenated-head cosine per seed, `other_mean` (App. C), `per_seed` (the timing claims
    seed by seed) and the common SVD's `union_*` counts."""

    threshold: float = 0.5
    n_heads: int = 0                                       # over all seeds and layers
    heads_per_layer: int = 0                               # over all seeds
    abs_cos_first: float = 0.0
    abs_cos_final: float = 0.0
    n_common: int = 0
    n_opposite: int = 0
    common_per_layer: list[int] = field(default_factory=list)   # (layers,), over all seeds
    opposite_per_layer: list[int] = field(default_factory=list)  # (layers,), over all seeds
    mean_final_cos_per_layer: list[float] = field(default_factory=list)  # (layers,)
    common_layers: list[int] = field(default_factory=list)      # more common than opposite heads
    opposite_layers: list[int] = field(default_factory=list)    # more opposite than common heads
    onsets: dict[str, list[int]] = field(default_factory=dict)  # ["common" | "opposite"]: [step, …]
    median_onset: dict[str, int | None] = field(default_factory=dict)  # ["common" | "opposite"]: step or None
    abs_dot_first: float = 0.0
    abs_dot_final: float = 0.0
    abs_dot_growth: float = 0.0
    entropy_first: list[float] = field(default_factory=list)    # (layers,), mean over seeds and heads
    entropy_final: list[float] = field(default_factory=list)    # (layers,)
    entropy_lowest: list[float] = field(default_factory=list)   # (layers,)
    entropy_lowest_step: list[int] = field(default_factory=list)  # (layers,)
    entropy_falls: int = 0
    entropy_rebound_layers: list[int] = field(default_factory=list)  # layers that flatten again by the end
    concat_final: list[list[float]] = field(default_factory=list)  # (seeds, layers)
    concat_spread: float = 0.0
    concat_same_sign_layers: int = 0
    other_mean: dict[str, OtherMean] = field(default_factory=dict)  # ["K" | "Q"]: on a one-sided SVD
    per_seed: list[SeedReading] = field(default_factory=list)
    union_share_mean: float = float("nan")
    union_share_min: float = float("nan")
    union_share_max: float = float("nan")
    union_grow: int = 0
    union_heads: int = 0
    union_same_sign: int = 0
    union_opposite_sign: int = 0
    other: Unread = field(default_factory=dict)
    layout: tuple[str, ...] = field(default=(), compare=False, repr=False)

    def entropy_row(self, layer: int) -> dict:
        """Layer `layer`'s attention entropy, mean over seeds: at the first and last step, its lowest point and
        when."""
        return {"entropy_first": float(self.entropy_first[layer]), "entropy_final": float(self.entropy_final[layer]),
                "entropy_lowest": float(self.entropy_lowest[layer]),
                "entropy_lowest_step": int(self.entropy_lowest_step[layer])}


@dataclass(frozen=True)
class Ablation(StoredRecord):
    """Plain against centred pretraining (`compute.ablation_summary`): per variant (`plain`, `centred`) the held-out
    loss, entropy and |cos| per seed and step and their summaries, and per layer at the last step; the seed-paired
    differences centred − plain (`diff_eval_final`, `diff_entropy_drop`, `diff_abs_cos_final`); `later`: the
    entropy comparison over layers 1.. only, where centring acts (`compute.later_layer_entropy`)."""

    steps: list[int] = field(default_factory=list)
    seeds: list[str] = field(default_factory=list)
    plain: Variant = field(default_factory=dict)           # the plain blocks' summary
    centred: Variant = field(default_factory=dict)         # the centred blocks' summary
    diff_eval_final: list[float] = field(default_factory=list)    # one per seed, centred − plain
    diff_entropy_drop: list[float] = field(default_factory=list)  # one per seed, centred − plain
    diff_abs_cos_final: list[float] = field(default_factory=list)  # one per seed, centred − plain
    unigram_nats: float | None = None
    later: Later = field(default_factory=dict)
    other: Unread = field(default_factory=dict)
    layout: tuple[str, ...] = field(default=(), compare=False, repr=False)

    def variant(self, name: str) -> Variant:
        """The summary of one variant, "plain" or "centred"."""
        return self.plain if name == "plain" else self.centred

    def interval(self, name: str) -> Interval:
        """The t-interval over seeds of a list of seed-paired differences, centred − plain: "diff_eval_final",
        "diff_entropy_drop", "diff_abs_cos_final"."""
        return t_interval(getattr(self, name))

    def later_interval(self, name: str) -> Interval:
        """The t-interval over seeds of the attention entropy in layers 1.. (`later`): "diff_drop", "diff_final"
        (centred − plain), "plain_drop", "centred_drop" (first − last step)."""
        if name in ("plain_drop", "centred_drop"):
            return t_interval(self.later[name.split("_")[0]]["drop"])
        return t_interval(self.later[name])

    def later_layer_rows(self) -> list[dict]:
        """Per layer from 1 (where centring acts): final attention entropy, plain and centred (mean over seeds),
        and centred − plain seed by seed with its t-interval."""
        later = self.later
        return [{"layer": li, "plain": float(self.plain["entropy_final_layer"][li]),
                 "centred": float(self.centred["entropy_final_layer"][li]), "diff": t_interval(d)}
                for li, d in zip(later["layers"], later["layer_diff_final"], strict=True)]

    def late_loss_change(self) -> dict:
        """The held-out loss change over the last checkpoint interval (mean over seeds, last minus the one
        before) of each variant: is either still learning at the end?"""
        return {"from": self.steps[-2], "to": self.steps[-1],
                **{name: float(np.mean(np.asarray(self.variant(name)["eval"], dtype=float)[:, -1]
                                       - np.asarray(self.variant(name)["eval"], dtype=float)[:, -2]))
                   for name in ("plain", "centred")}}

    def later_layers_final(self, name: str, measure: str) -> float:
        """A variant's `measure` ("q_norm", "k_norm", "abs_dot", …) at the last step, mean over layers 1..."""
        return float(np.mean(self.variant(name)[f"{measure}_final_layer"][1:]))


@dataclass(frozen=True)
class EndState(StoredRecord):
    """One released model's end state (`compute.measure_end_state`): its `name`, the `data` it read
    (`n_sequences` of at most `max_length` tokens), `d_k`, and `trained` and `twin` (its untrained twin): per
    layer and head the cos, dot, norms and shares of `core.qk.end_state`; a rotary model (`rotary`) also before the
    rotation (`trained_pre_rotary`, `twin_pre_rotary`)."""

    name: str = ""
    data: str = ""
    n_sequences: int = 0
    max_length: int = 0
    trained_description: str = ""
    trained: HeadMeasures = field(default_factory=dict)
    trained_pre_rotary: HeadMeasures | None = None
    tokens: int = 0
    d_k: int = 0
    rotary: bool = False
    twin_description: str = ""
    twin: HeadMeasures = field(default_factory=dict)
    twin_pre_rotary: HeadMeasures | None = None
    other: Unread = field(default_factory=dict)
    layout: tuple[str, ...] = field(default=(), compare=False, repr=False)

    def heads(self, kind: str = "trained", key: str = "qk") -> dict[str, np.ndarray] | None:
        """`kind` ("trained" or "twin") where `key` says ("qk"; "qk_pre_rotary": a rotary model before the
        rotation, None for another model): |cos|, |dot|, mean_share, drift_share, q_norm, k_norm as (layers,
        heads) arrays."""
        if key != "qk" and not self.rotary:
            return None
        r = getattr(self, kind if key == "qk" else f"{kind}_pre_rotary")
        return {k: np.abs(np.asarray(r[k], dtype=float)) for k in HEAD_MEASURES}

    def row(self, threshold: float, rng: np.random.Generator) -> dict:
        """d_k, layers, heads, chance |cos|; trained and twin: mean |cos(Q̄, K̄)| over heads (percentile bootstrap
        over heads, drawn from `rng`), aligned heads (|cos| ≥ `threshold`; common, opposite), median |Q̄·K̄|,
        median share of the score carried by the mean and median share of what the softmax sees carried by the
        mean query."""
        trained = self.heads("trained")
        row: dict[str, Any] = {"model": self.name, "d_k": self.d_k, "layers": trained["cos"].shape[0],
                               "heads": trained["cos"].shape[1], "chance": mean_abs_cos_random(self.d_k),
                               "tokens": self.tokens, "data": self.data, "rotary": bool(self.rotary)}
        for kind in ("trained", "twin"):
            h = self.heads(kind)
            signed = np.asarray(getattr(self, kind)["cos"], dtype=float).ravel()
            c = h["cos"].ravel()
            boot = c[rng.integers(0, c.size, (4000, c.size))].mean(1)
            row[kind] = {"abs_cos": Interval.from_draws(boot, estimate=float(c.mean())),
                         "aligned": int((c >= threshold).sum()),
                         "common": int((signed >= threshold).sum()),
                         "opposite": int((signed <= -threshold).sum()),
                         "abs_dot": float(np.median(h["dot"])), "mean_share": float(np.median(h["mean_share"])),
                         "drift_share": float(np.median(h["drift_share"]))}
        return row

    def layer_rows(self, threshold: float, key: str = "qk") -> list[dict]:
        """Per layer: mean over heads of |cos(Q̄, K̄)|, |Q̄·K̄|, the mean's share of the score and the mean query's
        share of what the softmax sees, trained and twin; heads aligned (trained, |cos| ≥ `threshold`)."""
        tr, tw = self.heads("trained", key), self.heads("twin", key)
        return [{"layer": li, **{f"{kind}_{k}": float(h[k][li].mean()) for kind, h in (("trained", tr), ("twin", tw))
                                 for k in ("cos", "dot", "mean_share", "drift_share")},
                 "aligned": int((tr["cos"][li] >= threshold).sum()), "heads": int(tr["cos"].shape[1])}
                for li in range(tr["cos"].shape[0])]


@dataclass(frozen=True)
class Probe(StoredRecord):
    """One committed recipe probe (`compute.recipe_probes`): its `name`, learning rate, batch, dropout, corpus
    weighting (`wiki_weighted`), `steps` and `tokens_seen` as planned, the held-out MLM loss at its checkpoints
    (`eval_loss`, {step: nats}), the unigram baseline, the command and wall time."""

    name: str = ""
    lr: float = 0.0
    batch: int = 0
    steps: int = 0
    dropout: float | None = None
    wiki_weighted: bool = False
    tokens_seen: int = 0
    unigram_nats: float = float("nan")
    eval_loss: dict[str, float] = field(default_factory=dict)  # [str(step)]: nats
    other: Unread = field(default_factory=dict)
    layout: tuple[str, ...] = field(default=(), compare=False, repr=False)

    @property
    def last_step(self) -> str:
        """The last checkpoint step it reached (as stored: a string)."""
        return max(self.eval_loss, key=int)

    def row(self) -> dict:
        """Name, learning rate, batch, corpus weighting, dropout, steps, tokens seen (M), held-out MLM loss at the
        last checkpoint and how far below the unigram predictor."""
        last = self.last_step
        return {"probe": self.name, "lr": float(self.lr), "batch": int(self.batch),
                "wiki_weighted": bool(self.wiki_weighted), "dropout": float(self.dropout or 0),
                "steps": int(last), "mtokens": int(last) * self.tokens_seen / self.steps / 1e6,
                "eval_final": float(self.eval_loss[last]),
                "below_unigram": float(self.unigram_nats) - float(self.eval_loss[last])}
