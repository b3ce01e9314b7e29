"""divelab's estimators in SkyRL's ``AdvantageEstimatorRegistry`` (checked against ``skyrl`` 0.3.0).

``register()`` adds ``grpo_steps``, ``gigpo`` and ``g2po`` (the functions of
:func:`divelab.rl.verl.make_verl_estimator`) to SkyRL's registry. SkyRL's dispatcher
``ppo_utils.compute_advantages_and_returns(token_level_rewards, response_mask, index, adv_estimator,
config, values=None, grpo_norm_by_std=True, gamma=1.0, lambd=1.0, **kwargs)`` forwards ``gamma``,
``lambd`` and ``grpo_norm_by_std`` (honoured or rejected, see :mod:`divelab.rl.verl`) and any extra
keyword arguments, so step fields passed as ``traj_uid=``/``step_id=``/``state_key=`` reach the estimator.

What SkyRL 0.3.0's trainer cannot carry (``RayPPOTrainer.compute_advantages_and_returns``):

- **step-wise mode** (``generator.step_wise_trajectories=True``) calls the estimator on the *last step
  of each trajectory only*, with an all-ones mask, and broadcasts one advantage per trajectory to all
  its steps. A per-step advantage (``gigpo``, ``g2po``) cannot be expressed through that branch, and
  no trajectory/state information is passed. divelab's estimators therefore raise there (naming the
  missing step fields) instead of degrading to GRPO on last steps.
- **trajectory mode** (the default) passes one row per whole trajectory and no per-step fields; the
  estimators raise the same error. Use ``grpo``/``rloo`` (SkyRL's own) there, or subclass the trainer
  and pass the step fields to ``compute_advantages_and_returns`` yourself.

Registry and processes: SkyRL keeps registrations in a named Ray actor; ``register()`` before
``ray.init`` is local, and SkyRL's ``sync_registries()`` (called in its entrypoint after Ray starts)
cloudpickles them into that actor, from which every worker loads them. The estimators are instances
of the module-level class :class:`divelab.rl.verl.VerlEstimator` (no closure, no captured context
variable), so they pickle by reference and a worker only needs divelab importable. Call
:func:`register` in your entry script before SkyRL's entrypoint.

Python 3.11: ``import skyrl.backends`` fails on Python < 3.12 in 0.3.0 (``skyrl/tinker/types.py``
declares a pydantic model field with ``typing.TypedDict``, which pydantic 2 rejects before 3.12).
:func:`import_skyrl` imports it with ``typing.TypedDict`` temporarily pointing at
``typing_extensions.TypedDict``, which is what pydantic asks for.
"""

from __future__ import annotations

import importlib
import sys
import typing
from types import ModuleType
from typing import Any

from divelab.rl.verl import make_verl_estimator

SKYRL_NAMES = {"grpo_steps": "grpo", "gigpo": "gigpo", "g2po": "g2po"}
PPO_UTILS = "skyrl.backends.skyrl_train.utils.ppo_utils"
_ESTIMATORS: dict[str, Any] = {}


def import_skyrl(module: str = PPO_UTILS) -> ModuleType:
    """Import a SkyRL module, working around 0.3.0's ``typing.TypedDict`` on Python < 3.12."""
    if module in sys.modules or sys.version_info >= (3, 12):
        return importlib.import_module(module)
    import typing_extensions

    original = typing.TypedDict
    typing.TypedDict = typing_extensions.TypedDict  # type: ignore[misc]
    try:
        return importlib.import_module(module)
    finally:
        typing.TypedDict = original  # type: ignore[misc]


def register() -> list[str]:
    """Register divelab's estimators in SkyRL's registry (idempotent); returns the names."""
    ppo = import_skyrl()
    reg = ppo.AdvantageEstimatorRegistry
    for sky_name, name in SKYRL_NAMES.items():
        fn = _ESTIMATORS.setdefault(sky_name, make_verl_estimator(name))
        if sky_name in reg._functions and reg._functions[sky_name] is fn:
            continue
        reg.register(sky_name, fn)
    return list(SKYRL_NAMES)
