"""Figure 1's pieces share their random encoders: inside `kept_encoders` a repeated build is a copy of the first,
with the same weights and the global RNG left where a build leaves it."""

import torch

from helpers.hf import escalation as H

SIZES = dict(depth=2, hidden=32, heads=2, intermediate=64)


def test_a_kept_encoder_is_the_same_model_and_leaves_the_same_draws(monkeypatch):
    builds = []
    real = H._build
    monkeypatch.setattr(H, "_build", lambda *a: builds.append(a) or real(*a))
    want = []
    for kind, seed in (("bert", 3), ("albert", 3), ("bert", 3)):
        m = H.random_encoder(kind, seed=seed, **SIZES)
        want.append((m.state_dict(), m.training, torch.rand(5)))
    assert len(builds) == 3
    builds.clear()
    with H.kept_encoders():
        for (sd, training, after), (kind, seed) in zip(want, (("bert", 3), ("albert", 3), ("bert", 3)), strict=True):
            m = H.random_encoder(kind, seed=seed, **SIZES)
            got = m.state_dict()
            assert list(got) == list(sd) and all(torch.equal(got[k], sd[k]) for k in sd)
            assert m.training == training and torch.equal(torch.rand(5), after)
            with torch.no_grad():                       # a copy: changing it leaves the kept model as built
                next(m.parameters()).add_(1.0)
        assert len(builds) == 2
    assert not H._KEPT.active


def test_a_model_beyond_the_budget_is_built_each_time():
    with H.kept_encoders(max_bytes=1):
        a = H.random_encoder("bert", seed=1, **SIZES)
        b = H.random_encoder("bert", seed=1, **SIZES)
        assert a is not b and not H._KEPT
        assert all(torch.equal(x, y) for x, y in zip(a.parameters(), b.parameters(), strict=True))
