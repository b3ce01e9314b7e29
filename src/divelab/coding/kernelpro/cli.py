"""``divelab kernelpro optimize PROBLEM --budget N [--search mcts|greedy|random] [--cost cest|time]``."""

from __future__ import annotations

import typer


def optimize_cmd(problem: str, budget: int, search: str, cost: str, seed: int) -> dict:
    from divelab.coding.kernelpro.backend import CompilerNotFound, find_compiler, have_valgrind
    from divelab.coding.kernelpro.evaluate import Evaluator
    from divelab.coding.kernelpro.problems import PROBLEMS
    from divelab.coding.kernelpro.proposer import RandomProposer, RuleProposer
    from divelab.coding.kernelpro.search import MCTS, Greedy, RandomSearch

    if problem not in PROBLEMS:
        raise typer.BadParameter(f"unknown problem {problem!r}; allowed: {', '.join(PROBLEMS)}")
    if budget < 1:
        raise typer.BadParameter(f"--budget must be >= 1 kernel evaluation, got {budget}")
    searches = {"mcts": lambda: MCTS(RuleProposer(), seed=seed), "greedy": lambda: Greedy(RuleProposer(), seed=seed),
                "random": lambda: RandomSearch(RandomProposer(), seed=seed)}
    if search not in searches:
        raise typer.BadParameter(f"unknown --search {search!r}; allowed: {', '.join(searches)}")
    if cost not in ("cest", "time"):
        raise typer.BadParameter(f"unknown --cost {cost!r}; allowed: cest (callgrind, deterministic), time")
    try:
        find_compiler()
    except CompilerNotFound as e:
        raise typer.BadParameter(str(e)) from None
    if cost == "cest" and not have_valgrind():
        raise typer.BadParameter("--cost cest needs valgrind (apt-get install -y valgrind); or use --cost time")
    res = searches[search]().search(Evaluator(PROBLEMS[problem], cost=cost), budget)
    return {"problem": problem, "search": search, "evaluations": res.evaluations, "speedup": res.speedup,
            "best": res.best.config.short(), "best_bound": res.best.bound,
            "reference_diagnoses": [d.render() for d in res.ref.diagnoses],
            "best_diagnoses": [d.render() for d in res.best.diagnoses],
            "fast_but_wrong": len(res.fast_but_wrong), "source": PROBLEMS[problem].source(res.best.config)}


def register(app: typer.Typer) -> None:
    kp = typer.Typer(help="KernelPro (E177): profile-guided kernel search on the CPU backend.")

    @kp.command("optimize")
    def optimize(
        problem: str = typer.Argument(..., help="a problem name (see `divelab kernelpro problems`)"),
        budget: int = typer.Option(12, "--budget", help="distinct kernels to compile, check and profile"),
        search: str = typer.Option("mcts", "--search", help="mcts | greedy | random"),
        cost: str = typer.Option("cest", "--cost", help="cest (callgrind estimated cycles) | time (wall clock)"),
        seed: int = typer.Option(0, "--seed"),
        show_source: bool = typer.Option(False, "--source", help="print the best kernel's C source"),
    ) -> None:
        out = optimize_cmd(problem, budget, search, cost, seed)
        typer.echo(f"{out['problem']}: {out['search']} over {out['evaluations']} kernels -> best {out['best']} "
                   f"({out['speedup']:.2f}x {cost} vs the naive -O1 reference; bound: {out['best_bound']})")
        typer.echo("diagnoses of the reference kernel:")
        for d in out["reference_diagnoses"]:
            typer.echo(f"  {d}")
        typer.echo("diagnoses of the best kernel:")
        for d in out["best_diagnoses"] or ["(none fired)"]:
            typer.echo(f"  {d}")
        if out["fast_but_wrong"]:
            typer.echo(f"{out['fast_but_wrong']} fast-but-wrong candidate(s) were rejected by the correctness wall")
        if show_source:
            typer.echo(out["source"])

    @kp.command("problems")
    def problems() -> None:
        from divelab.coding.kernelpro.problems import DEV_PROBLEMS, PROBLEMS

        for p in PROBLEMS.values():
            split = "dev " if p.name in DEV_PROBLEMS else "test"  # dev: the MCTS constants were set on it
            typer.echo(f"{p.name:18s} {split}  level {p.level}  inputs {list(p.inputs)} -> {p.output}")

    app.add_typer(kp, name="kernelpro")
