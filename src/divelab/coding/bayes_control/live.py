"""Live mode: the same controllers drive a real model behind an OpenAI-compatible endpoint.

The model writes the first attempt and every refinement (with the failed critics' feedback); the
critics run for real (compile, pyflakes, docstring examples and public tests in the sandbox) and
the verifier is the task's full test suite in the sandbox. A minimal httpx client lives here behind
the :class:`ChatModel` protocol, so a shared client (``divelab.chat``) can replace it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import httpx

from divelab.coding.bayes_control.harness import evaluate
from divelab.coding.bayes_control.humaneval import Task
from divelab.coding.bayes_control.pool import pyflakes_messages, syntax_ok
from divelab.coding.bayes_control.replay import available, public_indices

Message = dict[str, str]


class ChatModel(Protocol):
    def complete(self, messages: list[Message]) -> str: ...


class ChatError(RuntimeError):
    pass


@dataclass
class OpenAICompatibleChat:
    """``POST {base_url}/chat/completions`` with a bearer key; returns the first choice's text."""

    base_url: str
    model: str
    api_key: str | None = None
    temperature: float = 0.2
    max_tokens: int = 1024
    timeout_s: float = 120.0
    transport: httpx.BaseTransport | None = None  # tests pass httpx.MockTransport

    def __post_init__(self) -> None:
        if not self.base_url.startswith(("http://", "https://")):
            raise ValueError(f"base_url must start with http:// or https://, got {self.base_url!r}")
        if not self.model:
            raise ValueError("model must be a non-empty model name")
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        self._client = httpx.Client(base_url=self.base_url.rstrip("/"), headers=headers,
                                    timeout=self.timeout_s, transport=self.transport)

    def complete(self, messages: list[Message]) -> str:
        body = {"model": self.model, "messages": messages, "temperature": self.temperature,
                "max_tokens": self.max_tokens}
        try:
            r = self._client.post("/chat/completions", json=body)
        except httpx.HTTPError as exc:
            raise ChatError(f"request to {self.base_url} failed: {exc}") from exc
        if r.status_code != 200:
            raise ChatError(f"{self.base_url}/chat/completions returned HTTP {r.status_code}: {r.text[:300]}")
        try:
            return r.json()["choices"][0]["message"]["content"] or ""
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            raise ChatError(f"unexpected response shape from {self.base_url}: {r.text[:300]}") from exc


@dataclass
class ScriptedChat:
    """Replies from a list (in order) or a function of the messages: for tests and demos."""

    replies: Sequence[str] | Callable[[list[Message]], str]
    calls: int = 0

    def complete(self, messages: list[Message]) -> str:
        self.calls += 1
        if callable(self.replies):
            return self.replies(messages)
        if self.calls > len(self.replies):
            raise ChatError(f"scripted model ran out of replies after {len(self.replies)}")
        return self.replies[self.calls - 1]


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
        self.code = extract_code(model.complete([
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": f"Complete this function:\n\n{task.prompt}"}]), task)
        self.log.append({"event": "generate", "code": self.code})
        self._verified: bool | None = None

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
        reply = self.model.complete([
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": f"Complete this function:\n\n{self.task.prompt}"},
            {"role": "assistant", "content": f"```python\n{self.code}\n```"},
            {"role": "user", "content": "That is not right yet. " + (feedback or "Check it carefully.")
             + "\nReply with the corrected complete function."}])
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
