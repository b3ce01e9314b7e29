"""The world model as a real LLM: SmolLM2-135M-Instruct with LoRA adapters, trained CPT → SFT as in the paper.

The text is the tiny world model's (:mod:`.model`): the prompt is the current state and the action, the
completion the next state written as an edit. Both stages are LoRA fits with :func:`divelab.lm.adapt.adapt`
(TRL's SFTTrainer) on the seen games' transitions:

- **CPT** (continued pre-training): rows ``{"prompt": "", "completion": prompt + target}``, so the loss
  covers every token of the transition text (plain next-token training, no instruction split); the
  target has no ``[WHY]`` part.
- **SFT**: rows ``{"prompt": prompt, "completion": " [WHY] ... target"}`` (loss on the completion only),
  starting from the CPT model: the CPT adapter is merged into the weights and a fresh adapter is fitted on
  top (the base of the SFT adapter is named ``smollm2-135m-instruct+cpt:<key>``, so its cache key
  changes with the CPT adapter's).

:class:`LLMWorldModel` offers what the fidelity evaluator, the simulator and the compounding rollout call
(``predict`` and ``generated``). Greedy decoding is deterministic, so every prediction is memoised by its
prompt, in memory and in the content cache: a simulator pays once per distinct (state, action), and a
killed run resumes with what it had generated. New prompts are decoded in left-padded batches.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from divelab.cache import atomic_write_text, entry_path, stable_hash
from divelab.training.world_model.model import Prediction, parse_prediction, prompt_text, target_text
from divelab.training.world_model.transitions import State, Transition

PREDICTION_CACHE = "world-model-llm-predictions"
_PREDICTION_VERSION = 1  # bump when the decoding below changes what a cached prediction holds
END = "[END]"


@dataclass(frozen=True)
class LLMPlan:
    """The SmolLM2 world model's training, decoding and use (one value each)."""

    cpt_steps: int
    """LoRA steps of the CPT stage (plain next-token training on transition text)"""
    sft_steps: int
    """LoRA steps of the SFT stage (prompt = state + action, completion = the next state), from the CPT model"""
    batch_size: int = 8
    """rows per optimizer step"""
    lr: float = 1e-3
    """peak learning rate of both stages (set before any run; not tuned)"""
    top_layers: int = 8
    """LoRA (rank 16) on the attention and MLP projections of the top this-many layers: the backward pass
    stops at the lowest adapted layer, about half the CPU time of adapting every layer"""
    max_new_tokens: int = 112
    """longest generated next state in tokens (a longer one is cut and does not parse)"""
    gen_batch: int = 16
    """prompts decoded together (greedy, left-padded)"""
    n_train: int | None = None
    """seen-game transitions used for training (None: all of them, as the tiny model)"""
    n_eval: int | None = None
    """held-out transitions scored (a seeded sample, the same for every model compared; None: all)"""
    n_seen: int | None = None
    """seen transitions of the RL test bed's games predicted before GRPO (a seeded sample; None: all): their
    seen-game fidelity is recorded, and the simulator reads these predictions back from the memo"""
    grpo: bool = True
    """whether agents are GRPO-trained inside the SmolLM2 simulator (the run's seeds and iterations)"""

    def lora_modules(self) -> tuple[str, ...]:
        from divelab.lm.adapt import top_layer_modules

        return top_layer_modules(self.top_layers)

    def adapt_config(self, steps: int, seed: int) -> Any:
        from divelab.lm.adapt import AdaptConfig, LoraSpec

        return AdaptConfig(method="sft", steps=steps, lr=self.lr, batch_size=self.batch_size, max_length=384,
                           seed=seed, lora=LoraSpec(r=16, alpha=32, target_modules=self.lora_modules()),
                           save_every=20, activation_checkpointing=False)


def cpt_rows(transitions: Sequence[Transition]) -> list[dict[str, str]]:
    """CPT rows: the whole transition text as the completion of an empty prompt (loss on every token)."""
    return [{"prompt": "", "completion": f"{prompt_text(t.state, t.action)} {target_text(t, reasoning=False)}"}
            for t in transitions]


def sft_rows(transitions: Sequence[Transition]) -> list[dict[str, str]]:
    """SFT rows: state + action as the prompt, the "what happens next" tags and the next state as the completion."""
    return [{"prompt": prompt_text(t.state, t.action), "completion": " " + target_text(t, reasoning=True)}
            for t in transitions]


def cut_at_end(text: str) -> str:
    """The generated text up to and including the first ``[END]`` (the whole text when there is none)."""
    i = text.find(END)
    return text if i < 0 else text[:i + len(END)]


