"""The GRPO loop for multi-turn text agents, with a pluggable advantage estimator and sampler.

Each iteration: (1) *rollouts*: the sampler plays G episodes per game with the current policy;
(2) *bookkeeping*: per-step data and the advantage estimator (for ``g2po`` this is where the
group graph is built); (3) *update*: score the frozen reference once, then ``ppo_epochs`` passes
of the clipped policy-gradient loss on the chosen actions' log-probs plus ``kl_coef`` times the
k3 estimate of KL(pi || pi_ref) (``exp(lr) - lr - 1`` with ``lr = log pi_ref - log pi``): the
public :func:`divelab.rl.policy_gradient_loss`.

An action's log-prob is the log-softmax over admissible candidates of the summed action-token
log-probs, so the gradient flows into the action tokens (and, through the softmax, into the
tokens of the alternatives). Identical (context, candidates) pairs — frequent, because states
repeat — are scored once per pass; the loss still counts every step.

Seeded (numpy + torch), checkpointed (``checkpoint_dir``: model, optimiser, rng, log; resumed
when present), with a progress bar and a per-iteration :class:`IterationLog`.
"""

from __future__ import annotations

import copy
import io
import json
import pickle
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from divelab.cache import atomic_write_bytes
from divelab.envs.base import EnvFactory
from divelab.progress import make_progress
from divelab.rl.advantages import StepBatch, get_advantage
from divelab.rl.pg_loss import k3_kl, policy_gradient_loss
from divelab.rl.policy import LMPolicy
from divelab.rl.rollout import IndependentSampler, RolloutSampler, Trajectory


@dataclass
class GRPOConfig:
    iterations: int = 20
    group_size: int = 8  # G rollouts per game
    max_steps: int = 10  # step cap per episode (used by the default sampler)
    estimator: str = "grpo"
    estimator_options: dict[str, Any] = field(default_factory=dict)
    lr: float = 3e-4
    clip_eps: float = 0.2
    kl_coef: float = 0.02
    ppo_epochs: int = 2
    max_grad_norm: float = 1.0
    seed: int = 0
    checkpoint_dir: str | None = None
    checkpoint_every: int = 5
    description: str = "GRPO"

    def __post_init__(self) -> None:
        for name in ("iterations", "group_size", "max_steps", "ppo_epochs"):
            if getattr(self, name) < 1:
                raise ValueError(f"GRPOConfig.{name} must be >= 1, got {getattr(self, name)}")
        if not 0 < self.clip_eps < 1:
            raise ValueError(f"GRPOConfig.clip_eps must be in (0, 1), got {self.clip_eps}")
        get_advantage(self.estimator)  # fails early with the list of registered names


@dataclass
class IterationLog:
    iteration: int
    success: float  # fraction of this iteration's rollouts that won
    mean_steps: float
    adv_mean: float
    adv_std: float
    adv_abs_mean: float
    zero_adv_frac: float  # steps whose advantage is (numerically) zero: no gradient
    entropy: float  # mean entropy of the candidate distribution over the batch's distinct inputs
    kl: float  # k3 estimate of KL(pi || pi_ref) on the batch, before the update
    loss: float
    n_steps: int
    distinct_states: int
    time_rollout: float
    time_bookkeeping: float  # StepBatch + advantage estimator (graph building for g2po)
    time_update: float  # reference scoring + optimisation
    mixed_group_frac: float = float("nan")  # groups whose rollouts' returns differ (GRPO has a signal)


