"""The ``divelab`` command: list systems, run reproductions, render reports.

Systems add their own commands by defining ``<package>/cli.py`` with ``register(app)``.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import time
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from divelab import registry
from divelab.claims import Reproduction
from divelab.scale import DEFAULT_SCALE, SCALES, check_scale

out_console = Console()
# soft_wrap: off a terminal rich would wrap an error at 80 columns; in a log it should be one line.
err_console = Console(stderr=True, soft_wrap=True)

MAX_SEED = 2**32 - 1  # numpy's SeedSequence and torch.manual_seed both accept [0, 2**32)
FORBIDDEN_OUT = ("/proc", "/sys", "/dev")


def check_seed(seed: int) -> int:
    if not 0 <= seed <= MAX_SEED:
        raise ValueError(f"--seed {seed} is out of range; allowed: an integer from 0 to {MAX_SEED}")
    return seed


def check_out_dir(out: str | Path) -> Path:
    """Refuse an output location that cannot hold a report, before any work starts; creates nothing."""
    text = str(out)
    if not text.strip():
        raise ValueError("--out is empty; give a directory for report.html, report.md and results.json")
    resolved = Path(os.path.abspath(out))
    for bad in FORBIDDEN_OUT:
        if resolved == Path(bad) or Path(bad) in resolved.parents:
            raise ValueError(f"--out {text!r} is inside {bad}, which cannot hold files; choose another directory")
    if resolved.exists() and not resolved.is_dir():
        raise ValueError(f"--out {text!r} is an existing file, not a directory")
    probe = resolved
    while not probe.exists():
        probe = probe.parent
    if not probe.is_dir():
        raise ValueError(f"--out {text!r} lies below {str(probe)!r}, which is a file, not a directory")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise ValueError(f"--out {text!r}: {str(probe)!r} is not writable")
    return Path(out)

VERDICT_STYLE = {"reproduced": "green", "direction only": "yellow", "not separated from noise": "magenta",
                 "not reproduced": "red", "not checkable here": "dim"}


def list_systems() -> None:
    """All eighteen systems: E-number, key, arXiv id, theme, status."""
    t = Table(title="divelab systems")
    for col in ("E", "key", "system", "arXiv", "theme", "status"):
        # the key is what a user types: never truncated or wrapped, whatever the width
        t.add_column(col, no_wrap=col in ("E", "key", "status"), overflow="fold",
                     min_width=max(len(s.key) for s in registry.SYSTEMS) if col == "key" else None)
    for s in registry.SYSTEMS:
        style = "green" if s.implemented else "dim"
        t.add_row(s.alias, s.key, s.name, s.arxiv, s.theme, f"[{style}]{s.status}[/{style}]")
    out_console.print(t)


def print_summary(reps: list[Reproduction], out: Path) -> None:
    """One line per system (what a person reads at the end of a run), and where the report is."""
    from divelab.claims import VERDICT_VALUES

    t = Table(title="reproductions (counts of empirical claims; --verbose lists every claim)")
    t.add_column("system", no_wrap=True)
    for v in VERDICT_VALUES:
        t.add_column(v, justify="right", style=VERDICT_STYLE[v])
    t.add_column("other", justify="right")
    t.add_column("time", justify="right", no_wrap=True)
    for r in reps:
        counts = r.verdict_counts()
        other = sum(r.kind_counts().values()) - sum(counts.values())
        t.add_row(r.system, *(str(counts[v]) for v in VERDICT_VALUES), str(other), f"{r.runtime_s:.0f} s")
    out_console.print(t)


def print_claims(reps: list[Reproduction]) -> None:
    t = Table(title="claims", show_lines=False)
    for col in ("system", "claim", "kind", "paper", "ours", "verdict"):
        t.add_column(col, overflow="fold")
    for r in reps:
        for c in r.claims:
            v = c.verdict.value
            t.add_row(r.system, c.statement, c.kind.value, c.paper_value, c.measured_text(),
                      f"[{VERDICT_STYLE[v]}]{v}[/{VERDICT_STYLE[v]}]")
    out_console.print(t)
    from divelab.report.render import tallies_by_kind

    tally = Table(title="verdicts by kind of claim (the headline counts empirical claims only)")
    tally.add_column("kind")
    for v in VERDICT_STYLE:
        tally.add_column(v)
    for kind, counts in tallies_by_kind(reps).items():
        tally.add_row(kind, *(str(n) for n in counts.values()))
    out_console.print(tally)


def reproduce(
    systems: list[str] = typer.Argument(None, help="system keys or E-numbers (default: all implemented)"),
    scale: str = typer.Option(DEFAULT_SCALE, help=f"one of {', '.join(SCALES)}"),
    seed: int = typer.Option(0, help="seed for every random choice"),
    seeds: str = typer.Option(None, help="several seeds, e.g. '0-4' or '0,3,7': claims aggregated across them "
                                         "(overrides --seed)"),
    out: str = typer.Option("divelab-report", help="directory for report.html, report.md, results.json"),
    ray: str = typer.Option(None, "--ray", metavar="ADDRESS",
                            help="run each (system, seed) as a Ray task: 'local' starts Ray on this machine, "
                                 "or a cluster address ('auto', 'ray://head:10001'); needs divelab[ray]"),
    retries: int = typer.Option(0, help="re-run a failed task this many times before reporting it failed"),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="print every claim, not only the summary"),
) -> None:
    """Run reproductions and write the report of every claim."""
    from divelab.report import write_report
    from divelab.scaleout import Outcome, Task, aggregate_seeds, parse_seeds, run_tasks

    try:
        check_scale(scale)
        seed_list = parse_seeds(seeds) if seeds is not None else [seed]
        for s_ in seed_list:
            check_seed(s_)
        out = check_out_dir(out)
        chosen = registry.resolve_implemented(systems or [])
        if retries < 0:
            raise ValueError(f"--retries {retries} is negative; allowed: 0 or more")
        if ray is not None:
            import importlib.util as _u

            if _u.find_spec("ray") is None:
                from divelab.scaleout.tasks import RAY_HINT

                raise ValueError(RAY_HINT)
    except ValueError as exc:
        err_console.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2) from None
    if not chosen:
        err_console.print("[red]error:[/red] no system is implemented yet")
        raise typer.Exit(2)
    tasks = [Task(s.module, s.key, scale, sd) for s in chosen for sd in seed_list]
    by_key = {s.key: s for s in chosen}
    got: dict[str, list[Reproduction]] = {s.key: [] for s in chosen}
    reps: list[Reproduction] = []
    failed: list[dict[str, object]] = []
    run_t0 = time.perf_counter()
    paths: dict[str, Path] = {}
    finished = 0

    # Plain lines, flushed: readable in a CI log or under nohup, where a live display is silent.
    where = f"on Ray ({ray})" if ray is not None else "in process"
    _log(f"{len(tasks)} task(s) {where}: {', '.join(f'{s.alias} {s.key}' for s in chosen)}; "
         f"scale {scale}; seed(s) {', '.join(map(str, seed_list))}")

    def on_start(task: Task) -> None:
        s = by_key[task.key]
        _log(f"[{tasks.index(task) + 1}/{len(tasks)}] {s.alias} {s.key}: started (scale {scale}, seed {task.seed}) "
             f"— {s.name}")

    def on_result(o: Outcome) -> None:
        nonlocal finished, paths
        finished += 1
        s = by_key[o.task.key]
        head = f"[{finished}/{len(tasks)}] {s.alias} {s.key} seed {o.task.seed}"
        if not o.ok:
            err_console.print(f"[red]{s.key} (seed {o.task.seed}) failed:[/red]\n{o.error}")
            _log(f"{head}: FAILED after {o.runtime_s:.1f} s")
            lines = o.error.strip().splitlines()
            failed.append({"system": s.key, "seed": o.task.seed, "error": lines[-1] if lines else "",
                           "traceback": o.error, "attempts": o.attempts})
        else:
            rep = o.reproduction
            counts = ", ".join(f"{v} {n}" for v, n in rep.verdict_counts().items() if n)
            _log(f"{head}: finished in {rep.runtime_s:.1f} s (total {time.perf_counter() - run_t0:.0f} s); "
                 f"empirical claims: {counts or 'none'}")
            got[s.key].append(rep)
        expected = len(seed_list)
        done_here = len(got[s.key]) + sum(1 for f in failed if f["system"] == s.key)
        if done_here == expected and got[s.key]:
            try:
                reps.append(aggregate_seeds(got[s.key]))
            except ValueError as exc:
                failed.append({"system": s.key, "seed": -1, "error": str(exc), "traceback": "", "attempts": 1})
        # after each result, so a long run's results survive an interrupt
        paths = write_report(reps, out, failed=failed)

    try:
        if ray is None:
            for task in tasks:
                on_start(task)
                run_tasks([task], backend="inprocess", retries=retries, on_result=on_result)
        else:
            run_tasks(tasks, backend="ray", address=None if ray == "local" else ray, retries=retries,
                      on_result=on_result)
    except KeyboardInterrupt:
        err_console.print("[red]interrupted[/red]; cached work is kept, re-run to resume")
        raise typer.Exit(130) from None
    except RuntimeError as exc:
        err_console.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2) from None
    if reps:
        if verbose:
            print_claims(reps)
        print_summary(reps, out)
    if paths:
        out_console.print(f"report: {paths['html']}  ({paths['markdown'].name}, {paths['json'].name})")
    if failed:
        err_console.print("[red]error:[/red] failed: " + ", ".join(f"{f['system']} (seed {f['seed']})" for f in failed))
        raise typer.Exit(1)


def report(run_dir: Path = typer.Argument(..., help="a directory holding results.json"),
           verbose: bool = typer.Option(False, "--verbose", "-v", help="print every claim")) -> None:
    """Re-render a run's report (HTML, Markdown) from its results.json (which is left as it is)."""
    from divelab.report import load_results, write_report

    try:
        reps = load_results(run_dir)
    except (FileNotFoundError, ValueError, OSError) as exc:
        err_console.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2) from None
    from divelab.report.render import load_failed

    target = run_dir if run_dir.is_dir() else run_dir.parent
    paths = write_report(reps, target, write_json=False, failed=load_failed(target))
    if verbose:
        print_claims(reps)
    print_summary(reps, run_dir)
    out_console.print(f"report: {paths['html']}")