def hf_generator(model: Any, tokenizer: Any, max_new_tokens: int) -> Callable[[list[str]], list[str]]:
    """Greedy continuations of a batch of prompts by a Hugging Face causal LM (left-padded, one call)."""
    import torch

    def generate(prompts: list[str]) -> list[str]:
        tokenizer.padding_side = "left"
        enc = tokenizer(prompts, return_tensors="pt", padding=True)
        with torch.no_grad():
            out = model.generate(**enc, max_new_tokens=max_new_tokens, do_sample=False, temperature=None,
                                 top_p=None, top_k=None, pad_token_id=tokenizer.pad_token_id,
                                 eos_token_id=tokenizer.eos_token_id, stop_strings=[END], tokenizer=tokenizer)
        width = enc["input_ids"].shape[1]
        return [cut_at_end(t) for t in tokenizer.batch_decode(out[:, width:], skip_special_tokens=True)]

    return generate


class LLMWorldModel:
    """A text generator as a world model: ``predict`` (greedy, memoised by prompt) and ``generated``.

    ``generate`` maps a list of prompts to their continuations; ``key`` names the weights and decoding in the
    content cache (None: memo in memory only). New prompts are decoded ``batch_size`` at a time, sorted by
    length so a batch pads little, and each batch is written to the cache as soon as it is done."""

    def __init__(self, generate: Callable[[list[str]], list[str]], key: str | None = None, batch_size: int = 16,
                 name: str = "SmolLM2 world model") -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self._generate = generate
        self.key = key
        self.batch_size = batch_size
        self.name = name
        self._text: dict[str, str] = {}
        self.generated = 0  # predictions actually generated (the rest came from a memo)
        self.from_cache = 0  # predictions read back from the content cache

    @classmethod
    def from_adapter(cls, adapter: Any, plan: LLMPlan, base_loader: Callable[[], tuple[Any, Any]] | None = None,
                     name: str = "SmolLM2 world model") -> LLMWorldModel:
        """The base model with ``adapter`` merged in, decoding greedily; cached under the adapter's key."""
        model, tok = adapter.load(merge=True, base_loader=base_loader)
        key = stable_hash({"adapter": adapter.key, "new": plan.max_new_tokens}, length=24)
        return cls(hf_generator(model, tok, plan.max_new_tokens), key, plan.gen_batch, name)

    def _path(self, prompt: str) -> Path | None:
        if self.key is None:
            return None
        h = stable_hash({"v": _PREDICTION_VERSION, "model": self.key, "prompt": prompt}, length=32)
        return entry_path(PREDICTION_CACHE, f"{h}.json")

    def texts(self, prompts: Sequence[str]) -> list[str]:
        """The generated text of each prompt (memo, then content cache, then batched decoding)."""
        todo = []
        for p in dict.fromkeys(prompts):
            if p in self._text:
                continue
            path = self._path(p)
            if path is not None and path.is_file():
                self._text[p] = json.loads(path.read_text())["text"]
                self.from_cache += 1
            else:
                todo.append(p)
        todo.sort(key=len)
        for i in range(0, len(todo), self.batch_size):
            chunk = todo[i:i + self.batch_size]
            out = self._generate(chunk)
            if len(out) != len(chunk):
                raise RuntimeError(f"the generator returned {len(out)} texts for {len(chunk)} prompts")
            for p, text in zip(chunk, out, strict=True):
                self._text[p] = text
                path = self._path(p)
                if path is not None:
                    atomic_write_text(path, json.dumps({"text": text, "batch": len(chunk)}))
            self.generated += len(chunk)
        return [self._text[p] for p in prompts]

    def predict(self, queries: Sequence[tuple[State, str]]) -> list[Prediction]:
        """Greedy next-state predictions for (state, action) pairs, parsed as edits of each state."""
        prompts = [prompt_text(s, a) for s, a in queries]
        return [parse_prediction(text, s) for text, (s, _) in zip(self.texts(prompts), queries, strict=True)]


def train_stages(transitions: Sequence[Transition], plan: LLMPlan, seed: int, base: str | None = None,
                 base_loader: Callable[[], tuple[Any, Any]] | None = None) -> dict[str, Any]:
    """The CPT adapter and the SFT adapter fitted on top of it (both cached by content), with their loaders:
    ``{"cpt": (adapter, loader), "sft": (adapter, loader)}``; ``loader`` loads the base the adapter was fitted
    on (``base_loader`` or SmolLM2 for CPT; the CPT-merged model for SFT)."""
    from divelab.lm.adapt import adapt
    from divelab.lm.real import SMOLLM2

    base = base or SMOLLM2
    cpt = adapt(base, cpt_rows(transitions), plan.adapt_config(plan.cpt_steps, seed), name="world model: SmolLM2 CPT",
                base_loader=base_loader)

    def cpt_merged() -> tuple[Any, Any]:
        return cpt.load(merge=True, base_loader=base_loader)

    sft = adapt(f"{base}+cpt:{cpt.key}", sft_rows(transitions), plan.adapt_config(plan.sft_steps, seed),
                name="world model: SmolLM2 SFT", base_loader=cpt_merged)
    return {"cpt": (cpt, base_loader), "sft": (sft, cpt_merged)}
