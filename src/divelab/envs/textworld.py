"""TextWorld games (the engine under ALFWorld) behind the :class:`~divelab.envs.base.TextEnv` protocol.

Games are generated offline by TextWorld's own generator (``textworld.generator.make_game`` +
``compile_game``, what ``tw-make custom`` does) from a fixed seed and size (rooms, objects, quest
length), compiled to a Z-machine file and cached atomically under ``$DIVELAB_CACHE/textworld``.
Admissible commands and win/loss come from TextWorld's ``EnvInfos``. Reward is 1 on a win, else 0;
an episode also ends at the step cap (``info["truncated"]``).

The observation is ``"<feedback> | <room description> | <inventory>"`` (the feedback is left out
when it only repeats the room description; the first observation starts with the quest).
``state_key`` is the room description plus the inventory, so examining things or looking around
leaves the state unchanged and revisiting a room with the same items is the same state.

:class:`NonceControl` is the control: the same games, but every observation carries a per-episode
session id and a step counter, so states almost never repeat (a stand-in for AppWorld).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Hashable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from divelab.cache import atomic_dir, entry_path, stable_hash
from divelab.envs.base import (
    EnvFactory,
    EnvWrapper,
    ReplayCache,
    ReplayRestore,
    StepResult,
    TextEnv,
    check_action,
)

_SEP = " | "


@dataclass(frozen=True)
class TextWorldGameSpec:
    """One generated game: TextWorld's generator run with these settings."""

    seed: int
    nb_rooms: int = 3
    nb_objects: int = 4
    quest_length: int = 2

    def __post_init__(self) -> None:
        if self.nb_rooms < 1 or self.nb_objects < 0 or self.quest_length < 1:
            raise ValueError(f"need nb_rooms >= 1, nb_objects >= 0, quest_length >= 1; got {self}")

    @property
    def game_id(self) -> str:
        return f"tw-r{self.nb_rooms}-o{self.nb_objects}-q{self.quest_length}-s{self.seed}"

    @classmethod
    def from_id(cls, game_id: str) -> TextWorldGameSpec:
        m = re.fullmatch(r"tw-r(\d+)-o(\d+)-q(\d+)-s(\d+)", game_id)
        if not m:
            raise ValueError(f"not a TextWorld game id: {game_id!r}; expected e.g. 'tw-r3-o4-q2-s0'")
        r, o, q, s = map(int, m.groups())
        return cls(seed=s, nb_rooms=r, nb_objects=o, quest_length=q)


def generate_game(spec: TextWorldGameSpec) -> Path:
    """The compiled ``.z8`` file of a game, generating it once (cached, atomic)."""
    import textworld
    from textworld.generator import compile_game, make_game
    from textworld.generator.data import KnowledgeBase

    key = stable_hash({"spec": asdict(spec), "textworld": textworld.__version__})
    final = entry_path("textworld", f"{spec.game_id}-{key}")
    game_file = final / "game.z8"
    if game_file.exists():
        return game_file
    with atomic_dir(final) as tmp:
        opts = textworld.GameOptions()
        # TextWorld's default knowledge base, parsed once at import (GameOptions would parse the
        # same logic files again for every game, ~2 s each); same files, so the same games
        opts.kb = KnowledgeBase.default()
        opts.seeds = spec.seed
        opts.nb_rooms = spec.nb_rooms
        opts.nb_objects = spec.nb_objects
        opts.quest_length = spec.quest_length
        opts.path = str(tmp / "game.z8")
        opts.force_recompile = True
        game = make_game(opts)
        compile_game(game, opts)
        # keep only what playing needs (the .z8 and the .json metadata the engine reads)
        for extra in tmp.glob("game.ni"):
            extra.unlink()
    return game_file


def _clean(text: str | None) -> str:
    text = (text or "").split("\n>")[0]  # drop the prompt and the score/moves status line
    return re.sub(r"\s+", " ", text).strip()


