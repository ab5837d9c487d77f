"""The anisotropy chapter's parameters: the models it measures, by modality, `Params` with its presets and
rules, and the byte-level MLM trained here (its configuration)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from ...machinery.params import ChapterParams, positive, rules
from ...train.mlm import PretrainConfig

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
#: the paper's models as it names them, by the figure that shows them: what a test on the offline models stands in
#: for (its `reduced` names them; its distance counts them)
PAPER_FIGURES = {
    "subword": ("BERT", "RoBERTa", "GPT-2", "T5"),                                   # Fig. 1
    "character": ("CharacterBERT", "CANINE-c", "CANINE-s", "MANTa-LM", "ByT5"),      # Fig. 2, §3.1
    "speech": ("wav2vec 2.0", "HuBERT", "Whisper"),                                   # Fig. 3a, §3.2
    "vision": ("ViT", "BEiT", "MiT", "DeiT"),                                         # Fig. 3b, §3.2
    "cnn": ("ResNet", "EfficientNet", "CvT", "ConvNeXt", "VAN"),                      # Fig. 4, §3.2
}
#: the paper's Transformers (Figs. 1–3)
PAPER_TRANSFORMERS = tuple(m for k in ("subword", "character", "speech", "vision") for m in PAPER_FIGURES[k])
#: the speech models whose anisotropy the paper finds uncorrelated with the drift (Fig. 5, §3.3)
PAPER_SPEECH_UNCORRELATED = ("HuBERT", "Whisper-base")
#: the paper's models by the names a record holds: a finding on these only is at the paper's setting
PAPER_NAMES = frozenset(e.split(":", 1)[1] for e in PAPER_ANISOTROPY_MODELS) | frozenset(PAPER_OFFLINE)
#: the paper's character- and byte-level text models (Fig. 2), among the `text:` entries
CHARACTER_LEVEL = frozenset({"google/canine-c", "google/canine-s", "google/byt5-small"})
#: subword models whose last training is a contrastive sentence objective, not a language model's
SENTENCE_ENCODERS = frozenset({"all-MiniLM-L6-v2"})
#: the finding key of the byte-level model against each subword model (Fig. 2), by the subword model's name
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

