"""The Conductor (Fugu-Ultra): run a query-specific workflow of (model_id, subtask, access_list) steps.

A workflow is three equal-length lists. Step t runs ``model_id[t]`` on ``subtasks[t]``; its context
holds the user's question plus ONLY the outputs of the earlier steps its access list names
("all", a list of earlier step indices, or "none" / []): intra-workflow isolation. References must
point backwards (no self or forward reference), so the visibility graph is a DAG by construction.
The last step's output is the answer. ``model_id == "self"`` recurses into the conductor on that
step's subtask, up to ``max_depth`` (beyond it the step raises :class:`RecursionCapError`). An
optional :class:`ToolMemory` is shared across the workflows of one conversation (inter-workflow).
Training signal: :func:`format_reward` (0 / 0.5 / 1) with :func:`group_advantages` (GRPO, β = 0).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from divelab.chat import Message, system, user
from divelab.orchestration.fugu.workers import Worker


class WorkflowError(ValueError):
    """A workflow that cannot run: unparseable, unequal lists, unknown model, forward reference or cycle."""


class RecursionCapError(RuntimeError):
    """A ``self`` step past the conductor's depth cap."""


Access = str | list[int]


@dataclass(frozen=True)
class Workflow:
    model_id: list[str]
    subtasks: list[str]
    access_list: list[Access]

    def visible(self, t: int) -> list[int]:
        a = self.access_list[t]
        if a == "all":
            return list(range(t))
        if a == "none":
            return []
        return list(a)  # type: ignore[arg-type]


def parse_workflow(spec: str | dict[str, Any], known_models: set[str] | None = None) -> Workflow:
    """Parse a workflow from JSON text or a dict and validate it; raises :class:`WorkflowError` with the reason."""
    if isinstance(spec, str):
        try:
            spec = json.loads(spec)
        except json.JSONDecodeError as e:
            raise WorkflowError(f"workflow is not valid JSON: {e}") from e
    if not isinstance(spec, dict):
        raise WorkflowError(f"workflow must be a JSON object, got {type(spec).__name__}")
    missing = [k for k in ("model_id", "subtasks", "access_list") if k not in spec]
    if missing:
        raise WorkflowError(f"workflow lacks {missing}; needs model_id, subtasks, access_list")
    mids, subs, acc = spec["model_id"], spec["subtasks"], spec["access_list"]
    if not all(isinstance(v, list) for v in (mids, subs, acc)):
        raise WorkflowError("model_id, subtasks and access_list must be lists")
    if not mids or not len(mids) == len(subs) == len(acc):
        raise WorkflowError(f"lists must be non-empty and of equal length, got {len(mids)}, {len(subs)}, {len(acc)}")
    for t, (m, s, a) in enumerate(zip(mids, subs, acc, strict=True)):
        if not isinstance(m, str) or not isinstance(s, str):
            raise WorkflowError(f"step {t}: model_id and subtask must be strings")
        if known_models is not None and m != "self" and m not in known_models:
            raise WorkflowError(f"step {t}: unknown model_id {m!r}; allowed: {', '.join(sorted(known_models))}, self")
        if isinstance(a, str):
            if a not in ("all", "none"):
                raise WorkflowError(f"step {t}: access must be 'all', 'none' or a list of step indices, got {a!r}")
        elif isinstance(a, list):
            for j in a:
                if not isinstance(j, int) or isinstance(j, bool):
                    raise WorkflowError(f"step {t}: access indices must be integers, got {j!r}")
                if j == t:
                    raise WorkflowError(f"step {t}: a step cannot see itself (cycle)")
                if j > t:
                    raise WorkflowError(f"step {t}: forward reference to step {j} (visibility must be a DAG)")
                if j < 0:
                    raise WorkflowError(f"step {t}: negative step index {j}")
        else:
            raise WorkflowError(f"step {t}: access must be 'all', 'none' or a list, got {type(a).__name__}")
    return Workflow(list(mids), list(subs), [a if isinstance(a, str) else list(a) for a in acc])


@dataclass
class ToolMemory:
    """Tool-call history shared across the workflows of one conversation (inter-workflow memory)."""

    entries: list[str] = field(default_factory=list)

    def add(self, text: str) -> None:
        self.entries.append(text)

    def render(self) -> str:
        return "Shared tool memory:\n" + "\n".join(self.entries) if self.entries else ""


@dataclass
class StepResult:
    model_id: str
    output: str
    cost: float
    messages: list[Message]


