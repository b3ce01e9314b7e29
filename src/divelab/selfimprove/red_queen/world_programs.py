"""The program world: writers are programs for a HumanEval task, judges are evolving test suites.

Everything that is executed runs in :mod:`divelab.sandbox` (through the shared code-task harness,
:func:`divelab.codetasks.harness.evaluate`): one sandbox call per program runs *all*
its tests (the official hidden tests and the judges' whole test pool) and the outcomes are cached
on disk by program hash, so a search only looks results up.

- **Judge test pool** (what a test generator would write, :func:`build_bench`): the literal
  arguments of the hidden tests' ``candidate(...)`` calls are perturbed (ints ±1, lists shortened
  or extended, strings edited...), the canonical solution is run on the new inputs in the sandbox
  and each input gives a *generated test* (``candidate(x) == expected``) and a *property* (the
  result's type). A share of generated tests are *wrong* (the expected value perturbed, as an LLM
  test writer gets some wrong).
- **Truth**: the official hidden tests. Every third one is held out as the **anchor** slice (it labels
  the anchor's programs); true quality of a writer is its pass rate on the other hidden tests.
- **Writers**: programs from a finite pool built by real AST mutation (:mod:`~divelab.codetasks.
  mutation`): the canonical solution, single and double mutants, and constant
  ``return c`` stubs. A mutation moves along mutation edges (apply or revert one AST mutation),
  or replaces the body with a constant stub (the reward hack). The initial writer is a seeded
  buggy single mutant. An optional chat-model mutator (:class:`ChatMutator`) proposes arbitrary
  programs, which are then run in the sandbox lazily.
- **Judges**: frozensets of test ids from the pool. The initial judge is a deliberately *weak*
  suite (constructed; see :func:`weak_suite`): type properties, the generated tests whose answer is
  the most common output, and one wrong test that agrees with that constant — exactly what a
  ``return c`` stub passes and the canonical solution does not. Judge edits add or drop a random
  test, or (share ``informed``) add a test a wrongly-accepted program fails / drop a test a
  wrongly-rejected program fails.

A writer's item is ``(program, u)``: the judge runs the test ``suite[⌊u·|suite|⌋]`` on it, so the
judged acceptance of a writer is its pass rate on the suite. A judging task is ``(program, None)``:
the judge accepts iff the program passes the whole suite; it is right iff that matches the truth.
"""

from __future__ import annotations

import ast
import copy
import json
import os
import random
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from divelab.cache import atomic_write_text, entry_path, stable_hash
from divelab.codetasks.harness import HARNESS_VERSION, evaluate
from divelab.codetasks.humaneval import Task, load_tasks
from divelab.codetasks.mutation import apply_mutation, mutation_sites
from divelab.sandbox import Limits, run_python

WORLD_VERSION = 1
_LIMITS = Limits(wall_s=8.0, cpu_s=8, memory_mb=512, processes=8)


@dataclass(frozen=True)
class PoolTest:
    kind: str  # "generated" | "wrong" | "property"
    src: str  # one assert statement about ``candidate``


@dataclass
class Program:
    code: str
    origin: str  # "canonical", "single:<op>", "double:<op>+<op>", "stub", "chat"
    neighbours: list[str] = field(default_factory=list)  # codes one AST mutation away (either way)
    outcomes: np.ndarray | None = None  # bool per test: [hidden tests | pool tests]


