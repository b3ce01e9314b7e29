"""The unified use: world modeling as agent warm-up.

The agent is an :class:`~divelab.rl.policy.LMPolicy` (tiny Llama, word-level tokenizer). Three starts
of the same network: random init; behaviour cloning of a uniform explorer (the RL test bed's SFT warm
start) on the seen games; and next-state-prediction pre-training on the seen games' transitions in
the agent's own text format (``view [SEP] action [EOS] next view [EOS]``, LM loss on every token).
Each start is then GRPO-trained on held-out games it never saw.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from divelab.envs.base import EnvFactory
from divelab.envs.textworld import compact_view
from divelab.lm.fitting import fit
from divelab.lm.models import build_model
from divelab.rl.grpo import GRPOConfig, GRPOTrainer
from divelab.rl.policy import LMPolicy, PolicyConfig, train_word_tokenizer
from divelab.rl.testbed import SMALL_LM
from divelab.rl.warmstart import exploration_traces, sft_warm_start
from divelab.training.world_model.transitions import Transition

STARTS = ("random", "sft", "world-model")


def wm_pretrain(policy: LMPolicy, transitions: Sequence[Transition], steps: int, lr: float = 5e-3,
                batch_size: int = 32, seed: int = 0) -> list[float]:
    """Next-state-prediction pre-training of an agent LM, in the agent's text format."""
    tok = policy.tokenizer
    data = []
    for t in transitions:
        text = f"{compact_view(t.state.observation())} [SEP] {t.action} [EOS] {compact_view(t.next_state.observation())}"
        data.append(tok.encode(text).ids[-96:] + [policy.eos_id])
    rng = np.random.default_rng(seed)

    def loss_of_step(step: int) -> torch.Tensor:
        idx = rng.choice(len(data), size=min(batch_size, len(data)), replace=False)
        width = max(len(data[i]) for i in idx)
        ids = torch.full((len(idx), width), policy.pad_id, dtype=torch.long)
        attn = torch.zeros_like(ids)
        for r, i in enumerate(idx):
            ids[r, :len(data[i])] = torch.tensor(data[i])
            attn[r, :len(data[i])] = 1
        labels = ids.masked_fill(attn == 0, -100)
        return policy.model(input_ids=ids, attention_mask=attn, labels=labels).loss

    result = fit(policy.model, loss_of_step, steps, lr=lr, optimizer="adam", seed=seed,
                 description="agent: next-state pre-training")
    policy.invalidate()
    return [float(x) for x in result.losses]


def warmup_runs(make_env: EnvFactory, seen_ids: Sequence[str], held_ids: Sequence[str],
                seen_transitions: Sequence[Transition], cfg: dict[str, Any], seed: int) -> dict[str, Any]:
    """GRPO on the held-out games from each start, for each seed; ``auc`` = mean training success
    over iterations (sample efficiency)."""
    max_steps = cfg["testbed"].max_steps
    traces = exploration_traces(make_env, list(seen_ids) + list(held_ids), 8, max_steps, seed=seed)
    texts = [compact_view(s.observation) for t in traces for s in t.steps] + \
            [a for t in traces for s in t.steps for a in s.candidates]
    tok = train_word_tokenizer(texts)  # vocabulary only (words of every game); no dynamics
    seen_traces = [t for t in traces if t.game_id in set(seen_ids)]
    seen_tr = [t for t in seen_transitions if t.game_id in set(seen_ids)]
    auc: dict[str, list[float]] = {k: [] for k in STARTS}
    curves: dict[str, list[list[float]]] = {k: [] for k in STARTS}
    for s in cfg["seeds"]:
        for start in STARTS:
            model = build_model("tiny-100k", tok.get_vocab_size(), seed=s, **SMALL_LM)
            pol = LMPolicy(model, tok, PolicyConfig(history=0, head_tokens=0, tail_tokens=48), view=compact_view)
            if start == "sft":
                sft_warm_start(pol, seen_traces, steps=cfg["agent_pretrain_steps"], lr=1e-2, seed=s)
            elif start == "world-model":
                wm_pretrain(pol, seen_tr, steps=cfg["agent_pretrain_steps"], seed=s)
            gcfg = GRPOConfig(iterations=cfg["warmup_iterations"], group_size=cfg["group_size"],
                              max_steps=max_steps, lr=1e-2, seed=s, description=f"GRPO from {start}")
            logs = GRPOTrainer(pol, make_env, list(held_ids), gcfg).train()
            curves[start].append([round(x.success, 3) for x in logs])
            auc[start].append(float(np.mean([x.success for x in logs])))
    table = {k: {"auc": [round(x, 3) for x in auc[k]], "curves": curves[k]} for k in STARTS}
    return {"auc": auc, "table": table}
