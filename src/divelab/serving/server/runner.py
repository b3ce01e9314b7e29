"""Load a model (+ drafter) and run the app under uvicorn, in the foreground or in a thread."""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

import uvicorn

from divelab.serving.server.app import create_app


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def resolve_drafter(model: str, drafter: str | Path | None) -> Path | None:
    """Which drafter to serve ``model`` with: ``None``/``"auto"``: the one ``divelab dspark train-drafter
    --target <model>`` built and cached, if there is one; ``"none"``: no speculation; else a directory."""
    if drafter is None or str(drafter) == "auto":
        from divelab.serving.dspark.chat_drafter import default_drafter_dir

        return default_drafter_dir(str(model))
    if str(drafter).lower() == "none":
        return None
    return Path(drafter)


def build_app(model: str, drafter: str | Path | None = None, scheduler: str = "dspark", device: str = "cpu",
              max_batch: int = 8, max_queue: int = 64, seed: int = 0, name: str | None = None,
              threads: int | None = None, engine: str | None = None, fmt: str = "fp32", **kw):
    """``model``: a zoo name or a local HF checkpoint dir; ``drafter``: a dir from ``train-drafter``, "none",
    or None / "auto" (the cached drafter ``divelab dspark train-drafter --target <model>`` built, if any);
    ``threads``: torch intra-op threads (None: torch's default, one per core); ``engine``: the target engine,
    ``"lean"`` (weights in ``fmt``: fp32 | bf16 | int8), ``"hf"`` or ``"auto"`` (lean where it runs the model, else
    hf); None: lean on the CPU (hf on cuda or with a guard), a ValueError for a model the lean path does not run;
    ``kw`` goes to
    :func:`~divelab.serving.server.app.create_app` (e.g. ``api_key``, ``public_metrics``).
    Raises ValueError / FileNotFoundError with a clear message (e.g. a drafter for another model)."""
    import torch

    from divelab.lm import load_model
    from divelab.serving.dspark import load_drafter

    if device not in ("cpu", "cuda"):
        raise ValueError(f"device must be 'cpu' or 'cuda', got {device!r}")
    if device == "cuda" and not torch.cuda.is_available():
        raise ValueError("--device cuda given but no CUDA device is available")
    if engine not in (None, "lean", "hf", "auto"):
        raise ValueError(f"engine must be 'lean', 'hf' or 'auto', got {engine!r}")
    if engine == "lean" and device != "cpu":
        raise ValueError("the lean engine runs on the CPU: use --engine hf with --device cuda")
    if threads is not None:
        if threads < 1:
            raise ValueError(f"threads must be >= 1, got {threads}")
        torch.set_num_threads(threads)
    target, tok = load_model(model)
    target = target.to(device).eval()
    d, cal = (None, None)
    drafter = resolve_drafter(model, drafter)
    if drafter is not None:
        try:
            d, cal = load_drafter(drafter, target)
        except (ValueError, RuntimeError) as exc:
            raise ValueError(f"drafter {drafter} does not match model {model!r}: {exc}") from None
        d = d.to(device)
    return create_app(target, tok, name or Path(str(model)).name, d, cal, scheduler=scheduler, max_batch=max_batch,
                      max_queue=max_queue, seed=seed, engine=engine, fmt=fmt, **kw)


class BackgroundServer:
    """uvicorn in a daemon thread on a free loopback port (tests, benchmarks, notebooks); an app built with
    ``api_key=...`` wants that key from its clients.

    >>> with BackgroundServer(app) as srv:          # doctest: +SKIP
    ...     openai.OpenAI(base_url=srv.base_url, api_key="-").models.list()
    """

    def __init__(self, app, host: str = "127.0.0.1", port: int | None = None, **config) -> None:
        """``config``: more ``uvicorn.Config`` arguments, e.g. ``ssl_keyfile`` / ``ssl_certfile`` for HTTPS."""
        self.host, self.port = host, port or free_port(host)
        config = {"log_level": "warning", "lifespan": "on", **config}
        self.https = bool(config.get("ssl_certfile"))
        self.server = uvicorn.Server(uvicorn.Config(app, host=self.host, port=self.port, **config))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    @property
    def base_url(self) -> str:
        return f"{'https' if self.https else 'http'}://{self.host}:{self.port}/v1"

    def start(self, timeout_s: float = 30.0) -> BackgroundServer:
        self.thread.start()
        t0 = time.time()
        while not self.server.started:
            if time.time() - t0 > timeout_s or not self.thread.is_alive():
                raise RuntimeError(f"server did not start on {self.host}:{self.port}")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=15)

    def __enter__(self) -> BackgroundServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