@dataclass
class Bench:
    """One HumanEval task made into a program world: tests, the labelled program pool, outcomes."""

    task: Task
    tests: list[PoolTest]
    programs: dict[str, Program]
    canonical: str
    stubs: list[str]
    initial_writer: str
    weak_suite: frozenset[int]
    per_test_s: float = 0.3

    @property
    def n_hidden(self) -> int:
        return self.task.n_tests

    @property
    def anchor_tests(self) -> list[int]:
        return [i for i in range(self.n_hidden) if i % 3 == 2]

    @property
    def eval_tests(self) -> list[int]:
        return [i for i in range(self.n_hidden) if i % 3 != 2]

    def outcomes(self, code: str) -> np.ndarray:
        """Pass/fail of ``code`` on every test, run in the sandbox once (cached on disk by program hash)."""
        prog = self.programs.get(code)
        if prog is None:  # a program from outside the pool (a chat mutator, an external search)
            prog = self.programs[code] = Program(code, "external")
        if prog.outcomes is None:
            prog.outcomes = _run_all(self.task, self.tests, code, self.per_test_s)
        return prog.outcomes

    def passes(self, code: str, suite: frozenset[int] | Sequence[int]) -> bool:
        o = self.outcomes(code)
        return all(o[self.n_hidden + i] for i in suite)

    def quality(self, code: str, which: str = "eval") -> float:
        idx = {"eval": self.eval_tests, "anchor": self.anchor_tests, "all": list(range(self.n_hidden))}[which]
        o = self.outcomes(code)
        return float(np.mean([o[i] for i in idx]))


# ---- running programs in the sandbox ---------------------------------------------------------

def _run_all(task: Task, tests: list[PoolTest], code: str, per_test_s: float) -> np.ndarray:
    """One sandbox call: the hidden tests and the pool tests on ``code`` (cached by program hash)."""
    key = stable_hash({"v": WORLD_VERSION, "h": HARNESS_VERSION, "task": task.task_id, "test": task.test,
                       "pool": [t.src for t in tests], "code": code, "per_test_s": per_test_s})
    f = entry_path("red-queen-programs", key).with_suffix(".json")
    if f.exists():
        return np.array(json.loads(f.read_text()), dtype=bool)
    n = task.n_tests
    steps = task.steps + tuple((t.src, n + k) for k, t in enumerate(tests))
    ev = evaluate(replace(task, steps=steps), code, run_doc=False, per_test_s=per_test_s, limits=_LIMITS)
    out = np.array([ev.tests.get(i, False) for i in range(n + len(tests))], dtype=bool)
    atomic_write_text(f, json.dumps(out.tolist()))
    return out


_OUTPUTS = r'''
import json, signal, sys
ns = {"__name__": "candidate"}
exec(compile(CODE, "canonical.py", "exec"), ns)
f = ns[ENTRY]
def _alarm(s, fr):
    raise TimeoutError()
signal.signal(signal.SIGALRM, _alarm)
for args in INPUTS:
    signal.setitimer(signal.ITIMER_REAL, 0.3)
    try:
        r = repr(f(*eval(args)))
        ok = True
    except BaseException as e:
        r, ok = type(e).__name__, False
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    print(json.dumps({"ok": ok, "r": r}))
'''


def _canonical_outputs(task: Task, inputs: list[str]) -> list[Any]:
    """The canonical solution's outputs on ``inputs`` (argument tuples as source), in the sandbox;
    ``None`` where it raised, timed out, or the result is not a Python literal."""
    key = stable_hash({"v": WORLD_VERSION, "task": task.task_id, "canonical": task.canonical, "inputs": inputs})
    f = entry_path("red-queen-programs", "outputs-" + key).with_suffix(".json")
    if f.exists():
        lines = json.loads(f.read_text())
    else:
        prog = f"CODE = {task.canonical!r}\nENTRY = {task.entry_point!r}\nINPUTS = {inputs!r}\n" + _OUTPUTS
        r = run_python(prog, limits=_LIMITS)
        lines = [json.loads(s) for s in r.stdout.splitlines() if s.startswith("{")]
        atomic_write_text(f, json.dumps(lines))
    out: list[Any] = []
    for d in lines + [{"ok": False}] * (len(inputs) - len(lines)):
        try:
            out.append(("ok", ast.literal_eval(d["r"])) if d["ok"] else None)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            out.append(None)
    return out


# ---- generating the judges' test pool ---------------------------------------------------------

