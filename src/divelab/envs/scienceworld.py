"""ScienceWorld (Wang et al., 2022): 30 elementary-science tasks in a text simulator, behind the
:class:`~divelab.envs.base.TextEnv` protocol.

The simulator is the jar bundled in the ``scienceworld`` wheel (run by Java 11+ through py4j); nothing is
fetched at run time. Each task has numbered variations (objects, rooms, substances) split by the
benchmark into train/dev/test; ``reset(seed)`` plays the split's variation ``seed mod n`` (see
:mod:`divelab.envs.substrate`, which also defines the observation, reward and ``info``). Admissible actions
are ScienceWorld's valid action-object combinations in the current state (often hundreds). The score
rises with the task's sub-goals; a wrong ``focus on`` ends the episode as a failure (``info["lost"]``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from divelab.envs.base import EnvFactory
from divelab.envs.substrate import (
    Frame,
    Simulator,
    SimulatorEnv,
    check_choice,
    check_split,
    clean,
    require,
    simulator_factory,
    split_id,
)

INSTALL = "pip install scienceworld==1.2.3"
SIMPLIFICATIONS = ("", "easy", "teleportAction", "openDoors", "selfWateringFlowerPots", "noElectricalAction",
                   "openContainers")


def task_names() -> list[str]:
    """ScienceWorld's 30 task names, read from the installed package (no simulator started)."""
    require("scienceworld", INSTALL, "ScienceWorld")
    from scienceworld.constants import ID2TASK

    return list(ID2TASK.values())


@dataclass(frozen=True)
class ScienceWorldSpec:
    """One ScienceWorld task on one split. ``simplification`` is ScienceWorld's own comma-separated string
    ("" = the benchmark as published; "easy" = teleport, open doors and containers, self-watering pots, no
    electrical actions except on electrical tasks)."""

    task: str
    split: str = "dev"
    simplification: str = ""

    def __post_init__(self) -> None:
        check_choice("ScienceWorld task", self.task, task_names())
        check_split(self.split)
        for part in self.simplification.split(","):
            check_choice("ScienceWorld simplification", part, SIMPLIFICATIONS)

    @property
    def game_id(self) -> str:
        tail = f":{self.simplification}" if self.simplification else ""
        return f"sw:{self.task}:{self.split}{tail}"

    @classmethod
    def from_id(cls, game_id: str) -> ScienceWorldSpec:
        return cls(*split_id(game_id, "sw", "ScienceWorld", "'sw:boil:dev' or 'sw:boil:dev:easy'"))


class ScienceWorldEnv(SimulatorEnv):
    """One ScienceWorld task on one split (a :class:`ScienceWorldSpec`); see :class:`SimulatorEnv`."""

    spec: ScienceWorldSpec
    task_description = ""

    def _key(self) -> tuple[str, str]:
        return (self.spec.task, self.spec.simplification)

    def _start(self) -> Any:
        require("scienceworld", INSTALL, "ScienceWorld", java=True)
        from scienceworld import ScienceWorldEnv as Jar

        # the simulator's own step limit is set out of reach: divelab's cap is max_steps
        return Jar("", envStepLimit=10**9)

    def _split_episodes(self, proc: Any) -> list[int]:
        proc.load(self.spec.task, 0, self.spec.simplification)
        return {"train": proc.get_variations_train, "dev": proc.get_variations_dev,
                "test": proc.get_variations_test}[self.split]()

    def _begin(self, proc: Any, episode: int) -> Any:
        if self.simulator.loaded != (self._key(), episode):  # loading takes longer than resetting
            proc.load(self.spec.task, episode, self.spec.simplification)
            self.simulator.loaded = (self._key(), episode)
        # ScienceWorld's reset is the simulator's reset plus a first "look around" (its own reset does the same)
        proc.server.reset()
        return proc.server.step("look around")

    def _act(self, proc: Any, action: str) -> Any:
        return proc.server.step(action)  # the raw step (~ms); _read gathers the rest only when needed

    def _read(self, proc: Any, raw: Any, first: bool) -> Frame:
        score = float(proc.server.getScore())
        done = bool(proc.server.getCompleted())
        won = done and score >= 1.0
        if first:
            self.task_description = clean(proc.taskdescription())
        feedback = self.task_description if first else clean(raw)
        return Frame(feedback, clean(proc.look()), clean(proc.inventory()), score, won,
                     lost=score < 0 or (done and not won))

    def _valid(self, proc: Any, frame: Frame) -> list[str]:
        return sorted(set(proc.get_valid_action_object_combinations()))

    def _gold(self, proc: Any, episode: int) -> list[str]:
        proc.load(self.spec.task, episode, self.spec.simplification, generateGoldPath=True)
        return proc.get_gold_action_sequence()


def scienceworld_env_factory(specs: Sequence[ScienceWorldSpec], max_steps: int = 30, reward: str = "score",
                             cache: bool = True, simulator: Simulator | None = None,
                             episodes: Sequence[int] = ()) -> EnvFactory:
    """``make_env(game_id)`` for these tasks, all on one simulator process (``simulator``, or a new
    one started on the first reset), and with ``episodes`` each task pinned to each of those seeds; see
    :func:`divelab.envs.substrate.simulator_factory`."""
    return simulator_factory(ScienceWorldEnv, specs, max_steps, reward, cache, simulator, episodes)
