"""Scoring the action spans of agent trajectories with a post-trained / reference model pair.

``ProgressAdvantage(policy, reference, tokenizer, beta)`` runs each model once over each
trajectory (batched, right-padded) and keeps, for every action token, the log-probability under
both models plus the policy's entropy and self-certainty there (the confidence baselines the
paper compares against). Aggregations are then free: change ``token_agg``/``step_agg`` without
another forward pass.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import torch

from divelab.training.progress_advantage.aggregate import (
    STEP_AGGREGATIONS,
    TOKEN_AGGREGATIONS,
    aggregate_steps,
    aggregate_tokens,
    best_of_n,
    failure_step,
)


@dataclass
class Step:
    """One agent turn: what the agent saw since its last action, then what it did."""

    observation: str
    action: str


@dataclass
class Trajectory:
    """A whole episode as text. Only the ``action`` spans are scored; ``prompt`` and observations
    are context. ``success`` is optional ground truth (used by evaluations, never by scoring)."""

    steps: list[Step]
    prompt: str = ""
    success: bool | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Trajectory:
        """From ``{"prompt": str?, "steps": [{"observation": str?, "action": str}], "success": bool?}``."""
        if not isinstance(d, dict) or "steps" not in d:
            raise ValueError("a trajectory must be an object with a 'steps' list "
                             "(each {'observation': str, 'action': str}); got "
                             f"{type(d).__name__} with keys {sorted(d) if isinstance(d, dict) else '-'}")
        steps = []
        for i, s in enumerate(d["steps"]):
            if not isinstance(s, dict) or not isinstance(s.get("action"), str):
                raise ValueError(f"step {i} must be an object with a string 'action'; got {s!r:.80}")
            steps.append(Step(observation=str(s.get("observation", "")), action=s["action"]))
        meta = {k: v for k, v in d.items() if k not in ("steps", "prompt", "success")}
        success = d.get("success")
        return cls(steps=steps, prompt=str(d.get("prompt", "")),
                   success=None if success is None else bool(success), meta=meta)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"prompt": self.prompt,
                             "steps": [{"observation": s.observation, "action": s.action} for s in self.steps]}
        if self.success is not None:
            d["success"] = self.success
        d.update(self.meta)
        return d


def load_jsonl(path: str | Path) -> list[Trajectory]:
    """Trajectories from a JSONL file, one object per line (see :meth:`Trajectory.from_dict`)."""
    out = []
    for n, line in enumerate(Path(path).read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            out.append(Trajectory.from_dict(json.loads(line)))
        except (json.JSONDecodeError, ValueError) as exc:
            raise ValueError(f"{path}:{n}: {exc}") from None
    return out


@dataclass
class TokenizedTrajectory:
    """Token ids of a whole trajectory and the half-open ``[start, end)`` span of each action."""

    input_ids: list[int]
    action_spans: list[tuple[int, int]]


class _Encoder(Protocol):
    def __call__(self, text: str) -> list[int]: ...


def make_encoder(tokenizer: Any) -> _Encoder:
    """A ``text -> ids`` function from an HF tokenizer, a ``tokenizers.Tokenizer``, or anything
    with ``encode(text)`` returning ids (or an object with ``.ids``). No special tokens are added."""
    try:
        from transformers import PreTrainedTokenizerBase
    except ImportError:  # pragma: no cover
        PreTrainedTokenizerBase = ()  # type: ignore[assignment,misc]
    if isinstance(tokenizer, PreTrainedTokenizerBase):
        return lambda text: list(tokenizer.encode(text, add_special_tokens=False))
    if hasattr(tokenizer, "encode"):
        def enc(text: str) -> list[int]:
            try:
                out = tokenizer.encode(text, add_special_tokens=False)
            except TypeError:
                out = tokenizer.encode(text)
            ids = getattr(out, "ids", out)
            return [int(i) for i in ids]
        return enc
    raise TypeError(f"tokenizer must have an encode(text) method; got {type(tokenizer).__name__}")


def tokenizer_vocab(tokenizer: Any) -> dict[str, int] | None:
    """The token -> id map of a tokenizer, when it exposes one."""
    for name in ("get_vocab",):
        fn = getattr(tokenizer, name, None)
        if callable(fn):
            try:
                return dict(fn())
            except TypeError:  # tokenizers.Tokenizer.get_vocab(with_added_tokens=True)
                return dict(fn(True))
    return None


def tokenize_trajectory(traj: Trajectory, encode: _Encoder, bos_id: int | None = None) -> TokenizedTrajectory:
    """Concatenate prompt, observations and actions segment by segment, so every action span is an
    exact token range (the same ids the model would have produced when it emitted the action)."""
    if not traj.steps:
        raise ValueError("a trajectory needs at least one step to score")
    ids: list[int] = [bos_id] if bos_id is not None else []
    spans = []
    if traj.prompt:
        ids += encode(traj.prompt)
    for i, step in enumerate(traj.steps):
        if step.observation:
            ids += encode(step.observation)
        a = encode(step.action)
        if not a:
            raise ValueError(f"step {i}: action {step.action!r} encodes to no tokens")
        spans.append((len(ids), len(ids) + len(a)))
        ids += a
    if spans[0][0] == 0:
        raise ValueError("the first action starts the sequence, so nothing predicts its first token; "
                         "give a prompt or observation, or a tokenizer with a BOS token")
    return TokenizedTrajectory(ids, spans)


@dataclass
class TrajectoryScores:
    """Per-token numbers on the action spans of one trajectory (all in nats)."""

    policy_logprobs: list[np.ndarray]  # one array per step
    reference_logprobs: list[np.ndarray]
    policy_entropy: list[np.ndarray]  # entropy of the policy's next-token distribution
    policy_self_certainty: list[np.ndarray]  # KL(uniform || policy) at each action token
    beta: float

    @property
    def n_steps(self) -> int:
        return len(self.policy_logprobs)

    @classmethod
    def concat(cls, parts: Sequence[TrajectoryScores]) -> TrajectoryScores:
        """Join the steps of several scores (e.g. steps scored one by one, each in the context the
        agent really read) into one trajectory's scores."""
        if not parts:
            raise ValueError("nothing to concatenate: give at least one TrajectoryScores")
        if len({p.beta for p in parts}) != 1:
            raise ValueError(f"cannot join scores with different beta: {sorted({p.beta for p in parts})}")
        return cls([x for p in parts for x in p.policy_logprobs], [x for p in parts for x in p.reference_logprobs],
                   [x for p in parts for x in p.policy_entropy], [x for p in parts for x in p.policy_self_certainty],
                   parts[0].beta)

    def step_advantages(self, token_agg: str = "mean") -> np.ndarray:
        """``beta * (agg(logp_policy) - agg(logp_reference))`` for each step."""
        return np.array([self.beta * (aggregate_tokens(p, token_agg) - aggregate_tokens(r, token_agg))
                         for p, r in zip(self.policy_logprobs, self.reference_logprobs, strict=True)])

    def score(self, token_agg: str = "mean", step_agg: str = "mean") -> float:
        """The trajectory's progress score."""
        return aggregate_steps(self.step_advantages(token_agg), step_agg)

    def failure_step(self, token_agg: str = "mean") -> int:
        """The step minimising the running sum of step advantages."""
        return failure_step(self.step_advantages(token_agg))

    # -- confidence baselines (policy only) -------------------------------------------------
    def mean_logprob(self) -> float:
        """Mean log-probability of all action tokens under the policy (DeepConf-style confidence)."""
        return float(np.concatenate(self.policy_logprobs).mean())

    def neg_entropy(self) -> float:
        """Minus the mean next-token entropy over action tokens (low entropy = confident)."""
        return float(-np.concatenate(self.policy_entropy).mean())

    def self_certainty(self) -> float:
        """Mean KL(uniform || policy) over action tokens (Kang et al.'s self-certainty)."""
        return float(np.concatenate(self.policy_self_certainty).mean())

    def step_logprobs(self, token_agg: str = "mean") -> np.ndarray:
        return np.array([aggregate_tokens(p, token_agg) for p in self.policy_logprobs])


