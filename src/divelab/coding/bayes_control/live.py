"""Live mode: the same controllers drive a real model behind an OpenAI-compatible endpoint.

The model writes the first attempt and every refinement (with the failed critics' feedback); the
critics run for real (compile, pyflakes, docstring examples and public tests in the sandbox) and
the verifier is the task's full test suite in the sandbox. The model is any ``divelab.chat``
``ChatModel``: ``OpenAIChatClient`` for a live endpoint, ``ScriptedChatModel`` in tests.
"""

from __future__ import annotations

import re

from divelab.chat import ChatModel, assistant, system, user
from divelab.codetasks.harness import evaluate
from divelab.codetasks.humaneval import Task
from divelab.coding.bayes_control.pool import pyflakes_messages, syntax_ok
from divelab.coding.bayes_control.replay import available, public_indices

SYSTEM = ("You are a careful Python programmer. Reply with the complete function (imports and the "
          "def line included) in one ```python code block and nothing else.")


def extract_code(reply: str, task: Task) -> str:
    """The module to test: the reply's code block; a bare body is appended to the prompt."""
    m = re.findall(r"```(?:python|py)?\s*\n(.*?)```", reply, flags=re.S)
    code = max(m, key=len) if m else reply
    if f"def {task.entry_point}" not in code:
        code = task.prompt + code
    elif task.prompt.split(f"def {task.entry_point}")[0].strip() and "import" not in code.split("def ")[0]:
        # keep the prompt's imports and helper functions
        code = task.prompt.split(f"def {task.entry_point}")[0] + code
    return code


class LiveEnv:
    """A task worked on by a real model; critics and verifier really run."""

    def __init__(self, task: Task, model: ChatModel, public_level: float = 0.25):
        self.task, self.model = task, model
        self.public = public_indices(task, public_level)
        self.available = available(task, self.public)
        self.log: list[dict] = []
        self.code = extract_code(self._ask([system(SYSTEM), user(f"Complete this function:\n\n{task.prompt}")]), task)
        self.log.append({"event": "generate", "code": self.code})
        self._verified: bool | None = None

    def _ask(self, messages: list) -> str:
        return self.model.complete(messages).message.content

    def critic(self, k: int) -> tuple[bool | None, str]:
        if k == 0:
            ok = syntax_ok(self.code)
            fb = "" if ok else "the code does not compile"
        elif k == 1:
            msgs = pyflakes_messages(self.code)
            ok, fb = not msgs, "pyflakes: " + "; ".join(msgs[:5])
        elif k == 2:
            ev = evaluate(self.task, self.code, run_doc=True, tests=[])
            ok, fb = ev.doc_passed, "docstring examples failed:\n" + ev.doc_report
        elif k == 3:
            ev = evaluate(self.task, self.code, run_doc=False, tests=self.public)
            ok = ev.passed_tests(self.public)
            failed = [self.task.steps[i][0] for i in range(len(self.task.steps))
                      if self.task.steps[i][1] in self.public and not ev.tests.get(self.task.steps[i][1], False)]
            fb = "failing tests:\n" + "\n".join(failed[:3])
        else:
            raise ValueError(f"critic index {k} out of range 0..3")
        self.log.append({"event": f"critic:{k}", "passed": ok})
        return ok, ("" if ok else fb)

    def refine(self, feedback: str) -> None:
        reply = self._ask([
            system(SYSTEM),
            user(f"Complete this function:\n\n{self.task.prompt}"),
            assistant(f"```python\n{self.code}\n```"),
            user("That is not right yet. " + (feedback or "Check it carefully.")
                 + "\nReply with the corrected complete function.")])
        self.code = extract_code(reply, self.task)
        self._verified = None
        self.log.append({"event": "refine", "code": self.code})

    def verify(self) -> bool:
        ev = evaluate(self.task, self.code, run_doc=False)
        self._verified = ev.n_failed(self.task.n_tests) == 0
        self.log.append({"event": "verify", "passed": self._verified})
        return self._verified

    def shipped_correct(self) -> bool | None:
        """Ground truth for the report: the hidden suite run once more after shipping (not charged)."""
        if self._verified is None:
            ev = evaluate(self.task, self.code, run_doc=False)
            self._verified = ev.n_failed(self.task.n_tests) == 0
        return self._verified
