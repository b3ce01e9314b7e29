"""``divelab sherloc localize --repo PATH --issue FILE [--failing-test ID] [--llm heuristic|smollm2|URL]``.

A model that never answered (endpoint down, wrong model id) is an error, not a quiet lexical guess:
the case file of the lexical fallback is printed only with ``--allow-fallback``, and then with a warning."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer


class LocalizeError(RuntimeError):
    """The command cannot give a case file the model wrote; the message says why and what to do."""


class _Unreachable:
    """The model of an endpoint that failed its check, for ``--allow-fallback``: every call raises at once
    (no retries against a server known to be down), so the localizer ends in its lexical fallback."""

    def __init__(self, reason: str) -> None:
        self.reason = reason

    def complete(self, *args: object, **kwargs: object):
        from divelab.chat import ChatClientError

        raise ChatClientError(self.reason)


def _model(llm: str, model_name: str | None, allow_fallback: bool = False):
    if llm == "heuristic":
        from divelab.coding.sherloc.policy import HeuristicDiagnostician

        return HeuristicDiagnostician()
    if llm == "smollm2":
        from divelab.chat.hf_local import HFChatModel
        from divelab.lm import load_model

        return HFChatModel(*load_model("smollm2-135m-instruct"))
    if llm.startswith(("http://", "https://")):
        from divelab.chat import ChatClientError, OpenAIChatClient
        from divelab.chat.endpoint import resolve_model

        try:  # up, and serving the model, before any work: not a fallback after a run of failed requests
            model_name = resolve_model(llm, model_name)
        except ChatClientError as exc:
            if allow_fallback:
                return _Unreachable(str(exc))
            raise LocalizeError(f"{exc}. Or pass --allow-fallback to accept a lexical guess") from None
        return OpenAIChatClient(base_url=llm, model=model_name)
    raise typer.BadParameter(f"unknown --llm {llm!r}; allowed: heuristic, smollm2, or an OpenAI-compatible base URL")


def localize_cmd(repo: Path, issue: Path, failing_test: str | None, llm: str, model_name: str | None,
                 max_turns: int, allow_fallback: bool = False) -> dict:
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
    model = _model(llm, model_name, allow_fallback)
    res = SherlocLocalizer(model, max_turns=max_turns).localize(tools, text, failing_test)
    if res.fallback and res.answers == 0:
        why = f"the model ({llm}) never answered: {res.model_error or 'no reply'}"
        if not allow_fallback:
            raise LocalizeError(f"{why}. Fix the endpoint or --model, or pass --allow-fallback to accept a lexical "
                                "guess (identifier overlap with the issue, low confidence)")
        print(f"warning: {why}; printing the lexical fallback (a guess from identifier overlap, low confidence)",
              file=sys.stderr)
    elif res.fallback:
        print(f"warning: the model ({llm}) answered {res.answers} time(s) but never wrote a valid case file; "
              "printing the lexical fallback (a guess from identifier overlap, low confidence)", file=sys.stderr)
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
        model_name: str = typer.Option(None, "--model", help="model id at the endpoint (default: its only model, "
                                                             "from its /v1/models list)"),
        max_turns: int = typer.Option(8, "--max-turns"),
        allow_fallback: bool = typer.Option(False, "--allow-fallback",
                                            help="when the model never answers, print the lexical fallback (with "
                                                 "a warning) instead of failing"),
    ) -> None:
        """Localize a bug with SHERLOC and print the diagnostic case file (JSON)."""
        try:
            result = localize_cmd(repo, issue, failing_test, llm, model_name, max_turns, allow_fallback)
        except LocalizeError as exc:
            print(f"error: {exc}", file=sys.stderr)
            raise typer.Exit(2) from None
        typer.echo(json.dumps(result, indent=1))
