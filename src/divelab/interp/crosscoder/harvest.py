"""Paired activation harvesting: the residual stream after one decoder layer of two HF causal LMs of one
architecture, read with forward hooks at the last prompt token (:func:`harvest_pairs`) or at the positions a
generation-time edit acts on, the last prompt token and every response token (:func:`harvest_generation_pairs`),
streamed to disk in shards."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import torch

from divelab.cache import atomic_write_bytes

Edit = Callable[[torch.Tensor], torch.Tensor]


class _StopForward(Exception):
    """Raised by a capture hook to skip the layers above the one read (only the activation is needed)."""


def decoder_layers(model: torch.nn.Module) -> torch.nn.ModuleList:
    """The list of decoder blocks of a HF causal LM (Llama/Qwen/Mistral ``model.layers``, GPT-2 ``transformer.h``,
    GPT-NeoX ``gpt_neox.layers``)."""
    for path in ("model.layers", "transformer.h", "gpt_neox.layers", "model.decoder.layers"):
        obj: object = model
        for part in path.split("."):
            obj = getattr(obj, part, None)
            if obj is None:
                break
        if isinstance(obj, torch.nn.ModuleList):
            return obj
    raise ValueError(f"cannot find the decoder layers of {type(model).__name__}; supported: Llama-like "
                     "(model.layers), GPT-2 (transformer.h), GPT-NeoX (gpt_neox.layers), OPT (model.decoder.layers)")


def check_layer(model: torch.nn.Module, layer: int) -> int:
    n = len(decoder_layers(model))
    if not 0 <= layer < n:
        raise ValueError(f"layer {layer} is out of range; {type(model).__name__} has decoder layers 0..{n - 1}")
    return layer


@contextlib.contextmanager
def layer_hook(model: torch.nn.Module, layer: int, *, capture: list | None = None,
               edit: Edit | None = None, start: int = 0, stop: bool = False) -> Iterator[None]:
    """Read (``capture`` gets the output hidden states) and/or rewrite (``edit(h[:, start:])``) the residual stream
    after decoder layer ``layer``. ``stop=True`` aborts the forward pass right after the capture (use
    :func:`capture_acts`, which catches it)."""
    block = decoder_layers(model)[check_layer(model, layer)]

    def hook(_module, _inputs, output):
        h = output[0] if isinstance(output, tuple) else output
        if capture is not None:
            capture.append(h.detach())
        if stop:
            raise _StopForward
        if edit is None:
            return None
        h = h.clone()
        h[:, start:] = edit(h[:, start:])
        return (h, *output[1:]) if isinstance(output, tuple) else h

    handle = block.register_forward_hook(hook)
    try:
        yield
    finally:
        handle.remove()


def left_pad(tok, texts: Sequence[str]) -> tuple[torch.Tensor, torch.Tensor]:
    return left_pad_ids(tok, [tok(t, add_special_tokens=False)["input_ids"] for t in texts])


def left_pad_ids(tok, ids: Sequence[Sequence[int]]) -> tuple[torch.Tensor, torch.Tensor]:
    n = max(len(x) for x in ids)
    pad = tok.pad_token_id if tok.pad_token_id is not None else 0
    out = torch.tensor([[pad] * (n - len(x)) + x for x in ids], dtype=torch.long)
    mask = torch.tensor([[0] * (n - len(x)) + [1] * len(x) for x in ids], dtype=torch.long)
    return out, mask


def forward(model: torch.nn.Module, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Logits of a left-padded batch (positions counted from each row's first real token)."""
    pos = (mask.cumsum(-1) - 1).clamp(min=0)
    return model(input_ids=ids, attention_mask=mask, position_ids=pos).logits


@torch.no_grad()
def capture_acts(model: torch.nn.Module, ids: torch.Tensor, mask: torch.Tensor, layer: int) -> torch.Tensor:
    """Residual stream after ``layer`` at every position of a left-padded batch ([b, n, d]); the layers above
    ``layer`` are not run."""
    cap: list[torch.Tensor] = []
    with layer_hook(model, layer, capture=cap, stop=True):
        try:
            forward(model, ids, mask)
        except _StopForward:
            pass
    return cap[0]


@torch.no_grad()
def last_token_acts(model: torch.nn.Module, tok, texts: Sequence[str], layer: int) -> torch.Tensor:
    ids, mask = left_pad(tok, texts)
    return capture_acts(model, ids, mask, layer)[:, -1].float()


