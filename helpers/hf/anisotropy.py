"""Hidden states of every layer, streamed into `core.anisotropy.LayerAccumulator`, for text, speech
and vision models (Godey et al. §3): the layer-wise anisotropy of a model over a whole corpus."""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import Tensor

from ..book.runtime import progress
from ..core.anisotropy import LayerAccumulator, sample_pairs
from .walk import encoder_of  # encoder-decoder models (T5, ByT5, Whisper) are measured on their encoder


def specials(tokenizer) -> tuple[list[int], list[int]]:
    """Special tokens a model expects around a chunk: [CLS] … [SEP] for BERT-style encoders, BOS
    for decoders. They are fed to the model but excluded from the statistics."""
    cls, sep, bos = (getattr(tokenizer, a, None) for a in ("cls_token_id", "sep_token_id", "bos_token_id"))
    if cls is not None and sep is not None:
        return [cls], [sep]
    return ([bos] if bos is not None else []), []


@torch.no_grad()
def text_anisotropy(model, tokenizer, text: str, max_tokens: int, chunk_len: int = 256, batch_size: int = 8,
                    n_pairs: int = 20_000, seed: int = 0, desc: str = "forward") -> dict[str, np.ndarray]:
    """Godey et al. §3: hidden representations of contiguous chunks of `text` (the first
    `max_tokens` tokens), special tokens excluded; per layer the average cosine similarity over
    uniformly drawn pairs of token positions from the whole corpus (and, exactly, over all pairs),
    and the drift norm ‖x̄‖₂."""
    ids = tokenizer(text[: max_tokens * 12], add_special_tokens=False, return_attention_mask=False,
                    verbose=False)["input_ids"][:max_tokens]
    if len(ids) < 2:
        raise ValueError("the text gave fewer than two tokens")
    chunks = [ids[i:i + chunk_len] for i in range(0, len(ids), chunk_len)]
    acc = LayerAccumulator(sample_pairs(len(ids), n_pairs, seed))
    model = encoder_of(model)
    dev = next(model.parameters()).device
    pre, post = specials(tokenizer)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    batches = [chunks[i:i + batch_size] for i in range(0, len(chunks), batch_size)]
    for batch in progress(batches, desc=desc, total=len(batches)):
        enc = [pre + c + post for c in batch]
        special = [[0] * len(pre) + [1] * len(c) + [0] * len(post) for c in batch]
        L = max(len(e) for e in enc)
        input_ids = torch.tensor([e + [pad] * (L - len(e)) for e in enc], device=dev)
        attn = torch.tensor([[1] * len(e) + [0] * (L - len(e)) for e in enc], device=dev)
        keep = torch.tensor([s + [0] * (L - len(s)) for s in special], dtype=torch.bool)   # real, non-special
        out = model(input_ids=input_ids, attention_mask=attn, output_hidden_states=True)
        acc.add([h.float().cpu()[keep] for h in out.hidden_states])
    return acc.result()


@torch.no_grad()
def audio_anisotropy(model, feature_extractor, waveforms: list[np.ndarray], sampling_rate: int,
                     n_pairs: int = 20_000, seed: int = 0, desc: str = "forward") -> dict[str, np.ndarray]:
    """The same measurements on a speech model (wav2vec 2.0, HuBERT, Whisper's encoder): every frame
    of every utterance, one utterance at a time (Godey et al. §3.2, Common Voice)."""
    model = encoder_of(model)
    dev = next(model.parameters()).device
    feats = []
    for w in progress(waveforms, desc=desc, total=len(waveforms)):
        inp = feature_extractor(w, sampling_rate=sampling_rate, return_tensors="pt").to(dev)
        out = model(**inp, output_hidden_states=True)
        feats.append([h[0].float().cpu() for h in out.hidden_states])
    acc = LayerAccumulator(sample_pairs(sum(f[0].shape[0] for f in feats), n_pairs, seed))
    for f in feats:
        acc.add(f)
    return acc.result()


@torch.no_grad()
def vision_anisotropy(model, processor, images: list, batch_size: int = 32, n_pairs: int = 20_000, seed: int = 0,
                      desc: str = "forward") -> dict[str, np.ndarray]:
    """The same measurements on a vision model: every patch token (and [CLS]) of every image for
    Transformers; for convolutional models (4-D hidden states) each feature map is flattened to one
    vector per image, as Godey et al. do for Figure 4."""
    dev = next(model.parameters()).device
    feats_all: list[list[Tensor]] = []
    for i in progress(range(0, len(images), batch_size), desc=desc, total=math.ceil(len(images) / batch_size)):
        px = processor(images=images[i:i + batch_size], return_tensors="pt")["pixel_values"].to(dev)
        out = model(pixel_values=px, output_hidden_states=True)
        hs = [h.flatten(1) if h.dim() == 4 else h.flatten(0, 1) for h in out.hidden_states]
        feats_all.append([h.float().cpu() for h in hs])
    total = sum(f[0].shape[0] for f in feats_all)
    acc = LayerAccumulator(sample_pairs(total, n_pairs, seed))
    for f in feats_all:
        acc.add(f)
    return acc.result()
