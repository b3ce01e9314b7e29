"""Adapter to verl's / SkyRL's advantage-estimator signature.

verl (``verl.trainer.ppo.core_algos``) and SkyRL call an estimator as
``fn(token_level_rewards, response_mask, index, epsilon=..., config=..., **kwargs) -> (advantages,
returns)`` on ``(bs, resp_len)`` tensors, with ``index`` the group id of each row (``uid``). In
multi-turn agent training (verl-agent) every row is **one step** of a trajectory; step-level
estimators also need each row's trajectory id, step id and state key, which travel as extra
keyword arguments (verl-agent passes ``traj_index`` and ``anchor_obs``; we accept those names too).

:func:`make_verl_estimator` turns any registered divelab estimator into such a function: it sums
each row's token rewards into a step reward, builds a :class:`~divelab.rl.advantages.StepBatch`
(next-state keys from the following step of the same trajectory; the last step is terminal unless
``next_state_keys`` is given), calls the native estimator, and broadcasts each step's advantage
over the row's response mask. ``returns`` are the same tensor (as GRPO does in verl).

Registration in verl::

    from verl.trainer.ppo.core_algos import register_adv_est
    from divelab.rl.verl import make_verl_estimator
    register_adv_est("g2po")(make_verl_estimator("g2po", gamma=0.95))

In SkyRL: ``AdvantageEstimatorRegistry.register("g2po", make_verl_estimator("g2po"))``.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import Any

import numpy as np
import torch

from divelab.rl.advantages import StepBatch, get_advantage


def _as_list(x: Any) -> list[Any]:
    if x is None:
        return []
    if isinstance(x, torch.Tensor):
        return x.tolist()
    return list(np.asarray(x, dtype=object).tolist())


def make_verl_estimator(name: str, **options: Any) -> Callable[..., tuple[torch.Tensor, torch.Tensor]]:
    """A verl/SkyRL-signature function wrapping the divelab estimator ``name``."""
    native = get_advantage(name)

    def estimator(token_level_rewards: torch.Tensor, response_mask: torch.Tensor, index: Any,
                  epsilon: float = 1e-6, config: Any = None, *, traj_index: Any = None, step_ids: Any = None,
                  state_keys: Sequence[Hashable] | None = None, anchor_obs: Sequence[Hashable] | None = None,
                  next_state_keys: Sequence[Hashable | None] | None = None,
                  **kwargs: Any) -> tuple[torch.Tensor, torch.Tensor]:
        bs = token_level_rewards.shape[0]
        if response_mask.shape != token_level_rewards.shape:
            raise ValueError(f"response_mask shape {tuple(response_mask.shape)} != token_level_rewards shape "
                             f"{tuple(token_level_rewards.shape)}")
        groups = _as_list(index)
        if len(groups) != bs:
            raise ValueError(f"index has {len(groups)} entries for {bs} rows")
        trajs = _as_list(traj_index) or list(range(bs))  # default: every row is a whole trajectory
        steps = [int(s) for s in _as_list(step_ids)] or [0] * bs
        keys = list(state_keys if state_keys is not None else anchor_obs if anchor_obs is not None
                    else [("row", i) for i in range(bs)])
        for nm, v in (("traj_index", trajs), ("step_ids", steps), ("state_keys", keys)):
            if len(v) != bs:
                raise ValueError(f"{nm} has {len(v)} entries for {bs} rows")
        rewards = (token_level_rewards * response_mask).sum(-1).detach().double().cpu().numpy()
        # dense ids for groups and trajectories, whatever their original type (uids are strings)
        gid: dict[Any, int] = {}
        tid: dict[Any, int] = {}
        g_arr = np.array([gid.setdefault(g, len(gid)) for g in groups], dtype=np.int64)
        t_arr = np.array([tid.setdefault((g, t), len(tid)) for g, t in zip(groups, trajs, strict=True)],
                         dtype=np.int64)
        if next_state_keys is None:
            nxt: list[Hashable | None] = [None] * bs
            by_traj: dict[int, list[int]] = {}
            for i, t in enumerate(t_arr):
                by_traj.setdefault(int(t), []).append(i)
            dones = np.zeros(bs, dtype=bool)
            for rows in by_traj.values():
                rows.sort(key=lambda i: steps[i])
                for a, b in zip(rows, rows[1:], strict=False):
                    nxt[a] = keys[b]
                dones[rows[-1]] = True
        else:
            nxt = list(next_state_keys)
            dones = np.array([k is None for k in nxt], dtype=bool)
        batch = StepBatch(t_arr, g_arr, np.array(steps, dtype=np.int64), rewards, dones, keys, nxt)
        opts = dict(options)
        opts.setdefault("epsilon", epsilon)
        adv = torch.as_tensor(native(batch, **opts), dtype=token_level_rewards.dtype,
                              device=token_level_rewards.device)
        scores = adv.unsqueeze(-1) * response_mask
        return scores, scores

    estimator.__name__ = f"divelab_{name}"
    estimator.__doc__ = f"divelab estimator {name!r} ({options}) with verl's signature."
    return estimator


def to_verl_tensors(batch: StepBatch, resp_len: int = 4, seed: int = 0) -> dict[str, Any]:
    """Token-level tensors for a StepBatch (rewards on each row's last valid token, random response
    lengths), the inverse of the adapter; used by the tests and the docs."""
    rng = np.random.default_rng(seed)
    n = len(batch)
    lengths = rng.integers(1, resp_len + 1, size=n)
    mask = torch.zeros(n, resp_len)
    rewards = torch.zeros(n, resp_len)
    for i, L in enumerate(lengths):
        mask[i, :L] = 1
        rewards[i, L - 1] = float(batch.rewards[i])
    return {"token_level_rewards": rewards, "response_mask": mask,
            "index": np.array([f"uid-{g}" for g in batch.group_index], dtype=object),
            "traj_index": np.array([f"traj-{t}" for t in batch.traj_index], dtype=object),
            "step_ids": batch.step_id.copy(), "state_keys": list(batch.state_keys),
            "next_state_keys": list(batch.next_state_keys)}
