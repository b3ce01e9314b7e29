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

    @app.command("adapt")
    def adapt_cmd(
        data: str = typer.Argument(..., help="training rows, JSON Lines: sft {prompt, completion} or {messages}; "
                                            "dpo {prompt, chosen, rejected}; grpo {prompt, ...}"),
        model: str = typer.Option("smollm2-135m-instruct", help="base: a zoo name, smollm2-135m-instruct or a "
                                                                "Hugging Face checkpoint directory"),
        method: str = typer.Option("sft", help="trainer: sft, dpo or grpo"),
        steps: int = typer.Option(200, help="optimizer steps"),
        lr: float = typer.Option(2e-4, help="peak learning rate"),
        batch_size: int = typer.Option(8, help="rows per optimizer step"),
        max_length: int = typer.Option(512, help="longest tokenized row kept (sft, dpo)"),
        lora_r: int = typer.Option(16, help="adapter rank"),
        lora_alpha: int = typer.Option(32, help="adapter scale numerator (update x alpha / r)"),
        beta: float = typer.Option(0.1, help="dpo preference temperature; grpo KL coefficient"),
        num_generations: int = typer.Option(4, help="grpo: completions per prompt"),
        reward: list[str] = typer.Option([], help="grpo: a reward function as module:function (repeatable)"),
        save_every: int = typer.Option(50, help="steps between resumable checkpoints"),
        seed: int = typer.Option(0, help="seed for the adapter's initialisation and the row order"),
        force: bool = typer.Option(False, help="retrain even when cached"),
    ) -> None:
        """Fit a LoRA adapter with TRL (cached by content; a killed run resumes) and print where it is."""
        import importlib

        from rich.console import Console

        from divelab.lm.adapt import AdaptConfig, adapt, read_rows

        err = Console(stderr=True)
        try:
            funcs = []
            for spec in reward:
                mod, _, fn = spec.partition(":")
                if not fn:
                    raise ValueError(f"--reward {spec!r}: write it as module:function")
                try:
                    funcs.append(getattr(importlib.import_module(mod), fn))
                except (ImportError, AttributeError) as exc:
                    raise ValueError(f"--reward {spec!r}: {exc}") from None
            config = AdaptConfig(method=method, steps=steps, lr=lr, batch_size=batch_size, max_length=max_length,
                                 lora=_lora(lora_r, lora_alpha), beta=beta, num_generations=num_generations,
                                 save_every=save_every, seed=seed)
            rows = read_rows(data)
            adapter = adapt(model, rows, config, reward_funcs=funcs, name="divelab adapt", force=force)
        except (ValueError, FileNotFoundError) as exc:
            err.print(f"[red]error:[/red] {exc}")
            raise typer.Exit(2) from None
        rec = adapter.record
        print(f"adapter: {adapter.path / 'adapter'}")
        losses = [h["loss"] for h in rec["log"] if "loss" in h]
        tail = f", last loss {losses[-1]:.4f}" if losses else ""
        print(f"{rec['config']['method']} on {rec['base']}: {rec['n_rows']} rows, {rec['config']['steps']} steps, "
              f"trained in {rec['train_s']:.0f} s{tail}")


def _lora(r: int, alpha: int):  # noqa: ANN202 - keeps divelab.lm.adapt out of `divelab --help`'s imports
    from divelab.lm.adapt import LoraSpec

    return LoraSpec(r=r, alpha=alpha)
