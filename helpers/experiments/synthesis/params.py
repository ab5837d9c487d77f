"""The synthesis chapter's parameters: `Params` with its presets and rules, and the names the runs, the Result and
the findings share (the ranked and headline measures, the operations, the level, the model of the t_cos
comparison)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from ...core.papers import SOFTDECAY_ALPHA
from ...machinery.params import ChapterParams, rules

#: the measures whose rank agreement across layers the chapter reads (sign: + where a larger value is more
#: collapsed; the participation ratio falls as a cloud collapses)
RANKED = ("cos", "cos_centred", "drift", "pr", "top3", "ev1", "tokenuni", "rbf_dis", "skew", "t_sim")
#: the three papers' headline measures
HEADLINE = {"godey2024": "cos", "yan2022": "ev1", "yu2024": "t_sim"}
#: the operations applied to one layer
OPERATIONS = ("softdecay", "whitening", "centred")
LEVEL = 0.95
#: the model on which the chapter sets Godey et al.'s average cosine beside Yu & Zhang's t_cos
TCOS_MODEL = "all-MiniLM-L6-v2"


@dataclass(frozen=True)
class Params(ChapterParams):
    """The three papers' measures side by side on the offline models and their untrained twins."""

    models: tuple[str, ...] = ("all-MiniLM-L6-v2", "all-mpnet-base-v2", "SmolLM2-135M-Instruct", "AntiBERTy",
                               "rxnmapper-ALBERT", "DINOv2-S/14", "EfficientNet-Lite0", "whisper-tiny.en",
                               "whisper-base")
    text_inputs: int = 96          # sentences (and antibody chains, SMILES) in each text-like probe
    image_inputs: int = 32
    audio_inputs: int = 12
    draws: int = 200
    twins: int = 5                 # untrained twins per model (seeds seed, seed + 1, …)
    max_tokens: int = 128          # a text cut to its first 128 tokens; at most 128 patches / frames per input
    alpha: float = SOFTDECAY_ALPHA            # SoftDecay's α (Yan et al.'s default)

    CHAPTER: ClassVar[str] = "synthesis"
    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {
        "ci": dict(models=("all-MiniLM-L6-v2",), text_inputs=32, draws=100),
        "book": dict(),
        "paper": dict(text_inputs=128, image_inputs=48, audio_inputs=32, max_tokens=256),
    }
    RULES: ClassVar = rules(
        models=(lambda v: len(v) >= 1, "needs at least one model"),
        text_inputs=(lambda v: v >= 8, "needs at least 8 inputs"),
        image_inputs=(lambda v: v >= 8, "needs at least 8 inputs"),
        audio_inputs=(lambda v: v >= 4, "needs at least 4 inputs"),
        draws=(lambda v: v >= 20, "needs at least 20 bootstrap draws"),
        twins=(lambda v: v >= 2, "needs at least 2 twins (the spread of random initialisations)"),
        alpha=(lambda v: -1 <= v < 0, "SoftDecay's α lies in [−1, 0)"),
    )


def as_floats(values: list) -> np.ndarray:
    """A stored list (None where a value is missing) as floats, NaN for None."""
    return np.array([np.nan if v is None else v for v in values], dtype=float)


def probe_size(p: Params, modality: str) -> int:
    """How many inputs a probe of `modality` holds (`image_inputs`, `audio_inputs`, or `text_inputs`)."""
    return {"vision": p.image_inputs, "audio": p.audio_inputs}.get(modality, p.text_inputs)



