"""Importing this module makes divelab's estimators usable in verl (checked against verl 0.9.1).

On import (and in every Ray worker through :func:`setup`) it

1. registers ``grpo_steps``, ``gigpo`` and ``g2po`` in verl's ``ADV_ESTIMATOR_REGISTRY`` (``grpo`` is
   verl's own name, so divelab's step-aware episode GRPO is registered as ``grpo_steps``);
2. wraps ``verl.trainer.ppo.ray_trainer.compute_advantage`` so that, while verl's own function runs,
   the batch's step fields and the call's ``gamma`` / ``lam`` / ``norm_adv_by_std_in_grpo`` are visible
   to divelab's estimators (verl 0.9.1 passes a registered estimator only ``token_level_rewards``,
   ``response_mask``, ``config`` and ``index``);
3. for verl's **default trainer** (``trainer.use_v1=true``, ``verl.trainer.ppo.v1``), wraps
   ``PPOTrainer._compute_advantage``. That trainer reads only ``uid`` and a few tensor columns from its
   TransferQueue before computing advantages, so the wrapper reads the rows' ``extra_fields`` and
   ``rm_scores`` itself and hands the estimator the step fields of each row: ``traj_uid`` and ``step_id``
   from verl's own row key ``{uid}_{session_id}_{index}`` (one session per trajectory, one output per
   step), ``state_key`` (required) and optional ``next_state_key`` / ``step_reward`` from the
   output's ``extra_fields``. verl copies a trajectory's final ``reward_score`` onto every step row; the
   step reward is therefore ``extra_fields["step_reward"]`` when the agent loop writes one, else that
   reward on the trajectory's last step and 0 on the others. Estimators other than divelab's pass
   through untouched.

The agent loop must return one ``AgentLoopOutput`` per step (verl's v1 trainer accepts a list);
:func:`step_outputs` builds that list from the steps of one trajectory.

verl's legacy trainer (``trainer.use_v1=false``) keeps the agent loop's ``extra_fields`` in
``non_tensor_batch``; there the rows must also be steps, with the step fields written per row.

verl computes advantages in Ray actors, not in the script that launches it, so the import must
happen in Ray's worker processes. One line on verl's command line does it:

    +ray_kwargs.ray_init.runtime_env.worker_process_setup_hook=divelab.rl.verl_plugin.setup

(Ray runs that hook in every worker process it starts; :func:`setup` is idempotent.)
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import sys
import warnings
from collections.abc import Iterator, Mapping, Sequence
from contextvars import ContextVar
from typing import Any

import numpy as np

from divelab.rl.verl import CURRENT_BATCH, make_verl_estimator

#: verl name -> divelab estimator name
VERL_NAMES = {"grpo_steps": "grpo", "gigpo": "gigpo", "g2po": "g2po"}
_ESTIMATORS: dict[str, Any] = {}
LEGACY_ADVICE = ("verl's legacy trainer (trainer.use_v1=false) passes non_tensor_batch: the agent loop must emit "
                 "one row per step and write the fields into AgentLoopOutput.extra_fields")
V1_ADVICE = "verl's v1 trainer: the step fields come from the agent loop's outputs (see divelab.rl.verl_plugin)"
# the step fields of the rows verl's v1 trainer is computing advantages for (set by _wrap_v1)
V1_ROWS: ContextVar[dict[str, np.ndarray] | None] = ContextVar("divelab_verl_v1_rows", default=None)


def _objects(values: Sequence[Any]) -> np.ndarray:
    out = np.empty(len(values), dtype=object)
    for i, v in enumerate(values):
        out[i] = v
    return out


def _hashable(x: Any) -> Any:
    """Transport may turn a tuple key into a list; a state key must stay hashable."""
    if isinstance(x, list | tuple):
        return tuple(_hashable(v) for v in x)
    if isinstance(x, np.ndarray):
        return tuple(_hashable(v) for v in x.tolist())
    return x


def v1_step_fields(keys: Sequence[str], extra_fields: Sequence[Mapping[str, Any]],
                   rm_sums: Sequence[float]) -> dict[str, np.ndarray]:
    """The step fields of verl v1 rows: ``traj_uid``/``step_id`` from the row keys
    ``{uid}_{session_id}_{index}``, ``state_key`` (and optional ``next_state_key``) from each row's
    ``extra_fields``, ``step_reward`` from ``extra_fields["step_reward"]`` or, since verl copies a
    trajectory's final reward onto every step, that reward on the last step and 0 elsewhere."""
    n = len(keys)
    if len(extra_fields) != n or len(rm_sums) != n:
        raise ValueError(f"{n} row keys but {len(extra_fields)} extra_fields and {len(rm_sums)} rewards")
    traj, step = [], []
    for k in keys:
        parts = str(k).rsplit("_", 2)
        if len(parts) != 3 or not parts[2].isdigit():
            raise ValueError(f"verl row key {k!r} is not '{{uid}}_{{session_id}}_{{index}}' (verl v1's format)")
        traj.append(f"{parts[0]}_{parts[1]}")
        step.append(int(parts[2]))
    missing = [k for k, e in zip(keys, extra_fields, strict=True) if not isinstance(e, Mapping) or "state_key" not in e]
    if missing:
        raise ValueError(
            f"{len(missing)} of {n} rows have no extra_fields['state_key'] (e.g. {missing[0]!r}): divelab's step "
            f"estimators need one AgentLoopOutput per step with extra_fields['state_key'] (a hashable key of the state "
            f"the step starts from); build them with divelab.rl.verl_plugin.step_outputs in the agent loop's run()")
    out = {"traj_uid": _objects(traj), "step_id": np.array(step, dtype=np.int64),
           "state_key": _objects([_hashable(e["state_key"]) for e in extra_fields])}
    if all("next_state_key" in e for e in extra_fields):
        out["next_state_key"] = _objects([_hashable(e["next_state_key"]) for e in extra_fields])
    if all("step_reward" in e for e in extra_fields):
        out["step_reward"] = np.array([float(e["step_reward"]) for e in extra_fields])
    else:
        last: dict[str, int] = {}
        for i, (t, s) in enumerate(zip(traj, step, strict=True)):
            if t not in last or step[last[t]] < s:
                last[t] = i
        finals = set(last.values())
        out["step_reward"] = np.array([float(r) if i in finals else 0.0 for i, r in enumerate(rm_sums)])
    return out


