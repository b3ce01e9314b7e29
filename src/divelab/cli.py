"""The ``divelab`` command: list systems, run reproductions, render reports.

Systems add their own commands by defining ``<package>/cli.py`` with ``register(app)``.
"""

from __future__ import annotations

import difflib
import os
import sys
import textwrap
import time
import warnings
from pathlib import Path

import typer
import typer.core
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from divelab import registry
from divelab.claims import Reproduction
from divelab.cli_options import MAX_SEED, allowed_text, with_ranges
from divelab.scale import DEFAULT_SCALE, SCALES, check_scale

out_console = Console()
# soft_wrap: off a terminal rich would wrap an error at 80 columns; in a log it should be one line.
err_console = Console(stderr=True, soft_wrap=True)

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

# in the tally's column order (divelab.claims.TALLY_VALUES)
VERDICT_STYLE = {"reproduced": "green", "direction holds": "green", "direction only": "yellow",
                 "positive, not counted": "dim yellow", "not separated from noise": "magenta",
                 "not reproduced": "red", "uninformative": "dim", "not checkable here": "dim"}


def list_systems() -> None:
    """All eighteen systems by theme: E-number, the key you type, status, arXiv id and title."""
    width = out_console.width
    key_w = max(len(s.key) for s in registry.SYSTEMS)
    status_w = max(len(s.status) for s in registry.SYSTEMS)
    for theme in dict.fromkeys(s.theme for s in registry.SYSTEMS):
        out_console.print(f"[bold]{theme}[/bold]")
        for s in (x for x in registry.SYSTEMS if x.theme == theme):
            style = "green" if s.implemented else "dim"
            head = f"  {s.alias:<5} {s.key:<{key_w}}  [{style}]{s.status:<{status_w}}[/{style}]  {s.arxiv}"
            used = 2 + 5 + 1 + key_w + 2 + status_w + 2 + len(s.arxiv)
            indent = 8  # a wrapped title sits under the key
            # one line when the title fits, else the title wrapped under the key: never a broken table
            if used + 2 + len(s.name) <= width:
                out_console.print(f"{head}  {escape(s.name)}", soft_wrap=True)
            else:
                out_console.print(head, soft_wrap=True)
                for line in textwrap.wrap(s.name, max(20, width - indent)):
                    out_console.print(" " * indent + escape(line), soft_wrap=True)
    out_console.print("\nRun one:            divelab reproduce KEY --scale smoke\n"
                      "Its own commands:   divelab KEY --help", soft_wrap=True)


def print_summary(reps: list[Reproduction], out: Path) -> None:
    """One row per system (what a person reads at the end of a run): its empirical claims by verdict,
    in words that fit any width, and a warning when the numbers come from smoke scale."""
    t = Table(title="reproductions (empirical claims by verdict; --verbose lists every claim)")
    t.add_column("system", no_wrap=True)
    t.add_column("empirical claims")
    t.add_column("other", justify="right")
    t.add_column("time", justify="right", no_wrap=True)
    for r in reps:
        counts = r.verdict_counts()
        other = sum(r.kind_counts().values()) - sum(counts.values())
        text = ", ".join(f"[{VERDICT_STYLE.get(v, '')}]{v} {n}[/]" if VERDICT_STYLE.get(v) else f"{v} {n}"
                         for v, n in counts.items() if n) or "none"
        t.add_row(r.system, text, str(other), f"{r.runtime_s:.0f} s")
    out_console.print(t)
    if any(r.scale == "smoke" for r in reps):
        out_console.print("[yellow]smoke scale: these numbers check that each step runs; they are not evidence "
                          "(run --scale quick for evidence)[/yellow]")


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
    set_: list[str] = typer.Option(None, "--set", metavar="KEY=VALUE",
                                   help="override one field of the system's plan (repeatable; one system only), "
                                        "e.g. --set seeds=3 or --set rl.updates=50; recorded in results.json"),
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
        sets = _check_sets(set_ or [], chosen, scale)
        if retries < 0:
            raise ValueError(f"--retries {retries} is negative; allowed: 0 or more")
        kept, kept_failed = earlier_results(out, {s.key for s in chosen})
        if ray is not None:
            import importlib.util as _u

            if _u.find_spec("ray") is None:
                from divelab.scaleout.tasks import RAY_HINT

                raise ValueError(RAY_HINT)
            from divelab.scaleout import connect_ray

            connect_ray(None if ray == "local" else ray)  # a bad address: one line now, not a hang later
    except ValueError as exc:
        err_console.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2) from None
    if not chosen:
        err_console.print("[red]error:[/red] no system is implemented yet")
        raise typer.Exit(2)
    tasks = [Task(s.module, s.key, scale, sd, tuple(sets.items())) for s in chosen for sd in seed_list]
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
    if (out / "results.json").exists():
        _log(f"{out} already holds a report: " + (
            f"its results for {', '.join(f'{r.system} ({r.scale})' for r in kept)} stay in it; " if kept else "")
            + f"results for {', '.join(by_key)} will replace any it holds for them")

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
                           "traceback": o.error, **o.record()})
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
        paths = write_report([*kept, *reps], out, failed=[*kept_failed, *failed])

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


