"""Harvest hidden states from any HF causal LM: the first thinking token (every layer) and the
trace at normalised positions 0…100% (one layer, the last by default). Batched, cached on disk.

One forward pass per batch with ``output_hidden_states=True`` over the full sampled sequences
(right-padded: the model is causal, so real tokens never attend to padding).
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from divelab.cache import atomic_write_bytes, entry_path, stable_hash
from divelab.oversight.first_token.rollout import Rollout
from divelab.progress import track


@dataclass
class Activations:
    first: np.ndarray  # (n, n_layers + 1, d): hidden states at the first thinking token, embeddings first
    curve: np.ndarray  # (n, n_positions, d): hidden states of ``curve_layer`` at normalised trace positions
    positions: np.ndarray  # (n_positions,) in [0, 1]
    curve_layer: int
    # (n, n_layers + 1, d): hidden states at the last prompt token (the one that predicts the first thinking
    # token), so a probe can ask whether the decision is readable before the trace starts
    prompt_last: np.ndarray | None = None

    def layer(self, k: int | None = None, *, at: str = "first") -> np.ndarray:
        """States of layer ``k`` (None: the middle transformer layer) at the first thinking token
        (``at="first"``) or at the last prompt token (``at="prompt_last"``)."""
        states = {"first": self.first, "prompt_last": self.prompt_last}.get(at)
        if states is None:
            raise ValueError(f"at must be 'first' or 'prompt_last' (harvested), got {at!r}")
        n = states.shape[1]
        if k is None:
            k = (n - 1) // 2 + 1 if n > 2 else n - 1
        if not -n <= k < n:
            raise ValueError(f"layer {k} out of range; this model has hidden states 0..{n - 1}")
        return states[:, k, :]


def position_index(r: Rollout, t: float) -> int:
    """Absolute index of normalised trace position t: 0 → first thinking token, 1 → the close delimiter
    (the position that predicts the answer), or the last generated token when the trace never closed."""
    last = r.think_end if r.think_end < len(r.ids) else len(r.ids) - 1
    return r.think_start + round(t * (last - r.think_start))


def model_fingerprint(model: Any) -> str:
    """A cheap identity of a model's weights (config + a checksum of a few parameter tensors)."""
    params = list(model.parameters())
    picks = [params[0], params[len(params) // 2], params[-1]]
    sums = [float(p.detach().double().sum()) for p in picks] + [float(p.detach().double().abs().sum()) for p in picks]
    cfg = model.config.to_dict() if hasattr(model, "config") else {}
    cfg.pop("_name_or_path", None)
    return stable_hash({"cfg": cfg, "sums": [round(s, 6) for s in sums]})


@torch.no_grad()
def harvest(model: Any, rollouts: Sequence[Rollout], *, n_positions: int = 21, curve_layer: int = -1,
            batch_size: int = 32, cache: bool = True) -> Activations:
    """Hidden states of ``rollouts`` under ``model`` (see :class:`Activations`)."""
    if not rollouts:
        raise ValueError("no rollouts to harvest")
    if n_positions < 2:
        raise ValueError(f"n_positions must be >= 2, got {n_positions}")
    positions = np.linspace(0.0, 1.0, n_positions)
    key = stable_hash({"v": 2, "model": model_fingerprint(model), "ids": [r.ids for r in rollouts],
                       "ends": [r.think_end for r in rollouts], "P": n_positions, "layer": curve_layer})
    path = entry_path("first-token-acts", key + ".npz")
    if cache and path.exists():
        z = np.load(path)
        return Activations(z["first"], z["curve"], z["positions"], int(z["curve_layer"]), z["prompt_last"])
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    pad = getattr(getattr(model, "config", None), "pad_token_id", None) or 0
    firsts, lasts, curves = [], [], []
    try:
        for s in track(range(0, len(rollouts), batch_size), "harvesting activations"):
            chunk = rollouts[s:s + batch_size]
            width = max(len(r.ids) for r in chunk)
            ids = torch.full((len(chunk), width), int(pad), dtype=torch.long)
            mask = torch.zeros_like(ids)
            for i, r in enumerate(chunk):
                ids[i, : len(r.ids)] = torch.tensor(r.ids)
                mask[i, : len(r.ids)] = 1
            out = model(input_ids=ids.to(device), attention_mask=mask.to(device), output_hidden_states=True,
                        use_cache=False)
            hs = torch.stack(out.hidden_states, dim=1).float().cpu()  # (b, L+1, T, d)
            rows = torch.arange(len(chunk))
            starts = torch.tensor([r.think_start for r in chunk])
            firsts.append(hs[rows, :, starts, :].numpy())
            lasts.append(hs[rows, :, starts - 1, :].numpy())
            idx = torch.tensor([[position_index(r, t) for t in positions] for r in chunk])
            curves.append(hs[:, curve_layer][rows[:, None], idx].numpy())
    finally:
        model.train(was_training)
    acts = Activations(np.concatenate(firsts), np.concatenate(curves), positions,
                       curve_layer if curve_layer >= 0 else hs.shape[1] + curve_layer, np.concatenate(lasts))
    if cache:
        buf = io.BytesIO()
        np.savez(buf, first=acts.first, curve=acts.curve, positions=positions, curve_layer=acts.curve_layer,
                 prompt_last=acts.prompt_last)
        atomic_write_bytes(path, buf.getvalue())
    return acts
