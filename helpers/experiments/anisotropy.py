"""The anisotropy chapter (Godey et al. §3, Appendices A-B): layer-wise anisotropy and drift norm of
real pretrained text, vision and speech models and of their untrained twins, the drift–anisotropy
correlation tests, and the isotropic-Gaussian baseline."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from ..book import results
from ..book.params import ChapterParams, positive, rules
from ..book.runtime import choose_device, seed_everything, stream_seed
from ..core import anisotropy as A
from ..data import load_cifar10, load_common_voice, load_wikitext103
from ..hf import anisotropy as H
from ..hf import models

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
class Params(ChapterParams):
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
    RULES: ClassVar = rules(
        models=(lambda v: len(v) > 0 and all(x.split(":", 1)[0] in ("text", "vision", "audio") and ":" in x
                                             for x in v), "each entry is 'text:<id>', 'vision:<id>' or 'audio:<id>'"),
        text_tokens=(lambda v: v >= 16, "needs >= 16 tokens"), decoder_tokens=(lambda v: v >= 16, "needs >= 16 tokens"),
        images=(lambda v: v >= 1, "needs >= 1 image"), chunk_len=(lambda v: 8 <= v <= 510, "must lie in [8, 510]"),
        batch_size=positive, n_pairs=(lambda v: v >= 100, "needs >= 100 pairs"),
        gaussian_dims=(lambda v: len(v) > 0 and all(x >= 3 for x in v), "every d must be >= 3"),
        gaussian_samples=(lambda v: v >= 1000, "needs >= 1000 samples"),
    )


@dataclass
class Result(results.Result):
    """Everything the anisotropy chapter shows. `models`: one entry per measured model (pretrained
    and untrained twin), with its label, modality, name, `trained`, description, and per layer
    (embeddings first) `cos_exact`, `cos_sampled`, `cos_sampled_se`, `mean_norm` (‖x̄‖₂), `avg_norm`,
    `dims`; `tokens` (vectors measured) and `correlation` (Spearman and Pearson tests between ‖x̄‖₂
    and the average cosine). `gaussian`: per dimension d, the Monte Carlo mean and 95th percentile of
    the cosine of isotropic Gaussians, the exact percentile, 1.645/√d, and a histogram."""

    models: list[dict[str, Any]]
    gaussian: list[dict[str, Any]]

    def above_isotropic(self) -> dict[str, tuple[int, int]]:
        """Per model: (layers whose average cosine exceeds the isotropic 95th percentile of their
        width, layers)."""
        return {m["label"]: (sum(c > A.isotropic_cosine_quantile(0.95, int(d))
                                 for c, d in zip(m["cos_exact"], m["dims"], strict=True)), len(m["cos_exact"]))
                for m in self.models}

    def sampling_z(self) -> np.ndarray:
        """|sampled − exact| / standard error over every layer of every model."""
        return np.concatenate([np.abs(np.subtract(m["cos_sampled"], m["cos_exact"]))
                               / np.clip(m["cos_sampled_se"], 1e-12, None) for m in self.models])


def measure(entry: str, untrained: bool, p: Params, device, data: dict[str, Any]) -> dict[str, Any]:
    """One model (`modality:name`), pretrained or its untrained twin, measured on its modality's data
    (`data` caches what was loaded: WikiText-103 text, CIFAR-10 images, Common Voice utterances)."""
    modality, name = entry.split(":", 1)
    label = f"{name} ({'untrained' if untrained else 'pretrained'})"
    loaded = models.load(name, untrained=untrained, modality=modality, device=device)
    pairs_seed = stream_seed(p.seed, "pairs")
    if modality == "text":
        if "text" not in data:
            data["text"] = load_wikitext103("validation")
        n_layers = getattr(loaded.model.config, "num_hidden_layers", 12)
        budget = p.text_tokens if n_layers <= 12 else min(p.text_tokens, p.decoder_tokens)
        r = H.text_anisotropy(loaded.model, loaded.tokenizer, data["text"], budget, p.chunk_len, p.batch_size,
                              p.n_pairs, pairs_seed, desc=label)
    elif modality == "vision":
        if "images" not in data:
            data["images"] = load_cifar10("test", p.images, p.seed)[0]
        r = H.vision_anisotropy(loaded.model, loaded.tokenizer, data["images"], 16, p.n_pairs, pairs_seed, desc=label)
    else:
        if "voice" not in data:
            data["voice"] = load_common_voice(max(8, p.images // 10), seed=p.seed)
        waves, rate = data["voice"]
        r = H.audio_anisotropy(loaded.model, loaded.tokenizer, waves, rate, p.n_pairs, pairs_seed, desc=label)
    r = {k: v.tolist() if isinstance(v, np.ndarray) else v for k, v in r.items()}
    r.update(label=label, modality=modality, name=name, trained=not untrained, description=loaded.description,
             correlation=A.drift_correlation(r["cos_exact"], r["mean_norm"]))
    return r


def gaussian_baseline(d: int, p: Params, bins: int = 120) -> dict[str, Any]:
    """Appendix B for one dimension d: Monte Carlo cosines of isotropic Gaussians against the exact law."""
    samples = A.sample_isotropic_cosines(d, p.gaussian_samples, stream_seed(p.seed, "gaussian", d))
    density, edges = np.histogram(samples, bins=bins, density=True)
    return {"d": d, "mc_mean": float(samples.mean()), "mc_q95": float(np.quantile(samples, 0.95)),
            "exact_q95": A.isotropic_cosine_quantile(0.95, d), "asymptotic_q95": 1.645 / float(np.sqrt(d)),
            "hist_edges": edges.tolist(), "hist_density": density.tolist()}


def run(p: Params) -> Result:
    """Every model of `p.models` (and its untrained twin when `p.untrained_twins`), then the
    isotropic-Gaussian baseline for every d of `p.gaussian_dims`."""
    seed_everything(p.seed)
    device = choose_device(p.device)
    data: dict[str, Any] = {}
    measured = [measure(entry, untrained, p, device, data)
                for entry in p.models for untrained in ((False, True) if p.untrained_twins else (False,))]
    return Result(models=measured, gaussian=[gaussian_baseline(d, p) for d in p.gaussian_dims])
