"""LoRA adaptation of any Hugging Face causal LM with ``peft`` and TRL's trainers, cached by content.

The papers this package reproduces *train* their subjects and agents: a safety-tuned model, a tool-calling
agent, a coder, a world model. :func:`adapt` is the one place that does it here: it fits a LoRA adapter
with TRL's ``SFTTrainer``, ``DPOTrainer`` or ``GRPOTrainer`` on rows in TRL's own dataset formats, and
stores the adapter under a key made of everything that decides it (base model, rows, configuration,
reward functions, library versions). A second call with the same inputs loads it; a killed run resumes
from its last checkpoint.

>>> from divelab.lm.adapt import AdaptConfig, adapt                     # doctest: +SKIP
>>> rows = [{"prompt": "2+2=", "completion": " 4"}, {"prompt": "3+5=", "completion": " 8"}]
>>> adapter = adapt("smollm2-135m-instruct", rows, AdaptConfig(method="sft", steps=50))
>>> model, tok = adapter.load()                   # the base model with the adapter applied

Row formats (TRL's): ``sft`` takes ``{"prompt", "completion"}`` (loss on the completion only) or
``{"messages": [...]}``; ``dpo`` takes ``{"prompt", "chosen", "rejected"}``; ``grpo`` takes ``{"prompt", ...}``
and reward functions called as TRL calls them (extra columns arrive as keyword arguments).
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from divelab.cache import atomic_dir, atomic_write_text, entry_path, lock, stable_hash

METHODS = ("sft", "dpo", "grpo")
"""The trainers :func:`adapt` drives: TRL's SFTTrainer, DPOTrainer and GRPOTrainer."""

REQUIRED_COLUMNS = {"sft": (("prompt", "completion"), ("messages",)), "dpo": (("prompt", "chosen", "rejected"),),
                    "grpo": (("prompt",),)}
"""For each method, the column sets a row may have (any one of them)."""

CACHE_KIND = "adapters"
SMOLLM2_LAYERS = 30  # SmolLM2-135M's decoder layers
LLAMA_PROJECTIONS = ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
                     "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj")  # a Llama-style block's linear layers


def top_layer_modules(n: int, n_layers: int = SMOLLM2_LAYERS) -> tuple[str, ...]:
    """The attention and MLP projections of a Llama-style model's top ``n`` layers, as LoRA target names
    (``layers.<i>.self_attn.q_proj`` ...). LoRA there only stops the backward pass at the lowest adapted
    layer: about half the CPU time of adapting every layer, for the adaptations that only teach a format."""
    if not 0 < n <= n_layers:
        raise ValueError(f"top layers must be in 1..{n_layers}, got {n}")
    return tuple(f"layers.{i}.{m}" for i in range(n_layers - n, n_layers) for m in LLAMA_PROJECTIONS)
_VERSION = 1  # bump when the training recipe below changes what an adapter holds


@dataclass(frozen=True)
class LoraSpec:
    """The low-rank adapter's shape."""

    r: int = 16
    """rank of each adapter matrix"""
    alpha: int = 32
    """scale numerator: the update is multiplied by alpha / r"""
    dropout: float = 0.0
    """dropout on the adapter's input during training"""
    target_modules: tuple[str, ...] = ("q_proj", "k_proj", "v_proj", "o_proj")
    """names of the linear layers that get adapters (the attention projections of Llama-style models)"""

    def peft_config(self) -> Any:
        """This shape as a ``peft.LoraConfig`` for a causal LM (``peft.get_peft_model(model, it)``)."""
        from peft import LoraConfig

        return LoraConfig(r=self.r, lora_alpha=self.alpha, lora_dropout=self.dropout,
                          target_modules=list(self.target_modules), task_type="CAUSAL_LM")


