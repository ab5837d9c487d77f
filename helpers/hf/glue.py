"""Hugging Face plumbing of the GLUE chapter: per-layer spectra of a (fine-tuned) classifier with the
SoftDecay layer's input and output captured, and small randomly initialised classifiers of the four
architectures of Yan et al. §5.2 (BERT, RoBERTa, ALBERT, DistilBERT) to check the SoftDecay surgery."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from ..core import subspace
from ..data.glue import Encoded, collate
from .softdecay_layer import find_softdecay, insert_softdecay

ARCHITECTURES = ("bert", "roberta", "albert", "distilbert")


def _cdf_rows(per_layer: list[Tensor], mask: Tensor, labels: list[str], quantiles: int) -> list[dict]:
    rows = subspace.layer_spectrum_stats(per_layer, mask)
    qs = torch.linspace(0, 1, quantiles, dtype=torch.float64)
    for r, label in zip(rows, labels, strict=True):
        v = r.pop("values").to(torch.float64)
        r["label"] = label
        r["quantiles"] = torch.quantile(v, qs).tolist()
    return rows


def _pad_to(t: Tensor, length: int) -> Tensor:
    return torch.nn.functional.pad(t, (0, 0, 0, length - t.shape[1]))


@torch.no_grad()
def layer_spectra(model: nn.Module, tok, ev: Encoded, n: int = 256, batch: int = 32, quantiles: int = 201,
                  device: str | torch.device = "cpu") -> dict[str, list[dict]]:
    """Per-layer singular-value statistics of a (fine-tuned) model on the first `n` validation
    examples, as `subspace.layer_spectrum_stats` (each sentence's token matrix, values normalised by
    the largest; median, skewness, token uniformity), with each CDF kept as `quantiles` quantiles
    (small enough to commit). For a model with SoftDecay, `softdecay` also holds the last layer's
    matrix just before and just after the SoftDecay transform (before the LayerNorm)."""
    model.eval()
    pad_id = tok.pad_token_id if tok.pad_token_id is not None else 0
    feats = ev.features[:n]
    sd = find_softdecay(model)
    if sd is not None:
        sd.capture = True
    chunks: list[list[Tensor]] = []
    masks: list[Tensor] = []
    try:
        for start in range(0, len(feats), batch):
            b = {k: v.to(device) for k, v in collate(feats[start:start + batch], None, pad_id).items()}
            out = model(**b, output_hidden_states=True)
            extra = [t.float().cpu() for t in sd.captured] if sd is not None else []
            chunks.append([h.float().cpu() for h in out.hidden_states] + extra)
            masks.append(b["attention_mask"].bool().cpu())
    finally:
        if sd is not None:
            sd.capture, sd.captured = False, None
    L = max(m.shape[1] for m in masks)
    per_layer = [torch.cat([_pad_to(c[i], L) for c in chunks]) for i in range(len(chunks[0]))]   # (N, L, d) each
    mask = torch.cat([torch.nn.functional.pad(m, (0, L - m.shape[1])) for m in masks])          # (N, L)
    n_layers = len(per_layer) - (2 if sd is not None else 0)
    labels = ["embeddings"] + [f"layer {i}" for i in range(1, n_layers)]
    out = {"layers": _cdf_rows(per_layer[:n_layers], mask, labels, quantiles)}
    if sd is not None:
        out["softdecay"] = _cdf_rows(per_layer[n_layers:], mask, ["before SoftDecay", "after SoftDecay"], quantiles)
    return out


def tiny_classifier(kind: str, hidden: int = 64, layers: int = 4, heads: int = 4, vocab: int = 200,
                    max_positions: int = 64, dropout: float = 0.1, seed: int = 0) -> nn.Module:
    """A small *randomly initialised* 2-class classifier of one of the architectures of §5.2
    (`bert`, `roberta`, `albert`, `distilbert`), for plumbing checks and tests."""
    from transformers import (
        AlbertConfig,
        AlbertForSequenceClassification,
        BertConfig,
        BertForSequenceClassification,
        DistilBertConfig,
        DistilBertForSequenceClassification,
        RobertaConfig,
        RobertaForSequenceClassification,
    )

    common = dict(hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads, intermediate_size=2 * hidden,
                  max_position_embeddings=max_positions, vocab_size=vocab, num_labels=2, hidden_dropout_prob=dropout,
                  attention_probs_dropout_prob=dropout)
    torch.manual_seed(seed)
    if kind == "bert":
        return BertForSequenceClassification(BertConfig(**common))
    if kind == "roberta":
        return RobertaForSequenceClassification(RobertaConfig(**common, pad_token_id=1))
    if kind == "albert":
        return AlbertForSequenceClassification(AlbertConfig(**common, embedding_size=hidden // 2,
                                                            classifier_dropout_prob=dropout))
    if kind == "distilbert":
        return DistilBertForSequenceClassification(DistilBertConfig(
            vocab_size=vocab, dim=hidden, n_layers=layers, n_heads=heads, hidden_dim=2 * hidden,
            max_position_embeddings=max_positions, dropout=dropout, attention_dropout=dropout,
            seq_classif_dropout=dropout, num_labels=2))
    raise ValueError(f"kind {kind!r}: one of {ARCHITECTURES}")


def architecture_check(seed: int = 0) -> list[dict]:
    """SoftDecay inserted into small *randomly initialised* BERT, RoBERTa, ALBERT and DistilBERT
    classifiers (the plumbing, not their pretrained weights): loss, α gradient, largest parameter
    gradient, whether every gradient is finite, and whether every earlier layer is left untouched."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, 200, (8, 40), generator=g)
    mask = (torch.arange(40).unsqueeze(0) < torch.randint(8, 41, (8, 1), generator=g)).long()   # ragged padding
    ids = ids * mask + (1 - mask)
    labels = torch.randint(0, 2, (8,), generator=g)
    rows = []
    for kind in ARCHITECTURES:
        base = tiny_classifier(kind, seed=seed).eval()
        model = tiny_classifier(kind, seed=seed).eval()
        sd = insert_softdecay(model, alpha=-0.5)
        with torch.no_grad():
            h0 = base(input_ids=ids, attention_mask=mask, output_hidden_states=True).hidden_states
        out = model(input_ids=ids, attention_mask=mask, labels=labels, output_hidden_states=True)
        out.loss.backward()
        grads = [p.grad.abs().max() for p in model.parameters() if p.grad is not None]
        untouched = all(torch.equal(a, b) for a, b in zip(h0[:-1], out.hidden_states[:-1], strict=True))
        rows.append({"architecture": kind, "loss": float(out.loss.detach()), "dL/dα": float(sd.softdecay.alpha.grad),
                     "max |grad|": float(torch.stack(grads).max()), "all gradients finite":
                     bool(all(torch.isfinite(x) for x in grads)), "earlier layers untouched": untouched})
    return rows


__all__ = ["ARCHITECTURES", "layer_spectra", "tiny_classifier", "architecture_check"]
