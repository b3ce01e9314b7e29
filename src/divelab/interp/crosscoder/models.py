"""The reproduction's model pair: a tiny base LM trained from scratch on the tool/generic corpus (strict call
syntax rare), and its sibling further trained with RL (group-normalised REINFORCE, the GRPO advantage of
``divelab.rl``) rewarded for a well-formed call to the right tool. Both cached as HF checkpoint directories."""

from __future__ import annotations

import json
import random
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch

from divelab.cache import atomic_dir, entry_path, stable_hash
from divelab.interp.crosscoder import task
from divelab.interp.crosscoder.interventions import generate
from divelab.lm.fitting import fit
from divelab.lm.models import build_model
from divelab.lm.train import SequenceSource, TrainConfig, train
from divelab.rl.advantages import group_normalize
from divelab.rl.pg_loss import policy_gradient_loss
from divelab.threads import torch_threads

CACHE_KIND = "crosscoder"
CACHE_VERSION = 1


@dataclass(frozen=True)
class PairSpec:
    """The tiny base LM and its RL tool-calling sibling."""

    config: str = "tiny-100k"
    """zoo architecture both models are built from"""
    overrides: tuple[tuple[str, int], ...] = (("num_hidden_layers", 3), ("hidden_size", 64),
                                              ("intermediate_size", 192))
    """architecture fields changed from the zoo config"""
    corpus: int = 6000
    """prompts in the base model's pre-training corpus"""
    base_steps: int = 300
    """pre-training steps of the base model"""
    batch_size: int = 32
    """pre-training sequences per step"""
    lr: float = 5e-3
    """pre-training peak learning rate"""
    call_rate: float = 0.05
    """share of tool prompts followed by the strict call in the base corpus"""
    rl_iters: int = 200
    """most policy-gradient iterations of the sibling"""
    rl_prompts: int = 16
    """tool prompts per iteration"""
    rl_group: int = 8
    """sampled responses per prompt (group-normalised rewards)"""
    rl_lr: float = 2e-4
    """policy-gradient learning rate"""
    target: float = 0.4
    """stop RL once greedy tool correctness on held-out prompts reaches this"""
    check_every: int = 1
    """RL iterations between held-out checks"""
    check_prompts: int = 60
    """prompts drawn for the held-out check (its tool prompts are scored)"""
    seed: int = 0
    """seed of the corpus, the models and the RL sampling"""


def _encode(tok, prompt: str, response: str, eos: bool = True) -> tuple[list[int], list[int]]:
    p = tok(prompt, add_special_tokens=False)["input_ids"]
    r = tok(response, add_special_tokens=False)["input_ids"] + ([tok.eos_token_id] if eos else [])
    return p + r, [0] * len(p) + [1] * len(r)


def tool_correctness(model, tok, prompts: list[task.Prompt], **gen) -> dict[str, np.ndarray]:
    """Per-prompt rubric scores of greedy responses (or of an intervention: pass ``layer``/``edit``/``other``)."""
    resp = generate(model, tok, [p.text for p in prompts], **gen)
    rows = [task.score(p, r) for p, r in zip(prompts, resp, strict=True)]
    return {k: np.array([r[k] for r in rows]) for k in ("format", "correct", "selection")} | {
        "responses": np.array(resp, dtype=object)}


def train_base(spec: PairSpec):
    tok = task.tokenizer()
    rng = random.Random(spec.seed)
    enc = [_encode(tok, p.text, task.base_response(p, rng, spec.call_rate))
           for p in task.prompts(spec.corpus, seed=1000 + spec.seed)]
    src = SequenceSource([e[0] for e in enc], pad_token_id=tok.pad_token_id, loss_masks=[e[1] for e in enc])
    model = build_model(spec.config, vocab_size=len(tok), seed=spec.seed, max_position_embeddings=128,
                        **dict(spec.overrides))
    for c in (model.config, model.generation_config):
        c.eos_token_id, c.pad_token_id = tok.eos_token_id, tok.pad_token_id
    cfg = TrainConfig(steps=spec.base_steps, batch_size=spec.batch_size, seq_len=96, lr=spec.lr, warmup=30,
                      eval_every=0, seed=spec.seed)
    train(model, src, config=cfg, description="crosscoder base model")
    model.eval()
    return model, tok