@dataclass(frozen=True)
class AdaptConfig:
    """One adaptation: the trainer, its budget and the adapter."""

    method: str = "sft"
    """which TRL trainer: sft, dpo or grpo"""
    steps: int = 200
    """optimizer steps"""
    lr: float = 2e-4
    """peak learning rate (linear decay after a short warm-up)"""
    batch_size: int = 8
    """rows per optimizer step (for grpo: completions per step, a multiple of num_generations)"""
    max_length: int = 512
    """longest tokenized row kept (sft, dpo); longer rows are truncated"""
    seed: int = 0
    """seed for the adapter's initialisation, the row order and GRPO's sampling"""
    lora: LoraSpec = field(default_factory=LoraSpec)
    """the adapter's shape"""
    beta: float = 0.1
    """dpo: the preference temperature; grpo: the KL coefficient to the base model (0 turns it off)"""
    num_generations: int = 4
    """grpo: completions sampled per prompt (the group)"""
    max_completion_length: int = 64
    """grpo: longest sampled completion in tokens"""
    temperature: float = 1.0
    """grpo: sampling temperature"""
    save_every: int = 50
    """steps between resumable checkpoints"""
    activation_checkpointing: bool = True
    """sft: recompute activations in the backward pass (TRL's default; saves memory). False skips the recompute,
    and when the adapters sit in the top layers only the backward pass then stops at the lowest adapted layer
    (about twice as fast on a CPU)"""

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ValueError(f"method {self.method!r} is not one of {', '.join(METHODS)}")
        for name in ("steps", "batch_size", "max_length", "num_generations", "max_completion_length", "save_every"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if not self.lr > 0:
            raise ValueError(f"lr must be > 0, got {self.lr}")
        if self.method == "grpo" and self.num_generations < 2:
            raise ValueError(f"grpo compares completions within a group: num_generations must be >= 2, "
                             f"got {self.num_generations}")
        if self.method == "grpo" and self.batch_size % self.num_generations:
            raise ValueError(f"grpo needs batch_size ({self.batch_size}) to be a multiple of num_generations "
                             f"({self.num_generations})")


@dataclass(frozen=True)
class StopRule:
    """Stop training once the model reaches a target on a check of the caller's (say, held-out accuracy).

    Fine-tuning a subject for an experiment often needs it *competent but not saturated*: an intervention
    that should raise a behaviour has no headroom once the behaviour is at 100 %. The check runs every
    ``every`` optimizer steps on the model in eval mode without gradients."""

    score: Callable[[Any], float]
    """the model being trained -> a number (higher is further along)"""
    target: float
    """training stops at the first check whose score is >= this"""
    every: int = 10
    """optimizer steps between checks"""
    version: str = ""
    """enters the cache key with ``score``'s qualified name: put everything that decides the check here (its
    data, its seed) and change it when the check's code changes"""

    def __post_init__(self) -> None:
        if self.every < 1:
            raise ValueError(f"every must be >= 1, got {self.every}")


@dataclass(frozen=True)
class Adapter:
    """A trained adapter in the cache: ``path/adapter`` holds peft's files, ``record`` how it was made."""

    base: str
    path: Path
    record: dict[str, Any]

    @property
    def key(self) -> str:
        return self.path.name

    def load(self, *, merge: bool = False, base_loader: Callable[[], tuple[Any, Any]] | None = None
             ) -> tuple[Any, Any]:
        """``(model, tokenizer)``: the base model with this adapter applied, in eval mode. ``merge=True``
        folds the adapter into the weights (a plain HF model: faster, and hooks see ordinary layers)."""
        from peft import PeftModel

        model, tok = (base_loader or _default_loader(self.base))()
        model = PeftModel.from_pretrained(model, self.path / "adapter")
        if merge:
            model = model.merge_and_unload()
        model.eval()
        return model, tok


def _default_loader(base: str) -> Callable[[], tuple[Any, Any]]:
    def load() -> tuple[Any, Any]:
        from divelab.lm import load_model

        return load_model(base)

    return load


def check_rows(rows: Sequence[Mapping[str, Any]], method: str) -> list[dict[str, Any]]:
    """The rows as plain dicts, after checking each has one of the method's column sets."""
    if method not in METHODS:
        raise ValueError(f"method {method!r} is not one of {', '.join(METHODS)}")
    rows = [dict(r) for r in rows]
    if not rows:
        raise ValueError("no training rows")
    allowed = REQUIRED_COLUMNS[method]
    for i, row in enumerate(rows):
        if not any(all(c in row for c in cols) for cols in allowed):
            wanted = " or ".join("{" + ", ".join(cols) + "}" for cols in allowed)
            raise ValueError(f"row {i} has columns {sorted(row)}; {method} rows need {wanted}")
    return rows


def _function_name(fn: Callable[..., Any]) -> str:
    return f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', repr(fn))}"


def adapter_key(base: str, rows: list[dict[str, Any]], config: AdaptConfig,
                reward_funcs: Sequence[Callable[..., Any]] = (), reward_version: str = "",
                stop: StopRule | None = None) -> str:
    """Everything that decides the adapter: base, rows, configuration, rewards, stop rule and library versions."""
    import peft
    import transformers
    import trl

    cfg = asdict(config)
    if cfg["activation_checkpointing"]:  # the default: left out, so adapters cached before it existed keep their key
        del cfg["activation_checkpointing"]
    return stable_hash({"v": _VERSION, "base": str(base), "rows": stable_hash(rows, 32), "config": cfg,
                        "rewards": [_function_name(f) for f in reward_funcs], "reward_version": reward_version,
                        **({} if stop is None else {"stop": [_function_name(stop.score), stop.target, stop.every,
                                                             stop.version]}),
                        "peft": peft.__version__, "trl": trl.__version__, "transformers": transformers.__version__})


def find(key: str) -> Adapter | None:
    """The cached adapter with this key, or None."""
    path = entry_path(CACHE_KIND, key)
    if not (path / "record.json").exists():
        return None
    record = json.loads((path / "record.json").read_text())
    return Adapter(base=record["base"], path=path, record=record)


def adapt(base: str, rows: Sequence[Mapping[str, Any]], config: AdaptConfig, *,
          reward_funcs: Sequence[Callable[..., Any]] = (), reward_version: str = "", name: str = "adapt",
          base_loader: Callable[[], tuple[Any, Any]] | None = None, force: bool = False,
          stop: StopRule | None = None) -> Adapter:
    """Fit (or load from the cache) a LoRA adapter on ``base`` with the method's TRL trainer.

    ``base`` is anything :func:`divelab.lm.load_model` takes (a zoo name, ``smollm2-135m-instruct`` or a
    checkpoint directory) and names the base in the cache key; ``base_loader`` overrides how it is loaded.
    ``reward_funcs`` (grpo only) enter the key by qualified name: change ``reward_version`` when a reward's
    code changes. ``name`` labels the progress bar. A run that is killed restarts from its last checkpoint
    (every ``config.save_every`` steps). ``stop`` ends training early once its check reaches its target; the
    record keeps every check (``stop_checks``) and the step it stopped at."""
    rows = check_rows(rows, config.method)
    if config.method == "grpo" and not reward_funcs:
        raise ValueError("grpo needs at least one reward function (reward_funcs)")
    if config.method != "grpo" and reward_funcs:
        raise ValueError(f"reward_funcs only apply to grpo, not {config.method}")
    key = adapter_key(base, rows, config, reward_funcs, reward_version, stop)
    path = entry_path(CACHE_KIND, key)
    with lock(path):
        if force and path.exists():
            shutil.rmtree(path)
        cached = find(key)
        if cached is not None:
            return cached
        # checkpoints live beside the final entry so that a killed run resumes; removed on success
        work = entry_path(CACHE_KIND + "-partial", key)
        model, tok = (base_loader or _default_loader(base))()
        t0 = time.perf_counter()
        with atomic_dir(path) as tmp:
            log, resumed, checks = _train(model, tok, rows, config, list(reward_funcs), work, tmp / "adapter",
                                          name, stop)
            record = {"base": str(base), "key": key, "config": asdict(config), "n_rows": len(rows),
                      "rewards": [_function_name(f) for f in reward_funcs], "reward_version": reward_version,
                      "train_s": round(time.perf_counter() - t0, 1), "resumed_from_step": resumed, "log": log,
                      **({} if stop is None else {"stop_checks": checks, "steps_trained": _steps_trained(log)})}
            atomic_write_text(tmp / "record.json", json.dumps(record, indent=1, default=float))
        shutil.rmtree(work, ignore_errors=True)
    return Adapter(base=str(base), path=path, record=record)


def _trainer_args(config: AdaptConfig, output_dir: Path) -> Any:
    import torch

    common = dict(output_dir=str(output_dir), max_steps=config.steps, learning_rate=config.lr,
                  lr_scheduler_type="linear", warmup_steps=max(1, config.steps // 20), logging_steps=1,
                  save_strategy="steps", save_steps=config.save_every, save_total_limit=1, report_to="none",
                  use_cpu=not torch.cuda.is_available(), bf16=False, fp16=False, seed=config.seed,
                  data_seed=config.seed, dataloader_num_workers=0, log_level="error", disable_tqdm=True,
                  gradient_accumulation_steps=1, per_device_train_batch_size=config.batch_size)
    if config.method == "sft":
        from trl import SFTConfig

        return SFTConfig(**common, max_length=config.max_length, packing=False,
                         **({} if config.activation_checkpointing else {"gradient_checkpointing": False}))
    if config.method == "dpo":
        from trl import DPOConfig

        return DPOConfig(**common, beta=config.beta, max_length=config.max_length)
    from trl import GRPOConfig

    return GRPOConfig(**common, beta=config.beta, num_generations=config.num_generations,
                      max_completion_length=config.max_completion_length, temperature=config.temperature,
                      scale_rewards="none", disable_dropout=True, shuffle_dataset=True)


def _trainer(model: Any, tok: Any, rows: list[dict[str, Any]], config: AdaptConfig,
             reward_funcs: list[Callable[..., Any]], output_dir: Path) -> Any:
    from datasets import Dataset

    lora = config.lora.peft_config()
    args = _trainer_args(config, output_dir)
    data = Dataset.from_list(rows)
    if tok.pad_token is None:  # batching needs one; the end-of-text token is the usual choice
        tok.pad_token = tok.eos_token
    if config.method == "sft":
        from trl import SFTTrainer

        return SFTTrainer(model=model, args=args, train_dataset=data, processing_class=tok, peft_config=lora)
    if config.method == "dpo":
        from trl import DPOTrainer

        return DPOTrainer(model=model, args=args, train_dataset=data, processing_class=tok, peft_config=lora)
    from trl import GRPOTrainer

    return GRPOTrainer(model=model, reward_funcs=reward_funcs, args=args, train_dataset=data,
                       processing_class=tok, peft_config=lora)


def _last_checkpoint(work: Path) -> Path | None:
    if not work.is_dir():
        return None
    from transformers.trainer_utils import get_last_checkpoint

    last = get_last_checkpoint(str(work))
    return Path(last) if last else None


def _steps_trained(log: list[dict[str, Any]]) -> int:
    return max((int(h.get("step", 0)) for h in log), default=0)


def _stop_callback(stop: StopRule, trainer: Any, checks: list[list[float]]) -> Any:
    import torch
    from transformers import TrainerCallback

    class _Stop(TrainerCallback):
        def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            if state.global_step % stop.every:
                return
            model = trainer.model
            model.eval()
            with torch.no_grad():
                score = float(stop.score(model))
            model.train()
            checks.append([state.global_step, score])
            if score >= stop.target:
                control.should_training_stop = True

    return _Stop()


def _train(model: Any, tok: Any, rows: list[dict[str, Any]], config: AdaptConfig,
           reward_funcs: list[Callable[..., Any]], work: Path, out: Path, name: str, stop: StopRule | None = None
           ) -> tuple[list[dict[str, Any]], int, list[list[float]]]:
    from transformers import PrinterCallback, TrainerCallback

    from divelab.progress import make_progress

    trainer = _trainer(model, tok, rows, config, reward_funcs, work)
    trainer.remove_callback(PrinterCallback)
    last = _last_checkpoint(work)
    resumed = int(last.name.split("-")[-1]) if last else 0
    with make_progress() as bar:
        task = bar.add_task(f"{name}: LoRA {config.method}", total=config.steps, completed=resumed, info="")

        class _Bar(TrainerCallback):
            # TRL logs loss (sft, dpo) or reward (grpo) every step: show the one this method has
            def on_log(self, args: Any, state: Any, control: Any, logs: Any = None, **kw: Any) -> None:
                shown = {k: logs[k] for k in ("loss", "reward", "rewards/accuracies", "kl") if logs and k in logs}
                bar.update(task, completed=state.global_step,
                           info=" ".join(f"{k.split('/')[-1]} {v:.3f}" for k, v in shown.items()))

        trainer.add_callback(_Bar())
        checks: list[list[float]] = []
        if stop is not None:
            trainer.add_callback(_stop_callback(stop, trainer, checks))
        trainer.train(resume_from_checkpoint=str(last) if last else None)
    trainer.model.save_pretrained(out)
    return [dict(h) for h in trainer.state.log_history], resumed, checks


def read_rows(path: str | Path) -> list[dict[str, Any]]:
    """Training rows from a JSON Lines file (one JSON object a line), with the line named on an error."""
    from divelab.jsonl import read_objects

    return [row for _, row in read_objects(path, "training rows")]
