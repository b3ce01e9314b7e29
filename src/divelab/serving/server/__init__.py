"""``divelab serve``: any HF causal LM behind an OpenAI-compatible HTTP server, decoded by DSpark.

All HTTP requests join one continuously-batched engine loop (``SpecEngine.prefill_many`` /
``SpecEngine.step``; the DSpark scheduler picks per-request verification lengths across them).
Greedy output is token-identical to the model's own greedy decoding, sampling is lossless
speculative sampling (per-request temperature / top-p / penalties / logit bias), and a seed makes a
request reproducible.

Names are imported on first use, so the torch-free HTTP plumbing (:mod:`.openai_http`,
:mod:`.schemas`, :mod:`.metrics`) can be used by other servers without importing torch.

>>> from divelab.serving.server import build_app, BackgroundServer      # doctest: +SKIP
>>> with BackgroundServer(build_app("smoke")) as srv: print(srv.base_url)
"""

from importlib import import_module

_WHERE = {"create_app": "app", "plain_chat_prompt": "app", "EngineLoop": "engine_loop", "Job": "engine_loop",
          "QueueFull": "engine_loop", "SamplingParams": "engine_loop", "top_p_filter": "logits",
          "ServerMetrics": "metrics", "ServerState": "state", "state_of": "state", "router": "routes",
          "BackgroundServer": "runner", "build_app": "runner", "free_port": "runner"}
__all__ = sorted(_WHERE)


def __getattr__(name: str):
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f"{__name__}.{_WHERE[name]}"), name)
