"""divelab.rl.policy_gradient_loss: REINFORCE, the clipped surrogate, the k3 KL term, errors."""

from __future__ import annotations

import pytest
import torch

from divelab.rl import k3_kl, policy_gradient_loss


def test_reinforce_is_minus_advantage_times_logprob():
    lp = torch.tensor([-1.0, -2.0, -0.5], requires_grad=True)
    adv = torch.tensor([1.0, -0.5, 2.0])
    loss = policy_gradient_loss(lp, adv)
    assert float(loss) == pytest.approx(-(1 * -1 + -0.5 * -2 + 2 * -0.5) / 3)
    loss.backward()
    assert torch.allclose(lp.grad, -adv / 3)
    assert float(policy_gradient_loss(lp, adv, reduction="sum")) == pytest.approx(3 * float(loss))
    assert policy_gradient_loss(lp, adv, reduction="none").shape == (3,)


def test_clipped_surrogate_stops_the_gradient_outside_the_trust_region():
    old = torch.zeros(2)
    lp = torch.tensor([0.5, 0.05], requires_grad=True)  # ratios e^0.5 (clipped at 1.2) and e^0.05 (inside)
    adv = torch.ones(2)
    loss = policy_gradient_loss(lp, adv, old_logprobs=old, clip_eps=0.2, reduction="sum")
    loss.backward()
    assert float(loss) == pytest.approx(-(1.2 + torch.exp(torch.tensor(0.05)).item()))
    assert lp.grad[0] == 0 and lp.grad[1] == pytest.approx(-torch.exp(torch.tensor(0.05)).item())


def test_kl_term_is_k3_and_zero_at_the_reference():
    lp = torch.tensor([-1.0, -2.0])
    ref = torch.tensor([-1.5, -2.0])
    k = k3_kl(lp, ref)
    assert float(k[1]) == 0.0 and float(k[0]) == pytest.approx(torch.exp(torch.tensor(-0.5)).item() + 0.5 - 1)
    base = policy_gradient_loss(lp, torch.zeros(2), ref_logprobs=ref, kl_coef=0.1)
    assert float(base) == pytest.approx(0.1 * float(k.mean()))


def test_matches_the_grpo_trainers_formula():
    g = torch.Generator().manual_seed(0)
    lp, old, ref, adv = (torch.randn(16, generator=g) for _ in range(4))
    ratio = torch.exp(lp - old)
    pg = -torch.minimum(ratio * adv, torch.clamp(ratio, 0.8, 1.2) * adv)
    want = (pg + 0.02 * (torch.exp(ref - lp) - (ref - lp) - 1.0)).mean()
    got = policy_gradient_loss(lp, adv, old_logprobs=old, clip_eps=0.2, ref_logprobs=ref, kl_coef=0.02)
    assert torch.equal(got, want)


@pytest.mark.parametrize("kwargs, match", [
    ({"reduction": "max"}, "reduction must be one of mean, sum, none"),
    ({"old_logprobs": torch.zeros(2), "clip_eps": 1.5}, "clip_eps must be in"),
    ({"kl_coef": 0.1}, "kl_coef needs ref_logprobs"),
    ({"old_logprobs": torch.zeros(3)}, "old_logprobs has shape"),
])
def test_bad_arguments_are_named(kwargs, match):
    with pytest.raises(ValueError, match=match):
        policy_gradient_loss(torch.zeros(2), torch.ones(2), **kwargs)


def test_advantages_must_match_logprobs():
    with pytest.raises(ValueError, match="advantages has shape"):
        policy_gradient_loss(torch.zeros(2), torch.ones(2, 1))