def _check_sets(items: list[str], chosen: list[registry.System], scale: str) -> dict[str, str]:
    """Parse and check ``--set`` against the one chosen system's plan now, not minutes into a run."""
    if not items:
        return {}
    from divelab import plans

    if len(chosen) != 1:
        raise ValueError(f"--set overrides one system's plan; name exactly one system (got {len(chosen)})")
    sets = plans.parse_sets(items)
    plans.resolve(chosen[0].reproduce_module(), scale, sets)
    return sets


def earlier_results(out: Path, keys: set[str]) -> tuple[list[Reproduction], list[dict[str, object]]]:
    """What an earlier run left in ``out``: its reproductions and failures of systems other than
    ``keys`` are kept in the new report (a second run adds to a report, never silently wipes it);
    a results.json this divelab cannot read is refused rather than overwritten."""
    from divelab.report import load_results
    from divelab.report.render import load_failed

    if not (out / "results.json").is_file():
        return [], []
    try:
        earlier = load_results(out)
    except (ValueError, OSError) as exc:
        raise ValueError(f"--out {out} holds a results.json this run cannot add to ({exc}); "
                         "choose another --out, or move that file away to start afresh") from None
    return ([r for r in earlier if r.system not in keys],
            [f for f in load_failed(out) if f.get("system") not in keys])


