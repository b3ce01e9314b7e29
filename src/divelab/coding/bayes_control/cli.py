"""``divelab verify-or-ship``: run a refine/verify/ship controller on tasks with a live model."""

from __future__ import annotations

import json
import os
from pathlib import Path

import typer

CONTROLLERS = ("dp", "greedy", "always-verify", "never-verify", "verify-if-critics-pass", "fixed-threshold")


def register(app: typer.Typer) -> None:
    @app.command("verify-or-ship")
    def verify_or_ship(
        base_url: str = typer.Option(..., help="OpenAI-compatible endpoint, e.g. http://localhost:8000/v1"),
        model: str = typer.Option(..., help="model name the endpoint serves"),
        api_key_env: str = typer.Option("OPENAI_API_KEY", help="environment variable holding the API key"),
        tasks: str = typer.Option("HumanEval/0,HumanEval/1,HumanEval/2", help="comma-separated HumanEval ids"),
        task_file: Path = typer.Option(None, help="JSONL of HumanEval-format tasks (task_id, prompt, "
                                                  "entry_point, test); overrides --tasks"),
        controller: str = typer.Option("dp", help=f"one of {', '.join(CONTROLLERS)}"),
        verifier_cost: float = typer.Option(0.4, help="cost of one full-suite verification (x reward)"),
        max_steps: int = typer.Option(6, help="actions before a forced ship"),
        calibration: Path = typer.Option(None, help="belief-model JSON (prior, critics, refine); default: "
                                                    "fitted on the smoke-scale HumanEval replay"),
        out: Path = typer.Option(None, help="write the per-task traces here (JSON)"),
    ) -> None:
        """Generate, critique, refine, verify and ship with a Bayesian controller and a live model."""
        from rich.console import Console

        from divelab.chat import ChatClientError, OpenAIChatClient
        from divelab.chat.endpoint import resolve_model
        from divelab.coding.bayes_control.belief import BeliefModel
        from divelab.coding.bayes_control.controllers import (
            AlwaysVerify,
            Costs,
            DPController,
            FixedThreshold,
            GreedyController,
            NeverVerify,
            VerifyIfCriticsPass,
        )
        from divelab.coding.bayes_control.episode import run_episode
        from divelab.coding.bayes_control.live import LiveEnv
        from divelab.coding.bayes_control.replay import critic_costs, public_indices
        from divelab.coding.bayes_control.runtime import default_model, load_task_list

        err = Console(stderr=True)
        if controller not in CONTROLLERS:
            err.print(f"[red]error:[/red] unknown controller {controller!r}; allowed: {', '.join(CONTROLLERS)}")
            raise typer.Exit(2)
        try:
            task_list = load_task_list(tasks, task_file)
            belief = (BeliefModel.from_dict(json.loads(calibration.read_text())) if calibration
                      else default_model())
            # a server that is down or does not serve --model is one error before the first task, not a failed episode
            model = resolve_model(base_url, model, api_key=os.environ.get(api_key_env))
            chat = OpenAIChatClient(base_url=base_url, model=model, api_key=os.environ.get(api_key_env))
        except (ValueError, OSError, ChatClientError) as exc:
            err.print(f"[red]error:[/red] {exc}")
            raise typer.Exit(2) from None
        traces = []
        for task in task_list:
            public = 0.25
            costs = Costs(verify=verifier_cost, critics=critic_costs(public_indices(task, public)))
            if controller == "dp":
                ctl = DPController(belief, costs, horizon=max_steps)
            elif controller == "greedy":
                ctl = GreedyController(belief, costs)
            else:
                ctl = {"always-verify": AlwaysVerify, "never-verify": NeverVerify,
                       "verify-if-critics-pass": VerifyIfCriticsPass, "fixed-threshold": FixedThreshold}[controller]()
            try:
                env = LiveEnv(task, chat, public_level=public)
                res = run_episode(ctl, env, belief, costs, max_steps=max_steps)
            except ChatClientError as exc:
                err.print(f"[red]error:[/red] {task.task_id}: {exc}")
                raise typer.Exit(2) from None
            typer.echo(f"{task.task_id}: {' -> '.join(res.actions)} | shipped correct: {res.shipped_correct} "
                       f"| cost {res.cost:.3f} | utility {res.utility:+.3f}")
            traces.append({"task_id": task.task_id, "actions": res.actions, "beliefs": res.beliefs,
                           "utility": res.utility, "cost": res.cost, "shipped_correct": res.shipped_correct,
                           "code": env.code, "log": env.log})
        if out:
            out.write_text(json.dumps(traces, indent=2))
            typer.echo(f"traces: {out}")
