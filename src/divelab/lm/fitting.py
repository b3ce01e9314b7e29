"""The one optimisation loop: ``fit(model, loss_of_step, steps, ...)``.

Every trainer in divelab (language-model pre-training and SFT, DPO, crosscoders, world models,
policy-gradient fine-tunes) differs in *what* it minimises, not in *how* it steps. ``fit`` owns the
how: it builds the optimiser (Adam or AdamW), an optional learning-rate multiplier schedule
(:func:`warmup_cosine`, or any ``step -> multiplier`` function), gradient clipping, seeding, a
progress bar, an optional thread pin, and checkpoints that a later call resumes from. The caller
passes ``loss_of_step(i)``: the loss tensor of step ``i`` (or ``None`` to skip the update, e.g. when
every advantage of a policy-gradient batch is zero).

Each step runs, in this order: ``loss_of_step(i)``, ``zero_grad``, ``backward``, clipping,
``optimizer.step()``, ``scheduler.step()``, then ``after_step(i + 1, loss)`` (which may return True
to stop early, e.g. when a target accuracy is reached), then the checkpoint.

>>> import torch
>>> w = torch.nn.Linear(2, 1)
>>> x, y = torch.randn(16, 2, generator=torch.Generator().manual_seed(0)), torch.ones(16, 1)
>>> r = fit(w, lambda i: ((w(x) - y) ** 2).mean(), steps=50, lr=0.1, seed=0)
>>> r.losses[-1] < r.losses[0]
True
"""

from __future__ import annotations

import math
import pickle
import shutil
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from divelab.cache import atomic_dir
from divelab.progress import make_progress

OPTIMIZERS = ("adam", "adamw")


@dataclass
class FitResult:
    steps: int  # steps done in total (including those of a run this one resumed)
    losses: list[float | None]  # one per step; None where the step was skipped
    wall_time_s: float  # of this call only
    resumed_from: int | None = None
    stopped_early: bool = False
    extra: dict[str, Any] = field(default_factory=dict)  # what ``on_resume`` got back from the checkpoint


def warmup_cosine(steps: int, warmup: int = 0, min_lr_ratio: float = 0.0) -> Callable[[int], float]:
    """Multiplier of ``lr`` at a step: linear warmup over ``warmup`` steps, then cosine decay to
    ``min_lr_ratio`` at ``steps``."""
    if steps < 1 or warmup < 0:
        raise ValueError(f"warmup_cosine needs steps >= 1 and warmup >= 0, got steps={steps}, warmup={warmup}")
    if not 0 <= min_lr_ratio <= 1:
        raise ValueError(f"min_lr_ratio must be in [0, 1], got {min_lr_ratio}")

    def f(step: int) -> float:
        if warmup and step < warmup:
            return (step + 1) / warmup
        span = max(1, steps - warmup)
        progress = min(1.0, (step - warmup) / span)
        return min_lr_ratio + (1 - min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * progress))

    return f


def _trainable(model: torch.nn.Module | Iterable[torch.nn.Parameter]) -> list[torch.nn.Parameter]:
    params = model.parameters() if isinstance(model, torch.nn.Module) else model
    return [p for p in params if p.requires_grad]


