"""Warm start: exploration traces from a uniform random explorer, and SFT of a policy on them.

The SFT is behaviour cloning at the candidate level (cross-entropy of the candidate softmax on the
explorer's choice). Cloning a *uniform* explorer gives a calibrated, exploratory start: a freshly
initialised LM prefers short commands (fewer tokens, higher summed log-prob), and SFT removes that
bias while teaching the embeddings the games' words. It does not teach the policy to win.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from divelab.envs.base import EnvFactory
from divelab.lm.fitting import fit
from divelab.rl.policy import LMPolicy
from divelab.rl.rollout import IndependentSampler, Trajectory


class UniformPolicy:
    """Picks uniformly among the admissible commands (its context is the last observation)."""

    def context(self, observations: Sequence[str], actions: Sequence[str]) -> str:
        return observations[-1]

    def action_probs(self, context: str, candidates: Sequence[str]) -> np.ndarray:
        return np.full(len(candidates), 1.0 / len(candidates))


def exploration_traces(make_env: EnvFactory, game_ids: Sequence[str], episodes: int, max_steps: int,
                       seed: int = 0) -> list[Trajectory]:
    groups = IndependentSampler(max_steps=max_steps).collect(UniformPolicy(), make_env, game_ids, episodes,
                                                             np.random.default_rng(seed))
    return [t for g in groups for t in g]


def trace_texts(trajectories: Sequence[Trajectory]) -> list[str]:
    """All observation and command text of the traces (to train a tokenizer on)."""
    out: list[str] = []
    for t in trajectories:
        for s in t.steps:
            out.append(s.observation)
            out.extend(s.candidates)
    return out


def sft_warm_start(policy: LMPolicy, trajectories: Sequence[Trajectory], steps: int = 60, batch_size: int = 32,
                   lr: float = 5e-3, seed: int = 0) -> list[float]:
    """Candidate-level behaviour cloning of the traces' choices; returns the loss per step."""
    # contexts are rebuilt with the policy's own context(), whatever the explorer read
    data = []
    for t in trajectories:
        obs = [s.observation for s in t.steps]
        acts = [s.action for s in t.steps]
        for i, s in enumerate(t.steps):
            data.append((policy.context(obs[:i + 1], acts[:i]), s.candidates, s.action_index))
    if not data:
        raise ValueError("no steps in the given trajectories")
    rng = np.random.default_rng(seed)

    def loss_of_step(step: int) -> torch.Tensor:
        idx = rng.choice(len(data), size=min(batch_size, len(data)), replace=False)
        lps = policy.candidate_logprobs([data[i][0] for i in idx], [data[i][1] for i in idx])
        return -torch.stack([lp[data[i][2]] for lp, i in zip(lps, idx, strict=True)]).mean()

    result = fit(policy.model, loss_of_step, steps, lr=lr, optimizer="adam", seed=seed, description="SFT warm start")
    policy.invalidate()
    return [float(x) for x in result.losses]
