"""The SHERLOC localization loop over any ``divelab.chat`` model, with the self-recovery layer.

The model sees the issue and the four tools; it either calls tools (native tool calls, or a JSON
``{"tool": name, "arguments": {...}}`` in plain text for models without tool support) or answers
with the case file (JSON, see :mod:`.finding`). Self-recovery (counted in ``recoveries``):

- ``reask``: invalid JSON / schema -> re-ask with the validator's error (at most ``max_retries`` in a row);
- ``tool_error``: a bad tool call -> a structured error message back to the model;
- ``forced_finalise``: the turn budget is spent -> one last turn that must produce the case file;
- ``fallback``: everything failed (or the model raised) -> a lexical fallback: search hits for the
  issue's identifiers ranked by overlap with the issue.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field

from divelab.chat import ChatModel, Message, ToolCall, assistant, system, tool, user
from divelab.coding.sherloc.finding import CaseFile, Finding, Location, parse_case_file, to_locations
from divelab.coding.sherloc.mutate import function_at, functions
from divelab.coding.sherloc.tools import TOOL_SPECS, RepoTools

SYSTEM_PROMPT = """You are a bug localizer. Explore the repository with the tools (view_file, search_code,
repo_tree, import_graph), then answer ONLY with JSON: {"findings": [{"file": ..., "symbol": ..., "line_span":
[start, end], "location_description": ..., "root_cause_hypothesis": ..., "solution_idea": ..., "dependencies":
[...], "testing_impact": ..., "confidence": 0.0-1.0}]}, most likely location first. To call a tool without native
tool calls, answer {"tool": NAME, "arguments": {...}}."""

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]{2,}")
_STOP = frozenset("self cls None True False return def class import from assert the and for not with fails test "
                  "tests line File Traceback most recent call last Error AssertionError".split())


@dataclass
class LocalizationResult:
    case: CaseFile
    locations: list[Location]
    turns: int
    prompt_tokens: int
    completion_tokens: int
    tool_calls: int
    chars_read: int
    recoveries: Counter = field(default_factory=Counter)
    fallback: bool = False
    answers: int = 0  # model replies received; 0 with ``fallback``: the model never answered at all
    model_error: str | None = None  # the error that ended the loop when the model raised

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


def _text_tool_call(text: str) -> ToolCall | None:
    i, j = text.find("{"), text.rfind("}")
    if i < 0 or j < i:
        return None
    try:
        d = json.loads(text[i:j + 1])
    except json.JSONDecodeError:
        return None
    if isinstance(d, dict) and isinstance(d.get("tool"), str) and "findings" not in d:
        args = d.get("arguments", d.get("args", {}))
        return ToolCall(d["tool"], args if isinstance(args, dict) else {}, id="text-call")
    return None


def lexical_fallback(tools: RepoTools, issue: str, k: int = 5) -> CaseFile:
    """Rank source lines by how many of the issue's identifiers they mention (no model involved)."""
    words = Counter(w for w in _IDENT.findall(issue) if w not in _STOP)
    scored = []
    for f in tools.files():
        if "test" in f.split("/")[0] or "/test" in f:
            continue
        for i, line in enumerate(tools.read(f).splitlines(), 1):
            s = sum(c for w, c in words.items() if w in line)
            if s:
                scored.append((s, f, i))
    scored.sort(key=lambda t: (-t[0], t[1], t[2]))
    top = scored[:k] or [(0, (tools.files() or ["?"])[0], 1)]
    best = max(1, top[0][0])
    findings = [Finding(file=f, line_span=(i, i), location_description=f"{f}:{i} mentions identifiers from the issue",
                        root_cause_hypothesis="unknown (lexical fallback: the localizer produced no valid case file)",
                        solution_idea="inspect this line", dependencies=[], testing_impact="rerun the failing test",
                        confidence=round(0.2 * s / best, 3)) for s, f, i in top]
    return CaseFile(findings=findings)


def in_repository(tools: RepoTools, case: CaseFile) -> tuple[CaseFile, int]:
    """The case file with each finding's file made repository-relative and its symbol
    class-qualified (``Class.method``, so same-named methods in one file stay distinct); findings
    outside the repository are dropped and counted. Raises ValueError when none is left."""
    kept, outside = [], []
    for f in case.findings:
        rel = tools.relpath(f.file)
        if rel is None:
            outside.append(f.file)
            continue
        kept.append(f.model_copy(update={"file": rel, "symbol": qualify(tools.read(rel), f.symbol, f.line_span)}))
    if not kept:
        raise ValueError(f"every finding names a file outside the repository ({', '.join(sorted(set(outside)))}); "
                         "name files of the repository (see repo_tree)")
    return CaseFile(findings=kept), len(outside)


