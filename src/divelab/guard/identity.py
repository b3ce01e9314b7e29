"""Which model a probe was trained on, recorded in the probe file and checked against the served model.

A probe reads one hidden layer; on another model (or the same architecture with other weights, such as
the base model of a fine-tune) its weights mean nothing and its scores look plausible. The record holds
the architecture and a fingerprint of the weights up to the probed layer, so a mismatch is an error at
load time rather than a silent wrong score.
"""

from __future__ import annotations

from typing import Any

import torch

from divelab.cache import stable_hash

ARCH_KEYS = ("model_type", "vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
             "num_key_value_heads", "intermediate_size", "max_position_embeddings")


def _attr(config: Any, key: str) -> Any:
    value = getattr(config, key, None)
    return value if isinstance(value, bool | int | float | str) or value is None else str(value)


@torch.no_grad()
def model_identity(model: Any) -> dict[str, Any]:
    """Architecture (config keys) and a weights fingerprint: float64 sums of every parameter tensor, hashed.
    Any change of weights that moves a hidden state (a merged LoRA, another checkpoint) changes it."""
    config = model.config
    arch = {k: _attr(config, k) for k in ARCH_KEYS}
    sums = [(name, f"{float(p.detach().double().sum()):.10g}", f"{float(p.detach().double().abs().sum()):.10g}")
            for name, p in model.named_parameters()]
    return {"name_or_path": str(getattr(config, "_name_or_path", "") or ""), "architecture": arch,
            "weights": stable_hash(sums)}


def check_identity(saved: dict[str, Any], model: Any, where: str = "the probe") -> None:
    """Raise ValueError when ``saved`` (a :func:`model_identity` record) is not ``model``'s identity."""
    now = model_identity(model)
    was = saved.get("name_or_path") or "an unnamed model"
    name = now["name_or_path"] or type(model).__name__
    old, new = saved.get("architecture", {}), now["architecture"]
    arch = [f"{k} {old.get(k)} vs {new[k]}" for k in new if old.get(k) != new[k]]
    if arch:
        raise ValueError(f"{where} was trained on {was}, not on the served model {name}: {', '.join(arch)}; "
                         f"train a probe on this model (divelab first-token-probe probe-first-token --save-guard)")
    if saved.get("weights") != now["weights"]:
        raise ValueError(f"{where} was trained on {was}, whose weights differ from the served model {name} "
                         f"(same architecture, other weights: a fine-tune or its base?); train a probe on this "
                         f"model (divelab first-token-probe probe-first-token --save-guard)")
