"""``divelab pinning audit-compaction``: the ConstraintRot-style benchmark from the command line.

Without ``--base-url`` it runs the rule-survival audit (mode 1, no LLM). With ``--base-url`` and
``--model`` it runs the violation benchmark (mode 2) against that OpenAI-compatible endpoint.
"""

from __future__ import annotations

import json
from pathlib import Path

import typer


def register(app: typer.Typer) -> None:
    @app.command("audit-compaction")
    def audit_compaction(
        base_url: str = typer.Option(None, help="OpenAI-compatible base URL (e.g. http://localhost:8000/v1); "
                                                "omit for the LLM-free rule-survival audit"),
        model: str = typer.Option(None, help="model name for the agent (with --base-url)"),
        summary_model: str = typer.Option(None, help="model for LLM summaries (default: --model)"),
        compactors: str = typer.Option("", help="comma-separated compactor names (default: all that apply)"),
        budget: float = typer.Option(0.35, help="budget as a fraction of the full context (mode 2); mode 1 "
                                                "uses 0.6,0.35,0.15"),
        filler: int = typer.Option(10, help="filler task turns per scenario"),
        seeds: int = typer.Option(1, help="scenarios per rule template"),
        attack: str = typer.Option("none", help="none | evict | forged-update"),
        guard: bool = typer.Option(False, help="enable the deterministic tool guard (mode 2)"),
        out: Path = typer.Option(Path("audit-compaction.json"), help="JSON file for all rows"),
    ) -> None:
        """Measure how compaction erases governance rules, with and without Constraint Pinning."""
        from rich.console import Console
        from rich.table import Table

        from divelab.cache import atomic_write_text
        from divelab.safety.pinning.audit import (
            AUDIT_COMPACTORS,
            COMPACTORS,
            AuditConfig,
            group,
            rate,
            run_survival_audit,
            run_violation_benchmark,
        )
        from divelab.safety.pinning.benchmark import ATTACKS, RULES, make_scenario
        from divelab.safety.pinning.tokens import default_counter

        console = Console()
        if attack not in ATTACKS:
            raise typer.BadParameter(f"unknown attack {attack!r}; allowed: {', '.join(ATTACKS)}")
        names = tuple(c.strip() for c in compactors.split(",") if c.strip())
        for c in names:
            if c not in COMPACTORS:
                raise typer.BadParameter(f"unknown compactor {c!r}; allowed: {', '.join(COMPACTORS)}")
        if (base_url is None) != (model is None):
            raise typer.BadParameter("give both --base-url and --model (or neither for the survival audit)")
        scenarios = [make_scenario(i, seed=k, n_filler=filler, attack=attack)
                     for k in range(seeds) for i in range(len(RULES))]
        counter = default_counter()
        t = Table()
        if base_url is None:
            rows = run_survival_audit(scenarios, AuditConfig(compactors=names or AUDIT_COMPACTORS), counter)
            for col in ("compactor", "budget", "pinned", "soft lost", "hard lost", "n"):
                t.add_column(col)
            for (c, b, p), v in sorted(group(rows, "compactor", "budget_frac", "pinned").items()):
                soft = 1 - rate([r for r in v if r["kind"] == "soft"], "verbatim")[0]
                hard = 1 - rate([r for r in v if r["kind"] == "hard"], "verbatim")[0]
                t.add_row(c, f"{b:g}", str(p), f"{soft:.0%}", f"{hard:.0%}", str(len(v)))
        else:
            from divelab.chat import ChatClientError, OpenAIChatClient
            from divelab.chat.endpoint import resolve_model

            try:  # the server up and serving --model before the benchmark, not a traceback in its first call
                agent = OpenAIChatClient(base_url=base_url, model=resolve_model(base_url, model))
            except ChatClientError as exc:
                typer.echo(f"error: {exc}", err=True)
                raise typer.Exit(2) from None
            summ = OpenAIChatClient(base_url=base_url, model=summary_model) if summary_model else None
            default = ("full-context", "keep-last-n", "llm-summary", "autogen-buffered",
                       "langchain-summarization", "langmem-summarize")
            rows = run_violation_benchmark(scenarios, agent, counter, compactors=names or default, budget_frac=budget,
                                           summary_model=summ, guard=guard)
            for col in ("compactor", "pinned", "kind", "violation rate [95% CI]", "rule survived", "n"):
                t.add_column(col)
            for (c, p, k), v in sorted(group(rows, "compactor", "pinned", "kind").items()):
                r, n, ci = rate(v, "violated")
                t.add_row(c, str(p), k, f"{r:.0%} [{ci[0]:.0%}, {ci[1]:.0%}]", f"{rate(v, 'survived')[0]:.0%}", str(n))
        console.print(t)
        atomic_write_text(out, json.dumps({"counter": counter.name, "rows": rows}, indent=1, default=str))
        console.print(f"rows written to {out}")
