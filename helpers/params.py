"""Chapter parameters and the `ci` / `book` / `paper` scale presets.

Each chapter owns one frozen dataclass. Its first cell (tagged `parameters` for papermill) sets
`scale` and leaves every other knob at `None`; `resolve(chapter, scale, **knobs)` fills the
`None`s from the preset and validates names, types and values, failing with one message that
names the offending parameter. `scripts/rerun.py` runs the same validation before it starts
papermill, so a misspelt or impossible parameter fails at once.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar

SCALES = ("ci", "book", "paper")


class ParameterError(ValueError):
    """A chapter parameter is unknown, of the wrong type, or impossible."""


def _check_type(name: str, value: Any, annotation: Any) -> Any:
    """Check (and lightly coerce: int -> float, list -> tuple) one value against its annotation."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        errors = []
        for arg in typing.get_args(annotation):
            if arg is type(None):
                if value is None:
                    return None
                continue
            try:
                return _check_type(name, value, arg)
            except ParameterError as err:
                errors.append(str(err))
        raise ParameterError(errors[0] if errors else f"parameter {name!r}: bad value {value!r}")
    if origin is tuple:
        if not isinstance(value, list | tuple):
            raise ParameterError(f"parameter {name!r} must be a list, got {type(value).__name__} {value!r}")
        (item_type, *_rest) = typing.get_args(annotation)
        return tuple(_check_type(f"{name}[{i}]", v, item_type) for i, v in enumerate(value))
    if annotation is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ParameterError(f"parameter {name!r} must be a number, got {type(value).__name__} {value!r}")
        return float(value)
    if annotation is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ParameterError(f"parameter {name!r} must be an integer, got {type(value).__name__} {value!r}")
        return value
    if annotation is bool:
        if not isinstance(value, bool):
            raise ParameterError(f"parameter {name!r} must be True or False, got {value!r}")
        return value
    if annotation is str:
        if not isinstance(value, str):
            raise ParameterError(f"parameter {name!r} must be a string, got {type(value).__name__} {value!r}")
        return value
    return value


@dataclass(frozen=True)
class ChapterParams:
    """Base class: common knobs of every chapter."""

    scale: str = "book"
    seed: int = 0
    device: str = "auto"
    results_dir: str | None = None

    CHAPTER: ClassVar[str] = ""
    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {}
    #: (field, predicate, message) triples checked after types
    RULES: ClassVar[tuple[tuple[str, Any, str], ...]] = ()

    def __post_init__(self) -> None:
        hints = typing.get_type_hints(type(self))
        for f in fields(self):
            value = _check_type(f.name, getattr(self, f.name), hints[f.name])
            object.__setattr__(self, f.name, value)
        if self.scale not in SCALES:
            raise ParameterError(f"parameter 'scale' must be one of {SCALES}, got {self.scale!r}")
        if self.seed < 0:
            raise ParameterError(f"parameter 'seed' must be >= 0, got {self.seed}")
        if self.device != "auto" and not (self.device == "cpu" or self.device.startswith("cuda")):
            raise ParameterError(f"parameter 'device' must be 'auto', 'cpu' or 'cuda[:i]', got {self.device!r}")
        for name, ok, message in self.RULES:
            if not ok(getattr(self, name)):
                raise ParameterError(f"parameter {name!r} = {getattr(self, name)!r}: {message}")

    @classmethod
    def names(cls) -> list[str]:
        return [f.name for f in fields(cls)]

    @classmethod
    def resolve(cls, scale: str = "book", **knobs: Any):
        """Preset values for `scale`, overridden by every knob that is not None."""
        if scale not in SCALES:
            raise ParameterError(f"parameter 'scale' must be one of {SCALES}, got {scale!r}")
        unknown = sorted(set(knobs) - set(cls.names()))
        if unknown:
            raise ParameterError(
                f"unknown parameter(s) {unknown} for chapter {cls.CHAPTER!r}; known: {sorted(cls.names())}"
            )
        values = dict(cls.PRESETS.get(scale, {}))
        values.update({k: v for k, v in knobs.items() if v is not None})
        values["scale"] = scale
        return cls(**values)

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


_positive = (lambda v: v > 0, "must be > 0")
_nonneg = (lambda v: v >= 0, "must be >= 0")


def _rules(**spec: tuple[Any, str]) -> tuple[tuple[str, Any, str], ...]:
    return tuple((name, pred, msg) for name, (pred, msg) in spec.items())