def qualify(source: str, symbol: str | None, span: tuple[int, int] | None) -> str | None:
    """The qualified name (``Class.method``) of the function a finding points at: the one holding
    its line when that function's name matches (or no name was given), else the only function of
    that name in the file; unchanged when neither decides."""
    try:
        fns = functions(source)
        owner = function_at(source, span[0]) if span else None
    except SyntaxError:
        return symbol
    short = symbol.rsplit(".", 1)[-1] if symbol else None
    if owner is not None and (short is None or owner.qualname.rsplit(".", 1)[-1] == short):
        return owner.qualname
    same = [f.qualname for f in fns if f.qualname.rsplit(".", 1)[-1] == short]
    return same[0] if len(same) == 1 else symbol


@dataclass
class SherlocLocalizer:
    """Localize a bug with a chat model and the four tools; returns a case file and its cost."""

    model: ChatModel
    max_turns: int = 8
    max_retries: int = 2
    max_tokens: int = 512

    def localize(self, tools: RepoTools, issue: str, failing_test: str | None = None) -> LocalizationResult:
        if not issue.strip():
            raise ValueError("the issue text is empty; give the bug report or the failing test's output")
        if not tools.files():
            raise ValueError(f"the repository {tools.root} holds no Python files to localize in")
        first = issue if failing_test is None else f"{issue}\n\nFailing test: {failing_test}"
        msgs: list[Message] = [system(SYSTEM_PROMPT), user(first)]
        rec: Counter = Counter()
        pt = ct = 0
        retries = 0
        case: CaseFile | None = None
        turns = 0
        calls0, chars0 = tools.calls, tools.chars_read
        forced = False
        answers = 0
        model_error: str | None = None
        while case is None:
            if turns >= self.max_turns:
                if forced:
                    break
                forced = True
                rec["forced_finalise"] += 1
                msgs.append(user("Turn budget exhausted. Answer now with the case file JSON only, no tool calls."))
            turns += 1
            try:
                resp = self.model.complete(msgs, None if forced else TOOL_SPECS, max_tokens=self.max_tokens)
            except Exception as e:  # noqa: BLE001 - any model failure ends in the fallback, counted
                rec[f"model_error:{type(e).__name__}"] += 1
                model_error = f"{type(e).__name__}: {e}"
                break
            answers += 1
            m = resp.message
            pt += resp.prompt_tokens if resp.prompt_tokens is not None else sum(len(x.text()) for x in msgs) // 4
            ct += resp.completion_tokens if resp.completion_tokens is not None else len(m.text()) // 4
            calls = list(m.tool_calls)
            if not calls and not forced:
                tc = _text_tool_call(m.content)
                if tc is not None:
                    calls = [tc]
            if calls:
                retries = 0
                calls = [c if c.id else ToolCall(c.name, c.arguments, id=f"call-{turns}-{k}")
                         for k, c in enumerate(calls)]
                msgs.append(assistant(m.content, calls))
                for c in calls:
                    out = tools.call(c.name, c.arguments)
                    if out.startswith('{"error"'):
                        rec["tool_error"] += 1
                    msgs.append(tool(out, c.id))
                continue
            try:
                case, outside = in_repository(tools, parse_case_file(m.content))
                if outside:
                    rec["outside_repo"] += outside
            except ValueError as e:
                msgs.append(assistant(m.content))
                if retries >= self.max_retries:
                    if not forced:
                        turns = self.max_turns  # stop re-asking: force a final answer
                        continue
                    break
                retries += 1
                rec["reask"] += 1
                msgs.append(user(f"Your answer was not a valid case file ({e}). Reply with the JSON object only."))
        fallback = case is None
        if case is None:
            rec["fallback"] += 1
            case = lexical_fallback(tools, first)
        # the guarantee every caller relies on: every finding names a file of this repository
        assert all(tools.relpath(f.file) == f.file for f in case.findings), case.findings
        return LocalizationResult(case, to_locations(case), turns, pt, ct, tools.calls - calls0,
                                  tools.chars_read - chars0, rec, fallback, answers, model_error)
