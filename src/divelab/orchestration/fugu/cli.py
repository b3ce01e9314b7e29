"""``divelab fugu serve``: an OpenAI-compatible endpoint in front of the Fugu router."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    fugu = typer.Typer(help="Fugu (E166): a learned router over black-box chat models.", no_args_is_help=True)

    @fugu.command("serve")
    def serve(host: str = typer.Option("127.0.0.1", help="interface to bind"),
              port: int = typer.Option(8000, help="TCP port"),
              seed: int = typer.Option(0, help="seed of the demo router")) -> None:
        """Serve /v1/chat/completions over the demo worker pool (programmatic workers; see docs/systems/fugu.md)."""
        import uvicorn

        from divelab.orchestration.fugu.serve import create_app, demo_router

        uvicorn.run(create_app(demo_router(seed), "fugu"), host=host, port=port, log_level="warning")

    app.add_typer(fugu, name="fugu")
