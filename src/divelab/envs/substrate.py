"""What the public simulators that install offline (ScienceWorld, TextWorldExpress) share behind the
:class:`~divelab.envs.base.TextEnv` protocol.

Both run a simulator in a Java process (a bundled jar, reached through py4j) that holds ONE game at a
time. Starting it costs a second or more, so every env of a factory, and every clone, shares one
:class:`Simulator`: an env remembers its own position (episode and action prefix) and, when the simulator
is elsewhere, resets it and replays the prefix before stepping. Both simulators are deterministic given
the episode and the actions, so a replay lands in the same state (the tests check it).

An episode is picked by ``reset(seed)``: the split's list of episodes (ScienceWorld's variations,
TextWorldExpress's game seeds) indexed by ``seed`` modulo its length, so any integer seed, as the RL
samplers draw them, names one episode of the split and never one of another split.

The observation is ``"<feedback> | <look> | <inventory>"`` as in :mod:`divelab.envs.textworld` (the first
observation's feedback is the task description; whitespace is collapsed), and ``state_key`` is the look
plus the inventory. ``reward="score"`` (default) gives the simulator's own score change per step on a 0-1
scale (its sum over an episode is the score gained after the first observation); ``reward="win"`` gives 1
on a win, else 0, as the TextWorld games do. ``info`` carries ``won``, ``lost``, ``truncated``, ``score``
and ``episode``.

``strict=True`` (default) refuses an action outside ``admissible_actions()`` with
:class:`~divelab.envs.base.InvalidAction`, as the TextWorld games do; ``strict=False`` sends any text to the
simulator, which answers what it cannot parse in the feedback (free-text agents; ScienceWorld's own
solutions use phrasings its admissible list does not hold).
"""

from __future__ import annotations

import importlib.util
import re
import shutil
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any, Self

from divelab.envs.base import (
    EnvFactory,
    EnvWrapper,
    ReplayCache,
    ReplayRestore,
    StepResult,
    TextEnv,
    check_action,
)

SPLITS = ("train", "dev", "test")
REWARDS = ("score", "win")
_SEP = " | "
JAVA_HINT = "apt-get install openjdk-17-jre-headless"


class SubstrateUnavailable(ImportError, ValueError):
    """A substrate's package (or the Java it runs on) is not installed; the message says how to install it."""


def require(module: str, install: str, what: str, java: bool = False) -> None:
    """Raise :class:`SubstrateUnavailable` unless ``module`` can be imported (and ``java`` is on PATH)."""
    if importlib.util.find_spec(module) is None:
        raise SubstrateUnavailable(f"{what} needs the Python package {module!r}, which is not installed; "
                                   f"install it with: {install}")
    if java and shutil.which("java") is None:
        raise SubstrateUnavailable(f"{what} runs a Java simulator, but no 'java' is on PATH; install Java 11 or "
                                   f"newer, e.g.: {JAVA_HINT}")


def check_split(split: str) -> str:
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; allowed: {', '.join(SPLITS)}")
    return split


def check_choice(kind: str, value: str, allowed: Sequence[str]) -> str:
    if value not in allowed:
        raise ValueError(f"unknown {kind} {value!r}; allowed: {', '.join(allowed)}")
    return value


def split_id(game_id: str, prefix: str, what: str, examples: str) -> tuple[str, str, str]:
    """``"<prefix>:<game>:<split>[:<settings>]"`` → (game, split, settings or "")."""
    parts = game_id.split(":", 3)
    if parts[0] != prefix or len(parts) < 3:
        raise ValueError(f"not a {what} game id: {game_id!r}; expected e.g. {examples}")
    return parts[1], parts[2], parts[3] if len(parts) == 4 else ""


def clean(text: str | None) -> str:
    return re.sub(r"\s+", " ", text or "").strip()


@dataclass
class Frame:
    """What the simulator shows after a reset or a step."""

    feedback: str
    look: str
    inventory: str
    score: float  # cumulative, on a 0-1 scale
    won: bool
    lost: bool
    raw: Any = None  # the simulator's own answer, for _valid
    admissible: list[str] | None = None  # asked for only when needed (ScienceWorld's list costs ~0.1 s)


@dataclass
class Simulator:
    """One simulator process shared by envs, and the position it is at: ``(game key, episode, actions)``."""

    proc: Any = None
    at: tuple[Hashable, int, tuple[str, ...]] | None = None
    loaded: Hashable | None = None  # the (game key, episode) a subclass last loaded, if it skips reloads
    episodes: dict[tuple[Hashable, str], list[int]] = field(default_factory=dict)
    real_steps: int = 0  # simulator steps actually taken (replays included)

    def close(self) -> None:
        if self.proc is not None:
            self.proc.close()
            self.proc, self.at, self.loaded = None, None, None


