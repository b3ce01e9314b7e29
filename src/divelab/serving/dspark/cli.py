"""``divelab dspark train-drafter`` and ``divelab dspark generate`` (heavy imports stay inside the commands)."""

from __future__ import annotations

from pathlib import Path

import typer


def register(app: typer.Typer) -> None:
    @app.command("train-drafter")
    def train_drafter_cmd(
        target: str = typer.Option("smoke", help="zoo name (smoke, small, quick, full, smollm2-135m-instruct) or a "
                                                 "local HF checkpoint dir"),
        out: Path = typer.Option(None, help="also copy the drafter to this directory (a chat model's drafter always "
                                            "goes to the divelab cache, where `divelab serve` finds it; default for "
                                            "a text drafter: dspark-drafter)"),
        kind: str = typer.Option("markov", help="parallel | markov | rnn | ar"),
        gamma: int = typer.Option(None, help="draft block length γ (>= 1; default 6 for a chat model, else 8)"),
        steps: int = typer.Option(None, help="training steps (default 3000 for a chat model, else 200)"),
        regenerate: int = typer.Option(0, help="text drafter: train on this many target-sampled sequences"),
        lr: float = typer.Option(None, help="learning rate (default 3e-3 for a chat model, else 5e-3)"),
        corpus: Path = typer.Option(None, help="a text file or directory of .py/.txt files: train a text drafter "
                                               "on it (default for a model without a chat template: stdlib source)"),
        prompts: int = typer.Option(None, help="chat model: training prompts it answers (default 2000)"),
        draft_vocab: int = typer.Option(None, help="chat model: tokens the draft head scores (default 8192; 0 = all)"),
        samples_per_prompt: int = typer.Option(None, help="chat model: responses per training prompt (default 1; "
                                                          "later ones sampled at T=1)"),
        layers: int = typer.Option(None, help="chat model: drafter transformer layers (default 1)"),
        code_eval_prompts: int = typer.Option(None, help="chat model: held-out HumanEval requests for τ on code "
                                                         "(default 32; 0 = none)"),
        calibrate_prompts: int = typer.Option(8, help="text drafter: held-out prompts for STS calibration (0 = skip)"),
        seed: int = typer.Option(0),
    ) -> None:
        """Train a DSpark drafter for a causal LM (a chat model: on its own responses) and calibrate it.

        For a chat model (one with a chat template, e.g. smollm2-135m-instruct) this builds the cached
        drafter that `divelab serve --model <it>` uses by default; a killed build resumes."""
        import shutil

        try:
            chat = corpus is None and _has_chat_template(target)
            if chat:
                from dataclasses import replace

                from divelab.serving.dspark.chat_drafter import ChatDrafterRecipe, build_chat_drafter

                recipe = ChatDrafterRecipe(target=target, kind=kind, seed=seed)
                given = {"gamma": gamma, "steps": steps, "lr": lr, "n_prompts": prompts, "draft_vocab": draft_vocab,
                         "samples_per_prompt": samples_per_prompt, "n_layers": layers,
                         "code_eval_prompts": code_eval_prompts}
                recipe = replace(recipe, **{k: v for k, v in given.items() if v is not None})
                path = build_chat_drafter(recipe, log=lambda line: typer.echo(line, err=True))
                if out is not None:
                    shutil.copytree(path, out, dirs_exist_ok=True)
                typer.echo(f"drafter for {target}: {out or path}")
                return
            chat_only = {"--prompts": prompts, "--draft-vocab": draft_vocab, "--samples-per-prompt": samples_per_prompt,
                         "--layers": layers, "--code-eval-prompts": code_eval_prompts}
            if any(v is not None for v in chat_only.values()):
                raise ValueError(f"{', '.join(k for k, v in chat_only.items() if v is not None)} apply to a chat "
                                 "model's drafter (no --corpus)")
            _train_text_drafter(target, out or Path("dspark-drafter"), kind, 8 if gamma is None else gamma,
                                200 if steps is None else steps, regenerate, 5e-3 if lr is None else lr, corpus,
                                calibrate_prompts, seed)
        except ValueError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(2) from None
        typer.echo(f"drafter written to {out or 'dspark-drafter'}")

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
        engine: str = typer.Option("lean", help="target engine: lean (Llama-family models such as SmolLM2, on the "
                                                "CPU), hf (the HF model's forward, any causal LM) or auto (lean where "
                                                "it runs the model, else hf)"),
        fmt: str = typer.Option("fp32", help="lean engine weight format: fp32 | bf16 | int8"),
    ) -> None:
        """Generate with speculative decoding (lossless) and print the text and acceptance stats."""
        from divelab.lm import load_model
        from divelab.serving.dspark.api import load_drafter
        from divelab.serving.dspark.engine import Request, SpecEngine

        try:
            model, tok = load_model(target)
            d, cal = load_drafter(drafter, model) if drafter is not None else (None, None)
            eng = SpecEngine(model, d, scheduler, sps="measure", calibration=cal, temperature=temperature,
                             gamma=gamma, eos_token_id=tok.eos_token_id, seed=seed, engine=engine, fmt=fmt)
            res = eng.serve([Request(tok.encode(prompt), max_new_tokens)], max_batch=1)
        except (ValueError, FileNotFoundError) as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(2) from None
        typer.echo(tok.decode(res.outputs[0]))
        typer.echo(f"[{len(res.outputs[0])} tokens, {len(res.steps)} target steps, τ={res.tau:.2f}, "
                   f"{res.throughput:.1f} tok/s]", err=True)


def _has_chat_template(target: str) -> bool:
    from divelab.lm import load_model

    _, tok = load_model(target)
    return getattr(tok, "chat_template", None) is not None


def _train_text_drafter(target: str, out: Path, kind: str, gamma: int, steps: int, regenerate: int, lr: float,
                        corpus: Path | None, calibrate_prompts: int, seed: int) -> None:
    """A drafter trained on text (a corpus, or the standard library's source) and calibrated."""
    import numpy as np
    import torch

    from divelab.lm import encode_split, load_model
    from divelab.serving.dspark.api import calibrate, encode_texts, save_drafter, train_drafter_on_text
    from divelab.serving.dspark.training import DrafterTrainConfig

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
        cal = calibrate(model, drafter, [held[s: s + 16].astype(int).tolist() for s in starts], seed=seed,
                        progress=True)
    save_drafter(drafter, out, cal)