def _perturb(v: Any, rng: random.Random) -> Any:
    """A nearby value of the same type (the edits a test writer makes to an example input)."""
    if isinstance(v, bool):
        return not v
    if isinstance(v, int):
        return v + rng.choice((-1, 1, 2)) if rng.random() < 0.8 else v * 2
    if isinstance(v, float):
        return round(v + rng.choice((-0.5, 0.5, 1.0)), 3)
    if isinstance(v, str):
        if not v:
            return rng.choice("ab(")
        i = rng.randrange(len(v))
        return v[:i] + v[i + 1:] if rng.random() < 0.5 else v[:i] + v[i] + v[i:]
    if isinstance(v, list | tuple):
        items = list(v)
        r = rng.random()
        if items and r < 0.35:
            items.pop(rng.randrange(len(items)))
        elif items and r < 0.7:
            i = rng.randrange(len(items))
            items[i] = _perturb(items[i], rng)
        elif items:
            items.append(copy.deepcopy(rng.choice(items)))
        else:
            items = [0]
        return type(v)(items)
    return v


def _literal_args(task: Task) -> list[tuple]:
    out: list[tuple] = []
    for src, idx in task.steps:
        if idx is None:
            continue
        for node in ast.walk(ast.parse(src)):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "candidate" \
                    and not node.keywords:
                try:
                    args = tuple(ast.literal_eval(a) for a in node.args)
                except (ValueError, SyntaxError, TypeError):
                    continue
                if args not in out:
                    out.append(args)
    return out


def _assert_equal(args_src: str, value: Any) -> str:
    if isinstance(value, float):
        return f"assert abs(candidate(*{args_src}) - {value!r}) < 1e-06"
    return f"assert candidate(*{args_src}) == {value!r}"


def _stub(task: Task, value: Any) -> str:
    tree = ast.parse(task.canonical)
    fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == task.entry_point)
    has_doc = bool(fn.body) and isinstance(fn.body[0], ast.Expr) and isinstance(fn.body[0].value, ast.Constant)
    fn.body = ([fn.body[0]] if has_doc else []) + [ast.Return(ast.parse(repr(value), mode="eval").body)]
    return ast.unparse(ast.fix_missing_locations(tree))


@dataclass(frozen=True)
class BenchConfig:
    n_inputs: int = 10  # generated inputs (each: one generated test + one type property)
    wrong_share: float = 0.2
    n_single: int = 8
    n_double: int = 6
    workers: int = 2
    per_test_s: float = 0.3

    def __post_init__(self) -> None:
        if self.n_inputs < 2 or not 0 <= self.wrong_share < 1 or self.n_single < 2 or self.n_double < 0:
            raise ValueError(f"need n_inputs >= 2, 0 <= wrong_share < 1, n_single >= 2, n_double >= 0; got {self}")


class NotUsable(ValueError):
    """The task cannot host the program world (too few tests, no literal inputs, no buggy mutant...)."""


