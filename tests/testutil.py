"""Small helpers shared by the tests."""

import torch


def seeded_randn(*shape, seed=0, dtype=None):
    """Gaussian tensor from its own seeded generator (independent of the global RNG)."""
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)
