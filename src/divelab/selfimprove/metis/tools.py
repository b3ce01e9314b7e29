"""Code memory: codifiers that write a tool from a clean request, the sandbox that runs it, the registry.

A tool is Python source defining ``tool(e1, e2, ...) -> list[str]``: given the task's slot values
it returns a command program (a macro) that the harness executes in the real environment as a
trusted black box. Generated code only ever runs in :func:`divelab.sandbox.run_python`
(subprocess, limits, no network); results are memoised by (source, arguments), since a tool is a
pure function of its arguments.

- :class:`CodifyRequest` is all a codifier may see: the pattern, the plan steps and facts, never
  the trajectory (the desire-path gate builds it; ``render()`` is the whole prompt).
- :class:`TemplateCodifier` compiles a plan into a tool deterministically;
  :class:`NoisyCodifier` wraps one and injects the two bugs LLM codifiers make, at set rates
  (hard-coding an entity seen in the facts instead of a parameter; dropping a step), so the
  value of validation can be measured; :class:`ChatCodifier` asks a chat model for the code.
- :class:`ToolRegistry` holds validated tools with call and failure counts and demotes a tool
  back to text after ``demote_after`` consecutive failures.
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from divelab.chat import ChatModel, system, user
from divelab.sandbox import Limits, run_python
from divelab.selfimprove.metis.memory import Entry, MemoryStore, words

_RUNNER = """
import json, sys
_calls = json.loads(sys.stdin.read())
_out = []
for _args in _calls:
    try:
        _r = tool(**_args)
        if isinstance(_r, (list, tuple)) and all(isinstance(_c, str) for _c in _r):
            _out.append({"ok": True, "program": list(_r)})
        else:
            _out.append({"ok": False, "error": "tool must return a list of command strings, got " + type(_r).__name__})
    except Exception as _e:
        _out.append({"ok": False, "error": type(_e).__name__ + ": " + str(_e)[:200]})
print("@@RESULT@@" + json.dumps(_out))
"""

_MEMO: dict[tuple[str, str], dict[str, Any]] = {}
SANDBOX_LIMITS = Limits(wall_s=10.0, cpu_s=5, memory_mb=256)


def run_tool_source(source: str, calls: list[dict[str, str]]) -> list[dict[str, Any]]:
    """Run ``tool(**args)`` for each ``args`` in the sandbox (one subprocess for all new calls).
    Each result is ``{"ok": True, "program": [...]}`` or ``{"ok": False, "error": "..."}``."""
    todo = [c for c in calls if (source, json.dumps(c, sort_keys=True)) not in _MEMO]
    if todo:
        r = run_python(source + "\n" + _RUNNER, stdin=json.dumps(todo), limits=SANDBOX_LIMITS)
        marker = r.stdout.rfind("@@RESULT@@")
        if r.passed and marker >= 0:
            results = json.loads(r.stdout[marker + len("@@RESULT@@"):])
        else:
            err = (r.stderr.strip().splitlines() or [r.reason or r.status.value])[-1][:200]
            results = [{"ok": False, "error": f"sandbox {r.status.value}: {err}"}] * len(todo)
        for c, res in zip(todo, results, strict=True):
            _MEMO[(source, json.dumps(c, sort_keys=True))] = res
    return [_MEMO[(source, json.dumps(c, sort_keys=True))] for c in calls]


@dataclass(frozen=True)
class CodifyRequest:
    """The codifier's whole input: (pattern, plan, facts). No trajectory field exists, by design."""

    pattern: str
    params: tuple[str, ...]
    plan: tuple[str, ...]
    facts: tuple[str, ...] = ()

    def render(self) -> str:
        plan = "\n".join(f"{i + 1}. {s}" for i, s in enumerate(self.plan))
        facts = "\n".join(f"- {f}" for f in self.facts) or "- (none)"
        return (f"Task pattern: {self.pattern}\nParameters: {', '.join(self.params) or '(none)'}\n"
                f"Plan (parameters written as {{e1}}, {{e2}}...):\n{plan}\nEnvironment facts:\n{facts}")


class Codifier(Protocol):
    def __call__(self, request: CodifyRequest) -> str: ...


def _literal(step: str) -> str:
    """A Python expression for one plan step: an f-string when it uses parameters."""
    if re.search(r"\{e\d+\}", step):
        return "f" + json.dumps(step)
    return json.dumps(step)


def _source(params: tuple[str, ...], steps: list[str], doc: str) -> str:
    body = ",\n        ".join(steps) if steps else ""
    return (f"def tool({', '.join(params)}):\n    {json.dumps(doc)}\n"
            f"    return [\n        {body}\n    ]\n")


class TemplateCodifier:
    """Compiles the plan into a macro deterministically (a perfect, cheap codifier)."""

    def __call__(self, request: CodifyRequest) -> str:
        return _source(request.params, [_literal(s) for s in request.plan], request.pattern)


_FACT_ENTITY = re.compile(r"the (.+?) was on or in the ")


