"""The faster paths of `tokuni diagnose` compute what the book's functions compute: the within-input measures
from each input's Gram matrix (one batched product and a small symmetric eigenproblem per input, where the book's
functions take a singular value decomposition per measure) against `helpers.core.measures`, with padded rows, with
more rows than dimensions, and with an input of two tokens; `measure` over a layer gives the same numbers
through either path; the lean attention a Whisper capture runs under equals transformers' eager attention bit for
bit; and a model measured again gives its committed reference run's numbers."""

from __future__ import annotations

import sys

import pytest
import torch

from helpers.core import measures as M
from helpers.diagnose import measures


def cloud(n: int, L: int, d: int, seed: int, offset: float = 0.4):
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(n, L, d, generator=g) + offset
    lengths = torch.randint(2, L + 1, (n,), generator=g)
    lengths[0] = 2                                               # an input of two tokens
    lengths[1] = L                                               # and one without padding
    m = torch.arange(L).unsqueeze(0) < lengths.unsqueeze(1)
    return X, m


@pytest.mark.parametrize("shape", [(24, 17, 32), (12, 40, 16)])     # fewer rows than dimensions, and more
def test_within_input_measures_equal_the_books_functions(shape):
    X, m = cloud(*shape, seed=sum(shape))
    got = measures.per_input_measures(X, m)
    Xd = X.double()
    want = {"ev1": M.explained_variance(Xd, 1, m), "tokenuni": M.token_uni(Xd, m), "rbf_dis": M.rbf_dis(Xd, mask=m),
            "t_sim": M.t_sim(Xd, m)}
    for k, v in want.items():
        assert torch.allclose(got[k], v, rtol=1e-10, atol=1e-12), k
    s = M.singular_values(Xd, m)
    assert got["s"].shape == s.shape and torch.allclose(got["s"], s, rtol=0, atol=1e-6 * float(s.max()))


def test_skew_from_shared_singular_values_equals_its_own():
    X, m = cloud(20, 15, 24, seed=3)
    W = measures.bootstrap_weights(20, 30, 1)
    s = measures.per_input_measures(X, m)["s"]
    assert torch.allclose(measures.skew_draws(X, m, W, s), measures.skew_draws(X, m, W), rtol=1e-9, atol=1e-9)


def test_the_lean_attention_equals_eager_bit_for_bit():
    """Whisper's attention call (scores of queries already scaled, scaling 1.0, no mask, no dropout) through
    `capture.lean_attention` equals transformers' eager attention exactly; a call with a mask, another scaling or
    asked for its weights goes to eager itself."""
    from torch import nn
    from transformers.models.whisper.modeling_whisper import eager_attention_forward

    from helpers.diagnose.capture import lean_attention

    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 4, 300, 16, generator=g) * 3 for _ in range(3))
    module = nn.Module().eval()
    want, _ = eager_attention_forward(module, q, k, v, None, scaling=1.0, dropout=0.0)
    got, weights = lean_attention(module, q, k, v, None, scaling=1.0, dropout=0.0)
    assert torch.equal(got, want) and weights is None
    mask = torch.zeros(1, 1, 300, 300)
    mask[..., 150:] = -1e9
    for kw in ({"attention_mask": mask, "scaling": 1.0}, {"attention_mask": None, "scaling": 0.25},
               {"attention_mask": None, "scaling": 1.0, "output_attentions": True}):
        got, weights = lean_attention(module, q, k, v, **kw)
        want, want_w = eager_attention_forward(module, q, k, v, **kw)
        assert torch.equal(got, want) and torch.equal(weights, want_w), kw


@pytest.mark.parametrize("name, stem, batch", [("all-MiniLM-L6-v2", "all-MiniLM-L6-v2", 32),
                                               ("whisper-base", "whisper-base", 16)])
