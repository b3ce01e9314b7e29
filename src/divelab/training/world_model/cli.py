"""``divelab world-model train|eval``: train a language world model on an environment log, score it."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import typer

# full fine-tuning of a pretrained checkpoint: the tiny model's 2e-3..3e-3 would wreck its weights
PRETRAINED_LR = 1e-4


def _pretrained_world_model(name_or_path: str) -> Any:
    """A world model on a zoo model or a local checkpoint with its own tokenizer; a name or path that is
    not a model (or a tokenizer without an eos token) prints ``error: ...`` and exits with status 2."""
    from divelab.lm import load_model
    from divelab.lm.real import ModelNotInstalledError
    from divelab.training.world_model.model import WorldModel

    try:
        lm, tok = load_model(name_or_path)
        return WorldModel(lm, tok)
    except (ValueError, FileNotFoundError, OSError, ModelNotInstalledError) as exc:
        typer.echo(f"error: --model {name_or_path}: {exc}", err=True)
        raise typer.Exit(2) from None


def register(app: typer.Typer) -> None:
    wm_app = typer.Typer(help="Language world models (Qwen-AgentWorld, E167): train on env logs, evaluate fidelity.")
    app.add_typer(wm_app, name="world-model")

    @wm_app.command("collect")
    def collect(games: str = typer.Option(..., help="comma-separated TextWorld game ids, e.g. tw-r3-o3-q2-s0"),
                out: Path = typer.Option(..., help="JSONL environment log to write"),
                episodes: int = typer.Option(16, help="random episodes per game"),
                max_steps: int = typer.Option(10, help="step cap per episode"), seed: int = 0) -> None:
        """Log transitions of TextWorld games by random play."""
        from divelab.envs.textworld import TextWorldGameSpec, textworld_env_factory
        from divelab.training.world_model.transitions import collect_transitions, save_transitions

        try:
            specs = [TextWorldGameSpec.from_id(g.strip()) for g in games.split(",") if g.strip()]
        except ValueError as exc:
            raise typer.BadParameter(str(exc)) from None
        make = textworld_env_factory(specs, max_steps=max_steps)
        log = collect_transitions(make, [s.game_id for s in specs], episodes, max_steps, seed=seed)
        save_transitions(log, out)
        typer.echo(f"wrote {len(log)} transitions of {len(specs)} games to {out}")

    @wm_app.command("train")
    def train(log: Path = typer.Argument(..., help="JSONL environment log (divelab world-model collect)"),
              out: Path = typer.Option(..., help="folder for the trained world model"),
              test_games: str = typer.Option("", help="comma-separated game ids held out for evaluation"),
              model: str = typer.Option(None, help="start from this causal LM and its own tokenizer: a zoo name "
                                                   "(e.g. smollm2-135m-instruct) or a local Hugging Face checkpoint "
                                                   "directory (default: a fresh tiny Llama with a word-level "
                                                   "tokenizer trained on the log)"),
              lr: float = typer.Option(None, help="learning rate of the CPT and SFT stages (default: 3e-3 / 2e-3 "
                                                  f"for the fresh tiny model, {PRETRAINED_LR:g} with --model, whose "
                                                  "weights are all fine-tuned)"),
              cpt_steps: int = 120, sft_steps: int = 200, rl_steps: int = 6, seed: int = 0) -> None:
        """CPT → SFT → RL stages on the log; prints held-out fidelity after each stage."""
        from divelab.threads import torch_threads
        from divelab.training.world_model.fidelity import evaluate
        from divelab.training.world_model.model import WorldModel, lm_train, rl_train, train_tokenizer
        from divelab.training.world_model.transitions import (
            load_transitions,
            split_by_game,
            unique_transitions,
        )

        try:
            data = load_transitions(log)
            held = [g.strip() for g in test_games.split(",") if g.strip()]
            train_t, test_t = split_by_game(data, held) if held else (data, [])
        except (ValueError, FileNotFoundError) as exc:
            raise typer.BadParameter(str(exc)) from None
        train_u = unique_transitions(train_t)
        if model is not None:
            wm = _pretrained_world_model(model)
            lrs = {"cpt": lr or PRETRAINED_LR, "sft": lr or PRETRAINED_LR}
        else:
            lrs = {"cpt": lr or 3e-3, "sft": lr or 2e-3}
        # the fresh tiny model is fastest on one thread; a real checkpoint uses torch's default
        with torch_threads(1) if model is None else contextlib.nullcontext():
            if model is None:
                wm = WorldModel.new(train_tokenizer(data), seed=seed)
            for stage, steps in (("cpt", cpt_steps), ("sft", sft_steps), ("rl", rl_steps)):
                if steps <= 0:
                    continue
                if stage == "rl":
                    rl_train(wm, train_u, steps, seed=seed)
                else:
                    lm_train(wm, train_u, stage, steps, lr=lrs[stage], batch_size=16, seed=seed)
                if test_t:
                    m = evaluate(wm, unique_transitions(test_t))["overall"]
                    typer.echo(f"after {stage}: exact {m['exact']:.3f}  F1 {m['f1']:.3f}  actions {m['actions']:.3f}")
        wm.save(out)
        typer.echo(f"saved the world model to {out}")

    @wm_app.command("eval")
    def eval_(model: Path = typer.Argument(..., help="folder written by 'divelab world-model train'"),
              log: Path = typer.Argument(..., help="JSONL environment log to score on")) -> None:
        """Next-state exact match, field F1 and admissible-action agreement, overall and per game."""
        from divelab.training.world_model.fidelity import evaluate
        from divelab.training.world_model.model import WorldModel
        from divelab.training.world_model.transitions import load_transitions, unique_transitions

        try:
            wm = WorldModel.load(model)
            data = unique_transitions(load_transitions(log))
        except (ValueError, FileNotFoundError) as exc:
            raise typer.BadParameter(str(exc)) from None
        ev = evaluate(wm, data)
        for name, m in [("overall", ev["overall"]), *ev["per_game"].items()]:
            typer.echo(f"{name}: n={m['n']} exact {m['exact']:.3f} F1 {m['f1']:.3f} actions {m['actions']:.3f} "
                       f"reward {m['reward']:.3f}")
