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
    assert (tok(texts, pairs, truncation=True, max_length=8)["input_ids"]
            == fresh(texts, pairs, truncation=True, max_length=8)["input_ids"])


def test_a_gguf_model_is_converted_once_and_loads_as_from_its_gguf_file(tmp_path, monkeypatch):
    """SmolLM2's GGUF file is de-quantised once into the weight cache (`hf.gguf_cache`): a load from the cache
    gives the GGUF load's weights bit for bit, tokenises as its tokenizer does, builds the same untrained twin,
    and the second load does not read the GGUF file at all."""
    from pathlib import Path

    from transformers import AutoModelForCausalLM

    from helpers.hf import gguf_cache

    monkeypatch.setenv("TOKUNI_CACHE", str(tmp_path))
    name = "SmolLM2-135M-Instruct"
    folder, gguf = models.resolve_source(name), models.OFFLINE_PACKAGES[name][3]
    real, seen = gguf_cache.converted, {}

    def converted(f, file, load):                   # keeps what the GGUF load gave, as the reference
        def keep(*a):
            seen["model"], seen["tok"] = load(*a)
            return seen["model"], seen["tok"]
        return real(f, file, keep)

    with monkeypatch.context() as m:
        m.setattr(gguf_cache, "converted", converted)
        first = models.load(name)                   # converts
    dest = gguf_cache.cache_folder(Path(folder) / gguf)
    assert gguf_cache.is_converted(dest) and first.source == folder and set(seen) == {"model", "tok"}
    assert [p.name for p in tmp_path.iterdir()] == [dest.name]
    ref_sd = seen["model"].state_dict()
    for k, v in first.model.state_dict().items():
        assert torch.equal(v, ref_sd[k]), k
    texts = ["A man is playing a guitar.", "<|im_start|>user\nnaïve café — 42%<|im_end|>", "  spaced\ttabs\n"]
    assert first.tokenizer(texts)["input_ids"] == seen["tok"](texts)["input_ids"]
    calls = []
    from_pretrained = AutoModelForCausalLM.from_pretrained.__func__

    def spy(cls, *a, **k):
        calls.append(k.get("gguf_file"))
        return from_pretrained(cls, *a, **k)

    with monkeypatch.context() as m:
        m.setattr(AutoModelForCausalLM, "from_pretrained", classmethod(spy))
        twin = models.load(name, untrained=True, seed=3).model.state_dict()
        models.load(name)
    assert calls == [None]                           # read from the cache folder, not the GGUF file
    torch.manual_seed(3)                             # the twin the GGUF file's own config gives
    ref_twin = AutoModelForCausalLM.from_config(seen["model"].config, attn_implementation="eager").state_dict()
    for k, v in twin.items():
        assert torch.equal(v, ref_twin[k]), k


def test_a_text_model_loads_without_the_image_and_audio_processors(tmp_path):
    """`models.load` imports only the preprocessor its model's modality needs: a text model (a tiny random BERT
    folder, loaded in a fresh process) leaves transformers' image processors and feature extractors unimported
    (importing `AutoImageProcessor` alone costs about 1.4 CPU-s of a run's start-up); a vision model gets the image
    processor, an audio model the feature extractor."""
    import subprocess
    import sys
    import textwrap
    from pathlib import Path

    from test_diagnose import tiny_bert
    from transformers import AutoFeatureExtractor, AutoImageProcessor, AutoTokenizer

    folder = tiny_bert(tmp_path / "bert", seed=0)
    code = textwrap.dedent(f"""
        import sys
        from helpers.hf import models
        loaded = models.load({str(folder)!r}, modality="text")
        assert loaded.tokenizer("w1 w2")["input_ids"]
        print(sorted(m for m in sys.modules if m.startswith("transformers.models.auto.")
                     and ("image_processing" in m or "feature_extraction" in m)))
    """)
    repo = Path(__file__).resolve().parents[1]
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=repo, check=True,
                         env={**__import__("os").environ, "PYTHONPATH": str(repo), "HF_HUB_OFFLINE": "1"})
    assert out.stdout.strip() == "[]", out.stdout
    assert models.preprocessor("text") is AutoTokenizer
    assert models.preprocessor("vision") is AutoImageProcessor
    assert models.preprocessor("audio") is AutoFeatureExtractor
