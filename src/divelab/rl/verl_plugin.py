"""Importing this module makes divelab's estimators usable in verl (checked against verl 0.9.1).

On import it

1. registers ``grpo_steps``, ``gigpo`` and ``g2po`` in verl's ``ADV_ESTIMATOR_REGISTRY`` (``grpo`` is
   verl's own name, so divelab's step-aware episode GRPO is registered as ``grpo_steps``), and
2. wraps ``verl.trainer.ppo.ray_trainer.compute_advantage`` so that, while verl's own function runs,
   the batch's ``non_tensor_batch`` and the call's ``gamma`` / ``lam`` / ``norm_adv_by_std_in_grpo`` are
   visible to divelab's estimators. verl 0.9.1 passes a registered estimator only
   ``token_level_rewards``, ``response_mask``, ``config`` and ``index`` (``non_tensor_batch`` only to
   its own GDPO), so without this the step fields written by the rollout could not arrive; the
   estimators then raise, naming the fields.

The rollout writes the step fields per row into ``non_tensor_batch`` (``traj_uid``, ``step_id``,
``state_key``, optional ``next_state_key``; see :data:`divelab.rl.verl.STEP_FIELDS`), e.g. through an
agent loop's ``AgentLoopOutput.extra_fields``.

verl computes advantages in its ``TaskRunner`` Ray actor, not in the script that launches it, so the
import must happen in Ray's worker processes. One line on verl's command line does it:

    +ray_kwargs.ray_init.runtime_env.worker_process_setup_hook=divelab.rl.verl_plugin.setup

(Ray runs that hook in every worker process it starts; :func:`setup` is idempotent.)
"""

from __future__ import annotations

import functools
import sys
from typing import Any

from divelab.rl.verl import CURRENT_BATCH, make_verl_estimator

#: verl name -> divelab estimator name
VERL_NAMES = {"grpo_steps": "grpo", "gigpo": "gigpo", "g2po": "g2po"}
_ESTIMATORS: dict[str, Any] = {}


def _wrap(original: Any) -> Any:
    if getattr(original, "_divelab_wrapped", False):
        return original

    @functools.wraps(original)
    def compute_advantage(data: Any, adv_estimator: Any, gamma: float = 1.0, lam: float = 1.0, num_repeat: int = 1,
                          norm_adv_by_std_in_grpo: bool = True, config: Any = None) -> Any:
        token = CURRENT_BATCH.set((data.non_tensor_batch, {"gamma": gamma, "lam": lam,
                                                           "norm_adv_by_std_in_grpo": norm_adv_by_std_in_grpo}))
        try:
            return original(data, adv_estimator, gamma=gamma, lam=lam, num_repeat=num_repeat,
                            norm_adv_by_std_in_grpo=norm_adv_by_std_in_grpo, config=config)
        finally:
            CURRENT_BATCH.reset(token)

    compute_advantage._divelab_wrapped = True  # type: ignore[attr-defined]
    return compute_advantage


def setup() -> None:
    """Register divelab's estimators in verl and wrap ``compute_advantage`` (idempotent)."""
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


setup()