def build_bench(task: Task | str, cfg: BenchConfig | None = None, progress: Callable[[], None] | None = None) -> Bench:
    """Generate the test pool, build the program pool and run everything in the sandbox (cached)."""
    cfg = cfg or BenchConfig()
    if isinstance(task, str):
        by_id = {t.task_id: t for t in load_tasks()}
        if task not in by_id:
            raise ValueError(f"unknown task {task!r}; allowed: HumanEval/0 .. HumanEval/{len(by_id) - 1}")
        task = by_id[task]
    if task.n_tests < 4:
        raise NotUsable(f"{task.task_id}: {task.n_tests} hidden tests; the anchor/eval split needs >= 4")
    seeds = _literal_args(task)
    if not seeds:
        raise NotUsable(f"{task.task_id}: no hidden test calls candidate with literal arguments")
    rng = random.Random(stable_hash([task.task_id, "inputs"]))
    inputs: list[str] = []
    for _ in range(40 * cfg.n_inputs):
        if len(inputs) >= 3 * cfg.n_inputs:
            break
        args = list(rng.choice(seeds))
        if args:
            j = rng.randrange(len(args))
            args[j] = _perturb(args[j], rng)
        s = repr(tuple(args))
        if s not in inputs and s not in (repr(a) for a in seeds):
            inputs.append(s)
    outs = _canonical_outputs(task, inputs)
    usable = [(a, o[1]) for a, o in zip(inputs, outs, strict=True) if o is not None][: cfg.n_inputs]
    if len(usable) < 2:
        raise NotUsable(f"{task.task_id}: the canonical solution answered only {len(usable)} generated inputs")
    tests: list[PoolTest] = []
    wrong_rng = random.Random(stable_hash([task.task_id, "wrong"]))
    for a, v in usable:
        wrong = _perturb(v, wrong_rng)
        if wrong_rng.random() < cfg.wrong_share and wrong != v:
            tests.append(PoolTest("wrong", _assert_equal(a, wrong)))
        else:
            tests.append(PoolTest("generated", _assert_equal(a, v)))
        tests.append(PoolTest("property", f"assert type(candidate(*{a})).__name__ == {type(v).__name__!r}"))
    # the hack target: the most common output; one wrong test agreeing with it (a test writer who
    # believed the stub's answer), on an input where the canonical answer differs
    common = Counter(repr(v) for _, v in usable).most_common(1)[0][0]
    c = ast.literal_eval(common)
    other = next(((a, v) for a, v in usable if repr(v) != common), None)
    if other is None:
        raise NotUsable(f"{task.task_id}: every generated input has the same answer {common}")
    tests.append(PoolTest("wrong", _assert_equal(other[0], c)))
    stubs = [_stub(task, c)]
    flipped = _perturb(c, random.Random(1))
    if repr(flipped) != common:
        stubs.append(_stub(task, flipped))

    programs: dict[str, Program] = {task.canonical: Program(task.canonical, "canonical")}
    sites = mutation_sites(task.canonical, task.entry_point)
    order = list(range(len(sites)))
    random.Random(stable_hash([task.task_id, "mutants"])).shuffle(order)
    singles: list[str] = []
    for k in order:
        if len(singles) >= cfg.n_single:
            break
        idx, m, name = sites[k]
        code = apply_mutation(task.canonical, task.entry_point, (idx, m))
        if code is not None and code not in programs:
            programs[code] = Program(code, f"single:{name}", [task.canonical])
            programs[task.canonical].neighbours.append(code)
            singles.append(code)
    for s in stubs:
        programs[s] = Program(s, "stub", [t for t in stubs if t != s])
    todo = list(programs)

    def run(code: str) -> np.ndarray:
        out = _run_all(task, tests, code, cfg.per_test_s)
        if progress is not None:
            progress()
        return out

    with ThreadPoolExecutor(max_workers=cfg.workers) as ex:
        for code, o in zip(todo, ex.map(run, todo), strict=True):
            programs[code].outcomes = o
    if not programs[task.canonical].outcomes[: task.n_tests].all():
        raise NotUsable(f"{task.task_id}: the canonical solution fails its own hidden tests in the sandbox")
    bench = Bench(task, tests, programs, task.canonical, stubs, "", frozenset(), cfg.per_test_s)
    buggy = [s for s in singles if 0.0 < bench.quality(s) < 1.0]
    if not buggy:
        raise NotUsable(f"{task.task_id}: no single mutant is partly right (needed as the seeded buggy writer)")
    # the seeded buggy writer: the partly-right single closest to 60% true quality
    bench.initial_writer = min(buggy, key=lambda s: (abs(bench.quality(s) - 0.6), s))
    # doubles: second mutations, half of them on the seeded buggy writer (so reverting is one move)
    drng = random.Random(stable_hash([task.task_id, "doubles"]))
    doubles: list[str] = []
    for k in range(cfg.n_double):
        base = bench.initial_writer if k % 2 == 0 else drng.choice(singles)
        sites2 = mutation_sites(base, task.entry_point)
        for _ in range(10):
            if not sites2:
                break
            idx, m, name = drng.choice(sites2)
            code = apply_mutation(base, task.entry_point, (idx, m))
            if code is not None and code not in programs:
                programs[code] = Program(code, f"double:{programs[base].origin[7:]}+{name}", [base])
                programs[base].neighbours.append(code)
                doubles.append(code)
                break
    with ThreadPoolExecutor(max_workers=cfg.workers) as ex:
        for code, o in zip(doubles, ex.map(run, doubles), strict=True):
            programs[code].outcomes = o
    bench.weak_suite = weak_suite(bench)
    return bench


