"""The anisotropy chapter's typed records: one measured model, untrained twin or token-type-zeroed twin (`Model`),
one spectrum run of the centred cloud (`Shape`), the bootstraps and the jackknife that read a test over inputs
(`CnnBootstrap`, `SpeechBootstrap`, `CentredJackknife`), the isotropic-Gaussian baseline at one width
(`Gaussian`), a planted cloud (`Cloud`), SmolLM2's final norm (`FinalNorm`), the byte-level MLM's training
(`ByteTraining`); the paper's drift test across layers is `core.stats.LayerTest` (`Model.test`). Each stored
record is read from the dict a results file stores (`Record.of`, the converter: committed results keep their
layout and their cache keys) and written back in that layout (`Record.to_json`); the one setting a record needs
to read itself (`n_pairs`, the sampled pairs per layer) is given by the `Result` that holds it and never stored."""

from __future__ import annotations

import functools
import types
import typing
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from ...core import anisotropy as A
from ...core.stats import Interval, LayerTest, jackknife_from_loo, layer_test, normal_interval
from ...machinery.results import StoredRecord
from .params import CHARACTER_LEVEL, IDENTITY_TOL


def _read_as(hint: Any, value: Any) -> Any:
    """A stored (JSON) `value` read into the type `hint`: a record from its dict, a tuple from a list (each item
    read), a dict's keys (an int key from its JSON string) and values read; None and anything else as it is."""
    if value is None:
        return None
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (types.UnionType, typing.Union):
        return _read_as(next(a for a in args if a is not type(None)), value)
    if isinstance(hint, type) and issubclass(hint, StoredRecord):
        return hint.of(value)
    if origin is tuple:
        return tuple(_read_as(args[0], v) for v in value)
    if origin is dict:
        key, item = args
        return {(int(k) if key is int else k): _read_as(item, v) for k, v in value.items()}
    return value


def _write_back(value: Any) -> Any:
    """`_read_as` undone: a record as its stored dict, a tuple as a list (JSON writes an int key as its string)."""
    if isinstance(value, StoredRecord):
        return value.to_json()
    if isinstance(value, tuple | list):
        return [_write_back(v) for v in value]
    return {k: _write_back(v) for k, v in value.items()} if isinstance(value, dict) else value


@dataclass(frozen=True)
class Record(StoredRecord):
    """`machinery.results.StoredRecord` with typed fields, the base of the chapter's records: each field is read from
    its stored value by its annotation (`tuple[float, ...]` from a list, a record from its dict, `dict[int, float]`
    from JSON's string keys) and written back as stored (`to_json`)."""

    #: the stored keys no field reads, kept as they were stored so a record writes back the layout it was read from
    #: (a measurement's extras: a spectrum run's columns on a model record, a CNN's vectors per layer): open by
    #: design, hence untyped
    other: dict[str, Any] = field(default_factory=dict, kw_only=True)
    layout: tuple[str, ...] = field(default=(), compare=False, repr=False, kw_only=True)

    @classmethod
    def of(cls, data: Any, **context: Any):
        """The record of a stored dict, each field read by its annotation (`_read_as`: JSON's string keys of a
        `dict[int, …]` as ints, which `machinery.results.read_as` leaves as strings)."""
        if isinstance(data, cls):
            return data
        stored = _hints(cls)
        names = cls._stored()
        kw = {name: _read_as(stored[name], data[name]) for name in names if name in data}
        return cls(**context, **kw, other={k: v for k, v in data.items() if k not in names}, layout=tuple(data))

    def to_json(self) -> dict[str, Any]:
        """The stored layout: the keys it was read with, in their order (a record made here: every field)."""
        out = {name: _write_back(getattr(self, name)) for name in self._stored()} | self.other
        return {k: out[k] for k in self.layout} if self.layout else out


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def isotropic_line(d: int) -> float:
    """The 95th percentile of one isotropic pair's cosine at width d (the paper's Appendix B line, Fig. 18)."""
    return A.isotropic_cosine_quantile(0.95, int(d))