def rl_sibling(base, tok, spec: PairSpec) -> tuple[torch.nn.Module, dict]:
    """Copy ``base`` and train it with group-normalised REINFORCE (GRPO advantage, no KL) until its greedy tool
    correctness on held-out prompts reaches ``spec.target`` (or ``spec.rl_iters`` iterations)."""
    import copy

    model = copy.deepcopy(base)
    rng = random.Random(spec.seed + 7)
    check = [p for p in task.prompts(2 * spec.check_prompts, seed=3000 + spec.seed) if p.is_tool]
    history: list[tuple[int, float, float]] = []
    rewards_of: list[float] = []
    max_new = 20

    def loss_of_step(step: int) -> torch.Tensor | None:
        it = step + 1
        batch = [task.tool_prompt(rng) for _ in range(spec.rl_prompts)]
        texts = [p.text for p in batch for _ in range(spec.rl_group)]
        model.eval()
        resp = generate(model, tok, texts, temperature=1.0, seed=spec.seed * 100_000 + it, max_new_tokens=max_new)
        rewards = np.array([task.score(batch[i // spec.rl_group], r)["correct"] for i, r in enumerate(resp)])
        rewards_of.append(float(rewards.mean()))
        adv = group_normalize(rewards, np.repeat(np.arange(len(batch)), spec.rl_group))
        model.train()
        keep = np.flatnonzero(adv != 0)
        if not keep.size:
            return None  # every group agreed: no signal
        enc = [_encode(tok, texts[i], resp[i], eos=len(resp[i]) < max_new) for i in keep]
        n = max(len(e[0]) for e in enc)
        ids = torch.tensor([e[0] + [tok.pad_token_id] * (n - len(e[0])) for e in enc])
        lm = torch.tensor([e[1] + [0] * (n - len(e[1])) for e in enc], dtype=torch.float32)
        att = torch.tensor([[1] * len(e[0]) + [0] * (n - len(e[0])) for e in enc])
        logp = torch.log_softmax(model(input_ids=ids, attention_mask=att).logits[:, :-1].float(), -1)
        tok_lp = logp.gather(-1, ids[:, 1:, None])[..., 0] * lm[:, 1:]
        a = torch.tensor(adv[keep], dtype=torch.float32)
        # divided by every rollout, kept or not: a batch with few informative rollouts moves the model less
        return policy_gradient_loss(tok_lp.sum(-1), a, reduction="sum") / len(texts)

    def after_step(it: int, loss: float | None) -> bool:
        if it % spec.check_every:
            return False
        model.eval()
        acc = float(tool_correctness(model, tok, check)["correct"].mean())
        history.append((it, rewards_of[-1], acc))
        return acc >= spec.target

    result = fit(model, loss_of_step, spec.rl_iters, lr=spec.rl_lr, optimizer="adam", grad_clip=1.0,
                 description="crosscoder RL sibling", after_step=after_step)
    return model, {"rl_iters": result.steps, "history": history}


def pair_paths(spec: PairSpec) -> tuple[Path, Path]:
    """Train (once) and cache both models; returns (base_dir, sibling_dir)."""
    key = stable_hash({"v": CACHE_VERSION, **asdict(spec)})
    root = entry_path(CACHE_KIND, f"pair-{key}")
    if (root / "meta.json").exists():
        return root / "base", root / "sibling"
    with torch_threads(1):
        base, tok = train_base(spec)
        torch.manual_seed(spec.seed)
        sib, meta = rl_sibling(base, tok, spec)
    with atomic_dir(root) as tmp:
        for name, m in (("base", base), ("sibling", sib)):
            m.save_pretrained(tmp / name)
            tok.save_pretrained(tmp / name)
        (tmp / "meta.json").write_text(json.dumps({**meta, "spec": asdict(spec)}))
    return root / "base", root / "sibling"


def load_pair(spec: PairSpec):
    """``(base, sibling, tokenizer, meta)``."""
    from divelab.lm import load_model

    b, s = pair_paths(spec)
    base, tok = load_model(b)
    sib, _ = load_model(s)
    return base, sib, tok, json.loads((b.parent / "meta.json").read_text())
