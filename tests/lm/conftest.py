"""divelab.lm tests run torch on one thread: on this shared 2-core machine two threads are many
times slower for tiny models whenever other processes compete for the cores."""

from __future__ import annotations

import pytest
import torch


@pytest.fixture(autouse=True)
def _one_torch_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