@dataclass(frozen=True)
class Correlation(Record):
    """The paper's test on one model as `compute.measure` stores it: Spearman's and Pearson's correlation across
    the layers between ‖x̄‖₂ and the average cosine, with their p-values (the asymptotic ones; `LayerTest` reads
    the exact permutation p)."""

    spearman_r: float = float("nan")
    spearman_p: float = float("nan")
    pearson_r: float = float("nan")
    pearson_p: float = float("nan")


@dataclass(frozen=True)
class Normalised(Record):
    """The same test with the normalised drift ‖x̄‖₂ / E‖x‖ (`normalised_*`), and how closely the identity
    avg cos ≈ (‖x̄‖₂ / E‖x‖)² holds: its largest gap over the layers, the share and the number of layers within
    `IDENTITY_TOL`, of `layers`."""

    normalised_spearman_r: float = float("nan")
    normalised_spearman_p: float = float("nan")
    normalised_pearson_r: float = float("nan")
    normalised_pearson_p: float = float("nan")
    identity_gap_max: float = float("nan")
    identity_within_tol: float = float("nan")
    identity_layers_within: int = 0
    layers: int = 0


@dataclass(frozen=True)
class Model(Record):
    """One measured model (`compute.measure`): pretrained, its untrained twin, or the twin with its token-type
    embedding zeroed. Its `label`, `modality`, `name`, `trained`, `description`, `data` (what it was measured on),
    and per layer (embeddings first) `cos_exact`, `cos_sampled` and its `cos_sampled_se` (over `n_pairs` pairs),
    `cos_centred` (mean removed, Biś et al. 2021) and its `cos_centred_se`, `mean_norm` (‖x̄‖₂), `avg_norm`
    (E‖x‖), `drift_ratio` (‖x̄‖₂ / E‖x‖), `dims`; `tokens` (vectors measured), `correlation` (Spearman and
    Pearson between ‖x̄‖₂ and the average cosine) and `normalised` (the same with the normalised drift, and how
    closely avg cos ≈ (‖x̄‖₂ / E‖x‖)² holds). A CNN also holds `map_cos_exact` and `map_drift_ratio` (whole
    flattened maps) and `vectors_per_layer`."""

    CONTEXT: ClassVar[tuple[str, ...]] = ("n_pairs",)

    n_pairs: int
    name: str = ""
    label: str = ""
    modality: str = ""
    trained: bool = True
    description: str = ""
    data: str = ""
    cos_exact: tuple[float, ...] = ()
    cos_sampled: tuple[float, ...] = ()
    cos_sampled_se: tuple[float, ...] = ()
    cos_centred: tuple[float, ...] = ()
    cos_centred_se: tuple[float, ...] = ()
    mean_norm: tuple[float, ...] = ()
    avg_norm: tuple[float, ...] = ()
    drift_ratio: tuple[float, ...] = ()
    dims: tuple[int, ...] = ()
    tokens: int = 0
    correlation: Correlation | None = None
    normalised: Normalised | None = None
    map_cos_exact: tuple[float, ...] | None = None
    map_drift_ratio: tuple[float, ...] | None = None
    #: (layers, inputs): each layer's all-pairs average cosine with one input left out (a jackknife's values);
    #: None for a run made before the accumulator kept its inputs' sums
    cos_exact_loo: tuple[tuple[float, ...], ...] | None = None
    inputs: int = 0

    @property
    def d(self) -> int:
        """The width of the last layer."""
        return int(self.dims[-1])

    @property
    def layers(self) -> int:
        """Layers measured, the embeddings included."""
        return len(self.cos_exact)

    @property
    def cos(self) -> np.ndarray:
        """The all-pairs average cosine per layer."""
        return np.asarray(self.cos_exact, float)

    @property
    def flattened(self) -> bool:
        """A CNN read as whole flattened maps too."""
        return self.map_cos_exact is not None

    @property
    def kind(self) -> str:
        """"subword" (token-level text), "character" (byte- or character-level text), "speech", "vision" or the
        modality."""
        if self.modality == "bytes" or self.name in CHARACTER_LEVEL:
            return "character"
        return {"text": "subword", "audio": "speech"}.get(self.modality, self.modality)

    @property
    def clustered(self) -> bool:
        """True when the run kept its inputs' sums: a level's interval is then a jackknife over the inputs."""
        return self.cos_exact_loo is not None

    @property
    def unit(self) -> str:
        """What a level's interval is taken over: the inputs (sequences, recordings, images), or — for a run
        without them — the sampled token pairs, which treats the tokens of one input as independent."""
        return "inputs" if self.clustered else "token pairs"

    def layer_interval(self, layer: int) -> Interval:
        """A layer's all-pairs average cosine with its jackknife interval over the inputs (leave one input's
        tokens out); for a run without the inputs' sums, the sampled pairs' mean ±1.96 standard errors."""
        if self.clustered:
            return jackknife_from_loo(float(self.cos_exact[layer]), self.cos_exact_loo[layer])
        return normal_interval(self.cos_sampled[layer], self.cos_sampled_se[layer], self.n_pairs)

    def mean_interval(self) -> Interval:
        """The average cosine averaged over the layers, with its jackknife over the inputs (or the sampled
        pairs' ±1.96 SE for a run without the inputs' sums)."""
        if self.clustered:
            return jackknife_from_loo(float(np.mean(self.cos_exact)),
                                      np.mean(np.asarray(self.cos_exact_loo, float), axis=0))
        c, se = self.mean_over_layers()
        return normal_interval(c, se, self.n_pairs)

    def centred_pairs(self, layer: int) -> Interval:
        """A layer's mean-removed average cosine over its `n_pairs` sampled pairs, ±1.96 standard errors."""
        return normal_interval(self.cos_centred[layer], self.cos_centred_se[layer], self.n_pairs)

    def mean_over_layers(self) -> tuple[float, float]:
        """The average cosine averaged over the layers (sampled pairs) and its standard error."""
        c, se = np.asarray(self.cos_sampled, float), np.asarray(self.cos_sampled_se, float)
        return float(c.mean()), float(np.sqrt((se**2).sum()) / len(se))

    def single_pair_margin(self) -> Interval:
        """The average cosine over layers minus the 95th percentile of a *single* isotropic pair's cosine at the
        model's width (the paper's Fig. 18 reading), with `mean_interval`'s interval."""
        return self.mean_interval().shift(isotropic_line(self.d))

    def sampling_z(self) -> np.ndarray:
        """|sampled − exact| / standard error per layer."""
        return np.abs(np.subtract(self.cos_sampled, self.cos_exact)) / np.clip(self.cos_sampled_se, 1e-12, None)

    def above(self, line) -> int:
        """Layers whose average cosine exceeds `line(d)` at their width d."""
        return int(sum(c > line(d) for c, d in zip(self.cos_exact, self.dims, strict=True)))

    def effective_dims(self) -> np.ndarray:
        """Per layer, the effective dimension 1/E[cos²] of the centred cloud (`core.measures.
        cosine_effective_dim`), from the mean and standard error of the mean-removed cosines of the
        layer's `n_pairs` sampled pairs: E[cos²] = mean² + sd², sd = se·√n_pairs."""
        mean, se = np.asarray(self.cos_centred, float), np.asarray(self.cos_centred_se, float)
        return 1.0 / (mean**2 + se**2 * self.n_pairs)

    def test(self) -> LayerTest:
        """The paper's test across the layers: ‖x̄‖₂ against the all-pairs average cosine."""
        return layer_test(self.mean_norm, self.cos_exact)

    def normalised_test(self) -> LayerTest:
        """The same test with the normalised drift ‖x̄‖₂ / E‖x‖."""
        return layer_test(self.drift_ratio, self.cos_exact)

    def identity(self) -> tuple[int, int]:
        """(layers where avg cos ≈ (‖x̄‖₂ / E‖x‖)² within `IDENTITY_TOL`, layers); a CNN read as whole flattened
        maps: its maps' cosines and drift ratios."""
        if self.flattened:
            gap = np.abs(np.asarray(self.map_cos_exact) - np.square(self.map_drift_ratio))
            return int((gap < IDENTITY_TOL).sum()), int(gap.size)
        return self.normalised.identity_layers_within, self.normalised.layers

    def centred_row(self, twin: Model | None) -> dict[str, Any]:
        """Width d, the effective dimension of the centred cloud over layers (smallest, largest) and as a share of
        d, the isotropic Gaussian's band at that d, the largest |mean-removed average cosine|; the twin's range."""
        eff, iso = self.effective_dims(), isotropic_effective_dim(self.d, self.n_pairs)
        out = {"model": self.name, "d": self.d, "eff_min": float(eff.min()), "eff_max": float(eff.max()),
               "share_max": float((eff / np.asarray(self.dims, float)).max()), "iso_low": iso.low,
               "iso_high": iso.high, "centred_max": float(np.abs(self.cos_centred).max())}
        if twin is None:
            return out
        te = twin.effective_dims()
        return out | {"twin_min": float(te.min()), "twin_max": float(te.max())}

    def centred_reach(self, jack: CentredJackknife | None) -> dict[str, Any]:
        """The layer whose mean-removed average cosine reaches furthest toward the isotropic line (the reach: the
        larger |bound| of its interval over the line): the sampled pairs' reading (`layer`, `pairs`,
        `pairs_reach`), and with `jack` the jackknife over inputs (`jk_layer`, `jackknife`, `jk_reach`,
        `jk_pairs`: the pairs at that layer, `unit`, `inputs`); `line`: the line at the deciding layer."""
        line = np.array([isotropic_line(d) for d in self.dims])
        pairs = [self.centred_pairs(i) for i in range(len(line))]
        reach = [max(abs(iv.low), abs(iv.high)) / q for iv, q in zip(pairs, line, strict=True)]
        out = {"model": self.name, "d": self.d, "layer": int(np.argmax(reach)), "pairs": pairs[int(np.argmax(reach))],
               "pairs_reach": float(max(reach))}
        if jack is None:
            return out | {"line": float(line[out["layer"]])}
        jk = jack.intervals()
        jr = [max(abs(iv.low), abs(iv.high)) / q for iv, q in zip(jk, line, strict=True)]
        k = int(np.argmax(jr))
        return out | {"jk_layer": k, "jackknife": jk[k], "jk_reach": float(jr[k]), "jk_pairs": pairs[k],
                      "unit": jack.unit, "inputs": jack.inputs, "line": float(line[k])}

    def zeroed_row(self, pretrained: Model | None, twin: Model | None) -> dict[str, Any]:
        """This token-type-zeroed twin against the twin and the pretrained model: the average cosine at the
        embeddings of the twin and of this one, and the layers where the pretrained model lies below each."""
        out = {"model": self.name, "twin_emb": float(twin.cos[0]) if twin else float("nan"),
               "zeroed_emb": float(self.cos[0]), "zeroed_max": float(self.cos.max()), "layers": self.layers}
        if pretrained is None:
            return out
        return out | {"below_twin": int(np.sum(pretrained.cos < twin.cos)) if twin else 0,
                      "below_zeroed": int(np.sum(pretrained.cos < self.cos))}


