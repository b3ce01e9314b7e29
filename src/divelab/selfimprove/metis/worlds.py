"""Recurring tasks in real TextWorld games: worlds built with TextWorld's ``GameMaker``, goals checked from facts.

A *world* is one compiled TextWorld game (a kitchen and three side rooms) that hosts many tasks:
the game has no quest of its own; a task's goal is a world fact (``on(blue mug, steel table)``)
checked after every step against TextWorld's own fact list, so one compiled game serves every
entity combination of every task template. Tasks recur with different entities (the objects and
furniture named in the task text); worlds differ in what the text does **not** name (which way
the side rooms lie, what the items are stored in, a closed door, which key opens the box). That is
what makes a memorised plan transfer (or not) to a new world.

Templates: ``fetch`` ("Put the X on the Y."), ``unlock`` ("Take the X out of the iron box."),
``stash`` ("Store the X in the Y."), ``eat`` ("Eat the X."), and two rare ones, ``bring`` ("Drop
the X in the Z.") and ``open`` ("Open the iron box.").
"""

from __future__ import annotations

import re
from collections.abc import Hashable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from divelab.cache import atomic_dir, entry_path, stable_hash
from divelab.envs.base import StepResult, check_action

FETCH_OBJECTS = ("blue mug", "old book", "silver coin", "paper map")
BOX_OBJECTS = ("gold ring", "glass jar", "wool scarf")
STASH_OBJECTS = ("red ball", "clay pot", "tin cup")
FOODS = ("bread loaf", "green pear", "carrot")
SUPPORTERS = ("steel table", "oak bench")
CABINETS = ("tall cabinet", "metal locker")
BOX = "iron box"
START = "kitchen"
_BACK = {"east": "west", "west": "east", "north": "south", "south": "north"}

TEMPLATES = ("fetch", "unlock", "stash", "eat", "bring", "open")
COMMON = ("fetch", "unlock", "stash", "eat")
RARE = ("bring", "open")


@dataclass(frozen=True)
class WorldSpec:
    """What a world's layout is; everything here is left unnamed by the task texts."""

    name: str
    fetch_dir: str = "east"
    fetch_room: str = "pantry"
    fetch_holder: str = "wooden chest"
    fetch_in_container: bool = True  # False: the items lie on a supporter (no "open" step)
    fetch_door: str = ""  # a closed door on the way to the fetch room
    key_dir: str = "north"
    key_room: str = "study"
    key_holder: str = "book rack"
    key: str = "brass key"
    stash_dir: str = "west"
    stash_room: str = "garden"
    counter: str = "stone counter"

    def __post_init__(self) -> None:
        dirs = (self.fetch_dir, self.key_dir, self.stash_dir)
        if len(set(dirs)) != 3 or any(d not in _BACK for d in dirs):
            raise ValueError(f"world {self.name!r}: need three different directions among {sorted(_BACK)}, got {dirs}")


WORLDS: dict[str, WorldSpec] = {
    "w0": WorldSpec("w0"),
    "w1": WorldSpec("w1", fetch_dir="north", fetch_room="cellar", fetch_holder="wicker basket", key_dir="west",
                    key_room="library", key_holder="wall hook", key="copper key", stash_dir="east",
                    stash_room="yard", counter="potting bench"),
    "w2": WorldSpec("w2", fetch_door="green door", key_dir="south", key_room="attic", key_holder="tea shelf",
                    key="iron key", counter="garden table"),
    "w3": WorldSpec("w3", fetch_dir="west", fetch_room="larder", fetch_holder="pine shelf", fetch_in_container=False,
                    key_dir="east", key_room="den", key_holder="coat rack", key="silver key", stash_dir="north",
                    stash_room="porch"),
}


@dataclass(frozen=True)
class Task:
    """One task: the text an agent gets, the world it runs in, and the goal fact (hidden from agents)."""

    world: str
    template: str
    text: str
    goal: tuple[str, tuple[str, ...]]  # (predicate, argument names), e.g. ("on", ("blue mug", "steel table"))

    @property
    def id(self) -> str:
        return f"{self.world}:{self.text}"


