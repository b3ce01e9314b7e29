"""Int8 weight-only linear layers: per-output-channel symmetric int8 weights, bf16 activations.

Decoding one token reads every weight once, so on a CPU it is bound by memory bandwidth; int8
weights halve the bytes read against bf16. PyTorch ships the CPU kernel that dequantises on the
fly (``torch._weight_int8pack_mm``, the one torchao's int8 weight-only mode calls), so no extra
package is needed. With float32 activations that kernel is several times slower than with bf16,
hence activations stay bf16 in this format.
"""

from __future__ import annotations

import torch


class Int8Linear(torch.nn.Module):
    """``y = x @ (q * scale).T + bias`` with ``q`` int8 (out, in) and ``scale`` one per output row."""

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None, act_dtype: torch.dtype) -> None:
        super().__init__()
        w = weight.detach().float()
        scale = (w.abs().amax(dim=1) / 127.0).clamp(min=1e-12)
        self.register_buffer("q", torch.round(w / scale[:, None]).clamp(-127, 127).to(torch.int8).contiguous())
        self.register_buffer("scale", scale.to(act_dtype))
        self.register_buffer("bias", None if bias is None else bias.detach().to(act_dtype))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = x.shape
        y = torch._weight_int8pack_mm(x.reshape(-1, shape[-1]), self.q, self.scale)
        y = y.reshape(*shape[:-1], -1)
        return y if self.bias is None else y + self.bias
