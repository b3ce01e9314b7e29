"""A tiny deterministic text env (a corridor of rooms) for unit tests and fast examples.

Rooms 0..n-1 in a line; the goal room holds a key. ``take key`` in the goal room wins; states
repeat a lot (``look`` and ``wait`` keep you in place), like a small ALFWorld/TextWorld game.
It implements the whole :class:`divelab.envs.base.TextEnv` protocol; restoring a state is a
replay of the action prefix, as for TextWorld.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

from divelab.envs.base import ReplayRestore, StepResult, check_action


@dataclass
class CorridorEnv(ReplayRestore):
    n_rooms: int = 4
    goal: int = 3
    max_steps: int = 12
    game_id: str = "corridor"

    def __post_init__(self) -> None:
        if self.n_rooms < 2 or not 0 <= self.goal < self.n_rooms:
            raise ValueError(f"need n_rooms >= 2 and 0 <= goal < n_rooms, got {self.n_rooms}, {self.goal}")
        self._pos = 0
        self._t = 0
        self._done = False
        self._seed: int | None = None
        self._actions: list[str] = []

    def _obs(self, feedback: str = "") -> str:
        what = "a key" if self._pos == self.goal else "nothing"
        return f"{feedback}room {self._pos}. you see {what}."

    def reset(self, seed: int | None = None) -> str:
        self._seed, self._pos, self._t, self._done, self._actions = seed, 0, 0, False, []
        return self._obs()

    def admissible_actions(self) -> list[str]:
        if self._done:
            return []
        acts = ["look", "wait"]
        if self._pos > 0:
            acts.append("go west")
        if self._pos < self.n_rooms - 1:
            acts.append("go east")
        if self._pos == self.goal:
            acts.append("take key")
        return acts

    def step(self, action: str) -> StepResult:
        if self._done:
            raise RuntimeError("step() after the episode ended; call reset() first")
        check_action(action, self.admissible_actions())
        self._actions.append(action)
        self._t += 1
        won = False
        if action == "go west":
            self._pos -= 1
        elif action == "go east":
            self._pos += 1
        elif action == "take key":
            won = True
        self._done = won or self._t >= self.max_steps
        info: dict[str, Any] = {"won": won, "lost": False, "truncated": self._done and not won}
        return self._obs("you win. " if won else ""), float(won), self._done, info

    def state_key(self, observation: str) -> Hashable:
        return observation.removeprefix("you win. ")

    def _fresh(self) -> CorridorEnv:
        return CorridorEnv(self.n_rooms, self.goal, self.max_steps, self.game_id)
