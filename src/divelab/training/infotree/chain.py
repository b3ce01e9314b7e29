"""A synthetic branching environment with controllable difficulty: the decision chain.

An episode is ``d`` decisions among ``n_actions`` actions; success (reward 1) needs the correct
action at every step. A wrong action is *revealed* with probability ``p_reveal`` (the episode ends
at once with reward 0, like a tool error or a maze dead end) and is otherwise *silent* (the agent
walks on, doomed, to the horizon, like a wrong step in a proof). States are immutable tuples, so
"restore a prefix" is just keeping the state object: this is the state-restore contract tree
rollouts need, in its simplest form. The exact success probability of any state under a tabular
policy is known in closed form, which lets the reproduction compare the sampler's *estimated*
objective with the *true* one.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class ChainState:
    t: int  # decisions made so far
    lost: bool  # a silent wrong decision was made (hidden from the policy)
    done: bool
    reward: float


@dataclass(frozen=True)
class DecisionChainEnv:
    """``d`` decisions, ``n_actions`` choices each; the correct action at step t is ``correct(t)``.

    The correct actions are the same for every prompt (a shared "skill"), so a policy trained on easy
    prompts (small d) transfers to the first steps of hard ones: difficulty is the only difference.
    """

    d: int
    n_actions: int = 4
    p_reveal: float = 0.5
    world_seed: int = 0

    def __post_init__(self) -> None:
        if self.d < 1:
            raise ValueError(f"d (number of decisions) must be >= 1; got {self.d}")
        if self.n_actions < 2:
            raise ValueError(f"n_actions must be >= 2; got {self.n_actions}")
        if not 0.0 <= self.p_reveal <= 1.0:
            raise ValueError(f"p_reveal must be in [0, 1]; got {self.p_reveal}")

    @property
    def horizon(self) -> int:
        return self.d

    def correct(self, t: int) -> int:
        # a fixed pseudo-random answer key, identical for every env of one world
        return int((t * 2654435761 + self.world_seed * 97 + 11) % 2**31 % self.n_actions)

    def reset(self) -> ChainState:
        return ChainState(t=0, lost=False, done=False, reward=0.0)

    def observation(self, s: ChainState) -> int:
        return s.t  # the policy sees only how far it is, never whether it is lost

    def step(self, s: ChainState, action: int, rng: np.random.Generator) -> ChainState:
        if s.done:
            raise ValueError("step() called on a terminal state")
        if not 0 <= action < self.n_actions:
            raise ValueError(f"action must be in [0, {self.n_actions}); got {action}")
        t = s.t + 1
        lost = s.lost
        if action != self.correct(s.t) and not lost:
            if rng.random() < self.p_reveal:
                return ChainState(t=t, lost=True, done=True, reward=0.0)
            lost = True
        done = t >= self.d
        reward = 1.0 if (done and not lost) else 0.0
        return ChainState(t=t, lost=lost, done=done, reward=reward)

    def success_probability(self, s: ChainState, policy: TabularPolicy) -> float:
        """Exact P(success | state) under ``policy`` (the *true* value the sampler only estimates)."""
        if s.done:
            return s.reward
        if s.lost:
            return 0.0
        p = 1.0
        for t in range(s.t, self.d):
            p *= float(policy.probs_at(t)[self.correct(t)])
        return p


class TabularPolicy:
    """Softmax over ``n_actions`` at each step index: ``logits[t, a]``. Stands in for the LM policy."""

    def __init__(self, horizon: int, n_actions: int, init_correct_logit: float = 0.0, world_seed: int = 0):
        if horizon < 1 or n_actions < 2:
            raise ValueError(f"need horizon >= 1 and n_actions >= 2; got {horizon}, {n_actions}")
        self.n_actions = n_actions
        self.logits = np.zeros((horizon, n_actions))
        if init_correct_logit:
            ref = DecisionChainEnv(d=horizon, n_actions=n_actions, world_seed=world_seed)
            for t in range(horizon):
                self.logits[t, ref.correct(t)] = init_correct_logit

    @classmethod
    def with_accuracy(cls, horizon: int, n_actions: int, q: float, world_seed: int = 0) -> TabularPolicy:
        """A policy whose per-step probability of the correct action is exactly ``q``."""
        if not 0.0 < q < 1.0:
            raise ValueError(f"q must be in (0, 1); got {q}")
        # softmax: q = e^b / (e^b + A - 1)  =>  b = log(q (A-1) / (1-q))
        b = float(np.log(q * (n_actions - 1) / (1.0 - q)))
        return cls(horizon, n_actions, init_correct_logit=b, world_seed=world_seed)

    def probs_at(self, t: int) -> np.ndarray:
        z = self.logits[t] - self.logits[t].max()
        e = np.exp(z)
        return e / e.sum()

    def action_probs(self, observations: list[int]) -> np.ndarray:
        z = self.logits[np.asarray(observations, dtype=int)]
        z = z - z.max(axis=1, keepdims=True)
        e = np.exp(z)
        return e / e.sum(axis=1, keepdims=True)

    def grad_logp(self, t: int, a: int) -> np.ndarray:
        g = -self.probs_at(t)
        g[a] += 1.0
        return g

    def success_rate(self, env: DecisionChainEnv) -> float:
        return env.success_probability(env.reset(), self)
