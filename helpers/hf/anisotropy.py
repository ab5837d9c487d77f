"""Hidden states of every layer, streamed into `core.anisotropy.LayerAccumulator`, for text, speech
and vision models (Godey et al. §3): the layer-wise anisotropy of a model over a whole corpus."""

from __future__ import annotations

import hashlib
import json
import math

import numpy as np
import torch
from torch import Tensor

from ..core.anisotropy import LayerAccumulator, sample_pairs
from ..machinery.runtime import progress
from .walk import encoder_of  # Whisper (audio) is measured on its encoder; T5/ByT5 text on encoder + decoder


def specials(tokenizer) -> tuple[list[int], list[int]]:
    """Special tokens a model expects around a chunk: [CLS] … [SEP] for BERT-style encoders, BOS
    for decoders. They are fed to the model but excluded from the statistics."""
    cls, sep, bos = (getattr(tokenizer, a, None) for a in ("cls_token_id", "sep_token_id", "bos_token_id"))
    if cls is not None and sep is not None:
        return [cls], [sep]
    return ([bos] if bos is not None else []), []


def spread_chunks(ids: list[int], max_tokens: int, chunk_len: int) -> list[list[int]]:
    """Contiguous chunks of `chunk_len` tokens covering about `max_tokens` tokens, spread evenly over
    the whole corpus `ids` (not its opening articles): all of it, cut in chunks, when it is no longer
    than `max_tokens`; otherwise ceil(max_tokens / chunk_len) full chunks at evenly spaced offsets."""
    if len(ids) <= max_tokens:
        return [ids[i:i + chunk_len] for i in range(0, len(ids), chunk_len)]
    n_full = len(ids) // chunk_len
    k = min(n_full, math.ceil(max_tokens / chunk_len))
    picks = np.unique(np.linspace(0, n_full - 1, k).round().astype(int))
    return [ids[i * chunk_len:(i + 1) * chunk_len] for i in picks]


@torch.no_grad()
def sequence_anisotropy(model, sequences: list[list[int]], pre: list[int], post: list[int], pad: int,
                        batch_size: int = 8, n_pairs: int = 20_000, seed: int = 0,
                        desc: str = "forward") -> dict[str, np.ndarray]:
    """Godey et al. §3 on token-id sequences (text chunks, antibody chains, reaction SMILES): each
    sequence is wrapped in the model's special tokens `pre` … `post`, which are fed to the model but
    excluded from the statistics; per layer the exact all-pairs average cosine over every token of
    every sequence, the sampled-pairs estimate, the drift norm ‖x̄‖₂ and the mean-removed cosine."""
    if sum(len(c) for c in sequences) < 2:
        raise ValueError("the sequences hold fewer than two tokens")
    acc = LayerAccumulator(sample_pairs(sum(len(c) for c in sequences), n_pairs, seed))
    seq2seq = (bool(getattr(getattr(model, "config", None), "is_encoder_decoder", False))
               and hasattr(model, "get_decoder"))
    if not seq2seq:
        model = encoder_of(model)
    dev = next(model.parameters()).device
    batches = [sequences[i:i + batch_size] for i in range(0, len(sequences), batch_size)]
    for bi, batch in enumerate(progress(batches, desc=desc, total=len(batches))):
        enc = [pre + c + post for c in batch]
        special = [[0] * len(pre) + [1] * len(c) + [0] * len(post) for c in batch]
        L = max(len(e) for e in enc)
        input_ids = torch.tensor([e + [pad] * (L - len(e)) for e in enc], device=dev)
        attn = torch.tensor([[1] * len(e) + [0] * (L - len(e)) for e in enc], device=dev)
        keep = torch.tensor([s + [0] * (L - len(s)) for s in special], dtype=torch.bool)   # real, non-special
        if seq2seq:
            # Godey et al. concatenate encoder and decoder layers: the decoder reads the same text shifted
            # right by one (teacher forcing), so decoder position t holds token t's prediction state
            start = model.config.decoder_start_token_id
            dec = torch.cat([torch.full_like(input_ids[:, :1], start), input_ids[:, :-1]], dim=1)
            out = model(input_ids=input_ids, attention_mask=attn, decoder_input_ids=dec,
                        decoder_attention_mask=attn, output_hidden_states=True)
            states = [*out.encoder_hidden_states, *out.decoder_hidden_states]
        else:
            out = model(input_ids=input_ids, attention_mask=attn, output_hidden_states=True)
            states = out.hidden_states
        half = torch.tensor([(bi * batch_size + j) % 2 for j in range(len(batch))])[:, None].expand(-1, L)[keep]
        inputs = torch.arange(len(batch))[:, None].expand(-1, L)[keep]             # each token's sequence
        acc.add([_to_characters(h, L, model).float().cpu()[keep] for h in states], half, inputs)  # halves: parity
    return acc.result()


