"""A programmatic diagnostician: the default "reasoning model" of the loop, so runs need no LLM.

It is a ``divelab.chat`` model that plays the SHERLOC protocol with fixed rules, seeing only the
conversation (the issue and what its tool calls returned), never the gold answer:

1. find the failing test (``search_code`` for its ``def``) and read it (``view_file``);
2. collect the names the test calls and the source frames of the traceback; look up their
   definitions (``search_code``), outside test files;
3. read the top candidates (``view_file``) and pick, in each, the line that shares most
   identifiers with the issue (or the traceback's line);
4. answer with the case file: candidates ranked traceback frame > called by the test > named in
   the issue, with the five diagnostic fields written from what the line contains.

It is a stand-in for a reasoning LLM, not evidence about one.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field

from divelab.chat import ChatResponse, Message, ToolCall, ToolSpec, assistant

_FRAME = re.compile(r'File "([^"]+\.py)", line (\d+), in (\w+)')
_TEST_ID = re.compile(r"`([\w.]+)`")
_CALL = re.compile(r"\b([A-Za-z_]\w{2,})\s*\(")
_HIT = re.compile(r"^([^:\n]+\.py):(\d+): (.*)$", re.M)
_VIEW = re.compile(r"^\s*(\d+) (.*)$")
_WORD = re.compile(r"[A-Za-z_]\w{2,}")
_BUILTIN = frozenset(dir(__builtins__) if isinstance(__builtins__, dict) is False else __builtins__) | frozenset(
    "self assertEqual assertTrue assertFalse assertRaises assertIn assertIs assertIsNone subTest flakes "
    "assertRaisesRegex assertAlmostEqual assertNotEqual check loads dumps".split())


def _is_test(path: str) -> bool:
    return path.startswith("test") or "/test" in path or "tests/" in path


def _hypothesis(line: str) -> tuple[str, str]:
    if re.search(r"[<>]=?|==|!=| in | is ", line):
        return ("the comparison on this line has the wrong operator or boundary",
                "flip or shift the comparison operator")
    if re.search(r"[-+*/%]", line):
        return "an arithmetic operator or an off-by-one constant is wrong", "swap the arithmetic operator or adjust by one"
    if re.search(r"\b(and|or|not)\b", line):
        return "the boolean logic is inverted", "negate the condition or swap and/or"
    if re.search(r"\d", line):
        return "a constant is off by one", "adjust the constant by one"
    return "a statement or call here computes the wrong value", "restore the missing or altered statement or call"


@dataclass
class HeuristicDiagnostician:
    """Rule-based player of the SHERLOC tool protocol (see module docstring). ``top_k`` findings."""

    top_k: int = 5
    n_view: int = 3
    calls: list[list[Message]] = field(default_factory=list)

    def complete(self, messages: list[Message], tools: list[ToolSpec] | None = None, *,
                 temperature: float | None = None, max_tokens: int | None = None) -> ChatResponse:
        self.calls.append(list(messages))
        issue = next(m.content for m in messages if m.role == "user")
        done = [m for m in messages if m.role == "tool"]
        step = len([m for m in messages if m.role == "assistant" and m.tool_calls])
        frames = [(f, int(n), fn) for f, n, fn in _FRAME.findall(issue) if not _is_test(f)]
        test_id = (_TEST_ID.findall(issue) or [""])[0]
        test_fn = test_id.rsplit(".", 1)[-1]
        if not test_fn:
            step += 2  # no failing test named: go straight to looking up what the issue names
        if tools is not None and step == 0 and test_fn:
            return self._call([ToolCall("search_code", {"pattern": rf"def {re.escape(test_fn)}\b"})])
        if tools is not None and step == 1 and done:
            hits = [h for h in _HIT.findall(done[-1].content) if _is_test(h[0])]
            if hits:
                return self._call([ToolCall("view_file", {"path": hits[0][0], "start": int(hits[0][1]),
                                                          "end": int(hits[0][1]) + 30})])
            step = 2
        if tools is not None and step == 2:
            body = done[-1].content if done and test_fn else ""
            called = [n for n in _CALL.findall(body) if n not in _BUILTIN and not n.startswith("test")]
            named = [w for w in _WORD.findall(issue) if w not in _BUILTIN and "_" in w or
                     (w[:1].islower() and w.isidentifier() and len(w) > 4 and w not in _BUILTIN)]
            names = list(dict.fromkeys([fn for _, _, fn in frames] + called + named))[:20]
            if names:
                pattern = r"def (" + "|".join(re.escape(n) for n in names) + r")\b"
                return self._call([ToolCall("search_code", {"pattern": pattern})])
            step = 3
        cands = self._candidates(issue, frames, messages)
        if tools is not None and step == 3 and cands:
            views = [ToolCall("view_file", {"path": f, "start": ln, "end": ln + 60}) for f, ln, _, _ in
                     cands[:self.n_view]]
            return self._call(views)
        return ChatResponse(assistant(json.dumps(self._case(issue, frames, cands, messages))))

    def _call(self, calls: list[ToolCall]) -> ChatResponse:
        return ChatResponse(assistant("", [ToolCall(c.name, c.arguments, id=f"h{i}") for i, c in enumerate(calls)]),
                            finish_reason="tool_calls")

    def _candidates(self, issue: str, frames: list, messages: list[Message]) -> list[tuple[str, int, str, float]]:
        """(file, def line, function name, score), best first."""
        test_body = ""
        defs: list[tuple[str, int, str]] = []
        for m in messages:
            if m.role != "tool":
                continue
            if re.search(r"^\s*\d+ \s*def test", m.content, re.M):
                test_body = m.content
            for f, n, text in _HIT.findall(m.content):
                d = re.match(r"def (\w+)", text)
                if d and not _is_test(f):
                    defs.append((f, int(n), d.group(1)))
        calls = Counter(_CALL.findall(test_body))
        issue_words = set(_WORD.findall(issue))
        frame_rank = {fn: i for i, (_, _, fn) in enumerate(reversed(frames))}
        scored = {}
        for f, n, name in defs:
            s = 0.0
            if name in frame_rank:
                s += 3.0 - 0.1 * frame_rank[name]
            if calls.get(name):
                s += 2.0 + 0.01 * calls[name]
            if name in issue_words:
                s += 1.0
            key = (f, n)
            if s > 0 and (key not in scored or scored[key][3] < s):
                scored[key] = (f, n, name, s)
        for f, n, fn in frames:  # traceback frames whose def was not searched
            if not any(c[0] == f and c[2] == fn for c in scored.values()):
                scored[(f, -n)] = (f, n, fn, 3.0 - 0.1 * frame_rank.get(fn, 0))
        return sorted(scored.values(), key=lambda c: (-c[3], c[0], c[1]))

    def _case(self, issue: str, frames: list, cands: list, messages: list[Message]) -> dict:
        views: dict[str, dict[int, str]] = {}
        for m in messages:
            if m.role == "tool" and not m.content.startswith("{"):
                path = None
                for c in (c for a in messages if a.role == "assistant" for c in a.tool_calls):
                    if c.id == m.tool_call_id and c.name == "view_file":
                        path = c.arguments.get("path")
                if path:
                    for line in m.content.splitlines():
                        v = _VIEW.match(line)
                        if v:
                            views.setdefault(path, {})[int(v.group(1))] = v.group(2)
        words = Counter(w for w in _WORD.findall(issue) if w not in _BUILTIN)
        findings = []
        top = max((c[3] for c in cands), default=1.0)
        for f, n, name, s in cands[:self.top_k]:
            frame_lines = [ln for ff, ln, fn in frames if ff == f and fn == name]
            body = self._body(views.get(f, {}), abs(n))
            if frame_lines:
                line = frame_lines[-1]
            elif body:
                line = max(body, key=lambda i: (sum(words[w] for w in set(_WORD.findall(body[i]))), -i))
            else:
                line = abs(n)
            text = (views.get(f, {}).get(line) or "").strip()
            cause, fix = _hypothesis(text)
            findings.append({
                "file": f, "symbol": name, "line_span": [line, line],
                "location_description": f"{name} in {f}, line {line}: `{text[:100]}`",
                "root_cause_hypothesis": cause, "solution_idea": fix,
                "dependencies": sorted({fn for _, _, fn in frames if fn != name})[:5],
                "testing_impact": "the failing test in the issue should pass; rerun the module's tests",
                "confidence": round(0.9 * s / top if top else 0.1, 3)})
        if not findings:
            return {"findings": []}
        return {"findings": findings}

    @staticmethod
    def _body(lines: dict[int, str], def_line: int) -> dict[int, str]:
        """The viewed lines of the function starting at ``def_line`` (by indentation)."""
        if def_line not in lines:
            return {}
        head = lines[def_line]
        indent = len(head) - len(head.lstrip())
        out = {}
        for i in sorted(k for k in lines if k > def_line):
            t = lines[i]
            if t.strip() and len(t) - len(t.lstrip()) <= indent:
                break
            if t.strip() and not t.strip().startswith(("#", '"""', "'''")):
                out[i] = t
        return out
