"""Read one hidden layer from a forward the caller runs anyway: a hook on the module that produces it.

``hidden_states[k]`` of a Hugging Face causal LM is the input of decoder block 0 for ``k = 0``, the output
of block ``k - 1`` for ``0 < k < L``, and the final norm's output for ``k = L``. A hook on that module sees
the same tensor without asking the model for every layer's states (``output_hidden_states``), so the
serving forward keeps its cost; the hook does nothing until armed.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import torch

FINAL_NORMS = ("norm", "ln_f", "final_layer_norm", "final_layernorm")


def decoder_blocks(model: Any) -> torch.nn.ModuleList:
    """The model's list of decoder blocks (the ModuleList as long as ``config.num_hidden_layers``)."""
    n = int(model.config.num_hidden_layers)
    for _, mod in model.named_modules():
        if isinstance(mod, torch.nn.ModuleList) and len(mod) == n:
            return mod
    raise ValueError(f"found no list of {n} decoder blocks in {type(model).__name__}")


def final_norm(model: Any) -> torch.nn.Module:
    blocks = decoder_blocks(model)
    for name, mod in model.named_modules():
        if name.rsplit(".", 1)[-1] in FINAL_NORMS and mod is not blocks and not any(mod is b for b in blocks):
            return mod
    raise ValueError(f"found no final norm ({', '.join(FINAL_NORMS)}) in {type(model).__name__}")


def _tensor(x: Any) -> torch.Tensor:
    return x[0] if isinstance(x, tuple | list) else x


class LayerTap:
    """A hook that hands ``hidden_states[layer]`` (batch, time, d) to a reader while armed; each thread arms its
    own reader, so a server's engine thread and a scoring thread can share one tap.

    >>> tap = LayerTap(model, 16)                                  # doctest: +SKIP
    >>> with tap.reading(lambda h: rows.append(h[:, -1])):        # doctest: +SKIP
    ...     model(ids)
    """

    def __init__(self, model: Any, layer: int) -> None:
        n = int(model.config.num_hidden_layers)
        if not 0 <= layer <= n:
            raise ValueError(f"layer {layer} out of range; this model has hidden states 0..{n}")
        self.layer = layer
        self._readers: dict[int, Callable[[torch.Tensor], None]] = {}
        if layer == 0:
            block = decoder_blocks(model)[0]
            self._handle = block.register_forward_pre_hook(self._pre, with_kwargs=True)
        else:
            mod = decoder_blocks(model)[layer - 1] if layer < n else final_norm(model)
            self._handle = mod.register_forward_hook(self._post)

    def _pre(self, module, args, kwargs):
        self._read(args[0] if args else kwargs["hidden_states"])

    def _post(self, module, args, output):
        self._read(_tensor(output))

    def _read(self, h: torch.Tensor) -> None:
        reader = self._readers.get(threading.get_ident())
        if reader is not None:
            reader(h)

    def arm(self, reader: Callable[[torch.Tensor], None]) -> None:
        """Hand the layer's output of every forward run on this thread to ``reader`` until :meth:`disarm`."""
        self._readers[threading.get_ident()] = reader

    def disarm(self) -> None:
        self._readers.pop(threading.get_ident(), None)

    def reading(self, reader: Callable[[torch.Tensor], None]) -> _Armed:
        return _Armed(self, reader)

    def remove(self) -> None:
        self._handle.remove()


class _Armed:
    def __init__(self, tap: LayerTap, reader: Callable[[torch.Tensor], None]) -> None:
        self.tap, self.reader = tap, reader

    def __enter__(self) -> LayerTap:
        self.tap.arm(self.reader)
        return self.tap

    def __exit__(self, *exc: object) -> None:
        self.tap.disarm()
