"""Distillers: a finished episode → typed text experience (a plan, environment facts, pitfalls).

- :class:`RuleDistiller` reads a structured log (which steps changed the world, in which room),
  so it needs no model: the plan is the world-changing actions with the walking re-planned as the
  shortest known route, abstracted over the task's slots; facts say where things were and which
  way rooms lie; pitfalls come from failed episodes.
- :class:`ChatDistiller` asks any :class:`~divelab.chat.ChatModel` (an OpenAI-compatible
  endpoint, a local model, a scripted one in tests) for the same three lists as JSON, checks the
  reply against the schema and counts the replies it had to drop.
"""

from __future__ import annotations

import json
import re
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Protocol

from divelab.chat import ChatModel, system, user
from divelab.selfimprove.metis.memory import words
from divelab.selfimprove.metis.pattern import abstract

OBSERVE = ("look", "inventory", "examine")  # commands that never change the world


@dataclass
class Step:
    action: str
    observation: str
    room_before: str = ""
    room_after: str = ""
    changed: bool = True  # did the world state change
    via_tool: str = ""  # the tool that issued this command, if any


@dataclass
class Episode:
    """One finished task: what it asked, what was done, how it ended (the structured log)."""

    id: str
    env: str
    task: str
    pattern: str
    slots: dict[str, str]
    steps: list[Step]
    won: bool
    first_observation: str = ""
    data: dict[str, Any] = field(default_factory=dict)

    def transcript(self) -> str:
        """The trajectory as text (what an LLM distiller reads)."""
        lines = [f"TASK: {self.task}", f"OBS: {self.first_observation}"]
        for s in self.steps:
            lines += [f"> {s.action}", f"OBS: {s.observation}"]
        lines.append(f"OUTCOME: {'success' if self.won else 'failure'}")
        return "\n".join(lines)


@dataclass
class Distilled:
    plan: list[str] = field(default_factory=list)  # abstract steps ("take {e1} from wooden chest")
    facts: list[str] = field(default_factory=list)
    pitfalls: list[str] = field(default_factory=list)
    cost_words: int = 0  # what distilling cost (words read + written), for construction cost


class Distiller(Protocol):
    def __call__(self, episode: Episode) -> Distilled: ...


def _route(graph: dict[str, dict[str, str]], src: str, dst: str) -> list[str] | None:
    if src == dst:
        return []
    seen, queue = {src}, deque([(src, [])])
    while queue:
        room, path = queue.popleft()
        for cmd, nxt in graph.get(room, {}).items():
            if nxt == dst:
                return path + [cmd]
            if nxt not in seen:
                seen.add(nxt)
                queue.append((nxt, path + [cmd]))
    return None


_ARGS = re.compile(r"^(?:put|insert|unlock|take) (.+?) (?:on|into|with|from) (.+)$")


def _entities(action: str) -> tuple[str, set[str]]:
    """The object an action is about, and every entity it names."""
    m = _ARGS.match(action)
    if m:
        return m.group(1), {m.group(1), m.group(2)}
    rest = action.partition(" ")[2]
    return rest, {rest}


def relevant(steps: list[Step]) -> list[bool]:
    """Backward slice from the last step: a world-changing action is kept if the object it is about
    is named by a kept later action (so "open chest" is kept for "take mug from chest", "take key"
    for "unlock box with key"); moves are re-planned separately."""
    keep = [False] * len(steps)
    needed: set[str] = set()
    for i in range(len(steps) - 1, -1, -1):
        s = steps[i]
        if s.action.startswith("go ") or not s.changed or s.action.split(" ")[0] in OBSERVE:
            continue
        obj, names = _entities(s.action)
        if i == len(steps) - 1 or obj in needed:
            keep[i] = True
            needed |= names
    return keep


def minimal_plan(steps: list[Step], start_room: str) -> list[str]:
    """The relevant world-changing actions (:func:`relevant`), in order, joined by the shortest
    observed routes between the rooms they were done in."""
    graph: dict[str, dict[str, str]] = {}
    for s in steps:
        if s.action.startswith("go ") and s.room_before and s.room_after and s.room_before != s.room_after:
            graph.setdefault(s.room_before, {})[s.action] = s.room_after
    plan, cur = [], start_room
    keep = relevant(steps)
    for s, k in zip(steps, keep, strict=True):
        if not k:
            continue
        route = _route(graph, cur, s.room_before)
        if route is None:  # unknown route (should not happen on a real log): keep the raw moves
            return [x.action for x in steps if x.changed]
        plan += route + [s.action]
        cur = s.room_before
    if steps and steps[-1].action.startswith("go "):  # a task won by arriving somewhere
        plan += _route(graph, cur, steps[-1].room_after) or []
    return plan


