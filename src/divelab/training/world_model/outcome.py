"""Reward and terminal heads: when does a simulated step win, and when does the episode end.

A language world model trained on random-play logs almost never writes a win (wins are a few per
cent of the transitions), so GRPO inside a simulator that relies on its ``[R]`` token sees no reward.
:class:`OutcomeModel` decides the two outcomes apart from the next-state text: one class-balanced
logistic regression per outcome (``reward``: the step wins; ``done``: the episode ends) on features
of (goal, state, action). The goal is the game's first observation, which the simulator is given
as the paper's simulator is given the goal; nothing of the real game is read at simulation time.

Features: the action's verb; how much of the action's object words the goal mentions, overall and
in its best-matching sentence (with that sentence's position from the end, since a quest's last
instruction is the one that wins); whether that sentence names the current room; and the exact
(goal, action) pair, which lets the heads remember the seen games' wins and near-misses (a lookup
table's job) while the other features are what can carry over to an unseen game.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence

import numpy as np
from sklearn.feature_extraction import DictVectorizer
from sklearn.linear_model import LogisticRegression

from divelab.cache import stable_hash
from divelab.training.world_model.transitions import State, Transition

OUTCOMES = ("reward", "done")
_SENTENCE = re.compile(r" [.!?] ")
# words that join an action's objects ("put x on y") and say nothing about which objects
_GLUE = {"with", "on", "in", "into", "from", "to", "the", "a"}


def game_goals(transitions: Sequence[Transition]) -> dict[str, str]:
    """Each game's goal: the feedback of its first state (an episode's depth-0 observation)."""
    goals = {t.game_id: t.state.feedback for t in transitions if t.depth == 0}
    missing = sorted({t.game_id for t in transitions} - set(goals))
    if missing:
        raise ValueError(f"games {missing} have no first-step transition to read their goal from")
    return goals


def shuffled_outcomes(transitions: Sequence[Transition], seed: int = 0) -> list[Transition]:
    """The transitions with their (reward, done) outcomes permuted among them (seeded): heads fitted on these
    learn nothing about when a step wins, yet say yes about as often. A sham for negative controls."""
    order = np.random.default_rng(seed).permutation(len(transitions))
    return [dataclasses.replace(t, reward=transitions[j].reward, done=transitions[j].done)
            for t, j in zip(transitions, order, strict=True)]


def features(goal: str, state: State, action: str) -> dict[str, float]:
    """The heads' input for one (goal, state, action); see the module docstring."""
    words = action.split()
    verb = words[0] if words else ""
    objects = set(words[1:]) - _GLUE
    f = {f"verb={verb}": 1.0, f"pair={stable_hash([goal, action], length=12)}": 1.0}
    sentences = [s.split() for s in _SENTENCE.split(goal) if s.strip()]
    if objects and sentences:
        overlap = [len(objects & set(s)) / len(objects) for s in sentences]
        best = int(np.argmax(overlap))
        from_end = min(len(sentences) - 1 - best, 4)
        f["shared_with_goal"] = len(objects & set(goal.split())) / len(objects)
        f["best_overlap"] = overlap[best]
        f[f"best_from_end={from_end}"] = overlap[best]
        f[f"verb={verb}&best_overlap"] = overlap[best]
        f["verb_in_best"] = float(verb in sentences[best])
        f["room_in_best"] = float(bool(state.room) and state.room in " ".join(sentences[best]))
    return f


class OutcomeModel:
    """Class-balanced logistic regressions for the step's win (``reward``) and the episode's end
    (``done``), fitted on logged transitions; ``goals`` maps game id → goal (default: read from
    the log's first steps). An outcome that never (or always) happens in the log is predicted as
    that constant."""

    def __init__(self, transitions: Sequence[Transition], goals: Mapping[str, str] | None = None,
                 seed: int = 0, threshold: float = 0.5) -> None:
        if not transitions:
            raise ValueError("no transitions to fit the reward and terminal heads on")
        if not 0.0 < threshold < 1.0:
            raise ValueError(f"threshold must be in (0, 1), got {threshold}")
        self.goals = dict(goals) if goals is not None else game_goals(transitions)
        unknown = sorted({t.game_id for t in transitions} - set(self.goals))
        if unknown:
            raise ValueError(f"no goal for games {unknown}; give goals= for every game of the log")
        self.threshold = threshold
        self.vectorizer = DictVectorizer()
        x = self.vectorizer.fit_transform([features(self.goals[t.game_id], t.state, t.action) for t in transitions])
        labels = {"reward": np.array([t.reward > 0 for t in transitions]),
                  "done": np.array([t.done for t in transitions])}
        self.positives = {k: int(y.sum()) for k, y in labels.items()}
        self.heads: dict[str, LogisticRegression | bool] = {}
        for k, y in labels.items():
            if y.all() or not y.any():
                self.heads[k] = bool(y[0])  # one class only: nothing to learn, predict it
            else:
                # balanced: each class weighs the same in the loss, so the rare wins are not ignored
                self.heads[k] = LogisticRegression(class_weight="balanced", max_iter=2000,
                                                   random_state=seed).fit(x, y)

    def probabilities(self, goal: str, queries: Sequence[tuple[State, str]]) -> dict[str, np.ndarray]:
        """P(win) and P(end) of each (state, action) in the game with this goal."""
        if not queries:
            return {k: np.zeros(0) for k in OUTCOMES}
        x = self.vectorizer.transform([features(goal, s, a) for s, a in queries])
        out = {}
        for k, head in self.heads.items():
            out[k] = (np.full(len(queries), float(head)) if isinstance(head, bool)
                      else head.predict_proba(x)[:, 1])
        return out

    def decide(self, goal: str, queries: Sequence[tuple[State, str]]) -> list[tuple[bool, bool]]:
        """(won, ended) per query; a predicted win always ends the episode."""
        p = self.probabilities(goal, queries)
        won = p["reward"] >= self.threshold
        return [(bool(w), bool(w or e >= self.threshold)) for w, e in zip(won, p["done"], strict=True)]