def _vocab_size(model: torch.nn.Module) -> int:
    emb = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    if emb is not None and getattr(emb, "weight", None) is not None:
        return int(emb.weight.shape[0])
    return int(model.config.vocab_size)


class ProgressAdvantage:
    """The progress advantage of arXiv 2606.26080: ``beta * log pi_policy(a|s) / pi_ref(a|s)`` on
    each action span, read as the optimal advantage ``Q*(s,a) - V*(s)`` of the KL-regularised RL
    problem the policy was trained on.

    >>> pa = ProgressAdvantage(policy, reference, tokenizer, beta=0.1)      # doctest: +SKIP
    >>> scores = pa.score_trajectories(trajs)                              # doctest: +SKIP
    >>> best = pa.best_of_n(trajs, token_agg="min", step_agg="min")        # doctest: +SKIP
    >>> blamed = scores[0].failure_step()                                  # doctest: +SKIP

    ``reference_tokenizer`` may be given to check that both models really share a tokenizer;
    mismatched vocabularies are refused (the log-ratio would compare different tokens).
    """

    def __init__(self, policy: torch.nn.Module, reference: torch.nn.Module, tokenizer: Any,
                 beta: float = 1.0, reference_tokenizer: Any | None = None, batch_size: int = 8,
                 add_bos: bool | None = None) -> None:
        if not (isinstance(beta, int | float) and beta > 0):
            raise ValueError(f"beta must be a positive number (the KL coefficient of RL training), got {beta!r}")
        if policy is reference:
            raise ValueError("policy and reference are the same object: every log-ratio would be 0; "
                             "pass the post-trained model and its base/reference model")
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        vp, vr = _vocab_size(policy), _vocab_size(reference)
        if vp != vr:
            raise ValueError(f"policy and reference have different vocabulary sizes ({vp} vs {vr}); "
                             "the progress advantage needs two models sharing one tokenizer")
        if reference_tokenizer is not None and reference_tokenizer is not tokenizer:
            a, b = tokenizer_vocab(tokenizer), tokenizer_vocab(reference_tokenizer)
            if a is None or b is None:
                raise ValueError("cannot compare the two tokenizers (no get_vocab()); pass one tokenizer")
            if a != b:
                only_a = len(set(a.items()) - set(b.items()))
                only_b = len(set(b.items()) - set(a.items()))
                raise ValueError(f"policy and reference tokenizers differ ({len(a)} vs {len(b)} tokens; "
                                 f"{only_a} / {only_b} token->id entries not shared); the progress "
                                 "advantage needs two models sharing one tokenizer")
        vocab = tokenizer_vocab(tokenizer)
        if vocab is not None and vocab and max(vocab.values()) >= vp:
            raise ValueError(f"tokenizer has token ids up to {max(vocab.values())} but the models' "
                             f"vocabulary has only {vp} rows; tokenizer and models do not belong together")
        self.policy, self.reference, self.tokenizer = policy, reference, tokenizer
        self.beta = float(beta)
        self.batch_size = batch_size
        self.vocab_size = vp
        self._encode = make_encoder(tokenizer)
        bos = getattr(tokenizer, "bos_token_id", None)
        self.bos_id = bos if (add_bos if add_bos is not None else bos is not None) else None
        if add_bos and bos is None:
            raise ValueError("add_bos=True but the tokenizer has no bos_token_id")

    # -- scoring ------------------------------------------------------------------------------
    def tokenize(self, traj: Trajectory) -> TokenizedTrajectory:
        return tokenize_trajectory(traj, self._encode, self.bos_id)

    def score_trajectories(self, trajs: Sequence[Trajectory] | Iterable[Trajectory]) -> list[TrajectoryScores]:
        """Per-token scores for each trajectory: one forward pass per model per batch."""
        toks = [self.tokenize(t) for t in trajs]
        return self.score_tokenized(toks)

    def score_tokenized(self, toks: Sequence[TokenizedTrajectory]) -> list[TrajectoryScores]:
        out: list[TrajectoryScores] = []
        for tok in toks:
            bad = [i for i in tok.input_ids if not 0 <= i < self.vocab_size]
            if bad:
                raise ValueError(f"token id {bad[0]} is outside the models' vocabulary (0..{self.vocab_size - 1})")
        maxpos = getattr(self.policy.config, "max_position_embeddings", None)
        for start in range(0, len(toks), self.batch_size):
            batch = toks[start:start + self.batch_size]
            longest = max(len(t.input_ids) for t in batch)
            if maxpos is not None and longest > maxpos:
                raise ValueError(f"a trajectory has {longest} tokens, more than the model's "
                                 f"max_position_embeddings={maxpos}; truncate or split it")
            pol = _action_token_stats(self.policy, batch, with_entropy=True)
            ref = _action_token_stats(self.reference, batch, with_entropy=False)
            for (lp, ent, sc), (lr, _, _) in zip(pol, ref, strict=True):
                out.append(TrajectoryScores(lp, lr, ent, sc, self.beta))
        return out

    def scores(self, trajs: Sequence[Trajectory], token_agg: str = "mean", step_agg: str = "mean") -> np.ndarray:
        """Trajectory progress scores."""
        _check_aggs(token_agg, step_agg)
        return np.array([s.score(token_agg, step_agg) for s in self.score_trajectories(trajs)])

    def best_of_n(self, candidates: Sequence[Trajectory], token_agg: str = "mean", step_agg: str = "mean") -> int:
        """Index of the candidate rollout with the highest progress score."""
        return best_of_n(self.scores(candidates, token_agg, step_agg))

    def localise_failure(self, traj: Trajectory, token_agg: str = "mean") -> int:
        """The step index blamed for a failed trajectory (argmin of the running sum)."""
        return self.score_trajectories([traj])[0].failure_step(token_agg)


