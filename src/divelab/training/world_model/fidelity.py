"""Fidelity: how well predicted next states match the real ones, and the rule-based RL reward.

AgentWorldBench scores predictions with an LLM judge (format, factuality, consistency, realism,
quality); here rule-based field scores stand in for it: exact match of the whole next state,
token F1 of the feedback / room / inventory fields, set F1 of the admissible commands
(admissible-action agreement) and reward accuracy, reported overall, per game and per step depth.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

from divelab.training.world_model.transitions import State, Transition


class Predictor(Protocol):
    def predict(self, queries: Sequence[tuple[State, str]]) -> Sequence[Any]:
        """One prediction (with ``.state``, ``.reward``, ``.well_formed``) per (state, action)."""
        ...


def token_f1(pred: str, true: str) -> float:
    p, t = Counter(pred.split()), Counter(true.split())
    if not p and not t:
        return 1.0
    common = sum((p & t).values())
    if common == 0:
        return 0.0
    prec, rec = common / sum(p.values()), common / sum(t.values())
    return 2 * prec * rec / (prec + rec)


def set_f1(pred: Sequence[str], true: Sequence[str]) -> float:
    p, t = set(pred), set(true)
    if not p and not t:
        return 1.0
    common = len(p & t)
    return 0.0 if common == 0 else 2 * common / (len(p) + len(t))


def field_scores(pred_state: State, pred_reward: float, t: Transition) -> dict[str, float]:
    n = t.next_state
    return {"feedback": token_f1(pred_state.feedback, n.feedback), "room": token_f1(pred_state.room, n.room),
            "inventory": token_f1(pred_state.inventory, n.inventory),
            "actions": set_f1(pred_state.actions, n.actions),
            "reward": float((pred_reward > 0) == (t.reward > 0))}


def fidelity_reward(pred: Any, t: Transition, flattery_penalty: float = 0.5) -> float:
    """The RL stage's reward: mean field score; -1 when off-format; minus ``flattery_penalty`` when
    it predicts a win that did not happen (a simulator that tells the agent it succeeded is the
    rule-based analogue of the judge flattery the paper had to redesign its reward against)."""
    if not pred.well_formed:
        return -1.0
    r = float(np.mean(list(field_scores(pred.state, pred.reward, t).values())))
    if pred.reward > 0 and t.reward <= 0:
        r -= flattery_penalty
    return r


def evaluate(predictor: Predictor, transitions: Sequence[Transition]) -> dict[str, Any]:
    """Per-transition scores (``rows``) plus means overall, per game and per depth."""
    if not transitions:
        raise ValueError("no transitions to evaluate on")
    preds = predictor.predict([(t.state, t.action) for t in transitions])
    rows = []
    for t, p in zip(transitions, preds, strict=True):
        f = field_scores(p.state, p.reward, t)
        exact = float(p.well_formed and p.state == t.next_state and (p.reward > 0) == (t.reward > 0))
        rows.append({"game": t.game_id, "depth": t.depth, "exact": exact, "f1": float(np.mean(list(f.values()))),
                     "well_formed": float(p.well_formed), "moved": t.state.room != t.next_state.room, **f})
    keys = ["exact", "f1", "feedback", "room", "inventory", "actions", "reward", "well_formed"]

    def means(rs: list[dict]) -> dict[str, float]:
        return {k: float(np.mean([r[k] for r in rs])) for k in keys} | {"n": len(rs)}

    by_game: dict[str, list] = defaultdict(list)
    by_depth: dict[int, list] = defaultdict(list)
    for r in rows:
        by_game[r["game"]].append(r)
        by_depth[r["depth"]].append(r)
    return {"overall": means(rows), "per_game": {g: means(v) for g, v in sorted(by_game.items())},
            "per_depth": {d: means(v) for d, v in sorted(by_depth.items())}, "rows": rows}


def outcome_decisions(world_model: Any, outcome: Any, transitions: Sequence[Transition],
                      goals: dict[str, str]) -> list[dict[str, Any]]:
    """Per transition (in order): its game, the simulator's win and episode-end decisions, decided exactly as
    :class:`SimulatedEnv` decides them (``outcome`` may be None: the world model's own reward token), and the
    real ones."""
    from divelab.training.world_model.simulator import simulate

    if not transitions:
        raise ValueError("no transitions to score the reward and terminal decisions on")
    by_game: dict[str, list[int]] = defaultdict(list)
    for i, t in enumerate(transitions):
        by_game[t.game_id].append(i)
    out: list[dict[str, Any]] = [{} for _ in transitions]
    for gid, idx in by_game.items():
        decided = simulate(world_model, outcome, goals[gid], [(transitions[i].state, transitions[i].action)
                                                              for i in idx])
        for i, (_, won, ended, _) in zip(idx, decided, strict=True):
            t = transitions[i]
            out[i] = {"game": gid, "reward": bool(won), "done": bool(ended), "true_reward": t.reward > 0,
                      "true_done": bool(t.done)}
    return out


def confusion(decisions: Sequence[dict[str, Any]]) -> dict[str, dict[str, int]]:
    """True/false positives and negatives per outcome (``reward``, ``done``) of :func:`outcome_decisions`."""
    counts = {k: {"tp": 0, "fp": 0, "fn": 0, "tn": 0} for k in ("reward", "done")}
    for d in decisions:
        for k in counts:
            pred, true = d[k], d["true_" + k]
            counts[k][("t" if pred == true else "f") + ("p" if pred else "n")] += 1
    return counts


def outcome_confusion(world_model: Any, outcome: Any, transitions: Sequence[Transition],
                      goals: dict[str, str]) -> dict[str, dict[str, int]]:
    """The simulator's win (``reward``) and episode-end (``done``) decisions against the real ones:
    true/false positives and negatives per outcome (see :func:`outcome_decisions`)."""
    return confusion(outcome_decisions(world_model, outcome, transitions, goals))
