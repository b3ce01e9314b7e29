"""Synthetic function-calling tasks over the executable families of :mod:`divelab.envs.tool_families`.

A task is a question, the tools offered (the family asked about, under one of its names, among up to
``max_tools - 1`` other families), the call that answers it and what that call returns. A share of the
tasks (``irrelevant``) offers only other families: the right answer is then no call. Names with dots are
offered with underscores, as tool APIs require.

These are training and test material of ours for the tool-call format and for predicting a tool's result;
questions from a public benchmark (BFCL) never appear in them.

>>> from divelab.envs.tool_tasks import tasks
>>> t = tasks(3, seed=0)[0]
>>> t.question, [x.name for x in t.tools], t.call, t.result      # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from divelab.chat.types import ToolCall, ToolSpec
from divelab.envs.bfcl_run import tool_name
from divelab.envs.tool_families import FAMILIES, Family


@dataclass(frozen=True)
class ToolTask:
    id: str
    family: str
    """the key of the family the question is about"""
    question: str
    tools: tuple[ToolSpec, ...]
    call: ToolCall | None
    """the answering call; None when no offered tool fits"""
    result: dict[str, Any] | None
    """what the call returns (None with no call)"""


def _spec(f: Family, rng: np.random.Generator) -> ToolSpec:
    # offered as BFCL's functions are: dotted names (``math.gcd``) as the tool APIs allow them (``math_gcd``)
    return ToolSpec(tool_name(f.names[int(rng.integers(len(f.names)))]), f.description, f.schema())


def _say(v: Any) -> str:
    return ", ".join(str(x) for x in v) if isinstance(v, list) else str(v)


def tasks(n: int, seed: int, *, max_tools: int = 4, irrelevant: float = 0.15,
          families: Sequence[Family] = FAMILIES) -> list[ToolTask]:
    """``n`` seeded tasks: the asked family drawn uniformly, its arguments from its sampler, a question template
    and one of its names at random, 0..max_tools-1 distractor families in random order."""
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    if max_tools < 1 or len(families) < max_tools + 1:
        raise ValueError(f"max_tools must be in 1..{len(families) - 1}, got {max_tools}")
    if not 0 <= irrelevant < 1:
        raise ValueError(f"irrelevant must be in [0, 1), got {irrelevant}")
    rng = np.random.default_rng([seed, 1677])
    out = []
    for i in range(n):
        k = int(rng.integers(len(families)))
        fam = families[k]
        args = fam.sample(rng)
        question = fam.questions[int(rng.integers(len(fam.questions)))].format(
            **{a: _say(v) for a, v in args.items()})
        none_fits = bool(rng.random() < irrelevant)
        others = [j for j in range(len(families)) if j != k]
        n_other = int(rng.integers(1 if none_fits else 0, max_tools))
        picked = [families[int(j)] for j in rng.choice(others, size=n_other, replace=False)]
        target = None if none_fits else _spec(fam, rng)
        tools = [_spec(f, rng) for f in picked] + ([target] if target else [])
        order = rng.permutation(len(tools))
        call = None if target is None else ToolCall(target.name, dict(args))
        out.append(ToolTask(f"tool-{seed}-{i}", fam.key, question, tuple(tools[int(j)] for j in order), call,
                            None if call is None else fam.run(args)))
    return out
