"""Shared fixtures of the serving tests: one thread, and the smoke model behind `divelab serve`
with a tiny (untrained, so often rejected) DSpark drafter on loopback, once on each target engine
(the default lean path, then the HF model's batched forward)."""

import openai
import pytest
import torch

from divelab.lm import load_model
from divelab.serving.dspark import Drafter, DrafterConfig
from divelab.serving.dspark.sps import SPSCurve
from divelab.serving.server import BackgroundServer, create_app


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    """Tiny models are dispatch-bound: intra-op threads on a loaded machine cost up to 40x."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.fixture(scope="module")
def model():
    return load_model("smoke")


@pytest.fixture(scope="module", params=["lean", "hf"])
def server(model, request):
    target, tok = model
    torch.manual_seed(0)
    drafter = Drafter.for_target(target, DrafterConfig(kind="markov", gamma=4, window=8, rank=8))
    app = create_app(target, tok, "smoke", drafter, sps=SPSCurve.synthetic_accelerator(0.01, 8), max_batch=4,
                     max_queue=8, engine=request.param)
    assert (app.state.engine.lean is None) == (request.param == "hf")
    with BackgroundServer(app) as srv:
        srv.app = app
        yield srv


@pytest.fixture(scope="module")
def sdk(server):
    return openai.OpenAI(base_url=server.base_url, api_key="-", max_retries=0)