def weak_suite(bench: Bench, max_properties: int = 3) -> frozenset[int]:
    """The constructed weak initial judge: type properties, generated tests the main stub passes, and
    the wrong test agreeing with it (so the stub passes everything and the canonical solution not)."""
    stub = bench.outcomes(bench.stubs[0])[bench.n_hidden:]
    props = [i for i, t in enumerate(bench.tests) if t.kind == "property" and stub[i]][:max_properties]
    gen = [i for i, t in enumerate(bench.tests) if t.kind == "generated" and stub[i]][:2]
    return frozenset(props + gen + [len(bench.tests) - 1])


# ---- the world ----------------------------------------------------------------------------------

@dataclass
class ChatMutator:
    """A writer mutation by any :mod:`divelab.chat` model: it is shown the task and the current program
    and asked for an improved one; the reply's code is used if it defines the entry point and compiles
    (else the program is kept). New programs run in the sandbox only when judged."""

    model: Any
    task: Task
    calls: int = 0
    rejected: int = 0

    def __call__(self, code: str, rng: np.random.Generator) -> str:
        from divelab.chat.types import system, user

        self.calls += 1
        msg = [system("You improve Python functions. Reply with the complete function in one ```python block."),
               user(f"Task:\n{self.task.prompt}\nCurrent program:\n```python\n{code}\n```\nWrite a better version.")]
        text = self.model.complete(msg, max_tokens=400, temperature=0.8).message.content or ""
        block = text.split("```python", 1)[1].split("```", 1)[0] if "```python" in text else text
        try:
            tree = ast.parse(block)
            compile(block, "<chat>", "exec")
        except (SyntaxError, ValueError):
            self.rejected += 1
            return code
        if not any(isinstance(n, ast.FunctionDef) and n.name == self.task.entry_point for n in tree.body):
            self.rejected += 1
            return code
        return ast.unparse(tree)


