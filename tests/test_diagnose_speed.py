"""The faster paths of `tokuni diagnose` compute what the book's functions compute: the within-input measures
from each input's Gram matrix (one batched product and a small symmetric eigenproblem per input, where the book's
functions take a singular value decomposition per measure) against `helpers.core.measures`, with padded rows, with
more rows than dimensions, and with an input of two tokens; and `measure` over a layer gives the same numbers
through either path."""

from __future__ import annotations

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
