"""The one walker over Hugging Face models (`helpers.hf.walk`) on tiny models of each family."""

from __future__ import annotations

import pytest
import torch
from transformers import (
    AlbertConfig,
    AlbertModel,
    BertConfig,
    BertForSequenceClassification,
    DistilBertConfig,
    DistilBertModel,
    GPT2Config,
    GPT2Model,
    LlamaConfig,
    LlamaModel,
    T5Config,
    T5Model,
)

from helpers.hf import walk

SMALL = dict(hidden_size=32, num_attention_heads=4, intermediate_size=64)


@pytest.mark.parametrize("make, n", [
    (lambda: BertForSequenceClassification(BertConfig(num_hidden_layers=3, **SMALL)), 3),
    (lambda: AlbertModel(AlbertConfig(num_hidden_layers=6, num_hidden_groups=1, embedding_size=16, **SMALL)), 1),
    (lambda: DistilBertModel(DistilBertConfig(n_layers=2, dim=32, n_heads=4, hidden_dim=64)), 2),
    (lambda: GPT2Model(GPT2Config(n_layer=2, n_embd=32, n_head=4)), 2),
    (lambda: LlamaModel(LlamaConfig(num_hidden_layers=2, num_key_value_heads=4, vocab_size=100, **SMALL)), 2),
    (lambda: T5Model(T5Config(num_layers=2, d_model=32, d_kv=8, num_heads=4, d_ff=64, vocab_size=100)), 2),
])
def test_transformer_layers_finds_every_block(make, n):
    torch.manual_seed(0)
    assert len(walk.transformer_layers(make())) == n


def test_attention_modules_and_heads():
    model = BertForSequenceClassification(BertConfig(num_hidden_layers=3, **SMALL))
    mods = walk.attention_modules(model)
    assert len(mods) == 3 and walk.num_heads(mods[0], model) == 4
    with pytest.raises(ValueError, match="query"):
        walk.attention_modules(torch.nn.Linear(2, 2))


def test_final_layernorm_of_albert_counts_its_shared_calls():
    model = AlbertModel(AlbertConfig(num_hidden_layers=6, num_hidden_groups=1, embedding_size=16, **SMALL))
    parent, name, calls = walk.final_layernorm(model)
    assert isinstance(getattr(parent, name), torch.nn.LayerNorm) and calls == 6


def test_mpnet_blocks_and_final_layernorm_take_softdecay():
    """MPNet (all-mpnet-base-v2's architecture): its blocks are `encoder.layer`, its last block's output
    LayerNorm is where SoftDecay goes (as BERT's), and the inserted layer trains (α gets a finite gradient)."""
    from transformers import MPNetConfig, MPNetForSequenceClassification

    from helpers.hf import softdecay_layer

    torch.manual_seed(0)
    model = MPNetForSequenceClassification(MPNetConfig(num_hidden_layers=3, vocab_size=100, **SMALL))
    assert len(walk.transformer_layers(model)) == 3
    parent, name, calls = walk.final_layernorm(model)
    assert parent is model.mpnet.encoder.layer[-1].output and name == "LayerNorm" and calls == 1
    softdecay_layer.insert_softdecay(model, alpha=-0.5)
    ids = torch.randint(3, 100, (2, 7))
    loss = model(input_ids=ids, attention_mask=torch.ones_like(ids), labels=torch.tensor([0, 1])).loss
    loss.backward()
    sd = softdecay_layer.find_softdecay(model)
    assert sd is not None and torch.isfinite(sd.softdecay.alpha.grad) and sd.softdecay.alpha.grad.abs() > 0
