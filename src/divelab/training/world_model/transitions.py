"""Transition data: logged (state, action) → next observation from any :class:`~divelab.envs.base.TextEnv`.

A *state* is what the world model reads and writes, as fields: the feedback sentence, the room
name, the inventory and the admissible commands (TextWorld observations ``"<feedback> | <room
description> | <inventory>"``; an observation of any other env is all feedback). Text is normalised
to lower-cased words and punctuation separated by spaces (what a word-level tokenizer sees), so a
model's output and the env's text compare exactly. ``reward`` is the env's reward of the step
(TextWorld: 1 on a win).

Transitions are collected by playing episodes (a step-capped episode's last step is left out) (uniform random play by default, or any
:class:`~divelab.rl.rollout.Policy`), and :func:`split_by_game` keeps test games unseen.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

from divelab.envs.base import EnvFactory

_WORD = re.compile(r"\w+|[^\w\s]+")
_ROOM = re.compile(r"-= (.*?) =-")
_NONCE = re.compile(r" \[session \w+ t=\d+\]$")
FIELDS = ("feedback", "room", "inventory", "actions", "reward")


def normalize(text: str) -> str:
    """Lower-cased words and punctuation runs joined by single spaces."""
    return " ".join(_WORD.findall(text.lower()))


@dataclass(frozen=True)
class State:
    """An observation as fields (all normalised) plus the admissible commands."""

    feedback: str
    room: str
    inventory: str
    actions: tuple[str, ...]

    @classmethod
    def from_observation(cls, observation: str, admissible: Sequence[str]) -> State:
        obs = _NONCE.sub("", observation)
        parts = obs.split(" | ")
        if len(parts) == 3:
            feedback, desc, inv = parts
            m = _ROOM.search(desc)
            room = m.group(1) if m else desc[:40]
        else:
            feedback, room, inv = obs, "", ""
        return cls(normalize(feedback), normalize(room), normalize(inv),
                   tuple(sorted(normalize(a) for a in admissible)))

    def observation(self) -> str:
        """Back to an observation string in the env's own layout (``compact_view`` reads it)."""
        if not self.room and not self.inventory:
            return self.feedback
        return f"{self.feedback} | -= {self.room} =- | {self.inventory}"


@dataclass(frozen=True)
class Transition:
    """One logged step: ``state`` --``action``--> ``next_state`` with ``reward``/``done``."""

    game_id: str
    episode: int
    depth: int  # steps taken before this one in its episode
    state: State
    action: str
    next_state: State
    reward: float
    done: bool

    def to_dict(self) -> dict:
        return asdict(self)


def collect_transitions(make_env: EnvFactory, game_ids: Sequence[str], episodes: int, max_steps: int,
                        seed: int = 0, policy=None) -> list[Transition]:
    """Play ``episodes`` episodes per game (uniform random choices, or ``policy``'s samples) and
    log every step. Deterministic for a seed."""
    if episodes < 1 or max_steps < 1:
        raise ValueError(f"need episodes >= 1 and max_steps >= 1, got {episodes}, {max_steps}")
    if not game_ids:
        raise ValueError("game_ids is empty; give at least one game")
    rng = np.random.default_rng(seed)
    out: list[Transition] = []
    ep_no = 0
    for gid in game_ids:
        base = make_env(gid)
        for _ in range(episodes):
            env = base.clone() if ep_no else base
            obs = env.reset(int(rng.integers(0, 2**31 - 1)))
            observations, actions = [obs], []
            state = State.from_observation(obs, env.admissible_actions())
            for depth in range(max_steps):
                cands = env.admissible_actions()
                if policy is None:
                    idx = int(rng.integers(len(cands)))
                else:
                    p = np.asarray(policy.action_probs(policy.context(observations, actions), cands), float)
                    idx = int(rng.choice(len(cands), p=p / p.sum()))
                nobs, reward, done, info = env.step(cands[idx])
                nxt = State.from_observation(nobs, [] if done else env.admissible_actions())
                if not (done and info.get("truncated", False)):
                    # a step-capped last step is not logged: its empty command list says "out of
                    # steps" (the sampler's cap), not anything about the world
                    out.append(Transition(gid, ep_no, depth, state, normalize(cands[idx]), nxt, float(reward),
                                          bool(done)))
                observations.append(nobs)
                actions.append(cands[idx])
                state = nxt
                if done:
                    break
            ep_no += 1
    return out


def split_by_game(transitions: Sequence[Transition], test_games: Sequence[str]
                  ) -> tuple[list[Transition], list[Transition]]:
    """(train, test): every transition of a game in ``test_games`` goes to test, so test games are
    never seen in training. Errors on an empty log or test games that are not in it."""
    if not transitions:
        raise ValueError("the environment log has no transitions")
    present = {t.game_id for t in transitions}
    missing = [g for g in test_games if g not in present]
    if missing:
        raise ValueError(f"test games {missing} are not in the log; it has: {', '.join(sorted(present))}")
    test = set(test_games)
    train = [t for t in transitions if t.game_id not in test]
    if not train:
        raise ValueError("every game of the log is a test game; nothing is left to train on")
    return train, [t for t in transitions if t.game_id in test]


def unique_transitions(transitions: Sequence[Transition]) -> list[Transition]:
    """One transition per distinct (game, state, action) (first occurrence kept)."""
    seen: set = set()
    out = []
    for t in transitions:
        k = (t.game_id, t.state, t.action)
        if k not in seen:
            seen.add(k)
            out.append(t)
    return out


def save_transitions(transitions: Sequence[Transition], path) -> None:
    """Write a JSONL environment log (one transition per line; atomic)."""
    import json

    from divelab.cache import atomic_write_text

    atomic_write_text(path, "".join(json.dumps(t.to_dict()) + "\n" for t in transitions))


def load_transitions(path) -> list[Transition]:
    """Read a JSONL log written by :func:`save_transitions` (or by hand: ``state``/``next_state`` are
    ``{"feedback", "room", "inventory", "actions"}``). Errors on a log with no transitions."""
    import json
    from pathlib import Path

    out = []
    for i, line in enumerate(Path(path).read_text().splitlines()):
        if not line.strip():
            continue
        try:
            d = json.loads(line)
            st, nx = (State(x["feedback"], x["room"], x["inventory"], tuple(x["actions"]))
                      for x in (d["state"], d["next_state"]))
            out.append(Transition(d["game_id"], int(d.get("episode", 0)), int(d.get("depth", 0)), st, d["action"],
                                  nx, float(d.get("reward", 0.0)), bool(d.get("done", False))))
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"{path}: line {i + 1} is not a transition ({exc!r}); expected keys game_id, state, "
                             "action, next_state[, reward, done, episode, depth]") from None
    if not out:
        raise ValueError(f"the environment log {path} has no transitions")
    return out
