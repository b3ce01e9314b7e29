"""A simulator game's whole state graph, with states merged by what the player sees, and the check that the
merge is exact.

The exact oracle (:class:`~divelab.training.progress_advantage.twcheck.Oracle`) needs a game's graph of states.
TextWorld games give one directly (their world facts are the state); a public simulator such as TextWorldExpress
shows only text. :class:`SeenState` lets :class:`~divelab.envs.base.ReplayCache` merge states by the env's own
``state_key`` of the last observation (for TextWorldExpress: the room description plus the inventory), and
:func:`check_merges` tests that this loses nothing: every merged state is re-entered by every other path into it
and must offer the same commands, with the same outcomes, as on the path that first reached it. A game whose look
hides part of its state (a lever that changes nothing in view) fails it, and its graph is then no oracle.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

from divelab.envs.base import EnvWrapper, ReplayCache, StepResult, TextEnv

MAX_MISMATCHES = 5  # kept in the record (the count is always kept)


class SeenState(EnvWrapper):
    """Exposes ``canonical_state()``: the wrapped env's ``state_key`` of the last observation (a one-element
    frozenset of strings, the form :meth:`ReplayCache.export_graph` writes). Whether that identifies the state
    is what :func:`check_merges` checks."""

    def __init__(self, env: TextEnv) -> None:
        super().__init__(env)
        self._last: str | None = None

    def reset(self, seed: int | None = None) -> str:
        self._last = self.env.reset(seed)
        return self._last

    def step(self, action: str) -> StepResult:
        obs, reward, done, info = self.env.step(action)
        self._last = obs
        return obs, reward, done, info

    def restore(self, actions: Any) -> str:
        self._last = self.env.restore(actions)
        return self._last

    def canonical_state(self) -> Hashable:
        if self._last is None:
            raise RuntimeError("call reset() before canonical_state()")
        return frozenset({str(self.env.state_key(self._last))})

    def clone(self) -> SeenState:
        twin = SeenState(self.env.clone())
        twin._last = self._last
        return twin


def explore(env: TextEnv, max_states: int) -> tuple[ReplayCache, dict[str, Any]]:
    """Breadth-first exploration of ``env`` (a seed-invariant game: one episode) with states merged by
    :class:`SeenState`; returns the cache, which then plays the game from its graph, and the graph
    (:meth:`ReplayCache.export_graph` plus ``complete``: it fit in ``max_states`` states, and ``real_steps``)."""
    if max_states < 1:
        raise ValueError(f"max_states must be >= 1, got {max_states}")
    cache = ReplayCache(SeenState(env))
    complete = cache.explore(None, max_states=max_states)
    return cache, {**cache.export_graph(), "complete": complete, "real_steps": cache.real_steps}


def check_merges(graph: dict[str, Any], make_env: Callable[[], TextEnv], depth: int = 1) -> dict[str, Any]:
    """Re-expand every merged state of ``graph`` (from :func:`explore`) from each other path into it, on a fresh
    env of the same game (``make_env()``, not cached): reached by that path, the state must have the same
    admissible commands, and each command the same observation, reward, end and win, and a next state with the
    same merge key, as on the path that first reached it; with ``depth`` > 1 the same holds along every command
    sequence of up to ``depth`` commands from there (a hidden difference that shows only a few steps later).

    ``consistent`` is True when nothing differed and no transition was left unexplored (only an incomplete graph
    leaves one; they are counted in ``unexplored``); ``mismatches`` keeps the first few differences,
    ``n_mismatches`` counts all of them, ``env_steps`` the simulator steps the check took (replays included)."""
    if depth < 1:
        raise ValueError(f"depth must be >= 1, got {depth}")
    nodes = graph["nodes"]
    env = make_env()
    env.reset(None)
    # every other path into a state: the parent's first path + the command (an ended episode is never merged)
    second = [(j, nodes[i]["prefix"] + [a]) for i, n in enumerate(nodes) for a, (_o, _r, done, _info, j)
              in n["children"].items() if not done and nodes[i]["prefix"] + [a] != nodes[j]["prefix"]]
    found: dict[str, Any] = {"n_mismatches": 0, "unexplored": 0, "env_steps": 0, "mismatches": []}

    def differ(path: list[str], what: str, first: Any, again: Any) -> None:
        found["n_mismatches"] += 1
        if len(found["mismatches"]) < MAX_MISMATCHES:
            found["mismatches"].append({"path": path, "what": what, "first": first, "again": again})

    def goto(path: list[str]) -> None:
        env.restore(path)
        found["env_steps"] += len(path)

    def expand(path: list[str], j: int, left: int) -> None:
        """The env is at ``path``, which the graph says is node ``j``."""
        node = nodes[j]
        adm = list(env.admissible_actions())
        if adm != node["admissible"]:
            differ(path, "admissible commands", node["admissible"], adm)
            return
        for b in adm:
            edge = node["children"].get(b)
            if edge is None:
                found["unexplored"] += 1
                continue
            goto(path)
            obs, reward, done, info = env.step(b)
            found["env_steps"] += 1
            first_obs, first_r, first_done, first_info, k = edge
            if (obs, float(reward), bool(done), bool(info.get("won", reward > 0))) != (
                    first_obs, float(first_r), bool(first_done), bool(first_info.get("won", first_r > 0))):
                differ(path + [b], "outcome", [first_obs, first_r, first_done], [obs, reward, done])
            elif not done and [str(env.state_key(obs))] != nodes[k]["canon"]:
                differ(path + [b], "next state", nodes[k]["canon"], [str(env.state_key(obs))])
            elif not done and left > 1:
                expand(path + [b], k, left - 1)

    for j, path in second:
        goto(path)
        expand(path, j, depth)
    return {"consistent": found["n_mismatches"] == 0 and found["unexplored"] == 0, "depth": depth,
            "merged_states": len({j for j, _ in second}), "paths_checked": len(second), **found}