class GRPOTrainer:
    """Train an :class:`LMPolicy` with GRPO on the games of ``make_env``.

    >>> trainer = GRPOTrainer(policy, make_env, game_ids, GRPOConfig(estimator="g2po"))  # doctest: +SKIP
    >>> logs = trainer.train()                                                            # doctest: +SKIP
    """

    def __init__(self, policy: LMPolicy, make_env: EnvFactory, game_ids: Sequence[str], config: GRPOConfig,
                 sampler: RolloutSampler | None = None) -> None:
        if not game_ids:
            raise ValueError("game_ids is empty; give at least one game")
        self.policy = policy
        self.make_env = make_env
        self.game_ids = list(game_ids)
        self.config = config
        self.sampler = sampler or IndependentSampler(max_steps=config.max_steps)
        self.estimator = get_advantage(config.estimator)
        torch.manual_seed(config.seed)
        self.rng = np.random.default_rng(config.seed)
        self.reference = copy.deepcopy(policy.model).eval()
        for p in self.reference.parameters():
            p.requires_grad_(False)
        self._ref_policy = LMPolicy(self.reference, policy.tokenizer, policy.config)
        self._ref_cache: dict[tuple[str, tuple[str, ...]], torch.Tensor] = {}
        self.optimizer = torch.optim.Adam(policy.model.parameters(), lr=config.lr)
        self.logs: list[IterationLog] = []
        self.last_groups: list[list[Trajectory]] = []
        self.last_advantages: np.ndarray | None = None
        self._resume()

    # -- checkpoints ----------------------------------------------------------------------------
    def _ckpt(self) -> Path | None:
        return Path(self.config.checkpoint_dir) / "checkpoint.pt" if self.config.checkpoint_dir else None

    def save_checkpoint(self) -> None:
        path = self._ckpt()
        if path is None:
            return
        buf = io.BytesIO()
        torch.save({"model": self.policy.model.state_dict(), "optimizer": self.optimizer.state_dict(),
                    "rng": pickle.dumps(self.rng.bit_generator.state), "torch_rng": torch.get_rng_state(),
                    "logs": [asdict(x) for x in self.logs], "config": asdict(self.config)}, buf)
        atomic_write_bytes(path, buf.getvalue())
        atomic_write_bytes(path.with_name("log.json"), json.dumps([asdict(x) for x in self.logs], indent=1).encode())

    def _resume(self) -> None:
        path = self._ckpt()
        if path is None or not path.exists():
            return
        state = torch.load(path, weights_only=False)
        self.policy.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.rng.bit_generator.state = pickle.loads(state["rng"])
        torch.set_rng_state(state["torch_rng"])
        self.logs = [IterationLog(**x) for x in state["logs"]]
        self.policy.invalidate()

    # -- the loop -------------------------------------------------------------------------------
    def train(self) -> list[IterationLog]:
        cfg = self.config
        with make_progress() as progress:
            task = progress.add_task(cfg.description, total=cfg.iterations, completed=len(self.logs), info="")
            while len(self.logs) < cfg.iterations:
                log = self.iteration()
                progress.update(task, advance=1, info=f"success {log.success:.2f} kl {log.kl:.3f}")
                if cfg.checkpoint_dir and (len(self.logs) % cfg.checkpoint_every == 0
                                           or len(self.logs) == cfg.iterations):
                    self.save_checkpoint()
        return self.logs

    def iteration(self) -> IterationLog:
        cfg = self.config
        model = self.policy.model
        t0 = time.perf_counter()
        model.eval()
        self.policy.invalidate()
        groups = self.sampler.collect(self.policy, self.make_env, self.game_ids, cfg.group_size, self.rng)
        t1 = time.perf_counter()

        steps = [s for g in groups for tr in g for s in tr.steps]
        # reference log-probs first, so estimators that need them (progress advantage) have them
        uniq, inverse = _unique_inputs(steps)
        # the reference is frozen, so its log-probs are memoised across iterations
        todo = [u for u in uniq if u not in self._ref_cache]
        if todo:
            with torch.no_grad():
                lps = self._ref_policy.candidate_logprobs([u[0] for u in todo], [list(u[1]) for u in todo])
            self._ref_cache.update(zip(todo, lps, strict=True))
        ref_lp = [self._ref_cache[u] for u in uniq]
        ref_chosen = torch.stack([ref_lp[inverse[i]][s.action_index] for i, s in enumerate(steps)])
        for s, r in zip(steps, ref_chosen.tolist(), strict=True):
            s.ref_logprob = r
        t2 = time.perf_counter()

        batch = StepBatch.from_groups(groups)
        adv = np.asarray(self.estimator(batch, **cfg.estimator_options), dtype=np.float64)
        t3 = time.perf_counter()
        if adv.shape != (len(steps),):
            raise ValueError(f"estimator {cfg.estimator!r} returned shape {adv.shape}, expected ({len(steps)},)")

        old_lp = torch.tensor([s.logprob for s in steps], dtype=torch.float32)
        adv_t = torch.tensor(adv, dtype=torch.float32)
        action_idx = [s.action_index for s in steps]
        model.train()
        kl_before = entropy = float("nan")
        loss_val = 0.0
        for epoch in range(cfg.ppo_epochs):
            lps = self.policy.candidate_logprobs([u[0] for u in uniq], [list(u[1]) for u in uniq])
            new_lp = torch.stack([lps[inverse[i]][a] for i, a in enumerate(action_idx)])
            loss = policy_gradient_loss(new_lp, adv_t, old_logprobs=old_lp, clip_eps=cfg.clip_eps,
                                        ref_logprobs=ref_chosen, kl_coef=cfg.kl_coef)
            if epoch == 0:
                kl_before = float(k3_kl(new_lp.detach(), ref_chosen).mean())
                entropy = float(torch.stack([-(lp.exp() * lp).sum() for lp in lps]).detach().mean())
            self.optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.max_grad_norm)
            self.optimizer.step()
            loss_val = float(loss.detach())
        model.eval()
        self.policy.invalidate()
        t4 = time.perf_counter()

        trajs = [tr for g in groups for tr in g]
        log = IterationLog(
            iteration=len(self.logs), success=float(np.mean([t.won for t in trajs])),
            mean_steps=float(np.mean([len(t) for t in trajs])), adv_mean=float(adv.mean()),
            adv_std=float(adv.std()), adv_abs_mean=float(np.abs(adv).mean()),
            zero_adv_frac=float(np.mean(np.abs(adv) < 1e-8)), entropy=entropy, kl=kl_before, loss=loss_val,
            n_steps=len(steps), distinct_states=len({(s.state_key) for s in steps}),
            time_rollout=t1 - t0, time_bookkeeping=t3 - t2, time_update=(t2 - t1) + (t4 - t3),
            mixed_group_frac=float(np.mean([len({tr.reward for tr in g}) > 1 for g in groups])),
        )
        self.logs.append(log)
        self.last_groups, self.last_advantages = groups, adv
        return log


def _unique_inputs(steps: Sequence[Any]) -> tuple[list[tuple[str, tuple[str, ...]]], list[int]]:
    index: dict[tuple[str, tuple[str, ...]], int] = {}
    inverse = [index.setdefault((s.context, tuple(s.candidates)), len(index)) for s in steps]
    return list(index), inverse


def evaluate(policy: LMPolicy, make_env: EnvFactory, game_ids: Sequence[str], episodes: int = 8,
             max_steps: int = 10, seed: int = 0, greedy: bool = False) -> float:
    """Success rate of ``policy`` over ``episodes`` rollouts per game."""
    policy.invalidate()
    sampler = IndependentSampler(max_steps=max_steps, greedy=greedy)
    groups = sampler.collect(policy, make_env, game_ids, episodes, np.random.default_rng(seed))
    return float(np.mean([t.won for g in groups for t in g]))
