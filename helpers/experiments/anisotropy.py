"""The anisotropy chapter (Godey et al. §3, Appendices A-B): layer-wise anisotropy, drift norm,
normalised drift and mean-removed cosine of real pretrained models across tokenisations and modalities —
subword text, bytes (a byte-level MLM trained here), antibody residues, reaction SMILES atoms, speech,
a vision Transformer and a CNN — and of the untrained twin of each Transformer; the drift–anisotropy
correlation tests and the isotropic-Gaussian baseline."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal

import numpy as np
import torch
from torch import Tensor

from ..book import results
from ..book.params import ChapterParams, positive, rules
from ..book.runtime import choose_device, seed_everything, stream_seed
from ..core import anisotropy as A
from ..core.findings import Finding, finding_key
from ..core.stats import Interval, jackknife_interval, rank_correlation_interval, spearman_exact_p
from ..data import DataUnavailable, load_cifar10, load_common_voice, load_wikitext103
from ..data.sequences import load_antibody_chains, load_uspto50k_reactions
from ..data.speech import digit_sequences
from ..hf import anisotropy as H
from ..hf import bytelevel, models, whisper
from ..train.mlm import PretrainConfig, pretrain, training_chunks

#: the paper's models (Godey et al. Figures 1-5), by hub id and modality, for the `paper` preset
PAPER_ANISOTROPY_MODELS = (
    "text:bert-base-uncased", "text:roberta-base", "text:gpt2", "text:t5-base", "text:google/canine-c",
    "text:google/canine-s", "text:google/byt5-small", "audio:facebook/wav2vec2-base-960h",
    "audio:facebook/hubert-base-ls960", "audio:openai/whisper-base", "vision:google/vit-base-patch16-224",
    "vision:microsoft/beit-base-patch16-224", "vision:facebook/deit-base-patch16-224",
    "vision:microsoft/resnet-50", "vision:google/efficientnet-b0", "vision:microsoft/cvt-13",
    "vision:facebook/convnext-tiny-224",
)
#: left out of the paper list: Visual-Attention-Network/van-base has no model class in transformers 5
#: every real model that loads offline here, one per row of the chapter (modality:name)
OFFLINE_MODELS = (
    "text:all-MiniLM-L6-v2", "text:SmolLM2-135M-Instruct", "bytes:byte-MLM", "protein:AntiBERTy",
    "chem:rxnmapper-ALBERT", "audio:whisper-base", "audio:whisper-tiny.en",
    "vision:DINOv2-S/14", "vision:EfficientNet-Lite0",
)
MODALITIES = ("text", "bytes", "protein", "chem", "audio", "vision")
#: the paper's models that load offline here, under the names their records hold (the hub id's model)
PAPER_OFFLINE = {"whisper-base": "openai/whisper-base"}
#: the paper's models by the names a record holds: a finding on these only is at the paper's setting
PAPER_NAMES = frozenset(e.split(":", 1)[1] for e in PAPER_ANISOTROPY_MODELS) | frozenset(PAPER_OFFLINE)
#: the paper's character- and byte-level text models (Fig. 2), among the `text:` entries
CHARACTER_LEVEL = frozenset({"google/canine-c", "google/canine-s", "google/byt5-small"})
#: subword models whose last training is a contrastive sentence objective, not a language model's
SENTENCE_ENCODERS = frozenset({"all-MiniLM-L6-v2"})
#: the finding key of the byte-level model against each subword model (Fig. 2), by the subword model's name
BYTES_VS_KEYS = {"all-MiniLM-L6-v2": "anisotropy-bytes-vs-minilm",
                 "SmolLM2-135M-Instruct": "anisotropy-bytes-vs-smollm2",
                 "bert-base-uncased": "anisotropy-bytes-vs-bert", "roberta-base": "anisotropy-bytes-vs-roberta",
                 "gpt2": "anisotropy-bytes-vs-gpt2", "t5-base": "anisotropy-bytes-vs-t5"}
#: the finding key of each of the paper's speech models that loads offline (Fig. 3a), by its record's name
SPEECH_KEYS = {"whisper-base": "anisotropy-speech-whisper-base"}
#: the paper's significance level (Fig. 5: p > 0.05 is "no significant correlation")
ALPHA = 0.05
#: how close avg cos and (‖x̄‖₂ / E‖x‖)² must be for a layer to count as satisfying the identity
IDENTITY_TOL = 0.02
#: models without an untrained twin (not Transformers)
NO_TWIN = ("EfficientNet-Lite0",)
#: models with BERT's embedding block (word + position + token type): their untrained twin adds one random
#: token-type vector to every token, so they also get a twin with that embedding zeroed
TOKEN_TYPE = ("all-MiniLM-L6-v2", "byte-MLM", "AntiBERTy", "rxnmapper-ALBERT")
#: the models whose centred cloud's spectrum is measured (every Transformer; the byte-level MLM's
#: trained checkpoint is not kept, so only its twins are measured unless `make rerun` retrains it)
SHAPE_MODELS = tuple(e for e in OFFLINE_MODELS if e.split(":", 1)[1] not in NO_TWIN)


@dataclass(frozen=True)
class Params(ChapterParams):
    """Godey et al. §3 and Appendices A-B: anisotropy across layers, models and modalities."""

    models: tuple[str, ...] = OFFLINE_MODELS
    untrained_twins: bool = True
    text_split: Literal["validation", "test"] = "test"
    text_tokens: int = 40_000
    decoder_tokens: int = 12_000     # cap for models with more than 12 layers (SmolLM2: 30)
    chains: int = 274                # antibody chains (Jain et al. 2017: 274)
    reactions: int = 400             # USPTO-50K test reactions
    speech_per_speaker: int = 4      # FSDD five-digit sequences per speaker (6 speakers)
    images: int = 192
    cnn_vectors: Literal["position", "map"] = "position"
    chunk_len: int = 256
    batch_size: int = 8
    n_pairs: int = 20_000
    gaussian_dims: tuple[int, ...] = (16, 64, 256, 768, 4096)
    gaussian_samples: int = 100_000
    zeroed_twins: bool = True        # a second twin with the token-type embedding zeroed (TOKEN_TYPE models)
    shape_models: tuple[str, ...] = SHAPE_MODELS
    shape_share: float = 0.25        # share of each data budget the spectrum runs use (tokens subsampled)
    shape_trained_byte_mlm: bool = False   # the trained byte-level MLM's spectrum (needs its checkpoint: ~20 min)

    CHAPTER: ClassVar[str] = "anisotropy"
    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {
        "ci": dict(models=("text:all-MiniLM-L6-v2", "protein:AntiBERTy", "chem:rxnmapper-ALBERT",
                           "vision:EfficientNet-Lite0"), text_tokens=3000, chains=24, reactions=40, images=8,
                   n_pairs=4000, gaussian_samples=20_000, shape_share=0.5,
                   shape_models=("text:all-MiniLM-L6-v2", "chem:rxnmapper-ALBERT")),
        # the trained byte MLM's spectrum is committed (results/anisotropy/book/shape-bytes-byte-MLM-pretrained.json)
        "book": dict(shape_trained_byte_mlm=True),
        "paper": dict(models=PAPER_ANISOTROPY_MODELS, text_tokens=217_000, decoder_tokens=217_000, images=5000,
                      n_pairs=100_000, cnn_vectors="map"),
    }
    RULES: ClassVar = rules(
        models=(lambda v: len(v) > 0 and all(":" in x and x.split(":", 1)[0] in MODALITIES for x in v),
                f"each entry is '<modality>:<id>' with modality one of {MODALITIES}"),
        text_tokens=(lambda v: v >= 16, "needs >= 16 tokens"), decoder_tokens=(lambda v: v >= 16, "needs >= 16 tokens"),
        chains=(lambda v: v >= 2, "needs >= 2 chains"), reactions=(lambda v: v >= 2, "needs >= 2 reactions"),
        speech_per_speaker=(lambda v: v >= 1, "needs >= 1 sequence per speaker"),
        images=(lambda v: v >= 1, "needs >= 1 image"), chunk_len=(lambda v: 8 <= v <= 510, "must lie in [8, 510]"),
        batch_size=positive, n_pairs=(lambda v: v >= 100, "needs >= 100 pairs"),
        gaussian_dims=(lambda v: len(v) > 0 and all(x >= 3 for x in v), "every d must be >= 3"),
        gaussian_samples=(lambda v: v >= 1000, "needs >= 1000 samples"),
        shape_share=(lambda v: 0 < v <= 1, "must lie in (0, 1]"),
    )


@dataclass
class Result(results.Result):
    """Everything the anisotropy chapter shows. `models`: one entry per measured model (pretrained
    and untrained twin), with its label, modality, name, `trained`, description, `data` (what it was
    measured on), and per layer (embeddings first) `cos_exact`, `cos_sampled`, `cos_sampled_se`,
    `cos_centred` (mean removed, Biś et al. 2021) and its `cos_centred_se`, `mean_norm` (‖x̄‖₂),
    `avg_norm` (E‖x‖), `drift_ratio` (‖x̄‖₂ / E‖x‖), `dims`; `tokens` (vectors measured),
    `correlation` (Spearman and Pearson tests between ‖x̄‖₂ and the average cosine, Godey et al.
    Fig. 5 and 16) and `normalised` (the same tests with the normalised drift, and how closely
    avg cos ≈ (‖x̄‖₂ / E‖x‖)² holds). A CNN entry also holds `map_cos_exact`, the cosine of whole
    flattened maps. `gaussian`: per dimension d, the Monte Carlo mean and 95th percentile of the
    cosine of isotropic Gaussians, the exact percentile, 1.645/√d, and a histogram. `byte_mlm`: the
    byte-level MLM's training record (held-out loss per step, unigram baseline), when measured.
    `skipped`: models left out because their data is neither in the mirror nor on the hub (model, reason)."""

    models: list[dict[str, Any]]
    gaussian: list[dict[str, Any]]
    byte_mlm: dict[str, Any] | None = None
    skipped: list[dict[str, str]] = field(default_factory=list)
    n_pairs: int = 20_000
    #: two planted clouds (`core.anisotropy.cloud_shape`): clusters + drift, and isotropic + drift
    planted: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: the untrained twins with the token-type embedding zeroed (`measure_zeroed`), records like `models`'
    zeroed: list[dict[str, Any]] = field(default_factory=list)
    #: the centred cloud's spectrum per layer on a subsample (`measure_shapes`): `SHAPE_KEYS` per model and twin
    shapes: list[dict[str, Any]] = field(default_factory=list)
    #: share of each data budget the spectrum runs use
    shape_share: float = 1.0
    #: SmolLM2's last point before and after its final RMSNorm (`hf.anisotropy.final_norm_cosines`), when measured
    final_norm: dict[str, Any] | None = None
    #: the CNN's flattened maps with a bootstrap over images (`cnn_map_bootstrap`), when a CNN is measured
    cnn_boot: dict[str, Any] | None = None
    #: the paper's speech model (Whisper base) with a bootstrap over recordings (`speech_drift_bootstrap`)
    speech_boot: dict[str, Any] | None = None
    #: the mean-removed average cosine of `CENTRED_MODELS` with a jackknife over their inputs (`centred_jackknife`)
    centred_jack: list[dict[str, Any]] = field(default_factory=list)

    # ------------------------------------------------------------------ lookups

    def model(self, name: str, trained: bool = True) -> dict[str, Any]:
        """The entry of model `name` (pretrained, or its untrained twin)."""
        return next(m for m in self.models if m["name"] == name and m["trained"] == trained)

    def get(self, name: str, trained: bool = True) -> dict[str, Any] | None:
        """The entry of model `name`, or None when this run did not measure it."""
        return next((m for m in self.models if m["name"] == name and m["trained"] == trained), None)

    def pretrained(self) -> list[dict[str, Any]]:
        return [m for m in self.models if m["trained"]]

    def transformers(self) -> list[dict[str, Any]]:
        """The pretrained Transformers (every pretrained model but the CNNs)."""
        return [m for m in self.pretrained() if m["name"] not in NO_TWIN]

    def twin(self, m: dict[str, Any]) -> dict[str, Any] | None:
        return self.get(m["name"], trained=False)

    # ------------------------------------------------------------------ the null of an average (Appendix B)

    def null_q95(self, d: int) -> float:
        """The 95th percentile of the average cosine of `n_pairs` independent isotropic pairs at width d."""
        return A.isotropic_mean_cosine_quantile(0.95, int(d), self.n_pairs)

    def above_isotropic(self) -> dict[str, tuple[int, int]]:
        """Per model: (layers whose average cosine exceeds `null_q95` of their width, layers)."""
        return {m["label"]: (sum(c > self.null_q95(d) for c, d in zip(m["cos_exact"], m["dims"], strict=True)),
                             len(m["cos_exact"])) for m in self.models}

    def above_single_pair(self) -> dict[str, tuple[int, int]]:
        """Per model: (layers above the 95th percentile of a *single* pair's isotropic cosine — the paper's
        Fig. 18 line —, layers)."""
        return {m["label"]: (sum(c > A.isotropic_cosine_quantile(0.95, int(d))
                                 for c, d in zip(m["cos_exact"], m["dims"], strict=True)), len(m["cos_exact"]))
                for m in self.models}

    def sampling_z(self) -> np.ndarray:
        """|sampled − exact| / standard error over every layer of every model."""
        return np.concatenate([np.abs(np.subtract(m["cos_sampled"], m["cos_exact"]))
                               / np.clip(m["cos_sampled_se"], 1e-12, None) for m in self.models])

    # ------------------------------------------------------------------ the shape of the centred cloud

    def effective_dims(self, m: dict[str, Any]) -> np.ndarray:
        """Per layer, the effective dimension 1/E[cos²] of the centred cloud (`core.measures.
        cosine_effective_dim`), from the mean and standard error of the mean-removed cosines of the
        layer's `n_pairs` sampled pairs: E[cos²] = mean² + sd², sd = se·√n_pairs."""
        mean, se = np.asarray(m["cos_centred"], float), np.asarray(m["cos_centred_se"], float)
        return 1.0 / (mean**2 + se**2 * self.n_pairs)

    def isotropic_effective_dim(self, d: int) -> Interval:
        """What the same estimate gives for an isotropic Gaussian cloud of width d (E[cos²] = 1/d, and
        cos² has variance ≈ 2/d² per pair): d with its 95 % sampling band over `n_pairs` pairs."""
        half = 1.96 * np.sqrt(2.0 / self.n_pairs)
        return Interval(d, d / (1 + half), d / (1 - half), self.n_pairs, "normal")

    def centred_rows(self) -> list[dict[str, Any]]:
        """Per pretrained model (and its twin): width d, the effective dimension of the centred cloud
        over layers (smallest, largest) and as a share of d, the isotropic Gaussian's band at that d,
        and the largest |mean-removed average cosine|."""
        rows = []
        for m in self.pretrained():
            eff, t = self.effective_dims(m), self.twin(m)
            d = np.asarray(m["dims"], float)
            iso = self.isotropic_effective_dim(int(d[-1]))
            row = {"model": m["name"], "d": int(d[-1]), "eff_min": float(eff.min()), "eff_max": float(eff.max()),
                   "share_max": float((eff / d).max()), "iso_low": iso.low, "iso_high": iso.high,
                   "centred_max": float(np.abs(m["cos_centred"]).max())}
            if t is not None:
                te = self.effective_dims(t)
                row |= {"twin_min": float(te.min()), "twin_max": float(te.max())}
            rows.append(row)
        return rows

    def centred_share(self) -> Interval:
        """Effective dimension of the centred cloud over d, over every layer of every pretrained
        Transformer: median, with the range (smallest, largest) as its interval."""
        v = np.concatenate([self.effective_dims(m) / np.asarray(m["dims"], float) for m in self.transformers()])
        return Interval(float(np.median(v)), float(v.min()), float(v.max()), int(v.size), "range")

    # ------------------------------------------------------------------ the centred cloud's spectrum

    def shape(self, name: str, trained: bool = True) -> dict[str, Any] | None:
        """The spectrum record of model `name` (or its twin), None when not measured."""
        return next((s_ for s_ in self.shapes if s_["name"] == name and s_["trained"] == trained), None)

    @staticmethod
    def makeup(s_: dict[str, Any]) -> list[str]:
        """Per layer, what the anisotropy is made of (`core.anisotropy.anisotropy_makeup`)."""
        return [A.anisotropy_makeup(a, b, c) for a, b, c in zip(s_["pr"], s_["pr_iso"], s_["mean_split_cos"],
                                                                 strict=True)]

    @staticmethod
    def pr_share(s_: dict[str, Any]) -> np.ndarray:
        """Per layer, the centred cloud's participation ratio over an isotropic Gaussian's of the same n and d."""
        return np.asarray(s_["pr"], float) / np.asarray(s_["pr_iso"], float)

    def shape_rows(self) -> list[dict[str, Any]]:
        """Per model with a spectrum run: width d, tokens, the participation ratio of the centred cloud
        over layers (smallest, largest) against the isotropic Gaussian's and the twin's, the largest top-3
        variance share, the smallest split-half cosine of the mean (model and twin), the smallest ‖x̄‖² over
        the top centred eigenvalue, the RMS cosine after removing the mean and the top 10 directions over
        1/√d (largest), and how many layers fall in each `MAKEUP` class."""
        rows = []
        for name in dict.fromkeys(s_["name"] for s_ in self.shapes):
            m, t = self.shape(name), self.shape(name, False)
            ref = m or t
            d = int(ref["dims"][-1])
            row: dict[str, Any] = {"model": name, "d": d, "tokens": int(ref["tokens"]),
                                   "pr_iso": float(np.median(ref["pr_iso"]))}
            nan = float("nan")
            for tag, r in (("", m), ("twin_", t)):
                pr = np.asarray(r["pr"], float) if r else np.array([nan])
                row |= {f"{tag}pr_min": float(pr.min()), f"{tag}pr_max": float(pr.max())}
            if m:
                kinds = self.makeup(m)
                row |= {"top3_max": float(np.max(m["top3"])), "split_min": float(np.min(m["mean_split_cos"])),
                        "drift_over_top_min": float(np.min(m["drift_over_top"])),
                        "rms10_ratio": float(np.max(np.asarray(m["rms_cos_k10"]) * np.sqrt(np.asarray(m["dims"])))),
                        "layers": len(kinds)} | {k: kinds.count(k) for k in A.MAKEUP}
            if t:
                row["twin_split_min"] = float(np.min(t["mean_split_cos"]))
            rows.append(row)
        return rows

    def makeup_counts(self) -> dict[str, int]:
        """Layers of the pretrained Transformers' spectrum runs in each `MAKEUP` class."""
        kinds = [k for s_ in self.shapes if s_["trained"] for k in self.makeup(s_)]
        return {k: kinds.count(k) for k in A.MAKEUP} | {"layers": len(kinds)}

    def pr_share_interval(self) -> Interval | None:
        """The centred cloud's participation ratio over an isotropic Gaussian's, over every layer of every
        pretrained Transformer's spectrum run: median, with the range as its interval (None without runs)."""
        v = [x for s_ in self.shapes if s_["trained"] for x in self.pr_share(s_)]
        if not v:
            return None
        return Interval(float(np.median(v)), float(np.min(v)), float(np.max(v)), len(v), "range")

    # ------------------------------------------------------------------ the token-type-zeroed twins

    def zeroed_twin(self, name: str) -> dict[str, Any] | None:
        return next((z for z in self.zeroed if z["name"] == name), None)

    def zeroed_rows(self) -> list[dict[str, Any]]:
        """Per model with a token-type-zeroed twin: the average cosine at the embeddings of the twin and of
        the zeroed twin, and the layers where the pretrained model lies below each (of all layers)."""
        rows = []
        for z in self.zeroed:
            m, t = self.get(z["name"]), self.get(z["name"], False)
            zc = np.asarray(z["cos_exact"])
            row = {"model": z["name"], "twin_emb": float(t["cos_exact"][0]) if t else float("nan"),
                   "zeroed_emb": float(zc[0]), "zeroed_max": float(zc.max()), "layers": len(zc)}
            if m:
                mc = np.asarray(m["cos_exact"])
                row |= {"below_twin": int(np.sum(mc < np.asarray(t["cos_exact"]))) if t else 0,
                        "below_zeroed": int(np.sum(mc < zc))}
            rows.append(row)
        return rows

    # ------------------------------------------------------------------ the paper's claims

    def weakest_peak(self, group: list[dict[str, Any]] | None = None) -> tuple[dict[str, Any], int]:
        """The model of `group` (default: the pretrained Transformers) whose most anisotropic layer is least so,
        and that layer."""
        m = min(group or self.transformers(), key=lambda m: max(m["cos_exact"]))
        return m, int(np.argmax(m["cos_exact"]))

    def layer_interval(self, m: dict[str, Any], layer: int) -> Interval:
        """A layer's average cosine over its `n_pairs` sampled pairs, ±1.96 standard errors."""
        c, se = m["cos_sampled"][layer], m["cos_sampled_se"][layer]
        return Interval(c, c - 1.96 * se, c + 1.96 * se, self.n_pairs, "normal")

    def null_of(self, group: list[dict[str, Any]]) -> float:
        """The largest isotropic null (95th percentile of an `n_pairs` average) over the widths of `group`."""
        return max(self.null_q95(m["dims"][-1]) for m in group)

    def group(self, kind: str) -> list[dict[str, Any]]:
        """The pretrained Transformers of one kind: "subword" (token-level text), "character" (byte- or
        character-level text), "speech", "vision"."""
        def kind_of(m: dict[str, Any]) -> str:
            if m["modality"] == "bytes" or m["name"] in CHARACTER_LEVEL:
                return "character"
            return {"text": "subword", "audio": "speech"}.get(m["modality"], m["modality"])
        return [m for m in self.transformers() if kind_of(m) == kind]

    def lowest_layer(self, group: list[dict[str, Any]]) -> Interval:
        """The least anisotropic layer over every model of `group` (sampled pairs, ±1.96 SE)."""
        m = min(group, key=lambda m: min(m["cos_exact"]))
        return self.layer_interval(m, int(np.argmin(m["cos_exact"])))

    @staticmethod
    def mean_over_layers(m: dict[str, Any]) -> tuple[float, float]:
        """A model's average cosine averaged over its layers (sampled pairs) and its standard error."""
        c, se = np.asarray(m["cos_sampled"], float), np.asarray(m["cos_sampled_se"], float)
        return float(c.mean()), float(np.sqrt((se**2).sum()) / len(se))

    def level_gap(self, a: dict[str, Any], b: dict[str, Any]) -> Interval:
        """Average cosine over layers of `a` minus that of `b`, ±1.96 SE of the pair sampling (normal)."""
        (ca, sa), (cb, sb) = self.mean_over_layers(a), self.mean_over_layers(b)
        half = 1.96 * float(np.hypot(sa, sb))
        return Interval(ca - cb, ca - cb - half, ca - cb + half, self.n_pairs, "normal")

    def cnn(self) -> dict[str, Any] | None:
        return next((m for m in self.pretrained() if m["name"] in NO_TWIN), None)

    def cnn_map_cosine(self) -> Interval | None:
        """The CNN's average cosine of whole flattened maps (the paper's reading of Fig. 4), median over
        the block outputs (the non-negative stem and head maps left out), with its bootstrap interval over
        images (`cnn_map_bootstrap`); None without a CNN."""
        b = self.cnn_boot
        if not b:
            return None
        return Interval.from_draws(b["median_draws"], estimate=float(np.median(b["map_cos"][1:-1])))

    # ------------------------------------------------------------------ the drift test across layers (Fig. 5, App. A)

    @staticmethod
    def layer_test(mean_norm, cos) -> dict[str, Any]:
        """The paper's §3.3 test at its own unit, the layers (`drift_layer_test`)."""
        return drift_layer_test(tuple(float(v) for v in mean_norm), tuple(float(v) for v in cos))

    def model_test(self, m: dict[str, Any]) -> dict[str, Any]:
        """`layer_test` of one model's record: ‖x̄‖₂ against the all-pairs average cosine across its layers."""
        return self.layer_test(m["mean_norm"], m["cos_exact"])

    def speech_test(self) -> dict[str, Any] | None:
        """`layer_test` of Whisper base's encoder (the bootstrap record's layers), with the Spearman ρ of its
        bootstrap over recordings as `input_bootstrap`; None when not measured."""
        b = self.speech_boot
        if not b:
            return None
        return self.layer_test(b["mean_norm"], b["cos"]) | {
            "input_bootstrap": Interval.from_draws(b["rho_draws"], estimate=b["rho"])}

    def cnn_test(self) -> dict[str, Any] | None:
        """`layer_test` of the CNN's flattened maps (the paper's reading), with the Spearman ρ of its bootstrap
        over images as `input_bootstrap`; None without a CNN."""
        b = self.cnn_boot
        if not b:
            return None
        return self.layer_test(b["map_mean_norm"], b["map_cos"]) | {
            "input_bootstrap": Interval.from_draws(b["rho_draws"], estimate=b["rho"])}

    def identity_layers(self, models: list[dict[str, Any]]) -> tuple[int, int]:
        """Of the layers of `models`, how many satisfy avg cos ≈ (‖x̄‖₂ / E‖x‖)² within `IDENTITY_TOL`, and how
        many there are (a CNN read as whole flattened maps: its maps' cosines and drift ratios)."""
        within = total = 0
        for m in models:
            if "map_cos_exact" in m:
                gap = np.abs(np.asarray(m["map_cos_exact"]) - np.square(m["map_drift_ratio"]))
                within, total = within + int((gap < IDENTITY_TOL).sum()), total + gap.size
            else:
                within += m["normalised"]["identity_layers_within"]
                total += m["normalised"]["layers"]
        return within, total

    def definition_caveat(self, models: list[dict[str, Any]]) -> str:
        """The caveat every verdict read from the paper's drift test carries: it is nearly a definition."""
        within, total = self.identity_layers(models)
        return (f"nearly a definition: the average cosine equals (‖x̄‖₂ / E‖x‖)² within {IDENTITY_TOL} on {within} "
                f"of these {total} layers, so the test measures that identity, blurred by how the scale E‖x‖ "
                "moves across layers")

    def significant_share(self) -> Interval:
        """Share of the pretrained Transformers whose anisotropy follows the drift by the paper's test: a
        positive Spearman ρ across layers between ‖x̄‖₂ and the average cosine with the exact permutation
        p < 0.05 (a negative one is not "following"), with its exact binomial (Clopper–Pearson) interval over the
        models — which keeps a width when every model, or none, follows."""
        from scipy import stats as sps

        hits = [self.follows(self.model_test(m)) for m in self.transformers()]
        k, n = int(sum(hits)), len(hits)
        ci = sps.binomtest(k, n).proportion_ci(confidence_level=0.95, method="exact")
        return Interval(k / n, float(ci.low), float(ci.high), n, "binomial")

    @staticmethod
    def follows(t: dict[str, Any], reading: str = "spearman") -> bool:
        """A layer test that says the anisotropy follows the drift: positive and p < 0.05 (Spearman with its
        exact permutation p; `reading="pearson"`: Pearson's r and its p, the paper's Fig. 16)."""
        if reading == "pearson":
            return t["pearson_p"] < ALPHA and t["pearson_r"] > 0
        return t["p_exact"] < ALPHA and t["rho"] > 0

    def share_counts(self) -> dict[str, int]:
        """Over the pretrained Transformers: how many follow the drift (Spearman, Pearson), how many have a
        significant Spearman test of either sign (the count the paper's bars give), and how many are negative
        among those."""
        tests = [self.model_test(m) for m in self.transformers()]
        sig = [t for t in tests if t["p_exact"] < ALPHA]
        return {"models": len(tests), "spearman": sum(self.follows(t) for t in tests),
                "pearson": sum(self.follows(t, "pearson") for t in tests), "either_sign": len(sig),
                "negative": sum(t["rho"] < 0 for t in sig)}

    # ------------------------------------------------------------------ Biś et al.: the cosine once the mean is removed

    @staticmethod
    def isotropic_line(d: int) -> float:
        """The 95th percentile of one isotropic pair's cosine at width d (the paper's Appendix B line)."""
        return A.isotropic_cosine_quantile(0.95, int(d))

    @staticmethod
    def jackknife(theta: float, loo) -> Interval:
        """`theta` with its leave-one-out jackknife interval from the leave-one-out values `loo`: pseudo-values
        K·θ − (K − 1)·θ₍₋ᵢ₎, θ ± t·SE with K − 1 degrees of freedom (`core.stats.jackknife_interval`'s rule)."""
        from scipy import stats as sps

        loo = np.asarray(loo, float)
        k = loo.size
        pseudo = k * theta - (k - 1) * loo
        half = float(sps.t.ppf(0.975, k - 1)) * float(pseudo.std(ddof=1) / np.sqrt(k))
        return Interval(theta, theta - half, theta + half, k, "jackknife")

    def centred_pairs(self, m: dict[str, Any], layer: int) -> Interval:
        """A layer's mean-removed average cosine over its `n_pairs` sampled pairs, ±1.96 standard errors."""
        c, se = m["cos_centred"][layer], m["cos_centred_se"][layer]
        return Interval(c, c - 1.96 * se, c + 1.96 * se, self.n_pairs, "normal")

    def centred_rows_by_layer(self) -> list[dict[str, Any]]:
        """Per pretrained Transformer, its layer whose mean-removed average cosine reaches furthest toward the
        isotropic line (the reach: the larger |bound| of its interval over the line): the sampled pairs' reading
        for every model, and the jackknife over inputs where measured (`centred_jack`)."""
        rows = []
        for m in self.transformers():
            line = np.array([self.isotropic_line(d) for d in m["dims"]])
            pairs = [self.centred_pairs(m, i) for i in range(len(line))]
            reach = [max(abs(iv.low), abs(iv.high)) / q for iv, q in zip(pairs, line, strict=True)]
            row = {"model": m["name"], "d": int(m["dims"][-1]), "layer": int(np.argmax(reach)),
                   "pairs": pairs[int(np.argmax(reach))], "pairs_reach": float(max(reach))}
            j = next((r for r in self.centred_jack if r["name"] == m["name"]), None)
            if j is not None:
                jk = [self.jackknife(c, loo) for c, loo in zip(j["centred"], j["leave_one_out"], strict=True)]
                jr = [max(abs(iv.low), abs(iv.high)) / q for iv, q in zip(jk, line, strict=True)]
                k = int(np.argmax(jr))
                row |= {"jk_layer": k, "jackknife": jk[k], "jk_reach": float(jr[k]), "jk_pairs": pairs[k],
                        "unit": j["unit"], "inputs": j["inputs"]}
            row["line"] = float(line[row.get("jk_layer", row["layer"])])
            rows.append(row)
        return rows

    def centred_decider(self) -> dict[str, Any] | None:
        """The layer that decides Biś et al.'s test: over the models read with the jackknife over inputs, the
        layer whose interval reaches furthest toward the isotropic line; without such a reading, the layer whose
        sampled pairs reach furthest. None without Transformers."""
        rows = self.centred_rows_by_layer()
        jk = [r for r in rows if "jackknife" in r]
        if jk:
            return max(jk, key=lambda r: r["jk_reach"])
        return max(rows, key=lambda r: r["pairs_reach"]) if rows else None

    def single_pair_margin(self) -> tuple[dict[str, Any], Interval]:
        """The paper's Fig. 18 reading: per pretrained Transformer, its average cosine over layers (sampled pairs)
        minus the 95th percentile of a *single* isotropic pair's cosine at its width; the model where it is
        smallest, with ±1.96 SE of the pair sampling."""
        def margin(m: dict[str, Any]) -> tuple[float, float]:
            c, se = self.mean_over_layers(m)
            return c - A.isotropic_cosine_quantile(0.95, int(m["dims"][-1])), se
        m = min(self.transformers(), key=lambda m: margin(m)[0])
        v, se = margin(m)
        return m, Interval(v, v - 1.96 * se, v + 1.96 * se, self.n_pairs, "normal")

    def _instead(self, group: list[dict[str, Any]], paper: str) -> str:
        """"" when every model of `group` is one of the paper's, else "on <models> in place of <paper>"."""
        if group and all(m["name"] in PAPER_NAMES for m in group):
            return ""
        return f"on {' and '.join(m['name'] for m in group)} in place of {paper}"

    def findings(self) -> list[Finding]:
        """The paper's §3 claims (and the drift explanation it cites), in the paper's order, the test closest
        to the paper's setting first for each claim. Every test names the models it measured (`members`)."""
        ts = self.transformers()
        names = tuple(m["name"] for m in ts)
        scale = "the models that load offline"          # which ones stand in for the paper's: each finding's `reduced`
        common = dict(paper="godey2024", chapter="anisotropy", scale=scale)
        offline = ("" if all(m["name"] in PAPER_NAMES for m in ts) else
                   f"on {len(ts)} Transformers that load offline in place of the paper's")

        def peak_finding(key: str, claim_id: str, where: str, claim: str, group: list[dict[str, Any]],
                         paper: str) -> Finding:
            weak, layer = self.weakest_peak(group)
            null = self.null_of(group)
            listed = ", ".join(m["name"] for m in group)
            return Finding(
                key=key, claim_id=claim_id, where=where, section="anisotropy-layers", claim=claim,
                measured=f"{listed}, every layer" + (f"; the weakest is {weak['name']} (its layer {layer})"
                                                     if len(group) > 1 else f"; its peak is layer {layer}"),
                quantity="the smallest, over models, of the peak-layer average cosine (sampled pairs, ±1.96 SE)",
                effect=self.layer_interval(weak, layer), direction="above", reference=null,
                reference_label=f"the isotropic null of a {self.n_pairs:,}-pair average, ≤ {null:.4f}",
                reduced=self._instead(group, paper), digits=3, label=listed,
                members=tuple(m["name"] for m in group), **common)

        out = []
        if ts:
            out.append(Finding(
                key="anisotropy-transformers", claim_id="godey-abstract-modalities", where="abstract; Figs. 1–3",
                section="anisotropy-layers", claim="Transformers across tokenisations and modalities display "
                "significant anisotropy in at least one of their layers.",
                measured=f"{len(ts)} pretrained Transformers ({', '.join(names)}), every layer; the "
                         f"weakest is {self.weakest_peak()[0]['name']} (its layer {self.weakest_peak()[1]})",
                quantity="the smallest, over models, of the peak-layer average cosine (sampled pairs, ±1.96 SE)",
                effect=self.layer_interval(*self.weakest_peak()), direction="above", reference=self.null_of(ts),
                reference_label=f"the isotropic null of a {self.n_pairs:,}-pair average, ≤ {self.null_of(ts):.4f}",
                reduced=offline, digits=3, label=f"{len(ts)} Transformers", members=names, **common))
        if sub := self.group("subword"):
            out.append(peak_finding("anisotropy-subword", "godey-fig1-subword", "Fig. 1",
                                    "Token-level (subword) language models display high average cosine across their "
                                    "layers.", sub, "BERT, RoBERTa, GPT-2 and T5"))
        out += self._centred_findings(common)
        char = self.group("character")
        if char:
            out.append(peak_finding("anisotropy-bytes", "godey-fig2-character", "Fig. 2",
                                    "Character- and byte-level language models display significant anisotropy in at "
                                    "least one of their layers.", char, "CharacterBERT, CANINE, MANTa-LM and ByT5"))
            for b in char:
                # a language model's subword objective first (the paper's subword models are LMs); a sentence
                # encoder's last training is contrastive, which is known to lower anisotropy
                for s_ in sorted(sub, key=lambda m: m["name"] in SENTENCE_ENCODERS):
                    short = "MiniLM" if "MiniLM" in s_["name"] else s_["name"].split("-")[0]
                    out.append(Finding(
                        key=finding_key(BYTES_VS_KEYS, s_["name"], "anisotropy.BYTES_VS_KEYS"),
                        claim_id="godey-fig2-bytes-higher", where="Fig. 2",
                        section="anisotropy-layers",
                        claim="Models based solely on characters or bytes display even higher anisotropy than subword "
                              "models.",
                        measured=f"{b['name']} against {s_['name']}, every layer of each on WikiText-103 test text",
                        quantity="average cosine over layers (embeddings included), byte-level minus subword "
                                 "(sampled pairs, ±1.96 SE)",
                        effect=self.level_gap(b, s_), direction="above",
                        reduced="" if all(m["name"] in PAPER_NAMES for m in (b, s_)) else
                        f"on {b['name']} against {s_['name']} (stand-ins)",
                        digits=3, label=f"{b['name']} vs {short}", members=(b["name"],), **common))
        if speech := self.group("speech"):
            speech_claim = dict(claim_id="godey-fig3-speech", where="Fig. 3a", section="anisotropy-layers",
                                claim="Every layer of every speech model has an average cosine of at least 0.2.",
                                direction="above", reference=0.2, reference_label="the paper's 0.2")
            # the paper's own model first: it decides the claim
            for m in (m for m in speech if m["name"] in PAPER_OFFLINE):
                out.append(Finding(
                    key=finding_key(SPEECH_KEYS, m["name"], "anisotropy.SPEECH_KEYS"), **speech_claim,
                    measured=f"{m['name']}'s encoder only, every layer; its lowest is layer "
                             f"{int(np.argmin(m['cos_exact']))}",
                    quantity="the lowest layer average cosine of its encoder (sampled pairs, ±1.96 SE)",
                    effect=self.lowest_layer([m]),
                    reduced=f"on {m['name']}'s encoder alone (one of the paper's three speech models), FSDD spoken "
                            "digits in place of Common Voice", digits=3, label=f"{m['name']} encoder",
                    members=(m["name"],), **common))
            low = min(speech, key=lambda m: min(m["cos_exact"]))
            listed = " and ".join(m["name"] for m in speech)
            out.append(Finding(
                key="anisotropy-speech", **speech_claim,
                measured=f"the encoders of {', '.join(m['name'] for m in speech)}: every layer; the lowest is "
                         f"{low['name']}'s layer {int(np.argmin(low['cos_exact']))}",
                quantity="the smallest layer average cosine over the speech encoders (sampled pairs, ±1.96 SE)",
                effect=self.lowest_layer(speech),
                reduced=f"on the encoders of {listed}, FSDD spoken digits in place of the paper's three models on "
                        "Common Voice", digits=3, label=f"{listed} encoders",
                members=tuple(m["name"] for m in speech), **common))
        if vision := self.group("vision"):
            out.append(peak_finding("anisotropy-vision", "godey-fig3-vision", "Fig. 3b",
                                    "Vision Transformers show significant anisotropy on some of their layers.", vision,
                                    "ViT, BEiT, MiT and DeiT"))
        cnn = self.cnn()
        if cnn is not None and self.cnn_boot:
            n_img = self.cnn_boot["images"]
            out.append(Finding(
                key="anisotropy-cnn", claim_id="godey-fig4-cnn", where="Fig. 4", section="anisotropy-cnn",
                claim="Most convolution-based vision models are isotropic (whole feature maps flattened); EfficientNet "
                      "is among them.",
                measured=f"{cnn['name']} on {n_img} CIFAR-10 test images, whole maps flattened (one vector per image "
                         f"and block); {self.cnn_boot['draws']:,} bootstrap resamples of the images",
                quantity="average cosine of whole flattened maps, median over the block outputs (bootstrap over "
                         "images)",
                effect=self.cnn_map_cosine(), direction="equal", margin=0.1, reference_label="0 (isotropic)",
                reduced=f"on one CNN ({cnn['name']}), {n_img} images", digits=3, label=cnn["name"],
                members=(cnn["name"],), **common))
        out += self._drift_findings(ts, offline, common)
        if ts:
            low, gap = self.single_pair_margin()
            out.append(Finding(
                key="anisotropy-single-pair-null", claim_id="godey-fig18-null", where="Fig. 18 (Appendix B)",
                section="anisotropy-null",
                claim="The average cosine levels of Transformers are significantly unlikely between isotropic "
                      "Gaussian vectors: above the 95th percentile of a single pair's cosine at their width.",
                measured=f"{len(ts)} pretrained Transformers, each model's average cosine over its layers; the "
                         f"closest to the line is {low['name']}",
                quantity="average cosine over layers minus the single-pair 95th percentile at the model's width, "
                         "smallest over models (sampled pairs, ±1.96 SE)",
                effect=gap, direction="above", reference_label="0 (on the paper's line)",
                reduced=offline, digits=3, label=f"{len(ts)} Transformers", members=names, **common))
        return out

    def _centred_findings(self, common: dict[str, Any]) -> list[Finding]:
        """Biś et al.'s "removing the mean gives a nearly perfect isotropy", as they read it (the average cosine,
        against the paper's isotropic line), and the book's test of the centred cloud's shape (an extension)."""
        ts = self.transformers()
        if not ts:
            return []
        out = []
        dec = self.centred_decider()
        claim = "Removing the average component from all representations leads to a nearly perfect isotropy."
        where = "§2 (citing Biś et al. 2021)"
        rows = self.centred_rows_by_layer()
        if "jackknife" in dec:
            jk = [r for r in rows if "jackknife" in r]
            rest = [r for r in rows if "jackknife" not in r]
            others = (f"; the other models' layers, by {self.n_pairs:,} sampled pairs, reach at most "
                      f"{max(r['pairs_reach'] for r in rest):.0%} of their line" if rest else "")
            measured = (f"{', '.join(r['model'] for r in jk)}: every layer, the mean removed, a jackknife over their "
                        f"inputs (text chunks, images); the closest to the line is {dec['model']}'s layer "
                        f"{dec['jk_layer']} ({dec['inputs']} {dec['unit']}, d = {dec['d']}){others}")
            effect, quantity = dec["jackknife"], ("average cosine after removing the mean, at the layer closest to the "
                                                  "isotropic line (jackknife over the inputs)")
            alternatives = (("±1.96 SE over the sampled pairs", dec["jk_pairs"]),)
            members = tuple(r["model"] for r in jk)
        else:
            measured = (f"{len(ts)} pretrained Transformers, every layer, {self.n_pairs:,} sampled pairs, the mean "
                        f"removed; the closest to the line is {dec['model']}'s layer {dec['layer']} (d = {dec['d']})")
            effect, quantity = dec["pairs"], ("average cosine after removing the mean, at the layer closest to the "
                                              "isotropic line (sampled pairs, ±1.96 SE)")
            alternatives, members = (), tuple(r["model"] for r in rows)
        out.append(Finding(
            key="anisotropy-centred-isotropy", claim_id="godey-bis-centred", where=where, section="anisotropy-shape",
            claim=claim, measured=measured, quantity=quantity, effect=effect, alternatives=alternatives,
            direction="equal", reference=0.0, margin=dec["line"],
            reference_label=f"0, within the 95th percentile of one isotropic pair's cosine at d = {dec['d']} "
                            f"(±{dec['line']:.3f}, the paper's Appendix B line)",
            reduced=f"on {len(ts)} Transformers that load offline in place of Biś et al.'s language models",
            caveat="centred vectors sum to zero, so their average cosine is near 0 whatever the cloud's shape: this "
                   "test can hardly fail (the centred cloud's spread, the extension beside it, can)",
            digits=4, label=dec["model"], members=members, **common))
        share = self.pr_share_interval()
        if share is not None:
            shaped = sorted({s_["name"] for s_ in self.shapes if s_["trained"]})
            out.append(Finding(
                key="anisotropy-centred-spread", claim_id="godey-bis-centred", kind="extension", where=where,
                section="anisotropy-shape",
                claim="Once the mean is removed, the cloud spreads over as many directions as an isotropic Gaussian's "
                      "of the same size (the shape, which the average cosine cannot see).",
                measured=f"{len(shaped)} pretrained Transformers ({', '.join(shaped)}), every layer, a "
                         f"{self.shape_share:.0%} subsample of the tokens (covariance spectrum)",
                quantity="participation ratio of the centred cloud over an isotropic Gaussian's of the same n and d: "
                         "median [smallest, largest] over layers", effect=share,
                direction="equal", reference=1.0, margin=1 - A.ISO_SHARE, reference_label="1 (an isotropic cloud)",
                reduced=f"on {len(shaped)} Transformers that load offline, a {self.shape_share:.0%} subsample of the "
                        "tokens",
                caveat="the interval is the range over layers (every layer must lie within the margin), not a "
                       "sampling interval",
                digits=2, label=f"{len(shaped)} Transformers", members=tuple(shaped), **common))
        return out

    def _drift_findings(self, ts: list[dict[str, Any]], offline: str, common: dict[str, Any]) -> list[Finding]:
        """The paper's Fig. 5 test at its unit, the layers: the share of Transformers whose anisotropy follows
        the drift, Whisper base's two readings, the CNN's."""
        out = []
        if ts:
            c = self.share_counts()
            out.append(Finding(
                key="anisotropy-drift-correlation", claim_id="godey-fig5-transformers", where="Fig. 5",
                section="anisotropy-drift",
                claim="The anisotropy level correlates with the norm of the drift ‖x̄‖₂ across layers for several "
                      "models (Spearman): it follows the drift.",
                measured=f"{len(ts)} pretrained Transformers ({', '.join(m['name'] for m in ts)}), every layer; "
                         f"{c['either_sign']} have p < {ALPHA} of either sign, {c['negative']} of them negative; by "
                         f"Pearson (App. A) {c['pearson']} follow the drift",
                quantity=f"share of the models with a positive Spearman ρ across layers and exact permutation p < "
                         f"{ALPHA} (exact binomial interval over the models)",
                effect=self.significant_share(), direction="above", digits=2, reduced=offline,
                caveat=self.definition_caveat(ts), label=f"{len(ts)} Transformers",
                members=tuple(m["name"] for m in ts), **common))
        if (t := self.speech_test()) is not None:
            b = self.speech_boot
            base = dict(where="Fig. 5", section="anisotropy-drift", claim_id="godey-fig5-speech",
                        measured=f"{b['name']}'s encoder only, on {b['clips']} FSDD recordings ({b['frames']:,} "
                                 f"positions), {t['layers']} layers (the stem's output and each block's): exact "
                                 f"permutation p = {t['p_exact']:.4f}; jackknife over the layers "
                                 f"{t['jackknife'].text(2)}; Pearson r = {t['pearson_r']:.2f}, p = "
                                 f"{t['pearson_p']:.3f} (App. A); bootstrap over the recordings "
                                 f"{t['input_bootstrap'].text(2)} (a stable layer order: no width)",
                        quantity="Spearman ρ across layers between ‖x̄‖₂ and the average cosine (Fisher-z interval "
                                 "over the layers)",
                        effect=t["fisher"], reduced=f"on {b['name']}'s encoder alone (HuBERT does not load "
                                                    "offline), FSDD spoken digits in place of Common Voice",
                        caveat=self.definition_caveat([m for m in ts if m["name"] == b["name"]] or ts),
                        members=(b["name"],), digits=2,
                        extra={"p_exact": t["p_exact"], "pearson_r": t["pearson_r"], "pearson_p": t["pearson_p"],
                               "jackknife": t["jackknife"].text(2), "input_bootstrap": t["input_bootstrap"].text(2)})
            out.append(Finding(
                key="anisotropy-speech-drift", **base, direction="none",
                claim="Some speech models (HuBERT and Whisper-base) display anisotropy that cannot be correlated with "
                      "the drift effect — the literal test: no significant Spearman correlation across layers.",
                reference_label="0 (no correlation: the paper's p > 0.05)", label=f"{b['name']} encoder, the test",
                **common))
            out.append(Finding(
                key="anisotropy-speech-drift-sign", **base, direction="at most", margin=0.0,
                claim="Some speech models (HuBERT and Whisper-base) display anisotropy that cannot be correlated with "
                      "the drift effect — the paper's point: the drift does not explain it (a drift explanation needs "
                      "a positive monotonic relation).",
                reference_label="0 (at most: a drift explanation needs ρ > 0)", label=f"{b['name']} encoder, the sign",
                **common))
        cnn = self.cnn()
        if cnn is not None and (t := self.cnn_test()) is not None:
            pos = self.model_test(cnn)
            out.append(Finding(
                key="anisotropy-cnn-drift", claim_id="godey-fig5-cnn", where="Fig. 5", section="anisotropy-drift",
                claim="The anisotropy of CNNs is generally not correlated with the drift ‖x̄‖₂ across layers.",
                measured=f"{cnn['name']} on {self.cnn_boot['images']} CIFAR-10 test images, {t['layers']} layers, "
                         f"whole maps flattened: exact permutation p = {t['p_exact']:.4f}; jackknife over the layers "
                         f"{t['jackknife'].text(2)}; Pearson r = {t['pearson_r']:.2f}, p = {t['pearson_p']:.4f} "
                         f"(App. A); bootstrap over the images {t['input_bootstrap'].text(2)}; every spatial "
                         f"position a vector instead: ρ = {pos['rho']:.2f}, p = {pos['p_exact']:.2f}",
                quantity="Spearman ρ across layers between ‖x̄‖₂ and the average cosine of flattened maps (Fisher-z "
                         "interval over the layers)",
                effect=t["fisher"], direction="none", reference_label="0 (no correlation: the paper's p > 0.05)",
                reduced=f"on one CNN ({cnn['name']}), {self.cnn_boot['images']} images",
                caveat=self.definition_caveat([cnn]), label=cnn["name"], members=(cnn["name"],), digits=2,
                extra={"p_exact": t["p_exact"], "pearson_r": t["pearson_r"], "pearson_p": t["pearson_p"],
                       "jackknife": t["jackknife"].text(2), "input_bootstrap": t["input_bootstrap"].text(2)},
                **common))
        return out


