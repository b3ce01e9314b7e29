"""The policy: a tiny ``transformers`` Llama LM that reads the walk so far and emits the next move.

The walk is written as tokens ``obs, move, obs, move, …, obs`` in a 15-token vocabulary of our own
(no BPE: the maze's observations and moves are the whole language). The LM's next-token
distribution restricted to the moves legal at the current observation (renormalised) is the
policy, so illegal moves are never sampled and every log-probability is over legal moves only.

The context is the current attempt (a restart ``R`` begins a fresh one, like sampling a new chain
of thought) and at most ``window`` tokens of it, so memory of tried exits comes only from the
history the LM reads. Rollouts run many walkers in one batch; they are seeded end to end.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
import torch

from divelab.envs.maze import (
    MAX_BRANCHING,
    MOVE_TOKENS,
    OBS_TOKENS,
    Maze,
    MazeWalker,
    exit_token,
    legal_actions,
)

VOCAB: tuple[str, ...] = ("<pad>", *OBS_TOKENS, *MOVE_TOKENS, *(exit_token(i) for i in range(MAX_BRANCHING)))
TOKEN_ID: dict[str, int] = {t: i for i, t in enumerate(VOCAB)}
PAD_ID = 0
DEFAULT_WINDOW = 127  # odd, so a window that ends at an observation also starts at one


@dataclass
class Segment:
    """One attempt (the context between restarts): tokens plus where the moves are."""

    tokens: list[int] = field(default_factory=list)
    action_pos: list[int] = field(default_factory=list)  # index in ``tokens`` of each move
    backward: list[bool] = field(default_factory=list)  # was the state before that move backward-facing


@dataclass
class Episode:
    maze: Maze
    segments: list[Segment]
    success: bool
    steps: int

    @property
    def n_actions(self) -> int:
        return sum(len(s.action_pos) for s in self.segments)

    def backward_flags(self) -> list[bool]:
        return [b for s in self.segments for b in s.backward]


def legal_mask(L: int) -> torch.Tensor:
    """(vocab, vocab) additive mask: row = observation token id, 0 on its legal moves, -inf elsewhere."""
    m = torch.full((len(VOCAB), len(VOCAB)), float("-inf"))
    for obs in OBS_TOKENS:
        for a in legal_actions(obs, L):
            m[TOKEN_ID[obs], TOKEN_ID[a]] = 0.0
    return m


@lru_cache(maxsize=1)
def _mask_table() -> torch.Tensor:
    """legal_mask for every branching, indexed [L, obs]: (MAX_BRANCHING + 1, vocab, vocab)."""
    return torch.stack([legal_mask(max(L, 2)) for L in range(MAX_BRANCHING + 1)])


def window_mask(T: int, window: int) -> torch.Tensor:
    """(T, T) boolean attention mask of the sliding-window policy: a token sees the tokens of its
    own (move, observation) pair and those up to ``window`` - 1 before the pair's observation.
    Positions are segment positions (observations even, moves odd). This is exactly what the
    incremental rollout computes, so training scores moves on the contexts the rollout used."""
    i = torch.arange(T)
    pair_end = i + (i % 2)  # a move's pair ends at the next (observation) token
    return (i[None, :] <= i[:, None]) & (i[None, :] > pair_end[:, None] - window)


def forward_rows(model: torch.nn.Module, rows: list[list[int]], window: int) -> torch.Tensor:
    """Logits (rows, T, vocab) of right-padded segment rows under the sliding-window mask (causal,
    so real tokens never see the pads)."""
    n = max(len(r) for r in rows)
    ids = torch.full((len(rows), n), PAD_ID, dtype=torch.long)
    for i, r in enumerate(rows):
        ids[i, : len(r)] = torch.tensor(r)
    if n < window:  # the window never binds: plain causal attention (the fast path)
        return model(input_ids=ids, use_cache=False).logits
    mask = window_mask(n, window)[None, None].expand(len(rows), 1, n, n)
    return model(input_ids=ids, attention_mask=mask, use_cache=False).logits


@dataclass(frozen=True)
class Explorer:
    """The scripted exploratory walker whose traces the base model imitates.

    It explores by *resampling*, the way a pretrained model explores by drawing fresh attempts:
    a uniform exit at every junction, forward along corridors, and at a dead end it usually gives
    up and restarts (``R``); with probability ``back_prob`` it backs out instead, and then keeps
    walking back to the junction. Every move is replaced by a uniformly random legal one with
    probability ``noise``, so every move stays in the base's support."""

    back_prob: float = 0.15
    noise: float = 0.05

    def __post_init__(self) -> None:
        for name in ("back_prob", "noise"):
            v = getattr(self, name)
            if not 0.0 <= v <= 1.0:
                raise ValueError(f"Explorer.{name} must be in [0, 1], got {v}")

    def move_probs(self, walker: MazeWalker) -> torch.Tensor:
        obs = walker.observation()
        legal = legal_actions(obs, walker.spec.L)
        p = torch.zeros(len(VOCAB))
        last = walker.history[-1] if walker.history else None
        if obs in ("S", "J"):
            for i in range(walker.spec.L):
                p[TOKEN_ID[exit_token(i)]] = 1.0 / walker.spec.L
        elif obs == "C":
            p[TOKEN_ID["B" if last == "B" else "F"]] = 1.0
        elif obs == "D":
            p[TOKEN_ID["B"]], p[TOKEN_ID["R"]] = self.back_prob, 1.0 - self.back_prob
        for a in legal:
            p[TOKEN_ID[a]] = (1 - self.noise) * p[TOKEN_ID[a]] + self.noise / len(legal)
        return p


