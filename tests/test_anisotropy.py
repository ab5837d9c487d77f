"""Godey et al. §3 and App. B: streaming layer-wise anisotropy, the correlation tests, the cosine of
isotropic Gaussians, and the HF walkers that feed them."""

import math
import types

import numpy as np
import pytest
import torch

from helpers.book.params import ParameterError
from helpers.core import anisotropy as A
from helpers.experiments import anisotropy as X
from helpers.hf import anisotropy as H


def test_isotropic_gaussian_cosine_mean_and_95th_percentile():
    for d in (64, 768):
        c = A.sample_isotropic_cosines(d, 20_000, seed=d)
        assert abs(c.mean()) < 4 / math.sqrt(20_000 * d) + 1e-3
        q = A.isotropic_cosine_quantile(0.95, d)
        assert np.quantile(c, 0.95) == pytest.approx(q, rel=0.05)
    # large d: the exact 95th percentile tends to 1.645/sqrt(d); at d = 3 the cosine is uniform on [-1, 1]
    assert A.isotropic_cosine_quantile(0.95, 4096) * math.sqrt(4096) == pytest.approx(1.645, rel=0.01)
    assert A.isotropic_cosine_quantile(0.95, 3) == pytest.approx(0.9, abs=1e-9)


def test_isotropic_pdf_integrates_to_one_and_has_sd_one_over_sqrt_d():
    c = np.linspace(-1, 1, 20001)
    for d in (3, 16, 768):
        pdf = A.isotropic_cosine_pdf(c, d)
        assert np.trapezoid(pdf, c) == pytest.approx(1.0, abs=1e-3)
        assert math.sqrt(np.trapezoid(c**2 * pdf, c)) == pytest.approx(1 / math.sqrt(d), rel=1e-3)


def test_sample_pairs_distinct_in_range_and_uniform():
    p = A.sample_pairs(10, 5000, seed=0)
    assert (p[:, 0] != p[:, 1]).all() and p.min() >= 0 and p.max() < 10
    for col in (0, 1):
        counts = torch.bincount(p[:, col], minlength=10).float()
        assert counts.min() > 400 and counts.max() < 600
    with pytest.raises(ValueError):
        A.sample_pairs(1, 10, seed=0)


def test_layer_accumulator_exact_cosine_matches_brute_force():
    g = torch.Generator().manual_seed(0)
    layers_a = [torch.randn(30, 8, generator=g) + 1 for _ in range(3)]
    layers_b = [torch.randn(20, 8, generator=g) - 0.5 for _ in range(3)]
    acc = A.LayerAccumulator(A.sample_pairs(50, 2000, seed=1))
    acc.add(layers_a)
    acc.add(layers_b)
    r = acc.result()
    for li in range(3):
        X_ = torch.cat([layers_a[li], layers_b[li]]).double()
        U = X_ / X_.norm(dim=1, keepdim=True)
        brute = ((U @ U.T).sum() - 50) / (50 * 49)
        assert r["cos_exact"][li] == pytest.approx(brute.item(), abs=1e-10)
        assert r["cos_sampled"][li] == pytest.approx(brute.item(), abs=5 * r["cos_sampled_se"][li] + 1e-3)
        assert r["mean_norm"][li] == pytest.approx(X_.mean(0).norm().item(), rel=1e-6)
        assert r["avg_norm"][li] == pytest.approx(X_.norm(dim=1).mean().item(), rel=1e-6)
    assert r["tokens"] == 50 and list(r["dims"]) == [8, 8, 8]


def test_layer_accumulator_refuses_pairs_beyond_the_stream():
    acc = A.LayerAccumulator(A.sample_pairs(100, 50, seed=0))
    acc.add([torch.randn(10, 4)])
    with pytest.raises(ValueError, match="beyond"):
        acc.result()


def test_drift_correlation_on_planted_relations():
    norm = np.linspace(1, 10, 12)
    up = A.drift_correlation(norm**2, norm)
    assert up["spearman_r"] == pytest.approx(1.0) and up["spearman_p"] < 1e-6 and up["pearson_r"] > 0.9
    down = A.drift_correlation(-norm, norm)
    assert down["spearman_r"] == pytest.approx(-1.0) and down["pearson_r"] == pytest.approx(-1.0)
    noise = A.drift_correlation(np.random.default_rng(0).standard_normal(12), norm)
    assert noise["spearman_p"] > 0.05


