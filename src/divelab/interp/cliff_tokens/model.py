"""The reproduction's reasoning model: a tiny divelab LM trained from scratch on the chain task, stopped once its
sampled accuracy reaches a target (so that failures exist), cached as an ordinary HF checkpoint directory."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from divelab.cache import atomic_dir, entry_path, stable_hash
from divelab.interp.cliff_tokens.task import chain_problems, chain_solution, chain_tokenizer
from divelab.lm.models import build_model
from divelab.lm.train import SequenceSource, TrainConfig, train
from divelab.threads import torch_threads

CACHE_KIND = "cliff_tokens"
CACHE_VERSION = 1


@dataclass(frozen=True)
class ChainModelSpec:
    """The tiny chain-of-thought model: its size, corpus and training."""

    config: str = "tiny-100k"
    """zoo architecture the model is built from"""
    overrides: tuple[tuple[str, int], ...] = ()
    """architecture fields changed from the zoo config, e.g. (("hidden_size", 32),) for a smaller sibling"""
    train_lengths: tuple[int, ...] = (3, 4, 5, 6)
    """operand counts of the training problems"""
    corpus: int = 20_000
    """worked problems in the training corpus"""
    max_steps: int = 1500
    """most training steps"""
    batch_size: int = 64
    """sequences per step"""
    lr: float = 3e-3
    """peak learning rate"""
    target_acc: float = 0.65
    """stop once sampled accuracy on held-out problems reaches this"""
    check_every: int = 50
    """training steps between accuracy checks"""
    fine_every: int = 10
    """training steps between checks once accuracy reaches ``fine_from`` (the curve can jump by 0.3 within 50
    steps, and where it jumps depends on the CPU's kernels: coarse checks would stop one machine's model at 0.65
    and another's at 0.93, with almost no wrong responses left to study)"""
    fine_from: float = 0.3
    """accuracy from which checks are ``fine_every`` steps apart"""
    check_problems: int = 200
    """held-out problems behind each check"""
    seed: int = 0
    """seed of the corpus, the model and the checks"""


class _Reached(Exception):
    pass


def _encode(tok, prompt: str, response: str) -> tuple[list[int], list[int]]:
    p = tok(prompt, add_special_tokens=False)["input_ids"]
    r = tok(response, add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
    return p + r, [0] * len(p) + [1] * len(r)


def sampled_accuracy(model: torch.nn.Module, tok, problems, seed: int = 0, samples: int = 1) -> list[float]:
    """Per-problem share of right responses sampled at temperature 1."""
    from divelab.interp.cliff_tokens.potential import RolloutConfig, Rollouts, sample_traces

    r = Rollouts(model, tok, "chain", RolloutConfig(n=1, max_new_tokens=72, batch_rows=1024, seed=seed))
    traces = sample_traces(r, problems, samples, seed=seed)
    return [sum(t.correct for t in traces[i * samples:(i + 1) * samples]) / samples for i in range(len(problems))]


def train_chain_model(spec: ChainModelSpec) -> tuple[torch.nn.Module, object, dict]:
    tok = chain_tokenizer()
    train_p = chain_problems(spec.corpus, spec.train_lengths, seed=1000 + spec.seed)
    enc = [_encode(tok, p.prompt, chain_solution([int(x) for x in p.prompt[:-1].split()])) for p in train_p]
    src = SequenceSource([e[0] for e in enc], pad_token_id=tok.pad_token_id, loss_masks=[e[1] for e in enc])
    model = build_model(spec.config, vocab_size=len(tok), seed=spec.seed, max_position_embeddings=128,
                        **dict(spec.overrides))
    model.config.eos_token_id, model.config.pad_token_id = tok.eos_token_id, tok.pad_token_id
    model.generation_config.eos_token_id, model.generation_config.pad_token_id = tok.eos_token_id, tok.pad_token_id
    check = chain_problems(spec.check_problems, spec.train_lengths, seed=2000 + spec.seed)
    history: list[tuple[int, float]] = []

    def cb(step: int, loss: float) -> None:
        fine = bool(history) and history[-1][1] >= spec.fine_from
        if step % (spec.fine_every if fine else spec.check_every) == 0:
            acc = sum(sampled_accuracy(model, tok, check, seed=step)) / len(check)
            history.append((step, acc))
            model.train()
            if acc >= spec.target_acc:
                raise _Reached

    cfg = TrainConfig(steps=spec.max_steps, batch_size=spec.batch_size, seq_len=64, lr=spec.lr, warmup=30,
                      eval_every=0, seed=spec.seed, min_lr_ratio=1.0)
    try:
        train(model, src, config=cfg, description=f"chain model ({spec.config})", callback=cb)
    except _Reached:
        pass
    model.eval()
    return model, tok, {"steps": history[-1][0] if history else spec.max_steps, "history": history,
                        "accuracy": history[-1][1] if history else None, "check_problems": len(check),
                        "params": sum(p.numel() for p in model.parameters())}


def chain_model_path(spec: ChainModelSpec) -> Path:
    """Train (once) and cache the model as an HF checkpoint directory; returns the directory."""
    key = stable_hash({"v": CACHE_VERSION, **asdict(spec)})
    path = entry_path(CACHE_KIND, f"chain-{key}")
    if (path / "config.json").exists() and (path / "meta.json").exists():
        return path
    with torch_threads(1):
        model, tok, meta = train_chain_model(spec)
    with atomic_dir(path) as tmp:
        model.save_pretrained(tmp)
        tok.save_pretrained(tmp)
        (tmp / "meta.json").write_text(json.dumps({**meta, "spec": asdict(spec)}))
    return path


def load_chain_model(spec: ChainModelSpec) -> tuple[torch.nn.Module, object, dict]:
    from divelab.lm import load_model

    path = chain_model_path(spec)
    model, tok = load_model(path)
    return model, tok, json.loads((path / "meta.json").read_text())
