"""Preference pairs as TRL's text rows ``{prompt, chosen, rejected}``, for :func:`divelab.lm.adapt.adapt`'s DPO.

TRL's ``DPOTrainer`` takes text and tokenises ``prompt + chosen`` and ``prompt + rejected`` itself, so a token-ID
pair (:class:`~divelab.interp.cliff_tokens.dpo.TokenPair`) survives only if its text tokenises back to the same
IDs. :func:`cliff_rows` keeps exactly those pairs (the prompt is the rendered chat prompt plus the decoded
response prefix before the cliff; chosen and rejected are one decoded token each) and counts the rest. TRL also
appends the end-of-turn token to every completion, so a single-token pair trains two positions on each side:
the token, and the end-of-turn token after it (whose probability mid-trace stays far below anything sampled).

:func:`sequence_rows` makes full-sequence DPO's rows: the same prompt, a right whole response as chosen and a
wrong one as rejected.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from divelab.interp.cliff_tokens.dpo import SequencePair, TokenPair


def _ids(tok: Any, text: str) -> list[int]:
    return [int(t) for t in tok(text, add_special_tokens=False)["input_ids"]]


def _decode(tok: Any, ids: Sequence[int]) -> str:
    return tok.decode(list(ids), skip_special_tokens=False, clean_up_tokenization_spaces=False)


def cliff_rows(pairs: Sequence[TokenPair], tok: Any) -> tuple[list[dict[str, str]], int]:
    """``(rows, dropped)``: one DPO row per single-token pair whose text round-trips to its token IDs."""
    rows, dropped = [], 0
    for p in pairs:
        prompt = _decode(tok, p.context)
        chosen, rejected = _decode(tok, [p.chosen]), _decode(tok, [p.rejected])
        ctx = list(p.context)
        if (_ids(tok, prompt) != ctx or _ids(tok, prompt + chosen) != ctx + [p.chosen]
                or _ids(tok, prompt + rejected) != ctx + [p.rejected]):
            dropped += 1
            continue
        rows.append({"prompt": prompt, "chosen": chosen, "rejected": rejected})
    return rows, dropped


def sequence_rows(pairs: Sequence[SequencePair], tok: Any, eos_ids: Sequence[int]) -> list[dict[str, str]]:
    """One DPO row per whole-response pair (the end token is left to TRL, which appends it)."""
    strip = set(int(e) for e in eos_ids)
    return [{"prompt": _decode(tok, p.prompt), "chosen": _decode(tok, [t for t in p.chosen if t not in strip]),
             "rejected": _decode(tok, [t for t in p.rejected if t not in strip])} for p in pairs]


def equal_budget(a: Sequence[dict[str, str]], b: Sequence[dict[str, str]], seed: int = 0
                 ) -> tuple[list[dict[str, str]], list[dict[str, str]]]:
    """Both row sets cut to the smaller one's size (a seeded subsample, order kept), so the two DPO arms train
    on the same number of pairs."""
    k = min(len(a), len(b))
    rng = np.random.default_rng(seed)

    def cut(rows: Sequence[dict[str, str]]) -> list[dict[str, str]]:
        if len(rows) <= k:
            return list(rows)
        return [rows[i] for i in sorted(rng.choice(len(rows), size=k, replace=False).tolist())]

    return cut(a), cut(b)