class SimulatorEnv(ReplayRestore):
    """One game of a Java simulator (see the module docstring) given by ``spec`` (a frozen dataclass with
    ``split`` and ``game_id``); ``simulator`` shares a running jar with other envs. Subclasses fill in the
    hooks below."""

    seed_invariant = False  # the seed picks the episode

    def __init__(self, spec: Any, max_steps: int = 30, reward: str = "score", simulator: Simulator | None = None,
                 strict: bool = True) -> None:
        if max_steps < 1:
            raise ValueError(f"max_steps must be >= 1, got {max_steps}")
        self.spec = spec
        self.game_id: str = spec.game_id
        self.split = check_split(spec.split)
        self.reward_mode = check_choice("reward", reward, REWARDS)
        self.max_steps = max_steps
        self.strict = strict
        self.simulator = simulator if simulator is not None else Simulator()
        self._seed: int | None = None
        self._actions: list[str] = []
        self._episode: int | None = None
        self._frame: Frame | None = None
        self._done = False

    # -- hooks ---------------------------------------------------------------------------------
    def _key(self) -> Hashable:
        """What the simulator must have loaded for this env (the game and its settings)."""
        raise NotImplementedError

    def _start(self) -> Any:
        """Start the simulator process."""
        raise NotImplementedError

    def _split_episodes(self, proc: Any) -> list[int]:
        raise NotImplementedError

    def _begin(self, proc: Any, episode: int) -> Any:
        """Load this game's ``episode`` and reset it; returns what :meth:`_read` needs."""
        raise NotImplementedError

    def _act(self, proc: Any, action: str) -> Any:
        """One simulator step, as cheaply as possible (replays use it); returns what :meth:`_read` needs."""
        raise NotImplementedError

    def _read(self, proc: Any, raw: Any, first: bool) -> Frame:
        raise NotImplementedError

    def _valid(self, proc: Any, frame: Frame) -> list[str]:
        """The admissible actions at ``frame`` (the simulator is at its position), sorted and de-duplicated
        so that a replay offers a policy the same candidates in the same order."""
        raise NotImplementedError

    def _gold(self, proc: Any, episode: int) -> list[str]:
        """The simulator's own solution of ``episode`` (it may load the episode again)."""
        raise NotImplementedError

    # -- the protocol ----------------------------------------------------------------------------
    def _proc(self) -> Any:
        if self.simulator.proc is None:
            self.simulator.proc = self._start()
        return self.simulator.proc

    def episodes(self) -> list[int]:
        """The split's episodes (ScienceWorld variations, TextWorldExpress seeds), in the simulator's order."""
        key = (self._key(), self.split)
        if key not in self.simulator.episodes:
            self.simulator.episodes[key] = [int(e) for e in self._split_episodes(self._proc())]
            self.simulator.at = self.simulator.loaded = None
        return self.simulator.episodes[key]

    def episode_for(self, seed: int | None) -> int:
        eps = self.episodes()
        if not eps:
            raise ValueError(f"{self.game_id} has no episodes in the {self.split!r} split")
        return eps[(seed or 0) % len(eps)]

    def gold_actions(self, seed: int | None = None) -> list[str]:
        """The simulator's own winning action sequence for the episode ``reset(seed)`` plays (a reference
        solution: an upper bound for agents, and a check that wins and rewards are read right)."""
        actions = [str(a) for a in self._gold(self._proc(), self.episode_for(seed))]
        self.simulator.at = self.simulator.loaded = None  # generating it moved the simulator
        return actions

    def reset(self, seed: int | None = None) -> str:
        self._seed, self._actions, self._done = seed, [], False
        self._episode = self.episode_for(seed)
        proc = self._proc()
        self._frame = self._read(proc, self._begin(proc, self._episode), first=True)
        self.simulator.at = (self._key(), self._episode, ())
        return self._observation(self._frame)

    def _sync(self) -> Any:
        """Put the shared simulator at this env's position (reset + replay when another env moved it)."""
        proc = self._proc()
        here = (self._key(), self._episode, tuple(self._actions))
        if self.simulator.at != here:
            self._begin(proc, self._episode)  # type: ignore[arg-type]
            for a in self._actions:
                self._act(proc, a)
                self.simulator.real_steps += 1
            self.simulator.at = here
        return proc

    def step(self, action: str) -> StepResult:
        if self._frame is None:
            raise RuntimeError("call reset() before step()")
        if self._done:
            raise RuntimeError("step() after the episode ended; call reset() first")
        if self.strict:
            check_action(action, self._admissible())
        proc = self._sync()
        before = self._frame.score
        self._frame = self._read(proc, self._act(proc, action), first=False)
        self.simulator.real_steps += 1
        self._actions.append(action)
        self.simulator.at = (self._key(), self._episode, tuple(self._actions))
        f = self._frame
        truncated = not (f.won or f.lost) and len(self._actions) >= self.max_steps
        self._done = f.won or f.lost or truncated
        reward = float(f.won) if self.reward_mode == "win" else f.score - before
        info = {"won": f.won, "lost": f.lost, "truncated": truncated, "score": f.score, "episode": self._episode}
        return self._observation(f), reward, self._done, info

    def admissible_actions(self) -> list[str]:
        if self._frame is None:
            raise RuntimeError("call reset() first")
        return [] if self._done else list(self._admissible())

    def _admissible(self) -> list[str]:
        f = self._frame
        assert f is not None
        if f.admissible is None:  # clones share the frame, so they share this answer too
            f.admissible = self._valid(self._sync(), f)
        return f.admissible

    def _observation(self, f: Frame) -> str:
        feedback = "" if f.look and f.feedback.startswith(f.look[:20]) else f.feedback
        return _SEP.join([feedback, f.look, f.inventory])

    def state_key(self, observation: str) -> Hashable:
        return observation.split(_SEP, 1)[-1]  # look + inventory

    @property
    def score(self) -> float:
        """The simulator's score so far (0-1; ScienceWorld goes below 0 on a failed task)."""
        return 0.0 if self._frame is None else self._frame.score

    def _fresh(self) -> Self:
        return type(self)(self.spec, self.max_steps, self.reward_mode, self.simulator, self.strict)

    def clone(self) -> Self:
        # no replay now: the twin shares the simulator and catches up on its first step
        twin = self._fresh()
        twin._seed, twin._actions, twin._episode = self._seed, list(self._actions), self._episode
        twin._frame, twin._done = self._frame, self._done
        return twin

    def close(self) -> None:
        """Stop the simulator process (shared: every env on it stops working until a reset restarts it)."""
        self.simulator.close()


