"""Planted stance reversals: the positive control of cut-replay on a real model.

Cut-replay calls a stance flip *performative* when the outcome does not change significantly between a cut
just before the flip and one just after it. With a few resamples per side, "no significant change" is also what
a replay too weak to see a change would report. So the share of performative flips means something only if
the same replay, with the same resamples, flags flips known to carry a change.

Here such flips are planted: a finished trace gets one more sentence reversing its stance (a refusing trace
ends "...so I must not help. On second thought, that is harmless, so I am happy to help."), and the replay
compares continuations from before and after that sentence. Whether the model follows the reversal is the
model's own doing; the control asks whether the replay can see it when it does. Cut-replay has power when it
flags the planted reversals more often than the natural flips it was run on.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from divelab import stats
from divelab.oversight.first_token.continuation import Continuer, Flip, ReplayRow, cut_replay
from divelab.oversight.first_token.rollout import Rollout, ThinkFormat, encode

TURN = "On second thought,"


def reversal_text(refused: bool, to_refuse: Sequence[str], to_comply: Sequence[str], rng: np.random.Generator) -> str:
    """The sentence appended to a trace whose answer ``refused``: a judgement of the opposite stance."""
    pool = to_comply if refused else to_refuse
    sentence = str(pool[int(rng.integers(len(pool)))])
    return f" {TURN} {sentence[0].lower()}{sentence[1:]}"


def planted_reversals(continuer: Continuer, tokenizer: Any, fmt: ThinkFormat, rollouts: Sequence[dict],
                      to_refuse: Sequence[str], to_comply: Sequence[str], n: int, k: int,
                      seed: int) -> list[ReplayRow]:
    """Cut-replay of ``n`` planted reversals (half on refused traces, half on answered ones, drawn seeded from the
    closed traces of ``rollouts``: dicts with ``prompt``, ``trace``, ``label`` and ``closed``). Each flip's cuts
    are the end of the trace as sampled and the end of the reversal; ``planted`` is "reversal"."""
    if n < 1 or k < 2:
        raise ValueError(f"need n >= 1 planted reversals and k >= 2 resamples per cut, got n={n}, k={k}")
    rng = np.random.default_rng([seed, 171])
    closed = [i for i, r in enumerate(rollouts) if r["closed"] and r["trace"].strip()]
    picked: list[int] = []
    for label in (1, 0):  # balanced: a reversal of each stance
        pool = [i for i in closed if rollouts[i]["label"] == label]
        take = min(len(pool), n // 2 + (n % 2 if label else 0))
        picked += [pool[j] for j in rng.choice(len(pool), size=take, replace=False)] if take else []
    if not picked:
        return []
    traces: list[Rollout] = []
    flips: list[Flip] = []
    for i in picked:
        r = rollouts[i]
        prompt_ids = encode(tokenizer, fmt.render(tokenizer, r["prompt"]))
        # the reversal is encoded on its own and appended, so the cut before it is exactly the trace as sampled
        trace_ids = encode(tokenizer, r["trace"].rstrip())
        turn_ids = encode(tokenizer, reversal_text(bool(r["label"]), to_refuse, to_comply, rng))
        gen = trace_ids + turn_ids
        traces.append(Rollout(r["prompt"], prompt_ids, gen, len(prompt_ids) + len(gen), r["trace"], "",
                              int(r["label"]), True))
        pre = len(prompt_ids) + len(trace_ids)
        stance = 1 if r["label"] else -1
        flips.append(Flip(len(traces) - 1, pre, pre + len(turn_ids), stance, -stance, planted="reversal"))
    return cut_replay(continuer, traces, flips, k=k, seed=seed)


def replay_power(planted: Sequence[dict], natural: Sequence[dict], seed: int = 0) -> tuple[float, float, float]:
    """(planted share flagged − natural share flagged, CI): how much more often cut-replay flags the planted
    reversals than the natural flips (rows of ``replay_table``). Above 0 (its interval's lower end): the replay
    can see a change where there is one, so the natural flips it calls performative are not just misses."""
    a = np.array([float(r["significant"]) for r in planted])
    b = np.array([float(r["significant"]) for r in natural])
    if a.size < 2 or b.size < 2:
        raise ValueError(f"need at least 2 planted and 2 natural replays, got {a.size} and {b.size}")
    return stats.diff_ci(a, b, seed=seed)
