"""The decoupled use: a world model behind the :class:`~divelab.envs.base.TextEnv` protocol, and steering.

:class:`SimulatedEnv` starts from a real first observation (the goal, as the paper's simulator is
given the goal) and from then on every observation, reward and admissible-command list is the
world model's prediction, so any divelab RL trainer runs inside it unchanged. With an
:class:`~divelab.training.world_model.outcome.OutcomeModel`, whether a step wins or ends the episode
is that model's decision on (goal, state, action) instead of the language model's ``[R]`` token. It is deterministic
(greedy decoding, memoised), so state is restored by replay like the real envs; ``explore()``
expands the simulated graph breadth-first in batches, which makes GRPO inside it cheap.

:class:`Steered` wraps any env (real or simulated) with the paper's controllable-simulation
knobs: ``partial`` (stingy: part of the observation is withheld), ``error`` (the command fails
with an injected error and nothing happens) and ``paginate`` (the observation arrives in two
pages; the ``next page`` command reveals the rest, costing a step). Which steps are steered is a
deterministic function of (salt, reset seed, action prefix), so replay restores state exactly.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

from divelab.cache import stable_hash
from divelab.envs.base import EnvFactory, EnvWrapper, ReplayRestore, StepResult, TextEnv, check_action
from divelab.training.world_model.transitions import State

MALFORMED_FEEDBACK = "nothing happens ."


def simulate(world_model: Any, outcome: Any, goal: str, queries: Sequence[tuple[State, str]]
             ) -> list[tuple[State, bool, bool, bool]]:
    """(next state, won, ended, well formed) per (state, action): the next state is the world model's
    (the state kept, with an error feedback, when its output does not parse); won/ended come from
    ``outcome`` (an :class:`~divelab.training.world_model.outcome.OutcomeModel`) when given, else from
    the world model's reward token. A state with no admissible command also ends the episode."""
    preds = world_model.predict(queries)
    decided = outcome.decide(goal, queries) if outcome is not None else None
    out = []
    for i, ((state, _), pred) in enumerate(zip(queries, preds, strict=True)):
        if pred.well_formed:
            nxt, won = pred.state, pred.reward > 0
        else:
            nxt, won = State(MALFORMED_FEEDBACK, state.room, state.inventory, state.actions), False
        ended = won
        if decided is not None:
            won, ended = decided[i]
        out.append((nxt, won, ended or not nxt.actions, pred.well_formed))
    return out


class SimulatedEnv(ReplayRestore):
    """A world model playing the environment. ``start`` is the real first observation and its
    admissible commands; ``max_steps`` caps an episode (``info["truncated"]``); ``outcome`` (an
    :class:`~divelab.training.world_model.outcome.OutcomeModel`) decides wins and episode ends."""

    def __init__(self, world_model: Any, start_observation: str, start_actions: Sequence[str],
                 game_id: str = "simulated", max_steps: int = 10, outcome: Any = None) -> None:
        if max_steps < 1:
            raise ValueError(f"max_steps must be >= 1, got {max_steps}")
        if not start_actions:
            raise ValueError("the start state has no admissible actions; give the real env's first state")
        self.world_model = world_model
        self.start = State.from_observation(start_observation, start_actions)
        self.game_id = game_id
        self.max_steps = max_steps
        self.outcome = outcome
        self._seed: int | None = None
        self._state: State | None = None
        self._actions: list[str] = []
        self._done = False
        self.malformed = 0  # steps where the model's output did not parse (state kept, error feedback)

    def reset(self, seed: int | None = None) -> str:
        self._seed, self._state, self._actions, self._done = seed, self.start, [], False
        return self.start.observation()

    def admissible_actions(self) -> list[str]:
        if self._state is None:
            raise RuntimeError("call reset() first")
        return [] if self._done else list(self._state.actions)

    def step(self, action: str) -> StepResult:
        if self._state is None:
            raise RuntimeError("call reset() first")
        if self._done:
            raise RuntimeError("step() after the episode ended; call reset() first")
        check_action(action, self._state.actions)
        nxt, won, ended, well_formed = simulate(self.world_model, self.outcome, self.start.feedback,
                                                [(self._state, action)])[0]
        self._actions.append(action)
        if not well_formed:
            self.malformed += 1
        truncated = not ended and len(self._actions) >= self.max_steps
        self._done = ended or truncated
        self._state = nxt
        info = {"won": won, "lost": ended and not won, "truncated": truncated, "malformed": not well_formed}
        return nxt.observation(), float(won), self._done, info

    def state_key(self, observation: str) -> Hashable:
        return observation.split(" | ", 1)[-1]

    def clone(self) -> SimulatedEnv:
        twin = SimulatedEnv.__new__(SimulatedEnv)
        twin.__dict__.update(self.__dict__)
        twin._actions = list(self._actions)
        return twin

    def explore(self, depth: int | None = None, max_states: int = 2000) -> int:
        """Predict every transition reachable within ``depth`` steps (default ``max_steps``), one
        batched model call per level; returns the number of simulated states reached."""
        depth = self.max_steps if depth is None else depth
        seen = {self.start}
        frontier = [self.start]
        for _ in range(depth):
            queries = [(s, a) for s in frontier for a in s.actions]
            if not queries:
                break
            nxt = []
            for state, _, ended, well_formed in simulate(self.world_model, self.outcome, self.start.feedback,
                                                         queries):
                if well_formed and not ended and state not in seen:
                    if len(seen) >= max_states:
                        return len(seen)
                    seen.add(state)
                    nxt.append(state)
            frontier = nxt
        return len(seen)