def _drop_older_than_window(past, extra: int) -> int:
    """Drop the ``extra`` oldest tokens of the KV cache (none if ``extra`` <= 0); returns how many went.

    Every later step masks tokens older than the window for every walker, so keeping them changes no
    logit but makes each step cost grow with the walk: a 4,000-step walk would attend over 8,000 cached
    tokens (and copy them at every step) to use the last ``window``. Positions are passed explicitly and
    rotary keys are cached already rotated, so the kept tokens need no renumbering."""
    if extra <= 0:
        return 0
    for layer in past.layers:
        layer.keys = layer.keys[:, :, extra:]
        layer.values = layer.values[:, :, extra:]
    return extra


def rollout(
    model: torch.nn.Module | Explorer | None,
    mazes: list[Maze],
    cap: int,
    seed: int,
    window: int = DEFAULT_WINDOW,
    temperature: float = 1.0,
) -> list[Episode]:
    """Walk every maze until the goal or ``cap`` steps with the LM policy ``model`` (or a scripted
    :class:`Explorer`; ``None`` is the uniform random walk).

    The LM runs incrementally with its KV cache: each step feeds (move, observation) for every
    walker, and an attention mask hides what lies outside a walker's context (before its latest
    restart, or older than ``window`` tokens); the cache keeps only the last ``window`` tokens, so a
    step costs the same however long the walk. Llama's rotary positions are relative, so this is
    the same computation as re-reading the context from scratch (checked in the tests)."""
    if cap < 1:
        raise ValueError(f"cap must be >= 1, got {cap}")
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    if window < 1 or window % 2 == 0:
        raise ValueError(f"window must be an odd number of tokens >= 1, got {window}")
    gen = torch.Generator().manual_seed(int(seed))
    walkers = [MazeWalker(m) for m in mazes]
    B = len(walkers)
    segs: list[list[Segment]] = [[Segment(tokens=[TOKEN_ID[w.observation()]])] for w in walkers]
    masks = {L: legal_mask(L) for L in {m.spec.L for m in mazes}}
    seg_start = torch.zeros(B, dtype=torch.long)  # position where each walker's context begins
    new_ids = torch.tensor([[s[0].tokens[0]] for s in segs])
    n = 0  # tokens fed so far (the position after the newest)
    first = 0  # position of the oldest token still in the cache
    past = None
    active = [i for i, w in enumerate(walkers) if not w.done]
    while active:
        if model is None:
            logits = torch.zeros(B, len(VOCAB))
        elif isinstance(model, Explorer):
            logits = torch.stack([model.move_probs(w).log() for w in walkers])
        else:
            n += new_ids.shape[1]
            pos = torch.arange(n - new_ids.shape[1], n)
            lo = torch.maximum(seg_start, torch.tensor(n - window))
            attn = (torch.arange(first, n)[None, :] >= lo[:, None]).long()
            with torch.no_grad():
                out = model(
                    input_ids=new_ids, attention_mask=attn, position_ids=pos[None].expand(B, -1),
                    cache=past, use_cache=True,
                )
            past = out.cache  # a transformers Cache (DynamicCache): the window is cut from its layers below
            first += _drop_older_than_window(past, n - first - window)
            logits = out.logits[:, -1].float()
        idx = torch.tensor(active)
        obs_ids = [segs[i][-1].tokens[-1] for i in active]
        mask = torch.stack([masks[walkers[i].spec.L][o] for i, o in zip(active, obs_ids, strict=True)])
        probs = torch.softmax(logits[idx] / temperature + mask, dim=-1)
        moves = torch.multinomial(probs, 1, generator=gen).squeeze(1).tolist()
        new_ids = torch.full((B, 2), PAD_ID, dtype=torch.long)
        still = []
        for i, a in zip(active, moves, strict=True):
            w, seg = walkers[i], segs[i][-1]
            seg.backward.append(w.backward_facing())
            seg.action_pos.append(len(seg.tokens))
            seg.tokens.append(a)
            obs = TOKEN_ID[w.step(VOCAB[a])]
            new_ids[i, 0], new_ids[i, 1] = a, obs
            if VOCAB[a] == "R":  # a fresh attempt, a fresh context (starting at the new observation)
                segs[i].append(Segment(tokens=[obs]))
                seg_start[i] = n + 1
            else:
                seg.tokens.append(obs)
            if not w.done and w.steps < cap:
                still.append(i)
        active = still
    return [
        Episode(maze=w.maze, segments=s, success=w.done, steps=w.steps) for w, s in zip(walkers, segs, strict=True)
    ]