def test_specials_bert_style_and_decoder_style():
    bert = types.SimpleNamespace(cls_token_id=101, sep_token_id=102, bos_token_id=None)
    llama = types.SimpleNamespace(cls_token_id=None, sep_token_id=None, bos_token_id=1)
    bare = types.SimpleNamespace(cls_token_id=None, sep_token_id=None, bos_token_id=None)
    assert H.specials(bert) == ([101], [102])
    assert H.specials(llama) == ([1], [])
    assert H.specials(bare) == ([], [])


class _FakeConvNet(torch.nn.Module):
    """Two 'layers' of 4-D feature maps (B, C, H, W): the vision walker flattens each to one vector
    per image."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.ones(1))

    def forward(self, pixel_values, output_hidden_states=True):
        x = pixel_values
        return types.SimpleNamespace(hidden_states=(x, 2 * x + 1))


def test_vision_walker_flattens_feature_maps_to_one_vector_per_image():
    imgs = [torch.randn(3, 2, 2) for _ in range(7)]
    processor = lambda images, return_tensors: {"pixel_values": torch.stack(images)}  # noqa: E731
    r = H.vision_anisotropy(_FakeConvNet(), processor, imgs, batch_size=3, n_pairs=200, seed=0)
    assert r["tokens"] == 7 and list(r["dims"]) == [12, 12]
    flat = torch.stack(imgs).flatten(1).double()
    U = flat / flat.norm(dim=1, keepdim=True)
    assert r["cos_exact"][0] == pytest.approx((((U @ U.T).sum() - 7) / 42).item(), abs=1e-9)


def test_text_walker_excludes_special_tokens():
    """On a tiny random BERT the layer statistics equal those of the chunks' real tokens only."""
    from transformers import BertConfig, BertModel

    torch.manual_seed(0)
    model = BertModel(BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                                 intermediate_size=32, attn_implementation="eager")).eval()

    class Tok:
        cls_token_id, sep_token_id, bos_token_id, pad_token_id = 1, 2, None, 0

        def __call__(self, text, **kw):
            return {"input_ids": [3 + (ord(ch) % 40) for ch in text]}

    text = "the quick brown fox jumps over the lazy dog " * 3
    r = H.text_anisotropy(model, Tok(), text, max_tokens=40, chunk_len=16, batch_size=2, n_pairs=500)
    ids = Tok()(text)["input_ids"][:40]
    with torch.no_grad():
        hs = [model(input_ids=torch.tensor([[1] + ids[i:i + 16] + [2]]), output_hidden_states=True).hidden_states
              for i in range(0, 40, 16)]
    last = torch.cat([h[-1][0, 1:-1] for h in hs]).double()
    assert r["tokens"] == 40
    assert r["mean_norm"][-1] == pytest.approx(last.mean(0).norm().item(), rel=1e-4)


def test_params_reject_bad_model_entries():
    with pytest.raises(ParameterError, match="models"):
        X.Params.resolve("ci", models=("bert-base-uncased",))
    with pytest.raises(ParameterError, match="models"):
        X.Params.resolve("ci", models=("speech:foo",))
    assert X.Params.resolve("ci", models=("audio:facebook/hubert-base-ls960",)).models[0].startswith("audio:")


def test_unreachable_hub_model_fails_with_a_clear_message(monkeypatch):
    from helpers.hf import models

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(models.ModelUnavailable, match="hub"):
        models.load("bert-base-uncased-not-cached-anywhere")


def test_isotropic_sampling_in_chunks_is_one_stream():
    """Chunking changes only memory: one chunk per pair reproduces drawing x then y pair by pair."""
    a = A.sample_isotropic_cosines(8, 50, seed=3, chunk_elements=8)          # one row per chunk
    g = torch.Generator().manual_seed(3)
    ref = [torch.nn.functional.cosine_similarity(torch.randn(1, 8, generator=g, dtype=torch.float64),
                                                 torch.randn(1, 8, generator=g, dtype=torch.float64)).item()
           for _ in range(50)]
    assert np.allclose(a, ref)
    assert A.sample_isotropic_cosines(8, 50, seed=3, chunk_elements=80).shape == (50,)