def compact_view(observation: str) -> str:
    """A short text of an observation for small policies: the feedback, the room name and the
    inventory (TextWorld's flavour sentences and the control's session tag are dropped)."""
    obs = re.sub(r" \[session \w+ t=\d+\]$", "", observation)
    parts = obs.split(_SEP)
    if len(parts) != 3:
        return obs
    feedback, desc, inv = parts
    room = re.match(r"-= (.*?) =-", desc)
    return f"{feedback} [{room.group(1) if room else desc[:40]}] {inv}".strip()


class TextWorldEnv(ReplayRestore):
    """One TextWorld game. Deterministic: ``reset(seed)`` ignores the seed beyond recording it."""

    seed_invariant = True  # the game does not depend on the reset seed (ReplayCache shares one trie)

    def __init__(self, game_file: str | Path, game_id: str = "", max_steps: int = 20) -> None:
        import textworld

        if max_steps < 1:
            raise ValueError(f"max_steps must be >= 1, got {max_steps}")
        self.game_file = Path(game_file)
        if not self.game_file.exists():
            raise FileNotFoundError(f"no TextWorld game at {self.game_file}")
        self.game_id = game_id or self.game_file.stem
        self.max_steps = max_steps
        self._infos = textworld.EnvInfos(admissible_commands=True, won=True, lost=True, description=True,
                                         inventory=True, feedback=True, objective=True, facts=True)
        self._env: Any = None  # the game process starts on first reset (a cached graph may never need it)
        self._state: Any = None
        self._seed: int | None = None
        self._actions: list[str] = []
        self._done = False
        self.objective = ""

    def _observation(self, feedback: str) -> str:
        desc = _clean(self._state["description"])
        inv = _clean(self._state["inventory"])
        if feedback.startswith(desc[:20]) and desc:
            feedback = ""  # moving or looking: the feedback is the room description again
        return _SEP.join([feedback, desc, inv])

    def reset(self, seed: int | None = None) -> str:
        import textworld

        self._seed, self._actions, self._done = seed, [], False
        if self._env is None:
            self._env = textworld.start(str(self.game_file), request_infos=self._infos)
        self._state = self._env.reset()
        self.objective = _clean(self._state["objective"])
        return self._observation(self.objective)

    def admissible_actions(self) -> list[str]:
        if self._state is None:
            raise RuntimeError("call reset() first")
        if self._done:
            return []
        return sorted(a for a in self._state["admissible_commands"])

    def step(self, action: str) -> StepResult:
        if self._done:
            raise RuntimeError("step() after the episode ended; call reset() first")
        check_action(action, self.admissible_actions())
        self._state, _, game_over = self._env.step(action)
        self._actions.append(action)
        won, lost = bool(self._state["won"]), bool(self._state["lost"])
        truncated = not (won or lost) and len(self._actions) >= self.max_steps
        self._done = bool(game_over or won or lost or truncated)
        info = {"won": won, "lost": lost, "truncated": truncated}
        return self._observation(_clean(self._state["feedback"])), float(won), self._done, info

    def state_key(self, observation: str) -> Hashable:
        return observation.split(_SEP, 1)[-1]  # room description + inventory

    def canonical_state(self) -> Hashable:
        """The full world state (TextWorld's facts); lets :class:`ReplayCache` merge states.
        Safe for single-quest games, where winning ends the episode."""
        return frozenset(str(f) for f in self._state["facts"])

    def save_state(self) -> tuple[Any, ...]:
        """The game's full state (the Z-machine's memory and TextWorld's state tracking), for
        :meth:`load_state`; :class:`ReplayCache` uses it to explore a graph without replays."""
        if self._env is None:
            raise RuntimeError("call reset() first")
        layers, e = [], self._env
        while isinstance(e, _tw_wrapper()):
            layers.append((e, _copy_layer(vars(e), skip="_wrapped_env")))
            e = e._wrapped_env
        layers.append((e, _copy_layer(vars(e), skip="_jericho")))
        return (e._jericho.get_state(), layers, self._state, list(self._actions), self._done, self._seed)

    def load_state(self, snap: tuple[Any, ...]) -> None:
        """Put the game back into a state from :meth:`save_state` (of this env's game process)."""
        jericho_state, layers, self._state, actions, self._done, self._seed = snap
        self._actions = list(actions)
        for layer, attrs in layers:
            layer.__dict__.update(_copy_layer(attrs))
        layers[-1][0]._jericho.set_state(jericho_state)

    def _fresh(self) -> TextWorldEnv:
        return TextWorldEnv(self.game_file, self.game_id, self.max_steps)

    def close(self) -> None:
        if self._env is not None:
            self._env.close()
            self._env = None