@dataclass
class Run:
    steps: list[StepResult]
    answer: str
    cost: float
    depth: int


@dataclass
class Conductor:
    """Runs workflows over ``workers``; ``planner(question, depth) -> workflow spec`` writes them when asked to plan."""

    workers: list[Worker]
    planner: Callable[[str, int], str | dict[str, Any]] | None = None
    max_depth: int = 2
    memory: ToolMemory | None = None
    max_depth_seen: int = 0

    def __post_init__(self) -> None:
        self._by_name = {w.name: w for w in self.workers}
        if len(self._by_name) != len(self.workers):
            raise ValueError("worker names must be unique")
        if self.max_depth < 0:
            raise ValueError(f"max_depth must be >= 0, got {self.max_depth}")

    def context(self, question: str, wf: Workflow, t: int, outputs: list[str]) -> list[Message]:
        """The messages step ``t`` sees: its subtask, the question and only the outputs its access list names."""
        sys_txt = f"You are step {t + 1} of a workflow. Your subtask: {wf.subtasks[t]}"
        if self.memory is not None and self.memory.entries:
            sys_txt += "\n" + self.memory.render()
        body = f"Question: {question}"
        vis = wf.visible(t)
        if vis:
            body += "\n\nEarlier steps:\n" + "\n".join(f"[step {j + 1}] {outputs[j]}" for j in vis)
        return [system(sys_txt), user(body)]

    def run(self, question: str, workflow: str | dict[str, Any] | Workflow, depth: int = 0) -> Run:
        wf = workflow if isinstance(workflow, Workflow) else parse_workflow(workflow, set(self._by_name))
        self.max_depth_seen = max(self.max_depth_seen, depth)
        steps: list[StepResult] = []
        outputs: list[str] = []
        for t, mid in enumerate(wf.model_id):
            msgs = self.context(question, wf, t, outputs)
            if mid == "self":
                if depth + 1 > self.max_depth:
                    raise RecursionCapError(f"step {t}: recursion depth {depth + 1} exceeds max_depth={self.max_depth}")
                sub = self.solve(wf.subtasks[t] if wf.subtasks[t].strip() else question, depth + 1)
                out, cost = f"ANSWER: {sub.answer}", sub.cost
            else:
                resp, cost = self._by_name[mid].call(msgs)
                out = resp.message.content
                if self.memory is not None and resp.message.tool_calls:
                    for c in resp.message.tool_calls:
                        self.memory.add(f"{mid}: {c.name}({json.dumps(c.arguments, sort_keys=True)})")
            outputs.append(out)
            steps.append(StepResult(mid, out, cost, msgs))
        from divelab.orchestration.fugu.tasks import extract_answer

        return Run(steps, extract_answer(outputs[-1]), sum(s.cost for s in steps), depth)

    def solve(self, question: str, depth: int = 0) -> Run:
        """Ask the planner for a workflow, then run it."""
        if self.planner is None:
            raise ValueError("this Conductor has no planner; call run(question, workflow) instead")
        return self.run(question, self.planner(question, depth), depth)


def parallel_then_select(attempts: list[str], selector: str, isolated: bool = True) -> dict[str, Any]:
    """Independent attempts (access "none") or herded ones (each sees all earlier), then a selection step."""
    n = len(attempts)
    return {"model_id": [*attempts, selector],
            "subtasks": [f"Attempt {k + 1}: answer the question." for k in range(n)]
            + ["Select the best answer among the earlier steps."],
            "access_list": [("none" if isolated else "all") for _ in range(n)] + ["all"]}


def format_reward(spec: str | dict[str, Any], run: Callable[[Workflow], str], correct: Callable[[str], bool],
                  known_models: set[str] | None = None) -> float:
    """The Conductor's graded reward: 0 if the workflow does not parse/validate or fails to run, 0.5 if it
    runs but the answer is wrong, 1 if correct."""
    try:
        wf = parse_workflow(spec, known_models)
        answer = run(wf)
    except (WorkflowError, RecursionCapError):
        return 0.0
    return 1.0 if correct(answer) else 0.5


def group_advantages(rewards: list[float] | np.ndarray, eps: float = 1e-6) -> np.ndarray:
    """GRPO group-normalised advantages (r − mean) / (std + eps); all zeros when the group is uniform."""
    r = np.asarray(rewards, dtype=float)
    if r.ndim != 1 or r.size == 0:
        raise ValueError(f"rewards must be a non-empty 1-D sequence, got shape {r.shape}")
    return (r - r.mean()) / (r.std() + eps)
