"""``divelab serve`` (torch, uvicorn and the server modules are imported inside the command)."""

from __future__ import annotations

import typer

from divelab.serving.server.cli_options import (
    api_key_option,
    public_metrics_option,
    resolve_access,
    ssl_certfile_option,
    ssl_keyfile_option,
)


def register(app: typer.Typer) -> None:
    @app.command("serve")
    def serve_cmd(
        model: str = typer.Option("smollm2-135m-instruct", help="zoo name or a local HF checkpoint directory"),
        drafter: str = typer.Option("auto", help="auto: the drafter `divelab dspark train-drafter --target MODEL` "
                                                 "built, if any; none: plain decoding; or a drafter directory"),
        scheduler: str = typer.Option("dspark", help="fixed-K | threshold-T | dspark | stale-k | global-argmax"),
        host: str = typer.Option("127.0.0.1"),
        port: int = typer.Option(8000),
        device: str = typer.Option("cpu", help="cpu | cuda"),
        engine: str = typer.Option(None, help="target engine: lean (Llama-family models such as SmolLM2 on the CPU: "
                                              "static cache, k-token verification, in-place rollback) or hf (the HF "
                                              "model's forward, any causal LM, batched) or auto (lean where it runs "
                                              "the model, else hf). Default: lean on the CPU, hf on cuda or with "
                                              "--guard"),
        fmt: str = typer.Option("fp32", help="lean engine weight format: fp32 | bf16 | int8"),
        max_batch: int = typer.Option(8, help="requests decoded together in the engine loop"),
        max_queue: int = typer.Option(64, help="waiting requests before new ones get HTTP 429"),
        name: str = typer.Option(None, help="the model id clients send (default: the model name)"),
        seed: int = typer.Option(0),
        threads: int = typer.Option(None, help="torch intra-op threads (default: one per core); on a CPU shared "
                                               "with other work, 1-2 is often much faster"),
        api_key: str = api_key_option(),
        public_metrics: bool = public_metrics_option(),
        ssl_keyfile: str = ssl_keyfile_option(),
        ssl_certfile: str = ssl_certfile_option(),
        guard: str = typer.Option(None, help="a guard probe file (divelab first-token-probe probe-first-token "
                                             "--save-guard): score every request with it"),
        guard_policy: str = typer.Option("annotate", help="what the guard does with a flagged request: annotate "
                                                          "(score only), stop, or redirect (a request may override)"),
    ) -> None:
        """Serve a causal LM behind an OpenAI-compatible API, decoded by DSpark (lossless)."""
        import uvicorn

        from divelab.serving.server.runner import build_app

        access = resolve_access(host, api_key, ssl_keyfile, ssl_certfile)  # before the model loads
        try:
            application = build_app(model, drafter, scheduler=scheduler, device=device, engine=engine, fmt=fmt,
                                    max_batch=max_batch,
                                    max_queue=max_queue, seed=seed, name=name,
                                    threads=threads, api_key=access.api_key, public_metrics=public_metrics,
                                    **({"guard": guard, "guard_policy": guard_policy} if guard else {}))
        except (ValueError, FileNotFoundError) as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(2) from None
        speculative = application.state.engine.speculative
        lean = application.state.engine.lean
        typer.echo(f"serving {application.state.model_name!r} on {access.url(host, port)} "
                   f"({'DSpark speculative' if speculative else 'plain'} decoding on the "
                   f"{'lean ' + lean.fmt if lean is not None else 'hf'} engine; {access.note})", err=True)
        if not speculative and drafter == "auto":
            typer.echo(f"no trained drafter for {model!r} in the cache, so no speculation; build one with "
                       f"`divelab dspark train-drafter --target {model}`", err=True)
        uvicorn.run(application, host=host, port=port, log_level="info", timeout_graceful_shutdown=5,
                    **access.tls)