def tasks_of(world: str, template: str) -> list[Task]:
    """Every task of one template in one world (all entity combinations)."""
    if world not in WORLDS:
        raise ValueError(f"unknown world {world!r}; allowed: {', '.join(WORLDS)}")
    w = WORLDS[world]
    if template == "fetch":
        return [Task(world, template, f"Put the {o} on the {s}.", ("on", (o, s))) for o in FETCH_OBJECTS
                for s in SUPPORTERS]
    if template == "unlock":
        return [Task(world, template, f"Take the {o} out of the {BOX}.", ("in", (o, "I"))) for o in BOX_OBJECTS]
    if template == "stash":
        return [Task(world, template, f"Store the {o} in the {c}.", ("in", (o, c))) for o in STASH_OBJECTS
                for c in CABINETS]
    if template == "eat":
        return [Task(world, template, f"Eat the {f}.", ("eaten", (f,))) for f in FOODS]
    if template == "bring":
        return [Task(world, template, f"Drop the {o} in the {w.fetch_room}.", ("at", (o, w.fetch_room)))
                for o in STASH_OBJECTS]
    if template == "open":
        return [Task(world, template, f"Open the {BOX}.", ("open", (BOX,)))]
    raise ValueError(f"unknown template {template!r}; allowed: {', '.join(TEMPLATES)}")


def build_game(spec: WorldSpec) -> Path:
    """Compile the world once with TextWorld's GameMaker (cached under ``$DIVELAB_CACHE``, atomic)."""
    import textworld
    from textworld import GameMaker

    key = stable_hash({"spec": asdict(spec), "textworld": textworld.__version__, "format": 1})
    final = entry_path("metis-worlds", f"{spec.name}-{key}")
    game_file = final / "game.z8"
    if game_file.exists():
        return game_file
    m = GameMaker()
    kitchen = m.new_room(START)
    m.set_player(kitchen)
    fetch, keyr, stash = m.new_room(spec.fetch_room), m.new_room(spec.key_room), m.new_room(spec.stash_room)
    for room, d in ((fetch, spec.fetch_dir), (keyr, spec.key_dir), (stash, spec.stash_dir)):
        path = m.connect(getattr(kitchen, d), getattr(room, _BACK[d]))
        if room is fetch and spec.fetch_door:
            door = m.new_door(path, name=spec.fetch_door)
            door.add_property("closed")
    holder = m.new(type="c" if spec.fetch_in_container else "s", name=spec.fetch_holder)
    if spec.fetch_in_container:
        holder.add_property("closed")
    fetch.add(holder)
    for name in FETCH_OBJECTS:
        holder.add(m.new(type="o", name=name))
    for name in SUPPORTERS:
        kitchen.add(m.new(type="s", name=name))
    for name in CABINETS:
        cab = m.new(type="c", name=name)
        cab.add_property("closed")
        kitchen.add(cab)
    box = m.new(type="c", name=BOX)
    box.add_property("locked")
    kitchen.add(box)
    for name in BOX_OBJECTS:
        box.add(m.new(type="o", name=name))
    rack = m.new(type="s", name=spec.key_holder)
    keyr.add(rack)
    key = m.new(type="k", name=spec.key)
    rack.add(key)
    m.add_fact("match", key, box)
    counter = m.new(type="s", name=spec.counter)
    stash.add(counter)
    for name in STASH_OBJECTS:
        counter.add(m.new(type="o", name=name))
    for name in FOODS:
        counter.add(m.new(type="f", name=name))
    with atomic_dir(final) as tmp:
        m.compile(str(tmp / "game.z8"))
    return game_file


_FACT = re.compile(r"^(\w+)\((.*)\)$")


def parse_fact(fact: str) -> tuple[str, tuple[str, ...]]:
    """``'on(blue mug: o, steel table: s)'`` → ``('on', ('blue mug', 'steel table'))``."""
    m = _FACT.match(fact.strip())
    if not m:
        return fact, ()
    args = tuple(a.split(":")[0].strip() for a in m.group(2).split(",") if a.strip())
    return m.group(1), args


@dataclass
class _Node:
    obs: str
    admissible: list[str]
    facts: frozenset[tuple[str, tuple[str, ...]]]
    children: dict[str, _Node] = field(default_factory=dict)