def _check_aggs(token_agg: str, step_agg: str) -> None:
    if token_agg not in TOKEN_AGGREGATIONS:
        raise ValueError(f"unknown token aggregation {token_agg!r}; allowed: {', '.join(TOKEN_AGGREGATIONS)}")
    if step_agg not in STEP_AGGREGATIONS:
        raise ValueError(f"unknown step aggregation {step_agg!r}; allowed: {', '.join(STEP_AGGREGATIONS)}")


@torch.no_grad()
def _action_token_stats(model: torch.nn.Module, batch: Sequence[TokenizedTrajectory], with_entropy: bool
                        ) -> list[tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray]]]:
    """For each trajectory: per-step arrays of action-token log-probs (and entropy, self-certainty)."""
    device = next(model.parameters()).device
    longest = max(len(t.input_ids) for t in batch)
    ids = torch.zeros(len(batch), longest, dtype=torch.long)
    mask = torch.zeros(len(batch), longest, dtype=torch.long)
    for i, t in enumerate(batch):  # right padding: causal attention never looks at the pad
        ids[i, :len(t.input_ids)] = torch.tensor(t.input_ids)
        mask[i, :len(t.input_ids)] = 1
    logits = model(input_ids=ids.to(device), attention_mask=mask.to(device)).logits.float()
    out = []
    for i, t in enumerate(batch):
        lps, ents, scs = [], [], []
        for s, e in t.action_spans:
            # the token at position j is predicted by the logits at position j-1
            logp = torch.log_softmax(logits[i, s - 1:e - 1], dim=-1)
            target = ids[i, s:e].to(device)
            lps.append(logp.gather(-1, target[:, None])[:, 0].double().cpu().numpy())
            if with_entropy:
                p = logp.exp()
                ents.append((-(p * logp).sum(-1)).double().cpu().numpy())
                v = logp.shape[-1]
                scs.append((-logp.mean(-1) - np.log(v)).double().cpu().numpy())
            else:
                ents.append(np.zeros(0))
                scs.append(np.zeros(0))
        out.append((lps, ents, scs))
    return out
