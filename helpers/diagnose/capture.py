"""Every layer's representations of a probe, and where the attention projections are reachable the mean
query and mean key of every head, per probe input — what `diagnose.measures` reads.

A layer's vectors are the tokens of a text or sequence model (special tokens fed but left out), the patch
tokens of a vision Transformer ([CLS] and registers left out), the spatial positions of a CNN's maps, the
frames of a speech encoder that cover real audio. One number, `max_tokens`, bounds the vectors of one input, so
one long input does not outweigh the others:

* text and sequences: the input is cut to its first `max_tokens` tokens before the forward pass (the special
  tokens the tokenizer adds come on top, up to the model's own length limit). Cutting before the model, not
  after, keeps a long line's forward pass as cheap as a short one's, and every vector measured is one the model
  computed on the text it was given; `Captured.cut` counts the inputs cut;
* images and recordings: the model sees the whole input, and at most `max_tokens` of its patch tokens,
  positions or frames are kept, evenly spaced (their number is set by the model, not by the input)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch
from torch import Tensor, nn

from ..hf.capture import Capture, blocks
from ..hf.walk import encoder_of
from ..machinery.runtime import progress
from .probe import Probe

#: vision Transformers whose first hidden-state token is [CLS] (then `num_register_tokens` registers)
_CLS_VISION = ("vit", "deit", "beit", "dinov2", "dinov2_with_registers", "data2vec-vision")


@dataclass
class Captured:
    """`layers[l]` = (X (N, n, d) float32, mask (N, n) bool) for the N probe inputs at layer l (0: the
    embeddings); `qk[b]` = (mean-query sums (N, h, d_k), mean-key sums (N, h, d_k), vector counts (N,)) of
    attention call b (block b + 1), or `qk` None with `qk_skipped` saying why."""

    layers: list[tuple[Tensor, Tensor]]
    units: str
    qk: list[tuple[Tensor, Tensor, Tensor]] | None = None
    qk_skipped: str = ""
    notes: list[str] = field(default_factory=list)
    cut: int = 0

    @property
    def n_inputs(self) -> int:
        return int(self.layers[0][0].shape[0])


def _keep_evenly(idx: Tensor, max_tokens: int) -> Tensor:
    if idx.numel() <= max_tokens:
        return idx
    return idx[torch.from_numpy(np.linspace(0, idx.numel() - 1, max_tokens).round().astype(np.int64))]


class _Stack:
    """Collects per-input (n_i, d) vectors of every layer, then pads them to (N, n_max, d) with a mask."""

    def __init__(self) -> None:
        self.rows: list[list[Tensor]] = []          # layer -> inputs

    def add(self, per_layer: list[Tensor]) -> None:
        if not self.rows:
            self.rows = [[] for _ in per_layer]
        for store, x in zip(self.rows, per_layer, strict=True):
            store.append(x.float().cpu())

    def padded(self) -> list[tuple[Tensor, Tensor]]:
        out = []
        for xs in self.rows:
            n = max(x.shape[0] for x in xs)
            X = torch.zeros(len(xs), n, xs[0].shape[-1])
            m = torch.zeros(len(xs), n, dtype=torch.bool)
            for i, x in enumerate(xs):
                X[i, :x.shape[0]] = x
                m[i, :x.shape[0]] = True
            out.append((X, m))
        return out


def _qk_capture(model: nn.Module) -> tuple[Capture | None, str]:
    """A capture of every block's per-head queries and keys (`hf.capture.Capture`), or (None, why not)."""
    try:
        return Capture(model), ""
    except (ValueError, AttributeError) as err:
        return None, f"the walker finds no attention projections: {str(err).splitlines()[0]}"


def _qk_sums(rec: dict[str, Tensor], keep: Tensor) -> list[tuple[Tensor, Tensor]]:
    """Per attention call, the sums over each input's kept positions of the queries and keys (B, h, d_k)."""
    out = []
    for q, k in zip(blocks(rec, "attn.q"), blocks(rec, "attn.k"), strict=True):
        w = keep.to(q.device, q.dtype)[:, None, :, None]
        out.append(((q * w).sum(2).float().cpu(), (k * w).sum(2).float().cpu()))
    return out


