"""RL rollouts fanned out over Ray actors (or run shard by shard in process, with the same result).

:class:`ShardedSampler` is a :class:`~divelab.rl.rollout.RolloutSampler`: hand it to
``GRPOTrainer(..., sampler=ShardedSampler(workers=4))``. Each iteration it draws one seed per game
from the trainer's generator, splits the games over ``workers`` rollout workers — Ray actors that
each hold the environments and a copy of the policy, whose weights are refreshed from the trainer
every iteration — and plays each game's ``group_size`` episodes with
:class:`~divelab.rl.rollout.IndependentSampler` seeded by that game's seed, one thread per worker.
Because every game's episodes depend only on its seed and the weights, the batch is the same
whatever the number of workers and whether it ran on Ray or in process (``backend="inprocess"``).
It is *not* the same batch as a plain ``IndependentSampler`` with the trainer's generator, which
draws all games' actions from one stream.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from divelab.envs.base import EnvFactory
from divelab.rl.rollout import IndependentSampler, Policy, Trajectory
from divelab.threads import torch_threads


def collect_games(policy: Policy, make_env: EnvFactory, games: Sequence[tuple[int, str, int]], group_size: int,
                  max_steps: int, greedy: bool) -> list[list[Trajectory]]:
    """Play ``group_size`` episodes of each ``(index, game_id, seed)``; group index and trajectory
    ids are those the whole batch would give them."""
    inner = IndependentSampler(max_steps=max_steps, greedy=greedy)
    out = []
    with torch_threads(1):  # one thread per worker: the same arithmetic in every process
        for gi, game_id, seed in games:
            group = inner.collect(policy, make_env, [game_id], group_size, np.random.default_rng(seed))[0]
            for k, tr in enumerate(group):
                tr.group_index, tr.traj_id = gi, gi * group_size + k
            out.append(group)
    return out


class _Worker:
    """One rollout worker: the env factory and a policy copy whose weights are refreshed per call."""

    def __init__(self, policy: Any, make_env: EnvFactory) -> None:
        self.policy, self.make_env = policy, make_env

    def collect(self, state: dict[str, Any], games: list[tuple[int, str, int]], group_size: int, max_steps: int,
                greedy: bool) -> list[list[Trajectory]]:
        self.policy.model.load_state_dict(state)
        self.policy.model.eval()
        self.policy.invalidate()
        return collect_games(self.policy, self.make_env, games, group_size, max_steps, greedy)


@dataclass
class ShardedSampler:
    workers: int = 2
    backend: str = "ray"  # "ray" | "inprocess"
    max_steps: int = 20
    greedy: bool = False
    address: str | None = None  # a Ray cluster address; None starts (or joins) a local instance
    # Each actor holds this many of Ray's logical CPUs until close(): two samplers alive at once on a
    # small cluster need fractions, or the later actors wait for CPUs forever.
    cpus_per_worker: float = 1.0
    _actors: list[Any] = field(default_factory=list, repr=False)
    _for: tuple[int, int] | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.workers < 1:
            raise ValueError(f"workers must be >= 1, got {self.workers}")
        if not self.cpus_per_worker > 0:
            raise ValueError(f"cpus_per_worker must be > 0, got {self.cpus_per_worker}")
        if self.backend not in ("ray", "inprocess"):
            raise ValueError(f"backend must be 'ray' or 'inprocess', got {self.backend!r}")

    def collect(self, policy: Policy, make_env: EnvFactory, game_ids: Sequence[str], group_size: int,
                rng: np.random.Generator) -> list[list[Trajectory]]:
        if group_size < 1:
            raise ValueError(f"group_size must be >= 1, got {group_size}")
        seeds = rng.integers(0, 2**63 - 1, size=len(game_ids))
        games = [(i, g, int(s)) for i, (g, s) in enumerate(zip(game_ids, seeds, strict=True))]
        shards = [games[w::self.workers] for w in range(self.workers)]
        shards = [s for s in shards if s]
        if self.backend == "inprocess":
            parts = [collect_games(policy, make_env, s, group_size, self.max_steps, self.greedy) for s in shards]
        else:
            parts = self._collect_ray(policy, make_env, shards, group_size)
        groups: list[list[Trajectory] | None] = [None] * len(game_ids)
        for shard, part in zip(shards, parts, strict=True):
            for (gi, _, _), group in zip(shard, part, strict=True):
                groups[gi] = group
        return [g for g in groups if g is not None]

    def _collect_ray(self, policy: Any, make_env: EnvFactory, shards: list[list[tuple[int, str, int]]],
                     group_size: int) -> list[list[list[Trajectory]]]:
        try:
            import ray
        except ImportError:
            raise RuntimeError("Ray is not installed; install it with `pip install 'divelab[ray]'`, or use "
                               "backend='inprocess'") from None
        if not ray.is_initialized():
            ray.init(address=self.address, include_dashboard=False, log_to_driver=False, ignore_reinit_error=True)
        key = (id(policy), id(make_env))
        if self._for != key:  # new trainer or policy: new actors, each with its own copy
            Actor = ray.remote(num_cpus=self.cpus_per_worker)(_Worker)
            self._actors = [Actor.remote(policy, make_env) for _ in range(self.workers)]
            self._for = key
        state = ray.put({k: v.detach().cpu() for k, v in policy.model.state_dict().items()})
        refs = [a.collect.remote(state, s, group_size, self.max_steps, self.greedy)
                for a, s in zip(self._actors, shards, strict=False)]
        return ray.get(refs)

    def close(self) -> None:
        """Release the actors (they also go when the Ray session ends)."""
        if self._actors:
            import ray

            for a in self._actors:
                ray.kill(a)
        self._actors, self._for = [], None
