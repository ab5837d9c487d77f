"""Godey et al. §4: the untrained BERT block, its statistics under drift, and the fixed point finder."""

import math

import numpy as np
import pytest
import torch

from helpers.core import anisotropy as A
from helpers.core.measures import pairwise_cosine_mean
from helpers.experiments import drift as D
from helpers.hf.drift import bert_block, block_with_qk
from helpers.machinery.params import ParameterError


def test_fixed_point_finder_recovers_planted_point():
    norms = np.geomspace(0.1, 1000, 15)
    planted = 27.7
    gap_fn = lambda n: math.sqrt(planted**2 + 0.3) - math.sqrt(n**2 + 0.3)  # noqa: E731
    gap = np.array([gap_fn(n) for n in norms])
    assert A.find_fixed_point(norms, gap) == pytest.approx(planted, rel=0.15)
    assert A.find_fixed_point(norms, gap, refine=gap_fn) == pytest.approx(planted, rel=1e-6)
    assert A.find_fixed_point(norms, np.ones_like(norms)) is None
    # the first sign change is the one reported
    assert A.find_fixed_point([1, 2, 3, 4], [1, -1, 1, -1]) == pytest.approx(1.5)


def test_drift_bias_has_the_asked_norm_and_a_seeded_direction():
    b = A.drift_bias(64, 7.0, seed=3)
    assert b.norm().item() == pytest.approx(7.0, rel=1e-6)
    assert torch.allclose(A.drift_bias(64, 1.0, seed=3) * 7.0, b, atol=1e-6)
    assert not torch.allclose(A.drift_bias(64, 7.0, seed=4), b)


def test_block_statistics_on_planted_inputs():
    B, h, L, dk = 2, 2, 5, 3
    x = torch.ones(B, L, 6)                          # every token identical: cosine 1, norm sqrt(6)
    q = torch.randn(B, h, L, dk)
    k = torch.randn(B, h, L, dk)
    s = A.block_statistics(x, -x, q, k, torch.zeros(B, h, L, L))   # zero scores: uniform softmax
    assert s["in_cos"] == pytest.approx(1.0) and s["out_cos"] == pytest.approx(1.0)
    assert s["in_norm"] == pytest.approx(math.sqrt(6)) and s["out_norm"] == pytest.approx(math.sqrt(6))
    for name in ("row_max", "row_median", "row_min", "seq_max", "seq_min"):
        assert s[name] == pytest.approx(1 / L)
    scores = torch.zeros(B, h, L, L)
    scores[..., 0] = 50.0                            # every query attends to key 0
    s = A.block_statistics(x, x, q, k, scores)
    assert s["row_max"] == pytest.approx(1.0, abs=1e-6) and s["row_min"] < 1e-6
    assert s["q_norm"] == pytest.approx(q.transpose(1, 2).flatten(2).norm(dim=-1).mean().item(), rel=1e-6)


def test_bert_block_drift_properties():
    E, layer = bert_block(0, hidden=64, heads=4, intermediate=128)
    assert E.std().item() == pytest.approx(0.02, rel=0.05)
    sw = D.drift_sweep(E, layer, [0.0, 1.0, 100.0], n_seq=2, seq_len=16, seed=0, hist_norms=(0.0, 100.0),
                       hist_samples=500, hist_bins=20)
    # the block ends with LayerNorm (gamma = 1, beta = 0): output norm sqrt(d) whatever the bias
    assert np.allclose(sw["out_norm"], math.sqrt(64), rtol=1e-3)
    assert sw["in_cos"][0] < 0.2 and sw["in_cos"][-1] > 0.99
    assert np.all(sw["row_max"] >= sw["row_median"]) and np.all(sw["row_median"] >= sw["row_min"])
    assert sw["row_max"][0] == pytest.approx(1 / 16, rel=0.05)   # near-uniform attention without drift
    assert len(sw["hists"]) == 2
    for h in sw["hists"]:
        assert np.sum(np.diff(h["edges"]) * np.asarray(h["density"])) == pytest.approx(1.0)
    assert np.ptp(sw["hists"][1]["edges"]) > 10 * np.ptp(sw["hists"][0]["edges"])   # scores spread with N


def test_run_seeds_draw_different_blocks():
    (E0, l0), (E1, _) = bert_block(0, 32, 4, 64), bert_block(1, 32, 4, 64)
    assert not torch.allclose(E0, E1)
    assert torch.allclose(E0, bert_block(0, 32, 4, 64)[0])
    a = D.drift_sweep(E0, l0, [10.0], 2, 8, seed=0)
    b = D.drift_sweep(E0, l0, [10.0], 2, 8, seed=1)      # same block, another token sample and bias
    assert a["in_norm"][0] != b["in_norm"][0]


def test_block_with_qk_matches_layer_projection():
    E, layer = bert_block(1, hidden=32, heads=4, intermediate=64)
    x = E[torch.randint(0, E.shape[0], (2, 8))]
    r = block_with_qk(layer, x)
    q_direct = layer.attention.self.query(x).view(2, 8, 4, 8).transpose(1, 2)
    assert torch.allclose(r["q"], q_direct)
    assert torch.allclose(r["P"].sum(-1), torch.ones(2, 4, 8), atol=1e-6)
    assert torch.allclose(r["out"], layer(x)[0] if isinstance(layer(x), tuple) else layer(x))


