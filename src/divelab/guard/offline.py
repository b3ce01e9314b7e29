"""Score prompts without a server: the forward ``divelab serve`` runs for one request, read the same way.

For ``prompt_last`` that is the prefill forward (prompt in, a fresh KV cache); for ``first`` the prefill
picks the first token greedily (or takes the one given) and one decoding step feeds it back, as plain
decoding does. A request served alone, without speculation, gets bit-for-bit the score computed here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from transformers import DynamicCache

from divelab.guard.probe_file import GuardProbe
from divelab.guard.tap import LayerTap


@dataclass(frozen=True)
class Scored:
    score: float
    flagged: bool
    first_token: int | None  # the token the ``first`` position read (None for ``prompt_last``)


@torch.no_grad()
def score_prompts(model: Any, probe: GuardProbe, prompts: Sequence[Sequence[int]],
                  first_tokens: Sequence[int] | None = None, tap: LayerTap | None = None) -> list[Scored]:
    """One score per token-id prompt, each run alone (batch of one, no padding). ``tap``: an existing tap on
    ``probe.layer`` to read through (a server's), else one is made and removed."""
    if first_tokens is not None and len(first_tokens) != len(prompts):
        raise ValueError(f"{len(first_tokens)} first tokens for {len(prompts)} prompts")
    dev = next(model.parameters()).device
    own = tap is None
    tap = tap or LayerTap(model, probe.layer)
    if tap.layer != probe.layer:
        raise ValueError(f"the tap reads layer {tap.layer}, the probe layer {probe.layer}")
    out: list[Scored] = []
    try:
        for k, prompt in enumerate(prompts):
            if not prompt:
                raise ValueError(f"prompt {k} is empty")
            seen: list[torch.Tensor] = []
            ids = torch.tensor([list(prompt)], dtype=torch.long, device=dev)
            cache = DynamicCache(config=model.config)
            pos = torch.arange(ids.shape[1], device=dev)[None]
            with tap.reading(lambda h, seen=seen: seen.append(h[:, -1].detach().double().cpu())):
                res = model(ids, position_ids=pos, cache=cache, use_cache=True)
            first = None
            if probe.position == "first":
                first = int(first_tokens[k]) if first_tokens is not None else int(res.logits[0, -1].argmax())
                seen.clear()
                step = torch.tensor([[first]], dtype=torch.long, device=dev)
                with tap.reading(lambda h, seen=seen: seen.append(h[:, 0].detach().double().cpu())):
                    model(step, position_ids=pos[:, -1:] + 1, cache=cache, use_cache=True)
            s = float(probe.scores(np.asarray(seen[-1]))[0])
            out.append(Scored(s, probe.flagged(s), first))
    finally:
        if own:
            tap.remove()
    return out
