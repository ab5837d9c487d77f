"""The one capture of a Hugging Face model's forward pass: hidden states, per-head queries and keys, attention
probabilities, each recorded under one name.

Names (in the spirit of TransformerLens's hook names; `i` counts the block *calls* of one forward pass, from 0,
so ALBERT's one shared layer gives one `i` per depth):

* `hidden.{l}` — the model's own `output_hidden_states[l]`, l = 0 … n_blocks (0: the embeddings; the last one
  after the final norm where the model applies one, as GPT-2 and T5 do; a CNN's maps (B, C, H, W) as they come).
  These are the representations the book measures.
* `blocks.{i}.resid_post` — the output of block i, read by a forward hook on the block (B, L, d). Where the
  model applies no final norm it is the same tensor as `hidden.{i+1}`.
* `blocks.{i}.attn.q`, `blocks.{i}.attn.k` — the per-head queries and keys of block i's attention,
  (B, h, L, d_k): the vectors whose scalar products are the scores (after the rotation of a rotary model;
  grouped keys repeated so that key head j // (h / h_kv) stands beside query head j).
* `blocks.{i}.attn.q_pre_rotary`, `blocks.{i}.attn.k_pre_rotary` — a rotary model's projections before the
  rotation (keys repeated as above).
* `blocks.{i}.attn.pattern` — the attention probabilities (B, h, L, L) the model returns (eager attention).

Queries and keys are read where the architecture keeps them (`Capture.qk_kind`): `"rotary"` — Llama-style
`q_proj`/`k_proj` with a rotary embedding, rotated as the model rotates them; `"query_key"` — BERT-family
`query`/`key` maps (`walk.attention_modules`); `"linear"` — each block's query and key linear maps by another
name (`q_proj`/`k_proj` of ViT, DINOv2, Whisper; MPNet's `q`/`k`; DistilBERT's `q_lin`/`k_lin`). A fused
projection (GPT-2's `c_attn`) is not read: asked for queries and keys, such a model raises `ValueError`.

    with Capture(model) as cap:
        rec = cap(hidden=True, input_ids=ids, attention_mask=mask)
    qs = blocks(rec, "attn.q")          # [rec["blocks.0.attn.q"], rec["blocks.1.attn.q"], …]
"""

from __future__ import annotations

from collections.abc import Callable

from torch import Tensor, nn

from .walk import attention_modules, num_heads, transformer_layers

#: names of a block's query and key maps in the architectures without rotary positions and without
#: BERT's `query`/`key` (DINOv2, ViT and Whisper in transformers 5: q_proj/k_proj; MPNet: q/k; DistilBERT: q_lin/k_lin)
_QK_NAMES = (("q_proj", "k_proj"), ("q", "k"), ("q_lin", "k_lin"))

#: what each block call records, in the order `records` lists them
_BLOCK_FIELDS = ("resid_post", "attn.q", "attn.k", "attn.q_pre_rotary", "attn.k_pre_rotary", "attn.pattern")


def blocks(records: dict[str, Tensor], what: str) -> list[Tensor]:
    """`records["blocks.{i}.<what>"]` for i = 0, 1, … in block order; `what="hidden"`: `hidden.{l}`."""
    prefix = "hidden." if what == "hidden" else "blocks."
    suffix = "" if what == "hidden" else f".{what}"
    out, i = [], 0
    while f"{prefix}{i}{suffix}" in records:
        out.append(records[f"{prefix}{i}{suffix}"])
        i += 1
    return out


