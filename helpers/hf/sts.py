"""Sentence encoding for STS: one pass of a loaded Hugging Face encoder (its hidden states `hidden.{l}`, read by
`hf.capture.Capture`) that keeps only pooled quantities (`core.sts.TokenStates`), and `SoftDecayEncoder`, the
sentence-transformers interface."""

from __future__ import annotations

import hashlib

import numpy as np
import torch
from torch import Tensor

from ..core import measures as M
from ..core.kept import Kept
from ..core.papers import SOFTDECAY_ALPHA
from ..core.softdecay import softdecay_transform
from ..core.sts import TokenStates, pool
from ..machinery.runtime import progress
from .capture import Capture, blocks

#: the encodings kept inside `kept_encodings()`: (model, texts' digest, count, max_length, batch_size) ->
#: (token_alpha, TokenStates)
_KEPT = Kept(512 * 2**20, lambda v: _nbytes(v[1]))


def kept_encodings(max_bytes: int | None = None):
    """Within this block `encode` hands back what it encoded before for the same model, texts (in the same
    order), length and batch size, instead of a second pass: the same batches through the same model, so the
    same numbers. A request without token-level SoftDecay takes an encoding made with it (the pass and the
    pooled means are the same; `token_sd_last` is dropped). The oldest encodings are let go beyond `max_bytes`
    (512 MiB)."""
    return _KEPT.scope(max_bytes)


def _nbytes(e: TokenStates) -> int:
    return sum(t.numel() * t.element_size() for t in (e.layer_means, e.cls_last, e.token_sd_last) if t is not None)


@torch.no_grad()
def encode(loaded, texts: list[str], max_length: int = 128, batch_size: int = 32,
           token_alpha: float | None = SOFTDECAY_ALPHA, desc: str = "encode") -> TokenStates:
    """Run the model once over `texts` (batched by length) and keep only pooled quantities.
    With `token_alpha`, Algorithm 1 is applied to each sentence's last-layer token matrix (real
    tokens only) before pooling — SoftDecay at the token level, as §4.3 states. Inside `kept_encodings()` a
    repeated request is answered from the first pass."""
    if not _KEPT.active:
        return _encode(loaded, texts, max_length, batch_size, token_alpha, desc)
    key = (loaded.model, hashlib.sha1("\x1f".join(texts).encode()).hexdigest(), len(texts), max_length, batch_size)
    got = _KEPT.get(key)
    if got is not None and (token_alpha is None or got[0] == token_alpha):
        e = got[1]
        return e if token_alpha is not None else TokenStates(e.layer_means, e.cls_last, None)
    e = _encode(loaded, texts, max_length, batch_size, token_alpha, desc)
    _KEPT.put(key, (token_alpha, e))
    return e


def _encode(loaded, texts: list[str], max_length: int, batch_size: int, token_alpha: float | None,
            desc: str) -> TokenStates:
    model, tok = loaded.model, loaded.tokenizer
    dev = next(model.parameters()).device
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    means, cls, tsd = [], [], []
    batches = [order[i:i + batch_size] for i in range(0, len(order), batch_size)]
    cap = Capture(model, qk=False)
    for idx in progress(batches, desc=desc, total=len(batches)):
        enc = tok([texts[i] for i in idx], padding=True, truncation=True, max_length=max_length,
                  return_tensors="pt").to(dev)
        hs = blocks(cap(hidden=True, **enc), "hidden")
        mask = enc["attention_mask"].bool()
        means.append(torch.stack([M.row_mean(h.float(), mask) for h in hs], 1).cpu())   # (b, layers, d)
        cls.append(hs[-1][:, 0].float().cpu())
        if token_alpha is not None:
            tsd.append(M.row_mean(softdecay_transform(hs[-1].float(), token_alpha, mask), mask).cpu())
    inv = torch.empty(len(order), dtype=torch.long)
    inv[torch.tensor(order)] = torch.arange(len(order))
    return TokenStates(torch.cat(means)[inv], torch.cat(cls)[inv], torch.cat(tsd)[inv] if tsd else None)


class SoftDecayEncoder:
    """A sentence encoder with the sentence-transformers interface `encode(list[str]) -> ndarray`,
    so MTEB or sentence-transformers users can evaluate SoftDecay like any other encoder.

    `mode="token"` applies Algorithm 1 to each sentence's last-layer tokens (batch-independent);
    `mode="sentence"` applies it to the matrix of all sentences passed in one `encode` call (as the
    authors' STS code does per sentence set), so results depend on what is encoded together.
    """

    def __init__(self, loaded, alpha: float = SOFTDECAY_ALPHA, pooling: str = "first_last", mode: str = "token",
                 max_length: int = 128, batch_size: int = 32) -> None:
        if mode not in ("token", "sentence", "none"):
            raise ValueError(f"mode {mode!r}: use 'token', 'sentence' or 'none'")
        self.loaded, self.alpha, self.pooling, self.mode = loaded, alpha, pooling, mode
        self.max_length, self.batch_size = max_length, batch_size

    def encode(self, sentences: list[str], batch_size: int | None = None, convert_to_numpy: bool = True,
               **_: object) -> np.ndarray | Tensor:
        if isinstance(sentences, str):
            sentences = [sentences]
        e = encode(self.loaded, list(sentences), self.max_length, batch_size or self.batch_size,
                   token_alpha=self.alpha if self.mode == "token" else None, desc="SoftDecayEncoder")
        out = pool(e, self.pooling, token_level=self.mode == "token")
        if self.mode == "sentence" and out.shape[0] > 1:
            out = softdecay_transform(out, self.alpha)
        return out.numpy() if convert_to_numpy else out


__all__ = ["encode", "kept_encodings", "SoftDecayEncoder"]
