"""Error compounding: run the simulator open-loop along real episodes and see how long it stays exact."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import numpy as np

from divelab.training.world_model.transitions import Transition


def compounding(world_model: Any, transitions: Sequence[Transition], max_depth: int,
                min_count: int = 10) -> dict[str, Any]:
    """Replay each logged episode's actions in the simulator, starting from the real first state
    and feeding it its own predictions. ``exact_by_depth[k]``: fraction of episodes whose simulated
    state after k steps equals the real one (an action the simulator does not offer counts as a
    miss from there on). ``first``/``last``: (depth, per-episode 0/1 array) at depth 1 and at the
    deepest depth with at least ``min_count`` episodes."""
    episodes: dict[tuple[str, int], list[Transition]] = defaultdict(list)
    for t in transitions:
        episodes[(t.game_id, t.episode)].append(t)
    eps = [sorted(v, key=lambda t: t.depth) for v in episodes.values()]
    eps = [e for e in eps if e[0].depth == 0]
    sim = [e[0].state for e in eps]
    alive = [True] * len(eps)
    per_depth: dict[int, list[float]] = {}
    for k in range(min(max_depth, max((len(e) for e in eps), default=0))):
        idx = [i for i, e in enumerate(eps) if len(e) > k]
        ask = [i for i in idx if alive[i] and eps[i][k].action in sim[i].actions]
        preds = world_model.predict([(sim[i], eps[i][k].action) for i in ask]) if ask else []
        got = dict(zip(ask, preds, strict=True))
        col = []
        for i in idx:
            p = got.get(i)
            ok = p is not None and p.well_formed and p.state == eps[i][k].next_state
            if p is None or not p.well_formed:
                alive[i] = False
            else:
                sim[i] = p.state
            col.append(float(ok))
        per_depth[k + 1] = col
    by = {k: float(np.mean(v)) for k, v in per_depth.items() if v}
    deep = [k for k, v in per_depth.items() if len(v) >= min_count]
    first = (1, np.array(per_depth[1])) if 1 in per_depth else None
    last = (max(deep), np.array(per_depth[max(deep)])) if deep and max(deep) > 1 else None
    return {"exact_by_depth": by, "first": first, "last": last}
