"""divelab's estimators inside SkyRL's own advantage code (skyrl 0.3.0), as docs/engines/integrations.md shows."""

from __future__ import annotations

import inspect
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from integration_examples import native_batch as _native
from integration_examples import run_examples

from divelab.rl.advantages import g2po_advantage, grpo_advantage

SKYRL_VERSION = "0.3.0"
# skyrl 0.3.0, skyrl/backends/skyrl_train/utils/ppo_utils.py: the dispatcher every SkyRL trainer calls, and
# the keyword arguments it hands to a registered estimator (plus **kwargs forwarded unchanged)
DISPATCH_PARAMS = ["token_level_rewards", "response_mask", "index", "adv_estimator", "config", "values",
                   "grpo_norm_by_std", "gamma", "lambd", "kwargs"]
ESTIMATOR_CALL_KWARGS = {"token_level_rewards", "response_mask", "index", "values", "grpo_norm_by_std", "gamma",
                         "lambd", "config"}


def _skyrl():
    from divelab.rl.skyrl import import_skyrl

    try:
        ppo = import_skyrl()
        from importlib.metadata import version
    except Exception as exc:  # pragma: no cover - depends on the environment
        pytest.skip(f"skyrl not importable here: {type(exc).__name__}: {exc}")
    return ppo, version("skyrl")


def test_pinned_skyrl_call_signature() -> None:
    """Runs without SkyRL: the estimator call copied from skyrl 0.3.0's dispatcher."""
    from divelab.rl.verl import make_verl_estimator

    fn = make_verl_estimator("g2po")
    t = torch.zeros(2, 3)
    t[0, -1] = 1.0
    call = {"token_level_rewards": t, "response_mask": torch.ones(2, 3), "index": np.array(["u", "u"]),
            "values": None, "grpo_norm_by_std": True, "gamma": 1.0, "lambd": 1.0, "config": None}
    assert set(call) == ESTIMATOR_CALL_KWARGS
    with pytest.raises(ValueError, match="needs the per-row step fields"):
        fn(**call)
    with pytest.raises(ValueError, match="no GAE lambda"):
        fn(**{**call, "lambd": 0.95}, traj_uid=["a", "b"], step_id=[0, 0], state_key=["s", "s"])
    adv, _ = fn(**call, traj_uid=["a", "b"], step_id=[0, 0], state_key=["s", "s"])
    assert adv[0, 0] > 0 > adv[1, 0]


def test_skyrl_dispatcher_is_the_pinned_one() -> None:
    ppo, version = _skyrl()
    assert list(inspect.signature(ppo.compute_advantages_and_returns).parameters) == DISPATCH_PARAMS
    assert version == SKYRL_VERSION, f"checked against skyrl {SKYRL_VERSION}, found {version}: re-check the call"


def test_skyrl_g2po_vs_grpo_as_native() -> None:
    _skyrl()
    ns = run_examples("steps", "skyrl")
    batch = _native(ns["rows"], ns["step_reward"])
    sky = ns["sky"]
    want = g2po_advantage(batch, gamma=0.9) - grpo_advantage(batch)
    np.testing.assert_allclose((sky["g2po"] - sky["grpo_steps"]).numpy(), want, atol=1e-5)
    assert np.abs(want).max() > 0.1
    from divelab.rl.skyrl import register

    assert set(register()) <= set(ns["ppo_utils"].AdvantageEstimatorRegistry.list_available())  # idempotent