# Shared engines that also offer commands (e.g. `divelab train-lm`), beside the systems' own.
ENGINE_PACKAGES = ("divelab.lm", "divelab.rl", "divelab.sandbox", "divelab.chat", "divelab.serving.server")
CORE_COMMANDS = ("list", "reproduce", "report")


def _log(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _register_system_commands(app: typer.Typer) -> None:
    for package in (*ENGINE_PACKAGES, *(s.module for s in registry.SYSTEMS)):
        path = registry.module_file(f"{package}.cli")
        if path is None:
            continue
        # Load cli.py by its path, not as `package.cli`: importing the package would run its
        # __init__ (torch, transformers: seconds) just to list a command in --help. A cli module
        # imports its system inside each command, when the command runs.
        name = f"divelab._commands.{package.replace('.', '_')}"
        module = sys.modules.get(name)
        if module is None:
            spec = importlib.util.spec_from_file_location(name, path)
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            spec.loader.exec_module(module)
        module.register(app)


def make_app(plugins: bool = True) -> typer.Typer:
    """The CLI. ``plugins=False`` leaves out the systems' own commands, whose imports (torch,
    transformers) cost seconds that `divelab list` should not pay."""
    app = typer.Typer(add_completion=False, no_args_is_help=True,
                      context_settings={"help_option_names": ["--help", "-h"]},
                      help="divelab: the systems of one week of AI research, built and reproduced.")
    app.command("list")(list_systems)
    app.command()(reproduce)
    app.command()(report)
    if plugins:
        _register_system_commands(app)
    return app


def __getattr__(name: str) -> typer.Typer:
    # `from divelab.cli import app` gives the full CLI, built on first use (PEP 562).
    if name == "app":
        globals()["app"] = full = make_app(plugins=True)
        return full
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    core_only = bool(args) and args[0] in CORE_COMMANDS
    make_app(plugins=not core_only)(args=args, prog_name="divelab")


if __name__ == "__main__":
    main()
