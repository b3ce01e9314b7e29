"""A small key-and-door text game for the language-model check, with an exact oracle.

A corridor of rooms ``0..n_rooms-1``; the door is in the last room, the key somewhere before it.
The agent must walk to the key (``take key``), then to the door (``open door``), within a step
budget a little above the shortest solution. Opening the door without the key jams it (an
irreversible mistake); an unknown command wastes a step. With ``slip > 0`` a move goes the other
way with that probability (the stochastic variant: the same action can lead to different states).

Because the state is tiny, :func:`optimal_success` computes by dynamic programming the best
achievable success probability from any state, so every step of a trajectory can be labelled
exactly: its optimal advantage in success probability, and the *first wrong step* of a failed
episode (the first action whose success probability is below the best available one).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

import numpy as np

ACTIONS = ("go east ;", "go west ;", "take key ;", "open door ;")  # three tokens each
END = ";"  # closes every action


@dataclass(frozen=True)
class GameSpec:
    n_rooms: int = 5
    slip: float = 0.0
    slack: int = 1  # extra steps over the shortest solution

    def __post_init__(self) -> None:
        if self.n_rooms < 2 or self.n_rooms > 9:
            raise ValueError(f"n_rooms must be in 2..9 (one digit per room), got {self.n_rooms}")
        if not 0 <= self.slip < 1:
            raise ValueError(f"slip must be in [0, 1), got {self.slip}")
        if self.slack < 0:
            raise ValueError(f"slack must be >= 0, got {self.slack}")


@dataclass(frozen=True)
class State:
    room: int
    key_room: int
    has_key: bool
    steps_left: int


@dataclass
class KeyDoorGame:
    spec: GameSpec
    start: int
    key_room: int
    rng: np.random.Generator = field(default_factory=lambda: np.random.default_rng(0))
    state: State = field(init=False)
    done: bool = field(init=False, default=False)
    won: bool = field(init=False, default=False)

    def __post_init__(self) -> None:
        last = self.spec.n_rooms - 1
        if not (0 <= self.start <= last and 0 <= self.key_room < last):
            raise ValueError(f"start must be in 0..{last} and key_room in 0..{last - 1}")
        self.state = State(self.start, self.key_room, False, shortest(self.spec, self.start, self.key_room)
                           + self.spec.slack)

    def first_observation(self) -> str:
        return describe(self.spec, self.state, "start")

    def step(self, action: str) -> str:
        """Apply an action string; returns the next observation (empty once done)."""
        if self.done:
            raise RuntimeError("step() after the game ended")
        s = self.state
        last = self.spec.n_rooms - 1
        room, has_key, feedback = s.room, s.has_key, "ok"
        a = " ".join(action.split())  # exactly one of ACTIONS, or a wasted step
        if a in ("go east ;", "go west ;"):
            d = 1 if a == "go east ;" else -1
            if self.spec.slip > 0 and self.rng.random() < self.spec.slip:
                d = -d
            room = min(last, max(0, room + d))
        elif a == "take key ;" and room == s.key_room and not has_key:
            has_key = True
        elif a == "open door ;" and room == last:
            self.done, self.won = True, has_key
            self.state = State(room, s.key_room, has_key, s.steps_left - 1)
            return ""
        else:
            feedback = "noop"
        self.state = State(room, s.key_room, has_key, s.steps_left - 1)
        if self.state.steps_left <= 0:
            self.done = True
            return ""
        return describe(self.spec, self.state, feedback)


def describe(spec: GameSpec, s: State, feedback: str = "ok") -> str:
    """A fixed-length observation (10 words), e.g. ``ok room 2 key east door east 5 left >``.

    Fixed length keeps a batch of episodes in lockstep, so sampling can use one KV cache."""
    last = spec.n_rooms - 1
    if s.has_key:
        key = "held"
    else:
        key = "here" if s.room == s.key_room else ("east" if s.key_room > s.room else "west")
    door = "here" if s.room == last else "east"
    return f"{feedback} room {s.room} key {key} door {door} {s.steps_left} left >"


def shortest(spec: GameSpec, start: int, key_room: int) -> int:
    return abs(start - key_room) + 1 + (spec.n_rooms - 1 - key_room) + 1


def vocabulary(spec: GameSpec) -> list[str]:
    """Every word the game and its actions use (for a word-level tokenizer)."""
    words = {"start", "ok", "noop", "room", "key", "here", "east", "west", "held", "door", "left", ">", END}
    for a in ACTIONS:
        words |= set(a.split())
    max_steps = max(shortest(spec, s, k) for s in range(spec.n_rooms) for k in range(spec.n_rooms - 1)) + spec.slack
    words |= {str(i) for i in range(max(spec.n_rooms, max_steps + 1))}
    return sorted(words)


def expert_action(spec: GameSpec, s: State) -> str:
    """The shortest-path action."""
    if not s.has_key:
        if s.room == s.key_room:
            return "take key ;"
        return "go east ;" if s.key_room > s.room else "go west ;"
    return "open door ;" if s.room == spec.n_rooms - 1 else "go east ;"


def _transitions(spec: GameSpec, s: State, action: str) -> list[tuple[float, State | None, bool]]:
    """(probability, next state or None if the game ended, won) for an action in a state."""
    last = spec.n_rooms - 1
    left = s.steps_left - 1
    if action in ("go east ;", "go west ;"):
        d = 1 if action == "go east ;" else -1
        outs = [(1 - spec.slip, d)] + ([(spec.slip, -d)] if spec.slip > 0 else [])
        return [(p, State(min(last, max(0, s.room + dd)), s.key_room, s.has_key, left) if left > 0 else None,
                 False) for p, dd in outs]
    if action == "open door ;" and s.room == last:
        return [(1.0, None, s.has_key)]
    has_key = s.has_key or (action == "take key ;" and s.room == s.key_room)
    return [(1.0, State(s.room, s.key_room, has_key, left) if left > 0 else None, False)]


@functools.lru_cache(maxsize=100_000)
def _v(spec: GameSpec, s: State) -> float:
    return max(q_success(spec, s, a) for a in ACTIONS)


def q_success(spec: GameSpec, s: State, action: str) -> float:
    """Best achievable success probability after taking ``action`` in ``s`` (any other command,
    or one that does nothing here, wastes a step)."""
    total = 0.0
    for p, nxt, won in _transitions(spec, s, action):
        total += p * (float(won) if nxt is None else _v(spec, nxt))
    return total


def optimal_success(spec: GameSpec, s: State) -> float:
    """``V(s)``: the best achievable probability of opening the door with the key from ``s``."""
    return _v(spec, s)
