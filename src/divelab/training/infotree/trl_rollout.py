"""InfoTree as TRL's ``rollout_func``: token-level trees grown with the trainer's own model.

``GRPOTrainer(..., rollout_func=trl_rollout_func(...))`` (checked against trl 1.16.0). TRL calls
``rollout_func(prompts, trainer)`` with the prompts of this process and expects ``prompt_ids``,
``completion_ids`` and ``logprobs`` with **one row per completion and exactly ``num_generations``
completions per prompt**, in the order GRPOTrainer reshapes them (consecutive rows of a prompt). TRL
1.16.0 hands each process its slice of a generation batch in which every prompt is repeated
``num_generations`` times in a row (its ``RepeatSampler``), so the function returns exactly one row per
prompt slot it was given. Each block of ``num_generations`` slots is one tree; a block split over
processes (e.g. 2 per device, 4 generations, 2 processes) is grown identically from the same seed on
each of them and each process returns its own leaves. TRL's ``top_k``, ``top_p`` and ``min_p`` truncate
the sampling distribution (the log-probabilities returned are of the truncated, renormalised one);
``repetition_penalty`` != 1 and ``generation_kwargs`` are refused with an error naming them.

For each prompt the tree grows over tokens: a node is a prefix, an expansion samples one continuation
from a node to EOS or ``max_completion_length`` with the model (``softmax(logits / temperature)``,
the distribution TRL's loss uses), and it adds exactly one leaf. After ``num_generations``
expansions the tree's leaves are the completions: ``prompt_ids`` are the prompt's real token ids,
``completion_ids`` the leaf's path, ``logprobs`` the log-probability the policy gave each sampled
token when it was sampled (the same weights, so equal to a teacher-forced forward pass).

- ``selector="independent"`` (default): every expansion starts at the root, i.e. plain i.i.d. GRPO
  sampling. No reward is needed.
- ``selector="uucb"`` (InfoTree): the first ``init_rollouts`` come from the root, then each expansion
  starts at the prefix with the best UUCB score, which needs a leaf score while the tree grows:
  ``leaf_reward(prompt, completion_ids) -> float`` (>= ``success_threshold`` is a success).

The tree-aware path (``tree_fields=True``) adds per completion ``tree_group`` ("<block>/<node>", the
prefix node its continuation branched from), ``tree_branch_len`` (how many leading completion tokens it
shares with earlier siblings) and ``tree_leaf``; TRL forwards them to reward functions as keyword
arguments. Plainly: GRPOTrainer still normalises advantages over the ``num_generations`` completions of
a prompt; segment-level grouping (Tree-GRPO's sibling groups) needs a reward function or loss that reads
these fields, or verl with ``uid`` = segment group (:func:`divelab.training.infotree.adapters.verl_agent_loop_outputs`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from divelab.training.infotree.tree import RolloutTree, UUCBConfig

LeafReward = Callable[[Any, list[int]], float]


@dataclass(frozen=True)
class TokenState:
    tokens: tuple[int, ...]
    done: bool = False
    reward: float = 0.0


class TokenEnv:
    """A completion as a branchable environment: actions are token ids, the episode ends at EOS or
    after ``max_new_tokens``; the terminal reward comes from ``leaf_reward`` (0 without one)."""

    def __init__(self, prompt: Any, prompt_ids: Sequence[int], eos_ids: Sequence[int], max_new_tokens: int,
                 leaf_reward: LeafReward | None = None):
        if max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1; got {max_new_tokens}")
        self.prompt, self.prompt_ids = prompt, tuple(int(t) for t in prompt_ids)
        self.eos_ids, self.max_new_tokens, self.leaf_reward = set(eos_ids), max_new_tokens, leaf_reward

    @property
    def horizon(self) -> int:
        return self.max_new_tokens

    def reset(self) -> TokenState:
        return TokenState(())

    def step(self, state: TokenState, action: int, rng: np.random.Generator) -> TokenState:
        tokens = (*state.tokens, int(action))
        done = int(action) in self.eos_ids or len(tokens) >= self.max_new_tokens
        r = float(self.leaf_reward(self.prompt, list(tokens))) if done and self.leaf_reward else 0.0
        return TokenState(tokens, done, r)

    def observation(self, state: TokenState) -> tuple[int, ...]:
        return self.prompt_ids + state.tokens


class ModelPolicy:
    """``softmax(logits / temperature)`` of a causal LM at the end of each observation (token ids),
    truncated as TRL's sampling settings ask (``top_k``, ``top_p``, ``min_p``) and renormalised; the
    recorded log-probabilities are those of the distribution actually sampled."""

    def __init__(self, model: torch.nn.Module, temperature: float = 1.0, top_k: int | None = None,
                 top_p: float | None = None, min_p: float | None = None):
        if temperature <= 0:
            raise ValueError(f"temperature must be > 0; got {temperature}")
        if top_p is not None and not 0 < top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1]; got {top_p}")
        self.model, self.temperature = model, temperature
        self.top_k = int(top_k) if top_k and top_k > 0 else None
        self.top_p = float(top_p) if top_p is not None and top_p < 1 else None
        self.min_p = float(min_p) if min_p else None

    def _truncate(self, p: np.ndarray) -> np.ndarray:
        keep = np.ones_like(p, dtype=bool)
        if self.top_k is not None and self.top_k < len(p):
            keep &= p >= np.sort(p)[-self.top_k]
        if self.top_p is not None:
            order = np.argsort(-p, kind="stable")
            before = np.cumsum(p[order]) - p[order]  # mass of the strictly more likely tokens
            nucleus = np.zeros_like(keep)
            nucleus[order[before < self.top_p]] = True
            keep &= nucleus
        if self.min_p is not None:
            keep &= p >= self.min_p * p.max()
        q = np.where(keep, p, 0.0)
        return q / q.sum()

    @torch.no_grad()
    def action_probs(self, observations: list[tuple[int, ...]]) -> list[np.ndarray]:
        device = next(self.model.parameters()).device
        out = []
        for obs in observations:  # one unpadded sequence each: the log-probs are exact
            ids = torch.tensor([obs], dtype=torch.long, device=device)
            logits = self.model(input_ids=ids).logits[0, -1].double() / self.temperature
            out.append(self._truncate(torch.softmax(logits, -1).cpu().numpy()))
        return out


def _tokenize(tokenizer: Any, prompt: Any) -> list[int]:
    if isinstance(prompt, str):
        return list(tokenizer(prompt, add_special_tokens=False)["input_ids"])
    if isinstance(prompt, list):  # conversational: render with the chat template, as TRL does
        ids = tokenizer.apply_chat_template(prompt, add_generation_prompt=True, tokenize=True)
        return list(ids["input_ids"] if isinstance(ids, dict) else ids)
    raise ValueError(f"prompt must be a string or a list of chat messages; got {type(prompt).__name__}")


def _layout(prompts: Sequence[Any], g: int, rank: int) -> list[tuple[int, int]]:
    """(global block, leaf within it) of each of this process's prompt slots. TRL repeats every prompt
    ``g`` times in a row over the whole generation batch and hands process ``rank`` the slice
    ``[rank * n, (rank + 1) * n)``, so a block may span processes; slots of one block must hold one prompt."""
    n = len(prompts)
    slots = [divmod(rank * n + i, g) for i in range(n)]
    for i in range(1, n):
        if slots[i][0] == slots[i - 1][0] and prompts[i] != prompts[i - 1]:
            raise ValueError(f"rollout_func: prompt slots {i - 1} and {i} of process {rank} belong to one group of "
                             f"num_generations={g} but hold different prompts; TRL's GRPOTrainer repeats each prompt "
                             f"num_generations times in a row (per_device_train_batch_size × processes × "
                             f"steps_per_generation must be a multiple of num_generations)")
    return slots


def trl_rollout_func(max_completion_length: int | None = None, selector: str = "independent",
                     leaf_reward: LeafReward | None = None, tree_fields: bool = False, init_rollouts: int = 2,
                     uucb: UUCBConfig | None = None, seed: int = 0) -> Callable[[list[Any], Any], dict[str, Any]]:
    """A TRL ``rollout_func(prompts, trainer)`` sampling each prompt's completions as one InfoTree.

    ``max_completion_length`` defaults to the trainer's; the temperature and ``num_generations`` are
    always the trainer's. See the module docstring for ``selector``, ``leaf_reward`` and ``tree_fields``.
    """
    cfg = uucb or UUCBConfig(selector=selector)
    if cfg.selector != selector:
        raise ValueError(f"selector={selector!r} but uucb.selector={cfg.selector!r}; give one")
    if selector != "independent" and leaf_reward is None:
        raise ValueError(f"selector={selector!r} picks prefixes by their leaves' rewards, so it needs "
                         f"leaf_reward(prompt, completion_ids) -> float; use selector='independent' without one")
    if init_rollouts < 1:
        raise ValueError(f"init_rollouts must be >= 1; got {init_rollouts}")
    calls = [0]  # generation rounds so far: the same count on every process

    def rollout_func(prompts: list[Any], trainer: Any) -> dict[str, Any]:
        model = trainer.model
        training = model.training
        g = int(trainer.num_generations if training else trainer.num_generations_eval)
        tok = trainer.processing_class
        tok = getattr(tok, "tokenizer", tok)
        max_new = int(max_completion_length or trainer.max_completion_length)
        eos = [t for t in (getattr(trainer, "eos_token_ids", None) or [tok.eos_token_id]) if t is not None]
        rep = float(getattr(trainer, "repetition_penalty", 1.0) or 1.0)
        if rep != 1.0:
            raise ValueError(f"rollout_func samples from softmax(logits / temperature) with top_k/top_p/min_p; "
                             f"repetition_penalty={rep} is not supported (allowed: 1.0)")
        extra_gen = getattr(getattr(trainer, "args", None), "generation_kwargs", None) or {}  # the user's extras
        if extra_gen:
            raise ValueError(f"rollout_func does not apply generation_kwargs {sorted(extra_gen)}; allowed: none "
                             f"(temperature, top_k, top_p and min_p are honoured)")
        policy = ModelPolicy(model, float(getattr(trainer, "temperature", 1.0) or 1.0),
                             top_k=getattr(trainer, "top_k", None), top_p=getattr(trainer, "top_p", None),
                             min_p=getattr(trainer, "min_p", None))
        acc = getattr(trainer, "accelerator", None)
        rank = int(getattr(acc, "process_index", 0) or 0)
        calls[0] += 1
        slots = _layout(prompts, g, rank)
        out: dict[str, list[Any]] = {"prompt_ids": [], "completion_ids": [], "logprobs": []}
        if tree_fields:
            out.update(tree_group=[], tree_branch_len=[], tree_leaf=[])
        model.eval()
        try:
            trees: dict[int, tuple[TokenEnv, RolloutTree]] = {}
            for (b, leaf_no), prompt in zip(slots, prompts, strict=True):
                if b not in trees:
                    # every process grows a block's tree from the same seed, so a block split over
                    # processes is one tree: each takes its own leaves
                    block_rng = np.random.default_rng([seed, calls[0], b])
                    env = TokenEnv(prompt, _tokenize(tok, prompt), eos, max_new, leaf_reward)
                    tree = RolloutTree(env, success_threshold=cfg.success_threshold)
                    while len(tree.leaves) < g:
                        node = 0 if len(tree.leaves) < init_rollouts else tree.select(cfg, block_rng)[0]
                        tree.expand([node], policy, block_rng)
                    trees[b] = (env, tree)
                env, tree = trees[b]
                for leaf in tree.leaves[leaf_no:leaf_no + 1]:
                    path, u = [], leaf
                    while u > 0:
                        path.append(u)
                        u = tree.parent[u]
                    path.reverse()
                    ids = [tree.action[v] for v in path]
                    lps = [math.log(float(tree.probs[tree.parent[v]][tree.action[v]])) for v in path]
                    out["prompt_ids"].append(list(env.prompt_ids))
                    out["completion_ids"].append(ids)
                    out["logprobs"].append(lps)
                    if tree_fields:
                        origin = tree.origin[leaf]
                        out["tree_group"].append(f"{b}/{origin}")
                        out["tree_branch_len"].append(int(tree.depth[origin]))
                        out["tree_leaf"].append(int(leaf))
        finally:
            model.train(training)
        return out

    return rollout_func
