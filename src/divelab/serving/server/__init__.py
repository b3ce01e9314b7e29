"""``divelab serve``: any HF causal LM behind an OpenAI-compatible HTTP server, decoded by DSpark.

All HTTP requests join one continuously-batched engine loop (``SpecEngine.prefill`` /
``SpecEngine.step``; the DSpark scheduler picks per-request verification lengths across them).
Greedy output is token-identical to the model's own greedy decoding, sampling is lossless
speculative sampling (per-request temperature / top-p), and a seed makes a request reproducible.

>>> from divelab.serving.server import build_app, BackgroundServer      # doctest: +SKIP
>>> with BackgroundServer(build_app("smoke")) as srv: print(srv.base_url)
"""

from divelab.serving.server.app import create_app, plain_chat_prompt
from divelab.serving.server.engine_loop import EngineLoop, Job, QueueFull, SamplingParams, top_p_filter
from divelab.serving.server.metrics import ServerMetrics
from divelab.serving.server.runner import BackgroundServer, build_app, free_port

__all__ = ["BackgroundServer", "EngineLoop", "Job", "QueueFull", "SamplingParams", "ServerMetrics", "build_app",
           "create_app", "free_port", "plain_chat_prompt", "top_p_filter"]