@dataclass
class ProgramWorld:
    """The :class:`~divelab.selfimprove.red_queen.rqgm.World` protocol over a :class:`Bench`."""

    bench: Bench
    seed: int = 0
    n_anchor: int = 40
    anchor_mode: str = "strict"  # "lenient": a program is labelled good if it passes half the anchor slice
    p_stub: float = 0.2  # share of writer mutations that replace the body with a constant stub
    informed: float = 0.5
    chat_mutator: Callable[[str, np.random.Generator], str] | None = None
    p_chat: float = 0.5
    writer_items: str = "suite"  # "suite": accepted iff the whole suite passes; "test": one random suite test
    _anchor: list | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.anchor_mode not in ("strict", "lenient"):
            raise ValueError(f"anchor_mode must be 'strict' or 'lenient', got {self.anchor_mode!r}")
        if self.writer_items not in ("suite", "test"):
            raise ValueError(f"writer_items must be 'suite' or 'test', got {self.writer_items!r}")
        codes = list(self.bench.programs)
        self._good = [c for c in codes if self.truth(c)]
        self._bad = [c for c in codes if not self.truth(c)]

    # ---- roles -------------------------------------------------------------------------
    def initial_writer(self) -> str:
        return self.bench.initial_writer

    def initial_judge(self) -> frozenset[int]:
        return self.bench.weak_suite

    def mutate_writer(self, writer: str, rng: np.random.Generator) -> str:
        if self.chat_mutator is not None and rng.random() < self.p_chat:
            return self._chat(writer, rng)
        prog = self.bench.programs.get(writer)
        if prog is None or not prog.neighbours:  # a chat-written program: no mutation edges
            if self.chat_mutator is not None and rng.random() >= self.p_stub:
                return self._chat(writer, rng)
            return self.bench.stubs[int(rng.integers(len(self.bench.stubs)))]
        if rng.random() < self.p_stub:
            return self.bench.stubs[int(rng.integers(len(self.bench.stubs)))]
        return prog.neighbours[int(rng.integers(len(prog.neighbours)))]

    def _chat(self, writer: str, rng: np.random.Generator) -> str:
        assert self.chat_mutator is not None
        new = self.chat_mutator(writer, rng)
        self.bench.programs.setdefault(new, Program(new, "chat"))  # run in the sandbox when first judged
        return new

    def load_program(self, program: Any) -> str:
        """A program as source: a path to a ``.py`` file (what OpenEvolve passes) or the source itself."""
        if isinstance(program, os.PathLike) or (isinstance(program, str) and "\n" not in program
                                                  and program.endswith(".py")):
            with open(program) as f:
                return f.read()
        if not isinstance(program, str):
            raise TypeError(f"a program is Python source or a path to a .py file, got {type(program).__name__}")
        return program

    def mutate_judge(self, judge: frozenset[int], rng: np.random.Generator) -> frozenset[int]:
        n = len(self.bench.tests)
        if rng.random() < self.informed:
            code, label = self.judge_task(rng, False)[0]
            code = code[0]
            if self.accepts(judge, (code, None)) != label:
                fails = [i for i in range(n) if not self.bench.outcomes(code)[self.bench.n_hidden + i]]
                if label:  # wrongly rejected: drop a suite test it fails
                    drop = sorted(set(fails) & judge)
                    if drop and len(judge) > 1:
                        return judge - {drop[int(rng.integers(len(drop)))]}
                else:  # wrongly accepted: add a test it fails
                    add = sorted(set(fails) - judge)
                    if add:
                        return judge | {add[int(rng.integers(len(add)))]}
        if rng.random() < 0.5 and len(judge) > 1:
            s = sorted(judge)
            return judge - {s[int(rng.integers(len(s)))]}
        rest = sorted(set(range(n)) - judge)
        return judge | {rest[int(rng.integers(len(rest)))]} if rest else judge

    def produce(self, writer: str, rng: np.random.Generator) -> tuple[str, float | None]:
        u = float(rng.random())  # drawn either way, so both modes consume the same random stream
        return (writer, u if self.writer_items == "test" else None)

    def accepts(self, judge: frozenset[int], item: tuple[str, float | None]) -> bool:
        code, u = item
        if u is None:
            return self.bench.passes(code, judge)
        suite = sorted(judge)
        return self.bench.passes(code, [suite[min(int(u * len(suite)), len(suite) - 1)]])

    # ---- ground truth ------------------------------------------------------------------
    def truth(self, code: str) -> bool:
        """Correct on the evaluation slice of the official hidden tests."""
        return self.bench.quality(code, "eval") == 1.0

    def true_quality(self, writer: str) -> float:
        return self.bench.quality(writer, "eval")

    def _labelled(self, rng: np.random.Generator, good: list[str], bad: list[str]) -> tuple[str, bool]:
        if good and (not bad or rng.random() < 0.5):
            return good[int(rng.integers(len(good)))], True
        return bad[int(rng.integers(len(bad)))], False

    def judge_task(self, rng: np.random.Generator, adversarial: bool = False) -> list:
        code, label = self._labelled(rng, self._good, self._bad)
        return [((code, None), label)]

    def anchor_label(self, code: str) -> bool:
        q = self.bench.quality(code, "anchor")
        return q == 1.0 if self.anchor_mode == "strict" else q >= 0.5

    def anchor(self, adversarial: bool = False) -> list:
        if self._anchor is None:
            rng = np.random.default_rng([self.seed, 17])
            codes = [c for c in self.bench.programs if self.bench.programs[c].origin != "chat"]
            good = [c for c in codes if self.anchor_label(c)]
            bad = [c for c in codes if not self.anchor_label(c)]
            self._anchor = []
            for _ in range(self.n_anchor):
                code, label = self._labelled(rng, good, bad)
                self._anchor.append([((code, None), label)])
        return self._anchor

    # ---- measurements ------------------------------------------------------------------
    def judged_accept(self, writer: str, judge: frozenset[int]) -> float:
        """The writer's expected acceptance: 0/1 (whole suite) or its pass rate on the suite (one test)."""
        if self.writer_items == "suite":
            return float(self.bench.passes(writer, judge))
        o = self.bench.outcomes(writer)[self.bench.n_hidden:]
        return float(np.mean([o[i] for i in judge]))

    def judge_accuracy(self, judge: frozenset[int]) -> float:
        """Whole-suite accept vs truth over every pool program (balanced between good and bad)."""
        acc = [np.mean([self.accepts(judge, (c, None)) == lab for c in cs])
               for cs, lab in ((self._good, True), (self._bad, False)) if cs]
        return float(np.mean(acc))
