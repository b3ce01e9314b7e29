"""The text-environment protocol every divelab RL component talks to.

An environment is a deterministic function of (seed, action prefix): ``reset(seed)`` then the same
actions always give the same observations. That is true of TextWorld games (the engine under
ALFWorld) and of every toy env here, and it is what tree rollouts rely on: **state is restored by
replay** (``restore(actions)`` re-resets with the last seed and replays the prefix), and
``clone()`` returns an independent env already at the current state. :class:`ReplayCache` makes
replay cheap by remembering every (prefix → result) it has seen.

Observations are strings. ``state_key(observation)`` maps one to a hashable key that graph
methods (GiGPO anchors, G2PO nodes) merge on; two observations with the same key are treated as
the same state.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, Self, runtime_checkable

StepResult = tuple[str, float, bool, dict[str, Any]]


@runtime_checkable
class TextEnv(Protocol):
    """What an environment must provide.

    - ``reset(seed)`` → first observation (the seed picks the episode's randomness, if any).
    - ``step(action)`` → ``(observation, reward, done, info)``; ``info`` carries at least
      ``"won"`` (bool) once ``done``.
    - ``admissible_actions()`` → the commands allowed now (non-empty unless done).
    - ``state_key(observation)`` → hashable key for graph merging.
    - ``restore(actions)`` → re-reset with the last seed and replay ``actions``; returns the
      observation reached (state restoration for tree rollouts).
    - ``clone()`` → an independent env at the same state (default: new env + ``restore``).
    - ``actions_taken`` → the action prefix since the last reset.
    """

    def reset(self, seed: int | None = None) -> str: ...

    def step(self, action: str) -> StepResult: ...

    def admissible_actions(self) -> list[str]: ...

    def state_key(self, observation: str) -> Hashable: ...

    def restore(self, actions: Sequence[str]) -> str: ...

    def clone(self) -> TextEnv: ...

    @property
    def actions_taken(self) -> list[str]: ...


EnvFactory = Callable[[str], TextEnv]
"""``make_env(game_id) -> TextEnv``: how trainers and samplers build an env for a game."""


class ReplayRestore:
    """State by replay, for an env that remembers the seed of its last ``reset`` in ``self._seed`` and
    its moves since in ``self._actions`` (see the module docstring):

    - ``restore(actions)`` resets with that seed, then steps through the prefix;
    - ``actions_taken`` is a copy of ``self._actions``;
    - ``clone()`` replays the moves onto ``self._fresh()``, a new env of the same game; a subclass
      that can copy its state more cheaply overrides ``clone``."""

    _seed: int | None
    _actions: list[str]

    def restore(self, actions: Sequence[str]) -> str:
        obs = self.reset(self._seed)  # type: ignore[attr-defined]
        for a in actions:
            obs = self.step(a)[0]  # type: ignore[attr-defined]
        return obs

    def _fresh(self) -> Self:
        """A new env of the same game and settings (not reset yet); what ``clone`` replays onto."""
        raise NotImplementedError(f"{type(self).__name__} must define _fresh() or clone()")

    def clone(self) -> Self:
        twin = self._fresh()
        twin._seed = self._seed
        twin.restore(self.actions_taken)
        return twin

    @property
    def actions_taken(self) -> list[str]:
        return list(self._actions)


class EnvWrapper:
    """Base for envs that wrap another: every protocol method forwards to ``self.env`` unless a
    subclass overrides it, and unknown attributes (``game_id``, ...) are looked up on the inner
    env. Subclasses override only what they change and must define ``clone``."""

    env: TextEnv

    def __init__(self, env: TextEnv) -> None:
        self.env = env

    def reset(self, seed: int | None = None) -> str:
        return self.env.reset(seed)

    def step(self, action: str) -> StepResult:
        return self.env.step(action)

    def admissible_actions(self) -> list[str]:
        return self.env.admissible_actions()

    def state_key(self, observation: str) -> Hashable:
        return self.env.state_key(observation)

    def restore(self, actions: Sequence[str]) -> str:
        return self.env.restore(actions)

    def clone(self) -> TextEnv:
        raise NotImplementedError(f"{type(self).__name__} must define clone()")

    @property
    def actions_taken(self) -> list[str]:
        return self.env.actions_taken

    def __getattr__(self, name: str) -> Any:
        if name == "env":  # not set yet (e.g. while unpickling): avoid infinite recursion
            raise AttributeError(name)
        return getattr(self.env, name)


class InvalidAction(ValueError):
    """An action that is not admissible in the current state."""


def check_action(action: str, allowed: Sequence[str]) -> None:
    if action not in allowed:
        shown = ", ".join(repr(a) for a in list(allowed)[:12])
        more = "" if len(allowed) <= 12 else f", ... ({len(allowed)} in all)"
        raise InvalidAction(f"action {action!r} is not admissible here; allowed: {shown}{more}")


@dataclass
class _Edge:
    obs: str
    reward: float
    done: bool
    info: dict[str, Any]
    node: _Node


@dataclass
class _Node:
    obs: str  # the observation on first arrival (used for reset roots)
    admissible: list[str]
    prefix: list[str]  # a shortest known action prefix that reaches this node (for repositioning)
    done: bool = False
    children: dict[str, _Edge] = field(default_factory=dict)
    snap: Any = field(default=None, repr=False, compare=False)  # env.save_state() at ``prefix`` (explore only)


@dataclass
class _Shared:
    tries: dict[int | None, _Node] = field(default_factory=dict)
    by_state: dict[tuple[int | None, Hashable], _Node] = field(default_factory=dict)
    inner: tuple[int | None, list[str]] | None = None  # (seed, prefix) the wrapped env is really at
    real_steps: int = 0
    snapshots: bool = False  # while exploring: jump to a node by env.load_state instead of replaying
    snapped: list[_Node] = field(default_factory=list)  # nodes holding a snapshot (cleared after exploring)


class ReplayCache:
    """Wraps a deterministic env; remembers every transition it has seen.

    Stepping along a known transition costs a dict lookup; a new one steps the wrapped env (after
    replaying a known prefix into it if it is elsewhere). The cache is shared by ``clone()``, so
    the G rollouts of a game and every branch of a rollout tree pay for each distinct transition
    once. If the wrapped env has ``canonical_state() -> hashable`` (its full internal state, e.g.
    TextWorld's set of world facts), nodes with the same canonical state are merged, so the cache
    is a graph over states rather than a tree over prefixes and its size stays bounded by
    states x actions. Envs with ``seed_invariant = True`` share one cache for every seed. Only
    valid for deterministic envs (all envs in ``divelab.envs`` are); episode step caps belong to
    the sampler, not to the wrapped env, once states are merged.
    """

    def __init__(self, env: TextEnv, _shared: _Shared | None = None) -> None:
        self.env = env
        # the cache and the wrapped env's true position are shared by all clones, so a clone
        # costs nothing (no second game process) and every clone reuses every transition
        self._shared = _Shared() if _shared is None else _shared
        self._seed: int | None = None
        self._path: list[str] = []
        self._node: _Node | None = None

    @property
    def real_steps(self) -> int:
        """Transitions actually computed by the wrapped env (the rest came from the cache)."""
        return self._shared.real_steps

    def _canonical(self) -> Hashable | None:
        fn = getattr(self.env, "canonical_state", None)
        return fn() if fn is not None else None

    # -- protocol ---------------------------------------------------------------------------
    def reset(self, seed: int | None = None) -> str:
        if getattr(self.env, "seed_invariant", False):
            seed = None  # one cache for every seed
        self._seed = seed
        self._path = []
        sh = self._shared
        root = sh.tries.get(seed)
        if root is None:
            obs = self.env.reset(seed)
            sh.inner = (seed, [])
            root = _Node(obs, list(self.env.admissible_actions()), [])
            sh.tries[seed] = root
            canon = self._canonical()
            if canon is not None:
                sh.by_state[(seed, canon)] = root
            self._snapshot(root)
        self._node = root
        return root.obs

    def step(self, action: str) -> StepResult:
        node = self._require()
        if node.done:
            raise RuntimeError("step() after the episode ended; call reset() first")
        edge = node.children.get(action)
        if edge is None:
            check_action(action, node.admissible)
            sh = self._shared
            if sh.inner != (self._seed, node.prefix):
                if node.snap is not None:
                    self.env.load_state(node.snap)  # type: ignore[attr-defined]
                else:
                    self.env.reset(self._seed)
                    for a in node.prefix:
                        self.env.step(a)
                        sh.real_steps += 1
                    self._snapshot(node)
            obs, reward, done, info = self.env.step(action)
            sh.real_steps += 1
            prefix = node.prefix + [action]
            sh.inner = (self._seed, prefix)
            canon = None if done else self._canonical()
            child = sh.by_state.get((self._seed, canon)) if canon is not None else None
            if child is None:
                child = _Node(obs, [] if done else list(self.env.admissible_actions()), prefix, bool(done))
                if canon is not None:
                    sh.by_state[(self._seed, canon)] = child
                if not done:
                    self._snapshot(child)
            edge = _Edge(obs, float(reward), bool(done), dict(info), child)
            node.children[action] = edge
        self._path.append(action)
        self._node = edge.node
        return edge.obs, edge.reward, edge.done, dict(edge.info)

    def admissible_actions(self) -> list[str]:
        return list(self._require().admissible)

    def _snapshot(self, node: _Node) -> None:
        """While exploring, remember the wrapped env's full state at ``node`` (the env must be
        exactly at ``node.prefix``), if the env offers ``save_state()``/``load_state()``: later
        transitions out of ``node`` then start from it instead of a reset and a replay of the
        prefix. The same transitions come out either way (the env is deterministic)."""
        if self._shared.snapshots and node.snap is None and hasattr(self.env, "save_state"):
            node.snap = self.env.save_state()  # type: ignore[attr-defined]
            self._shared.snapped.append(node)

    def state_key(self, observation: str) -> Hashable:
        return self.env.state_key(observation)

    def restore(self, actions: Sequence[str]) -> str:
        obs = self.reset(self._seed)
        for a in actions:
            obs, _, done, _ = self.step(a)
        return obs

    def clone(self) -> ReplayCache:
        twin = ReplayCache(self.env, _shared=self._shared)
        twin._seed, twin._path, twin._node = self._seed, list(self._path), self._node
        return twin

    @property
    def actions_taken(self) -> list[str]:
        return list(self._path)

    # -- whole-graph exploration and persistence ----------------------------------------------
    def explore(self, seed: int | None = None, max_states: int = 2000) -> bool:
        """Breadth-first expand every reachable state from ``reset(seed)`` (at most ``max_states``
        non-terminal states), so later play is all cache hits. Returns True when the whole
        reachable graph was expanded. Only useful with ``canonical_state`` (else the prefix tree
        is infinite)."""
        sh = self._shared
        sh.snapshots = hasattr(self.env, "save_state")
        try:
            self.reset(seed)
            root = self._require()
            seen = {id(root)}
            queue = [root]
            while queue:
                node = queue.pop(0)
                for a in node.admissible:
                    self._node, self._path = node, list(node.prefix)
                    self.step(a)
                    child = node.children[a].node
                    if id(child) not in seen and not child.done:
                        if len(seen) >= max_states:
                            self.reset(seed)
                            return False
                        seen.add(id(child))
                        queue.append(child)
            self.reset(seed)
            return True
        finally:  # snapshots are for exploring only (they hold the env's memory per state)
            sh.snapshots = False
            for n in sh.snapped:
                n.snap = None
            sh.snapped.clear()

    def export_graph(self) -> dict[str, Any]:
        """The cached transition graph as JSON-able data (for :meth:`load_graph`); canonical
        states must be frozensets of strings (or absent)."""
        sh = self._shared
        canon_of = {id(n): sorted(k[1]) for k, n in sh.by_state.items()}
        index: dict[int, int] = {}
        order: list[_Node] = []

        def visit(n: _Node) -> int:
            if id(n) not in index:
                index[id(n)] = len(order)
                order.append(n)
            return index[id(n)]

        roots = {("null" if seed is None else str(seed)): visit(n) for seed, n in sh.tries.items()}
        nodes = []
        i = 0
        while i < len(order):  # order grows while children are visited
            n = order[i]
            kids = {a: [e.obs, e.reward, e.done, e.info, visit(e.node)] for a, e in n.children.items()}
            nodes.append({"obs": n.obs, "admissible": n.admissible, "prefix": n.prefix, "done": n.done,
                          "canon": canon_of.get(id(n)), "children": kids})
            i += 1
        return {"roots": roots, "nodes": nodes}

    def load_graph(self, data: dict[str, Any]) -> None:
        """Add a graph written by :meth:`export_graph` to this cache (and all its clones)."""
        sh = self._shared
        nodes = [_Node(d["obs"], list(d["admissible"]), list(d["prefix"]), bool(d["done"])) for d in data["nodes"]]
        for n, d in zip(nodes, data["nodes"], strict=True):
            for a, (obs, r, done, info, j) in d["children"].items():
                n.children[a] = _Edge(obs, float(r), bool(done), dict(info), nodes[j])
        for seed_text, j in data["roots"].items():
            seed = None if seed_text == "null" else int(seed_text)
            sh.tries.setdefault(seed, nodes[j])
            for n, d in zip(nodes, data["nodes"], strict=True):
                if d["canon"] is not None:
                    sh.by_state.setdefault((seed, frozenset(d["canon"])), n)

    def _require(self) -> _Node:
        if self._node is None:
            raise RuntimeError("call reset() before step()/admissible_actions()")
        return self._node

    def __getattr__(self, name: str) -> Any:  # expose the wrapped env's extras (game_id, ...)
        if name == "env":
            raise AttributeError(name)
        return getattr(self.env, name)