def _tw_wrapper() -> type:
    import textworld.core

    return textworld.core.Wrapper


def _copy_progression(gp: Any) -> Any:
    """A copy of TextWorld's ``GameProgression`` that shares nothing mutable with ``gp`` (its own
    ``copy()`` recomputes the initial state's actions and drops quest tracking)."""
    import copy

    twin = copy.copy(gp)
    twin.state = gp.state.copy()
    twin._valid_actions = list(gp._valid_actions)
    twin.quest_progressions = [q.copy() for q in gp.quest_progressions]
    return twin


def _copy_layer(attrs: dict[str, Any], skip: str = "") -> dict[str, Any]:
    """One TextWorld env layer's attributes, copied so that later steps cannot change them: the
    game progression (updated in place) is copied, game states and lists shallow-copied."""
    out: dict[str, Any] = {}
    for k, v in attrs.items():
        if k == skip:
            continue
        if k == "_game_progression" and v is not None:
            v = _copy_progression(v)
        elif isinstance(v, (dict, list)):
            v = type(v)(v)
        out[k] = v
    return out


class StepCap(EnvWrapper):
    """Ends an episode after ``max_steps`` steps (``info["truncated"] = True``)."""

    def __init__(self, env: TextEnv, max_steps: int) -> None:
        if max_steps < 1:
            raise ValueError(f"max_steps must be >= 1, got {max_steps}")
        super().__init__(env)
        self.max_steps = max_steps

    def step(self, action: str) -> StepResult:
        if len(self.env.actions_taken) >= self.max_steps:
            raise RuntimeError("step() after the episode ended; call reset() first")
        obs, r, done, info = self.env.step(action)
        if not done and len(self.env.actions_taken) >= self.max_steps:
            done, info = True, {**info, "truncated": True}
        return obs, r, done, info

    def admissible_actions(self) -> list[str]:
        return [] if len(self.env.actions_taken) >= self.max_steps else self.env.admissible_actions()

    def clone(self) -> StepCap:
        return StepCap(self.env.clone(), self.max_steps)


class NonceControl(EnvWrapper):
    """Control variant: every observation gets ``[session <id> t=<step>]`` (a per-episode id and a
    step counter), and the state key is the whole observation, so states almost never repeat.
    The id is drawn from ``(salt, seed, episode number)``, where episodes are numbered by
    ``episodes`` (share one counter between all envs of a factory so no two episodes collide);
    ``restore``/``clone`` stay in the current episode."""

    def __init__(self, env: TextEnv, salt: int = 0, episodes: Iterator[int] | None = None) -> None:
        super().__init__(env)
        self.salt = salt
        self._episodes = itertools.count() if episodes is None else episodes
        self._episode = -1
        self._session = ""

    def _tag(self, obs: str, t: int) -> str:
        return f"{obs} [session {self._session} t={t}]"

    def reset(self, seed: int | None = None) -> str:
        self._episode = next(self._episodes)
        self._session = stable_hash([self.salt, seed, self._episode], length=8)
        return self._tag(self.env.reset(seed), 0)

    def step(self, action: str) -> StepResult:
        obs, r, done, info = self.env.step(action)
        return self._tag(obs, len(self.env.actions_taken)), r, done, info

    def state_key(self, observation: str) -> Hashable:
        return observation

    def restore(self, actions: Sequence[str]) -> str:
        return self._tag(self.env.restore(actions), len(actions))

    def clone(self) -> NonceControl:
        twin = NonceControl(self.env.clone(), self.salt, self._episodes)
        twin._episode, twin._session = self._episode, self._session
        return twin


