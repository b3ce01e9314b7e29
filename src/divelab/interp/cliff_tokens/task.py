"""Verifiable tasks: a problem is a prompt plus a reference answer, and a checker says whether a response is right.

The reproduction's task is a **running sum mod 10 written as a chain of thought**. The prompt lists the
operands, the response writes every step and then the answer::

    prompt    "3 5 8 2:"
    response  "3+5=8 8+8=6 6+2=8>8"  (then <eos>)

A wrong digit anywhere in the chain usually dooms the answer, so a solution tips into failure at one token: the
setting where cliff tokens are easy to see. The number of operands is the difficulty knob: a tiny model trained
on 3–6 operands solves part of those and almost none of 9–10 ("beyond the model").

Any other task plugs in through :class:`Problem` and a checker ``(response_text, answer) -> bool``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

Checker = Callable[[str, str], bool]

CHAIN_VOCAB = ("<pad>", "<eos>", *"0123456789", "+", "=", ">", " ", ":")


@dataclass(frozen=True)
class Problem:
    prompt: str
    answer: str
    meta: dict | None = None


_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def _norm_number(s: str) -> str:
    s = s.replace(",", "").strip()
    try:
        v = float(s)
    except ValueError:
        return s
    return str(int(v)) if v == int(v) else repr(v)


def last_number(response: str, answer: str) -> bool:
    """Right when the last number in the response equals the reference (``1,000`` = ``1000`` = ``1000.0``)."""
    nums = _NUMBER.findall(response.replace(",", ""))
    return bool(nums) and _norm_number(nums[-1]) == _norm_number(answer)


def exact(response: str, answer: str) -> bool:
    """Right when the stripped response equals the stripped reference."""
    return response.strip() == answer.strip()


def contains(response: str, answer: str) -> bool:
    """Right when the reference appears in the response."""
    return answer.strip() in response


def chain_answer(response: str, answer: str) -> bool:
    """The chain task's checker: the digit after the last ``>`` is the answer."""
    if ">" not in response:
        return False
    return response.rsplit(">", 1)[1].strip() == answer.strip()


CHECKERS: dict[str, Checker] = {"last-number": last_number, "exact": exact, "contains": contains,
                                "chain": chain_answer}


def get_checker(name: str | Checker) -> Checker:
    if callable(name):
        return name
    if name not in CHECKERS:
        raise ValueError(f"unknown checker {name!r}; allowed: {', '.join(CHECKERS)}")
    return CHECKERS[name]


# --- the chain task -------------------------------------------------------------------------------------------


def chain_solution(operands: Sequence[int]) -> str:
    """The teacher's chain of thought for a running sum mod 10 (response text, without eos)."""
    if len(operands) < 2:
        raise ValueError(f"a chain needs at least 2 operands, got {len(operands)}")
    acc, steps = int(operands[0]), []
    for b in operands[1:]:
        new = (acc + int(b)) % 10
        steps.append(f"{acc}+{int(b)}={new}")
        acc = new
    return " ".join(steps) + f">{acc}"


def chain_problem(operands: Sequence[int]) -> Problem:
    ops = [int(o) for o in operands]
    if any(not 0 <= o <= 9 for o in ops):
        raise ValueError(f"operands must be digits 0-9, got {ops}")
    return Problem(prompt=" ".join(map(str, ops)) + ":", answer=str(sum(ops) % 10), meta={"n_ops": len(ops)})


def chain_problems(n: int, lengths: Sequence[int], seed: int) -> list[Problem]:
    """``n`` random chain problems with a number of operands drawn uniformly from ``lengths``."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        k = int(rng.choice(list(lengths)))
        out.append(chain_problem(rng.integers(0, 10, size=k).tolist()))
    return out


def chain_tokenizer():
    """A character-level Hugging Face tokenizer for the chain task (saved with the model, so the checkpoint
    loads with ``AutoTokenizer`` like any other)."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    t = Tokenizer(models.WordLevel({v: i for i, v in enumerate(CHAIN_VOCAB)}, unk_token="<pad>"))
    t.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")
    t.decoder = decoders.Fuse()
    return PreTrainedTokenizerFast(tokenizer_object=t, pad_token="<pad>", eos_token="<eos>")