@dataclass(frozen=True)
class Shape(Record):
    """The centred cloud's spectrum per layer on a subsample (`compute.measure_shapes`, `SHAPE_KEYS`): `cos_exact`,
    `dims`, `tokens`, `drift_ratio`, the participation ratio `pr` and an isotropic Gaussian's `pr_iso`, the top
    variance shares `top1`/`top3`/`top10`, the RMS cosine after removing the top k directions `rms_cos_k*`, the
    split-half cosine of the mean `mean_split_cos`, ‖x̄‖² over the top eigenvalue `drift_over_top`; and the
    model's `name`, `trained`, `label`."""

    cos_exact: tuple[float, ...] = ()
    dims: tuple[int, ...] = ()
    tokens: int = 0
    drift_ratio: tuple[float, ...] = ()
    pr: tuple[float, ...] = ()
    pr_iso: tuple[float, ...] = ()
    top1: tuple[float, ...] = ()
    top3: tuple[float, ...] = ()
    top10: tuple[float, ...] = ()
    rms_cos_k0: tuple[float, ...] = ()
    rms_cos_k1: tuple[float, ...] = ()
    rms_cos_k3: tuple[float, ...] = ()
    rms_cos_k10: tuple[float, ...] = ()
    mean_split_cos: tuple[float, ...] = ()
    drift_over_top: tuple[float, ...] = ()
    data: str = ""
    name: str = ""
    trained: bool = True
    label: str = ""

    @property
    def d(self) -> int:
        return int(self.dims[-1])

    def makeup(self) -> list[str]:
        """Per layer, what the anisotropy is made of (`core.anisotropy.anisotropy_makeup`)."""
        return [A.anisotropy_makeup(a, b, c) for a, b, c in zip(self.pr, self.pr_iso, self.mean_split_cos,
                                                                 strict=True)]

    def pr_share(self) -> np.ndarray:
        """Per layer, the participation ratio over an isotropic Gaussian's of the same n and d."""
        return np.asarray(self.pr, float) / np.asarray(self.pr_iso, float)

    def summary(self) -> dict[str, Any]:
        """The pretrained run's row of `Result.shape_rows`: the largest top-3 share, the smallest split-half cosine
        of the mean and ‖x̄‖² over the top eigenvalue, the largest RMS cosine after the top 10 directions over
        1/√d, and the layers in each `MAKEUP` class."""
        kinds = self.makeup()
        return {"top3_max": float(np.max(self.top3)), "split_min": float(np.min(self.mean_split_cos)),
                "drift_over_top_min": float(np.min(self.drift_over_top)),
                "rms10_ratio": float(np.max(np.asarray(self.rms_cos_k10) * np.sqrt(np.asarray(self.dims)))),
                "layers": len(kinds)} | {k: kinds.count(k) for k in A.MAKEUP}


