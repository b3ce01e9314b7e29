"""The closed loop, with an auditable, resumable trace on disk.

One cycle: each advocate proposes experiments; each is checked by simulation at the planned N;
each advocate's best accepted experiment is run on ``n_participants`` participants; both
theories are scored by the normalised generative loss of their *simulated* behaviour against
*all* observations so far; the arbiter names the loser and the reviser rewrites it (kept only if
it strictly lowers the loss). Every cycle is written to ``trace_dir/cycles/NNNN.json`` and the
state to ``trace_dir/state.json`` (atomically), so a killed run resumes where it stopped and
gives the same numbers as an uninterrupted one (every random stream is keyed by seed and cycle).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from divelab.cache import atomic_write_text, stable_hash
from divelab.science.autocog.design import Proposal, simulation_check
from divelab.science.autocog.loss import normalised_loss
from divelab.science.autocog.metrics import jsd, metric_from_spec, pair_rates
from divelab.science.autocog.roles import (
    AdvocateContext,
    JudgeContext,
    LocalSearchReviser,
    ProgrammaticAdvocate,
    ProgrammaticArbiter,
    ReviseContext,
)
from divelab.science.autocog.simulate import ChoiceModel, Data, simulate
from divelab.science.autocog.task import Design, Task, candidate_pool
from divelab.science.autocog.theory import SEEDS, Theory

METRIC_MODES = ("adaptive", "jsd")


@dataclass
class LoopConfig:
    """Everything that determines a run (stored in the trace; a resume must match it)."""

    start: tuple[str, str] = ("weighted-tally", "unit-add")
    n_participants: int = 25
    n_runs: int = 50  # simulated participants per theory per experiment (the paper's n_runs)
    alpha: float = 0.01
    n_pairs: int = 8
    n_trials: int = 96
    metric: str = "adaptive"  # or "jsd": the fixed-distance ablation
    pool_size: int = 200
    explore_tol: float = 0.05  # a new theory after a stall may cost this much loss (ours; see docs)
    validities: tuple[float, ...] = (0.9, 0.8, 0.7, 0.6)
    rating_max: int = 10

    def __post_init__(self) -> None:
        if self.metric not in METRIC_MODES:
            raise ValueError(f"metric must be one of {METRIC_MODES}, got {self.metric!r}")
        for s in self.start:
            if s not in SEEDS:
                raise ValueError(f"unknown seed theory {s!r}; allowed: {', '.join(SEEDS)}")
        if self.n_participants < 2 or self.n_runs < 2:
            raise ValueError("n_participants and n_runs must be >= 2")

    @property
    def task(self) -> Task:
        return Task(tuple(self.validities), self.rating_max)


@dataclass
class Observation:
    exp_id: str
    metric_name: str
    spec: dict
    value: float | list[float]  # a metric mean, or per-pair choice rates (jsd mode)

    def to_dict(self) -> dict:
        return asdict(self)


def _seed_of(*parts: Any) -> int:
    return int(stable_hash(list(parts), 12), 16)


class AutoCog:
    """The loop. ``participants`` is any :class:`~.simulate.ChoiceModel` (a strategy: the ground truth)
    or a callable ``(design, n, rng) -> Data`` (e.g. to read data from real people)."""

    def __init__(self, participants: ChoiceModel | Callable[[Design, int, np.random.Generator], Data],
                 config: LoopConfig | None = None, *, seed: int = 0, trace_dir: str | Path | None = None,
                 advocate: Any = None, arbiter: Any = None, reviser: Any = None,
                 theories: tuple[Theory, Theory] | None = None, participants_name: str = "") -> None:
        self.config = config or LoopConfig()
        self.seed = int(seed)
        self.participants = participants
        self.participants_name = participants_name or getattr(participants, "name", "custom")
        self.advocate = advocate or ProgrammaticAdvocate()
        self.arbiter = arbiter or ProgrammaticArbiter()
        self.reviser = reviser or LocalSearchReviser()
        self.task = self.config.task
        self.theories: list[Theory] = list(theories) if theories else [SEEDS[s]() for s in self.config.start]
        self.history: list[Theory] = list(self.theories)
        self.experiments: dict[str, Design] = {}
        self.observations: list[Observation] = []
        self.records: list[dict] = []
        self.next_cycle = 0
        self.pool = candidate_pool(self.task, self.config.pool_size, np.random.default_rng(_seed_of(self.seed, "pool")))
        self._sim: dict[tuple[str, str], Data] = {}
        self._dkeys: dict[tuple, str] = {}
        self._metrics: dict[str, Any] = {}
        self._val: dict[tuple[str, str, str], Any] = {}
        self._current: dict[str, Any] = {}
        self.trace_dir = Path(trace_dir) if trace_dir is not None else None
        if self.trace_dir is not None and (self.trace_dir / "state.json").exists():
            self._load()

    # ------------------------------------------------------------------ identity of a run
    def _identity(self) -> dict:
        return {"config": {k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(self.config).items()},
                "seed": self.seed, "participants": self.participants_name,
                "advocate": type(self.advocate).__name__, "arbiter": type(self.arbiter).__name__,
                "reviser": type(self.reviser).__name__,
                "design": getattr(self.advocate, "design", "custom")}

    # ------------------------------------------------------------------ simulation with caching
    def simulate_theory(self, theory: Theory, design: Design) -> Data:
        ident = (design.task, design.pairs, design.n_trials)
        if ident not in self._dkeys:
            self._dkeys[ident] = stable_hash({k: v for k, v in design.to_dict().items() if k != "label"})
        dkey = self._dkeys[ident]
        k = (theory.key, dkey)
        if k not in self._sim:
            rng = np.random.default_rng(_seed_of(self.seed, theory.key, dkey))
            self._sim[k] = simulate(theory, design, self.config.n_runs, rng)
        return self._sim[k]

    def simulated_value(self, theory: Theory, obs: Observation) -> Any:
        k = (theory.key, obs.exp_id, obs.metric_name)
        if k not in self._val:
            data = self.simulate_theory(theory, self.experiments[obs.exp_id])
            if self.config.metric == "jsd":
                self._val[k] = pair_rates(data)
            else:
                mk = json.dumps(obs.spec, sort_keys=True)
                if mk not in self._metrics:
                    self._metrics[mk] = metric_from_spec(obs.spec)
                v = self._metrics[mk](data)
                self._val[k] = float(np.mean(v)) if not np.isnan(v).any() else float("nan")
        return self._val[k]

    def per_observation(self, theory: Theory) -> list[float]:
        """Normalised distance of ``theory`` on each observation (reference: all theories held so far)."""
        if self.config.metric == "jsd":
            return [jsd(np.asarray(self.simulated_value(theory, o)), np.asarray(o.value)) for o in self.observations]
        out = []
        for o in self.observations:
            s = self.simulated_value(theory, o)
            refs = [self.simulated_value(h, o) for h in self.history if h.key != theory.key]
            out.append(normalised_loss([s], [float(o.value)], [[r] for r in refs])[1][0])
        return out

    def loss(self, theory: Theory) -> float:
        d = self.per_observation(theory)
        return float(np.mean(d)) if d else float("nan")

    # ------------------------------------------------------------------ the cycle's steps
    def _rng(self, cycle: int, stream: str) -> np.random.Generator:
        return np.random.default_rng(_seed_of(self.seed, cycle, stream))

    def _check(self, prop: Proposal, x: Theory, y: Theory) -> Proposal:
        if self.config.metric == "jsd":
            dx, dy = self.simulate_theory(x, prop.design), self.simulate_theory(y, prop.design)
            d = jsd(pair_rates(dx), pair_rates(dy))
            from divelab.science.autocog.design import MetricCheck

            thr = self.jsd_threshold()
            prop.checks = [MetricCheck("jsd", {"kind": "jsd"}, d, thr, float("nan"), 0.0 if d > thr else 1.0)]
            prop.accepted = d > thr
            return prop
        return simulation_check(prop, x, y, self.simulate_theory, n_planned=self.config.n_participants,
                                alpha=self.config.alpha)

    def jsd_threshold(self) -> float:
        """Median JSD between the canonical seeds (TTB, tallying, WADD) on random designs (the paper's rule)."""
        if "jsd_thr" not in self._current:
            rng = np.random.default_rng(_seed_of(self.seed, "jsd-threshold"))
            from divelab.science.autocog.design import random_designs

            designs = random_designs(self.pool, self.task, rng, n_designs=3, n_pairs=self.config.n_pairs,
                                     n_trials=self.config.n_trials)
            seeds = [SEEDS[s]() for s in ("ttb", "tallying", "wadd")]
            vals = [jsd(pair_rates(self.simulate_theory(a, d)), pair_rates(self.simulate_theory(b, d)))
                    for d in designs for i, a in enumerate(seeds) for b in seeds[i + 1:]]
            self._current["jsd_thr"] = float(np.median(vals))
        return self._current["jsd_thr"]

    def discriminable(self, cand: Theory, rival: Theory, cycle: int) -> bool:
        """Would some library metric on a scouting design separate ``cand`` from ``rival`` at the planned N?"""
        from divelab.science.autocog.design import random_designs

        if self.config.metric == "jsd":
            design = random_designs(self.pool, self.task, self._rng(cycle, "scout"), n_designs=1,
                                    n_pairs=self.config.n_pairs, n_trials=self.config.n_trials)[0]
            return self._check(Proposal(design, []), cand, rival).accepted
        designs = random_designs(self.pool, self.task, self._rng(cycle, "scout"), n_designs=1,
                                 n_pairs=self.config.n_pairs, n_trials=self.config.n_trials)
        from divelab.science.autocog.metrics import LIBRARY

        return any(self._check(Proposal(d, list(LIBRARY.values())), cand, rival).accepted for d in designs)

    def propose(self, cycle: int) -> list[Proposal]:
        """Each advocate's best accepted proposal (at most one each)."""
        chosen, tried = [], []
        for side in (0, 1):
            own, rival = self.theories[side], self.theories[1 - side]
            ctx = AdvocateContext(own, rival, self.task, self.pool, self._rng(cycle, f"advocate{side}"),
                                  self.config.n_pairs, self.config.n_trials, label=f"c{cycle:03d}-{'ab'[side]}-")
            props = [self._check(p, own, rival) for p in self.advocate.propose(ctx)[:3]]
            tried += props
            ok = [p for p in props if p.accepted]
            if ok:
                chosen.append(min(ok, key=lambda p: p.best_p))
        self._current["tried"] = [p.to_dict() for p in tried]
        return chosen

    def run_experiments(self, cycle: int, proposals: list[Proposal]) -> list[Observation]:
        new, raw = [], {}
        for i, prop in enumerate(proposals):
            exp_id = f"c{cycle:03d}-e{i}"
            design = Design(prop.design.task, prop.design.pairs, prop.design.n_trials, label=exp_id)
            rng = self._rng(cycle, f"participants{i}")
            if isinstance(self.participants, ChoiceModel):
                data = simulate(self.participants, design, self.config.n_participants, rng)
            else:
                data = self.participants(design, self.config.n_participants, rng)
            self.experiments[exp_id] = design
            raw[exp_id] = data.to_dict()
            if self.config.metric == "jsd":
                new.append(Observation(exp_id, "pair_rates", {"kind": "jsd"}, pair_rates(data).tolist()))
            else:
                for c in prop.checks:
                    v = metric_from_spec(c.spec)(data)
                    new.append(Observation(exp_id, c.name, c.spec, float(np.mean(v))))
        self.observations += new
        self._current["ran"] = [{"exp_id": e, "design": self.experiments[e].to_dict(), "data": raw[e]} for e in raw]
        self._current["new_observations"] = [o.to_dict() for o in new]
        return new

    def judge_and_revise(self, cycle: int) -> None:
        if not self.observations:
            self._current["verdict"] = {"skipped": "no observations yet"}
            return
        losses = [self.loss(t) for t in self.theories]
        per = [self.per_observation(t) for t in self.theories]
        obs = [{"exp_id": o.exp_id, "metric": o.metric_name,
                "value": float(np.mean(o.value)) if isinstance(o.value, list) else o.value} for o in self.observations]
        stalled = not self._current.get("ran")
        verdict = self.arbiter.judge(JudgeContext(list(self.theories), losses, per, obs, stalled=stalled))
        loser_i = int(verdict["loser"])
        loser, rival = self.theories[loser_i], self.theories[1 - loser_i]
        ctx = ReviseContext(rival, self.loss, verdict.get("diagnosis", ""), verdict.get("verdict", ""), obs,
                            discriminable=lambda c: self.discriminable(c, rival, cycle))
        cand = self.reviser.revise(loser, ctx)
        gate = {"proposed": cand.to_dict() if cand else None, "kept": False}
        if cand is not None:
            cand_loss, old = self.loss(cand), self.loss(loser)
            tol = self.config.explore_tol if (stalled and verdict.get("verdict") == "new_theory") else 0.0
            gate.update(candidate_loss=cand_loss, loser_loss=old, tolerance=tol)
            if cand.key != rival.key and (cand_loss < old or (tol > 0 and cand_loss <= old + tol)):
                self.theories[loser_i] = cand
                if all(h.key != cand.key for h in self.history):
                    self.history.append(cand)
                gate["kept"] = True
        self._current["verdict"] = {**verdict, "losses_before": losses, "revision": gate}

    def finish_cycle(self, cycle: int) -> dict:
        losses = [self.loss(t) for t in self.theories] if self.observations else [float("nan")] * 2
        winner = int(np.nanargmin(losses)) if self.observations else 0
        rec = {"cycle": cycle, **self._current, "theories": [t.to_dict() for t in self.theories],
               "losses": losses, "winner": self.theories[winner].to_dict()}
        self._current = {k: v for k, v in self._current.items() if k == "jsd_thr"}
        self.records.append(rec)
        self.next_cycle = cycle + 1
        if self.trace_dir is not None:
            atomic_write_text(self.trace_dir / "cycles" / f"{cycle:04d}.json", json.dumps(rec, indent=1, default=float))
            self._save()
        return rec

    def step(self, cycle: int) -> dict:
        props = self.propose(cycle)
        self.run_experiments(cycle, props)
        self.judge_and_revise(cycle)
        return self.finish_cycle(cycle)

    def run(self, cycles: int, *, on_cycle: Callable[[dict], None] | None = None) -> list[dict]:
        """Run until ``cycles`` cycles are in the trace (resuming from it when there is one)."""
        while self.next_cycle < cycles:
            rec = self.step(self.next_cycle)
            if on_cycle is not None:
                on_cycle(rec)
        return self.records

    @property
    def winner(self) -> Theory:
        if not self.observations:
            return self.theories[0]
        return self.theories[int(np.nanargmin([self.loss(t) for t in self.theories]))]

    # ------------------------------------------------------------------ persistence
    def _save(self) -> None:
        assert self.trace_dir is not None
        state = {"identity": self._identity(), "next_cycle": self.next_cycle,
                 "theories": [t.to_dict() for t in self.theories], "history": [t.to_dict() for t in self.history],
                 "experiments": {k: d.to_dict() for k, d in self.experiments.items()},
                 "observations": [o.to_dict() for o in self.observations]}
        atomic_write_text(self.trace_dir / "state.json", json.dumps(state, indent=1))

    def _load(self) -> None:
        assert self.trace_dir is not None
        state = json.loads((self.trace_dir / "state.json").read_text())
        mine = json.loads(json.dumps(self._identity()))
        if state["identity"] != mine:
            raise ValueError(f"trace {self.trace_dir} was written by a different run:\n  trace: "
                             f"{state['identity']}\n  this:  {mine}\nuse a new trace_dir or the same settings")
        self.next_cycle = int(state["next_cycle"])
        self.theories = [Theory.from_dict(d) for d in state["theories"]]
        self.history = [Theory.from_dict(d) for d in state["history"]]
        self.experiments = {k: Design.from_dict(d) for k, d in state["experiments"].items()}
        self.observations = [Observation(**o) for o in state["observations"]]
        self.records = [json.loads(p.read_text()) for p in sorted((self.trace_dir / "cycles").glob("*.json"))
                        if int(p.stem) < self.next_cycle]