class _QKStack:
    def __init__(self) -> None:
        self.q: list[list[Tensor]] = []
        self.k: list[list[Tensor]] = []
        self.n: list[Tensor] = []

    def add(self, sums: list[tuple[Tensor, Tensor]], counts: Tensor) -> None:
        if not self.q:
            self.q, self.k = [[] for _ in sums], [[] for _ in sums]
        for b, (qs, ks) in enumerate(sums):
            self.q[b].append(qs)
            self.k[b].append(ks)
        self.n.append(counts.float().cpu())

    def result(self) -> list[tuple[Tensor, Tensor, Tensor]]:
        n = torch.cat(self.n)
        return [(torch.cat(q), torch.cat(k), n) for q, k in zip(self.q, self.k, strict=True)]


@torch.no_grad()
def capture(loaded, probe: Probe, device: torch.device, batch_size: int, max_tokens: int = 256,
            qk: bool = True, label: str | None = None, specials: bool = False) -> Captured:
    """Run the probe through `loaded.model` (a `hf.models.Loaded`) and collect every layer's vectors; the
    progress bar reads "<label>: forward passes" ("model", "twin 3 of 5"). `specials`: a text's special tokens
    are kept among its vectors (Yu & Zhang's t_cos reads them; every measure of the tool leaves them out)."""
    model, tok = loaded.model, loaded.tokenizer
    desc = f"{label}: forward passes" if label else "forward passes"
    if probe.modality in ("text", "protein", "chem"):
        return _sequences(model, tok, probe, device, batch_size, max_tokens, qk, desc, specials)
    if probe.modality == "vision":
        return _vision(model, tok, probe, device, batch_size, max_tokens, qk, desc)
    return _audio(loaded, probe, device, max_tokens, desc)


def _vocab_tokenizer(tok) -> bool:
    """Whether `tok` is `hf.sequence_models.VocabTokenizer` (residues, SMILES atoms) rather than a Hugging Face
    tokenizer."""
    return hasattr(tok, "all_special_ids") and not hasattr(tok, "batch_decode")


def token_counts(tok, items: list[str]) -> list[int]:
    """How many real (non-special) tokens each input holds, before any cut."""
    if _vocab_tokenizer(tok):
        return [len(tok(s)["input_ids"]) for s in items]
    return [len(x) for x in tok(items, add_special_tokens=False, truncation=False, verbose=False)["input_ids"]]


def check_tokens(tok, items: list[str], max_tokens: int) -> int:
    """Refuse (`ProbeError`, one line) a probe in which fewer than two inputs hold two tokens or more, before any
    forward pass; return how many inputs `max_tokens` cuts."""
    from .probe import ProbeError

    counts = token_counts(tok, items)
    usable = sum(c >= 2 for c in counts)
    if usable < 2:
        raise ProbeError(f"the probe's inputs hold {max(counts)} token(s) at most, and {usable} of {len(counts)} "
                         "hold two or more: a measure needs two inputs of two tokens or more (one input per line)")
    return sum(c > max_tokens for c in counts)


def _max_length(tok, max_tokens: int) -> int:
    """`max_tokens` real tokens plus the special tokens the tokenizer adds, within the model's own limit."""
    try:
        extra = int(tok.num_special_tokens_to_add())
    except (AttributeError, TypeError, NotImplementedError):
        extra = 2
    limit = getattr(tok, "model_max_length", None)
    total = max_tokens + extra
    return min(total, int(limit)) if isinstance(limit, int) and 0 < limit < 1_000_000 else total


def _encode(tok, items: list[str], max_tokens: int = 256, specials: bool = False) -> tuple[Tensor, Tensor, Tensor]:
    """(input_ids, attention_mask, keep): each input cut to its first `max_tokens` tokens (special tokens added
    beyond); keep marks real, non-special tokens (every token the model attends to, with `specials`)."""
    if _vocab_tokenizer(tok):                                       # hf.sequence_models' tokenizer
        ids = [tok(s)["input_ids"][:min(max_tokens, 510)] for s in items]
        enc = [[tok.cls_token_id, *x, tok.sep_token_id] for x in ids]
        L = max(len(e) for e in enc)
        input_ids = torch.tensor([e + [tok.pad_token_id] * (L - len(e)) for e in enc])
        attn = torch.tensor([[1] * len(e) + [0] * (L - len(e)) for e in enc])
        keep = torch.tensor([[0] + [1] * len(x) + [0] * (L - len(x) - 1) for x in ids], dtype=torch.bool)
        return input_ids, attn, attn.bool() if specials else keep
    enc = tok(items, padding=True, truncation=True, max_length=_max_length(tok, max_tokens), return_tensors="pt",
              return_special_tokens_mask=True)
    attn = enc["attention_mask"]
    keep = attn.bool() if specials else attn.bool() & ~enc["special_tokens_mask"].bool()
    return enc["input_ids"], attn, keep


