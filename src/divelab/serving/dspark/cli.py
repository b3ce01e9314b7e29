"""``divelab dspark train-drafter`` and ``divelab dspark generate`` (heavy imports stay inside the commands)."""

from __future__ import annotations

from pathlib import Path

import typer


def register(app: typer.Typer) -> None:
    @app.command("train-drafter")
    def train_drafter_cmd(
        target: str = typer.Option("smoke", help="zoo name (smoke, small, quick, full) or a local HF checkpoint dir"),
        out: Path = typer.Option(Path("dspark-drafter"), help="directory to write the drafter to"),
        kind: str = typer.Option("markov", help="parallel | markov | rnn | ar"),
        gamma: int = typer.Option(8, help="draft block length γ (>= 1)"),
        steps: int = typer.Option(200, help="training steps"),
        regenerate: int = typer.Option(0, help="train on this many target-sampled sequences (0 = corpus text)"),
        lr: float = typer.Option(5e-3, help="learning rate"),
        corpus: Path = typer.Option(None, help="a text file or directory of .py/.txt files (default: stdlib train split)"),
        calibrate_prompts: int = typer.Option(8, help="held-out prompts for STS calibration (0 = skip)"),
        seed: int = typer.Option(0),
    ) -> None:
        """Train a DSpark drafter for a causal LM and fit its STS calibration."""
        import numpy as np
        import torch

        from divelab.lm import encode_split, load_model
        from divelab.serving.dspark.api import calibrate, encode_texts, save_drafter, train_drafter_on_text
        from divelab.serving.dspark.training import DrafterTrainConfig

        try:
            model, tok = load_model(target)
            if corpus is None:
                tokens = encode_split(tok, "train")
                held = encode_split(tok, "val")
            else:
                files = [corpus] if corpus.is_file() else sorted(p for p in corpus.rglob("*") if p.suffix in (".py", ".txt"))
                if not files:
                    raise ValueError(f"no .py/.txt files under {corpus}")
                tokens = encode_texts(tok, [f.read_text(errors="ignore") for f in files])
                cut = int(len(tokens) * 0.95)
                tokens, held = tokens[:cut], tokens[cut:]
            torch.manual_seed(seed)
            drafter = train_drafter_on_text(model, tok, tokens, kind=kind, gamma=gamma,
                                            train_config=DrafterTrainConfig(steps=steps, seed=seed, lr=lr,
                                                                                regenerate=regenerate))
            cal = None
            if calibrate_prompts > 0:
                rng = np.random.default_rng(seed)
                starts = rng.integers(0, max(1, len(held) - 40), size=calibrate_prompts)
                cal = calibrate(model, drafter, [held[s: s + 16].astype(int).tolist() for s in starts], seed=seed)
        except ValueError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(2) from None
        save_drafter(drafter, out, cal)
        typer.echo(f"drafter written to {out}")

    @app.command("generate")
    def generate_cmd(
        prompt: str = typer.Argument(..., help="prompt text"),
        target: str = typer.Option("smoke", help="zoo name or a local HF checkpoint dir"),
        drafter: Path = typer.Option(None, help="a drafter directory from train-drafter (none = plain decoding)"),
        scheduler: str = typer.Option("dspark", help="fixed-K | fixed | threshold-T | dspark | stale-k | global-argmax"),
        gamma: int = typer.Option(None, help="draft length (default: the drafter's)"),
        max_new_tokens: int = typer.Option(64),
        temperature: float = typer.Option(0.0, help="0 = greedy"),
        seed: int = typer.Option(0),
    ) -> None:
        """Generate with speculative decoding (lossless) and print the text and acceptance stats."""
        from divelab.lm import load_model
        from divelab.serving.dspark.api import load_drafter
        from divelab.serving.dspark.engine import Request, SpecEngine

        try:
            model, tok = load_model(target)
            d, cal = load_drafter(drafter, model) if drafter is not None else (None, None)
            eng = SpecEngine(model, d, scheduler, sps="measure", calibration=cal, temperature=temperature,
                             gamma=gamma, eos_token_id=tok.eos_token_id, seed=seed)
            res = eng.serve([Request(tok.encode(prompt), max_new_tokens)], max_batch=1)
        except (ValueError, FileNotFoundError) as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(2) from None
        typer.echo(tok.decode(res.outputs[0]))
        typer.echo(f"[{len(res.outputs[0])} tokens, {len(res.steps)} target steps, τ={res.tau:.2f}, "
                   f"{res.throughput:.1f} tok/s]", err=True)