class NoisyCodifier:
    """Wraps a codifier and injects bugs: with probability ``leak`` one parameter is replaced by a
    concrete entity taken from the facts (the classic hard-coding bug: passes a check on an example
    with that entity, fails every other caller); else with probability ``drop`` one step is left
    out (fails any check). The draw is a function of (seed, request), so the same request gets the
    same bug in every memory that makes it (a paired comparison); ``bugs`` logs what was injected."""

    def __init__(self, base: Codifier | None = None, leak: float = 0.3, drop: float = 0.1, seed: int = 0) -> None:
        for name, p in (("leak", leak), ("drop", drop)):
            if not 0 <= p <= 1:
                raise ValueError(f"{name} must be a probability in [0, 1], got {p}")
        self.base = base or TemplateCodifier()
        self.leak, self.drop, self.seed = leak, drop, seed
        self.bugs: list[tuple[str, str]] = []  # (pattern, bug or "")

    def __call__(self, request: CodifyRequest) -> str:
        from divelab.cache import stable_hash

        rng = random.Random(stable_hash([self.seed, request.pattern, list(request.plan)]))
        plan = list(request.plan)
        u_leak, u_drop = rng.random(), rng.random()
        entities = [m.group(1) for f in request.facts for m in [_FACT_ENTITY.search(f)] if m]
        bug = ""
        if u_leak < self.leak and request.params and entities:
            p = request.params[0]
            plan = [s.replace("{" + p + "}", entities[0]) for s in plan]
            bug = f"leak {p}={entities[0]}"
        elif u_drop < self.drop and len(plan) > 1:
            i = rng.randrange(len(plan))
            plan = plan[:i] + plan[i + 1:]
            bug = f"drop step {i + 1}"
        self.bugs.append((request.pattern, bug))
        source = self.base(CodifyRequest(request.pattern, request.params, tuple(plan), request.facts))
        return source + (f"# injected bug: {bug}\n" if bug else "")


CODIFY_PROMPT = (
    "Write a Python function `tool({params})` that returns the list of game commands (strings) that carry "
    "out the plan for the given parameter values. Use f-strings for parameters. Reply with one ```python "
    "code block only."
)


class ChatCodifier:
    """Asks a chat model for the tool's code, given only the request's text."""

    def __init__(self, model: ChatModel, max_tokens: int = 300) -> None:
        self.model, self.max_tokens = model, max_tokens
        self.calls = 0

    def __call__(self, request: CodifyRequest) -> str:
        msgs = [system(CODIFY_PROMPT.replace("{params}", ", ".join(request.params))), user(request.render())]
        reply = self.model.complete(msgs, temperature=0.0, max_tokens=self.max_tokens).message.content
        self.calls += 1
        m = re.search(r"```(?:python)?\s*(.*?)```", reply, re.S)
        return (m.group(1) if m else reply).strip() + "\n"


@dataclass
class Tool:
    name: str
    pattern: str
    params: list[str]
    source: str
    description: str
    validated: bool
    validation: dict[str, Any] = field(default_factory=dict)
    calls: int = 0
    failures: int = 0
    consecutive_failures: int = 0
    active: bool = True

    def run(self, args: dict[str, str]) -> dict[str, Any]:
        """The tool's program for ``args`` (computed in the sandbox)."""
        missing = [p for p in self.params if p not in args]
        if missing:
            return {"ok": False, "error": f"missing arguments {missing} for {self.name}({', '.join(self.params)})"}
        return run_tool_source(self.source, [{p: args[p] for p in self.params}])[0]


class ToolRegistry:
    """Validated tools by pattern, with call counts (so "built but never invoked" is measurable)."""

    def __init__(self, store: MemoryStore | None = None, demote_after: int = 2) -> None:
        if demote_after < 1:
            raise ValueError(f"demote_after must be >= 1, got {demote_after}")
        self.store = store
        self.demote_after = demote_after
        self.tools: dict[str, Tool] = {}
        if store is not None:
            for e in store.entries(kind="tool"):
                self.tools[e.key] = Tool(**e.data)

    def _save(self, tool: Tool) -> None:
        if self.store is not None:
            self.store.put(Entry(id=f"tool:{tool.pattern}", kind="tool", key=tool.pattern, text=tool.description,
                                 uses=tool.calls, failures=tool.failures, data=asdict(tool)))

    def register(self, tool: Tool) -> Tool:
        if not tool.name.isidentifier():
            raise ValueError(f"tool name must be a Python identifier, got {tool.name!r}")
        self.tools[tool.pattern] = tool
        self._save(tool)
        return tool

    def active_for(self, pattern: str) -> Tool | None:
        t = self.tools.get(pattern)
        return t if t is not None and t.active else None

    def active(self) -> list[Tool]:
        return [t for t in self.tools.values() if t.active]

    def record(self, tool: Tool, ok: bool) -> bool:
        """Count one call; returns True if this failure demoted the tool back to text."""
        tool.calls += 1
        demoted = False
        if ok:
            tool.consecutive_failures = 0
        else:
            tool.failures += 1
            tool.consecutive_failures += 1
            if tool.consecutive_failures >= self.demote_after and tool.active:
                tool.active, demoted = False, True
        self._save(tool)
        return demoted

    def never_invoked(self) -> list[Tool]:
        return [t for t in self.tools.values() if t.calls == 0]

    def specs(self) -> list[Any]:
        """The active tools as :class:`divelab.chat.ToolSpec` (for a chat agent's tool list)."""
        from divelab.chat import ToolSpec

        return [ToolSpec(t.name, t.description, {"type": "object", "properties": {p: {"type": "string"} for p in t.params},
                                                  "required": list(t.params)}) for t in self.active()]


def codify_cost(request: CodifyRequest, source: str) -> int:
    return words(request.render()) + words(source)