def report(run_dir: Path = typer.Argument(Path("divelab-report"), help="a directory holding results.json "
                                           "(default: divelab-report, where reproduce writes)"),
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
CORE_COMMANDS = ("list", "reproduce", "report", "--version")
# A system's commands sit under its key (`divelab dspark generate`); the names they had at the top
# level before (`divelab generate`) still work, with a note, and are hidden from --help.
MOVED: dict[str, tuple[str, str]] = {}
UsageError = typer.BadParameter.__bases__[0]  # click's UsageError, from whichever click typer uses


def _log(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


class RootGroup(typer.core.TyperGroup):
    """The top-level command: forwards the old flat names and completes typer's parse errors with
    the allowed range of the option."""

    def resolve_command(self, ctx, args):  # noqa: ANN001, ANN201 - click's signature
        if args and args[0] in MOVED and args[0] not in self.commands:
            group, name = MOVED[args[0]]
            err_console.print(f"note: `divelab {args[0]}` is now `divelab {group} {name}`; the old name will go away")
            return name, self.commands[group].commands[name], args[1:]
        try:
            return super().resolve_command(ctx, args)
        except UsageError as exc:
            close = difflib.get_close_matches(args[0], list(MOVED), n=2) if args else []
            if close and "Did you mean" not in exc.message:
                exc.message = (f"{exc.message.rstrip('.')}. Did you mean "
                               + " or ".join(f"'{' '.join(MOVED[c])}'" for c in close) + "?")
            raise

    def invoke(self, ctx):  # noqa: ANN001, ANN201
        try:
            return super().invoke(ctx)
        except typer.BadParameter as exc:
            # typer rejects "1e23" for an int before our range check runs; say what is allowed anyway
            allowed = allowed_text(getattr(exc.param, "name", "") or "", exc.message) if exc.param else None
            if allowed and "allowed:" not in exc.message:
                exc.message = f"{exc.message.rstrip('.')}; allowed: {allowed}"
            raise


def _system_group(s: registry.System, module) -> typer.Typer:  # noqa: ANN001
    """The system's commands as one group named by its key, whether its cli.py registered a group
    of that name or commands at the top level (recorded in MOVED)."""
    scratch = typer.Typer()
    module.register(scratch)
    own = [g for g in scratch.registered_groups if g.name == s.key]
    if own and len(own) == len(scratch.registered_groups) and not scratch.registered_commands:
        return own[0].typer_instance
    group = typer.Typer(help=f"{s.name} ({s.alias.upper()}, arXiv {s.arxiv})", no_args_is_help=True)
    for info in scratch.registered_commands:
        group.registered_commands.append(info)
        MOVED[info.name] = (s.key, info.name)
    group.registered_groups.extend(scratch.registered_groups)
    return group


def _register_system_commands(app: typer.Typer) -> None:
    for package in ENGINE_PACKAGES:
        module = registry.load_cli(package)
        if module is not None:
            module.register(app)
    for s in registry.SYSTEMS:
        module = registry.load_cli(s.module)
        if module is not None:
            app.add_typer(_system_group(s, module), name=s.key, no_args_is_help=True)


def _check_all(app: typer.Typer) -> None:
    """Every command's numeric options get their range check, every help text is shown as written."""
    for info in app.registered_commands:
        info.callback = with_ranges(info.callback)
        if info.help:
            info.help = escape(info.help)
    for group in app.registered_groups:
        _check_all(group.typer_instance)


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import version

        print(f"divelab {version('divelab')}")
        raise typer.Exit()


def _root(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                       help="print divelab's version and exit"),
          verbose: bool = typer.Option(False, "--verbose", help="show the libraries' own output: model-loading "
                                                               "bars, deprecation notices, log warnings "
                                                               "(put it before the command)")) -> None:
    """divelab: the systems of one week of AI research, built and reproduced.

    Start with `divelab reproduce fugu --scale smoke` (seconds), then open divelab-report/report.html.
    """


def make_app(plugins: bool = True) -> typer.Typer:
    """The CLI. ``plugins=False`` leaves out the systems' own commands, whose imports (torch,
    transformers) cost seconds that `divelab list` should not pay."""
    app = typer.Typer(add_completion=False, no_args_is_help=True, cls=RootGroup,
                      context_settings={"help_option_names": ["--help", "-h"]})
    app.callback()(_root)
    app.command("list")(list_systems)
    app.command()(reproduce)
    app.command()(report)
    if plugins:
        _register_system_commands(app)
    _check_all(app)
    return app


def __getattr__(name: str) -> typer.Typer:
    # `from divelab.cli import app` gives the full CLI, built on first use (PEP 562).
    if name == "app":
        globals()["app"] = full = make_app(plugins=True)
        return full
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


VERBOSE_ENV = "DIVELAB_WARNINGS"  # set by --verbose, so that worker processes show the same


def quiet_libraries(load_transformers: bool = True) -> None:
    """Keep libraries' output out of what a user reads: deprecation notices (transformers, torch, peft),
    transformers' log warnings and its weight-loading / GGUF-conversion bars, Hugging Face hub and
    datasets bars. ``divelab --verbose`` (or ``DIVELAB_WARNINGS=1``) shows them. divelab's own warnings
    and progress are kept. ``load_transformers=False`` only sets the environment (which transformers
    reads when it is imported), for commands that never load a model and should not pay its import."""
    if os.environ.get(VERBOSE_ENV):
        return
    for category in (DeprecationWarning, PendingDeprecationWarning, FutureWarning):
        warnings.filterwarnings("ignore", category=category)
    warnings.filterwarnings("ignore", category=UserWarning, module=r"^(?!divelab)")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")  # transformers logs its notices, not warns
    os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")  # transformers' bars follow this at import
    os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")
    if load_transformers:
        try:  # transformers' own switches, in case something imported it before the environment was set
            from transformers.utils import logging as hf_logging
        except ImportError:  # pragma: no cover - transformers is a dependency
            return
        hf_logging.set_verbosity_error()
        hf_logging.disable_progress_bar()


def top_level_verbose(args: list[str]) -> bool:
    """``--verbose`` before the command is the top-level flag (after it, e.g. ``reproduce --verbose``,
    it is the command's own). Read before typer parses, since the quieting must come before any import."""
    for a in args:
        if a == "--verbose":
            return True
        if not a.startswith("-"):
            return False
    return False


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if top_level_verbose(args):
        os.environ[VERBOSE_ENV] = "1"
    command = next((a for a in args if not a.startswith("-")), None)
    quiet_libraries(load_transformers=command not in (None, *CORE_COMMANDS)
                    and not {"--help", "-h"} & set(args))
    core_only = command in CORE_COMMANDS or (bool(args) and args[0] in CORE_COMMANDS)
    make_app(plugins=not core_only)(args=args, prog_name="divelab")


if __name__ == "__main__":
    main()
