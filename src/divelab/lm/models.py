"""Named tiny model configs: ordinary ``transformers`` Llama-style causal LMs, nothing downloaded.

Sizes are chosen for this 2-core CPU machine (a ~4M-parameter model does about one 4k-token
training step per second). Every white-box system takes any HF causal LM, so these are only
defaults: ``divelab.lm.load_model`` also loads a real local checkpoint directory.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
from transformers import LlamaConfig, LlamaForCausalLM


@dataclass(frozen=True)
class TinyConfig:
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    intermediate_size: int
    max_position_embeddings: int = 512
    tie_word_embeddings: bool = True

    def to_hf(self, vocab_size: int, **overrides: object) -> LlamaConfig:
        kwargs = dict(asdict(self))
        kwargs.update(overrides)
        return LlamaConfig(
            vocab_size=vocab_size,
            num_key_value_heads=kwargs["num_attention_heads"],
            rms_norm_eps=1e-5,
            bos_token_id=None,
            eos_token_id=None,
            pad_token_id=None,
            **kwargs,
        )


MODEL_CONFIGS: dict[str, TinyConfig] = {
    # for unit tests: trains in seconds
    "tiny-100k": TinyConfig(hidden_size=48, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128),
    "tiny-1m": TinyConfig(hidden_size=128, num_hidden_layers=4, num_attention_heads=4, intermediate_size=352),
    "tiny-4m": TinyConfig(hidden_size=256, num_hidden_layers=4, num_attention_heads=8, intermediate_size=704),
    "tiny-16m": TinyConfig(hidden_size=384, num_hidden_layers=8, num_attention_heads=8, intermediate_size=1024,
                           max_position_embeddings=1024),
}


def config_for(name: str) -> TinyConfig:
    if name not in MODEL_CONFIGS:
        raise ValueError(f"unknown model config {name!r}; allowed: {', '.join(MODEL_CONFIGS)}")
    return MODEL_CONFIGS[name]


def build_model(name: str, vocab_size: int, seed: int = 0, **overrides: object) -> LlamaForCausalLM:
    """A freshly initialised model of the named config (deterministic for a seed)."""
    if vocab_size < 2:
        raise ValueError(f"vocab_size must be >= 2, got {vocab_size}")
    hf = config_for(name).to_hf(vocab_size, **overrides)
    torch.manual_seed(seed)
    model = LlamaForCausalLM(hf)
    model.eval()
    return model


def count_parameters(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())