def _label(name: str, untrained: bool, zeroed: bool = False) -> str:
    trained = f"trained here, {BYTE_MLM.steps} steps" if name == BYTE_MLM_NAME else "pretrained"
    twin = "untrained twin, token type zeroed" if zeroed else "untrained twin"
    return f"{name} ({twin if untrained else trained})"


def zero_token_type(model) -> int:
    """Zero every token-type embedding table of `model` (BERT's and ALBERT's `token_type_embeddings`):
    the untrained twin without the one random vector its embedding block adds to every token. Returns how
    many tables were zeroed (ValueError when none)."""
    n = 0
    for mod in model.modules():
        emb = getattr(mod, "token_type_embeddings", None)
        if isinstance(emb, torch.nn.Embedding):
            with torch.no_grad():
                emb.weight.zero_()
            n += 1
    if not n:
        raise ValueError(f"{type(model).__name__} has no token-type embedding")
    return n


def _load(modality: str, name: str, untrained: bool, device, p: Params | None = None):
    """(model, tokenizer or processor, description) of one model. The trained byte-level MLM is trained here
    (about 20 CPU-minutes) when its checkpoint is not on this machine — unless `p.train_missing` is False (the
    book build): then `results.MissingRuns` names it and the command that makes it."""
    if name == BYTE_MLM_NAME:
        from ..train.mlm import load_step, new_mlm, weights_path

        folder = byte_mlm_folder()
        if untrained:
            torch.manual_seed(0)
            model = new_mlm(BYTE_MLM, bytelevel.VOCAB_SIZE, attn_implementation="eager").eval()
        else:
            if p is not None and not p.train_missing and not weights_path(folder, BYTE_MLM.steps).is_file():
                raise results.MissingRuns(Params.CHAPTER, p.scale, [BYTE_MLM_TRAINING],
                                          command=f"make rerun CHAPTER={Params.CHAPTER} SCALE={p.scale}")
            byte_mlm(device=device)                     # trains (about 20 min, one thread) unless done
            model = load_step(BYTE_MLM, folder, BYTE_MLM.steps, bytelevel.VOCAB_SIZE, device)
        kind = "randomly initialised (untrained) twin" if untrained else "trained here"
        return model.to(device), bytelevel.ByteTokenizer(), BYTE_MLM_DESCRIPTION + f" [{kind}]"
    if name in whisper.VARIANTS:
        model, proc = whisper.load_whisper(untrained=untrained, device=device, name=name)
        kind = "randomly initialised (untrained) twin" if untrained else "pretrained"
        return model, proc, models.DESCRIPTIONS.get(name, name) + f" [{kind}]"
    loaded = models.load(name, untrained=untrained, modality="vision" if modality == "vision" else
                         ("audio" if modality == "audio" else "text"), device=device)
    return loaded.model, loaded.tokenizer, loaded.description


