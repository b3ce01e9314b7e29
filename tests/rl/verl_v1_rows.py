"""verl's v1 trainer's own row store for the tests: Ray and TransferQueue started locally, and the steps of
the docs' example written into it by verl's own agent-loop post-processing, as a rollout would."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from types import SimpleNamespace
from typing import Any


@contextmanager
def transfer_queue() -> Iterator[Any]:
    """Ray with TransferQueue's controller and one storage unit (a CPU each); yields the ``transfer_queue``
    module, closed and shut down afterwards."""
    import ray
    from omegaconf import OmegaConf

    ray.init(num_cpus=3, include_dashboard=False, log_to_driver=False)
    try:
        import transfer_queue as tq

        tq.init(OmegaConf.create({"backend": {"SimpleStorage": {"num_data_storage_units": 1}}}))
        try:
            yield tq
        finally:
            tq.close()
    finally:
        ray.shutdown()


def write_steps(rows: dict, step_reward: list[float], uid: str = "task-1") -> list[str]:
    """The trajectories of ``rows`` (the docs' step example) as one ``AgentLoopOutput`` per step
    (:func:`divelab.rl.verl_plugin.step_outputs`, reward on the last), put into TransferQueue by verl's
    ``AgentLoopWorkerTQ._agent_loop_postprocess``; returns verl's row keys ``{uid}_{session}_{index}``."""
    from verl.trainer.ppo.v1 import agent_loop_tq

    import divelab.rl.verl_plugin as plugin

    worker_cls = agent_loop_tq.AgentLoopWorkerTQ.__ray_metadata__.modified_class

    async def nothing(*args, **kwargs):  # no reward model, no teacher: the loop set the reward itself
        return None

    worker = SimpleNamespace(processor=None, _compute_score=nothing, _compute_teacher_logprobs=nothing)
    worker._compute_multi_modal_inputs = worker_cls._compute_multi_modal_inputs.__get__(worker)
    worker._compute_position_ids = worker_cls._compute_position_ids.__get__(worker)
    keys = []
    for session, traj in enumerate(dict.fromkeys(rows["traj_uid"])):
        idx = [i for i, t in enumerate(rows["traj_uid"]) if t == traj]
        steps = [{"prompt_ids": [1, 2, 3 + j], "response_ids": [4] * (2 + j), "state_key": rows["state_key"][i]}
                 for j, i in enumerate(idx)]
        outputs = plugin.step_outputs(steps, reward_score=sum(step_reward[i] for i in idx))
        asyncio.run(worker_cls._agent_loop_postprocess(worker, outputs, False, uid=uid, session_id=session,
                                                       global_steps=1))
        keys += [f"{uid}_{session}_{j}" for j in range(len(idx))]
    return keys


def advantage_config(estimator: str, gamma: float, n: int = 3) -> Any:
    """The part of verl's trainer config its ``PPOTrainer._compute_advantage`` reads."""
    from omegaconf import OmegaConf

    return OmegaConf.create({"algorithm": {"adv_estimator": estimator, "gamma": gamma, "lam": 1.0,
                                           "use_kl_in_reward": False, "norm_adv_by_std_in_grpo": True},
                             "actor_rollout_ref": {"rollout": {"n": n}}})