def _to_characters(h: Tensor, L: int, model) -> Tensor:
    """A hidden state (B, L', d) on the character grid (B, L, d). CANINE's middle layers run on the
    downsampled sequence ([CLS] + one "molecule" per `downsampling_rate` characters): each character
    gets the vector of the molecule that covers it, as CANINE's own upsampling (`_repeat_molecules`)
    does — so those layers' vectors repeat `downsampling_rate` times among the sampled pairs."""
    if h.shape[1] == L:
        return h
    rate = getattr(model.config, "downsampling_rate", None)
    if rate is None:
        raise ValueError(f"hidden state of length {h.shape[1]} for {L} tokens, and no downsampling rate")
    idx = (1 + torch.arange(L, device=h.device) // rate).clamp(max=h.shape[1] - 1)
    return h[:, idx]


#: a process's corpus tokenisations (`corpus_ids`), at most two: a model and its untrained twin tokenise one text
_CORPUS_IDS: dict[tuple[str, str, str], list[int]] = {}


def corpus_ids(tokenizer, text: str) -> list[int]:
    """The token ids of `text` without special tokens. A fast tokenizer's ids are kept for the process,
    keyed by its serialised definition (vocabulary, normaliser, pre-tokeniser; not the truncation and padding
    state a call leaves in it) and the text's SHA-1:
    a model and its untrained twin load two equal tokenizers and tokenise the same corpus once. The list
    is shared: read it, do not change it."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        return tokenizer(text, add_special_tokens=False, return_attention_mask=False, verbose=False)["input_ids"]
    definition = {k: v for k, v in json.loads(backend.to_str()).items() if k not in ("truncation", "padding")}
    key = (type(tokenizer).__name__, hashlib.sha1(json.dumps(definition, sort_keys=True).encode("utf-8")).hexdigest(),
           hashlib.sha1(text.encode("utf-8")).hexdigest())
    if key not in _CORPUS_IDS:
        if len(_CORPUS_IDS) >= 2:
            _CORPUS_IDS.clear()
        _CORPUS_IDS[key] = tokenizer(text, add_special_tokens=False, return_attention_mask=False,
                                     verbose=False)["input_ids"]
    return _CORPUS_IDS[key]


def text_anisotropy(model, tokenizer, text: str, max_tokens: int, chunk_len: int = 256, batch_size: int = 8,
                    n_pairs: int = 20_000, seed: int = 0, desc: str = "forward") -> dict[str, np.ndarray]:
    """Godey et al. §3 on a corpus: the whole `text` is tokenised and about `max_tokens` tokens are
    taken as contiguous chunks spread evenly over it (`spread_chunks`), special tokens excluded;
    per layer the average cosine similarity over all pairs (and over uniformly drawn pairs), the drift
    norm ‖x̄‖₂ and the mean-removed cosine."""
    ids = corpus_ids(tokenizer, text)
    if len(ids) < 2:
        raise ValueError("the text gave fewer than two tokens")
    pre, post = specials(tokenizer)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    return sequence_anisotropy(model, spread_chunks(ids, max_tokens, chunk_len), pre, post, pad, batch_size,
                               n_pairs, seed, desc)


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


def frames_anisotropy(clips: list[list[Tensor]], n_pairs: int = 20_000, seed: int = 0) -> dict[str, np.ndarray]:
    """The same measurements on precomputed hidden states: `clips[i][l]` the (frames, d) states of
    layer l for clip i (e.g. Whisper's encoder restricted to the frames that cover real audio)."""
    acc = LayerAccumulator(sample_pairs(sum(c[0].shape[0] for c in clips), n_pairs, seed))
    for c in clips:
        acc.add([h.float() for h in c])
    return acc.result()


def _vectors(h: Tensor, cnn_vectors: str, skip_tokens: int = 0) -> Tensor:
    """One layer's output as rows of vectors: the tokens of a Transformer (B, L, d), the first
    `skip_tokens` ([CLS], registers) left out; for a CNN's (B, C, H, W) map either every spatial
    position (`position`: B·H·W vectors of C) or the flattened map (`map`: B vectors of C·H·W, as Godey
    et al. describe Figure 4)."""
    if h.dim() == 4:
        return h.permute(0, 2, 3, 1).reshape(-1, h.shape[1]) if cnn_vectors == "position" else h.flatten(1)
    return h[:, skip_tokens:].flatten(0, 1)


@torch.no_grad()
def vision_anisotropy(model, processor, images: list, batch_size: int = 32, n_pairs: int = 20_000, seed: int = 0,
                      desc: str = "forward", cnn_vectors: str = "position", skip_tokens: int = 0
                      ) -> dict[str, np.ndarray]:
    """The same measurements on a vision model: every patch token of every image for Transformers (the
    first `skip_tokens`, [CLS] and registers, left out); for convolutional models (4-D hidden states)
    the vectors of `_vectors(cnn_vectors)`.
    Layers may hold different numbers of vectors (a CNN's maps shrink): each layer has its own
    accumulator and pair draw, sized from the first batch; images stream through in batches."""
    if cnn_vectors not in ("position", "map"):
        raise ValueError("cnn_vectors must be 'position' or 'map'")
    dev = next(model.parameters()).device
    accs: list[LayerAccumulator] = []
    for i in progress(range(0, len(images), batch_size), desc=desc, total=math.ceil(len(images) / batch_size)):
        batch = images[i:i + batch_size]
        px = processor(images=batch, return_tensors="pt")["pixel_values"].to(dev)
        out = model(pixel_values=px, output_hidden_states=True)
        hs = [_vectors(h.float().cpu(), cnn_vectors, skip_tokens) for h in out.hidden_states]
        if not accs:
            per_image = [h.shape[0] // len(batch) for h in hs]
            accs = [LayerAccumulator(sample_pairs(k * len(images), n_pairs, seed + li))
                    for li, k in enumerate(per_image)]
        for acc, h in zip(accs, hs, strict=True):           # each image's vectors are contiguous: one input each
            acc.add([h], inputs=torch.arange(len(batch)).repeat_interleave(h.shape[0] // len(batch)))
    per_layer = [a.result() for a in accs]
    r = {k: np.concatenate([p[k] for p in per_layer]) for k in per_layer[0] if k not in ("tokens", "inputs")}
    r["tokens"] = per_layer[-1]["tokens"]
    if "inputs" in per_layer[0]:
        r["inputs"] = per_layer[-1]["inputs"]
    r["vectors_per_layer"] = np.array([p["tokens"] for p in per_layer])
    return r


@torch.no_grad()
def final_norm_cosines(model, tokenizer, text: str, max_tokens: int, chunk_len: int = 256,
                       batch_size: int = 8) -> dict[str, float]:
    """Whether a decoder's final norm is what lowers its last point: the exact average cosine over all
    real tokens of the last block's output *before* the final norm (the norm's input, by a forward
    hook), after it (the norm's output), of the last hidden state transformers returns, and of the
    layer before (`previous`, the last block's input) — on about
    `max_tokens` tokens of `text` in chunks spread over it (`spread_chunks`), BOS fed but left out."""
    from ..core.measures import pairwise_cosine_mean

    base = getattr(model, "model", model)             # a causal LM's decoder stack (LlamaModel)
    norm = getattr(base, "norm", None)
    if norm is None:
        raise ValueError(f"{type(base).__name__} has no final norm")
    ids = tokenizer(text, add_special_tokens=False, return_attention_mask=False, verbose=False)["input_ids"]
    pre, post = specials(tokenizer)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    seqs = spread_chunks(ids, max_tokens, chunk_len)
    grabbed: dict[str, Tensor] = {}
    hook = norm.register_forward_hook(lambda mod, inp, out: grabbed.update(before=inp[0], after=out))
    keep_all: dict[str, list[Tensor]] = {"previous": [], "before": [], "after": [], "returned": []}
    try:
        for i in range(0, len(seqs), batch_size):
            batch = seqs[i:i + batch_size]
            enc = [pre + c + post for c in batch]
            L = max(len(e) for e in enc)
            input_ids = torch.tensor([e + [pad] * (L - len(e)) for e in enc])
            attn = torch.tensor([[1] * len(e) + [0] * (L - len(e)) for e in enc])
            keep = torch.tensor([[0] * len(pre) + [1] * len(c) + [0] * (L - len(pre) - len(c)) for c in batch],
                                dtype=torch.bool)
            out = base(input_ids=input_ids, attention_mask=attn, output_hidden_states=True)
            keep_all["before"].append(grabbed["before"].float()[keep])
            keep_all["after"].append(grabbed["after"].float()[keep])
            keep_all["returned"].append(out.hidden_states[-1].float()[keep])
            keep_all["previous"].append(out.hidden_states[-2].float()[keep])
    finally:
        hook.remove()
    res = {k: float(pairwise_cosine_mean(torch.cat(v).double())) for k, v in keep_all.items()}
    res["tokens"] = int(sum(v.shape[0] for v in keep_all["before"]))
    return res
