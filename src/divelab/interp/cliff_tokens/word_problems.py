"""Multi-step arithmetic word problems with a worked trace, from a seeded generator (the SmolLM2 subject's task).

Every problem chains two or three operations on small whole numbers; its worked trace writes one equation per
operation and then the answer::

    question  "Nina has 7 shells. She finds 5 more and then gives 3 to her sister. How many shells does she
               have now?"
    trace     "7 + 5 = 12. 12 - 3 = 9. The answer is 9."

Each operation *structure* (``a + b - c``, ``a * b + c``, ...) has several *wordings*. The wordings are split
into two families, ``"train"`` (used only to adapt the model) and ``"eval"`` (used only for detection, DPO
pairs and every evaluation), so no evaluation question can appear in the adaptation data, whatever numbers are
drawn; within the evaluation family, the problem sets a caller asks for are drawn from one seeded stream and
never repeat a question (:func:`problem_sets`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from divelab.interp.cliff_tokens.task import Problem

INSTRUCTION = "Solve it step by step, one equation per step, then write 'The answer is' and the number."
NAMES = ("Nina", "Omar", "Lena", "Ravi", "Tess", "Yuki", "Ben", "Ada", "Caleb", "Mara", "Ivan", "Zoe")
ITEMS = ("shells", "stamps", "marbles", "apples", "pencils", "cards", "stickers", "beads", "coins", "books")
FAMILIES = ("train", "eval")


@dataclass(frozen=True)
class Structure:
    """An operation structure: how its numbers are drawn, its steps, and its wordings per family."""

    name: str
    draw: Callable[[np.random.Generator], tuple[int, ...]]
    steps: Callable[[tuple[int, ...]], list[tuple[int, str, int, int]]]  # (left, op, right, result) per step
    wordings: dict[str, tuple[str, ...]]


def _chain(x: tuple[int, ...], ops: str) -> list[tuple[int, str, int, int]]:
    """Left-to-right steps: ``x0 op0 x1 = r1``, ``r1 op1 x2 = r2``, ..."""
    acc, out = x[0], []
    for op, b in zip(ops, x[1:], strict=True):
        new = acc + b if op == "+" else acc - b if op == "-" else acc * b
        out.append((acc, op, b, new))
        acc = new
    return out


def _i(rng: np.random.Generator, lo: int, hi: int) -> int:
    return int(rng.integers(lo, hi + 1))


def _add_sub(rng: np.random.Generator) -> tuple[int, ...]:
    a, b = _i(rng, 3, 15), _i(rng, 2, 9)
    return a, b, _i(rng, 1, a + b - 1)


def _sub_add(rng: np.random.Generator) -> tuple[int, ...]:
    a = _i(rng, 6, 20)
    return a, _i(rng, 1, a - 1), _i(rng, 2, 9)


def _mul_add(rng: np.random.Generator) -> tuple[int, ...]:
    return _i(rng, 2, 6), _i(rng, 2, 5), _i(rng, 1, 9)


def _mul_sub(rng: np.random.Generator) -> tuple[int, ...]:
    a, b = _i(rng, 2, 6), _i(rng, 2, 5)
    return a, b, _i(rng, 1, a * b - 1)


def _add_add_sub(rng: np.random.Generator) -> tuple[int, ...]:
    a, b, c = _i(rng, 2, 9), _i(rng, 2, 9), _i(rng, 2, 9)
    return a, b, c, _i(rng, 1, a + b + c - 1)


STRUCTURES: tuple[Structure, ...] = (
    Structure("a + b - c", _add_sub, lambda x: _chain(x, "+-"), {
        "train": ("{n} has {a} {it}. {p} gets {b} more and then loses {c}. How many {it} does {p2} have now?",
                  "There are {a} {it} in a jar. {n} puts in {b} more, then takes out {c}. How many {it} are in "
                  "the jar?"),
        "eval": ("{n} had {a} {it}, found {b} more, and then gave {c} away. How many {it} does {n} have left?",)}),
    Structure("a - b + c", _sub_add, lambda x: _chain(x, "-+"), {
        "train": ("{n} has {a} {it}. {p} gives {b} to a friend and then buys {c} more. How many {it} does {p2} "
                  "have now?",
                  "A box holds {a} {it}. {n} removes {b} of them and later adds {c}. How many {it} are in the box?"),
        "eval": ("{n} started with {a} {it}, lost {b}, and then won {c}. How many {it} does {n} own now?",)}),
    Structure("a * b + c", _mul_add, lambda x: _chain(x, "*+"), {
        "train": ("{n} has {a} bags with {b} {it} in each bag, and {c} loose {it}. How many {it} does {p2} have "
                  "in total?",
                  "There are {a} rows of {b} {it}, plus {c} extra {it}. How many {it} are there?"),
        "eval": ("{n} fills {a} boxes with {b} {it} each and keeps {c} more {it} in a pocket. How many {it} does "
                 "{n} have altogether?",)}),
    Structure("a * b - c", _mul_sub, lambda x: _chain(x, "*-"), {
        "train": ("{n} buys {a} packs of {b} {it} and then loses {c} of them. How many {it} does {p2} have left?",
                  "A shelf has {a} stacks of {b} {it}. {n} takes {c} away. How many {it} remain on the shelf?"),
        "eval": ("{n} makes {a} piles of {b} {it} and then gives {c} {it} to a classmate. How many {it} are "
                 "left?",)}),
    Structure("a + b + c - d", _add_add_sub, lambda x: _chain(x, "++-"), {
        "train": ("{n} has {a} {it}, gets {b} on Monday and {c} on Tuesday, then loses {d}. How many {it} does "
                  "{p2} have now?",),
        "eval": ("On three days {n} collected {a}, {b} and {c} {it}, and then {d} of them broke. How many {it} "
                 "does {n} still have?",)}),
)


def solution_text(structure: Structure, x: tuple[int, ...]) -> tuple[str, int]:
    """The worked trace (one equation per step, then the answer sentence) and the answer."""
    steps = structure.steps(x)
    eqs = " ".join(f"{a} {op} {b} = {r}." for a, op, b, r in steps)
    ans = steps[-1][3]
    return f"{eqs} The answer is {ans}.", ans


def _render(template: str, x: tuple[int, ...], rng: np.random.Generator) -> str:
    name = NAMES[int(rng.integers(len(NAMES)))]
    she = int(rng.integers(2))
    fields = dict(zip("abcd", x, strict=False))
    return template.format(n=name, it=ITEMS[int(rng.integers(len(ITEMS)))], p=("She" if she else "He"),
                           p2=("she" if she else "he"), **fields)


def make_problem(family: str, rng: np.random.Generator) -> tuple[Problem, str]:
    """One problem of ``family`` (``"train"`` or ``"eval"``) and its worked trace."""
    if family not in FAMILIES:
        raise ValueError(f"family must be one of {FAMILIES}, got {family!r}")
    s = STRUCTURES[int(rng.integers(len(STRUCTURES)))]
    wordings = s.wordings[family]
    template = wordings[int(rng.integers(len(wordings)))]
    x = s.draw(rng)
    question = _render(template, x, rng)
    trace, ans = solution_text(s, x)
    return (Problem(f"{question} {INSTRUCTION}", str(ans),
                    meta={"question": question, "structure": s.name, "family": family, "numbers": list(x)}), trace)


def problem_sets(family: str, sizes: Sequence[int], seed: int) -> list[list[tuple[Problem, str]]]:
    """Disjoint sets of distinct problems of one family, of the given sizes, from one seeded stream: no question
    appears twice, within or across the sets (so detection and evaluation never share a problem)."""
    if any(k < 0 for k in sizes):
        raise ValueError(f"sizes must be >= 0, got {list(sizes)}")
    rng = np.random.default_rng(seed)
    seen: set[str] = set()
    out: list[list[tuple[Problem, str]]] = []
    for k in sizes:
        cur: list[tuple[Problem, str]] = []
        tries = 0
        while len(cur) < k:
            tries += 1
            if tries > 200 * (k + 10):
                raise ValueError(f"could not draw {k} distinct {family} problems (only {len(cur)} after {tries} "
                                 "draws)")
            p, tr = make_problem(family, rng)
            if p.meta["question"] in seen:
                continue
            seen.add(p.meta["question"])
            cur.append((p, tr))
        out.append(cur)
    return out