def make_optimizer(params: list[torch.nn.Parameter], optimizer: str, lr: float, weight_decay: float,
                   betas: tuple[float, float], foreach: bool | None,
                   decay_all: bool = False) -> torch.optim.Optimizer:
    """Adam or AdamW over ``params``; weight decay (AdamW) applies to matrices only, never to
    norms and biases (1-D parameters), the usual choice — unless ``decay_all``, which decays every
    parameter as ``torch.optim.AdamW(model.parameters(), weight_decay=...)`` does."""
    if optimizer == "adam":
        if weight_decay:
            raise ValueError("weight_decay needs optimizer='adamw' (Adam's L2 penalty is not offered)")
        return torch.optim.Adam(params, lr=lr, betas=betas, foreach=foreach)
    decay = params if decay_all else [p for p in params if p.ndim >= 2]
    no_decay = [] if decay_all else [p for p in params if p.ndim < 2]
    groups = [g for g in ({"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0})
              if g["params"]]
    return torch.optim.AdamW(groups, lr=lr, betas=betas, foreach=foreach)


def _check_args(model: Any, steps: int, lr: float, optimizer: str, weight_decay: float, grad_clip: float | None,
                ckpt_dir: Any, ckpt_every: int, num_threads: int | None) -> None:
    if optimizer not in OPTIMIZERS:
        raise ValueError(f"optimizer must be one of {', '.join(OPTIMIZERS)}, got {optimizer!r}")
    if not isinstance(steps, int) or steps < 1:
        raise ValueError(f"steps must be an int >= 1, got {steps!r}")
    if not lr > 0:
        raise ValueError(f"lr must be > 0, got {lr}")
    if weight_decay < 0:
        raise ValueError(f"weight_decay must be >= 0, got {weight_decay}")
    if grad_clip is not None and not grad_clip > 0:
        raise ValueError(f"grad_clip must be > 0 (or None for no clipping), got {grad_clip}")
    if ckpt_every < 0:
        raise ValueError(f"ckpt_every must be >= 0, got {ckpt_every}")
    if ckpt_every and ckpt_dir is None:
        raise ValueError("ckpt_every needs ckpt_dir (where to write the checkpoints)")
    if ckpt_dir is not None and not isinstance(model, torch.nn.Module):
        raise ValueError("checkpoints need a torch.nn.Module (its weights are saved), not a list of parameters")
    if num_threads is not None and num_threads < 1:
        raise ValueError(f"num_threads must be >= 1 (or None to leave torch's setting), got {num_threads}")


def latest_checkpoint(ckpt_dir: str | Path) -> Path | None:
    """The newest complete ``step-*`` checkpoint under ``ckpt_dir``, or None."""
    d = Path(ckpt_dir)
    if not d.is_dir():
        return None
    steps = sorted(p for p in d.glob("step-*") if (p / "state.pt").exists())
    return steps[-1] if steps else None


def fit(model: torch.nn.Module | Iterable[torch.nn.Parameter], loss_of_step: Callable[[int], torch.Tensor | None],
        steps: int, *, lr: float, optimizer: str = "adamw", weight_decay: float = 0.0, decay_all: bool = False,
        betas: tuple[float, float] = (0.9, 0.999), foreach: bool | None = None,
        schedule: Callable[[int], float] | None = None, grad_clip: float | None = None, seed: int | None = None,
        np_rng: np.random.Generator | None = None, num_threads: int | None = None, description: str = "training",
        info: Callable[[int, float | None], str] | None = None,
        after_step: Callable[[int, float | None], bool | None] | None = None,
        ckpt_dir: str | Path | None = None, ckpt_every: int = 0, ckpt_key: dict | None = None,
        ckpt_state: Callable[[], dict] | None = None, on_resume: Callable[[dict], None] | None = None,
        check_finite: bool = True) -> FitResult:
    """Run ``steps`` optimisation steps of ``loss_of_step`` on ``model``'s trainable parameters.

    - ``model``: a module (put in train mode for the loop and eval mode after it) or an iterable of
      parameters (modes left alone). Only parameters with ``requires_grad`` are optimised and clipped.
    - ``optimizer``: ``"adam"`` or ``"adamw"`` (``weight_decay`` > 0 needs AdamW; it skips 1-D parameters
      unless ``decay_all``, torch's own AdamW default of decaying every parameter).
    - ``schedule``: ``step -> lr multiplier`` (a ``LambdaLR``), e.g. :func:`warmup_cosine`; None: constant.
    - ``grad_clip``: max global gradient norm; None: no clipping.
    - ``seed``: ``torch.manual_seed(seed)`` before the optimiser is built; None leaves the global RNG.
    - ``np_rng``: a numpy Generator the loss draws from; its state goes into checkpoints.
    - ``num_threads``: torch threads for the loop (restored after); None leaves torch's setting.
    - ``info(step, loss)``: progress-bar text; ``after_step(step, loss)`` runs after every step
      (``step`` counts steps done) and returning True stops the loop.
    - ``ckpt_dir``: write a checkpoint (weights, optimiser, scheduler, RNGs, losses and
      ``ckpt_state()``) every ``ckpt_every`` steps and at the end, keeping the newest; a call that finds
      one resumes from it (``on_resume`` gets the stored state) and ends with the weights an
      uninterrupted run would have. ``ckpt_key`` (JSON-like) must match the checkpoint's, so a
      changed configuration never resumes a stale run.
    """
    _check_args(model, steps, lr, optimizer, weight_decay, grad_clip, ckpt_dir, ckpt_every, num_threads)
    threads_before = torch.get_num_threads()
    if num_threads is not None:
        torch.set_num_threads(num_threads)
    try:
        with torch.enable_grad():
            return _fit(model, loss_of_step, steps, lr, optimizer, weight_decay, decay_all, betas, foreach, schedule,
                        grad_clip, seed, np_rng, description, info, after_step,
                        None if ckpt_dir is None else Path(ckpt_dir), ckpt_every, ckpt_key, ckpt_state, on_resume,
                        check_finite)
    finally:
        torch.set_num_threads(threads_before)


def _fit(model, loss_of_step, steps, lr, optimizer, weight_decay, decay_all, betas, foreach, schedule, grad_clip, seed, np_rng,
         description, info, after_step, ckpt_dir, ckpt_every, ckpt_key, ckpt_state, on_resume,
         check_finite) -> FitResult:
    if seed is not None:
        torch.manual_seed(seed)
    params = _trainable(model)
    if not params:
        raise ValueError("fit got no trainable parameters (none has requires_grad=True)")
    opt = make_optimizer(params, optimizer, lr, weight_decay, betas, foreach, decay_all)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, schedule) if schedule is not None else None
    losses: list[float | None] = []
    start, resumed_from, extra = 0, None, {}
    if ckpt_dir is not None and (last := latest_checkpoint(ckpt_dir)) is not None:
        extra = _load_checkpoint(last, model, opt, sched, np_rng, ckpt_key)
        losses, start = list(extra.pop("losses")), int(extra.pop("step"))
        resumed_from = start
        if on_resume is not None:
            on_resume(extra)
    is_module = isinstance(model, torch.nn.Module)
    if is_module:
        model.train()
    t0 = time.perf_counter()
    stopped = False
    done = start
    with make_progress() as progress:
        task = progress.add_task(description, total=steps, completed=start, info="")
        for step in range(start, steps):
            loss = loss_of_step(step)
            value = None
            if loss is not None:
                if check_finite and not torch.isfinite(loss):
                    raise FloatingPointError(f"{description}: the loss became {loss.item()} at step {step}; "
                                             f"try a lower lr (now {lr})")
                opt.zero_grad(set_to_none=True)
                loss.backward()
                if grad_clip is not None:
                    torch.nn.utils.clip_grad_norm_(params, grad_clip)
                opt.step()
                if sched is not None:
                    sched.step()
                value = float(loss.detach())
            losses.append(value)
            done = step + 1
            if after_step is not None and after_step(done, value):
                stopped = True
            text = info(done, value) if info is not None else ("" if value is None else f"loss {value:.3f}")
            progress.update(task, completed=done, info=text)
            if ckpt_dir is not None and (stopped or done == steps or (ckpt_every and done % ckpt_every == 0)):
                _save_checkpoint(ckpt_dir, done, model, opt, sched, np_rng, losses, ckpt_key,
                                 ckpt_state() if ckpt_state is not None else {})
            if stopped:
                break
    if is_module:
        model.eval()
    return FitResult(steps=done, losses=losses, wall_time_s=time.perf_counter() - t0, resumed_from=resumed_from,
                     stopped_early=stopped, extra=extra)


def _save_checkpoint(ckpt_dir: Path, step: int, model: torch.nn.Module, opt: torch.optim.Optimizer,
                     sched: Any, np_rng: np.random.Generator | None, losses: list, key: dict | None,
                     state: dict) -> None:
    from safetensors.torch import save_model

    reserved = {"step", "optimizer", "scheduler", "rng", "np_rng", "losses", "config"} & set(state)
    if reserved:
        raise ValueError(f"ckpt_state() returned reserved keys {sorted(reserved)}; rename them")
    final = ckpt_dir / f"step-{step:08d}"
    with atomic_dir(final) as tmp:
        save_model(model, str(tmp / "model.safetensors"))  # handles tied embeddings
        torch.save({"step": step, "optimizer": opt.state_dict(),
                    "scheduler": sched.state_dict() if sched is not None else None, "rng": torch.get_rng_state(),
                    "np_rng": pickle.dumps(np_rng.bit_generator.state) if np_rng is not None else None,
                    "losses": losses, "config": key, **state}, tmp / "state.pt")
    for old in ckpt_dir.glob("step-*"):  # keep only the newest
        if old != final:
            shutil.rmtree(old, ignore_errors=True)


def _load_checkpoint(path: Path, model: torch.nn.Module, opt: torch.optim.Optimizer, sched: Any,
                     np_rng: np.random.Generator | None, key: dict | None) -> dict:
    from safetensors.torch import load_model

    state = torch.load(path / "state.pt", weights_only=False)
    stored = state.pop("config", None)
    if stored != key:
        diff = sorted(k for k in set(stored or {}) | set(key or {}) if (stored or {}).get(k) != (key or {}).get(k))
        raise ValueError(f"checkpoint {path} was written with a different configuration (differs in {diff}); "
                         "use another checkpoint directory or delete it to start afresh")
    load_model(model, str(path / "model.safetensors"))
    opt.load_state_dict(state.pop("optimizer"))
    sched_state = state.pop("scheduler")
    if sched is not None and sched_state is not None:
        sched.load_state_dict(sched_state)
    torch.set_rng_state(state.pop("rng"))
    np_state = state.pop("np_rng", None)
    if np_rng is not None and np_state is not None:
        np_rng.bit_generator.state = pickle.loads(np_state)
    return state
