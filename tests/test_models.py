"""Every real pretrained model the book loads offline loads here (its weight package and whatever
transformers needs to read it are installed by the Makefile), and is what it says it is."""

from __future__ import annotations

import pytest
import torch

from helpers.hf import models, walk


@pytest.mark.parametrize("name, layers, width", [
    ("all-MiniLM-L6-v2", 6, 384),
    ("SmolLM2-135M-Instruct", 30, 576),          # GGUF weights: transformers needs gguf and accelerate
])
def test_offline_text_models_load_with_their_architecture(name, layers, width):
    loaded = models.load(name)
    assert loaded.trained and len(walk.transformer_layers(loaded.model)) == layers
    assert loaded.model.config.hidden_size == width
    enc = loaded.tokenizer(["a short sentence"], return_tensors="pt")
    with torch.no_grad():
        out = loaded.model(**enc, output_hidden_states=True)
    assert len(out.hidden_states) == layers + 1 and torch.isfinite(out.hidden_states[-1]).all()


def test_unknown_model_fails_with_the_offline_list():
    with pytest.raises(models.ModelUnavailable, match="Offline models"):
        models.load("no-such-org/no-such-model")


def test_legacy_hub_ids_resolve_to_their_organisation_ids():
    """The presets name models as the papers did (`bert-base-uncased`); the hub keeps them under an
    organisation (`google-bert/bert-base-uncased`) and only redirects the old name, so loading asks for
    the canonical id. Namespaced ids and the offline names pass unchanged; the conversion bot is off."""
    import os

    assert models.resolve_source("bert-base-uncased") == "google-bert/bert-base-uncased"
    assert models.resolve_source("roberta-base") == "FacebookAI/roberta-base"
    assert models.resolve_source("t5-base") == "google-t5/t5-base"
    assert models.resolve_source("google/multiberts-seed_0-step_20k") == "google/multiberts-seed_0-step_20k"
    assert all("/" in v and "/" not in k for k, v in models.CANONICAL_IDS.items())
    assert models.resolve_source("all-MiniLM-L6-v2").endswith("model")        # the weight package folder
    assert os.environ["DISABLE_SAFETENSORS_CONVERSION"] == "1"


def test_a_models_prose_description_and_width_agree_with_its_description_line():
    """`about` is the `DESCRIPTIONS` line a chapter glues where its prose says what a model is (written once), and
    `WIDTH`, the number a chapter's prose needs, is the width that line states."""
    assert models.about("all-mpnet-base-v2").startswith("a 12-layer, 768-wide MPNet")
    assert "all-mpnet-base-v2" not in models.about("all-mpnet-base-v2") and models.about("no-such-model") == ""
    for name, width in models.WIDTH.items():
        assert f"{width}-wide" in models.DESCRIPTIONS[name] or f"{width} wide" in models.DESCRIPTIONS[name], name


def test_a_folders_tokenizer_loads_once_per_process_and_tokenises_as_a_fresh_one():
    """`models.pretrained_tokenizer` (a fine-tuning grid's tokenizer) loads a folder's tokenizer once and
    hands the same one to every caller: it tokenises as one loaded anew."""
    from transformers import AutoTokenizer

    source = models.resolve_source("all-MiniLM-L6-v2")
    tok = models.pretrained_tokenizer(source)
    assert models.pretrained_tokenizer(source) is tok
    texts, pairs = ["the cat sat", "a much longer sentence than the first"], ["on the mat", "short"]
    fresh = AutoTokenizer.from_pretrained(source)
    assert tok(texts, pairs, truncation=True, max_length=8)["input_ids"] == \
        fresh(texts, pairs, truncation=True, max_length=8)["input_ids"]
