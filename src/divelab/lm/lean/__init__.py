"""divelab.lm.lean: a lean single-sequence decoding path for HF Llama-family models on CPU.

The HF model's weights are regrouped (fused QKV and gate/up projections) in fp32, bf16 or int8
weight-only form, and decoded against a pre-allocated static KV cache with in-place rollback, so a
step costs its matrix products and little else. ``forward(tokens)`` appends k tokens and returns
their k logit rows (a speculative verifier scores k drafts in one call); ``rollback(n)`` drops
the last n. ``forward_many`` steps several sequences (``LeanLM.fork``) in one forward, reading the
weights once for all of them (a server decoding several requests).

>>> from divelab.lm import pretrained                          # doctest: +SKIP
>>> from divelab.lm.lean import LeanLM, lean_generate
>>> model, tok = pretrained("smoke")
>>> lean = LeanLM.from_hf(model, fmt="bf16")
>>> out = lean_generate(lean, tok.encode("def add(a, b):\\n"), max_new_tokens=20)
>>> print(tok.decode(out.tokens[0]))
"""

from divelab.lm.lean.arch import SUPPORTED_CLASSES, SUPPORTED_MODEL_TYPES, LeanConfig, check_model
from divelab.lm.lean.cache import StaticKVCache
from divelab.lm.lean.generate import lean_generate
from divelab.lm.lean.model import DEFAULT_MAX_LEN, LeanLM, forward_many
from divelab.lm.lean.weights import FORMATS

__all__ = ["DEFAULT_MAX_LEN", "FORMATS", "SUPPORTED_CLASSES", "SUPPORTED_MODEL_TYPES", "LeanConfig", "LeanLM",
           "StaticKVCache", "check_model", "forward_many", "lean_generate"]
