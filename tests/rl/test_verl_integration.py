"""divelab's estimators inside verl's own ``compute_advantage`` (verl 0.9.1), as docs/engines/integrations.md shows."""

from __future__ import annotations

import inspect

import numpy as np
import pytest
import torch
from integration_examples import native_batch as _native
from integration_examples import run_examples

from divelab.rl.advantages import g2po_advantage, grpo_advantage

VERL_VERSION = "0.9.1"
# verl 0.9.1, verl/trainer/ppo/ray_trainer.py: the signature of compute_advantage, and the call it makes to a
# registered estimator (the `else:` branch): only these keyword arguments, never non_tensor_batch (GDPO excepted)
COMPUTE_ADVANTAGE_PARAMS = ["data", "adv_estimator", "gamma", "lam", "num_repeat", "norm_adv_by_std_in_grpo",
                            "config"]
ESTIMATOR_CALL_KWARGS = {"token_level_rewards", "response_mask", "config", "index"}


def _verl():
    try:
        import verl.trainer.ppo.ray_trainer as ray_trainer
        from verl import __version__
    except Exception as exc:  # pragma: no cover - depends on the environment
        pytest.skip(f"verl not importable here: {type(exc).__name__}: {exc}")
    return ray_trainer, __version__


def test_pinned_verl_call_signature() -> None:
    """Runs without verl: the call divelab's estimator must accept, copied from verl 0.9.1's source."""
    from divelab.rl.verl import make_verl_estimator

    fn = make_verl_estimator("g2po")
    t = torch.zeros(2, 3)
    t[0, -1] = 1.0
    kwargs = {"token_level_rewards": t, "response_mask": torch.ones(2, 3), "config": None,
              "index": np.array(["u", "u"], dtype=object)}
    assert set(kwargs) == ESTIMATOR_CALL_KWARGS
    with pytest.raises(ValueError, match="needs the per-row step fields traj_uid, step_id, state_key"):
        fn(**kwargs)  # exactly what verl passes: refused, not row-level GRPO
    adv, ret = fn(**kwargs, non_tensor_batch={"traj_uid": ["a", "b"], "step_id": [0, 0], "state_key": ["s", "s"]})
    assert adv.shape == (2, 3) and adv[0, 0] > 0 > adv[1, 0]


def test_verl_signature_is_the_pinned_one() -> None:
    ray_trainer, version = _verl()
    assert list(inspect.signature(ray_trainer.compute_advantage).parameters) == COMPUTE_ADVANTAGE_PARAMS
    assert version == VERL_VERSION, f"checked against verl {VERL_VERSION}, found {version}: re-check the call"


def test_verl_compute_advantage_g2po_vs_grpo_as_native() -> None:
    _verl()
    ns = run_examples("steps", "verl")
    rows, rewards, adv = ns["rows"], ns["step_reward"], ns["advantages"]
    batch = _native(rows, rewards)
    want = g2po_advantage(batch, gamma=0.9) - grpo_advantage(batch)
    got = (adv["g2po"] - adv["grpo_steps"]).numpy()
    np.testing.assert_allclose(got, want, atol=1e-5)
    assert np.abs(want).max() > 0.1  # the graph credit is really there
    np.testing.assert_allclose(adv["grpo_steps"].numpy(), grpo_advantage(batch), atol=1e-5)
    # T0 and T2 share s0 -> s1; the losing T2's first step is credited above T1's (which leads to s2)
    assert adv["g2po"][4] > adv["g2po"][2]
    assert adv["grpo_steps"][4] == pytest.approx(adv["grpo_steps"][2])


def test_verl_missing_step_fields_raise_inside_verl() -> None:
    _verl()
    ns = run_examples("steps", "verl", "verl-missing")
    assert "traj_uid, step_id, state_key" in ns["missing_error"] and "row-level GRPO" in ns["missing_error"]


def test_verl_options_honoured_or_rejected() -> None:
    ray_trainer, _ = _verl()
    from verl.trainer.config import AlgoConfig

    ns = run_examples("steps", "verl")
    make_batch, batch = ns["make_batch"], _native(ns["rows"], ns["step_reward"])
    for gamma in (0.5, 1.0):  # verl's gamma is the discount g2po uses
        d = ray_trainer.compute_advantage(make_batch(ns["rows"]), "g2po", gamma=gamma,
                                          config=AlgoConfig(adv_estimator="g2po", gamma=gamma))
        np.testing.assert_allclose(d.batch["advantages"][:, 0].numpy(), g2po_advantage(batch, gamma=gamma),
                                   atol=1e-5)
    d = ray_trainer.compute_advantage(make_batch(ns["rows"]), "grpo_steps", norm_adv_by_std_in_grpo=False,
                                      config=AlgoConfig(adv_estimator="grpo_steps", norm_adv_by_std_in_grpo=False))
    np.testing.assert_allclose(d.batch["advantages"][:, 0].numpy(), grpo_advantage(batch, norm_by_std=False),
                               atol=1e-6)
    with pytest.raises(ValueError, match="norm_adv_by_std_in_grpo/grpo_norm_by_std=False"):
        ray_trainer.compute_advantage(make_batch(ns["rows"]), "g2po", norm_adv_by_std_in_grpo=False,
                                      config=AlgoConfig(adv_estimator="g2po", norm_adv_by_std_in_grpo=False))
    with pytest.raises(ValueError, match="no GAE lambda"):
        ray_trainer.compute_advantage(make_batch(ns["rows"]), "g2po", lam=0.9,
                                      config=AlgoConfig(adv_estimator="g2po", lam=0.9))
    with pytest.raises(ValueError, match="does not discount"):
        ray_trainer.compute_advantage(make_batch(ns["rows"]), "grpo_steps", gamma=0.9,
                                      config=AlgoConfig(adv_estimator="grpo_steps", gamma=0.9))
    from divelab.rl.verl import make_verl_estimator

    with pytest.raises(ValueError, match="trainer's gamma is 1.0"):
        make_verl_estimator("g2po", gamma=0.95)(torch.zeros(1, 2), torch.ones(1, 2), ["u"], config=AlgoConfig(),
                                                traj_uid=["a"], step_id=[0], state_key=["s"])


