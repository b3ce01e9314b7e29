"""Shared fixtures of the serving tests."""

import pytest
import torch


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    """Tiny models are dispatch-bound: intra-op threads on a loaded machine cost up to 40x."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)
