"""The GLUE chapter's typed records: one fine-tuning run (`Run`: its settings, final scores, per-epoch curves and the
fine-tuned model's spectra), a list of them with one set of accessors (`Runs`), one hidden state's spectrum
(`LayerSpectrum`) and one row of the selection table (`Choice`). A run is read from the history the results cache
stores (`Run.from_history`) or from a saved Result (`Run.read`), and written back field for field
(`machinery.results.jsonable`); the committed runs keep their files and cache keys."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, NotRequired, TypedDict

import numpy as np

from .params import primary_metric


@dataclass(frozen=True)
class LayerSpectrum:
    """One hidden state's spectrum on a task's validation examples (`hf.glue.layer_spectra`, as stored): its
    `layer` and `label`, the median and skewness of its normalised singular values, token and [CLS] uniformity,
    EV₁, and the values' CDF as `quantiles` (equally spaced levels 0 … 1)."""

    layer: int = 0
    median: float = float("nan")
    skewness: float = float("nan")
    token_uni: float = float("nan")
    cls_uni: float = float("nan")
    ev1: float = float("nan")
    label: str = ""
    quantiles: tuple[float, ...] = ()

    @classmethod
    def of(cls, d: LayerSpectrum | dict) -> LayerSpectrum:
        """The record of a stored dict (its keys are this record's fields, in this order)."""
        return d if isinstance(d, cls) else cls(**{**d, "quantiles": tuple(d.get("quantiles", ()))})


def spectra_of(parts: dict) -> dict[str, tuple[LayerSpectrum, ...]]:
    """{part: [layer dict, …]} as stored (`"layers"`; a SoftDecay run's `"softdecay"`: before and after the
    transform) → {part: (LayerSpectrum, …)}."""
    return {k: tuple(LayerSpectrum.of(x) for x in rows) for k, rows in parts.items()}


class Choice(TypedDict):
    """One row of the selection table (`compute._plan_task`): a candidate `value` of a `choice` (the baseline's
    learning rate, SoftDecay's initial α) for (model, task), its `score` on `metric`, and whether it was `chosen`;
    `holdout`: the held-out share of the training split it was scored on (`compute.holdout_selection`)."""

    model: str
    task: str
    choice: str
    value: float
    metric: str
    score: float
    chosen: bool
    holdout: NotRequired[float]


@dataclass(frozen=True)
class Run:
    """One fine-tuning run: `variant` is the label (baseline, softdecay, `expdecay (<reading>)`), `alpha` the
    initial α (None but for SoftDecay), `stage` selection or comparison, `from_cache` whether it came from the
    committed results; then what it measured: `final` validation scores, per epoch `val_acc`, `val_loss`,
    `train_loss`, the learned α (`alpha_path`) and `epoch_seconds`, and `spectra` (`hf.glue.layer_spectra` of
    the fine-tuned model, with the SoftDecay transform's before/after for SoftDecay runs)."""

    model: str
    task: str
    variant: str
    alpha: float | None
    lr: float
    seed: int
    stage: str = "comparison"
    reading: str | None = None
    from_cache: bool = False
    #: final validation score per metric ("acc", "f1", "mcc", "loss")
    final: dict[str, float] = field(default_factory=dict)
    epochs: tuple[int, ...] = ()
    #: per epoch; None where the task has no accuracy (CoLA: MCC)
    val_acc: tuple[float | None, ...] = ()
    val_loss: tuple[float, ...] = ()
    train_loss: tuple[float, ...] = ()
    #: the learned α after each epoch; None but for SoftDecay
    alpha_path: tuple[float | None, ...] = ()
    epoch_seconds: tuple[float, ...] = ()
    train_examples: int | None = None
    eval_examples: int | None = None
    steps_per_epoch: int | None = None
    #: "layers": the fine-tuned model's spectrum per hidden state; a SoftDecay run's "softdecay": (before, after)
    spectra: dict[str, tuple[LayerSpectrum, ...]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        """The converter: lists (a history as stored, a saved Result) as tuples, spectra dicts as records."""
        for name in ("epochs", "val_acc", "val_loss", "train_loss", "alpha_path", "epoch_seconds"):
            object.__setattr__(self, name, tuple(getattr(self, name)))
        object.__setattr__(self, "spectra", spectra_of(self.spectra))

    @classmethod
    def from_history(cls, h: dict, **settings: Any) -> Run:
        """The record of a run's `settings` and its history as `train.glue.finetune` returns (and the results
        cache stores) it, under its unchanged cache key."""
        evals = h.get("eval", [])
        return cls(**settings, final=h["final"], epochs=h.get("epoch", ()),
                   val_acc=[e.get("acc") for e in evals], val_loss=[e.get("loss") for e in evals],
                   train_loss=h.get("train_loss", ()), alpha_path=h.get("alpha", ()),
                   epoch_seconds=h.get("epoch_seconds", ()), train_examples=h.get("train_examples"),
                   eval_examples=h.get("eval_examples"), steps_per_epoch=h.get("steps_per_epoch"),
                   spectra=h.get("spectra", {}))

    @classmethod
    def read(cls, d: dict) -> Run:
        """A record from its JSON: this class's fields, or the earlier shapes a saved Result holds (a grid run's
        settings beside its `history`; the larger encoder's flat record)."""
        if "history" in d:
            return cls.from_history(d["history"], **{k: v for k, v in d.items() if k != "history"})
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})

    def score(self, metric: str | None = None) -> float:
        """The final validation score of `metric` (default the task's first)."""
        return self.final[metric or primary_metric(self.task)]

    def value_at(self, level: float = 0.8, layer: int = -1) -> float:
        """The normalised singular value at which `layer`'s CDF reaches `level` (Fig. 8's reading)."""
        return quantile_at(self.spectra["layers"][layer].quantiles, level)


class Runs(list):
    """Fine-tuning runs (`Run`) with one set of accessors."""

    def find(self, **match: Any) -> Run | None:
        """The first run whose fields equal `match`, or None."""
        return next((r for r in self if all(getattr(r, k) == v for k, v in match.items())), None)

    def where(self, **match: Any) -> Runs:
        """The runs whose fields equal `match`, in seed order."""
        return Runs(sorted((r for r in self if all(getattr(r, k) == v for k, v in match.items())),
                           key=lambda r: r.seed))

    def paired_seeds(self, variant: str, base: str = "baseline") -> list[int]:
        """The seeds on which both `variant` and `base` ran, in order."""
        return sorted({r.seed for r in self.where(variant=variant)} & {r.seed for r in self.where(variant=base)})

    def differences(self, variant: str, metric: str | None = None, base: str = "baseline") -> list[float]:
        """Per seed both ran: `variant` − `base` final validation score (points), in seed order."""
        return [self.find(variant=variant, seed=s).score(metric) - self.find(variant=base, seed=s).score(metric)
                for s in self.paired_seeds(variant, base)]


def quantile_at(quantiles: list[float], level: float) -> float:
    """The `level` quantile of a CDF stored as equally spaced quantiles (level 0 .. 1), interpolated."""
    q = np.asarray(quantiles, dtype=float)
    return float(np.interp(level, np.linspace(0, 1, q.size), q))
