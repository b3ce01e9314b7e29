"""Rollouts: what one step and one trajectory record, the policy interface, and pluggable samplers.

A *policy* here chooses among the env's admissible commands (ALFWorld/TextWorld style): it builds
a context string from the recent history and returns a probability for every candidate. The
trainer later recomputes log-probs from ``Step.context`` and ``Step.candidates``, so a step stores
everything the update needs.

A *sampler* decides which rollouts to collect for a batch of games. :class:`IndependentSampler`
is plain GRPO sampling (G independent episodes per game); tree samplers (InfoTree, E162) plug in
by implementing :class:`RolloutSampler` and can branch from any prefix with
:func:`continue_episode` after ``env.restore(prefix)`` / ``env.clone()``. A policy may also offer
``batch_action_probs(contexts, candidates)``; samplers that play many episodes at once use it
through :func:`policy_probs` (one forward pass per step of the whole batch).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np

from divelab.envs.base import EnvFactory, TextEnv


@dataclass
class Step:
    """One decision. ``state_key`` is the key of ``observation`` (the state the action was taken
    in); ``next_state_key`` that of the observation it led to (``None`` when the episode ended
    there, i.e. a terminal state)."""

    observation: str
    context: str  # what the policy read (built from the recent history)
    action: str
    candidates: list[str]
    action_index: int
    logprob: float  # log-prob of the chosen candidate under the behaviour policy
    reward: float
    state_key: Hashable
    next_state_key: Hashable | None
    step_id: int
    done: bool
    info: dict[str, Any] = field(default_factory=dict)
    ref_logprob: float | None = None  # filled by the trainer when it scores the reference


@dataclass
class Trajectory:
    game_id: str
    group_index: int  # which group (game) of the batch it belongs to
    steps: list[Step]
    won: bool
    truncated: bool  # stopped by the step cap rather than by the game
    seed: int | None = None
    traj_id: int = -1  # unique within a batch; set by the sampler
    parent: tuple[int, int] | None = None  # (traj_id, step_id) it branched from, for tree samplers

    @property
    def reward(self) -> float:
        return float(sum(s.reward for s in self.steps))

    def __len__(self) -> int:
        return len(self.steps)


@runtime_checkable
class Policy(Protocol):
    """Chooses among candidate commands."""

    def context(self, observations: Sequence[str], actions: Sequence[str]) -> str:
        """The text the policy reads: built from all observations so far and the actions between
        them (``len(actions) == len(observations) - 1``)."""
        ...

    def action_probs(self, context: str, candidates: Sequence[str]) -> np.ndarray:
        """A probability for each candidate (sums to 1)."""
        ...


@runtime_checkable
class RolloutSampler(Protocol):
    def collect(self, policy: Policy, make_env: EnvFactory, game_ids: Sequence[str], group_size: int,
                rng: np.random.Generator) -> list[list[Trajectory]]:
        """One group of trajectories per game id (same order), ``group_size`` rollouts' worth each."""
        ...


def continue_episode(policy: Policy, env: TextEnv, observations: list[str], actions: list[str],
                     rng: np.random.Generator, max_steps: int, steps: list[Step] | None = None,
                     greedy: bool = False) -> tuple[list[Step], bool, bool]:
    """Play from the env's current state until done or ``max_steps`` total steps.

    ``observations``/``actions`` are the history so far (``observations[-1]`` is the current one);
    ``steps`` are the already-recorded steps of that history (kept as the trajectory's prefix).
    Returns ``(steps, won, truncated)``.
    """
    steps = list(steps or [])
    observations, actions = list(observations), list(actions)
    won = False
    while len(steps) < max_steps:
        obs = observations[-1]
        cands = env.admissible_actions()
        if not cands:
            raise RuntimeError(f"env gave no admissible actions in a non-terminal state: {obs[:80]!r}")
        ctx = policy.context(observations, actions)
        probs = np.asarray(policy.action_probs(ctx, cands), dtype=np.float64)
        if greedy:
            idx = int(np.argmax(probs))
        else:
            idx = int(rng.choice(len(cands), p=probs / probs.sum()))
        action = cands[idx]
        nobs, reward, done, info = env.step(action)
        steps.append(Step(
            observation=obs, context=ctx, action=action, candidates=list(cands), action_index=idx,
            logprob=float(np.log(max(probs[idx], 1e-30))), reward=float(reward),
            state_key=env.state_key(obs), next_state_key=None if done else env.state_key(nobs),
            step_id=len(steps), done=bool(done), info=dict(info),
        ))
        observations.append(nobs)
        actions.append(action)
        if done:
            won = bool(info.get("won", reward > 0))
            return steps, won, False
    return steps, won, True


