"""The policy-gradient loss of divelab's RL loops (GRPO's, and every REINFORCE-style fine-tune).

Per sample ``i`` with log-prob ``lp_i`` (differentiable) and advantage ``A_i``:

- without ``old_logprobs`` (on-policy REINFORCE): ``-A_i * lp_i``;
- with ``old_logprobs`` (PPO/GRPO clipped surrogate): ``-min(r_i A_i, clip(r_i, 1-eps, 1+eps) A_i)``
  with ``r_i = exp(lp_i - old_i)``;
- with ``ref_logprobs``: plus ``kl_coef`` times the k3 estimate of KL(pi || pi_ref),
  ``exp(d) - d - 1`` with ``d = ref_i - lp_i`` (:func:`k3_kl`).

>>> import torch
>>> lp = torch.log(torch.tensor([0.5, 0.25], requires_grad=True))
>>> float(policy_gradient_loss(lp, torch.tensor([1.0, -1.0])))   # mean of -A * lp
-0.34657...
"""

from __future__ import annotations

import torch

REDUCTIONS = ("mean", "sum", "none")


def k3_kl(logprobs: torch.Tensor, ref_logprobs: torch.Tensor) -> torch.Tensor:
    """Per-sample k3 estimate of KL(pi || pi_ref): ``exp(d) - d - 1``, ``d = ref - logprobs`` (>= 0)."""
    log_r = ref_logprobs - logprobs
    return torch.exp(log_r) - log_r - 1.0


def policy_gradient_loss(logprobs: torch.Tensor, advantages: torch.Tensor, *, old_logprobs: torch.Tensor | None = None,
                         clip_eps: float = 0.2, ref_logprobs: torch.Tensor | None = None, kl_coef: float = 0.0,
                         reduction: str = "mean") -> torch.Tensor:
    """The policy-gradient loss (see the module docstring); ``reduction``: ``mean``, ``sum`` or ``none``."""
    if reduction not in REDUCTIONS:
        raise ValueError(f"reduction must be one of {', '.join(REDUCTIONS)}, got {reduction!r}")
    for name, t in (("advantages", advantages), ("old_logprobs", old_logprobs), ("ref_logprobs", ref_logprobs)):
        if t is not None and t.shape != logprobs.shape:
            raise ValueError(f"{name} has shape {tuple(t.shape)} but logprobs has {tuple(logprobs.shape)}; "
                             "give one value per sample")
    if old_logprobs is None:
        per = -(advantages * logprobs)
    else:
        if not 0 < clip_eps < 1:
            raise ValueError(f"clip_eps must be in (0, 1), got {clip_eps}")
        ratio = torch.exp(logprobs - old_logprobs)
        per = -torch.minimum(ratio * advantages, torch.clamp(ratio, 1 - clip_eps, 1 + clip_eps) * advantages)
    if ref_logprobs is not None:
        per = per + kl_coef * k3_kl(logprobs, ref_logprobs)
    elif kl_coef:
        raise ValueError("kl_coef needs ref_logprobs (the reference policy's log-probs of the same samples)")
    if reduction == "mean":
        return per.mean()
    return per.sum() if reduction == "sum" else per