def isotropic_effective_dim(d: int, n_pairs: int) -> Interval:
    """What `Model.effective_dims` gives for an isotropic Gaussian cloud of width d (E[cos²] = 1/d, and cos² has
    variance ≈ 2/d² per pair): d with its 95 % sampling band over `n_pairs` pairs."""
    half = 1.96 * np.sqrt(2.0 / n_pairs)
    return Interval(d, d / (1 + half), d / (1 - half), n_pairs, "normal")


def shape_row(m: Shape | None, t: Shape | None) -> dict[str, Any]:
    """A model's spectrum runs, pretrained `m` and twin `t` (either may be missing): width d, tokens, the
    participation ratio over layers (smallest, largest) of each against the isotropic Gaussian's, the pretrained
    run's `Shape.summary`, and the twin's smallest split-half cosine of the mean."""
    ref = m or t
    pr = {f"{tag}pr_{f.__name__}": float(f(r.pr)) if r else float("nan")
          for tag, r in (("", m), ("twin_", t)) for f in (np.min, np.max)}
    return ({"model": ref.name, "d": ref.d, "tokens": int(ref.tokens), "pr_iso": float(np.median(ref.pr_iso))}
            | pr | (m.summary() if m else {}) | ({"twin_split_min": float(np.min(t.mean_split_cos))} if t else {}))


