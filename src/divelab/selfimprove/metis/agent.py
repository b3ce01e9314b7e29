"""Agents and the episode harness: how text advice and tools are consumed.

The **injection asymmetry** is built into the harness, and on purpose stated here exactly:

- **Text advice is checked against the environment.** The agent follows the plan's next step only
  if it is an admissible command now (it may skip ahead two steps); otherwise it takes a step of
  its own, with the plan's words as a hint. Advice never executes anything by itself.
- **A tool is a trusted black box.** Its program runs command after command without the agent
  looking; it stops at the first command that is not admissible (the tool "raises"), at the goal,
  or at the step budget. Afterwards the agent carries on with its own policy on the remaining
  budget (recovery is allowed; the tool's wasted steps are not refunded).

Costs (ReAct-style): every agent decision reads the task, the advice text and the whole episode
so far (each command and observation); the words read, summed over decisions, are the execution
cost. A tool call is one decision that reads the same plus the tool's signature; its commands cost
budget steps but no decisions (their output joins the history later decisions read).

:class:`ExplorerAgent` is the default (programmatic, seeded, CPU-instant): it scores admissible
commands by the task's entities, unexplored exits and the advice's words. :class:`ChatAgent`
puts the same choice to any :class:`~divelab.chat.ChatModel` (falls back to the explorer on a
reply that is not a command, and counts those).
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from divelab.chat import ChatModel, system, user
from divelab.selfimprove.metis.distill import OBSERVE, Episode, Step
from divelab.selfimprove.metis.memory import MemoryStore, tokens, words
from divelab.selfimprove.metis.metis import Advice
from divelab.selfimprove.metis.pattern import normalise
from divelab.selfimprove.metis.tools import Codifier, CodifyRequest, Tool, ToolRegistry, codify_cost
from divelab.selfimprove.metis.worlds import TaskEnv

_CMD = re.compile(r"^(put|insert|unlock|take) (.+?) (?:on|into|with|from) (.+)$")


def parse_command(action: str) -> tuple[str, str, str]:
    """``"put blue mug on steel table"`` → ``("put", "blue mug", "steel table")``."""
    m = _CMD.match(action)
    if m:
        return m.group(1), m.group(2), m.group(3)
    verb, _, rest = action.partition(" ")
    return verb, rest, ""


GOAL_VERBS = {"put": "put", "store": "insert", "eat": "eat", "drop": "drop", "take": "take", "open": "open"}
"""The command verb a task's first word asks for (the explorer's one piece of game knowledge)."""


class Advisor(Protocol):
    def advise(self, task: str, env: str = "", entities: list[str] | None = None) -> Advice: ...

    def report_tool(self, tool: Tool, ok: bool, detail: str = "") -> None: ...


class NoMemory:
    """The plain agent's memory: nothing."""

    def advise(self, task: str, env: str = "", entities: list[str] | None = None) -> Advice:
        return Advice(normalise(task, env, entities))

    def report_tool(self, tool: Tool, ok: bool, detail: str = "") -> None:  # pragma: no cover - never called
        pass

    def summary(self) -> dict[str, Any]:
        return {"tools": 0, "construction_words": 0, "memory_words": 0}


