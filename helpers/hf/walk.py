"""The one walker over Hugging Face models: where the transformer blocks, the self-attention modules
and the last layer's final LayerNorm of each architecture live. Every other module asks here."""

from __future__ import annotations

from torch import nn

#: model families whose blocks are `encoder.layer` (BERT-like encoders and ViT-like vision models)
_ENCODER_LAYER = ("bert", "roberta", "xlm-roberta", "electra", "camembert", "mpnet", "vit", "dinov2", "deit", "beit",
                  "canine", "data2vec-text")


def base_model(model: nn.Module) -> nn.Module:
    """The backbone of a model with or without a task head."""
    return getattr(model, "base_model", model)


def encoder_of(model: nn.Module) -> nn.Module:
    """The encoder of an encoder-decoder model (T5, ByT5, Whisper); the model itself otherwise."""
    cfg = getattr(model, "config", None)
    return model.get_encoder() if getattr(cfg, "is_encoder_decoder", False) else model


def transformer_layers(model: nn.Module) -> list[nn.Module]:
    """The transformer blocks of `model` in order. ALBERT shares one group of layers across depth: its
    blocks are the group's layers (the forward runs them `num_hidden_layers / num_hidden_groups` times)."""
    base = base_model(encoder_of(model))
    kind = getattr(getattr(base, "config", None), "model_type", "")
    if kind == "albert":
        return [layer for g in base.encoder.albert_layer_groups for layer in g.albert_layers]
    if kind == "distilbert":
        return list(base.transformer.layer)
    for path in ("encoder.layer", "layers", "h", "block", "encoder.layers", "encoder.block"):
        obj = base
        for part in path.split("."):
            obj = getattr(obj, part, None)
        if isinstance(obj, nn.ModuleList):
            return list(obj)
    raise ValueError(f"no transformer blocks found in {type(model).__name__} (model_type {kind!r})")


def attention_modules(model: nn.Module) -> list[nn.Module]:
    """The self-attention modules of a BERT-family encoder, in layer order: every module with `query`
    and `key` linear maps (BERT, RoBERTa, ELECTRA, … `*SelfAttention`)."""
    mods = [m for m in model.modules()
            if isinstance(getattr(m, "query", None), nn.Linear) and isinstance(getattr(m, "key", None), nn.Linear)]
    if not mods:
        raise ValueError(f"{type(model).__name__} has no self-attention module with `query` and `key` linear maps")
    return mods


def num_heads(module: nn.Module, model: nn.Module) -> int:
    """Attention heads of `module` (its own attribute, else the model's config)."""
    h = getattr(module, "num_attention_heads", None) or getattr(getattr(model, "config", None),
                                                                  "num_attention_heads", None)
    if not h:
        raise ValueError("cannot tell the number of attention heads")
    return int(h)


def final_layernorm(model: nn.Module) -> tuple[nn.Module, str, int]:
    """(parent module, attribute name, calls per forward) of the last layer's final LayerNorm of a
    BERT / RoBERTa / MPNet / ALBERT / DistilBERT model (with or without a task head)."""
    base = base_model(model)
    cfg = base.config
    kind = cfg.model_type
    if kind in ("bert", "roberta", "xlm-roberta", "electra", "camembert", "mpnet"):
        return base.encoder.layer[-1].output, "LayerNorm", 1
    if kind == "distilbert":
        return base.transformer.layer[-1], "output_layer_norm", 1
    if kind == "albert":
        # layer i uses group int(i / (num_hidden_layers / num_hidden_groups)); the last group runs
        # num_hidden_layers / num_hidden_groups times, each time through all of its inner layers
        calls = cfg.num_hidden_layers // cfg.num_hidden_groups
        return base.encoder.albert_layer_groups[-1].albert_layers[-1], "full_layer_layer_norm", calls
    raise ValueError(f"SoftDecay insertion is implemented for bert, roberta, mpnet, albert and distilbert, "
                     f"not {kind!r}")


__all__ = ["base_model", "encoder_of", "transformer_layers", "attention_modules", "num_heads", "final_layernorm"]