def step_outputs(steps: Sequence[Mapping[str, Any]], reward_score: float | None = None) -> list[Any]:
    """One verl ``AgentLoopOutput`` per step of a trajectory, for an agent loop's ``run()`` to return.

    Each step is a mapping with ``prompt_ids`` and ``response_ids`` (token ids of that turn's input and
    output), ``state_key`` (hashable key of the state the step starts from; strings travel safest),
    and optionally ``response_mask``, ``response_logprobs``, ``step_reward``, ``next_state_key``.
    ``reward_score`` (the trajectory's reward, default: the sum of the step rewards) goes on the last
    output, which is where verl's reward loop looks for it."""
    from verl.experimental.agent_loop.agent_loop import AgentLoopMetrics, AgentLoopOutput

    if not steps:
        raise ValueError("a trajectory needs at least one step")
    if reward_score is None and all("step_reward" in s for s in steps):
        reward_score = float(sum(float(s["step_reward"]) for s in steps))
    outs = []
    for i, s in enumerate(steps):
        if "state_key" not in s:
            raise ValueError(f"step {i} has no 'state_key'; each step needs the key of the state it starts from")
        extra = {k: s[k] for k in ("state_key", "next_state_key", "step_reward") if k in s}
        if i == len(steps) - 1 and reward_score is not None:
            extra["reward_extra_info"] = {}  # verl copies it with the reward onto the earlier steps
        outs.append(AgentLoopOutput(
            prompt_ids=list(s["prompt_ids"]), response_ids=list(s["response_ids"]),
            response_mask=list(s.get("response_mask", [1] * len(s["response_ids"]))),
            response_logprobs=s.get("response_logprobs"),
            reward_score=reward_score if i == len(steps) - 1 else None,
            num_turns=2, metrics=AgentLoopMetrics(), extra_fields=extra))
    return outs


