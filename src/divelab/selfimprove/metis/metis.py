"""Metis: text-first experience memory that crystallises only recurring plans into validated tools.

After each episode, :meth:`Metis.observe` distils it into typed text (plan / facts / pitfalls)
and runs the **desire-path gate**: the task's pattern key gets one more recurrence (success or
failure alike); once a pattern has recurred ``k`` times and a plan exists for it, the codifier is
called with only ``(pattern, plan, facts)`` — never the trajectory — and the tool it writes is run
in the sandbox on every recorded example of the pattern and checked (by ``check``: replaying the
program in the environment, or comparing it with the recorded winning program). Only a tool that
passes every example is registered; a failed one leaves the plan as text and a pitfall. A
registered tool that fails ``demote_after`` times in a row is demoted back to text.

:meth:`Metis.advise` is what an agent reads before acting: the tool for this exact pattern (if
one has been earned) and the best plan (this pattern's, else the nearest by BM25), with facts and
pitfalls. Any agent loop can use it: call ``advise`` before a task, ``report_tool`` after calling
a tool, ``observe`` after the episode.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from divelab.cache import stable_hash
from divelab.selfimprove.metis.distill import Distiller, Episode, RuleDistiller, minimal_plan
from divelab.selfimprove.metis.memory import Entry, MemoryStore, words
from divelab.selfimprove.metis.pattern import Pattern, fill, normalise
from divelab.selfimprove.metis.tools import (
    Codifier,
    CodifyRequest,
    Tool,
    ToolRegistry,
    codify_cost,
    run_tool_source,
)


@dataclass
class Example:
    """A recorded successful instance of a pattern: the validation set of its tool."""

    episode_id: str
    env: str
    task: str
    slots: dict[str, str]
    program: list[str]  # the concrete winning program (minimal plan) of that episode


Check = Callable[[Example, list[str]], bool]


def exact_check(example: Example, program: list[str]) -> bool:
    """Default check: the tool reproduces the example's recorded winning program exactly."""
    return program == example.program


@dataclass
class MetisConfig:
    k: int = 3  # recurrences before a plan may be codified (1 = "Eager": codify everything)
    codify: bool = True  # False: text-only memory
    validate: bool = True  # False: expose whatever the codifier wrote (the unvalidated ablation)
    demote_after: int = 2
    max_facts: int = 4  # facts handed to the codifier / shown with advice
    max_examples: int = 6

    def __post_init__(self) -> None:
        if self.k < 1:
            raise ValueError(f"gate threshold k must be >= 1, got {self.k}")


@dataclass
class Advice:
    pattern: Pattern
    tool: Tool | None = None
    plan: list[str] = field(default_factory=list)  # concrete steps for this task
    plan_pattern: str = ""  # the pattern the plan was recorded for
    facts: list[str] = field(default_factory=list)
    pitfalls: list[str] = field(default_factory=list)

    def text(self) -> str:
        """The advice as the agent reads it (its words are the per-decision context cost)."""
        parts = []
        if self.plan:
            parts.append("Plan that worked for a similar task: " + "; ".join(self.plan))
        if self.facts:
            parts.append("Facts: " + " / ".join(self.facts))
        if self.pitfalls:
            parts.append("Pitfalls: " + " / ".join(self.pitfalls))
        return "\n".join(parts)


@dataclass
class GateEvent:
    pattern: str
    recurrence: int
    outcome: str  # "registered" | "rejected" | "registered-unvalidated"
    tool: str = ""
    reason: str = ""


