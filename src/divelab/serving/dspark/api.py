"""The user-facing API: train a drafter for any HF causal LM on text, save/load it, calibrate it,
and build an engine.

>>> from divelab.lm import pretrained                                          # doctest: +SKIP
>>> from divelab.serving.dspark import train_drafter_on_text, SpecEngine
>>> target, tok = pretrained("smoke")
>>> drafter = train_drafter_on_text(target, tok, texts, kind="markov", gamma=8)
>>> engine = SpecEngine(target, drafter, scheduler="dspark", temperature=0.0)   # lean engine, fp32
>>> engine = SpecEngine(target, drafter, engine="lean", fmt="bf16")              # or engine="hf"
>>> print(tok.decode(engine.generate(tok.encode("def add(a, b):"), max_new_tokens=32)))
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load_file, save_file

from divelab.cache import atomic_dir
from divelab.progress import track
from divelab.serving.dspark.calibration import STSCalibration, fit_sts, survival_labels
from divelab.serving.dspark.drafter import Drafter, DrafterConfig
from divelab.serving.dspark.engine import Request, SpecEngine
from divelab.serving.dspark.identity import check_identity, write_identity
from divelab.serving.dspark.training import DrafterTrainConfig, TrainLog, train_drafter

CONFIG_FILE = "drafter_config.json"
WEIGHTS_FILE = "drafter.safetensors"
CALIB_FILE = "sts.json"
META_FILE = "meta.json"


def encode_texts(tokenizer, texts: list[str]) -> np.ndarray:
    """One token stream (each text followed by eos when the tokenizer has one)."""
    eos = getattr(tokenizer, "eos_token_id", None)
    parts = []
    for t in texts:
        ids = tokenizer.encode(t, add_special_tokens=False)
        parts.extend(ids + ([eos] if eos is not None else []))
    if not parts:
        raise ValueError("no text to train on: give at least one non-empty text")
    return np.asarray(parts, dtype=np.int64)


def train_drafter_on_text(target: torch.nn.Module, tokenizer, texts: list[str] | np.ndarray,
                          kind: str = "markov", gamma: int = 8,
                          train_config: DrafterTrainConfig | None = None, **config: object
                          ) -> Drafter:
    """Train a drafter of ``kind`` (parallel | markov | rnn | ar) for ``target`` on ``texts``
    (strings, encoded with ``tokenizer``, or an already-encoded token array)."""
    if gamma < 1:
        raise ValueError(f"gamma must be >= 1, got {gamma}")
    tokens = np.asarray(texts) if isinstance(texts, np.ndarray) else encode_texts(tokenizer, list(texts))
    if tokens.size and int(tokens.max()) >= int(target.config.vocab_size):
        raise ValueError(f"token id {int(tokens.max())} outside the target's vocabulary ({target.config.vocab_size})")
    drafter = Drafter.for_target(target, DrafterConfig(kind=kind, gamma=gamma, **config))  # type: ignore[arg-type]
    drafter.train_log = train_drafter(target, drafter, tokens, train_config, description=f"{kind} γ={gamma}")
    return drafter


def save_drafter(drafter: Drafter, path: str | Path, calibration: STSCalibration | None = None,
                 meta: dict | None = None) -> Path:
    """Write the drafter (config JSON + safetensors, not the shared target weights) atomically, with
    how it was built (``meta``, JSON) when given."""
    path = Path(path)
    with atomic_dir(path) as tmp:
        (tmp / CONFIG_FILE).write_text(json.dumps(drafter.config.to_dict(), indent=2))
        save_file({k: v.detach().contiguous() for k, v in drafter.state_dict().items()}, str(tmp / WEIGHTS_FILE))
        if calibration is not None:
            (tmp / CALIB_FILE).write_text(json.dumps(calibration.to_dict()))
        if meta is not None:
            (tmp / META_FILE).write_text(json.dumps(meta, indent=1))
        write_identity(tmp, getattr(drafter, "target_identity", None))
    return path


def load_drafter(path: str | Path, target: torch.nn.Module) -> tuple[Drafter, STSCalibration | None]:
    """Load a saved drafter and bind it to ``target``: an error if it was recorded for another model
    (architecture, vocabulary, embedding shape) or its sizes differ; a warning for a drafter saved before
    divelab recorded the target."""
    path = Path(path)
    if not (path / CONFIG_FILE).exists():
        raise FileNotFoundError(f"{path} is not a saved drafter (no {CONFIG_FILE})")
    check_identity(path, target)
    cfg = json.loads((path / CONFIG_FILE).read_text())
    cfg["target_layers"] = tuple(cfg["target_layers"])
    drafter = Drafter(DrafterConfig(**cfg))
    drafter.load_state_dict(load_file(str(path / WEIGHTS_FILE)))
    drafter.attach(target)
    drafter.to(next(target.parameters()).dtype).eval()
    cal = None
    if (path / CALIB_FILE).exists():
        cal = STSCalibration(np.asarray(json.loads((path / CALIB_FILE).read_text())["temperatures"]))
    return drafter, cal


def collect_rounds(target: torch.nn.Module, drafter: Drafter, prompts: list[list[int]], max_new_tokens: int,
                   temperature: float = 1.0, seed: int = 0, gamma: int | None = None, progress: bool = False,
                   engine: str = "hf", fmt: str = "fp32") -> dict:
    """Decode with full-γ verification (fixed-γ) and log each round: raw confidence logits,
    accepted count. Used for τ, per-position acceptance, and calibration. ``engine``/``fmt``: the
    target engine (see :class:`SpecEngine`); an offline measurement, so by default the HF forward,
    which runs any causal LM a drafter can be trained for."""
    g = gamma or drafter.config.gamma
    eng = SpecEngine(target, drafter, scheduler=f"fixed-{g}", sps=None, temperature=temperature, gamma=g, seed=seed,
                     engine=engine, fmt=fmt)
    eng.record_rounds = True
    seq_s, draft_s, step_s, owner = [], [], [], []
    for i, p in enumerate(track(prompts, "calibration prompts") if progress else prompts):
        st = eng.prefill(Request(p, max_new_tokens))
        while not st.done:
            rec = eng.step([st])
            seq_s.append(rec.sequential_s)
            draft_s.append(rec.draft_s)
            step_s.append(rec.step_s)
        owner += [i] * (len(eng.round_log) - len(owner))  # one request at a time: every new round is prompt i's
    full = [r for r in eng.round_log if r["avail"] == g]
    prompt = np.array([i for i, r in zip(owner, eng.round_log, strict=True) if r["avail"] == g], dtype=np.int64)
    z = np.stack([r["conf_logits"] for r in full]) if full else np.zeros((0, g))
    acc = np.array([r["accepted"] for r in full], dtype=np.int64)
    # the exact per-position acceptance probability (target vs draft at the drafted prefix): the
    # best any confidence head could predict, so its AUC is the ceiling for the head's AUC
    oracle = np.stack([r["accept_prob"] for r in full]) if full and "accept_prob" in full[0] else None
    # ``prompt``: the index (into ``prompts``) of the prompt each round decoded, so intervals can be over prompts
    return {"conf_logits": z, "accepted": acc, "labels": survival_labels(acc, g), "gamma": g, "accept_prob": oracle,
            "prompt": prompt,
            "sequential_s": float(np.mean(seq_s)) if seq_s else 0.0,
            "draft_s": float(np.mean(draft_s)) if draft_s else 0.0,
            "step_s": float(np.mean(step_s)) if step_s else 0.0,
            # per round, for intervals: the sequential head runs inside its own round, so the two are paired
            "sequential_s_rounds": np.array(seq_s), "step_s_rounds": np.array(step_s)}


def calibrate(target: torch.nn.Module, drafter: Drafter, prompts: list[list[int]], max_new_tokens: int = 48,
              temperature: float = 1.0, seed: int = 0, gamma: int | None = None,
              progress: bool = False, engine: str = "hf", fmt: str = "fp32") -> STSCalibration:
    """Fit Sequential Temperature Scaling on held-out prompts (blocks of ``gamma``, default the drafter's)."""
    rounds = collect_rounds(target, drafter, prompts, max_new_tokens, temperature, seed, gamma=gamma,
                            progress=progress, engine=engine, fmt=fmt)
    if len(rounds["accepted"]) == 0:
        raise ValueError("no full-γ verification rounds collected; give longer generations or more prompts")
    return fit_sts(rounds["conf_logits"], rounds["labels"])


__all__ = ["CONFIG_FILE", "DrafterTrainConfig", "TrainLog", "calibrate", "collect_rounds", "encode_texts",
           "load_drafter", "save_drafter", "train_drafter_on_text"]
