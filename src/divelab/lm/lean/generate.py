"""Plain decoding on the lean path: greedy or seeded sampling, one sequence.

Sampling follows :func:`divelab.lm.generate` step for step (temperature, then top-k / nucleus
filtering, then one ``torch.multinomial`` draw from a generator seeded with ``seed``), so both give
the same tokens for the same seed whenever their logits agree.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from divelab.lm.lean.model import LeanLM
from divelab.lm.sampling import Generation, _check, filter_logits


def _eos_set(eos: int | list[int] | None) -> set[int]:
    if eos is None:
        return set()
    return {int(e) for e in eos} if isinstance(eos, list | tuple) else {int(eos)}


@torch.inference_mode()
def lean_generate(lean: LeanLM, prompt: Sequence[int], *, max_new_tokens: int = 64, temperature: float = 0.0,
                  top_p: float = 1.0, top_k: int | None = None, seed: int = 0,
                  eos_token_id: int | list[int] | None = None) -> Generation:
    """Continue ``prompt`` (a list of ids) from an empty cache; ``temperature=0`` is greedy.

    Stops after ``max_new_tokens`` or at (and including) an eos token (``eos_token_id`` defaults to
    the HF model's generation config). Returns a one-row :class:`divelab.lm.sampling.Generation`.
    """
    _check(temperature, top_p, top_k, max_new_tokens)
    if len(prompt) == 0:
        raise ValueError("the prompt needs at least one token (e.g. start with the tokenizer's bos)")
    eos = _eos_set(lean.eos_token_id if eos_token_id is None else eos_token_id)
    gen = torch.Generator().manual_seed(seed)
    lean.reset()
    tokens: list[int] = []
    logprobs: list[float] = []
    finished = False
    if max_new_tokens == 0:
        return Generation([tokens], [logprobs], [finished])
    logits = lean.forward(list(prompt), last_only=True)[0]
    while True:
        if temperature == 0:
            tok = int(logits.argmax())
        else:
            probs = torch.softmax(filter_logits(logits[None] / temperature, top_p, top_k), dim=-1)
            tok = int(torch.multinomial(probs, 1, generator=gen))
        tokens.append(tok)
        logprobs.append(float(torch.log_softmax(logits, dim=-1)[tok]))
        if tok in eos:
            finished = True
            break
        if len(tokens) == max_new_tokens:
            break
        logits = lean.forward([tok])[0]
    return Generation([tokens], [logprobs], [finished])