@dataclass(frozen=True)
class TSEParams(ChapterParams):
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
    RULES: ClassVar = _rules(
        n_tokens=(lambda v: v >= 2, "needs at least 2 tokens"),
        d_model=_positive, n_heads=_positive, alpha=_positive, depth=_positive, trials=_positive,
        ffn_mult=_positive, value_scale=_positive, w_trials=(lambda v: v >= 2, "needs >= 2 draws"),
        lemma_trials=(lambda v: v >= 2, "needs >= 2 draws"), prenorm_depth=_positive,
        deesc_depth=_positive, deesc_runs=_positive,
        taus=(lambda v: len(v) > 0 and all(0 < t <= 1 for t in v), "every tau must lie in (0, 1] (eq. 21)"),
        hf_depth=_positive, hf_hidden=_positive, hf_heads=_positive, hf_intermediate=_positive,
        hf_batch=_positive, hf_seq_len=(lambda v: 2 <= v <= 512, "must lie in [2, 512]"),
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.d_model % self.n_heads:
            raise ParameterError(f"parameter 'd_model' = {self.d_model} must be divisible by n_heads = {self.n_heads}")
        if self.hf_hidden % self.hf_heads:
            raise ParameterError(f"parameter 'hf_hidden' = {self.hf_hidden} must be divisible by hf_heads")


@dataclass(frozen=True)
class SubspaceParams(ChapterParams):
    """Yan et al. §3 and Appendix A: the singular-value subspace theorem and the CDF study."""

    model: str = "all-MiniLM-L6-v2"
    task: str = "CoLA"
    second_task: str = "MRPC"
    n_sentences: int = 512
    max_length: int = 128
    batch_size: int = 32
    random_shapes: tuple[int, ...] = (16, 64, 128)   # token counts m of the random matrices
    random_dim: int = 384
    mc_samples: int = 200_000
    sphere_dims: tuple[int, ...] = (16, 64, 384, 768)
    radii: tuple[float, ...] = (0.1, 0.3, 0.5, 0.7, 0.9)
    untrained_twin: bool = True

    CHAPTER: ClassVar[str] = "subspace"
    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {
        "ci": dict(n_sentences=48, mc_samples=20_000, sphere_dims=(16, 64, 384), random_shapes=(16, 64)),
        "book": dict(),
        "paper": dict(model="bert-base-uncased", n_sentences=1043, random_dim=768),
    }
    RULES: ClassVar = _rules(
        task=(lambda v: v in ("CoLA", "MRPC", "RTE", "SST-2"), "must be one of CoLA, MRPC, RTE, SST-2"),
        second_task=(lambda v: v in ("CoLA", "MRPC", "RTE", "SST-2"), "must be one of CoLA, MRPC, RTE, SST-2"),
        n_sentences=(lambda v: v >= 2, "needs at least 2 sentences"),
        max_length=(lambda v: 4 <= v <= 512, "must lie in [4, 512]"),
        batch_size=_positive, random_dim=_positive,
        random_shapes=(lambda v: len(v) > 0 and all(x >= 2 for x in v), "every m must be >= 2"),
        mc_samples=(lambda v: v >= 100, "needs >= 100 samples"),
        sphere_dims=(lambda v: len(v) > 0 and all(x >= 2 for x in v), "every n must be >= 2"),
        radii=(lambda v: len(v) > 0 and all(0 < x < 1 for x in v), "every radius d must lie in (0, 1)"),
    )


@dataclass(frozen=True)
class DriftParams(ChapterParams):
    """Godey et al. §4: an untrained BERT block fed drifted inputs (Figures 6-10)."""

    n_seq: int = 16
    seq_len: int = 512
    norm_min: float = 0.1
    norm_max: float = 3000.0
    n_norms: int = 19
    hist_norms: tuple[float, ...] = (0.0, 10.0, 100.0, 1000.0)
    seeds: int = 3
    hidden: int = 768
    heads: int = 12
    intermediate: int = 3072
    reference_model: str = "all-MiniLM-L6-v2"
    reference_sentences: int = 256

    CHAPTER: ClassVar[str] = "drift"
    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {
        "ci": dict(n_seq=4, seq_len=128, n_norms=8, seeds=2, reference_sentences=32),
        "book": dict(),
        "paper": dict(seeds=5, n_norms=31, reference_model="bert-base-uncased", reference_sentences=1024),
    }
    RULES: ClassVar = _rules(
        n_seq=_positive, seq_len=(lambda v: 2 <= v <= 512, "must lie in [2, 512] (BERT positions)"),
        norm_min=_positive, norm_max=_positive, n_norms=(lambda v: v >= 3, "needs >= 3 bias norms"),
        hist_norms=(lambda v: all(x >= 0 for x in v), "bias norms must be >= 0"),
        seeds=_positive, hidden=_positive, heads=_positive, intermediate=_positive,
        reference_sentences=(lambda v: v >= 2, "needs >= 2 sentences"),
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.norm_max <= self.norm_min:
            raise ParameterError(f"parameter 'norm_max' = {self.norm_max} must exceed norm_min = {self.norm_min}")
        if self.hidden % self.heads:
            raise ParameterError(f"parameter 'hidden' = {self.hidden} must be divisible by heads = {self.heads}")


#: the paper's models (Godey et al. Figures 1-5), by hub id and modality, for the `paper` preset
PAPER_ANISOTROPY_MODELS = (
    "text:bert-base-uncased", "text:roberta-base", "text:gpt2", "text:t5-base", "text:google/canine-c",
    "text:google/canine-s", "text:google/byt5-small", "audio:facebook/wav2vec2-base-960h",
    "audio:facebook/hubert-base-ls960", "audio:openai/whisper-base", "vision:google/vit-base-patch16-224",
    "vision:microsoft/beit-base-patch16-224", "vision:facebook/deit-base-patch16-224",
    "vision:microsoft/resnet-50", "vision:google/efficientnet-b0", "vision:microsoft/cvt-13",
    "vision:facebook/convnext-tiny-224", "vision:Visual-Attention-Network/van-base",
)


@dataclass(frozen=True)
class AnisotropyParams(ChapterParams):
    """Godey et al. §3 and Appendices A-B: anisotropy across layers and models."""

    models: tuple[str, ...] = ("text:all-MiniLM-L6-v2", "text:SmolLM2-135M-Instruct", "vision:DINOv2-S/14")
    untrained_twins: bool = True
    text_tokens: int = 40_000
    decoder_tokens: int = 12_000     # cap for models with more than 12 layers (SmolLM2: 30)
    images: int = 192
    chunk_len: int = 256
    batch_size: int = 8
    n_pairs: int = 20_000
    gaussian_dims: tuple[int, ...] = (16, 64, 256, 768, 4096)
    gaussian_samples: int = 100_000

    CHAPTER: ClassVar[str] = "anisotropy"
    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {
        "ci": dict(models=("text:all-MiniLM-L6-v2",), text_tokens=3000, images=8, n_pairs=4000,
                   gaussian_samples=20_000),
        "book": dict(),
        "paper": dict(models=PAPER_ANISOTROPY_MODELS, text_tokens=217_000, decoder_tokens=217_000, images=5000,
                      n_pairs=100_000),
    }
    RULES: ClassVar = _rules(
        models=(lambda v: len(v) > 0 and all(x.split(":", 1)[0] in ("text", "vision", "audio") and ":" in x
                                             for x in v), "each entry is 'text:<id>', 'vision:<id>' or 'audio:<id>'"),
        text_tokens=(lambda v: v >= 16, "needs >= 16 tokens"), decoder_tokens=(lambda v: v >= 16, "needs >= 16 tokens"),
        images=(lambda v: v >= 1, "needs >= 1 image"), chunk_len=(lambda v: 8 <= v <= 510, "must lie in [8, 510]"),
        batch_size=_positive, n_pairs=(lambda v: v >= 100, "needs >= 100 pairs"),
        gaussian_dims=(lambda v: len(v) > 0 and all(x >= 3 for x in v), "every d must be >= 3"),
        gaussian_samples=(lambda v: v >= 1000, "needs >= 1000 samples"),
    )


@dataclass(frozen=True)
class STSParams(ChapterParams):
    """Yan et al. §5.1, App. B-C: SoftDecay on unsupervised STS (Table 1, Table 4, Figures 3, 4, 6)."""

    models: tuple[str, ...] = ("all-MiniLM-L6-v2",)
    datasets: tuple[str, ...] = ("STS-B", "STS12", "STS13", "STS14", "STS15", "STS16", "SICK-R")
    source: str = "whiteningbert"
    pooling: str = "first_last"
    alpha: float = -0.6
    alphas: tuple[float, ...] = (-0.2, -0.4, -0.6, -0.8, -1.0)
    tau: float = 1.0
    max_pairs: int = 0               # 0 = every pair of every set
    max_length: int = 128
    batch_size: int = 64
    lsds_points: int = 2000
    tsne_pairs: int = 400

    CHAPTER: ClassVar[str] = "sts"
    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {
        "ci": dict(max_pairs=150, lsds_points=300, tsne_pairs=60, alphas=(-0.2, -0.6, -1.0)),
        "book": dict(),
        "paper": dict(models=("bert-base-cased", "distilbert-base-uncased", "albert-base-v2", "roberta-base")),
    }
    RULES: ClassVar = _rules(
        models=(lambda v: len(v) > 0, "needs at least one model"),
        datasets=(lambda v: len(v) > 0 and all(d in ("STS-B", "STS12", "STS13", "STS14", "STS15", "STS16", "SICK-R")
                                               for d in v), "each must be one of STS-B, STS12..STS16, SICK-R"),
        source=(lambda v: v in ("whiteningbert", "official", "hub"), "must be whiteningbert, official or hub"),
        pooling=(lambda v: v in ("first_last", "first_last_l1", "last", "cls"),
                 "must be first_last, first_last_l1, last or cls"),
        alpha=(lambda v: -1.0 <= v < 0, "must lie in [-1, 0) (the paper's range; eq. 2 is undefined at 0)"),
        alphas=(lambda v: len(v) > 0 and all(-1.0 <= a < 0 for a in v), "every alpha must lie in [-1, 0)"),
        tau=(lambda v: 0 < v <= 1, "must lie in (0, 1] (eq. 21)"),
        max_pairs=_nonneg, max_length=(lambda v: 8 <= v <= 512, "must lie in [8, 512]"), batch_size=_positive,
        lsds_points=(lambda v: v >= 20, "needs >= 20 points"), tsne_pairs=(lambda v: v >= 10, "needs >= 10 pairs"),
    )


@dataclass(frozen=True)
class ViTParams(ChapterParams):
    """Yu & Zhang §3.3: post-norm vs pre-norm vs de-escalated post-norm ViT on CIFAR-10 (Figure 6)."""

    variants: tuple[str, ...] = ("post-norm", "pre-norm", "de-escalated")
    depth: int = 80
    hidden: int = 192
    ffn: int = 384
    heads: int = 8
    patch: int = 4
    epochs: int = 150
    train_images: int = 0            # 0 = all 50,000
    test_images: int = 0             # 0 = all 10,000
    batch: int = 128
    lr: float | None = None          # None: 5e-5 post-norm, 1e-4 otherwise (§3.3)
    tau: float = 1.0
    deesc_place: str = "output"
    augment: bool = True
    seeds: int = 3
    sim_every: int = 1

    CHAPTER: ClassVar[str] = "vit"
    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {
        "ci": dict(depth=4, epochs=1, train_images=256, test_images=128, batch=64, seeds=1),
        "book": dict(depth=24, epochs=4, train_images=2048, test_images=1000, seeds=1),
        "paper": dict(),
    }
    RULES: ClassVar = _rules(
        variants=(lambda v: len(v) > 0 and all(x in ("post-norm", "pre-norm", "de-escalated") for x in v),
                  "each must be post-norm, pre-norm or de-escalated"),
        depth=_positive, hidden=_positive, ffn=_positive, heads=_positive,
        patch=(lambda v: v > 0 and 32 % v == 0, "must divide 32"), epochs=_positive, train_images=_nonneg,
        test_images=_nonneg, batch=_positive, lr=(lambda v: v is None or v > 0, "must be > 0"),
        tau=(lambda v: 0 < v <= 1, "must lie in (0, 1] (eq. 21)"),
        deesc_place=(lambda v: v in ("input", "after_attention", "ffn_input", "output"),
                     "must be input, after_attention, ffn_input or output"),
        seeds=_positive, sim_every=_positive,
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.hidden % self.heads:
            raise ParameterError(f"parameter 'hidden' = {self.hidden} must be divisible by heads = {self.heads}")


@dataclass(frozen=True)
class GlueParams(ChapterParams):
    """Yan et al. §5.2, App. B, App. D: SoftDecay fine-tuning on GLUE (Table 2, Table 6, Figs. 5, 8-13)."""

    models: tuple[str, ...] = ("all-MiniLM-L6-v2",)
    tasks: tuple[str, ...] = ("RTE", "MRPC", "CoLA")
    variants: tuple[str, ...] = ("baseline", "softdecay", "expdecay")
    alphas: tuple[float, ...] = (-0.5,)          # initial α of SoftDecay (the paper searches -0.2, -0.5, -0.8)
    lr: float = 2e-5
    alpha_lr: float = 2e-3
    epochs: int = 3
    batch: int = 32
    max_length: int = 128
    seeds: int = 2
    train_examples: int = 0                      # 0 = the whole training split
    eval_examples: int = 0                       # 0 = the whole validation split
    spectra_examples: int = 256
    expdecay_squared: bool = False               # False: App. D.1 as printed; True: Wang et al.'s squared form

    CHAPTER: ClassVar[str] = "glue"
    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {
        "ci": dict(tasks=("RTE", "MRPC"), train_examples=48, eval_examples=48, batch=8, max_length=48, epochs=2,
                   seeds=2, spectra_examples=24),
        "book": dict(),
        "paper": dict(models=("bert-base-uncased", "albert-base-v1", "distilbert-base-uncased", "roberta-base"),
                      tasks=("CoLA", "SST-2", "MRPC", "QNLI", "RTE"), alphas=(-0.2, -0.5, -0.8), seeds=3,
                      spectra_examples=1000),
    }
    RULES: ClassVar = _rules(
        models=(lambda v: len(v) > 0, "needs at least one model"),
        tasks=(lambda v: len(v) > 0 and all(t in ("CoLA", "SST-2", "MRPC", "QNLI", "RTE") for t in v),
               "each must be one of CoLA, SST-2, MRPC, QNLI, RTE"),
        variants=(lambda v: len(v) > 0 and all(x in ("baseline", "softdecay", "expdecay") for x in v),
                  "each must be baseline, softdecay or expdecay"),
        alphas=(lambda v: len(v) > 0 and all(-1.0 <= a < 0 for a in v), "every initial alpha must lie in [-1, 0)"),
        lr=_positive, alpha_lr=_positive, epochs=_positive, batch=_positive,
        max_length=(lambda v: 8 <= v <= 512, "must lie in [8, 512]"), seeds=_positive,
        train_examples=_nonneg, eval_examples=_nonneg, spectra_examples=(lambda v: v >= 2, "needs >= 2 examples"),
    )


#: MultiBERT's released intermediate checkpoints (Sellam et al. 2021): every 20k steps to 200k, then every 100k to 2M
MULTIBERT_STEPS = tuple(range(0, 200_000, 20_000)) + tuple(range(200_000, 2_000_001, 100_000))


@dataclass(frozen=True)
class QKParams(ChapterParams):
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
    RULES: ClassVar = _rules(
        source=(lambda v: v in ("pretrain", "multiberts"), "must be 'pretrain' or 'multiberts'"),
        seeds=(lambda v: len(v) > 0 and len(set(v)) == len(v) and all(s >= 0 for s in v),
               "needs distinct seeds >= 0"),
        steps=(lambda v: len(v) >= 2 and all(b > a for a, b in zip(v, v[1:], strict=False)) and v[0] >= 0,
               "needs >= 2 increasing checkpoint steps >= 0"),
        n_samples=(lambda v: v >= 2, "needs >= 2 samples"),
        max_length=(lambda v: 8 <= v <= 512, "must lie in [8, 512]"),
        svd_fraction=(lambda v: 0 < v <= 1, "must lie in (0, 1]"), n_display=_positive,
        layers=_positive, hidden=_positive, heads=_positive, intermediate=_positive,
        seq_len=(lambda v: 8 <= v <= 512, "must lie in [8, 512]"), batch=_positive, lr=_positive,
        warmup=(lambda v: 0 <= v < 1, "must lie in [0, 1)"), weight_decay=_nonneg,
        mask_prob=(lambda v: 0 < v < 1, "must lie in (0, 1)"),
        train_split=(lambda v: v in ("validation", "test"), "must be 'validation' or 'test' (the mirror's splits)"),
        resume_every=_positive,
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


CHAPTERS: dict[str, type[ChapterParams]] = {
    TSEParams.CHAPTER: TSEParams,
    SubspaceParams.CHAPTER: SubspaceParams,
    DriftParams.CHAPTER: DriftParams,
    AnisotropyParams.CHAPTER: AnisotropyParams,
    STSParams.CHAPTER: STSParams,
    ViTParams.CHAPTER: ViTParams,
    GlueParams.CHAPTER: GlueParams,
    QKParams.CHAPTER: QKParams,
}


def knobs(namespace: dict[str, Any], cls: type[ChapterParams]) -> dict[str, Any]:
    """The chapter knobs found in a notebook namespace (the parameters cell's variables)."""
    return {k: namespace[k] for k in cls.names() if k != "scale" and k in namespace}


def for_chapter(chapter: str) -> type[ChapterParams]:
    try:
        return CHAPTERS[chapter]
    except KeyError:
        raise ParameterError(f"unknown chapter {chapter!r}; chapters: {sorted(CHAPTERS)}") from None


__all__ = ["SCALES", "ParameterError", "ChapterParams", "TSEParams", "SubspaceParams", "DriftParams",
           "AnisotropyParams", "STSParams", "ViTParams", "PAPER_ANISOTROPY_MODELS", "CHAPTERS",
           "for_chapter", "knobs", "field", "QKParams", "MULTIBERT_STEPS"]