class PinnedEpisode(EnvWrapper):
    """One episode of a simulator's split, whatever seed ``reset`` is given: a fixed game, like a generated
    TextWorld game. Its id is ``"<game id>@<seed>"`` (the seed ``reset`` would map to the episode). Being
    seed-invariant, it lets a :class:`~divelab.envs.base.ReplayCache` keep one graph of transitions for the
    episode across every rollout and training iteration, so a simulator step is paid once per transition."""

    seed_invariant = True

    def __init__(self, env: TextEnv, episode_seed: int) -> None:
        super().__init__(env)
        self.episode_seed = int(episode_seed)
        self.game_id = f"{env.game_id}@{self.episode_seed}"  # type: ignore[attr-defined]

    def reset(self, seed: int | None = None) -> str:
        return self.env.reset(self.episode_seed)

    def clone(self) -> PinnedEpisode:
        return PinnedEpisode(self.env.clone(), self.episode_seed)


def pinned_ids(specs: Sequence[Any], seeds: Sequence[int]) -> list[str]:
    """The ids of :class:`PinnedEpisode` games: every spec's game at every seed, spec by spec."""
    return [f"{s.game_id}@{int(k)}" for s in specs for k in seeds]


def view(observation: str) -> str:
    """A short text of a simulator observation for small policies: the feedback, the room (from the look's
    "You are in the ...") and the inventory, like TextWorld's ``compact_view``; the rest of the look (what the
    room holds, where its exits lead) is left to the admissible actions, which name it."""
    parts = observation.split(_SEP)
    if len(parts) != 3:
        return observation
    feedback, look, inventory = parts
    room = re.search(r"You are in the ([^.]+)\.", look)
    return f"{feedback} [{room.group(1) if room else look[:40]}] {inventory}".strip()


def simulator_factory(env_type: type[SimulatorEnv], specs: Sequence[Any], max_steps: int = 30,
                      reward: str = "score", cache: bool = True, simulator: Simulator | None = None,
                      episodes: Sequence[int] = ()) -> EnvFactory:
    """``make_env(game_id)`` for these games, all on one simulator process (``simulator``, or a new one
    started on the first reset). With ``episodes`` (seeds) it also makes each spec's game pinned to each of
    those episodes (:class:`PinnedEpisode`, ids from :func:`pinned_ids`).

    With ``cache`` each game is wrapped in a :class:`~divelab.envs.base.ReplayCache`, and repeated calls
    return clones of it, so all rollouts of a game share its transitions; the step cap is a
    :class:`~divelab.envs.textworld.StepCap` outside the cache, as in the TextWorld factory."""
    from divelab.envs.textworld import StepCap

    sim = simulator if simulator is not None else Simulator()
    # no cap inside the cache: a cached transition must not depend on the step count
    by_id: dict[str, TextEnv] = {s.game_id: env_type(s, 10**9, reward, sim) for s in specs}
    for s in specs:
        for k in episodes or ():
            pinned = PinnedEpisode(env_type(s, 10**9, reward, sim), k)
            by_id[pinned.game_id] = pinned
    roots: dict[str, TextEnv] = {}

    def make_env(game_id: str) -> TextEnv:
        if game_id not in by_id:
            raise ValueError(f"unknown game id {game_id!r}; this factory has: {', '.join(by_id)}")
        if game_id not in roots:
            roots[game_id] = ReplayCache(by_id[game_id]) if cache else by_id[game_id]
        return StepCap(roots[game_id].clone(), max_steps)

    return make_env
