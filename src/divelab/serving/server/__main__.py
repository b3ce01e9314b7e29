"""``python -m divelab.serving.server --model NAME ...``: the same command as ``divelab serve``."""

import typer

from divelab.serving.server.cli import register

app = typer.Typer(add_completion=False)
register(app)

if __name__ == "__main__":
    app()