@pytest.mark.slow
def test_documented_ray_hook_registers_in_worker_processes() -> None:
    """The one documented line (Ray's worker_process_setup_hook) registers the estimators in Ray workers,
    where verl's TaskRunner computes advantages (~30 s: starts a local Ray)."""
    _verl()
    import ray

    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False,
             runtime_env={"worker_process_setup_hook": "divelab.rl.verl_plugin.setup"})
    try:
        @ray.remote
        def probe() -> tuple[list[str], bool]:
            from verl.trainer.ppo import core_algos, ray_trainer

            names = sorted(k for k in ("g2po", "gigpo", "grpo_steps") if k in core_algos.ADV_ESTIMATOR_REGISTRY)
            return names, bool(getattr(ray_trainer.compute_advantage, "_divelab_wrapped", False))

        assert ray.get(probe.remote()) == (["g2po", "gigpo", "grpo_steps"], True)
    finally:
        ray.shutdown()


def test_v1_step_fields_from_verl_row_keys() -> None:
    """verl v1's row keys carry trajectory and step; verl's copy of the final reward goes to the last step."""
    from divelab.rl.verl_plugin import v1_step_fields

    keys = ["u-1_0_1", "u-1_0_0", "u-1_1_0"]
    extra = [{"state_key": ["s", 1]}, {"state_key": "s0"}, {"state_key": "s0", "reward_extra_info": {}}]
    f = v1_step_fields(keys, extra, [2.0, 2.0, 0.5])
    assert list(f["traj_uid"]) == ["u-1_0", "u-1_0", "u-1_1"] and list(f["step_id"]) == [1, 0, 0]
    assert f["state_key"][0] == ("s", 1)  # a key that travelled as a list is hashable again
    assert list(f["step_reward"]) == [2.0, 0.0, 0.5]
    with pytest.raises(ValueError, match=r"extra_fields\['state_key'\].*step_outputs"):
        v1_step_fields(keys, [{}, {}, {}], [0.0] * 3)
    with pytest.raises(ValueError, match="not '{uid}_{session_id}_{index}'"):
        v1_step_fields(["nounderscore"], [{"state_key": 1}], [0.0])


@pytest.mark.slow
def test_verl_default_v1_trainer_advantage_stage_on_its_own_rollout_rows() -> None:
    """verl's default trainer (trainer.use_v1=true): the agent loop's per-step outputs go through verl's own
    TransferQueue post-processing into its store, and verl's own ``PPOTrainer._compute_advantage`` reads them
    back and computes g2po; equal to the native estimator (~60 s: starts Ray and TransferQueue)."""
    _verl()
    pytest.importorskip("transfer_queue", reason="verl's v1 trainer needs TransferQueue")
    from types import SimpleNamespace

    from omegaconf import OmegaConf
    from verl_v1_rows import advantage_config, transfer_queue, write_steps

    with transfer_queue() as tq:
        from transfer_queue.metadata import KVBatchMeta
        from verl.trainer.ppo.v1 import trainer_base

        ns = run_examples("steps")
        rows, step_reward = ns["rows"], ns["step_reward"]
        keys = write_steps(rows, step_reward)
        meta = KVBatchMeta(keys=keys, tags=[{}] * len(keys), partition_id="train")
        advantages = {}
        for estimator, gamma in (("grpo_steps", 1.0), ("g2po", 0.9)):
            trainer_base.PPOTrainer._compute_advantage(SimpleNamespace(config=advantage_config(estimator, gamma)),
                                                       meta, {})
            got = tq.kv_batch_get(keys=keys, partition_id="train", select_fields=["advantages"])["advantages"]
            advantages[estimator] = np.array([float(a[0]) for a in got.unbind()])
        batch = _native(rows, step_reward)
        np.testing.assert_allclose(advantages["g2po"], g2po_advantage(batch, gamma=0.9), atol=1e-5)
        np.testing.assert_allclose(advantages["grpo_steps"], grpo_advantage(batch), atol=1e-5)
        cfg = OmegaConf.create({"algorithm": {"adv_estimator": "g2po", "gamma": 0.9, "lam": 1.0,
                                              "use_kl_in_reward": True}})
        with pytest.raises(ValueError, match="use_kl_in_reward=True cannot be combined"):
            trainer_base.PPOTrainer._compute_advantage(SimpleNamespace(config=cfg), meta, {})