def _sequences(model, tok, probe, device, batch_size, max_tokens, want_qk, desc="forward passes",
               specials: bool = False) -> Captured:
    cut = check_tokens(tok, probe.items, max_tokens)
    seq2seq = bool(getattr(getattr(model, "config", None), "is_encoder_decoder", False))
    net = encoder_of(model) if seq2seq else model
    cap, why = _qk_capture(net) if want_qk else (None, "not asked for")
    order = sorted(range(len(probe.items)), key=lambda i: len(probe.items[i]))
    stack, qks, kept_order = _Stack(), _QKStack(), []
    batches = [order[i:i + batch_size] for i in range(0, len(order), batch_size)]
    with cap or Capture(net, qk=False) as run:
        for idx in progress(batches, desc=desc, total=len(batches)):
            ids, attn, keep = _encode(tok, [probe.items[i] for i in idx], max_tokens, specials)
            most = ids.shape[1] if specials else max_tokens           # the specials come on top of max_tokens
            rec = run(hidden=True, input_ids=ids.to(device), attention_mask=attn.to(device))
            hs = blocks(rec, "hidden")
            if not hs:
                from .checks import DiagnoseError

                raise DiagnoseError(f"{type(net).__name__} returns no hidden states: no layer can be measured")
            for b, i in enumerate(idx):
                pos = _keep_evenly(keep[b].nonzero().squeeze(-1), most)
                if pos.numel() < 2:
                    continue                                  # fewer than two tokens: no pair to measure
                stack.add([h[b, pos.to(h.device)] for h in hs])
                kept_order.append(i)
            if cap is not None:
                sel = torch.zeros_like(keep)
                rows = [b for b, i in enumerate(idx) if i in set(kept_order)]
                for b in rows:
                    sel[b, _keep_evenly(keep[b].nonzero().squeeze(-1), most)] = True
                sums = _qk_sums(rec, sel)
                qks.add([(q[rows], k[rows]) for q, k in sums], sel[rows].sum(-1))
    if len(kept_order) < 2:
        from .probe import ProbeError

        raise ProbeError("fewer than two probe inputs hold two or more tokens")
    inv = np.argsort(kept_order)                    # back to the probe's order
    layers = [(X[inv], m[inv]) for X, m in stack.padded()]
    qk = [(q[inv], k[inv], n[inv]) for q, k, n in qks.result()] if cap is not None else None
    notes = ([f"{len(probe.items) - len(kept_order)} inputs with fewer than two tokens left out"]
             if len(kept_order) < len(probe.items) else [])
    if cut:
        notes.append(f"{cut} inputs longer than {max_tokens} tokens cut to their first {max_tokens}")
    return Captured(layers, "tokens", qk, why, notes, cut)