@dataclass(frozen=True)
class CnnBootstrap(Record):
    """The CNN's flattened maps with a bootstrap over `images` (`compute.cnn_map_bootstrap`): per block `map_cos`
    and `map_mean_norm`, the bootstrap's `median_draws` (median over the block outputs) and `rho_draws`, the
    full-sample `rho`, and per layer `layer_low`/`layer_high`."""

    name: str = ""
    images: int = 0
    draws: int = 0
    map_cos: tuple[float, ...] = ()
    map_mean_norm: tuple[float, ...] = ()
    median_draws: tuple[float, ...] = ()
    rho_draws: tuple[float, ...] = ()
    rho: float = float("nan")
    layer_low: tuple[float, ...] = ()
    layer_high: tuple[float, ...] = ()

    def map_cosine(self) -> Interval:
        """The average cosine of whole flattened maps, median over the block outputs (the non-negative stem and
        head maps left out), with its bootstrap interval over images."""
        return Interval.from_draws(self.median_draws, estimate=float(np.median(self.map_cos[1:-1])))

    def test(self) -> LayerTest:
        """The drift test across the flattened maps' layers, with ρ's bootstrap over images."""
        return layer_test(self.map_mean_norm, self.map_cos).with_bootstrap(self.rho_draws, self.rho)


