"""``divelab sherloc localize --repo PATH --issue FILE [--failing-test ID] [--llm heuristic|smollm2|URL]``."""

from __future__ import annotations

import json
from pathlib import Path

import typer


def _model(llm: str, model_name: str):
    if llm == "heuristic":
        from divelab.coding.sherloc.policy import HeuristicDiagnostician

        return HeuristicDiagnostician()
    if llm == "smollm2":
        from divelab.chat.hf_local import HFChatModel
        from divelab.lm import load_model

        return HFChatModel(*load_model("smollm2-135m-instruct"))
    if llm.startswith(("http://", "https://")):
        from divelab.chat import OpenAIChatClient

        return OpenAIChatClient(base_url=llm, model=model_name)
    raise typer.BadParameter(f"unknown --llm {llm!r}; allowed: heuristic, smollm2, or an OpenAI-compatible base URL")


def localize_cmd(repo: Path, issue: Path, failing_test: str | None, llm: str, model_name: str,
                 max_turns: int) -> dict:
    from divelab.coding.sherloc.agent import SherlocLocalizer
    from divelab.coding.sherloc.tools import RepoTools

    if not repo.is_dir():
        raise typer.BadParameter(f"--repo {repo} is not a directory")
    tools = RepoTools(repo)
    if not tools.files():
        raise typer.BadParameter(f"--repo {repo} holds no Python files; is it a repository?")
    if not issue.is_file():
        raise typer.BadParameter(f"--issue {issue} is not a file")
    text = issue.read_text(encoding="utf-8", errors="replace")
    if not text.strip():
        raise typer.BadParameter(f"--issue {issue} is empty; give the bug report or the failing test's output")
    if failing_test:
        name = failing_test.replace("::", ".").rsplit(".", 1)[-1]
        if "not match" in tools.search_code(rf"def {name}\b") or "no match" in tools.search_code(rf"def {name}\b"):
            raise typer.BadParameter(f"--failing-test {failing_test!r}: no test function {name!r} in {repo}")
    res = SherlocLocalizer(_model(llm, model_name), max_turns=max_turns).localize(tools, text, failing_test)
    return {"findings": [f.model_dump() for f in res.case.findings], "turns": res.turns, "tool_calls": res.tool_calls,
            "tokens": res.tokens, "chars_read": res.chars_read, "recoveries": dict(res.recoveries),
            "fallback": res.fallback}


def register(app: typer.Typer) -> None:
    @app.command("localize")
    def localize(
        repo: Path = typer.Option(..., "--repo", help="the repository root"),
        issue: Path = typer.Option(..., "--issue", help="a text file with the bug report / failing output"),
        failing_test: str = typer.Option(None, "--failing-test", help="id of a failing test (optional)"),
        llm: str = typer.Option("heuristic", "--llm", help="heuristic | smollm2 | an OpenAI-compatible base URL"),
        model_name: str = typer.Option("default", "--model", help="model name for an OpenAI-compatible endpoint"),
        max_turns: int = typer.Option(8, "--max-turns"),
    ) -> None:
        """Localize a bug with SHERLOC and print the diagnostic case file (JSON)."""
        typer.echo(json.dumps(localize_cmd(repo, issue, failing_test, llm, model_name, max_turns), indent=1))