@functools.lru_cache(maxsize=512)
def drift_layer_test(mean_norm: tuple[float, ...], cos: tuple[float, ...]) -> dict[str, Any]:
    """Godey et al.'s §3.3 test (Fig. 5) and its Pearson reading (App. A, Fig. 16) with the layers as the unit,
    as the paper's test has them: Spearman's ρ across layers between ‖x̄‖₂ and the average cosine, its exact
    permutation p (over all n! orderings up to 9 layers, Monte Carlo beyond: `core.stats.spearman_exact_p`),
    its Fisher-z interval over the layers (`core.stats.rank_correlation_interval`) and its jackknife over
    the layers (degenerate for a perfect rank order); Pearson's r with its p and Fisher-z interval."""
    from scipy import stats as sps

    x, y = np.asarray(mean_norm, float), np.asarray(cos, float)
    n = x.size
    rho = lambda v: float(sps.spearmanr(v[:, 0], v[:, 1]).statistic)  # noqa: E731
    pr = sps.pearsonr(x, y)
    r = float(np.clip(pr.statistic, -(1 - 1 / n**2), 1 - 1 / n**2))
    half = 1.96 / np.sqrt(n - 3)
    est = float(pr.statistic)
    low, high = float(np.tanh(np.arctanh(r) - half)), float(np.tanh(np.arctanh(r) + half))
    return {"layers": int(n), "rho": float(sps.spearmanr(x, y).statistic), "p_exact": spearman_exact_p(x, y),
            "fisher": rank_correlation_interval(x, y), "jackknife": jackknife_interval(np.column_stack([x, y]), rho),
            "pearson_r": est, "pearson_p": float(pr.pvalue),
            "pearson": Interval(est, min(low, est), max(high, est), int(n), "fisher-z")}


