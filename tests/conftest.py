"""Shared test fixtures."""

import pytest
import torch


@pytest.fixture
def float64():
    """Identities checked to 1e-10 run in float64; the default dtype is restored afterwards."""
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(old)