def _vision(model, processor, probe, device, batch_size, max_tokens, want_qk,
            desc="forward passes") -> Captured:
    cfg = getattr(model, "config", None)
    skip = (1 + int(getattr(cfg, "num_register_tokens", 0) or 0) if getattr(cfg, "model_type", "") in _CLS_VISION
            else 0)
    cap, why = _qk_capture(model) if want_qk else (None, "not asked for")
    if cap is None and not any(isinstance(m, nn.MultiheadAttention) for m in model.modules()) and cfg is None:
        why = f"{type(model).__name__} has no attention (a convolutional network)"
    stack, qks, units = _Stack(), _QKStack(), "patch tokens"
    items = probe.items
    batches = list(range(0, len(items), batch_size))
    with cap or Capture(model, qk=False) as run:
        for i in progress(batches, desc=desc, total=len(batches)):
            batch = items[i:i + batch_size]
            px = processor(images=batch, return_tensors="pt")["pixel_values"].to(device)
            rec = run(hidden=True, pixel_values=px)
            for b in range(len(batch)):
                per_layer = []
                for h in blocks(rec, "hidden"):
                    if h.dim() == 4:                                    # a CNN map (B, C, H, W): its positions
                        units = "spatial positions"
                        v = h[b].flatten(1).T
                    else:
                        v = h[b, skip:]
                    per_layer.append(v[_keep_evenly(torch.arange(v.shape[0]), max_tokens).to(v.device)])
                stack.add(per_layer)
            if cap is not None:
                L = rec["blocks.0.attn.q"].shape[2]
                sel = torch.zeros(len(batch), L, dtype=torch.bool)
                sel[:, _keep_evenly(torch.arange(skip, L), max_tokens)] = True
                qks.add(_qk_sums(rec, sel), sel.sum(-1))
    return Captured(stack.padded(), units, qks.result() if cap is not None else None, why)


#: the name under which `lean_attention` is registered with transformers' attention functions
LEAN_ATTENTION = "tokuni_lean_eager"


def lean_attention(module, query: Tensor, key: Tensor, value: Tensor, attention_mask: Tensor | None,
                   scaling: float | None = None, dropout: float = 0.0, **kwargs) -> tuple[Tensor, None]:
    """transformers' eager attention, softmax(QKᵀ)V, with no copy of the score matrix beyond the one QKᵀ makes:
    where there is no mask, no scaling left to apply (Whisper scales its queries before the call and passes 1.0) and
    no dropout, eager multiplies the (B, h, 1500, 1500) scores by 1.0 into a new tensor and takes their softmax into
    another; here the softmax is taken in place, and the weights are not returned (no caller here reads them).
    Every output equals eager's bit for bit (`tests/test_diagnose_speed.py`); any other call goes to eager."""
    from transformers.models.whisper.modeling_whisper import eager_attention_forward

    if (attention_mask is not None or scaling != 1.0 or (dropout and module.training)
            or kwargs.get("output_attentions")):
        return eager_attention_forward(module, query, key, value, attention_mask, scaling, dropout, **kwargs)
    w = torch.matmul(query, key.transpose(2, 3))
    torch.ops.aten._softmax.out(w, -1, False, out=w)               # the row's max, then exp and sum: row by row
    out = torch.matmul(w, value)
    del w
    return out.transpose(1, 2).contiguous(), None


def _lean(model) -> str:
    """Switch `model` to `lean_attention` (registered once); return the implementation it had."""
    from transformers import AttentionInterface

    AttentionInterface.register(LEAN_ATTENTION, lean_attention)
    before = model.config._attn_implementation
    model.set_attn_implementation(LEAN_ATTENTION)
    return before


def _audio(loaded, probe, device, max_tokens, desc="forward passes") -> Captured:
    from ..hf import whisper

    model = loaded.model
    stack = _Stack()
    why = f"{type(model).__name__}: the walker does not hook a speech encoder's attention projections"
    if getattr(model.config, "model_type", "") == "whisper":
        waves = probe.items
        before = _lean(model)
        try:
            for i in progress(range(0, len(waves), 8), desc=desc, total=-(-len(waves) // 8)):
                for clip in whisper.encoder_hidden_states(model, loaded.tokenizer, waves[i:i + 8]):
                    pos = _keep_evenly(torch.arange(clip.shape[1]), max_tokens)
                    stack.add([h[pos] for h in clip])
        finally:
            model.set_attn_implementation(before)
        return Captured(stack.padded(), "encoder frames", None, why)
    run = Capture(encoder_of(model), qk=False)
    for w in progress(probe.items, desc=desc, total=len(probe.items)):
        inp = loaded.tokenizer(w, sampling_rate=16_000, return_tensors="pt").to(device)
        hs = blocks(run(hidden=True, **inp), "hidden")
        pos = _keep_evenly(torch.arange(hs[0].shape[1]), max_tokens)
        stack.add([h[0, pos.to(h.device)] for h in hs])
    return Captured(stack.padded(), "frames", None, why)


__all__ = ["Captured", "capture", "check_tokens", "token_counts", "lean_attention"]