def game_graph(spec: TextWorldGameSpec, max_states: int = 400) -> dict[str, Any]:
    """The game's whole reachable transition graph (every state x admissible command, states
    merged by world facts), explored once by breadth-first play through :class:`ReplayCache` and
    cached as JSON; ``complete`` says whether it fits in ``max_states`` states."""
    import json

    import textworld

    path = generate_game(spec)
    key = stable_hash({"spec": asdict(spec), "textworld": textworld.__version__, "max_states": max_states,
                       "format": 1})
    final = entry_path("textworld-graph", f"{spec.game_id}-{key}")
    if (final / "graph.json").exists():
        return json.loads((final / "graph.json").read_text())
    env = TextWorldEnv(path, spec.game_id, max_steps=1_000_000)
    cache = ReplayCache(env)
    complete = cache.explore(None, max_states=max_states)
    data = {**cache.export_graph(), "complete": complete, "real_steps": cache.real_steps}
    env.close()
    with atomic_dir(final) as tmp:
        (tmp / "graph.json").write_text(json.dumps(data))
    return data


def uniform_success(graph: dict[str, Any], max_steps: int) -> float:
    """Exact probability that a uniform random player wins within ``max_steps`` steps, from a
    :func:`game_graph` (transitions outside an incomplete graph count as losses)."""
    nodes = graph["nodes"]
    memo: dict[tuple[int, int], float] = {}

    def p(i: int, t: int) -> float:
        n = nodes[i]
        if t == 0 or n["done"] or not n["admissible"]:
            return 0.0
        if (i, t) not in memo:
            total = sum(1.0 if r > 0 else 0.0 if done else p(j, t - 1)
                        for _obs, r, done, _info, j in n["children"].values())
            memo[(i, t)] = total / len(n["admissible"])
        return memo[(i, t)]

    return p(graph["roots"]["null"], max_steps)


def optimal_length(graph: dict[str, Any]) -> int | None:
    """Fewest steps to a win in a :func:`game_graph` (None if no win is in it)."""
    nodes = graph["nodes"]
    frontier = [graph["roots"]["null"]]
    seen = set(frontier)
    depth = 0
    while frontier:
        depth += 1
        nxt = []
        for i in frontier:
            for _obs, r, done, _info, j in nodes[i]["children"].values():
                if r > 0:
                    return depth
                if not done and j not in seen:
                    seen.add(j)
                    nxt.append(j)
        frontier = nxt
    return None


def textworld_env_factory(specs: Sequence[TextWorldGameSpec], max_steps: int = 20,
                          control: bool = False, salt: int = 0, precompute: bool = False,
                          max_states: int = 400) -> EnvFactory:
    """``make_env(game_id)`` for the given games (generated now if not cached).

    Each game is one TextWorld env wrapped in a :class:`ReplayCache` (states merged by
    TextWorld's world facts); repeated calls for a game id return clones of it, so all rollouts of
    a game share its transition graph. With ``precompute`` the cache starts from the game's whole
    reachable graph (:func:`game_graph`, explored once and stored on disk; worth it for small games
    played many times, as in training), so play is dict look-ups and the game process only starts
    for a transition outside it. The step cap is
    a :class:`StepCap` outside the cache. ``control=True`` wraps each env in :class:`NonceControl`.
    """
    files = {s.game_id: generate_game(s) for s in specs}
    by_id = {s.game_id: s for s in specs}
    roots: dict[str, ReplayCache] = {}
    episodes = itertools.count()

    def make_env(game_id: str) -> TextEnv:
        if game_id not in files:
            raise ValueError(f"unknown game id {game_id!r}; this factory has: {', '.join(files)}")
        if game_id not in roots:
            # no cap inside the cache: a cached transition must not depend on the step count
            roots[game_id] = ReplayCache(TextWorldEnv(files[game_id], game_id, max_steps=1_000_000))
            if precompute:
                roots[game_id].load_graph(game_graph(by_id[game_id], max_states))
        env: TextEnv = StepCap(roots[game_id].clone(), max_steps)
        return NonceControl(env, salt, episodes) if control else env

    return make_env
