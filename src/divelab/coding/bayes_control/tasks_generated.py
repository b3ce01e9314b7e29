"""Short Python function tasks a 135M-parameter coder can partly solve, generated offline from templates.

HumanEval is far beyond SmolLM2-135M (it solves almost none), so a controller comparison on it has
nothing to control. Here each task is one small list / string / arithmetic function: a signature and a
docstring with two ``>>>`` examples (the public tests, shown to the model), a reference solution, and
hidden tests made by running the reference on seeded inputs. Tasks come in FAMILIES (one template,
several parameter values): a family is either a training family (only for fitting the coder) or an
evaluation family, never both, so the coder is never tuned on the templates it is measured on.

Every task is a :class:`~divelab.codetasks.humaneval.Task`, so the harness, the critics and
:class:`~divelab.coding.bayes_control.live.LiveEnv` run on it unchanged.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

from divelab.codetasks.humaneval import Task, make_task

GENERATOR_VERSION = 1  # bump when a template, an input generator or the test layout changes


# ------------------------------------------------------------------------------------------- input makers
def _ints(rng: random.Random, lo: int = -9, hi: int = 20, n: tuple[int, int] = (0, 7)) -> list[int]:
    return [rng.randint(lo, hi) for _ in range(rng.randint(*n))]


def _word(rng: random.Random, letters: str = "abcdeilnorstu", n: tuple[int, int] = (1, 7)) -> str:
    return "".join(rng.choice(letters) for _ in range(rng.randint(*n)))


def _sentence(rng: random.Random) -> str:
    return " ".join(_word(rng) for _ in range(rng.randint(1, 5)))


def _words(rng: random.Random) -> list[str]:
    return [_word(rng) for _ in range(rng.randint(0, 6))]


INPUTS: dict[str, Callable[[random.Random], tuple]] = {
    "xs": lambda r: (_ints(r),),
    "pos": lambda r: (_ints(r, 1, 30, (1, 7)),),
    "s": lambda r: (_word(r, n=(0, 10)),),
    "sent": lambda r: (_sentence(r),),
    "words": lambda r: (_words(r),),
    "n": lambda r: (r.randint(0, 999),),
    "xs_nonempty": lambda r: (_ints(r, n=(1, 7)),),
}


@dataclass(frozen=True)
class Family:
    """One template: ``{k}`` in the names, docstring and body is the instance's parameter."""

    key: str
    entry: str  # function name template
    args: str  # the parameter list
    doc: str  # one sentence
    body: str  # the reference body (indented by 4 spaces, lines joined by \n)
    inputs: str  # key of INPUTS
    params: tuple  # the parameter values (one task each)


def _f(key: str, entry: str, args: str, doc: str, body: str, inputs: str, params: tuple) -> Family:
    return Family(key, entry, args, doc, body, inputs, params)