class World:
    """One compiled world with a transition cache shared by every task played in it.

    The game is deterministic, so (action prefix → observation, admissible commands, facts) is
    remembered and a prefix seen before costs a dict look-up; the game process is only stepped
    for new transitions (after replaying the prefix into it if it is elsewhere). Only the
    admissible commands, the feedback and the facts are requested from TextWorld (its room
    description and inventory would cost two more game commands per step); the observation is
    ``"<feedback> [<Room>] You are carrying: ..."``, built from the facts."""

    def __init__(self, spec: WorldSpec) -> None:
        import textworld

        self.spec = spec
        self._file: Path | None = None  # compiled on first use
        self._infos = textworld.EnvInfos(admissible_commands=True, facts=True, feedback=True)
        self._env: Any = None
        self._root: _Node | None = None
        self._inner: list[str] | None = None  # the prefix the game process is really at
        self.real_steps = 0

    def _reset(self) -> Any:
        import textworld

        if self._env is None:
            self._file = self._file or build_game(self.spec)
            self._env = textworld.start(str(self._file), request_infos=self._infos)
        return self._env.reset()

    def _snapshot(self, state: Any, first: bool = False) -> _Node:
        facts = frozenset(parse_fact(str(f)) for f in state["facts"])
        room = next((a[1] for p, a in facts if p == "at" and a and a[0] == "P"), "")
        held = sorted(a[0] for p, a in facts if p == "in" and len(a) == 2 and a[1] == "I")
        feedback = "" if first else re.sub(r"\s+", " ", (state["feedback"] or "").split("\n>")[0]).strip()
        if feedback.startswith("-="):  # moving prints the room description: the room tag says it
            feedback = ""
        inv = f"You are carrying: {', '.join(held)}." if held else "You are carrying nothing."
        obs = f"{feedback} [{room.title()}] {inv}".strip()
        return _Node(obs, sorted(state["admissible_commands"]), facts)

    def root(self) -> _Node:
        if self._root is None:
            self._root = self._snapshot(self._reset(), first=True)
            self._inner = []
        return self._root

    def child(self, node: _Node, prefix: list[str], action: str) -> _Node:
        nxt = node.children.get(action)
        if nxt is None:
            check_action(action, node.admissible)
            if self._inner != prefix:
                self._reset()
                for a in prefix:
                    self._env.step(a)
                    self.real_steps += 1
            state = self._env.step(action)[0]
            self.real_steps += 1
            self._inner = prefix + [action]
            nxt = self._snapshot(state)
            node.children[action] = nxt
        return nxt

    def close(self) -> None:
        if self._env is not None:
            self._env.close()
            self._env = None
class TaskEnv:
    """One task in a world, behind the :class:`~divelab.envs.base.TextEnv` protocol.

    ``step`` returns reward 1 and ``done`` once the goal fact holds, or ``done`` with
    ``info["truncated"]`` at ``max_steps``. The first observation starts with the task text."""

    def __init__(self, world: World, task: Task, max_steps: int = 12) -> None:
        if max_steps < 1:
            raise ValueError(f"max_steps must be >= 1, got {max_steps}")
        if task.world != world.spec.name:
            raise ValueError(f"task of world {task.world!r} given world {world.spec.name!r}")
        self.world, self.task, self.max_steps = world, task, max_steps
        self._node: _Node | None = None
        self._path: list[str] = []
        self._done = False
        self._seed: int | None = None

    def reset(self, seed: int | None = None) -> str:
        self._seed, self._path, self._done = seed, [], False
        self._node = self.world.root()
        return f"{self.task.text} | {self._node.obs}"

    def _need(self) -> _Node:
        if self._node is None:
            raise RuntimeError("call reset() first")
        return self._node

    def admissible_actions(self) -> list[str]:
        node = self._need()
        return [] if self._done else list(node.admissible)

    def won(self) -> bool:
        return self.task.goal in self._need().facts

    def step(self, action: str) -> StepResult:
        node = self._need()
        if self._done:
            raise RuntimeError("step() after the episode ended; call reset() first")
        before = node.facts
        self._node = self.world.child(node, self._path, action)
        self._path.append(action)
        won = self.won()
        truncated = not won and len(self._path) >= self.max_steps
        self._done = won or truncated
        info: dict[str, Any] = {"won": won, "lost": False, "truncated": truncated,
                                "changed": self._node.facts != before, "room": self.room()}
        return self._node.obs, float(won), self._done, info

    def room(self) -> str:
        for pred, args in self._need().facts:
            if pred == "at" and args and args[0] == "P":
                return args[1]
        return ""

    def state_key(self, observation: str) -> Hashable:
        return self._need().facts

    def restore(self, actions: Sequence[str]) -> str:
        obs = self.reset(self._seed)
        for a in actions:
            obs = self.step(a)[0]
        return obs

    def clone(self) -> TaskEnv:
        twin = TaskEnv(self.world, self.task, self.max_steps)
        twin.restore(self._path)
        return twin

    @property
    def actions_taken(self) -> list[str]:
        return list(self._path)

    @property
    def done(self) -> bool:
        return self._done