class CodeMemory:
    """Code-only memory, as in the paper's controlled study: every successful trajectory of a new
    pattern is codified at once (ungated) into a tool, from that one trajectory's plan and facts,
    and exposed unvalidated; at use, the tool for the exact pattern or else the nearest tool by
    BM25 over tool descriptions (with the same number of parameters) is called."""

    def __init__(self, codifier: Codifier, distiller: Any = None, nearest: bool = True) -> None:
        from divelab.selfimprove.metis.distill import RuleDistiller

        self.codifier, self.distiller, self.nearest = codifier, distiller or RuleDistiller(), nearest
        self.store = MemoryStore()
        self.registry = ToolRegistry(self.store, demote_after=10**9)  # never demoted
        self.cost = {"distill_words": 0, "codify_words": 0, "codify_calls": 0, "validation_runs": 0}

    def observe(self, episode: Episode) -> None:
        if not episode.won or episode.pattern in self.registry.tools:
            return
        d = self.distiller(episode)
        self.cost["distill_words"] += d.cost_words
        req = CodifyRequest(episode.pattern, tuple(episode.slots), tuple(d.plan), tuple(d.facts[:4]))
        source = self.codifier(req)
        self.cost["codify_calls"] += 1
        self.cost["codify_words"] += codify_cost(req, source)
        name = f"tool_{len(self.registry.tools)}"
        self.registry.register(Tool(name, episode.pattern, list(episode.slots), source,
                                    f"{name}({', '.join(episode.slots)}): {episode.pattern.split('|', 1)[-1]}", False))

    def advise(self, task: str, env: str = "", entities: list[str] | None = None) -> Advice:
        pat = normalise(task, env, entities)
        tool = self.registry.active_for(pat.key)
        if tool is None and self.nearest:
            hits = self.store.search(f"{env} {pat.template}", kinds=("tool",), n=10)
            tool = next((self.registry.tools[e.key] for e, _ in hits
                         if len(self.registry.tools[e.key].params) == len(pat.slots)), None)
        return Advice(pat, tool=tool)

    def report_tool(self, tool: Tool, ok: bool, detail: str = "") -> None:
        self.registry.record(tool, ok)

    def summary(self) -> dict[str, Any]:
        return {"tools": len(self.registry.tools), "tools_never_invoked": len(self.registry.never_invoked()),
                **self.cost, "construction_words": self.cost["distill_words"] + self.cost["codify_words"]}


@dataclass
class Context:
    task: str
    slots: dict[str, str]
    observation: str
    admissible: list[str]
    room: str
    history: list[tuple[str, str]]  # (room, action)
    advice: Advice
    pending: list[str]  # advice steps not yet followed
    moves: dict[tuple[str, str], str] = field(default_factory=dict)  # (room, "go d") -> room it led to

    def leads_to(self, action: str) -> str | None:
        """Where a move from the current room leads, if seen (either way round)."""
        if (self.room, action) in self.moves:
            return self.moves[(self.room, action)]
        back = {"go east": "go west", "go west": "go east", "go north": "go south", "go south": "go north"}
        for (room, a), dest in self.moves.items():
            if dest == self.room and back.get(a) == action:
                return room
        return None


class Agent(Protocol):
    def act(self, ctx: Context, rng: random.Random) -> str: ...


@dataclass
class ExplorerAgent:
    """A seeded heuristic agent (see the module docstring); ``epsilon`` is its random-step rate."""

    epsilon: float = 0.15
    hint_weight: float = 0.6

    def score(self, action: str, ctx: Context) -> float:
        verb, obj, other = parse_command(action)
        ents = list(ctx.slots.values())
        main = ents[0] if ents else ""
        s = 0.0
        goal_verb = GOAL_VERBS.get(ctx.task.split(" ")[0].lower(), "")
        if verb == goal_verb and obj == main and (not other or other in ents):
            s += 8.0  # the command the task text asks for
        elif verb in ("put", "insert", "drop", "eat"):
            s -= 3.0
        elif verb == "take":
            s += 5.0 if obj in ents else (1.0 if "key" in obj else -0.5)
        elif verb == "open":
            s += 3.0 if obj in ents else 2.2
        elif verb == "unlock":
            s += 3.0 if obj in ents else 1.0
        elif verb == "go":
            s += 2.0 if ctx.leads_to(action) is None else 0.3
        elif verb == "close":
            s -= 2.0
        if (ctx.room, action) in ctx.history[-4:]:
            s -= 2.0
        if ctx.pending:
            hint = set(tokens(" ".join(ctx.pending[:2])))
            s += self.hint_weight * len(hint & set(tokens(action))) / max(1, len(tokens(action)))
        for p in ctx.advice.pitfalls:
            if f"'{action}'" in p:
                s -= 2.0
        return s

    def act(self, ctx: Context, rng: random.Random) -> str:
        cands = [a for a in ctx.admissible if a.split(" ")[0] not in OBSERVE] or list(ctx.admissible)
        if rng.random() < self.epsilon:
            return rng.choice(cands)
        scored = [(self.score(a, ctx), rng.random(), a) for a in cands]
        return max(scored)[2]


AGENT_PROMPT = ("You play a text game. Reply with exactly one command from the list of admissible commands, "
                "nothing else.")