# Evaluation families: the controllers are compared on these. A mix of one-liners and small loops, so that
# a small coder solves some first time and fails others (the difficulty knob is which families are here).
EVAL_FAMILIES: tuple[Family, ...] = (
    _f("count-greater", "count_greater_than_{k}", "xs", "Return how many numbers in the list xs are greater than {k}.",
       "return sum(1 for x in xs if x > {k})", "xs", (0, 1, 2, 3, 5, 7, 10, 12)),
    _f("sum-multiples", "sum_multiples_of_{k}", "xs", "Return the sum of the numbers in xs that are divisible by {k}.",
       "return sum(x for x in xs if x % {k} == 0)", "xs", (2, 3, 4, 5, 6, 7, 9, 10)),
    _f("every-kth", "every_{k}th", "xs", "Return every {k}-th element of the list xs, starting with the first one.",
       "return xs[::{k}]", "xs", (2, 3, 4, 5)),
    _f("repeat-chars", "repeat_chars_{k}", "s", "Return the string s with every character repeated {k} times.",
       "return ''.join(c * {k} for c in s)", "s", (2, 3, 4, 5)),
    _f("clip-above", "clip_above_{k}", "xs", "Return a new list: the numbers of xs, with every number larger than {k} "
       "replaced by {k}.", "return [min(x, {k}) for x in xs]", "xs", (0, 2, 5, 8, 10, 15)),
    _f("count-char", "count_letter_{k}", "s", "Return how many times the letter '{k}' occurs in the string s.",
       "return s.count('{k}')", "s", ("a", "e", "i", "o", "t", "s", "r", "n")),
    _f("long-words", "words_longer_than_{k}", "words", "Return the words of the list words that have more than {k} "
       "letters, in their original order.", "return [w for w in words if len(w) > {k}]", "words", (1, 2, 3, 4, 5)),
    _f("running-sum", "running_sum_from_{k}", "xs", "Return the list of running totals of xs, where the total "
       "starts at {k} before the first element.",
       "out, t = [], {k}\n    for x in xs:\n        t += x\n        out.append(t)\n    return out", "xs", (0, 1, 2, 5, 10, 100)),
    _f("digit-sum", "digit_sum_plus_{k}", "n", "Return the sum of the decimal digits of the non-negative integer n, "
       "plus {k}.", "return sum(int(d) for d in str(n)) + {k}", "n", (0, 1, 2, 5, 10)),
    _f("diffs", "step_{k}_differences", "xs", "Return the list of differences xs[i + {k}] - xs[i] for every i where "
       "i + {k} is a valid index.", "return [xs[i + {k}] - xs[i] for i in range(len(xs) - {k})]", "xs", (1, 2, 3)),
    _f("first-above", "first_above_{k}", "xs", "Return the first number in xs that is greater than {k}, or None if "
       "there is none.", "for x in xs:\n        if x > {k}:\n            return x\n    return None", "xs", (0, 2, 4, 6, 9, 12)),
    _f("fizz", "fizz_{k}", "n", "Return the string 'fizz' if n is divisible by {k}, otherwise return n as a string.",
       "return 'fizz' if n % {k} == 0 else str(n)", "n", (2, 3, 4, 5, 6, 7, 9)),
    _f("capitalize", "capitalize_words_{k}", "s", "Return the sentence s with the first letter of every word made "
       "upper case, and then '{k}' appended to the end.",
       "return ' '.join(w[:1].upper() + w[1:] for w in s.split(' ')) + '{k}'", "sent", ("!", "?", ".", ";", ":")),
    _f("abs-max", "largest_distance_from_{k}", "xs", "Return the largest absolute difference between {k} and a "
       "number of the non-empty list xs.", "return max(abs(x - {k}) for x in xs)", "xs_nonempty", (0, 2, 5, 8, 10, 20)),
    _f("mod-list", "remainders_mod_{k}", "xs", "Return the list of remainders of the numbers in xs divided by {k}.",
       "return [x % {k} for x in xs]", "xs", (2, 3, 4, 5, 7, 10)),
    _f("index-of-max", "index_of_max_{k}", "xs", "Return the index of the largest number in the non-empty list xs "
       "(the first such index if there are ties), plus {k}.", "return xs.index(max(xs)) + {k}", "xs_nonempty",
       (0, 1, 2, 5)),
)

# Training families: only the coder's fine-tuning sees these (format and competence), never the controllers.
TRAIN_FAMILIES: tuple[Family, ...] = (
    _f("count-less", "count_less_than_{k}", "xs", "Return how many numbers in the list xs are less than {k}.",
       "return sum(1 for x in xs if x < {k})", "xs", (0, 2, 4, 6, 8)),
    _f("add-k", "add_{k}_to_each", "xs", "Return a new list with {k} added to every number of xs.",
       "return [x + {k} for x in xs]", "xs", (1, 2, 3, 5, 10)),
    _f("starts-with", "words_starting_with_{k}", "words", "Return the words of the list words that start with the "
       "letter '{k}', in their original order.", "return [w for w in words if w.startswith('{k}')]", "words",
       ("a", "b", "e", "s", "t")),
    _f("product-small", "product_of_numbers_below_{k}", "xs", "Return the product of the numbers in xs that are less "
       "than {k} (1 if there are none).",
       "p = 1\n    for x in xs:\n        if x < {k}:\n            p *= x\n    return p", "xs", (0, 3, 5, 9)),
    _f("strip-char", "remove_letter_{k}", "s", "Return the string s with every letter '{k}' removed.",
       "return s.replace('{k}', '')", "s", ("a", "e", "i", "o", "t")),
    _f("is-sorted", "is_sorted_by_{k}", "xs", "Return True if every number of xs is at least {k} more than the one "
       "before it, else False.", "return all(b - a >= {k} for a, b in zip(xs, xs[1:]))", "xs", (0, 1, 2)),
    _f("last-digit", "last_digit_times_{k}", "n", "Return the last decimal digit of the non-negative integer n, "
       "multiplied by {k}.", "return (n % 10) * {k}", "n", (1, 2, 3, 4)),
    _f("word-lengths", "word_lengths_plus_{k}", "sent", "Return the list of the lengths of the words in the "
       "sentence s (words are separated by single spaces), each plus {k}.",
       "return [len(w) + {k} for w in s.split(' ')]", "sent", (0, 1, 2)),
    _f("min-index", "index_of_min_{k}", "xs", "Return the index of the smallest number in the non-empty list xs "
       "(the first such index if there are ties), times {k}.", "return xs.index(min(xs)) * {k}", "xs_nonempty",
       (1, 2, 3)),
    _f("square-evens", "square_evens_then_add_{k}", "xs", "Return a new list with the square of every even number "
       "of xs plus {k}, in order (odd numbers are left out).",
       "return [x * x + {k} for x in xs if x % 2 == 0]", "xs", (0, 1, 3)),
)


