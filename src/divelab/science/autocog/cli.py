"""``divelab autocog``: run the loop on simulated participants (resumable trace) or export a design."""

from __future__ import annotations

from pathlib import Path

import typer


def register(app: typer.Typer) -> None:
    sub = typer.Typer(help="AutoCog (E176): the closed loop on multi-cue choice", no_args_is_help=True)
    app.add_typer(sub, name="autocog")

    @sub.command("run")
    def run(
        strategy: str = typer.Option("drwadd", help="ground-truth strategy of the simulated participants"),
        cycles: int = typer.Option(5, help="cycles to run (a trace already holding some resumes from it)"),
        trace: Path = typer.Option(Path("autocog-trace"), help="trace directory (state.json + cycles/*.json)"),
        seed: int = typer.Option(0),
        design: str = typer.Option("optimised", help="optimised | random (the blind-design ablation)"),
        metric: str = typer.Option("adaptive", help="adaptive | jsd (the fixed-distance ablation)"),
    ) -> None:
        """Run (or resume) the loop; print each cycle's theories, losses and winner."""
        from divelab.science.autocog import AutoCog, LoopConfig, ProgrammaticAdvocate, get_strategy
        from divelab.science.autocog.recovery import classify

        try:  # the loop writes the trace after its first cycle: a --trace it cannot create fails now, in one line
            trace.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            typer.echo(f"error: --trace {trace}: {exc.strerror or exc}; choose a writable directory", err=True)
            raise typer.Exit(2) from None
        loop = AutoCog(get_strategy(strategy), LoopConfig(metric=metric), seed=seed, trace_dir=trace,
                       advocate=ProgrammaticAdvocate(design=design))

        def show(rec: dict) -> None:
            th = [t["name"] for t in rec["theories"]]
            typer.echo(f"cycle {rec['cycle']}: {len(rec.get('ran', []))} experiment(s); {th[0]} "
                       f"{rec['losses'][0]:.3f} vs {th[1]} {rec['losses'][1]:.3f}; winner {rec['winner']['name']}")

        loop.run(cycles, on_cycle=show)
        w = loop.winner
        typer.echo(f"winner: {w.name}: {w.describe()} (behaves like: {classify(w, loop.task)})")
        typer.echo(f"trace: {trace}")

    @sub.command("export")
    def export(
        trace: Path = typer.Option(..., help="a trace directory written by `divelab autocog run`"),
        experiment: str = typer.Option("", help="experiment id (default: the last one run)"),
        out: Path = typer.Option(Path("autocog-experiment.html"), help="where to write the HTML"),
    ) -> None:
        """Export one experiment of a trace as a runnable browser experiment (plain HTML/JS)."""
        import json

        from divelab.science.autocog import Design, export_html

        state_file = trace / "state.json"
        if not state_file.exists():
            raise typer.BadParameter(f"{state_file} does not exist; run `divelab autocog run --trace {trace}` first")
        exps = json.loads(state_file.read_text())["experiments"]
        if not exps:
            raise typer.BadParameter("the trace holds no experiments yet")
        key = experiment or sorted(exps)[-1]
        if key not in exps:
            raise typer.BadParameter(f"unknown experiment {key!r}; the trace holds: {', '.join(sorted(exps))}")
        path = export_html(Design.from_dict(exps[key]), out, title=f"AutoCog {key}")
        typer.echo(f"wrote {path} (open it in a browser; ?auto=1 answers by itself)")