@dataclass(frozen=True)
class SpeechBootstrap(Record):
    """Whisper base's encoder with a bootstrap over `clips` (`compute.speech_drift_bootstrap`): per layer `cos` and
    `mean_norm`, the full-sample `rho` and `p`, and the bootstrap's `rho_draws`."""

    name: str = ""
    clips: int = 0
    frames: int = 0
    draws: int = 0
    cos: tuple[float, ...] = ()
    mean_norm: tuple[float, ...] = ()
    rho: float = float("nan")
    p: float = float("nan")
    rho_draws: tuple[float, ...] = ()

    def test(self) -> LayerTest:
        """The drift test across the encoder's layers, with ρ's bootstrap over recordings."""
        return layer_test(self.mean_norm, self.cos).with_bootstrap(self.rho_draws, self.rho)


@dataclass(frozen=True)
class CentredJackknife(Record):
    """A model's mean-removed average cosine per layer (`centred`) with its leave-one-out values over `inputs`
    (`leave_one_out`, one list per layer; `unit`: what an input is), from `compute.centred_jackknife`."""

    name: str = ""
    unit: str = ""
    inputs: int = 0
    vectors: int = 0
    dims: tuple[int, ...] = ()
    centred: tuple[float, ...] = ()
    leave_one_out: tuple[tuple[float, ...], ...] = ()
    raw: tuple[float, ...] = ()

    def layer_interval(self, layer: int) -> Interval:
        """A layer's mean-removed average cosine with its jackknife interval over the inputs (leave one input out)."""
        return jackknife_from_loo(self.centred[layer], self.leave_one_out[layer])

    def intervals(self) -> list[Interval]:
        """Per layer, `layer_interval`."""
        return [self.layer_interval(i) for i in range(len(self.centred))]


@dataclass(frozen=True)
class Gaussian(Record):
    """The cosine of isotropic Gaussians at width `d` (`compute.gaussian_baseline`): Monte Carlo mean and 95th
    percentile, the exact percentile, 1.645/√d, and a histogram (`hist_edges`, `hist_density`)."""

    d: int = 0
    mc_mean: float = float("nan")
    mc_q95: float = float("nan")
    exact_q95: float = float("nan")
    asymptotic_q95: float = float("nan")
    hist_edges: tuple[float, ...] = ()
    hist_density: tuple[float, ...] = ()


@dataclass(frozen=True)
class Cloud(Record):
    """A planted cloud's shape (`core.anisotropy.cloud_shape`): its average cosine `cos`, mean-removed
    `cos_centred`, width `d`, participation ratio `pr` against an isotropic Gaussian's `pr_iso`, `effective_dim`
    and `makeup`."""

    cos: float = float("nan")
    cos_centred: float = float("nan")
    d: int = 0
    pr: float = float("nan")
    pr_iso: float = float("nan")
    effective_dim: float = float("nan")
    makeup: str = ""


@dataclass(frozen=True)
class FinalNorm(Record):
    """SmolLM2's average cosine at its last point (`hf.anisotropy.final_norm_cosines`): the layer before
    (`previous`), before and after its final RMSNorm, what the model returns, on `tokens` tokens."""

    previous: float = float("nan")
    before: float = float("nan")
    after: float = float("nan")
    returned: float = float("nan")
    tokens: int = 0


@dataclass(frozen=True)
class ByteTraining(Record):
    """The byte-level MLM's training record (`compute.byte_mlm`): held-out MLM loss per checkpoint step
    (`eval_loss`, nats per byte, keyed by step as stored), the unigram baseline, steps and wall time."""

    eval_loss: dict[int, float] = field(default_factory=dict)
    unigram_loss: float = float("nan")
    steps: int = 0
    train_sequences: int = 0
    wall_time_s: float = 0.0
    final_train_loss: float = float("nan")

    def losses(self) -> list[tuple[int, float]]:
        """(step, held-out loss), in step order."""
        return sorted(((int(k), float(v)) for k, v in self.eval_loss.items()), key=lambda kv: kv[0])
