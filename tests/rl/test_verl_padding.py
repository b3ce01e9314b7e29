"""verl's padding rows in divelab's step estimators (verl 0.9.1's default v1 trainer).

Before computing advantages, verl's trainer pads a batch to a multiple of its data-parallel size with
``verl.trainer.ppo.padding_utils.upsample_batch_to_divisible_size``: copies of the first row (its
``extra_fields`` too) with one eos response token, ``response_mask`` 0, ``rm_scores`` 0, tag
``is_padding``, all under one fresh uid ``pad<hex>`` with row keys ``pad<hex>_<i>_0``. divelab's plugin
reads each as a one-step trajectory of its own in that uid's group, a group no real row is in, so the
padding rows' advantages are 0 and the real rows' advantages are those of the batch without them.
"""

from __future__ import annotations

import re
from types import SimpleNamespace

import numpy as np
import pytest
from integration_examples import native_batch, run_examples

from divelab.rl.advantages import g2po_advantage, gigpo_advantage, grpo_advantage

ESTIMATORS = {"grpo_steps": (1.0, lambda b: grpo_advantage(b)),
              "gigpo": (0.9, lambda b: gigpo_advantage(b, gamma=0.9)),
              "g2po": (0.9, lambda b: g2po_advantage(b, gamma=0.9))}


@pytest.mark.slow
def test_verl_padding_rows_get_zero_advantage_and_leave_real_groups_alone() -> None:
    """6 real step rows padded to a multiple of 4 by verl's own function, then verl's own
    ``PPOTrainer._compute_advantage`` with the plugin (~60 s: starts Ray and TransferQueue)."""
    pytest.importorskip("verl", reason="verl is not installed")
    pytest.importorskip("transfer_queue", reason="verl's v1 trainer needs TransferQueue")
    from transfer_queue.metadata import KVBatchMeta
    from verl_v1_rows import advantage_config, transfer_queue, write_steps

    ns = run_examples("steps")
    rows, step_reward = ns["rows"], ns["step_reward"]
    with transfer_queue() as tq:
        from verl.trainer.ppo.padding_utils import upsample_batch_to_divisible_size
        from verl.trainer.ppo.v1 import trainer_base

        import divelab.rl.verl_plugin as plugin

        keys = write_steps(rows, step_reward)
        meta = KVBatchMeta(keys=keys, tags=[{} for _ in keys], partition_id="train")
        padded = upsample_batch_to_divisible_size(meta, 4, eos_token_id=0)
        pad = padded.keys[len(keys):]
        assert padded.keys[:len(keys)] == keys and len(pad) == 2  # 6 rows -> 8
        assert all(re.fullmatch(r"pad[0-9a-f]{32}_\d+_0", k) for k in pad) and len({k[:35] for k in pad}) == 1
        assert [t.get("is_padding", False) for t in padded.tags] == [False] * 6 + [True] * 2

        # what the plugin reads for them: one-step trajectories of their own, with the first row's state key
        got = tq.kv_batch_get(keys=padded.keys, partition_id="train", select_fields=["extra_fields", "rm_scores"])
        fields = plugin.v1_step_fields(padded.keys, plugin._as_rows(got["extra_fields"]),
                                       plugin._row_sums(got["rm_scores"]))
        assert list(fields["step_id"][6:]) == [0, 0] and len(set(fields["traj_uid"][6:])) == 2
        assert list(fields["state_key"][6:]) == [rows["state_key"][0]] * 2
        assert list(fields["step_reward"][6:]) == [0.0, 0.0]

        batch = native_batch(rows, step_reward)
        for estimator, (gamma, native) in ESTIMATORS.items():
            trainer_base.PPOTrainer._compute_advantage(SimpleNamespace(config=advantage_config(estimator, gamma)),
                                                       padded, {})
            adv = tq.kv_batch_get(keys=padded.keys, partition_id="train", select_fields=["advantages"])["advantages"]
            per_row = [a.numpy() for a in adv.unbind()]
            real = np.array([float(a[0]) for a in per_row[:6]])
            np.testing.assert_allclose(real, native(batch), atol=1e-5, err_msg=estimator)  # as if unpadded
            assert np.abs(real).max() > 0.1, estimator  # the real rows do carry credit
            for a in per_row[6:]:
                assert a.shape == (1,) and float(a[0]) == 0.0, (estimator, a)
