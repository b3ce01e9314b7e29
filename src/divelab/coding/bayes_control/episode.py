"""One refine / verify / ship episode: a controller acting on an environment, costs summed.

The same loop drives the replay (logged pools) and live mode (an LLM behind an endpoint); an
environment only has to offer the candidate-level operations below.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from divelab.coding.bayes_control.belief import BeliefModel
from divelab.coding.bayes_control.controllers import CRITIC, REFINE, SHIP, VERIFY, Controller, Costs, State


class Environment(Protocol):
    """What a controller can do to the current candidate."""

    available: tuple[bool, ...]  # critics that can run on this task, in cost order

    def critic(self, k: int) -> tuple[bool | None, str]: ...  # (passed, or None = abstained; feedback)

    def refine(self, feedback: str) -> None: ...

    def verify(self) -> bool: ...

    def shipped_correct(self) -> bool | None: ...  # ground truth where known (replay), else None


@dataclass
class EpisodeResult:
    utility: float
    cost: float
    shipped_correct: bool | None
    verified: bool  # the shipped candidate passed the verifier
    actions: list[str] = field(default_factory=list)
    beliefs: list[float] = field(default_factory=list)


def next_available(avail: tuple[bool, ...], start: int) -> int | None:
    for k in range(start, len(avail)):
        if avail[k]:
            return k
    return None


def run_episode(controller: Controller, env: Environment, model: BeliefModel, costs: Costs,
                max_steps: int = 8) -> EpisodeResult:
    b = model.prior
    avail = env.available
    k = next_available(avail, 0)
    obs: tuple[bool, ...] = ()
    known_wrong = False
    spent = 0.0
    actions: list[str] = []
    beliefs = [b]
    feedback: list[str] = []
    budget = max_steps  # refinements + verifications; critics are cheap programs and do not count
    while True:
        state = State(belief=b, next_critic=k, steps_left=budget, observations=obs,
                      known_wrong=known_wrong, available=avail)
        action, arg = controller.act(state) if budget > 0 else (SHIP, None)
        actions.append(action if arg is None else f"{action}:{arg}")
        if action == SHIP:
            break
        if action == VERIFY:
            budget -= 1
            spent += costs.verify
            if env.verify():
                actions.append("ship")
                return EpisodeResult(costs.reward - spent, spent, True, True, actions, beliefs)
            b, known_wrong, k = 0.0, True, None
            feedback.append("the hidden test suite failed")
        elif action == CRITIC:
            if arg is None or k is None or arg != k:
                raise ValueError(f"controller {controller.name!r} asked for critic {arg}, next available is {k}")
            spent += costs.critics[arg]
            passed, fb = env.critic(arg)
            if passed is not None:
                b = model.critics[arg].posterior(b, passed)
                obs = (*obs, passed)
                if not passed and fb:
                    feedback.append(fb)
            k = next_available(avail, arg + 1)  # each critic runs at most once per candidate
        elif action == REFINE:
            budget -= 1
            spent += costs.refine
            env.refine("\n".join(feedback))
            b = model.refine.next_belief(b)
            k, obs, known_wrong, feedback = next_available(avail, 0), (), False, []
        else:
            raise ValueError(f"unknown action {action!r}; allowed: ship, verify, refine, critic")
        beliefs.append(b)
    correct = env.shipped_correct()
    value = 0.0 if correct is None else (costs.reward if correct else -costs.loss)
    return EpisodeResult(value - spent, spent, correct, False, actions, beliefs)