def check_pair(model_a: torch.nn.Module, model_b: torch.nn.Module, tok_a=None, tok_b=None) -> None:
    """Refuse two models a crosscoder cannot pair: different architectures, hidden sizes or tokenizers.
    A crosscoder compares a model with its own fine-tune; two unrelated architectures that happen to share
    a width would train, but their features would pair directions that mean nothing alike."""
    ta, tb = getattr(model_a.config, "model_type", None), getattr(model_b.config, "model_type", None)
    if ta != tb:
        raise ValueError(f"architectures differ: {ta} ({type(model_a).__name__}) vs {tb} ({type(model_b).__name__}); "
                         "a crosscoder pairs a model with a fine-tune of it (one architecture, one hidden size)")
    da, db = model_a.config.hidden_size, model_b.config.hidden_size
    if da != db:
        raise ValueError(f"hidden sizes differ: {da} vs {db}; a crosscoder pairs models of one architecture")
    if tok_a is not None and tok_b is not None and tok_a.get_vocab() != tok_b.get_vocab():
        raise ValueError(f"tokenizers differ (vocab sizes {len(tok_a)} vs {len(tok_b)}); paired activations need "
                         "the same tokens in both models")


def _write_shard(out: Path | None, i: int, **tensors: torch.Tensor) -> None:
    if out is None:
        return
    import io

    buf = io.BytesIO()
    torch.save(tensors, buf)
    atomic_write_bytes(out / f"shard-{i:05d}.pt", buf.getvalue())


def _chunks(items: Sequence, shard_size: int, progress: bool):
    chunks = [items[i:i + shard_size] for i in range(0, len(items), shard_size)]
    if progress:
        from divelab.progress import track

        return track(chunks, "harvesting paired activations", total=len(chunks))
    return chunks


def harvest_pairs(model_a: torch.nn.Module, model_b: torch.nn.Module, tok, texts: Sequence[str], layer: int,
                  out_dir: str | Path | None = None, shard_size: int = 256,
                  progress: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """Last-token activations after ``layer`` of both models on ``texts``: ``(acts_a, acts_b)``, each [n, d].
    With ``out_dir`` every shard is also written (atomically) as ``shard-00000.pt`` holding ``{"a", "b"}``."""
    check_pair(model_a, model_b)
    out = Path(out_dir) if out_dir is not None else None
    a_all, b_all = [], []
    for i, chunk in enumerate(_chunks(texts, shard_size, progress)):
        a, b = last_token_acts(model_a, tok, chunk, layer), last_token_acts(model_b, tok, chunk, layer)
        a_all.append(a)
        b_all.append(b)
        _write_shard(out, i, a=a, b=b)
    return torch.cat(a_all), torch.cat(b_all)


@torch.no_grad()
def harvest_generation_pairs(model_a: torch.nn.Module, model_b: torch.nn.Module, tok, prompts: Sequence[str],
                             responses: Sequence[str], layer: int, out_dir: str | Path | None = None,
                             shard_size: int = 256,
                             progress: bool = True) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Activations after ``layer`` of both models, run on the same tokens ``prompt + response``, at the positions
    an edit acts on during generation (:func:`generate` edits the last prompt token and every generated token):
    the last prompt token and every response token. Returns ``(acts_a, acts_b, owner)``: [n, d], [n, d] and, per
    row, the index of its prompt (so per-prompt labels carry over to rows). Prompt and response are tokenized
    separately and concatenated, as generation appends token ids. With ``out_dir`` every shard is written as
    ``shard-00000.pt`` holding ``{"a", "b", "owner"}``."""
    if len(prompts) != len(responses):
        raise ValueError(f"need one response per prompt, got {len(prompts)} prompts and {len(responses)} responses")
    check_pair(model_a, model_b)
    out = Path(out_dir) if out_dir is not None else None
    pairs = list(enumerate(zip(prompts, responses, strict=True)))
    a_all, b_all, own_all = [], [], []
    for i, chunk in enumerate(_chunks(pairs, shard_size, progress)):
        seqs, spans = [], []
        for _, (p, r) in chunk:
            pi = tok(p, add_special_tokens=False)["input_ids"]
            ri = tok(r, add_special_tokens=False)["input_ids"] if r else []
            seqs.append(pi + ri)
            spans.append(len(ri) + 1)  # the last prompt token and every response token
        ids, mask = left_pad_ids(tok, seqs)
        ha, hb = (capture_acts(m, ids, mask, layer).float() for m in (model_a, model_b))
        n = ids.shape[1]
        a = torch.cat([ha[j, n - s:] for j, s in enumerate(spans)])
        b = torch.cat([hb[j, n - s:] for j, s in enumerate(spans)])
        owner = torch.cat([torch.full((s,), k, dtype=torch.long) for (k, _), s in zip(chunk, spans, strict=True)])
        a_all.append(a)
        b_all.append(b)
        own_all.append(owner)
        _write_shard(out, i, a=a, b=b, owner=owner)
    return torch.cat(a_all), torch.cat(b_all), torch.cat(own_all)


def load_shards(out_dir: str | Path) -> tuple[torch.Tensor, torch.Tensor]:
    files = sorted(Path(out_dir).glob("shard-*.pt"))
    if not files:
        raise FileNotFoundError(f"no shard-*.pt files in {out_dir}")
    parts = [torch.load(f) for f in files]
    return torch.cat([p["a"] for p in parts]), torch.cat([p["b"] for p in parts])
