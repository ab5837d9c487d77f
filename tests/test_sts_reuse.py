"""What the STS runs share instead of recomputing — one decomposition for both whitening variants, one encoder
pass for the same sentences — gives the same numbers, bit for bit, as computing each anew."""

import numpy as np
import pytest
import torch

from helpers.core import sts as C
from helpers.core.softdecay import whitening_fit, whitening_fits
from helpers.experiments import sts


def pairs(n=90, d=300, dtype=torch.float32):
    """Rank-deficient as the `ci` sets are (2n rows < d columns), with an anisotropic mean."""
    g = torch.Generator().manual_seed(0)
    e1 = torch.randn(n, d, generator=g, dtype=dtype) + 2
    e2 = e1 + 0.7 * torch.randn(n, d, generator=g, dtype=dtype)
    rng = np.random.default_rng(1)
    return e1, e2, np.round(rng.uniform(0, 5, n) * 2) / 2, np.repeat(["a", "b", "c"], n // 3)


def same(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_whitening_variants_from_one_decomposition_are_each_fit(dtype):
    X = torch.cat(pairs(dtype=dtype)[:2])
    ks = (None, 256, 7)
    for k, (mu, W) in zip(ks, whitening_fits(X, ks), strict=True):
        mu0, W0 = whitening_fit(X, k)
        assert same(mu, mu0) and same(W, W0), k
    with pytest.raises(ValueError, match="k must lie"):
        whitening_fits(X, (None, 301))


def test_apply_methods_is_apply_method_of_each():
    e1, e2, *_ = pairs()
    methods = (*C.METHODS, *C.FLIP_FREE)
    got = C.apply_methods(methods, e1, e2, -0.6, 0.8)
    assert list(got) == list(methods)
    for m in methods:
        want = C.apply_method(m, e1, e2, -0.6, 0.8)
        assert same(got[m][0], want[0]) and same(got[m][1], want[1]), m


def test_refitted_draws_are_each_draw_refitted_method_by_method():
    """The refitted bootstrap and the half-samples, with both whitening variants (d above 256), equal `score` of
    each draw's cosines with every transform fitted on its own by `apply_method`."""
    e1, e2, gold, sub = pairs()
    methods = sts.REFIT_METHODS
    got = C.refit_bootstrap(e1, e2, gold, sub, methods, draws=3, seed=3)
    idx = C.bootstrap_indices(sub, 3, 3)
    for b in range(3):
        i = torch.as_tensor(idx[b])
        for m in methods:
            assert got[m][b] == C.score(C.cosines(*C.apply_method(m, e1[i], e2[i])), gold[idx[b]], sub), (m, b)
    halves = C.halfsample_refit(e1, e2, gold, sub, methods, draws=2, seed=2)
    for b, idx in enumerate(C.half_sample_indices(sub, 2, 2)):
        i = torch.as_tensor(idx)
        for m in methods:
            assert halves[m][b] == C.score(C.cosines(*C.apply_method(m, e1[i], e2[i])), gold[idx], sub[idx]), m


def test_crossfit_is_each_method_fitted_on_its_own():
    """`crossfit` fits every method of a half at once: the same scores as fitting each with `fitted_map`."""
    e1, e2, gold, sub = pairs()
    methods, splits, boot, seed = sts.REFIT_METHODS, 2, 5, 4
    got = C.crossfit(e1, e2, gold, sub, methods, splits, boot, seed)
    n = len(gold)
    for k, half in enumerate(C.half_sample_indices(sub, splits, seed)):
        a = np.zeros(n, bool)
        a[half] = True
        ia, ib = torch.as_tensor(np.flatnonzero(a)), torch.as_tensor(np.flatnonzero(~a))
        idx = C.bootstrap_indices(sub, boot, seed + 1 + k)
        for m in methods:
            cos = np.empty(n)
            for fit, apply in ((ia, ib), (ib, ia)):
                cos[apply.numpy()] = C.cosines(*C.fitted_map(m, e1[fit], e2[fit])(e1[apply], e2[apply]))
            assert got[m][k, 0] == C.score(cos, gold, sub)
            assert np.array_equal(got[m][k, 1:], C.score_draws(cos[idx], gold[idx], sub[idx[0]], "subset-mean"))


@pytest.fixture(scope="module")
def minilm():
    from helpers.hf import models

    return models.load("all-MiniLM-L6-v2")


def test_kept_encodings_answer_a_repeat_with_the_first_pass(minilm, monkeypatch):
    """Inside `kept_encodings` the same texts through the same model are encoded once; what comes back equals a
    fresh pass, and a request without token-level SoftDecay takes the pass made with it (and drops it)."""
    from helpers.hf import sts as H

    texts = ["A man is playing a guitar.", "Someone plays an instrument.", "The stock market fell.",
             "A dog runs in the park.", "Two dogs are running."]
    fresh = H.encode(minilm, texts, 64, 2, -0.6)
    plain = H.encode(minilm, texts, 64, 2, None)
    passes = []
    real = H._encode
    monkeypatch.setattr(H, "_encode", lambda *a: passes.append(a[4]) or real(*a))
    with H.kept_encodings():
        first = H.encode(minilm, texts, 64, 2, -0.6)
        again = H.encode(minilm, texts, 64, 2, None)
        assert passes == [-0.6]
        for x, y in ((first, fresh), (again, plain)):
            assert same(x.layer_means, y.layer_means) and same(x.cls_last, y.cls_last)
        assert same(first.token_sd_last, fresh.token_sd_last) and again.token_sd_last is None
        H.encode(minilm, texts[::-1], 64, 2, None)                 # another order: another pass
        H.encode(minilm, texts, 64, 3, None)                       # other batches: another pass
        H.encode(minilm, texts, 64, 2, -0.4)                       # another α: another pass
        assert passes == [-0.6, None, None, -0.4]
    H.encode(minilm, texts, 64, 2, None)                           # outside the block nothing is kept
    assert len(passes) == 5 and not H._KEPT.active


def test_kept_encodings_let_the_oldest_go_beyond_the_budget(minilm):
    from helpers.hf import sts as H

    with H.kept_encodings(max_bytes=1):
        H.encode(minilm, ["one sentence."], 64, 2, None)
        H.encode(minilm, ["another sentence."], 64, 2, None)
        assert len(H._KEPT) == 1


def test_kept_fits_refit_nothing_twice_and_change_no_number(monkeypatch):
    """Inside `kept_fits` the same-fit procedures, the planted size 0 and a repeated set give the same numbers as
    without it, and rows met again are not refitted (the cross-fit's first halves are the half-samples)."""
    from helpers.core import softdecay

    e1, e2, gold, sub = pairs()
    methods = sts.REFIT_METHODS

    def everything():
        both = torch.cat([e1, e2])
        return (C.halfsample_refit(e1, e2, gold, sub, methods, draws=3, seed=5),
                C.crossfit(e1, e2, gold, sub, methods, 3, 4, seed=5),
                C.apply_methods(C.METHODS, e1, e2),
                C.apply_method("whitening", *C.plant(both, "mean", 0.0).split(len(gold))))

    calls = []
    real = softdecay.whitening_fits
    monkeypatch.setattr(C, "whitening_fits", lambda X, ks: calls.append(ks) or real(X, ks))
    plain = everything()
    n_plain = len(calls)
    calls.clear()
    with C.kept_fits():
        kept = everything()
    assert not C._FITS.active
    # 3 half-samples + 3 other halves + the whole set: each fitted once, both variants together
    assert len(calls) == 7 < n_plain and all(ks == (None, 256) for ks in calls)
    for a, b in zip(plain[:2], kept[:2], strict=True):
        assert all(np.array_equal(a[m], b[m]) for m in methods)
    for m in C.METHODS:
        assert same(plain[2][m][0], kept[2][m][0]) and same(plain[2][m][1], kept[2][m][1]), m
    assert same(plain[3][0], kept[3][0]) and same(plain[3][1], kept[3][1])


def test_kept_fits_let_the_oldest_go_beyond_the_budget():
    e1, e2, *_ = pairs()
    with C.kept_fits(max_bytes=1):
        C.apply_method("whitening", e1, e2)
        C.apply_method("whitening", e2, e1)
        assert len(C._FITS) == 1