def rollout_reference(
    model: torch.nn.Module, mazes: list[Maze], cap: int, seed: int, window: int = DEFAULT_WINDOW
) -> list[Episode]:
    """The same walks as :func:`rollout`, re-reading every segment from scratch under
    :func:`window_mask` (slow; the tests check the two agree)."""
    gen = torch.Generator().manual_seed(int(seed))
    walkers = [MazeWalker(m) for m in mazes]
    segs = [[Segment(tokens=[TOKEN_ID[w.observation()]])] for w in walkers]
    masks = {L: legal_mask(L) for L in {m.spec.L for m in mazes}}
    active = [i for i, w in enumerate(walkers) if not w.done]
    while active:
        with torch.no_grad():
            full = forward_rows(model, [segs[i][-1].tokens for i in active], window)
        last = torch.tensor([len(segs[i][-1].tokens) - 1 for i in active])
        logits = full[torch.arange(len(active)), last].float()
        mask = torch.stack([masks[walkers[i].spec.L][segs[i][-1].tokens[-1]] for i in active])
        moves = torch.multinomial(torch.softmax(logits + mask, dim=-1), 1, generator=gen).squeeze(1).tolist()
        still = []
        for i, a in zip(active, moves, strict=True):
            w, seg = walkers[i], segs[i][-1]
            seg.backward.append(w.backward_facing())
            seg.action_pos.append(len(seg.tokens))
            seg.tokens.append(a)
            obs = TOKEN_ID[w.step(VOCAB[a])]
            if VOCAB[a] == "R":
                segs[i].append(Segment(tokens=[obs]))
            else:
                seg.tokens.append(obs)
            if not w.done and w.steps < cap:
                still.append(i)
        active = still
    return [Episode(maze=w.maze, segments=s, success=w.done, steps=w.steps) for w, s in zip(walkers, segs, strict=True)]