def test_params_grid_and_rules():
    p = D.Params.resolve("ci")
    grid = p.grid()
    assert grid == sorted(grid) and set(p.hist_norms) <= set(grid)
    assert len(grid) == len(set(np.geomspace(p.norm_min, p.norm_max, p.n_norms).round(6)) | set(p.hist_norms))
    with pytest.raises(ParameterError, match="norm_max"):
        D.Params.resolve("ci", norm_min=10.0, norm_max=1.0)
    with pytest.raises(ParameterError, match="divisible"):
        D.Params.resolve("ci", d_model=100, n_heads=12)


# ------------------------------------------------------------------ embedding layer, what the softmax sees


def test_a_row_constant_cancels_in_the_softmax_and_in_the_decomposition():
    from helpers.core.drift import attention_entropy_normalised, score_decomposition

    g = torch.Generator().manual_seed(0)
    S = torch.randn(2, 3, 16, 16, generator=g)
    shifted = S + 50 * torch.randn(2, 3, 16, 1, generator=g)           # a different constant per row
    assert torch.allclose(torch.softmax(S, -1), torch.softmax(shifted, -1), atol=1e-5)
    a, b = score_decomposition(S), score_decomposition(shifted)
    assert b["within_var"].item() == pytest.approx(a["within_var"].item(), rel=1e-4)
    assert b["total_var"] > 100 * a["total_var"] and b["rowconst_frac"] > 0.99
    assert abs(a["rowconst_frac"].item()) < 0.2                          # i.i.d. scores: little is row-constant
    rows_only = torch.randn(1, 1, 8, 1, generator=g).expand(1, 1, 8, 8)
    assert score_decomposition(rows_only)["rowconst_frac"].item() == pytest.approx(1.0)
    cols_only = torch.randn(1, 1, 1, 8, generator=g).expand(1, 1, 8, 8)  # key-dependent: all of it counts
    assert score_decomposition(cols_only)["rowconst_frac"].item() == pytest.approx(0.0, abs=1e-6)
    assert attention_entropy_normalised(torch.full((4, 8), 1 / 8)).item() == pytest.approx(1.0)
    assert attention_entropy_normalised(torch.eye(8)).item() == pytest.approx(0.0, abs=1e-6)


def test_embedding_layer_inputs_share_the_token_type_vector():
    from helpers.hf.drift import bert_embeddings_and_block, embed

    d = 256
    emb, layer = bert_embeddings_and_block(0, hidden=d, heads=4, intermediate=128)
    E, _ = bert_block(0, hidden=d, heads=4, intermediate=128)
    assert torch.equal(emb.word_embeddings.weight, E)                   # same draw as the paper's table
    ids = torch.randint(0, E.shape[0], (2, 32), generator=torch.Generator().manual_seed(1))
    x = embed(emb, ids)
    assert torch.allclose(x.norm(dim=-1), torch.full((2, 32), math.sqrt(d)), rtol=1e-3)   # LN output
    # word + position + type, equal scales, type shared: average cosine about 1/3
    assert pairwise_cosine_mean(x.reshape(-1, d)).item() == pytest.approx(1 / 3, abs=0.08)
    tab = D.drift_sweep(E, layer, [0.0], 2, 32, seed=1)
    lay = D.drift_sweep(E, layer, [0.0], 2, 32, seed=1, emb=emb)
    assert abs(tab["q_cos"][0]) < 0.05 and lay["q_cos"][0] > 0.2 and lay["k_cos"][0] > 0.2


def test_last_uniform_on_a_planted_result():
    res = D.Result(norms=[0.0, 1.0, 10.0, 100.0], seeds=[0], stats={"row_max": [[0.1, 0.102, 0.2, 0.5]]},
                   hist_norms=[], hists=[], fixed_point_per_seed=[], fixed_point_refined=None, n_seq=1, seq_len=10,
                   hidden=4, norm_min=1.0)
    assert res.last_uniform() == 1
    res.stats["row_max"] = [[0.1, 0.1, 0.1, 0.1]]
    assert res.last_uniform() == 3


def test_committed_pieces_read_into_typed_records_and_write_back_as_stored():
    """The converter: the committed reference model's layers and the sweeps' histograms become `Reference` and
    `Histogram` records in the Result, and its JSON writes back the dicts they were read from (keys in order)."""
    import json

    from helpers.experiments.drift.records import Histogram, Reference
    from helpers.machinery.runtime import REPO_ROOT

    folder = REPO_ROOT / "results" / "drift" / "book"
    if not (folder / "reference.json").is_file():
        pytest.skip("the book's drift runs are not committed")
    ref = json.loads((folder / "reference.json").read_text())["results"]
    sweeps = json.loads((folder / "sweeps-table.json").read_text())["results"]
    res = D.Result(norms=[0.0], seeds=[0], stats={}, hist_norms=[], hists=[sw["hists"] for sw in sweeps],
                   fixed_point_per_seed=[], fixed_point_refined=None, n_seq=1, seq_len=2, hidden=4, norm_min=1.0,
                   reference=ref)
    assert isinstance(res.reference, Reference) and isinstance(res.reference.layer_norms, tuple)
    assert all(isinstance(h, Histogram) for per_seed in res.hists for h in per_seed)
    out = json.loads(json.dumps(res.to_json()))
    assert out["reference"] == ref and list(out["reference"]) == list(ref)
    assert out["hists"] == [sw["hists"] for sw in sweeps]
    assert D.Result.from_json(out).reference == res.reference