def test_a_model_reads_as_its_committed_reference_run(name, stem, batch):
    """all-MiniLM-L6-v2 and whisper-base measured again as the synthesis chapter's committed book run measured
    them (96 WikiText sentences or 12 FSDD recordings, 128 tokens or frames, 200 draws, seed 0): every measure at
    every layer, its interval over the inputs and its first twin's, the same as the committed numbers. (whisper-base:
    about 40 CPU-s, its 24 forward passes over 30 s windows.)"""
    import json
    from pathlib import Path

    import numpy as np

    from helpers.diagnose.capture import capture
    from helpers.diagnose.probe import default_probe
    from helpers.hf import models
    from helpers.hf.loading import ModelUnavailable

    ref = json.loads((Path(__file__).resolve().parents[1] / "results" / "synthesis" / "book" /
                      f"model-{stem}.json").read_text())
    p, r = ref["params"], ref["results"]
    modality = models.MODALITY[name]
    n = p["audio_inputs"] if modality == "audio" else p["text_inputs"]
    assert (n, p["max_tokens"], p["draws"], p["seed"]) == ((12 if modality == "audio" else 96), 128, 200, 0)
    probe = default_probe(modality, n, 0)
    dev = torch.device("cpu")
    got = []
    for untrained in (False, True):
        try:
            loaded = models.load(name, untrained=untrained, device=dev, modality=modality, seed=0)
        except ModelUnavailable as err:
            pytest.skip(str(err))
        cap = capture(loaded, probe, dev, batch, 128)
        del loaded
        W = measures.bootstrap_weights(cap.n_inputs, 200, 0)
        got.append(measures.measure(cap.layers, W, cap.qk, with_isoscore=False))
    model, first = got
    for m, c in r["curves"].items():
        want = np.array([np.nan if x is None else x for x in c["model"]["estimate"]], dtype=float)
        assert np.allclose(model.estimate[m], want, rtol=1e-7, atol=1e-9, equal_nan=True), m
        lo, hi = measures.interval(model.draws[m], model.estimate[m])
        assert np.allclose(lo, np.array(c["model"]["low"], dtype=float), rtol=1e-7, atol=1e-9, equal_nan=True), m
        assert np.allclose(first.estimate[m], np.array(c["twins"][0], dtype=float), rtol=1e-7, atol=1e-9,
                           equal_nan=True), m


def test_the_measures_run_on_one_thread_and_give_the_threads_back(monkeypatch):
    """`measures.measure` runs its linear algebra (matrices of at most d × d) on one thread, where a second only
    waits (on two busy cores an eigendecomposition of a 512 × 512 covariance took 24 times the CPU time on two
    threads), and gives the process its thread count back, also when a measure fails."""
    seen = []
    eigh = torch.linalg.eigh

    def spy(*a, **k):
        seen.append(torch.get_num_threads())
        return eigh(*a, **k)

    monkeypatch.setattr(torch.linalg, "eigh", spy)
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        X, m = cloud(12, 9, 16, seed=5)
        W = measures.bootstrap_weights(12, 20, 0)
        got = measures.measure([(X, m), (X + 1, m)], W, with_isoscore=False)
        assert seen == [1, 1] and torch.get_num_threads() == 2
        with pytest.raises(IndexError):                                  # a layer of width 0
            measures.measure([(X[:, :, :0], m)], W, with_isoscore=False)
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
    assert float(got.estimate["cos"][0]) == float(measures.pooled_measures(X, m, W)["cos"][0])


@pytest.mark.skipif(sys.platform != "linux", reason="glibc's mallopt")
def test_the_command_line_keeps_freed_memory_for_the_next_forward_pass():
    """After `cli.keep_freed_memory` (which `tokuni diagnose` calls), freeing and allocating a block of 256 MB again
    (as each layer of Whisper's 30 s windows does) takes its pages from the heap: five rounds fault in at most
    one block's pages, where a process left as it is faults in every block again (measured in fresh
    processes)."""
    import subprocess
    import textwrap
    from pathlib import Path

    code = textwrap.dedent("""
        import resource, sys, torch
        from helpers.diagnose import cli
        if sys.argv[1] == "keep":
            assert cli.keep_freed_memory()
        x = torch.ones(64 * 2**20)
        del x
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        for _ in range(5):
            x = torch.ones(64 * 2**20)
            del x
        print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
    """)
    repo = Path(__file__).resolve().parents[1]
    faults = {}
    for how in ("default", "keep"):
        out = subprocess.run([sys.executable, "-c", code, how], capture_output=True, text=True, cwd=repo, check=True,
                             env={**__import__("os").environ, "PYTHONPATH": str(repo)})
        faults[how] = int(out.stdout.strip())
    assert faults["default"] > 5 * 60_000                     # 5 × 65,536 pages of 4 KiB faulted in again
    assert faults["keep"] <= 70_000, faults                   # one block's 65,536 pages at most