def golden_episode(maze: Maze) -> Episode:
    """The golden shortest path as an episode (what SFT trains on)."""
    w = MazeWalker(maze)
    seg = Segment(tokens=[TOKEN_ID[w.observation()]])
    for a in maze.golden_actions():
        seg.backward.append(w.backward_facing())
        seg.action_pos.append(len(seg.tokens))
        seg.tokens.append(TOKEN_ID[a])
        seg.tokens.append(TOKEN_ID[w.step(a)])
    assert w.done
    return Episode(maze=maze, segments=[seg], success=True, steps=w.steps)


@dataclass
class ActionBatch:
    """Segments to score in one forward pass, and where each move's log-prob is read."""

    rows: list[list[int]]
    row: torch.Tensor  # per move: its row (segment)
    pos: torch.Tensor  # per move: the position whose logits predict it
    target: torch.Tensor  # per move: its token id
    obs: torch.Tensor  # per move: the observation token it was chosen at
    L: torch.Tensor  # per move: the maze's branching


def build_action_batch(episodes: list[Episode]) -> ActionBatch:
    """Moves of all episodes, in order (episode, segment, move); one row per segment."""
    rows: list[list[int]] = []
    row_i, pos_i, tgt, obs, Ls = [], [], [], [], []
    for ep in episodes:
        for seg in ep.segments:
            for p in seg.action_pos:
                row_i.append(len(rows))
                pos_i.append(p - 1)
                tgt.append(seg.tokens[p])
                obs.append(seg.tokens[p - 1])
                Ls.append(ep.maze.spec.L)
            rows.append(seg.tokens)
    t = lambda x: torch.tensor(x, dtype=torch.long)  # noqa: E731
    return ActionBatch(rows=rows, row=t(row_i), pos=t(pos_i), target=t(tgt), obs=t(obs), L=t(Ls))


def action_logprobs(model: torch.nn.Module, batch: ActionBatch, window: int = DEFAULT_WINDOW) -> torch.Tensor:
    """log π(move | context) over legal moves, one per move, differentiable."""
    return action_logprobs_and_entropy(model, batch, window)[0]


def action_logprobs_and_entropy(
    model: torch.nn.Module, batch: ActionBatch, window: int = DEFAULT_WINDOW
) -> tuple[torch.Tensor, torch.Tensor]:
    """log π(move | context) and the policy's entropy over the legal moves, per move."""
    logits = forward_rows(model, batch.rows, window)
    picked = logits[batch.row, batch.pos].float()
    add = _mask_table()[batch.L, batch.obs]
    logp_all = torch.log_softmax(picked + add, dim=-1)
    probs = logp_all.exp()
    entropy = -(probs * torch.where(probs > 0, logp_all, torch.zeros_like(logp_all))).sum(-1)
    return logp_all.gather(1, batch.target[:, None]).squeeze(1), entropy


def legal_log_probs(model: torch.nn.Module, batch: ActionBatch, window: int = DEFAULT_WINDOW) -> torch.Tensor:
    """log π(· | context) over the vocabulary (illegal moves -inf), one row per move."""
    logits = forward_rows(model, batch.rows, window)
    picked = logits[batch.row, batch.pos].float()
    return torch.log_softmax(picked + _mask_table()[batch.L, batch.obs], dim=-1)


def move_distribution(model: torch.nn.Module, context: list[str], L: int) -> dict[str, float]:
    """π(· | context) over the legal moves at the context's last observation (for probes)."""
    ids = [TOKEN_ID[t] for t in context]
    with torch.no_grad():
        logits = forward_rows(model, [ids], DEFAULT_WINDOW)[0, -1].float()
    legal = legal_actions(context[-1], L)
    p = torch.softmax(logits[[TOKEN_ID[a] for a in legal]], dim=-1)
    return {a: float(x) for a, x in zip(legal, p, strict=True)}


def sample_mazes(specs: list, n: int, rng: np.random.Generator) -> list[Maze]:
    """``n`` maze instances, specs drawn uniformly from ``specs``."""
    return [Maze.sample(specs[int(rng.integers(len(specs)))], rng) for _ in range(n)]
