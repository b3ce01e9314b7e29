"""``divelab forensics run``: investigate an agent's concerning behaviour and write a verdict table."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer


def make_agent(spec: str, seed: int):
    if spec.startswith("planted:"):
        from divelab.oversight.forensics.agents import PlantedAgent

        return PlantedAgent(motive=spec.split(":", 1)[1], seed=seed)
    if spec.startswith("http://") or spec.startswith("https://"):
        from divelab.chat import OpenAIChatClient
        from divelab.chat.endpoint import resolve_model

        url, _, model = spec.partition("#")
        # up and serving the model before any rollout; without '#model', the server's only model
        return OpenAIChatClient(base_url=url, model=resolve_model(url, model or None, option="'--agent URL#MODEL'"))
    if spec == "smollm2-135m-instruct":
        from divelab.chat.hf_local import HFChatModel
        from divelab.lm import load_model

        model, tok = load_model(spec)
        return HFChatModel(model, tok, max_new_tokens=16, temperature=1.0, seed=seed)
    raise ValueError(f"unknown agent {spec!r}; allowed: planted:<motive>, an http(s) OpenAI-compatible endpoint, "
                     "or smollm2-135m-instruct")


def check_env(env: str) -> None:
    """An unknown env is refused before the agent (perhaps a model) is loaded."""
    from divelab.oversight.forensics.envs import get_env

    get_env(env)


def read_hypotheses(path: Path) -> list[str]:
    try:
        hyps = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise ValueError(f"--hypothesis {path} is not JSON ({exc}); give a JSON list of motives") from None
    if not isinstance(hyps, list) or not all(isinstance(h, str) for h in hyps):
        raise ValueError(f"--hypothesis {path} must hold a JSON list of motive names, got {hyps!r:.80}")
    return hyps


def register(app: typer.Typer) -> None:
    forensics = typer.Typer(help="Model forensics (E174): rewind and intervene to tell scheming from confusion.")
    app.add_typer(forensics, name="forensics")

    @forensics.command("run")
    def run(env: str = typer.Option("precommit", help="precommit | eval_tampering | secret_number"),
            agent: str = typer.Option(..., help="planted:<motive>, http(s)://host/v1#model, or smollm2-135m-instruct"),
            hypothesis: Path = typer.Option(None, help="JSON list of motives to test (default: mined from CoT)"),
            n: int = typer.Option(30, help="rollouts per arm"),
            out: Path = typer.Option(Path("forensics.json"), help="where to write the verdict table"),
            seed: int = typer.Option(0)) -> None:
        from divelab.cache import atomic_write_bytes
        from divelab.chat import ChatClientError
        from divelab.oversight.forensics.protocol import investigate

        try:
            hyps = read_hypotheses(hypothesis) if hypothesis else None
            check_env(env)
            inv = investigate(env, make_agent(agent, seed), n=n, hypotheses=hyps, seed=seed,
                              temperature=None if agent.startswith("planted:") else 1.0, progress=True)
        except (ValueError, OSError, ChatClientError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            raise typer.Exit(2) from None
        table = {"env": env, "agent": agent, "base_rate": inv.base.p, "driver": inv.driver,
                 "misaligned": inv.misaligned, "hypotheses": [h.motive for h in inv.hypotheses], "tests": inv.table()}
        atomic_write_bytes(out, json.dumps(table, indent=2, default=str).encode())
        for row in inv.table():
            typer.echo(f"{row['hypothesis']:10s} {row['edit']:28s} {row['control_rate']:.2f} -> {row['edited_rate']:.2f}"
                       f"  p_holm={row['p_holm']:.3g}  {row['status']}")
        typer.echo(f"driver: {inv.driver}  (written to {out})")
