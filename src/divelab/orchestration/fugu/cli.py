"""``divelab fugu serve``: an OpenAI-compatible endpoint in front of the Fugu router."""

from __future__ import annotations

import typer

from divelab.serving.server.cli_options import (
    api_key_option,
    public_metrics_option,
    resolve_access,
    ssl_certfile_option,
    ssl_keyfile_option,
)


def _urls(workers: list[str]) -> dict[str, str]:
    out = {}
    for w in workers:
        name, sep, url = w.partition("=")
        if not sep or not name or not url:
            raise typer.BadParameter(f"--worker takes NAME=URL (e.g. smol-add=http://127.0.0.1:8001/v1), got {w!r}")
        out[name] = url
    return out


def register(app: typer.Typer) -> None:
    fugu = typer.Typer(help="Fugu (E166): a learned router over black-box chat models.", no_args_is_help=True)

    @fugu.command("serve")
    def serve(host: str = typer.Option("127.0.0.1", help="interface to bind"),
              port: int = typer.Option(8000, help="TCP port"),
              seed: int = typer.Option(0, help="seed of the router"),
              worker: list[str] = typer.Option(None, help="NAME=URL of a real worker served elsewhere (repeat for "
                                                          "each): route over the recorded SmolLM2 pool instead of "
                                                          "the demo pool"),
              worker_api_key: str = typer.Option(None, envvar="DIVELAB_WORKER_API_KEY", show_default=False,
                                                 help="the key the --worker servers require (each started with "
                                                      "`divelab serve --api-key KEY`); env DIVELAB_WORKER_API_KEY. "
                                                      "Kept apart from --api-key, which guards this router"),
              api_key: str = api_key_option(),
              public_metrics: bool = public_metrics_option(),
              ssl_keyfile: str = ssl_keyfile_option(),
              ssl_certfile: str = ssl_certfile_option()) -> None:
        """Serve /v1/chat/completions over the demo worker pool (programmatic workers), or with --worker over
        the real workers (each behind `divelab serve --model DIR`; see `divelab fugu export-workers`)."""
        import uvicorn

        from divelab.orchestration.fugu.serve import create_app, demo_router, routed_pool

        access = resolve_access(host, api_key, ssl_keyfile, ssl_certfile)  # before the router trains
        if worker:
            from divelab.orchestration.fugu.real_workers import PoolConfig, build

            model = routed_pool(_urls(worker), build(PoolConfig(seed=seed)), seed=seed,
                                api_key=worker_api_key or None)
        else:
            model = demo_router(seed)
        application = create_app(model, "fugu", api_key=access.api_key, public_metrics=public_metrics)
        typer.echo(f"serving 'fugu' on {access.url(host, port)} ({access.note})", err=True)
        uvicorn.run(application, host=host, port=port, log_level="warning", **access.tls)

    @fugu.command("export-workers")
    def export_workers(out: str = typer.Argument(..., help="directory to write one checkpoint per worker into"),
                       seed: int = typer.Option(0, help="seed of the pool's adapters")) -> None:
        """Write every real worker (adapter merged) as an HF checkpoint directory OUT/NAME, which
        `divelab serve --model OUT/NAME --drafter none` serves under the model id NAME."""
        from pathlib import Path

        from divelab.orchestration.fugu.real_data import eval_pool
        from divelab.orchestration.fugu.real_workers import PoolConfig, save_checkpoint_dir, train_worker

        try:  # before minutes of training, not after: the folder must be writable
            Path(out).mkdir(parents=True, exist_ok=True)
            Path(out, ".write-check").touch()
            Path(out, ".write-check").unlink()
        except OSError as exc:
            typer.echo(f"error: cannot write worker checkpoints into {out!r} ({exc.strerror or exc}); pass a "
                       "writable directory", err=True)
            raise typer.Exit(2) from None
        cfg = PoolConfig(seed=seed)
        held_out = eval_pool(cfg.per_family, cfg.seed)
        for spec in cfg.specs:
            path = save_checkpoint_dir(spec, train_worker(spec, cfg, held_out), str(Path(out) / spec.name))
            typer.echo(f"{spec.name}: {path}")

    app.add_typer(fugu, name="fugu")
