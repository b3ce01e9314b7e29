"""The loop's three roles — advocate, arbiter, reviser — programmatic by default, any chat model optionally.

- An **advocate** proposes up to three experiments (designs + candidate metrics) where its own
  theory and the rival should differ; the loop checks each by simulation before running it.
- The **arbiter** reads both theories' losses over all observations and names the loser, with a
  verdict (``new_model``: keep the idea, change a parameter range; ``new_theory``: change the
  rule) and a diagnosis (the observation it misses most).
- The **reviser** rewrites the loser. The loop keeps its proposal only if it strictly lowers the
  loser's loss (the paper's accept gate) and differs from the rival.

The chat versions speak any :class:`divelab.chat.ChatModel` (an OpenAI-compatible endpoint, or
the scripted model in tests). They reply in JSON; bad replies are retried with the error shown
and, after the retries, fall back to the programmatic role (recorded in the trace).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

import numpy as np

from divelab.science.autocog.design import Proposal, adaptive_metrics, candidate_designs, random_designs
from divelab.science.autocog.metrics import LIBRARY, Metric, prefers
from divelab.science.autocog.task import Design, Task
from divelab.science.autocog.theory import Theory, neighbours


@dataclass
class AdvocateContext:
    own: Theory
    rival: Theory
    task: Task
    pool: np.ndarray
    rng: np.random.Generator
    n_pairs: int = 8
    n_trials: int = 96
    label: str = ""


@dataclass
class JudgeContext:
    theories: list[Theory]
    losses: list[float]
    per_obs: list[list[float]]  # per theory: normalised distance on each observation
    observations: list[dict]  # exp_id, metric, value
    stalled: bool = False  # no experiment this cycle could discriminate the two theories


@dataclass
class ReviseContext:
    rival: Theory
    loss: Callable[[Theory], float]
    diagnosis: str
    verdict: str
    observations: list[dict]
    discriminable: Callable[[Theory], bool] | None = None  # can an experiment tell it from the rival?
    notes: list[str] = field(default_factory=list)


class Advocate(Protocol):
    def propose(self, ctx: AdvocateContext) -> list[Proposal]: ...


class Arbiter(Protocol):
    def judge(self, ctx: JudgeContext) -> dict[str, Any]: ...


class Reviser(Protocol):
    def revise(self, loser: Theory, ctx: ReviseContext) -> Theory | None: ...


# ---------------------------------------------------------------- programmatic roles
@dataclass
class ProgrammaticAdvocate:
    """Designs from the disagreement ranking (``design="optimised"``) or at random (``"random"``, the
    blind-design ablation); metrics from the library plus the theory-derived adaptive metric."""

    design: str = "optimised"

    def __post_init__(self) -> None:
        if self.design not in ("optimised", "random"):
            raise ValueError(f"design must be 'optimised' or 'random', got {self.design!r}")

    def propose(self, ctx: AdvocateContext) -> list[Proposal]:
        if self.design == "random":
            designs = random_designs(ctx.pool, ctx.task, ctx.rng, n_pairs=ctx.n_pairs, n_trials=ctx.n_trials,
                                     label=ctx.label)
        else:
            designs, _ = candidate_designs(ctx.own, ctx.rival, ctx.pool, ctx.task, ctx.rng, n_pairs=ctx.n_pairs,
                                           n_trials=ctx.n_trials, label=ctx.label)
        return [Proposal(d, adaptive_metrics(ctx.own, ctx.rival), advocate=ctx.own.name) for d in designs]


@dataclass
class ProgrammaticArbiter:
    """The loser is the theory with the higher loss. Verdict ``new_theory`` when the cycle stalled (no
    experiment could separate the theories: the loser must become a *different* theory) or when the
    loser misses a history metric it has no term for; ``new_model`` otherwise."""

    def judge(self, ctx: JudgeContext) -> dict[str, Any]:
        loser = int(np.argmax(ctx.losses)) if ctx.losses[0] != ctx.losses[1] else 1
        d = ctx.per_obs[loser]
        worst = int(np.argmax(d)) if d else -1
        obs = ctx.observations[worst] if worst >= 0 else {}
        metric = str(obs.get("metric", ""))
        t = ctx.theories[loser]
        new_theory = ctx.stalled or ("repeat" in metric and t.kappa == (0.0, 0.0))
        diagnosis = (f"{t.name} misses {metric} on {obs.get('exp_id')} most (normalised distance {d[worst]:.2f})"
                     if d else "no observations yet")
        if ctx.stalled:
            diagnosis += "; no experiment separates the two theories: propose a different one"
        return {"loser": loser, "verdict": "new_theory" if new_theory else "new_model", "diagnosis": diagnosis}


@dataclass
class LocalSearchReviser:
    """Greedy local search in the grammar on the generative loss (no likelihood fitting)."""

    steps: int = 3
    explore_top: int = 40

    def revise(self, loser: Theory, ctx: ReviseContext) -> Theory | None:
        if ctx.verdict == "new_theory" and ctx.discriminable is not None:
            # explore: the best-scoring neighbour (up to two edits away) that an experiment can tell
            # apart from the rival; the loop accepts it within its exploration tolerance
            first = [c for c in neighbours(loser) if c.key != ctx.rival.key]
            cands = {c.key: c for c in first}
            for c in first:
                if c.structure()["cue_use"] == loser.cue_use and c.lexicographic == loser.lexicographic \
                        and c.order == loser.order:
                    continue  # two-edit moves only through a switch (keeps the neighbourhood small)
                for c2 in neighbours(c):
                    cands.setdefault(c2.key, c2)
            cands.pop(ctx.rival.key, None)
            cands.pop(loser.key, None)
            ranked = sorted(cands.values(), key=lambda c: (ctx.loss(c), c.key))
            for c in ranked[: self.explore_top]:
                if ctx.discriminable(c):
                    return replace(c, name=_revised_name(loser.name), verbal=c.describe())
        best, best_loss = loser, ctx.loss(loser)
        for _ in range(self.steps):
            cands = [c for c in neighbours(best) if c.key != ctx.rival.key]
            if not cands:
                break
            losses = [ctx.loss(c) for c in cands]
            i = int(np.argmin(losses))
            if losses[i] >= best_loss:
                break
            best, best_loss = cands[i], losses[i]
        if best is loser:
            return None
        return replace(best, name=_revised_name(loser.name), verbal=best.describe())


def _revised_name(name: str) -> str:
    m = re.fullmatch(r"(.*) r(\d+)", name)
    return f"{m.group(1)} r{int(m.group(2)) + 1}" if m else f"{name} r1"


# ---------------------------------------------------------------- chat roles
GRAMMAR_HELP = (
    "A theory is JSON with fields: name (str), cue_use (bool), order ('best'|'worst'), gamma (validity power "
    ">= 0; 0 = unit weights), alpha (utility exponent, u(x)=(x+1)^alpha; 1 = linear, <1 = diminishing), tau "
    "(difference exponent; 0 = compare signs only, i.e. tallying), lexicographic (bool; decide by the first "
    "discriminating cue, as take-the-best), kappa [lo, hi] (weight of repeating the last response), beta [lo, hi] "
    "(softmax sensitivity), eps [lo, hi] (lapse rate), verbal (str). P(left) = (1-eps)*sigmoid(beta*score + "
    "kappa*h) + eps/2.")


def _json_from(text: str) -> Any:
    m = re.search(r"\{.*\}", text, flags=re.S)
    if not m:
        raise ValueError("no JSON object in the reply")
    return json.loads(m.group(0))


def _ask(model: Any, prompt: str, parse: Callable[[Any], Any], retries: int, log: list[str]) -> Any:
    from divelab.chat import system, user

    msgs = [system("You are one agent in an automated cognitive-science loop. Reply with one JSON object."),
            user(prompt)]
    for attempt in range(retries + 1):
        reply = model.complete(msgs).message
        try:
            return parse(_json_from(reply.content))
        except (ValueError, TypeError, KeyError) as e:
            log.append(f"attempt {attempt + 1}: {e}")
            msgs += [reply, user(f"That reply was invalid: {e}. Reply again with one valid JSON object.")]
    return None


@dataclass
class ChatAdvocate:
    """Asks a chat model for designs: {"designs": [{"pairs": [[[A ratings], [B ratings]], ...],
    "metrics": [names]}]}; metric names from the library or "prefers" (the adaptive metric)."""

    model: Any
    retries: int = 2
    fallback: ProgrammaticAdvocate = field(default_factory=ProgrammaticAdvocate)
    log: list[str] = field(default_factory=list)

    def propose(self, ctx: AdvocateContext) -> list[Proposal]:
        prompt = (f"You advocate the theory {json.dumps(ctx.own.to_dict())} against the rival "
                  f"{json.dumps(ctx.rival.to_dict())}. Task: choose between two products rated by "
                  f"{ctx.task.n_features} experts (ratings 0..{ctx.task.rating_max}, validities "
                  f"{list(ctx.task.validities)}). Propose at most 3 experiments where your theory should win, each "
                  f"with {ctx.n_pairs} pairs or fewer and at most 4 metrics from {sorted(LIBRARY) + ['prefers']}. "
                  'Reply {"designs": [{"pairs": [[[A], [B]], ...], "metrics": [...]}]}.')

        def parse(obj: Any) -> list[Proposal]:
            designs = obj["designs"]
            if not isinstance(designs, list) or not designs:
                raise ValueError("'designs' must be a non-empty list")
            out = []
            for i, d in enumerate(designs[:3]):
                design = Design.from_arrays(ctx.task, np.asarray(d["pairs"], dtype=int), ctx.n_trials,
                                            f"{ctx.label}chat{i}")
                metrics: list[Metric] = []
                for name in d.get("metrics", [])[:4]:
                    if name == "prefers":
                        metrics.append(prefers(ctx.own, ctx.rival))
                    elif name in LIBRARY:
                        metrics.append(LIBRARY[name])
                    else:
                        raise ValueError(f"unknown metric {name!r}; allowed: {sorted(LIBRARY) + ['prefers']}")
                out.append(Proposal(design, metrics or adaptive_metrics(ctx.own, ctx.rival), advocate=ctx.own.name))
            return out

        props = _ask(self.model, prompt, parse, self.retries, self.log)
        if props is None:
            self.log.append("fell back to the programmatic advocate")
            return self.fallback.propose(ctx)
        return props


@dataclass
class ChatArbiter:
    """Asks a chat model which theory lost: {"loser": 0|1, "verdict": "new_model"|"new_theory", "diagnosis": str}."""

    model: Any
    retries: int = 2
    fallback: ProgrammaticArbiter = field(default_factory=ProgrammaticArbiter)
    log: list[str] = field(default_factory=list)

    def judge(self, ctx: JudgeContext) -> dict[str, Any]:
        lines = [f"theory {i}: {t.name}: {t.describe()}; loss {ctx.losses[i]:.3f}" for i, t in enumerate(ctx.theories)]
        obs = [f"{o['exp_id']} {o['metric']}: observed {o['value']:.3f}; distances "
               + ", ".join(f"{ctx.per_obs[i][k]:.2f}" for i in range(2)) for k, o in enumerate(ctx.observations)]
        prompt = ("Two theories compete; loss = mean normalised distance between each theory's simulated behaviour "
                  "and the observations (lower is better).\n" + "\n".join(lines) + "\nObservations:\n"
                  + "\n".join(obs) + '\nReply {"loser": 0 or 1, "verdict": "new_model" or "new_theory", '
                  '"diagnosis": "..."}.')

        def parse(obj: Any) -> dict[str, Any]:
            loser = obj["loser"]
            if loser not in (0, 1):
                raise ValueError(f"loser must be 0 or 1, got {loser!r}")
            if obj.get("verdict") not in ("new_model", "new_theory"):
                raise ValueError(f"verdict must be 'new_model' or 'new_theory', got {obj.get('verdict')!r}")
            return {"loser": int(loser), "verdict": obj["verdict"], "diagnosis": str(obj.get("diagnosis", ""))}

        out = _ask(self.model, prompt, parse, self.retries, self.log)
        if out is None:
            self.log.append("fell back to the programmatic arbiter")
            return self.fallback.judge(ctx)
        return out


@dataclass
class ChatReviser:
    """Asks a chat model for a successor theory in the grammar: {"theory": {...}} (retried on invalid code)."""

    model: Any
    retries: int = 3
    log: list[str] = field(default_factory=list)

    def revise(self, loser: Theory, ctx: ReviseContext) -> Theory | None:
        obs = "\n".join(f"{o['exp_id']} {o['metric']}: observed {o['value']:.3f}" for o in ctx.observations)
        prompt = (GRAMMAR_HELP + f"\nRevise this theory, which lost ({ctx.verdict}; {ctx.diagnosis}):\n"
                  + json.dumps(loser.to_dict()) + f"\nIts loss is {ctx.loss(loser):.3f}. Observations:\n{obs}\n"
                  'Reply {"theory": {...}}.')

        def parse(obj: Any) -> Theory:
            return Theory.from_dict(obj["theory"])

        cand = _ask(self.model, prompt, parse, self.retries, self.log)
        return cand
