"""The lean path's weights, taken from a loaded HF Llama model in one of three formats.

Per layer the query/key/value projections are concatenated into one matrix and the MLP's gate
and up projections into another: a decode step then runs two matrix-vector products where HF runs
five, which matters when each call costs microseconds of dispatch and the matrices are small.

Formats (``FORMATS``): ``fp32`` (the HF weights as they are, bit-comparable), ``bf16`` (weights and
activations in bfloat16: half the bytes to stream; this CPU family has AVX-512 bf16 kernels), and
``int8`` (int8 weight-only per output channel with bf16 activations, see :mod:`.int8`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import torch
import torch.nn.functional as F

from divelab.lm.lean.arch import LeanConfig
from divelab.lm.lean.int8 import Int8Linear

FORMATS = ("fp32", "bf16", "int8")
ACT_DTYPE = {"fp32": torch.float32, "bf16": torch.bfloat16, "int8": torch.bfloat16}
Linear = Callable[[torch.Tensor], torch.Tensor]


@dataclass
class LayerWeights:
    attn_norm: torch.Tensor
    qkv: Linear
    o: Linear
    mlp_norm: torch.Tensor
    gate_up: Linear
    down: Linear


@dataclass
class LeanWeights:
    fmt: str
    row_invariant: bool
    act_dtype: torch.dtype
    embed: torch.Tensor  # (vocab, hidden): a lookup reads only the rows it needs, so it stays dense
    layers: list[LayerWeights]
    norm: torch.Tensor
    lm_head: Linear
    inv_freq: torch.Tensor  # (head_dim / 2,) float32, as the HF model computed it (any static rope type)
    attention_scaling: float


def _cat(*ts: torch.Tensor | None) -> torch.Tensor | None:
    if all(t is None for t in ts):
        return None
    return torch.cat([t.detach() for t in ts if t is not None], dim=0)  # type: ignore[union-attr]


def _mkldnn_bf16() -> bool:
    return bool(torch.backends.mkldnn.is_available() and torch.ops.mkldnn._is_mkldnn_bf16_supported())


def _linear(weight: torch.Tensor, bias: torch.Tensor | None, fmt: str, row_invariant: bool = False) -> Linear:
    dtype = ACT_DTYPE[fmt]
    if fmt == "int8":
        return Int8Linear(weight, bias, dtype).forward  # bound method: skips nn.Module hook dispatch
    w = weight.detach().to(dtype).contiguous()
    b = None if bias is None else bias.detach().to(dtype)
    if (fmt == "fp32" and torch.backends.mkldnn.is_available()) or (fmt == "bf16" and _mkldnn_bf16()):
        # oneDNN with the weight pre-packed into its blocked layout (what inductor's CPU freezing pass does).
        # bf16: F.linear's bf16 path repacks the weight on every call. fp32: on an AMD Zen 4 (AVX-512) the
        # pre-packed product measured faster than F.linear's for one row and far faster for a verifier's k
        # rows (F.linear also blocks the reduction by the number of rows on small matrices, so a row's result
        # depends on how many rows come with it; oneDNN's does not, from two rows on: a row-invariant model
        # pads one row to two). One kernel on every machine, not a timed pick, so numbers repeat run to run.
        packed = torch.ops.mkldnn._reorder_linear_weight(w, 1)
        out = int(w.shape[0])

        def prepacked(x: torch.Tensor) -> torch.Tensor:
            if torch.compiler.is_compiling():  # inductor cannot lower the oneDNN op itself: an opaque call
                return packed_linear(x, packed, b, out)
            return torch.ops.mkldnn._linear_pointwise(x, packed, b, "none", [], "")

        return prepacked
    return partial(F.linear, weight=w, bias=b)


@torch.library.custom_op("divelab::packed_linear", mutates_args=())
def packed_linear(x: torch.Tensor, packed: torch.Tensor, bias: torch.Tensor | None, out_features: int
                  ) -> torch.Tensor:
    """oneDNN's product with a pre-packed weight, as an operator ``torch.compile`` calls as it is (inductor
    fuses the elementwise work around it)."""
    return torch.ops.mkldnn._linear_pointwise(x, packed, bias, "none", [], "")


@packed_linear.register_fake
def _packed_linear_shape(x: torch.Tensor, packed: torch.Tensor, bias: torch.Tensor | None, out_features: int
                         ) -> torch.Tensor:
    return x.new_empty((*x.shape[:-1], out_features))


def _bias(linear: torch.nn.Linear) -> torch.Tensor | None:
    return None if linear.bias is None else linear.bias


def from_hf_weights(model: torch.nn.Module, config: LeanConfig, fmt: str, row_invariant: bool = False) -> LeanWeights:
    """Collect (and convert) ``model``'s weights; ``model`` is left untouched. ``row_invariant``: fp32 products
    whose rows do not depend on how many rows are multiplied together (see :class:`~.model.LeanLM`)."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown weight format {fmt!r}; allowed: {', '.join(FORMATS)}")
    dtype = ACT_DTYPE[fmt]
    inner = model.model  # type: ignore[attr-defined]
    layers = []
    for layer in inner.layers:
        at, mlp = layer.self_attn, layer.mlp
        qkv_w = _cat(at.q_proj.weight, at.k_proj.weight, at.v_proj.weight)
        qkv_b = _cat(_bias(at.q_proj), _bias(at.k_proj), _bias(at.v_proj))
        gu_w = _cat(mlp.gate_proj.weight, mlp.up_proj.weight)
        gu_b = _cat(_bias(mlp.gate_proj), _bias(mlp.up_proj))
        layers.append(LayerWeights(
            attn_norm=layer.input_layernorm.weight.detach().to(dtype),
            qkv=_linear(qkv_w, qkv_b, fmt, row_invariant),
            o=_linear(at.o_proj.weight, _bias(at.o_proj), fmt, row_invariant),
            mlp_norm=layer.post_attention_layernorm.weight.detach().to(dtype),
            gate_up=_linear(gu_w, gu_b, fmt, row_invariant),
            down=_linear(mlp.down_proj.weight, _bias(mlp.down_proj), fmt, row_invariant)))
    rotary = inner.rotary_emb
    return LeanWeights(fmt=fmt, row_invariant=row_invariant, act_dtype=dtype, embed=inner.embed_tokens.weight.detach().to(dtype), layers=layers,
                       norm=inner.norm.weight.detach().to(dtype),
                       lm_head=_linear(model.lm_head.weight, _bias(model.lm_head), fmt,  # type: ignore[attr-defined]
                                       row_invariant),
                       inv_freq=rotary.inv_freq.detach().float().clone(),
                       attention_scaling=float(getattr(rotary, "attention_scaling", 1.0)))
