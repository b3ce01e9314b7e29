"""The controlled text-vs-code study on TextWorld worlds: same experiences, same tasks, same budgets.

Per seed: (1) the plain explorer plays a set of *experience* tasks (mostly recurring tasks of world
``w0``, one of each rare template, one task in each shifted world) with a generous budget; (2)
every memory is built from exactly those episodes; (3) each memory's agent plays the same *test*
tasks with the same step budget and the same random stream: a **recurring** workload (``w0``
tasks, the entities varying) and a **novel** workload (the same templates in the shifted worlds
``w1``–``w3``, where what the text does not name — directions, containers, a door, the key — has
changed). Memories are frozen during testing except for tool call/failure counts (Metis can demote).

Arms: ``none`` (plain agent), ``text`` (Metis without codifying), ``code`` (ungated, unvalidated
tools from single trajectories, nearest tool used), ``metis`` (gate k, validated), ``eager``
(gate k=1), ``unvalidated`` (gate k, no validation) and ``metis-k<j>`` for the k sweep. Every
codifier is the same :class:`~divelab.selfimprove.metis.tools.NoisyCodifier` (bugs drawn per
request), standing in for an imperfect LLM codifier.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from divelab.cache import stable_hash
from divelab.progress import track
from divelab.selfimprove.metis.agent import Agent, CodeMemory, ExplorerAgent, NoMemory, Outcome, play
from divelab.selfimprove.metis.distill import Episode
from divelab.selfimprove.metis.metis import Example, Metis, MetisConfig
from divelab.selfimprove.metis.tools import NoisyCodifier, TemplateCodifier
from divelab.selfimprove.metis.worlds import COMMON, RARE, WORLDS, Task, TaskEnv, World, tasks_of

NOVEL_WORLDS = ("w1", "w2", "w3")


@dataclass
class StudyConfig:
    seeds: int = 3
    n_experience: int = 16  # recurring w0 tasks in the experience set (plus rare and shifted ones)
    n_test: int = 12  # tasks per workload
    budget: int = 9  # steps per test task
    exp_budget: int = 20  # steps per experience task
    k: int = 3
    k_sweep: tuple[int, ...] = (2, 5)
    leak: float = 0.3
    drop: float = 0.1
    arms: tuple[str, ...] = ("none", "text", "code", "metis", "eager", "unvalidated")
    novel_worlds: tuple[str, ...] = NOVEL_WORLDS

    def __post_init__(self) -> None:
        if self.seeds < 1 or self.n_experience < 1 or self.n_test < 1 or self.budget < 1:
            raise ValueError(f"seeds, n_experience, n_test and budget must be >= 1, got {self}")


@dataclass
class SeedResult:
    outcomes: dict[str, dict[str, list[Outcome]]] = field(default_factory=dict)  # workload -> arm -> outcomes
    memories: dict[str, dict[str, Any]] = field(default_factory=dict)  # arm -> summary
    buggy_calls: dict[str, list[bool]] = field(default_factory=dict)  # arm -> ok of each call of a buggy tool
    codifier_inputs: list[str] = field(default_factory=list)
    gate_events: list[dict[str, Any]] = field(default_factory=list)
    experience_texts: list[str] = field(default_factory=list)
    experience_won: list[bool] = field(default_factory=list)


def _rng(*key: Any) -> random.Random:
    return random.Random(stable_hash(list(key)))


def sample_tasks(seed: int, cfg: StudyConfig) -> tuple[list[Task], list[Task], list[Task]]:
    """(experience, recurring test, novel test) tasks of one seed."""
    rng = _rng("tasks", seed)
    w0 = [t for tpl in COMMON for t in tasks_of("w0", tpl)]
    rng.shuffle(w0)
    exp = [rng.choice(tasks_of("w0", COMMON[i % len(COMMON)])) for i in range(cfg.n_experience)]
    exp += [rng.choice(tasks_of("w0", tpl)) for tpl in RARE]
    exp += [rng.choice([t for tpl in COMMON for t in tasks_of(w, tpl)]) for w in cfg.novel_worlds]
    rng.shuffle(exp)
    seen = {t.id for t in exp}
    fresh = [t for t in w0 if t.id not in seen] + [t for t in w0 if t.id in seen]
    recurring = [fresh[i % len(fresh)] for i in range(cfg.n_test)]
    novel_pool = [t for w in cfg.novel_worlds for tpl in COMMON for t in tasks_of(w, tpl)]
    novel = rng.sample(novel_pool, min(cfg.n_test, len(novel_pool)))
    return exp, recurring, novel


_OPEN: dict[str, World] = {}


def shared_world(name: str) -> World:
    """One :class:`World` per process (its game and transition cache are shared by every study)."""
    if name not in _OPEN:
        _OPEN[name] = World(WORLDS[name])
    return _OPEN[name]


class Study:
    """Runs the study (worlds are compiled once and shared by every seed and arm)."""

    def __init__(self, cfg: StudyConfig, agent: Agent | None = None) -> None:
        self.cfg = cfg
        self.agent = agent or ExplorerAgent()
        self.worlds = {name: shared_world(name) for name in WORLDS}
        self.by_id = {t.id: t for w in WORLDS for tpl in COMMON + RARE for t in tasks_of(w, tpl)}

    def env(self, task: Task, budget: int) -> TaskEnv:
        return TaskEnv(self.worlds[task.world], task, budget)

    def replay_check(self, example: Example, program: list[str]) -> bool:
        """Validation in the real game: the tool's program, run on the recorded example's task, wins."""
        env = self.env(self.by_id[f"{example.env}:{example.task}"], max(1, len(program)))
        env.reset(0)
        for cmd in program:
            if env.done or cmd not in env.admissible_actions():
                return False
            env.step(cmd)
        return env.won()

    def make_memory(self, arm: str, seed: int) -> Any:
        cfg = self.cfg

        def codifier() -> NoisyCodifier:
            return NoisyCodifier(TemplateCodifier(), leak=cfg.leak, drop=cfg.drop, seed=seed)

        if arm == "none":
            return NoMemory()
        if arm == "code":
            return CodeMemory(codifier())
        conf: dict[str, MetisConfig] = {
            "text": MetisConfig(codify=False), "metis": MetisConfig(k=cfg.k), "eager": MetisConfig(k=1),
            "unvalidated": MetisConfig(k=cfg.k, validate=False),
            **{f"metis-k{j}": MetisConfig(k=j) for j in cfg.k_sweep}}
        if arm not in conf:
            raise ValueError(f"unknown arm {arm!r}; allowed: none, code, {', '.join(conf)}")
        c = conf[arm]
        return Metis(codifier=codifier() if c.codify else None, check=self.replay_check, config=c)

    def run_seed(self, seed: int, on_episode: Callable[[], None] | None = None) -> SeedResult:
        cfg = self.cfg
        exp, recurring, novel = sample_tasks(seed, cfg)
        res = SeedResult()
        episodes: list[Episode] = []
        for i, task in enumerate(exp):
            out = play(self.env(task, cfg.exp_budget), NoMemory(), self.agent, _rng("exp", seed, i),
                       episode_id=f"s{seed}-exp{i}")
            assert out.episode is not None
            episodes.append(out.episode)
            res.experience_texts += [s.observation for s in out.episode.steps if len(s.observation) > 20]
            res.experience_won.append(out.won)
        arms = list(cfg.arms) + [f"metis-k{j}" for j in cfg.k_sweep]
        for arm in arms:
            mem = self.make_memory(arm, seed)
            for ep in episodes:
                if hasattr(mem, "observe"):
                    mem.observe(ep)
            workloads = {"recurring": recurring, "novel": novel}
            if arm.startswith("metis-k"):
                workloads = {"recurring": recurring}
            for wl, tasks in workloads.items():
                outs = []
                for i, task in enumerate(tasks):
                    outs.append(play(self.env(task, cfg.budget), mem, self.agent, _rng("test", seed, wl, i),
                                     episode_id=f"s{seed}-{wl}{i}"))
                    if on_episode:
                        on_episode()
                res.outcomes.setdefault(wl, {})[arm] = outs
            if hasattr(mem, "registry"):
                buggy = {t.name for t in mem.registry.tools.values() if "# injected bug" in t.source}
                res.buggy_calls[arm] = [bool(o.tool_ok) for wl in res.outcomes for o in res.outcomes[wl].get(arm, [])
                                        if o.tool in buggy]
            res.memories[arm] = mem.summary()
            if arm == "metis":
                res.codifier_inputs = [r.render() for r in mem.codifier_inputs]
                res.gate_events = [{**e.__dict__, "k": cfg.k} for e in mem.events]
                res.memories[arm]["unvalidated_active"] = sum(not t.validated for t in mem.registry.active())
        return res

    def run(self) -> list[SeedResult]:
        return [self.run_seed(s) for s in track(range(self.cfg.seeds), "metis study (seeds)")]

    def close(self) -> None:
        """Stop the game processes (the next study in this process restarts them)."""
        for name in list(_OPEN):
            _OPEN.pop(name).close()
