"""``divelab train-lm``: train (or load from the cache) a zoo model and say where it is."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    @app.command("train-lm")
    def train_lm(
        recipe: str = typer.Option("quick", help="zoo recipe (smoke, small, quick, full) or model config (tiny-4m)"),
        steps: int = typer.Option(None, help="override the recipe's training steps"),
        seq_len: int = typer.Option(None, help="override the recipe's sequence length"),
        batch_size: int = typer.Option(None, help="override the recipe's batch size"),
        vocab_size: int = typer.Option(None, help="override the recipe's tokenizer vocabulary size"),
        seed: int = typer.Option(0, help="seed for initialisation and batch order"),
        force: bool = typer.Option(False, help="retrain even when cached"),
    ) -> None:
        """Train a tiny LM on the stdlib corpus (cached; a second call just loads it)."""
        import json

        from rich.console import Console

        from divelab.lm import zoo

        overrides = {k: v for k, v in {"steps": steps, "seq_len": seq_len, "batch_size": batch_size,
                                       "vocab_size": vocab_size, "seed": seed}.items() if v is not None}
        err = Console(stderr=True)
        try:
            path = zoo.ensure_trained(recipe, force=force, **overrides)
        except ValueError as exc:
            err.print(f"[red]error:[/red] {exc}")
            raise typer.Exit(2) from None
        meta = json.loads((path / zoo.META_FILE).read_text())
        s = zoo.summary(meta)
        print(f"model: {path}")
        print(f"config {s['model']} ({s['parameters']:,} parameters), vocab {s['vocab_size']}, {s['steps']} steps, "
              f"{s['tokens_seen']:,} tokens, trained in {s['train_wall_time_s']:.0f} s")
        if s["val_loss"] is not None:
            print(f"val loss {s['val_loss']:.4f} nats/token (perplexity {s['val_ppl']:.2f}, "
                  f"{s['val_bits_per_byte']:.3f} bits/byte)")