@dataclass
class ChatAgent:
    """Asks a chat model for the next command (advice included in the prompt); a reply that names no
    admissible command falls back to the explorer and is counted in ``invalid``."""

    model: ChatModel
    fallback: ExplorerAgent = field(default_factory=ExplorerAgent)
    max_tokens: int = 16
    calls: int = 0
    invalid: int = 0

    def act(self, ctx: Context, rng: random.Random) -> str:
        advice = ctx.advice.text()
        msg = (f"Task: {ctx.task}\n{advice + chr(10) if advice else ''}Observation: {ctx.observation}\n"
               f"Admissible commands: {', '.join(ctx.admissible)}\nCommand:")
        reply = self.model.complete([system(AGENT_PROMPT), user(msg)], temperature=0.0,
                                    max_tokens=self.max_tokens).message.content
        self.calls += 1
        text = " ".join(reply.lower().strip().strip(".\"'`").split())
        if text in ctx.admissible:
            return text
        for a in sorted(ctx.admissible, key=len, reverse=True):
            if re.search(r"\b" + re.escape(a) + r"\b", text):
                return a
        self.invalid += 1
        return self.fallback.act(ctx, rng)


@dataclass
class Outcome:
    """One played task."""

    won: bool
    steps: int
    decisions: int
    context_words: int
    tool: str = ""
    tool_ok: bool | None = None
    tool_error: str = ""
    episode: Episode | None = None


def _next_advice(pending: list[str], admissible: Sequence[str]) -> int | None:
    """Which advice step to follow now (its index), or None for the agent's own step.

    The first admissible non-move step anywhere in the plan wins (steps before it are dropped);
    a move is followed only while it is the plan's next step and admissible. A next step that is a
    move not admissible here is stale and dropped; a blocked non-move step waits (the agent explores)."""
    while pending and pending[0].startswith("go ") and pending[0] not in admissible:
        pending.pop(0)
    for j, step in enumerate(pending):
        if not step.startswith("go ") and step in admissible:
            return j
    if pending and pending[0].startswith("go ") and pending[0] in admissible:
        return 0
    return None


def play(env: TaskEnv, advisor: Advisor, agent: Agent, rng: random.Random, use_tools: bool = True,
         use_text: bool = True, episode_id: str = "") -> Outcome:
    """Play one task with one memory (see the module docstring for how advice and tools are used)."""
    task = env.task
    obs = first = env.reset(0)
    advice = advisor.advise(task.text, task.world)
    if not use_text:
        advice = Advice(advice.pattern, tool=advice.tool)
    slots = advice.pattern.slots
    steps: list[Step] = []
    decisions = ctx_words = 0
    out = Outcome(False, 0, 0, 0)
    done = False

    def do(action: str, via: str = "") -> None:
        nonlocal obs, done
        room = env.room()
        obs, _r, done, info = env.step(action)
        steps.append(Step(action, obs, room, info["room"], info["changed"], via))

    if use_tools and advice.tool is not None:
        tool = advice.tool
        decisions += 1
        ctx_words += words(first) + words(tool.description)
        res = tool.run(slots)
        out.tool = tool.name
        err = "" if res["ok"] else res["error"]
        for cmd in res.get("program", []):
            if done:
                break
            if cmd not in env.admissible_actions():
                err = f"command {cmd!r} not admissible"
                break
            do(cmd, via=tool.name)
        won = env.won()
        if not won and not err:
            err = "program ended without reaching the goal" if not done else "step budget used up"
        out.tool_ok, out.tool_error = won, err
        advisor.report_tool(tool, won, err)
    pending = list(advice.plan)
    advice_words = words(advice.text())
    history_words = words(first) + sum(words(s.action) + words(s.observation) for s in steps)
    while not done:
        adm = env.admissible_actions()
        j = _next_advice(pending, adm)
        if j is not None:
            action = pending[j]
            del pending[: j + 1]
        else:
            ctx = Context(task.text, slots, obs, adm, env.room(), [(s.room_before, s.action) for s in steps],
                          advice, pending, {(s.room_before, s.action): s.room_after for s in steps
                                            if s.action.startswith("go ")})
            action = agent.act(ctx, rng)
        decisions += 1
        ctx_words += history_words + advice_words
        do(action)
        history_words += words(action) + words(obs)
    out.won, out.steps, out.decisions, out.context_words = env.won(), len(steps), decisions, ctx_words
    out.episode = Episode(episode_id or task.id, task.world, task.text, advice.pattern.key, dict(slots), steps,
                          out.won, first_observation=first)
    return out
