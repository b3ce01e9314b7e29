"""Simple world models to beat: copy the current state, and a lookup table with an action-template fallback.

:class:`LookupWorldModel` is the n-gram-style baseline: an exact (state, action) seen in training
returns what followed it; otherwise the most frequent outcome *template* of the action's verb
(e.g. ``take X`` → inventory gains X, ``examine`` → state unchanged) rewritten for the current
object, and a copy of the state when the verb was never seen.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence

from divelab.training.world_model.model import Prediction
from divelab.training.world_model.transitions import State, Transition


def _verb(action: str) -> tuple[str, str]:
    head, _, rest = action.partition(" ")
    return head, rest


def _put(x: str, obj: str) -> str:
    return x.replace("<obj>", obj) if obj else x


class CopyWorldModel:
    """Predicts that nothing changes (feedback empty, reward 0)."""

    def predict(self, queries: Sequence[tuple[State, str]]) -> list[Prediction]:
        return [Prediction(State("", s.room, s.inventory, s.actions), 0.0, True, "") for s, _ in queries]


class LookupWorldModel:
    def __init__(self, transitions: Sequence[Transition]) -> None:
        if not transitions:
            raise ValueError("no transitions to build a lookup world model from")
        self.table: dict[tuple[State, str], tuple[State, float]] = {}
        templates: dict[str, Counter] = defaultdict(Counter)
        for t in transitions:
            self.table.setdefault((t.state, t.action), (t.next_state, t.reward))
            verb, obj = _verb(t.action)
            templates[verb][self._template(t, obj)] += 1
        self.templates = {v: c.most_common(1)[0][0] for v, c in templates.items()}

    @staticmethod
    def _template(t: Transition, obj: str) -> tuple:
        def sub(x: str) -> str:
            return x.replace(obj, "<obj>") if obj else x
        n, s = t.next_state, t.state
        return (sub(n.feedback), n.room == s.room, sub(n.inventory) if n.inventory != s.inventory else None,
                n.actions == s.actions, t.reward)

    def predict(self, queries: Sequence[tuple[State, str]]) -> list[Prediction]:
        out = []
        for s, a in queries:
            hit = self.table.get((s, a))
            if hit is not None:
                out.append(Prediction(hit[0], hit[1], True, ""))
                continue
            verb, obj = _verb(a)
            tpl = self.templates.get(verb)
            if tpl is None:
                out.append(Prediction(State("", s.room, s.inventory, s.actions), 0.0, True, ""))
                continue
            fb, _same_room, inv, _same_acts, r = tpl
            out.append(Prediction(State(_put(fb, obj), s.room, _put(inv, obj) if inv is not None else s.inventory,
                                        s.actions), r, True, ""))
        return out