def _split(out: Tensor, h: int) -> Tensor:
    """(B, L, h·d_k) -> (B, h, L, d_k)."""
    B, L, D = out.shape
    return out.detach().view(B, L, h, D // h).transpose(1, 2)


def _linear_pairs(model: nn.Module) -> list[tuple[nn.Linear, nn.Linear]]:
    pairs = []
    for block in transformer_layers(model):
        found = None
        for mod in block.modules():
            for qn, kn in _QK_NAMES:
                q, k = getattr(mod, qn, None), getattr(mod, kn, None)
                if isinstance(q, nn.Linear) and isinstance(k, nn.Linear):
                    found = (q, k)
                    break
            if found:
                break
        if found is None:
            raise ValueError(f"block {type(block).__name__} has no query/key linear maps")
        pairs.append(found)
    return pairs


class Capture:
    """Forward hooks on `model`, registered on entering `with Capture(model) as cap:` and removed on leaving it.
    `cap(**inputs)` runs one forward pass and returns what it recorded, by the names of the module docstring.

    `qk`: hook the queries and keys (a `ValueError` says why when the model holds none the capture can read);
    `resid`: hook every block's output (`blocks.{i}.resid_post`)."""

    def __init__(self, model: nn.Module, *, qk: bool = True, resid: bool = False) -> None:
        self.model = model
        self.qk_kind = ""
        self._calls: dict[str, list[Tensor]] = {f: [] for f in _BLOCK_FIELDS}
        self._handles: list = []
        self._blocks = transformer_layers(model) if resid else []
        if qk:
            self._find_qk(model)

    def _find_qk(self, model: nn.Module) -> None:
        cfg = getattr(model, "config", None)
        has_q_proj = any(isinstance(getattr(m, "q_proj", None), nn.Linear) for m in model.modules())
        if has_q_proj and any(hasattr(m, "rotary_emb") for m in model.modules()):
            self.qk_kind = "rotary"
            self.qk_modules = [m for m in model.modules() if isinstance(getattr(m, "q_proj", None), nn.Linear)
                               and isinstance(getattr(m, "k_proj", None), nn.Linear)]
            self.heads = int(cfg.num_attention_heads)
            self.kv_heads = int(getattr(cfg, "num_key_value_heads", None) or self.heads)
            return
        if not has_q_proj:
            try:
                self.qk_modules = attention_modules(model)
                self.heads = self.kv_heads = num_heads(self.qk_modules[0], model)
                self.qk_kind = "query_key"
                return
            except (ValueError, AttributeError):
                pass
        self.heads = self.kv_heads = int(getattr(cfg, "num_attention_heads", 0)
                                         or getattr(cfg, "encoder_attention_heads", 0) or 0)
        if not self.heads:
            raise ValueError("cannot tell the number of attention heads")
        self.qk_pairs = _linear_pairs(model)
        self.qk_kind = "linear"

    # --- hooks -------------------------------------------------------------------------------------------------
    def _store(self, field: str, h: int) -> Callable:
        store = self._calls[field]

        def hook(_mod, _inp, out: Tensor) -> None:
            store.append(_split(out, h))
        return hook

    def _rotary_hook(self, attn: nn.Module) -> Callable:
        from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

        pending: dict[str, Tensor] = {}
        self._handles += [attn.q_proj.register_forward_hook(lambda _m, _i, o: pending.__setitem__("q", o)),
                          attn.k_proj.register_forward_hook(lambda _m, _i, o: pending.__setitem__("k", o))]
        c = self._calls

        def hook(_mod, _args, kwargs, _out) -> None:
            cos, sin = kwargs["position_embeddings"]
            q, k = _split(pending["q"], self.heads), _split(pending["k"], self.kv_heads)
            qr, kr = apply_rotary_pos_emb(q, k, cos, sin)
            rep = self.heads // self.kv_heads
            c["attn.q_pre_rotary"].append(q)
            c["attn.k_pre_rotary"].append(k.repeat_interleave(rep, dim=1))
            c["attn.q"].append(qr)
            c["attn.k"].append(kr.repeat_interleave(rep, dim=1))
        return hook

    def _resid_hook(self, _mod, _inp, out) -> None:
        self._calls["resid_post"].append((out[0] if isinstance(out, tuple) else out).detach())

    def __enter__(self) -> Capture:
        if self.qk_kind == "rotary":
            for m in self.qk_modules:
                self._handles.append(m.register_forward_hook(self._rotary_hook(m), with_kwargs=True))
        elif self.qk_kind == "query_key":
            for m in self.qk_modules:
                self._handles += [m.query.register_forward_hook(self._store("attn.q", self.heads)),
                                  m.key.register_forward_hook(self._store("attn.k", self.heads))]
        elif self.qk_kind == "linear":
            for q, k in self.qk_pairs:
                self._handles += [q.register_forward_hook(self._store("attn.q", self.heads)),
                                  k.register_forward_hook(self._store("attn.k", self.heads))]
        for b in self._blocks:
            self._handles.append(b.register_forward_hook(self._resid_hook))
        return self

    def __exit__(self, *exc) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles.clear()

    # --- recording ---------------------------------------------------------------------------------------------
    def clear(self) -> None:
        for store in self._calls.values():
            store.clear()

    def records(self) -> dict[str, Tensor]:
        """What the hooks recorded since the last `clear`, by name."""
        return {f"blocks.{i}.{f}": x for f in _BLOCK_FIELDS for i, x in enumerate(self._calls[f])}

    def read(self, out, hidden: bool = False, attentions: bool = False) -> dict[str, Tensor]:
        """The hooks' records plus, from the model's output `out`, `hidden.{l}` and `blocks.{i}.attn.pattern`."""
        rec = self.records()
        if hidden and getattr(out, "hidden_states", None) is not None:
            rec.update({f"hidden.{l}": h for l, h in enumerate(out.hidden_states)})
        if attentions:
            att = getattr(out, "attentions", None)
            if not att or att[0] is None:
                raise ValueError("the model returned no attention probabilities: load it with "
                                 "attn_implementation='eager'")
            rec.update({f"blocks.{i}.attn.pattern": p for i, p in enumerate(att)})
        return rec

    def __call__(self, *, hidden: bool = False, attentions: bool = False, **inputs) -> dict[str, Tensor]:
        """One forward pass of the model on `inputs` (keyword arguments of its forward); `hidden`: also the
        model's hidden states, `attentions`: also its attention probabilities."""
        if not self._handles and (self.qk_kind or self._blocks):
            raise RuntimeError("enter the capture (`with Capture(model) as cap:`) before calling it")
        self.clear()
        if hidden:
            inputs["output_hidden_states"] = True
        if attentions:
            inputs["output_attentions"] = True
        out = self.model(**inputs)
        return self.read(out, hidden, attentions)


__all__ = ["Capture", "blocks"]