def simulated_env_factory(world_model: Any, make_real_env: EnvFactory, game_ids: Sequence[str],
                          max_steps: int = 10, steering: dict[str, Any] | None = None, explore: bool = True,
                          max_states: int = 2000, outcome: Any = None) -> EnvFactory:
    """``make_env(game_id)`` over simulated copies of the given real games (each starts from the
    real game's first observation). ``steering`` = keyword arguments of :class:`Steered`; ``outcome``
    decides wins and episode ends (see :class:`SimulatedEnv`)."""
    roots: dict[str, SimulatedEnv] = {}
    for gid in game_ids:
        real = make_real_env(gid)
        obs = real.reset(0)
        roots[gid] = SimulatedEnv(world_model, obs, real.admissible_actions(), gid, max_steps, outcome)
        if explore:
            roots[gid].explore(max_states=max_states)

    def make_env(game_id: str) -> TextEnv:
        if game_id not in roots:
            raise ValueError(f"unknown game id {game_id!r}; this simulator has: {', '.join(roots)}")
        env: TextEnv = roots[game_id].clone()
        return Steered(env, **steering) if steering else env

    return make_env


def prefetch(pairs: Sequence[tuple[TextEnv, str]]) -> None:
    """Predict in one batch the next states of every simulated step about to be taken: the hook of a lockstep
    sampler (:class:`~divelab.rl.rollout.IndependentSampler`'s ``prefetch``). The world model memoises, so
    the steps that follow read the batch back; envs that are not simulated (wrappers are looked through)
    are skipped, and an extra prediction (a step a wrapper turns into an error) costs only time."""
    by_model: dict[int, tuple[Any, list[tuple[State, str]]]] = {}
    for env, action in pairs:
        while not isinstance(env, SimulatedEnv) and isinstance(env, EnvWrapper):
            env = env.env
        if isinstance(env, SimulatedEnv) and env._state is not None and not env._done \
                and action in env._state.actions:
            by_model.setdefault(id(env.world_model), (env.world_model, []))[1].append((env._state, action))
    for world_model, queries in by_model.values():
        world_model.predict(queries)


STEER_MODES = ("partial", "error", "paginate")
NEXT_PAGE = "next page"
ERROR_FEEDBACK = "error : the command failed , nothing happened . try again ."


class Steered(ReplayRestore, EnvWrapper):
    """Controllable simulation on top of any env (see the module docstring); ``rate`` is the
    probability that a step is steered."""

    def __init__(self, env: TextEnv, mode: str = "partial", rate: float = 0.5, salt: int = 0) -> None:
        if mode not in STEER_MODES:
            raise ValueError(f"unknown steering mode {mode!r}; allowed: {', '.join(STEER_MODES)}")
        if not 0.0 <= rate <= 1.0:
            raise ValueError(f"rate must be in [0, 1], got {rate}")
        super().__init__(env)
        self.mode, self.rate, self.salt = mode, rate, salt
        self._seed: int | None = None
        self._actions: list[str] = []
        self._last = ""
        self._pending: str | None = None  # the hidden second page
        self._done = False

    def _steer(self) -> bool:
        h = int(stable_hash([self.salt, self._seed, self._actions], length=8), 16) / 16**8
        return h < self.rate

    def reset(self, seed: int | None = None) -> str:
        self._seed, self._actions, self._pending, self._done = seed, [], None, False
        self._last = self.env.reset(seed)
        return self._last

    def admissible_actions(self) -> list[str]:
        if self._done:
            return []
        if self._pending is not None:
            return [NEXT_PAGE]
        return self.env.admissible_actions()

    def step(self, action: str) -> StepResult:
        if self._done:
            raise RuntimeError("step() after the episode ended; call reset() first")
        check_action(action, self.admissible_actions())
        self._actions.append(action)
        if self._pending is not None:
            obs, self._pending = self._pending, None
            self._last = obs
            return obs, 0.0, False, {"won": False, "steered": "page 2"}
        steer = self._steer()
        if self.mode == "error" and steer:
            parts = self._last.split(" | ")
            obs = " | ".join([ERROR_FEEDBACK, *parts[1:]]) if len(parts) == 3 else ERROR_FEEDBACK
            return obs, 0.0, False, {"won": False, "steered": "error"}
        obs, r, done, info = self.env.step(action)
        self._last = obs
        self._done = done
        parts = obs.split(" | ")
        if self.mode == "partial" and steer and len(parts) == 3 and not done:
            words = parts[0].split()
            obs = " | ".join([" ".join(words[:len(words) // 2] + ["..."]) if words else "...", parts[1], "..."])
            info = {**info, "steered": "partial"}
        elif self.mode == "paginate" and steer and not done:
            cut = obs.rfind(" | ")
            if cut > 0:
                self._pending = obs
                obs = obs[:cut] + " | [more: next page]"
                info = {**info, "steered": "page 1"}
        return obs, r, done, info

    def state_key(self, observation: str) -> Hashable:
        return observation

    def _fresh(self) -> Steered:
        return Steered(self.env.clone(), self.mode, self.rate, self.salt)