class Metis:
    """The memory (see the module docstring). ``codifier`` is needed only when ``config.codify``."""

    def __init__(self, store: MemoryStore | None = None, distiller: Distiller | None = None,
                 codifier: Codifier | None = None, check: Check | None = None,
                 config: MetisConfig | None = None) -> None:
        self.config = config or MetisConfig()
        if self.config.codify and codifier is None:
            raise ValueError("Metis with codify=True needs a codifier (e.g. TemplateCodifier())")
        self.store = store if store is not None else MemoryStore()
        self.distiller = distiller or RuleDistiller()
        self.codifier = codifier
        self.check = check or exact_check
        self.registry = ToolRegistry(self.store, demote_after=self.config.demote_after)
        self.recurrence: Counter[str] = Counter()
        self.examples: dict[str, list[Example]] = {}
        self.events: list[GateEvent] = []
        self.codifier_inputs: list[CodifyRequest] = []
        self.cost = {"distill_words": 0, "codify_words": 0, "codify_calls": 0, "validation_runs": 0}
        self._tried: set[tuple[str, str]] = set()  # (pattern, plan) pairs already codified and rejected
        for e in self.store.entries(kind="meta"):  # gate counters of a persisted store
            self.recurrence[e.key] = int(e.data["recurrence"])
            self.examples[e.key] = [Example(**x) for x in e.data["examples"]]

    # -- learning -------------------------------------------------------------------------------
    def observe(self, episode: Episode) -> GateEvent | None:
        """Distil one finished episode into memory and run the gate on its pattern."""
        self.recurrence[episode.pattern] += 1
        d = self.distiller(episode)
        self.cost["distill_words"] += d.cost_words
        if d.plan:
            pid = "plan:" + stable_hash([episode.pattern, d.plan])
            e = self.store.get(pid) or Entry(pid, "plan", episode.pattern, "; ".join(d.plan),
                                             data={"steps": d.plan, "support": 0, "params": list(episode.slots)})
            e.data["support"] += 1
            e.evidence.append(episode.id)
            self.store.put(e)
        for text in d.facts:
            fid = "fact:" + stable_hash(text)
            e = self.store.get(fid) or Entry(fid, "fact", episode.env, text)
            e.evidence.append(episode.id)
            self.store.put(e)
        for text in d.pitfalls:
            self._pitfall(episode.pattern, text, episode.id)
        if episode.won:
            start = episode.steps[0].room_before if episode.steps else ""
            ex = Example(episode.id, episode.env, episode.task, dict(episode.slots), minimal_plan(episode.steps, start))
            self.examples.setdefault(episode.pattern, []).append(ex)
        self.store.put(Entry("meta:" + episode.pattern, "meta", episode.pattern, "",
                             data={"recurrence": self.recurrence[episode.pattern],
                                   "examples": [asdict(x) for x in self.examples.get(episode.pattern, [])]}))
        return self._gate(episode.pattern, episode.env)

    def _pitfall(self, pattern: str, text: str, evidence: str) -> None:
        pid = "pitfall:" + stable_hash([pattern, text])
        e = self.store.get(pid) or Entry(pid, "pitfall", pattern, text)
        e.evidence.append(evidence)
        self.store.put(e)

    def best_plan(self, pattern: str) -> Entry | None:
        plans = self.store.entries(kind="plan", key=pattern)
        if not plans:
            return None
        return min(plans, key=lambda e: (-e.data["support"], len(e.data["steps"]), e.id))

    def _facts(self, query: str, env: str, recent: str = "") -> list[str]:
        """Facts of this environment for ``query`` (BM25); those backed by episode ``recent`` first."""
        hits = [e for e, _ in self.store.search(f"{env} {query}", kinds=("fact",), n=self.config.max_facts * 3)
                if e.key == env]
        hits.sort(key=lambda e: recent not in e.evidence)  # stable: BM25 order within each group
        return [e.text for e in hits][: self.config.max_facts]

    def _gate(self, pattern: str, env: str) -> GateEvent | None:
        cfg = self.config
        if not cfg.codify or self.recurrence[pattern] < cfg.k or pattern in self.registry.tools:
            return None
        plan = self.best_plan(pattern)
        if plan is None or (pattern, plan.text) in self._tried:
            return None
        params = tuple(plan.data["params"])
        recent = plan.evidence[-1] if plan.evidence else ""
        req = CodifyRequest(pattern, params, tuple(plan.data["steps"]),
                            tuple(self._facts(pattern.split("|", 1)[-1] + " " + plan.text, env, recent)))
        self.codifier_inputs.append(req)
        source = self.codifier(req)  # type: ignore[misc]
        self.cost["codify_calls"] += 1
        self.cost["codify_words"] += codify_cost(req, source)
        name = "tool_" + stable_hash(pattern, length=8)
        tool = Tool(name, pattern, list(params), source, f"{name}({', '.join(params)}): does '{pattern}'", False)
        if not cfg.validate:
            self.registry.register(tool)
            ev = GateEvent(pattern, self.recurrence[pattern], "registered-unvalidated", name)
            self.events.append(ev)
            return ev
        ok, reason = self.validate(tool, self.examples.get(pattern, [])[-cfg.max_examples:])
        tool.validated, tool.validation = ok, {"examples": len(self.examples.get(pattern, [])), "reason": reason}
        if ok:
            self.registry.register(tool)
            ev = GateEvent(pattern, self.recurrence[pattern], "registered", name)
        else:
            self._tried.add((pattern, plan.text))
            self._pitfall(pattern, f"a tool for '{pattern}' failed validation ({reason}); follow the plan as text",
                          name)
            ev = GateEvent(pattern, self.recurrence[pattern], "rejected", name, reason)
        self.events.append(ev)
        return ev

    def validate(self, tool: Tool, examples: list[Example]) -> tuple[bool, str]:
        """Run the tool in the sandbox on every example's slots and check each program."""
        if not examples:
            return False, "no recorded examples"
        results = run_tool_source(tool.source, [{p: ex.slots.get(p, "") for p in tool.params} for ex in examples])
        self.cost["validation_runs"] += len(examples)
        for ex, r in zip(examples, results, strict=True):
            if not r["ok"]:
                return False, f"error on {ex.task!r}: {r['error']}"
            if not self.check(ex, r["program"]):
                return False, f"wrong program on {ex.task!r}"
        return True, f"passed {len(examples)} example(s)"

    # -- acting ---------------------------------------------------------------------------------
    def advise(self, task: str, env: str = "", entities: list[str] | None = None) -> Advice:
        pat = normalise(task, env, entities)
        adv = Advice(pat, tool=self.registry.active_for(pat.key))
        plan = self.best_plan(pat.key)
        if plan is None:
            query = re.sub(r"<e\d+>|<n>", " ", pat.template)  # the task's own words, not env or slots
            hits = self.store.search(query, kinds=("plan",), n=1)
            plan = hits[0][0] if hits else None
        if plan is not None:
            steps = [fill(s, pat.slots) for s in plan.data["steps"]]
            adv.plan, adv.plan_pattern = [s for s in steps if s is not None], plan.key
        adv.facts = self._facts(task, env)
        adv.pitfalls = [e.text for e, _ in self.store.search(pat.key, kinds=("pitfall",), n=2) if e.key == pat.key]
        return adv

    def report_tool(self, tool: Tool, ok: bool, detail: str = "") -> None:
        if self.registry.record(tool, ok):
            self._pitfall(tool.pattern, f"tool {tool.name} was demoted after {tool.consecutive_failures} failures"
                          f"{': ' + detail if detail else ''}; follow the plan as text", tool.name)

    def summary(self) -> dict[str, Any]:
        tools = list(self.registry.tools.values())
        return {"plans": len(self.store.entries(kind="plan")), "facts": len(self.store.entries(kind="fact")),
                "pitfalls": len(self.store.entries(kind="pitfall")), "tools": len(tools),
                "tools_active": len(self.registry.active()), "tools_never_invoked": len(self.registry.never_invoked()),
                "gate_events": [e.__dict__ for e in self.events], **self.cost,
                "construction_words": self.cost["distill_words"] + self.cost["codify_words"],
                "memory_words": sum(words(e.text) for e in self.store.entries())}