def policy_probs(policy: Policy, contexts: Sequence[str], candidates: Sequence[Sequence[str]]) -> list[np.ndarray]:
    """Candidate probabilities for many (context, candidates) pairs at once: one batched call when
    the policy has ``batch_action_probs(contexts, candidates)`` (as :class:`~divelab.rl.policy.LMPolicy`
    does, so a step of G lockstep rollouts is one forward pass), else one ``action_probs`` call each."""
    batched = getattr(policy, "batch_action_probs", None)
    if batched is not None:
        return [np.asarray(p, dtype=np.float64) for p in batched(list(contexts), [list(c) for c in candidates])]
    return [np.asarray(policy.action_probs(c, list(k)), dtype=np.float64)
            for c, k in zip(contexts, candidates, strict=True)]


@dataclass
class IndependentSampler:
    """Plain GRPO sampling: ``group_size`` independent episodes per game from ``reset(seed)``.

    All episodes of the batch (every game, every rollout) are played in lockstep, so each step's
    decisions are scored in one batched policy call (:func:`policy_probs`); actions are drawn in a
    fixed (game, rollout) order, so a seed gives the same batch. The G envs of a game are one
    ``make_env(game_id)`` and its ``clone()``s, each ``reset(seed)`` (a fresh episode); clones should
    be cheap (the TextWorld factory's :class:`~divelab.envs.base.ReplayCache` clones share one game).
    ``max_steps`` caps each episode (envs may have their own cap as well). ``greedy`` plays the
    argmax action (evaluation). ``prefetch``, when given, is called once per lockstep step with every live
    episode's (env, chosen action) before any of them steps, so envs whose step is costly (a language-model
    simulator) can compute the whole step in one batch; the actions drawn are the same with or without it."""

    max_steps: int = 20
    greedy: bool = False
    prefetch: Callable[[list[tuple[TextEnv, str]]], None] | None = None

    def collect(self, policy: Policy, make_env: EnvFactory, game_ids: Sequence[str], group_size: int,
                rng: np.random.Generator) -> list[list[Trajectory]]:
        if group_size < 1:
            raise ValueError(f"group_size must be >= 1, got {group_size}")
        live: list[_Episode] = []
        for gi, game_id in enumerate(game_ids):
            base = make_env(game_id)
            seed = int(rng.integers(0, 2**31 - 1))
            for k in range(group_size):
                env = base if k == 0 else base.clone()
                obs = env.reset(seed)
                live.append(_Episode(game_id, gi, seed, gi * group_size + k, env, [obs]))
        episodes = list(live)
        while live:
            cands = [ep.env.admissible_actions() for ep in live]
            for ep, c in zip(live, cands, strict=True):
                if not c:
                    raise RuntimeError(f"env gave no admissible actions in a non-terminal state: "
                                       f"{ep.observations[-1][:80]!r}")
            ctxs = [policy.context(ep.observations, ep.actions) for ep in live]
            probs = policy_probs(policy, ctxs, cands)
            # every action is drawn (in the same order as before) before any episode steps
            chosen = [int(np.argmax(p)) if self.greedy else int(rng.choice(len(c), p=p / p.sum()))
                      for c, p in zip(cands, probs, strict=True)]
            if self.prefetch is not None:
                self.prefetch([(ep.env, c[i]) for ep, c, i in zip(live, cands, chosen, strict=True)])
            still = []
            for ep, ctx, c, p, idx in zip(live, ctxs, cands, probs, chosen, strict=True):
                action = c[idx]
                obs = ep.observations[-1]
                nobs, reward, done, info = ep.env.step(action)
                ep.steps.append(Step(
                    observation=obs, context=ctx, action=action, candidates=list(c), action_index=idx,
                    logprob=float(np.log(max(p[idx], 1e-30))), reward=float(reward),
                    state_key=ep.env.state_key(obs), next_state_key=None if done else ep.env.state_key(nobs),
                    step_id=len(ep.steps), done=bool(done), info=dict(info),
                ))
                ep.observations.append(nobs)
                ep.actions.append(action)
                if done:
                    ep.won = bool(info.get("won", reward > 0))
                elif len(ep.steps) >= self.max_steps:
                    ep.truncated = True
                else:
                    still.append(ep)
            live = still
        groups: list[list[Trajectory]] = [[] for _ in game_ids]
        for ep in episodes:
            groups[ep.group_index].append(Trajectory(game_id=ep.game_id, group_index=ep.group_index, steps=ep.steps,
                                                     won=ep.won, truncated=ep.truncated, seed=ep.seed,
                                                     traj_id=ep.traj_id))
        return groups


@dataclass
class _Episode:
    game_id: str
    group_index: int
    seed: int
    traj_id: int
    env: TextEnv
    observations: list[str]
    actions: list[str] = field(default_factory=list)
    steps: list[Step] = field(default_factory=list)
    won: bool = False
    truncated: bool = False