class RuleDistiller:
    """Distils a structured log without a model (see the module docstring)."""

    def __call__(self, episode: Episode) -> Distilled:
        out = Distilled(cost_words=words(episode.transcript()))
        start = episode.steps[0].room_before if episode.steps else ""
        if episode.won:
            out.plan = [abstract(c, episode.slots) for c in minimal_plan(episode.steps, start)]
        for s in episode.steps:
            if s.action.startswith("go ") and s.room_before != s.room_after and s.room_after:
                out.facts.append(f"in {episode.env}, {s.action} from the {s.room_before} leads to the {s.room_after}")
            m = re.match(r"take (.+?) from (.+)$", s.action)
            if m and s.changed:
                out.facts.append(f"in {episode.env}, the {m.group(1)} was on or in the {m.group(2)}, "
                                 f"in the {s.room_before}")
            m = re.match(r"unlock (.+?) with (.+)$", s.action)
            if m and s.changed:
                out.facts.append(f"in {episode.env}, the {m.group(1)} is unlocked with the {m.group(2)}")
        if not episode.won and episode.steps:
            moves = [s.action for s in episode.steps if s.action.startswith("go ")]
            if moves and len(moves) >= len(episode.steps) / 2:
                out.pitfalls.append(f"{episode.pattern}: ran out of steps walking ({len(moves)} of "
                                    f"{len(episode.steps)} steps were moves); find the route first")
            else:
                out.pitfalls.append(f"{episode.pattern}: not done in {len(episode.steps)} steps")
        out.facts = list(dict.fromkeys(out.facts))
        out.cost_words += sum(words(x) for x in out.plan + out.facts + out.pitfalls)
        return out


SCHEMA = {
    "type": "object",
    "properties": {
        "plan": {"type": "array", "items": {"type": "string"}},
        "facts": {"type": "array", "items": {"type": "string"}},
        "pitfalls": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["plan", "facts", "pitfalls"],
}

DISTILL_PROMPT = (
    "You turn an agent's episode in a text game into reusable experience. Reply with JSON only, matching "
    "this schema: " + json.dumps(SCHEMA) + ". 'plan': the game commands that solve this kind of task, in order, "
    "writing {e1}, {e2}... for the task's entities ({slots}); empty if the episode failed. 'facts': short "
    "statements about the environment (where things are, which way rooms lie). 'pitfalls': mistakes to avoid."
)


def parse_json_reply(text: str) -> dict[str, Any] | None:
    """The first JSON object in a model reply (fenced or bare), or None."""
    m = re.search(r"```(?:json)?\s*(\{.*?\})\s*```", text, re.S) or re.search(r"(\{.*\})", text, re.S)
    if not m:
        return None
    try:
        obj = json.loads(m.group(1))
    except ValueError:
        return None
    return obj if isinstance(obj, dict) else None


def check_schema(obj: dict[str, Any] | None) -> Distilled | None:
    if obj is None:
        return None
    out = Distilled()
    for name in ("plan", "facts", "pitfalls"):
        v = obj.get(name)
        if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
            return None
        setattr(out, name, [" ".join(x.split()) for x in v if x.strip()])
    return out


class ChatDistiller:
    """Distils through a chat model with a JSON schema; a reply that breaks the schema gives nothing
    (counted in ``rejected``), so a weak model cannot write junk into memory."""

    def __init__(self, model: ChatModel, max_tokens: int = 200) -> None:
        self.model, self.max_tokens = model, max_tokens
        self.calls = 0
        self.rejected = 0

    def __call__(self, episode: Episode) -> Distilled:
        slots = ", ".join(f"{{{k}}} = {v}" for k, v in episode.slots.items()) or "none"
        prompt = [system(DISTILL_PROMPT.replace("{slots}", slots)), user(episode.transcript())]
        reply = self.model.complete(prompt, temperature=0.0, max_tokens=self.max_tokens).message.content
        self.calls += 1
        out = check_schema(parse_json_reply(reply))
        cost = sum(words(m.content) for m in prompt) + words(reply)
        if out is None:
            self.rejected += 1
            return Distilled(cost_words=cost)
        if not episode.won:
            out.plan = []  # plans only from successes, whatever the model says
        out.plan = [abstract(c, episode.slots) for c in out.plan]
        out.cost_words = cost
        return out