def _spread(n_total: int, k: int) -> list[int]:
    return sorted({int(i) for i in np.linspace(0, n_total - 1, min(k, n_total)).round()})


def measure(entry: str, untrained: bool, p: Params, device, data: dict[str, Any], zeroed: bool = False
            ) -> dict[str, Any]:
    """One model (`modality:name`), pretrained or its untrained twin (with its token-type embedding
    zeroed when `zeroed`), measured on its modality's data (`data` caches what was loaded: WikiText-103
    text, antibody chains, reactions, FSDD speech, CIFAR-10 images)."""
    modality, name = entry.split(":", 1)
    label = _label(name, untrained, zeroed)
    model, tok, description = _load(modality, name, untrained, device, p)
    if zeroed:
        zero_token_type(model)
        description += " [token-type embedding zeroed]"
    seed = stream_seed(p.seed, "pairs")
    extra: dict[str, Any] = {}
    if modality in ("text", "bytes"):
        if "text" not in data:
            data["text"] = load_wikitext103(p.text_split)
        n_layers = getattr(model.config, "num_hidden_layers", 12)
        budget = p.text_tokens if n_layers <= 12 else min(p.text_tokens, p.decoder_tokens)
        r = H.text_anisotropy(model, tok, data["text"], budget, p.chunk_len, p.batch_size, p.n_pairs, seed, desc=label)
        unit = "bytes" if modality == "bytes" else "tokens"
        what = (f"WikiText-103 {p.text_split} text: {r['tokens']:,} {unit} in chunks of {p.chunk_len} spread over "
                "the split")
    elif modality in ("protein", "chem"):
        if modality == "protein":
            chains = data.setdefault("chains", load_antibody_chains())
            seqs = [chains[i][2] for i in _spread(len(chains), p.chains)]
        else:
            seqs = data.setdefault("reactions", load_uspto50k_reactions(p.reactions, p.seed))
        ids = [tok(s_)["input_ids"][:510] for s_ in seqs]
        r = H.sequence_anisotropy(model, ids, [tok.cls_token_id], [tok.sep_token_id], tok.pad_token_id,
                                  p.batch_size, p.n_pairs, seed, desc=label)
        unk = sum(i == tok.unk_token_id for s_ in ids for i in s_)
        extra["unknown_tokens"] = int(unk)
        what = (f"{len(seqs)} antibody variable-domain chains (Jain et al. 2017), one token per residue"
                if modality == "protein" else
                f"{len(seqs)} USPTO-50K test reactions, atom maps stripped, atom-level SMILES tokens")
        what += f": {r['tokens']:,} tokens ({unk} unknown)"
    elif modality == "audio":
        if name in whisper.VARIANTS:
            if "speech" not in data:
                data["speech"] = digit_sequences(p.speech_per_speaker, 5, seed=p.seed)
            waves = [s_.waveform for s_ in data["speech"]]
            r = H.frames_anisotropy([list(h) for h in whisper.encoder_hidden_states(model, tok, waves)],
                                    p.n_pairs, seed)
            what = (f"{len(waves)} FSDD recordings of five spoken digits each (6 speakers, 0.25 s pauses, 16 kHz): "
                    f"{r['tokens']:,} encoder positions covering the audio (the 30-s padding left out)")
        else:
            if "voice" not in data:
                data["voice"] = load_common_voice(max(8, p.images // 10), seed=p.seed)
            waves, rate = data["voice"]
            r = H.audio_anisotropy(model, tok, waves, rate, p.n_pairs, seed, desc=label)
            what = f"{len(waves)} LibriSpeech clean validation utterances"
    else:
        if "images" not in data:
            data["images"] = load_cifar10("test", p.images, p.seed)[0]
        images = data["images"][:p.images]
        skip = vision_special_tokens(model)
        r = H.vision_anisotropy(model, tok, images, 16, p.n_pairs, seed, desc=label, cnn_vectors=p.cnn_vectors,
                                skip_tokens=skip)
        what = f"{len(images)} CIFAR-10 test images upsampled to 224 px"
        if "vectors_per_layer" in r and len(set(np.asarray(r["vectors_per_layer"]).tolist())) > 1:
            flat = H.vision_anisotropy(model, tok, images, 16, p.n_pairs, seed, desc=label + " (maps)",
                                       cnn_vectors="map")
            extra.update(map_cos_exact=flat["cos_exact"].tolist(), map_drift_ratio=flat["drift_ratio"].tolist())
            what += (f": every spatial position of each block's output is a vector ({r['vectors_per_layer'][0]:,} "
                     f"to {r['vectors_per_layer'][-1]:,} per layer)")
        else:
            what += f": {r['tokens']:,} patch tokens ([CLS] left out)" if skip else f": {r['tokens']:,} patch tokens"
    r = {k: v.tolist() if isinstance(v, np.ndarray) else v for k, v in r.items()}
    r.update(extra, label=label, modality=modality, name=name, trained=not untrained, zeroed=zeroed,
             description=description,
             data=what, correlation=A.drift_correlation(r["cos_exact"], r["mean_norm"]),
             normalised=A.normalised_drift_tests(r["cos_exact"], r["mean_norm"], r["avg_norm"]))
    return r


#: bootstrap draws over images of the CNN's flattened-map statistics (`cnn_map_bootstrap`)
CNN_DRAWS = 2000


def resampled_gram_stats(C: np.ndarray, G: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per resample (rows of `counts`: how often each of the n vectors is drawn) and layer (`C`, `G`: (layers, n,
    n) cosine and raw Gram matrices), the average cosine over the pairs of distinct draws, the pairs of a vector
    with its own copy left out — (cᵀCc − Σc²) / ((Σc)² − Σc²) — and ‖x̄‖₂ of the resample, √(cᵀGc) / Σc. Counts
    of ones give the all-pairs average and the mean of the n vectors. Returns two (resamples, layers) arrays."""
    counts = np.asarray(counts, float)
    total, self_pairs = counts.sum(1), (counts**2).sum(1)
    cos = (np.einsum("bi,lij,bj->bl", counts, C, counts) - self_pairs[:, None]) / (total**2 - self_pairs)[:, None]
    norm = np.sqrt(np.einsum("bi,lij,bj->bl", counts, G, counts)) / total[:, None]
    return cos, norm


@torch.no_grad()
def cnn_map_bootstrap(entry: str, p: Params, device, data: dict[str, Any], draws: int = CNN_DRAWS
                      ) -> dict[str, Any]:
    """Godey et al. Fig. 4 and §3.3 for one CNN, with their sampling over images: every layer's output map
    flattened to one vector per image (as the paper describes), the Gram matrices of those vectors (raw and
    normalised) over the `p.images` images, and `draws` bootstrap resamples of the images (multinomial counts
    c; a resample's average cosine is (cᵀCc − Σc²)/(n² − Σc²), the pairs of an image with its own copy left out,
    and its ‖x̄‖² = cᵀGc/n²). Returns per layer the exact average cosine and ‖x̄‖₂ of the maps, and per draw the
    median average cosine over the block outputs (the stem and head left out) and the Spearman ρ across layers
    between ‖x̄‖₂ and the average cosine."""
    from scipy import stats as sps

    modality, name = entry.split(":", 1)
    model, proc, _ = _load(modality, name, False, device, p)
    if "images" not in data:
        data["images"] = load_cifar10("test", p.images, p.seed)[0]
    images = data["images"][:p.images]
    vecs: list[list[Tensor]] = []
    for i in range(0, len(images), p.batch_size):
        px = proc(images=images[i:i + p.batch_size], return_tensors="pt")["pixel_values"].to(device)
        hs = model(pixel_values=px, output_hidden_states=True).hidden_states
        for li, h in enumerate(hs):
            if not vecs:
                vecs = [[] for _ in hs]
            vecs[li].append(h.float().flatten(1).cpu())
    n = len(images)
    raw, cosg = [], []
    for per_layer in vecs:
        X = torch.cat(per_layer).double()
        G = X @ X.T
        d = G.diagonal().clamp_min(1e-24).sqrt()
        raw.append(G.numpy())
        cosg.append((G / d[:, None] / d[None, :]).numpy())
    del vecs
    C, G = np.stack(cosg), np.stack(raw)                              # (layers, n, n)
    cos_exact, mean_norm = (v[0] for v in resampled_gram_stats(C, G, np.ones((1, n))))
    rng = np.random.default_rng(stream_seed(p.seed, "cnn-bootstrap"))
    counts = rng.multinomial(n, np.full(n, 1.0 / n), size=draws).astype(float)        # (draws, n)
    cos_draws, norm_draws = resampled_gram_stats(C, G, counts)
    rho = [float(sps.spearmanr(nd, cd).statistic) for nd, cd in zip(norm_draws, cos_draws, strict=True)]
    return {"name": name, "images": n, "draws": draws, "map_cos": cos_exact.tolist(),
            "map_mean_norm": mean_norm.tolist(),
            "median_draws": np.median(cos_draws[:, 1:-1], axis=1).tolist(), "rho_draws": rho,
            "rho": float(sps.spearmanr(mean_norm, cos_exact).statistic),
            "layer_low": np.percentile(cos_draws, 2.5, axis=0).tolist(),
            "layer_high": np.percentile(cos_draws, 97.5, axis=0).tolist()}


#: the speech model whose drift test (the paper's §3.3 on Whisper-base) gets a bootstrap over recordings
SPEECH_DRIFT_MODEL = "audio:whisper-base"


def resampled_frame_stats(U: np.ndarray, X: np.ndarray, n: np.ndarray, counts: np.ndarray
                          ) -> tuple[np.ndarray, np.ndarray]:
    """Per resample and layer, the average cosine and ‖x̄‖₂ of the frames of resampled recordings.

    `U[c, l]`: recording c's sum of unit-normalised frame vectors at layer l, `X[c, l]` the sum of its raw frame
    vectors, `n[c]` its frame count; `counts` (draws, recordings) multinomial counts w. With N = Σ w_c n_c and
    S = Σ w_c U_c, the average cosine over pairs of distinct frames is (‖S‖² − Σ w_c² n_c) / (N² − Σ w_c² n_c)
    (the pairs of a frame with itself and its own copies left out; w = 1 gives every pair of distinct frames,
    the record's `cos_exact`), and ‖x̄‖₂ = ‖Σ w_c X_c‖ / N."""
    N = counts @ n
    same = (counts ** 2) @ n
    S = np.einsum("kc,cld->kld", counts, U)
    cos = ((S ** 2).sum(-1) - same[:, None]) / (N ** 2 - same)[:, None]
    norm = np.linalg.norm(np.einsum("kc,cld->kld", counts, X), axis=-1) / N[:, None]
    return cos, norm


@torch.no_grad()
def speech_drift_bootstrap(entry: str, p: Params, device, data: dict[str, Any], draws: int = CNN_DRAWS
                           ) -> dict[str, Any]:
    """Godey et al. §3.3 (Fig. 5) for one Whisper model, with its sampling over recordings: the encoder's
    states on the chapter's FSDD recordings (the positions that cover audio), per recording and layer the sums
    of `resampled_frame_stats`, and `draws` bootstrap resamples of the recordings. Returns per layer the
    average cosine and ‖x̄‖₂ of all frames, the Spearman ρ across layers between them (and its p), and ρ per
    draw."""
    from scipy import stats as sps

    modality, name = entry.split(":", 1)
    model, proc, _ = _load(modality, name, False, device, p)
    if "speech" not in data:
        data["speech"] = digit_sequences(p.speech_per_speaker, 5, seed=p.seed)
    waves = [s_.waveform for s_ in data["speech"]]
    U, X, n = [], [], []
    for h in whisper.encoder_hidden_states(model, proc, waves):      # (layers + 1, frames, d)
        h = h.double()
        U.append((h / h.norm(dim=-1, keepdim=True).clamp_min(1e-12)).sum(1).numpy())
        X.append(h.sum(1).numpy())
        n.append(h.shape[1])
    U, X, n = np.stack(U), np.stack(X), np.asarray(n, float)
    cos, norm = (v[0] for v in resampled_frame_stats(U, X, n, np.ones((1, len(n)))))
    rng = np.random.default_rng(stream_seed(p.seed, "speech-bootstrap"))
    counts = rng.multinomial(len(n), np.full(len(n), 1.0 / len(n)), size=draws).astype(float)
    cos_draws, norm_draws = resampled_frame_stats(U, X, n, counts)
    rho = [float(sps.spearmanr(nd, cd).statistic) for nd, cd in zip(norm_draws, cos_draws, strict=True)]
    test = sps.spearmanr(norm, cos)
    return {"name": name, "clips": len(n), "frames": int(n.sum()), "draws": draws, "cos": cos.tolist(),
            "mean_norm": norm.tolist(), "rho": float(test.statistic), "p": float(test.pvalue), "rho_draws": rho}


#: the models whose mean-removed average cosine is read with a jackknife over their inputs (`centred_jackknife`):
#: the three whose sampled pairs put a layer closest to the isotropic line
CENTRED_MODELS = ("text:all-MiniLM-L6-v2", "text:SmolLM2-135M-Instruct", "vision:DINOv2-S/14")


@torch.no_grad()
def layer_vectors(entry: str, p: Params, device, data: dict[str, Any]) -> tuple[list[Tensor], np.ndarray, str]:
    """Every layer's vectors of one pretrained text or vision Transformer on the chapter's data, as `measure`
    takes them (text: `p.text_tokens` tokens in chunks spread over WikiText-103, special tokens fed but left
    out; vision: the patch tokens of `p.images` CIFAR-10 images, [CLS] left out), with the input each vector
    comes from. Returns (one (n, d) float32 tensor per layer, the input index of each vector, the unit's name)."""
    modality, name = entry.split(":", 1)
    model, tok, _ = _load(modality, name, False, device, p)
    layers: list[list[Tensor]] = []
    owner: list[np.ndarray] = []

    def add(states, keep: Tensor, first: int) -> None:
        per_row = keep.sum(1).tolist()
        owner.append(np.repeat(np.arange(first, first + len(per_row)), per_row))
        for li, h in enumerate(states):
            if len(layers) <= li:
                layers.append([])
            layers[li].append(h.float().cpu()[keep])

    if modality == "text":
        if "text" not in data:
            data["text"] = load_wikitext103(p.text_split)
        n_layers = getattr(model.config, "num_hidden_layers", 12)
        budget = p.text_tokens if n_layers <= 12 else min(p.text_tokens, p.decoder_tokens)
        ids = tok(data["text"], add_special_tokens=False, return_attention_mask=False, verbose=False)["input_ids"]
        pre, post = H.specials(tok)
        pad = tok.pad_token_id if tok.pad_token_id is not None else 0
        seqs = H.spread_chunks(ids, budget, p.chunk_len)
        dev = next(model.parameters()).device
        for i in range(0, len(seqs), p.batch_size):
            batch = [pre + c + post for c in seqs[i:i + p.batch_size]]
            L = max(len(e) for e in batch)
            input_ids = torch.tensor([e + [pad] * (L - len(e)) for e in batch], device=dev)
            attn = torch.tensor([[1] * len(e) + [0] * (L - len(e)) for e in batch], device=dev)
            keep = torch.tensor([[0] * len(pre) + [1] * (len(e) - len(pre) - len(post)) + [0] * (L - len(e) + len(post))
                                 for e in batch], dtype=torch.bool)
            add(model(input_ids=input_ids, attention_mask=attn, output_hidden_states=True).hidden_states, keep, i)
        unit = "text chunks"
    elif modality == "vision":
        if "images" not in data:
            data["images"] = load_cifar10("test", p.images, p.seed)[0]
        images, skip, bs = data["images"][:p.images], vision_special_tokens(model), 16
        dev = next(model.parameters()).device
        for i in range(0, len(images), bs):
            px = tok(images=images[i:i + bs], return_tensors="pt")["pixel_values"].to(dev)
            states = model(pixel_values=px, output_hidden_states=True).hidden_states
            keep = torch.zeros(states[0].shape[:2], dtype=torch.bool)
            keep[:, skip:] = True
            add(states, keep, i)
        unit = "images"
    else:
        raise ValueError(f"{entry}: the centred bootstrap reads text and vision Transformers")
    return [torch.cat(h) for h in layers], np.concatenate(owner), unit


def centred_jackknife(entry: str, p: Params, device, data: dict[str, Any]) -> dict[str, Any]:
    """Biś et al.'s test with its sampling over inputs, for one model: per layer the average cosine over all
    pairs once the mean is removed, and the same with each input (text chunk or image) left out in turn, the
    rest centred on its own mean (`core.anisotropy.centred_cosine_resamples`) — a jackknife over the inputs.
    The raw all-pairs average cosine is kept as a check that these are the record's vectors."""
    vecs, owner, unit = layer_vectors(entry, p, device, data)
    k = int(owner.max()) + 1
    leave_one_out = 1.0 - np.eye(k)
    centred, raw, loo = [], [], []
    for X in vecs:
        c, r, dr = A.centred_cosine_resamples(X, owner, leave_one_out)
        centred.append(c)
        raw.append(r)
        loo.append(dr.tolist())
    return {"name": entry.split(":", 1)[1], "unit": unit, "inputs": k, "vectors": int(len(owner)),
            "dims": [int(X.shape[1]) for X in vecs], "centred": centred, "leave_one_out": loo, "raw": raw}


def gaussian_baseline(d: int, p: Params, bins: int = 120) -> dict[str, Any]:
    """Appendix B for one dimension d: Monte Carlo cosines of isotropic Gaussians against the exact law."""
    samples = A.sample_isotropic_cosines(d, p.gaussian_samples, stream_seed(p.seed, "gaussian", d))
    density, edges = np.histogram(samples, bins=bins, density=True)
    return {"d": d, "mc_mean": float(samples.mean()), "mc_q95": float(np.quantile(samples, 0.95)),
            "exact_q95": A.isotropic_cosine_quantile(0.95, d), "asymptotic_q95": 1.645 / float(np.sqrt(d)),
            "hist_edges": edges.tolist(), "hist_density": density.tolist()}


def vision_special_tokens(model) -> int:
    """How many summary tokens lead a vision Transformer's sequence ([CLS] and any registers): left out of
    the statistics, as the special tokens of text models are (0 for a CNN)."""
    cfg = getattr(model, "config", None)
    if cfg is None or getattr(cfg, "model_type", "") not in ("dinov2", "vit", "deit", "beit", "dinov2_with_registers"):
        return 0
    return 1 + int(getattr(cfg, "num_register_tokens", 0) or 0) + (1 if cfg.model_type == "deit" else 0)


#: fields that only matter for the Gaussian baseline, the list of models or the spectrum runs: left out of each
#: model's cache key
_MODEL_KEY_DROP = ("models", "untrained_twins", "gaussian_dims", "gaussian_samples", "zeroed_twins",
                   "shape_models", "shape_share", "shape_trained_byte_mlm")


def _slug(entry: str, kind: str) -> str:
    return re.sub(r"[^A-Za-z0-9.-]+", "-", f"{entry}-{kind}")


def _special_key(entry: str) -> dict[str, str]:
    """Part of a vision Transformer's cache key: its [CLS] token is left out (text models' specials always were)."""
    vision = entry.startswith("vision:") and entry.split(":", 1)[1] not in NO_TWIN
    return {"special_tokens": "excluded"} if vision else {}


def _reason(err: Exception) -> str:
    """Why a model is left out, in one line (a missing heavy run: what it is and the command)."""
    if isinstance(err, results.MissingRuns):
        return f"needs {', '.join(err.names)}, not made here: {err.command}"
    return str(err).splitlines()[0]


def measure_models(p: Params, skipped: list[dict[str, str]] | None = None) -> list[dict[str, Any]]:
    """Every model of `p.models` (and its untrained twin when `p.untrained_twins`, for Transformers),
    each through the heavy-run cache (`results/anisotropy/book/model-*.json` at book scale). A model
    whose data neither the mirror nor the hub provides (`DataUnavailable`) is left out and listed in
    `skipped` with the reason (on Colab: the antibody chains have no hub copy)."""
    seed_everything(p.seed)
    device = choose_device(p.device)
    data: dict[str, Any] = {}
    measured = []
    for entry in p.models:
        name = entry.split(":", 1)[1]
        twins = (False, True) if p.untrained_twins and name not in NO_TWIN else (False,)
        for untrained in twins:
            slug = _slug(entry, "untrained" if untrained else "pretrained")
            try:
                rec, _ = results.cached(p, f"model-{slug}",
                                        lambda e=entry, u=untrained: measure(e, u, p, device, data),
                                        drop=_MODEL_KEY_DROP, model=entry, untrained=untrained, **_special_key(entry))
            except (DataUnavailable, results.MissingRuns) as err:
                if skipped is None:
                    raise
                skipped.append({"model": entry, "reason": _reason(err)})
                break
            rec["label"] = _label(name, untrained)            # labels are not part of the measurement
            measured.append(rec)
    return measured


def measure_zeroed(p: Params, skip: set[str]) -> list[dict[str, Any]]:
    """The untrained twin with its token-type embedding zeroed, for every model of `p.models` in
    `TOKEN_TYPE` (full data budget; cached as `model-<entry>-untrained-zeroed.json`)."""
    if not p.zeroed_twins:
        return []
    device, data, out = choose_device(p.device), {}, []
    for entry in p.models:
        name = entry.split(":", 1)[1]
        if name not in TOKEN_TYPE or entry in skip:
            continue
        rec, _ = results.cached(p, f"model-{_slug(entry, 'untrained-zeroed')}",
                                lambda e=entry: measure(e, True, p, device, data, zeroed=True),
                                drop=_MODEL_KEY_DROP, model=entry, untrained=True, token_type="zeroed")
        rec["label"] = _label(name, True, zeroed=True)
        out.append(rec)
    return out


#: what a spectrum run keeps of `measure`'s record
SHAPE_KEYS = ("cos_exact", "dims", "tokens", "drift_ratio", "pr", "pr_iso", "top1", "top3", "top10", "rms_cos_k0",
              "rms_cos_k1", "rms_cos_k3", "rms_cos_k10", "mean_split_cos", "drift_over_top", "data")


def shape_params(p: Params) -> Params:
    """The data budgets of the spectrum runs: `p.shape_share` of each of `p`'s (at least two of anything)."""
    f = p.shape_share
    return p.with_(text_tokens=max(16, round(p.text_tokens * f)), decoder_tokens=max(16, round(p.decoder_tokens * f)),
                   chains=max(2, round(p.chains * f)), reactions=max(2, round(p.reactions * f)),
                   speech_per_speaker=max(1, round(p.speech_per_speaker * f)), images=max(1, round(p.images * f)))


DECODER = "text:SmolLM2-135M-Instruct"


def _final_norm(q: Params) -> dict[str, Any]:
    """SmolLM2's last point on `q`'s text budget, before and after its final RMSNorm."""
    loaded = models.load(DECODER.split(":", 1)[1], device=choose_device(q.device))
    budget = min(q.text_tokens, q.decoder_tokens)
    return H.final_norm_cosines(loaded.model, loaded.tokenizer, load_wikitext103(q.text_split), budget, q.chunk_len,
                                q.batch_size)


def measure_shapes(p: Params, skip: set[str]) -> list[dict[str, Any]]:
    """The centred cloud's spectrum per layer (`core.anisotropy.centred_shape`) for every model of
    `p.shape_models` that this run measures, pretrained and untrained twin, on `shape_params(p)`'s
    subsample of the data (cached as `shape-<entry>-<kind>.json`). The trained byte-level MLM only when
    `p.shape_trained_byte_mlm` (its checkpoint is not kept: it retrains)."""
    q = shape_params(p)
    device, data, out = choose_device(p.device), {}, []
    for entry in p.shape_models:
        name = entry.split(":", 1)[1]
        if entry not in p.models or entry in skip:
            continue
        for untrained in (False, True) if p.untrained_twins else (False,):
            if name == BYTE_MLM_NAME and not untrained and not p.shape_trained_byte_mlm:
                continue
            def compute(e=entry, u=untrained):
                r = measure(e, u, q, device, data)
                return {k: r[k] for k in SHAPE_KEYS}
            try:
                rec, _ = results.cached(q, f"shape-{_slug(entry, 'untrained' if untrained else 'pretrained')}",
                                        compute, drop=_MODEL_KEY_DROP, model=entry, untrained=untrained,
                                        **_special_key(entry))
            except results.MissingRuns:
                continue                                # the trained byte MLM, not on this machine: left out
            rec.update(name=name, trained=not untrained, label=_label(name, untrained))
            out.append(rec)
    return out


def run(p: Params) -> Result:
    """`measure_models(p)`, the byte-level MLM's training record when it is among the models, then the
    isotropic-Gaussian baseline for every d of `p.gaussian_dims`."""
    skipped: list[dict[str, str]] = []
    measured = measure_models(p, skipped)
    gone = {s_["model"] for s_ in skipped}
    zeroed = measure_zeroed(p, gone)
    shapes = measure_shapes(p, gone)
    final_norm = None
    if DECODER in p.models and DECODER not in gone:
        q = shape_params(p)
        final_norm, _ = results.cached(q, "smollm-final-norm", lambda: _final_norm(q), drop=_MODEL_KEY_DROP,
                                       model=DECODER)
    byte_rec = None
    if any(e.split(":", 1)[1] == BYTE_MLM_NAME for e in p.models):
        def train() -> dict[str, Any]:
            if not p.train_missing:
                raise results.MissingRuns(Params.CHAPTER, p.scale, [BYTE_MLM_TRAINING],
                                          command=f"make rerun CHAPTER={Params.CHAPTER} SCALE={p.scale}")
            return byte_mlm(device=choose_device(p.device))
        try:
            byte_rec, _ = results.cached(p, "byte-mlm-training", train, drop=_MODEL_KEY_DROP,
                                         config=BYTE_MLM.stored())
        except results.MissingRuns:
            byte_rec = None
    cnn_boot = None
    cnn_entry = next((e for e in p.models if e.split(":", 1)[1] in NO_TWIN and e not in gone), None)
    if cnn_entry is not None:
        cnn_boot, _ = results.cached(p, "cnn-map-bootstrap",
                                     lambda: cnn_map_bootstrap(cnn_entry, p, choose_device(p.device), {}),
                                     drop=_MODEL_KEY_DROP, model=cnn_entry, draws=CNN_DRAWS)
    speech_boot = None
    if SPEECH_DRIFT_MODEL in p.models and SPEECH_DRIFT_MODEL not in gone:
        speech_boot, _ = results.cached(p, "speech-drift-bootstrap",
                                        lambda: speech_drift_bootstrap(SPEECH_DRIFT_MODEL, p, choose_device(p.device),
                                                                       {}),
                                        drop=_MODEL_KEY_DROP, model=SPEECH_DRIFT_MODEL, draws=CNN_DRAWS)
    centred_jack = []
    for entry in (e for e in CENTRED_MODELS if e in p.models and e not in gone):
        try:
            rec, _ = results.cached(p, f"centred-jackknife-{_slug(entry, 'pretrained')}",
                                    lambda e=entry: centred_jackknife(e, p, choose_device(p.device), {}),
                                    drop=_MODEL_KEY_DROP, model=entry, **_special_key(entry))
        except results.MissingRuns:
            continue                                    # the book build without the committed run: pairs only
        centred_jack.append(rec)
    planted = {"clusters + drift": A.cloud_shape(A.planted_clusters_and_drift(seed=p.seed), p.n_pairs, p.seed),
               "isotropic + drift": A.cloud_shape(A.planted_clusters_and_drift(clusters=2000, seed=p.seed),
                                                  p.n_pairs, p.seed)}
    # cheap and deterministic: read back where committed, else computed (even by a run that may not train)
    keep = ("seed", "gaussian_dims", "gaussian_samples")
    gaussian, _ = results.cached_run(p.CHAPTER, "gaussian-baseline", p,
                                     p.cache_key(drop=tuple(f for f in p.cache_key() if f not in keep)),
                                     lambda: [gaussian_baseline(d, p) for d in p.gaussian_dims], p.scale)
    return Result(models=measured, gaussian=gaussian, byte_mlm=byte_rec,
                  skipped=skipped, n_pairs=p.n_pairs, planted=planted, zeroed=zeroed, shapes=shapes,
                  shape_share=p.shape_share, final_norm=final_norm, cnn_boot=cnn_boot,
                  speech_boot=speech_boot, centred_jack=centred_jack)


# ------------------------------------------------------------------ the byte-level MLM trained here (Fig. 2 row)

#: a small BERT with a byte vocabulary (256 bytes + 4 specials), trained here with the book's MLM code on
#: WikiText-103 validation text; sized for about 20 minutes on one free CPU thread (bf16 autocast; 28 min measured
#: on a thread shared with other jobs)
BYTE_MLM = PretrainConfig(layers=4, d_model=256, n_heads=4, d_ff=1024, seq_len=256, batch_size=16, steps=600,
                          lr=1e-3, dropout=0.0, checkpoint_steps=(0, 100, 300, 600), resume_every=100)
BYTE_MLM_NAME = "byte-MLM"
#: the heavy run behind the trained byte-level MLM's measurements (its checkpoint is never committed)
BYTE_MLM_TRAINING = "byte-MLM pretraining (about 20 CPU-minutes, one thread)"
BYTE_MLM_DESCRIPTION = (f"a byte-level MLM BERT trained here ({BYTE_MLM.steps} steps): {BYTE_MLM.layers} layers, "
                        f"{BYTE_MLM.d_model} wide, 260 tokens (256 bytes + 4 specials), masked-LM on WikiText-103 "
                        "validation text; a small stand-in for the paper's character-level models, not CANINE or ByT5")


def byte_mlm_folder(cfg: PretrainConfig = BYTE_MLM) -> Path:
    """Checkpoints of the byte-level MLM: `_build/checkpoints/anisotropy/<hash>/` (never committed)."""
    return results.checkpoint_dir(Params.CHAPTER, {"byte_mlm": cfg.stored(), "train": "wikitext-103 validation",
                                                   "eval": "wikitext-103 test", "precision": "bf16"})


def unigram_cross_entropy(train: Tensor, held_out: Tensor) -> float:
    """Cross-entropy (nats) of the held-out bytes under the training bytes' unigram distribution
    (add-one smoothed over the 256 byte values; specials excluded): the baseline an MLM must beat."""
    counts = torch.bincount(train[train < 256].flatten(), minlength=256).double() + 1
    logp = (counts / counts.sum()).log()
    return float(-logp[held_out[held_out < 256].flatten()].mean())


def byte_mlm(cfg: PretrainConfig = BYTE_MLM, eval_sequences: int = 64, device: Any = "cpu") -> dict[str, Any]:
    """Train (or resume, or find finished) the byte-level MLM on `device`; returns its training record: held-out
    MLM loss per checkpoint step (masked bytes of WikiText-103 test text, nats), the unigram-byte
    baseline on the same text, steps and wall time."""
    tok = bytelevel.ByteTokenizer()
    train = training_chunks(tok, cfg.seq_len, "validation")
    held = training_chunks(tok, cfg.seq_len, "test")[:eval_sequences]
    hist = pretrain(cfg, train, byte_mlm_folder(cfg), tok=tok, eval_chunks=held, precision="bf16", device=device)
    return {"eval_loss": {int(k): float(v) for k, v in hist["eval_loss"].items()},
            "unigram_loss": unigram_cross_entropy(train, held), "steps": cfg.steps,
            "train_sequences": int(len(train)), "wall_time_s": float(hist.get("wall_time_s", 0.0)),
            "final_train_loss": float(np.mean(hist["loss"][-50:]))}
