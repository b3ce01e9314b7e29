"""The evaluator contract shared with OpenEvolve / ShinkaEvolve, and judges from outside.

- :class:`JudgeEvaluator` turns a frozen judge of a world into an OpenEvolve-style evaluator:
  ``evaluate(program) -> {"combined_score": ...}`` plus a cheap ``evaluate_stage1`` and
  ``cascade`` (stage 1, then the full evaluation only above a threshold), so a judge co-evolved
  here can drive those systems. ``program`` is a writer object or a path to a file of it (JSON for
  the controlled world, Python source for the program world).
- :class:`ExternalJudge` goes the other way: any ``evaluate(program)`` callable (returning a dict
  or an ``openevolve`` ``EvaluationResult``) becomes an accept rule ``score >= threshold``.
- :class:`ChatJudge` is a judge backed by any :mod:`divelab.chat` model: the item is rendered as
  text and the reply must contain ACCEPT or REJECT (anything else counts as reject, and is counted).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from divelab.chat.types import ChatModel, system, user


def _load_program(program: Any) -> Any:
    if isinstance(program, str | os.PathLike):
        with open(program) as f:
            return np.array(json.load(f), dtype=float)
    return program


@dataclass
class JudgeEvaluator:
    world: Any
    judge: Any
    n_items: int = 64
    n_stage1: int = 8
    seed: int = 0

    def _rate(self, program: Any, n: int) -> float:
        load = getattr(self.world, "load_program", None)  # a world may say how it reads a program file
        writer = load(program) if load is not None else _load_program(program)
        rng = np.random.default_rng(self.seed)
        return float(np.mean([self.world.accepts(self.judge, self.world.produce(writer, rng)) for _ in range(n)]))

    def evaluate(self, program: Any) -> dict[str, float]:
        return {"combined_score": self._rate(program, self.n_items), "n_items": float(self.n_items)}

    def evaluate_stage1(self, program: Any) -> dict[str, float]:
        return {"combined_score": self._rate(program, self.n_stage1), "n_items": float(self.n_stage1)}

    def cascade(self, program: Any, threshold: float = 0.5) -> dict[str, float]:
        """OpenEvolve's cascade: the full evaluation only if stage 1 reaches ``threshold``."""
        first = self.evaluate_stage1(program)
        if first["combined_score"] < threshold:
            return {**first, "stage": 1.0}
        return {**self.evaluate(program), "stage": 2.0}


def combined_score(result: Any) -> float:
    """``combined_score`` of a dict or an ``EvaluationResult``; else the mean of its numeric metrics."""
    metrics = getattr(result, "metrics", result)
    if not isinstance(metrics, dict):
        raise TypeError(f"an evaluator must return a dict of metrics or an EvaluationResult, got {type(result).__name__}")
    if "combined_score" in metrics:
        return float(metrics["combined_score"])
    vals = [float(v) for v in metrics.values() if isinstance(v, int | float) and not isinstance(v, bool)]
    if not vals:
        raise ValueError(f"evaluator returned no numeric metrics: {metrics!r}")
    return float(np.mean(vals))


@dataclass(frozen=True)
class ExternalJudge:
    """An OpenEvolve/ShinkaEvolve-style evaluator used as a judge: accept iff score >= threshold."""

    evaluate: Callable[[Any], Any]
    threshold: float = 0.5

    def accepts(self, item: Any) -> bool:
        return combined_score(self.evaluate(item)) >= self.threshold


PROMPT = ("You review short submissions. Reply with exactly one word: ACCEPT if the submission is good, "
          "REJECT otherwise.")


@dataclass
class ChatJudge:
    """A judge backed by a chat model; ``render`` turns an item into the text the model reads."""

    model: ChatModel
    render: Callable[[Any], str]
    prompt: str = PROMPT
    unparsed: int = 0
    calls: int = 0
    _cache: dict[str, bool] = field(default_factory=dict, repr=False)

    def accepts(self, item: Any) -> bool:
        text = self.render(item)
        if text not in self._cache:
            self.calls += 1
            reply = self.model.complete([system(self.prompt), user(text)], max_tokens=4).message.content.upper()
            if "ACCEPT" in reply:
                self._cache[text] = True
            else:
                self.unparsed += "REJECT" not in reply
                self._cache[text] = False
        return self._cache[text]


def source_bias(accepts: Callable[[Any], bool], pool: dict[str, list[Any]]) -> dict[str, float]:
    """Acceptance per source and the AI/human acceptance ratio (the reviewer-bias measure)."""
    if set(pool) != {"ai", "human"}:
        raise ValueError(f"pool must have sources 'ai' and 'human', got {sorted(pool)}")
    rate = {s: float(np.mean([accepts(x) for x in xs])) for s, xs in pool.items()}
    return {"accept_ai": rate["ai"], "accept_human": rate["human"],
            "ratio": rate["ai"] / rate["human"] if rate["human"] > 0 else float("inf")}