def _wrap(original: Any) -> Any:
    if getattr(original, "_divelab_wrapped", False):
        return original

    @functools.wraps(original)
    def compute_advantage(data: Any, adv_estimator: Any, gamma: float = 1.0, lam: float = 1.0, num_repeat: int = 1,
                          norm_adv_by_std_in_grpo: bool = True, config: Any = None) -> Any:
        rows = V1_ROWS.get()
        fields: dict[str, Any] = dict(rows or {})
        if rows is not None and any(len(v) != len(data) for v in rows.values()):
            raise ValueError(f"verl handed compute_advantage {len(data)} rows but the batch has "
                             f"{len(next(iter(rows.values())))} step rows")
        fields.update(data.non_tensor_batch)
        token = CURRENT_BATCH.set((fields, {"gamma": gamma, "lam": lam,
                                            "norm_adv_by_std_in_grpo": norm_adv_by_std_in_grpo},
                                   V1_ADVICE if rows is not None else LEGACY_ADVICE))
        try:
            return original(data, adv_estimator, gamma=gamma, lam=lam, num_repeat=num_repeat,
                            norm_adv_by_std_in_grpo=norm_adv_by_std_in_grpo, config=config)
        finally:
            CURRENT_BATCH.reset(token)

    compute_advantage._divelab_wrapped = True  # type: ignore[attr-defined]
    return compute_advantage


def _as_rows(x: Any) -> list[Any]:
    """A per-row non-tensor column as a list (tensordict's NonTensorStack or a plain sequence)."""
    return list(x.tolist()) if hasattr(x, "tolist") else list(x)


def _row_sums(rm: Any) -> list[float]:
    if getattr(rm, "is_nested", False):
        return [float(r.sum()) for r in rm.unbind()]
    return [float(r.sum()) for r in rm]


def _wrap_v1(original: Any) -> Any:
    if getattr(original, "_divelab_wrapped", False):
        return original

    @functools.wraps(original)
    def _compute_advantage(self: Any, batch: Any, metrics: dict) -> Any:
        algo = self.config.algorithm
        if str(algo.adv_estimator) not in VERL_NAMES:
            return original(self, batch, metrics)
        if algo.get("use_kl_in_reward", False):
            raise ValueError(f"algorithm.use_kl_in_reward=True cannot be combined with algorithm.adv_estimator="
                             f"{algo.adv_estimator} on verl's v1 trainer: the step rewards come from the agent "
                             f"loop, not from the KL-penalised token rewards; use the actor's KL loss instead "
                             f"(actor_rollout_ref.actor.use_kl_loss=True)")
        tq = sys.modules[original.__module__].tq  # the TransferQueue client verl's trainer uses
        got = tq.kv_batch_get(keys=batch.keys, partition_id=batch.partition_id,
                              select_fields=["extra_fields", "rm_scores"])
        rows = v1_step_fields(list(batch.keys), _as_rows(got["extra_fields"]), _row_sums(got["rm_scores"]))
        token = V1_ROWS.set(rows)
        try:
            return original(self, batch, metrics)
        finally:
            V1_ROWS.reset(token)

    _compute_advantage._divelab_wrapped = True  # type: ignore[attr-defined]
    return _compute_advantage


@contextlib.contextmanager
def _quiet_import() -> Iterator[None]:
    """verl's import warns about every optional engine it lacks (torchtitan, megatron, ...) and logs that no
    accelerator was found: notes about verl's own set-up, not about divelab's estimators, so they are
    hidden while divelab imports it (``DIVELAB_WARNINGS=1`` shows them)."""
    if os.environ.get("DIVELAB_WARNINGS"):
        yield
        return
    before = logging.root.manager.disable
    logging.disable(logging.WARNING)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        logging.disable(before)


def setup() -> None:
    """Register divelab's estimators in verl and wrap its advantage stage (idempotent)."""
    with _quiet_import():
        from verl.trainer.ppo import core_algos, ray_trainer

    for verl_name, name in VERL_NAMES.items():
        fn = _ESTIMATORS.setdefault(verl_name, make_verl_estimator(name))
        if core_algos.ADV_ESTIMATOR_REGISTRY.get(verl_name) is not fn:
            core_algos.register_adv_est(verl_name)(fn)
    wrapped = _wrap(ray_trainer.compute_advantage)
    ray_trainer.compute_advantage = wrapped
    # modules that imported the function by name before us (later importers get the wrapped one)
    for mod in ("verl.trainer.ppo.v1.utils", "verl.experimental.separation.ray_trainer"):
        m = sys.modules.get(mod)
        if m is not None and getattr(m, "compute_advantage", None) is not None:
            m.compute_advantage = wrapped
    try:  # the default (v1) trainer needs TransferQueue; without it only the legacy trainer can run
        with _quiet_import():
            from verl.trainer.ppo.v1 import trainer_base
    except ImportError:
        return
    trainer_base.PPOTrainer._compute_advantage = _wrap_v1(trainer_base.PPOTrainer._compute_advantage)


setup()