def test_skyrl_trainer_stepwise_mode_cannot_carry_steps() -> None:
    """SkyRL's own trainer method in step-wise mode: the estimator gets last steps only, no step fields."""
    _skyrl()
    from divelab.rl.skyrl import import_skyrl, register

    register()
    trainer_mod = import_skyrl("skyrl.train.trainer")
    batch_mod = import_skyrl("skyrl.backends.skyrl_train.training_batch")
    algo = import_skyrl("skyrl.train.config").AlgorithmConfig(advantage_estimator="g2po", gamma=0.9)
    rewards = torch.zeros(6, 3)
    rewards[1, -1] = 1.0
    data = batch_mod.TrainingInputBatch({"rewards": rewards, "response_mask": torch.ones(6, 3), "values": None})
    data.metadata = {"uids": ["task-1"] * 6, "is_last_step": [False, True] * 3, "avg_response_length": 3.0}
    stub = SimpleNamespace(cfg=SimpleNamespace(generator=SimpleNamespace(step_wise_trajectories=True),
                                               trainer=SimpleNamespace(algorithm=algo)), all_timings={})
    seen: list[dict] = []
    reg = import_skyrl().AdvantageEstimatorRegistry
    spy_name = "divelab_spy"
    if spy_name not in reg._functions:
        reg.register(spy_name, lambda **kw: (seen.append(kw), reg.get("g2po")(**kw))[1])
    algo.advantage_estimator = spy_name
    with pytest.raises(ValueError, match="needs the per-row step fields traj_uid, step_id, state_key"):
        trainer_mod.RayPPOTrainer.compute_advantages_and_returns(stub, data)
    (call,) = seen
    assert call["token_level_rewards"].shape[0] == 3  # 3 trajectories' last steps out of 6 steps
    assert not {"traj_uid", "step_id", "state_key", "non_tensor_batch"} & set(call)


def test_registered_estimators_survive_cloudpickle() -> None:
    """SkyRL ships registered estimators to its registry actor with cloudpickle; a closure over a ContextVar
    could not be pickled. Runs without SkyRL."""
    import cloudpickle

    from divelab.rl.verl import make_verl_estimator

    fn = make_verl_estimator("g2po", edge_weight=0.5)
    back = cloudpickle.loads(cloudpickle.dumps(fn))
    assert back == fn and back.__name__ == "divelab_g2po"
    t = torch.zeros(2, 3)
    t[0, -1] = 1.0
    kw = {"traj_uid": ["a", "b"], "step_id": [0, 0], "state_key": ["s", "s"]}
    np.testing.assert_allclose(back(t, torch.ones(2, 3), ["u", "u"], **kw)[0], fn(t, torch.ones(2, 3), ["u", "u"], **kw)[0])


@pytest.mark.slow
def test_skyrl_registry_synced_to_a_ray_worker_computes_there() -> None:
    """register() in the driver, a local Ray, SkyRL's own sync_registries(), then SkyRL's dispatcher inside a
    Ray worker that never called register() (~30 s: starts a local Ray)."""
    _skyrl()
    import ray

    from divelab.rl.skyrl import import_skyrl, register

    ppo = import_skyrl()
    register()
    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False)
    try:
        ppo.sync_registries()
        ns = run_examples("steps")
        rows, step_reward = ns["rows"], ns["step_reward"]

        @ray.remote
        def in_worker(rows: dict, step_reward: list) -> tuple[bool, list]:
            from divelab.rl import skyrl

            ppo = skyrl.import_skyrl()
            registered_here = bool(skyrl._ESTIMATORS)  # False: this process never called register()
            rewards = torch.zeros(6, 3)
            rewards[:, -1] = torch.tensor(step_reward)
            adv, _ = ppo.compute_advantages_and_returns(
                token_level_rewards=rewards, response_mask=torch.ones(6, 3), index=np.array(rows["uid"]),
                adv_estimator="g2po", config=None, gamma=0.9, lambd=1.0, grpo_norm_by_std=True,
                traj_uid=rows["traj_uid"], step_id=rows["step_id"], state_key=rows["state_key"])
            return registered_here, adv[:, 0].tolist()

        registered_here, adv = ray.get(in_worker.remote(rows, step_reward))
        assert not registered_here
        np.testing.assert_allclose(adv, g2po_advantage(_native(rows, step_reward), gamma=0.9), atol=1e-5)
    finally:
        ray.shutdown()