def _arg_name(fam: Family) -> str:
    return "s" if fam.inputs in ("s", "sent") else fam.args


_IDENT = {"!": "bang", "?": "question", ".": "dot", ";": "semicolon", ":": "colon"}  # names for symbols


def _source(fam: Family, k: object) -> tuple[str, str, str]:
    """(entry point, signature + docstring without examples, reference body)."""
    entry = fam.entry.format(k=_IDENT.get(k, k))
    return entry, fam.doc.format(k=k), "    " + fam.body.format(k=k)


def _call(entry: str, args: tuple) -> str:
    return f"{entry}({', '.join(repr(a) for a in args)})"


def _reference(entry: str, arg: str, body: str) -> Callable:
    ns: dict = {}
    exec(f"def {entry}({arg}):\n{body}\n", ns)  # our own template code, not model output
    return ns[entry]


@dataclass(frozen=True)
class GeneratedTask:
    """A generated task: the Task the harness runs, its family, and the extra inputs of the self-consistency critic."""

    task: Task
    family: str
    extra_inputs: tuple[tuple, ...]
    solution: str  # the reference function (def line, docstring and body): the SFT target


def make_generated(fam: Family, k: object, *, n_hidden: int = 8, n_public: int = 2, n_extra: int = 6,
                   seed: int = 0) -> GeneratedTask:
    """One task of ``fam`` at parameter ``k``: ``n_public`` docstring examples and ``n_hidden`` hidden tests on
    distinct seeded inputs, plus ``n_extra`` further inputs for the self-consistency critic."""
    entry, doc, body = _source(fam, k)
    arg = _arg_name(fam)
    ref = _reference(entry, arg, body)
    rng = random.Random(f"{GENERATOR_VERSION}/{fam.key}/{k}/{seed}")
    seen: set[str] = set()
    inputs: list[tuple] = []
    for _ in range(400):  # distinct inputs; the small input spaces (a digit string) may run dry
        a = INPUTS[fam.inputs](rng)
        if repr(a) not in seen:
            seen.add(repr(a))
            inputs.append(a)
        if len(inputs) == n_public + n_hidden + n_extra:
            break
    public, hidden, extra = inputs[:n_public], inputs[n_public:n_public + n_hidden], inputs[n_public + n_hidden:]
    # doctest prints nothing for None, so such an example asks "is None" instead
    examples = "\n".join(f"    >>> {_call(entry, a)} is None\n    True" if ref(*a) is None else
                         f"    >>> {_call(entry, a)}\n    {ref(*a)!r}" for a in public)
    prompt = f'def {entry}({arg}):\n    """{doc}\n\n{examples}\n    """\n'
    test = "def check(candidate):\n" + "".join(f"    assert candidate({', '.join(repr(x) for x in a)}) == "
                                               f"{ref(*a)!r}\n" for a in hidden)
    task = make_task({"task_id": f"gen/{fam.key}/{k}", "prompt": prompt, "canonical_solution": body + "\n",
                      "entry_point": entry, "test": test})
    return GeneratedTask(task, fam.key, tuple(extra), prompt + body + "\n")


def generated_tasks(families: tuple[Family, ...] = EVAL_FAMILIES, seed: int = 0) -> list[GeneratedTask]:
    """Every instance of every family, in a fixed order."""
    return [make_generated(f, k, seed=seed) for f in families for k in f.params]
