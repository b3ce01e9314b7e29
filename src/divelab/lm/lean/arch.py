"""Which Hugging Face models the lean path can run, and the few numbers it needs from their config.

The lean path re-implements one architecture family by hand (Llama: RMSNorm, rotary positions,
grouped-query attention, a SiLU-gated MLP), so it must refuse anything else loudly rather than
decode a different model wrongly.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

SUPPORTED_MODEL_TYPES = ("llama",)
SUPPORTED_CLASSES = ("LlamaForCausalLM",)
# rotary variants whose frequencies are fixed once the model is built (read from the model's buffer);
# "dynamic" rescales with the sequence length and would need re-deriving at every step
STATIC_ROPE_TYPES = ("default", "linear", "llama3")


@dataclass(frozen=True)
class LeanConfig:
    vocab_size: int
    hidden_size: int
    n_layers: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    rms_eps: float
    max_positions: int

    @property
    def group(self) -> int:
        """Query heads per key/value head (1 = plain multi-head attention)."""
        return self.n_heads // self.n_kv_heads


def _rope_type(config: Any) -> str:
    params = getattr(config, "rope_parameters", None) or getattr(config, "rope_scaling", None) or {}
    return str(params.get("rope_type", params.get("type", "default")))


def check_model(model: Any) -> LeanConfig:
    """The lean config of ``model``, or ValueError naming what is supported."""
    config = getattr(model, "config", None)
    kind = getattr(config, "model_type", None)
    cls = type(model).__name__
    if kind not in SUPPORTED_MODEL_TYPES or cls not in SUPPORTED_CLASSES:
        raise ValueError(f"the lean decoding path runs {', '.join(SUPPORTED_CLASSES)} models (model_type "
                         f"{', '.join(map(repr, SUPPORTED_MODEL_TYPES))}, e.g. SmolLM2), got {cls} with model_type "
                         f"{kind!r}; decode other architectures with divelab.lm.generate or HF generate")
    if getattr(config, "hidden_act", "silu") != "silu":
        raise ValueError(f"the lean path supports Llama models with hidden_act='silu', got {config.hidden_act!r}")
    rope = _rope_type(config)
    if rope not in STATIC_ROPE_TYPES:
        raise ValueError(f"the lean path supports rotary types {', '.join(STATIC_ROPE_TYPES)}, got {rope!r}")
    heads = config.num_attention_heads
    kv = getattr(config, "num_key_value_heads", None) or heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
    return LeanConfig(vocab_size=config.vocab_size, hidden_size=config.hidden_size,
                      n_layers=config.num_hidden_layers, n_heads=heads, n_kv_heads=kv, head_dim=head_dim,
                      rms_eps=float(config.rms_norm_eps), max_positions=int(config.max_position_embeddings))
