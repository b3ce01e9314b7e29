"""Ask any chat model (the :mod:`divelab.chat` protocol) the BFCL v4 questions and score its answers.

The questions and the scorer are :mod:`divelab.envs.bfcl`'s; this module is the part between them: each
record's functions become the chat protocol's tools (BFCL's ``"dict"`` parameter type is JSON schema's
``"object"``; a dotted function name, which tool APIs forbid, is sent with underscores and scored the way
BFCL scores such models), the record's own turn is sent, and the reply is read back as BFCL's decoded
calls.

A reply counts as calls when the chat model returned tool calls, or, failing that, when its text is a
Python-syntax call list (``[f(a=1)]``, BFCL's prompting-mode format). Anything else is no call: a model
that ignores the format is measured as answering in prose, never repaired.

>>> from divelab.chat.scripted import ScriptedChatModel
>>> from divelab.envs.bfcl_run import ask
>>> run = ask(ScriptedChatModel(["[calculate_triangle_area(base=10, height=5)]"]), records)   # doctest: +SKIP
>>> run.accuracy                                                                             # doctest: +SKIP
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from divelab.chat.types import ChatResponse, Message, ToolSpec
from divelab.envs.bfcl import BFCLRecord, Call, parse_calls, score
from divelab.progress import make_progress


def _schema(node: Any) -> Any:
    """BFCL's parameter schema as JSON schema: its ``"dict"`` type is ``"object"``, ``"float"`` is
    ``"number"``, ``"tuple"`` is ``"array"`` (the names OpenAI-style tool APIs accept), at every depth."""
    if isinstance(node, Mapping):
        out = {k: _schema(v) for k, v in node.items()}
        kind = out.get("type")
        if isinstance(kind, str):
            out["type"] = {"dict": "object", "float": "number", "tuple": "array", "any": "string"}.get(kind, kind)
        return out
    if isinstance(node, list):
        return [_schema(v) for v in node]
    return node


def tool_name(name: str) -> str:
    """The name a function is offered under: tool APIs forbid dots, so ``math.gcd`` is sent as ``math_gcd``."""
    return name.replace(".", "_")


def tools_of(record: BFCLRecord) -> list[ToolSpec]:
    """The record's functions as the chat protocol's tools."""
    return [ToolSpec(tool_name(f.name), f.description, _schema(f.parameters) or {"type": "object", "properties": {}})
            for f in record.functions]


def messages_of(record: BFCLRecord) -> list[Message]:
    """The record's single turn as chat messages (BFCL's turns hold ``system`` and ``user`` messages)."""
    return [Message(m["role"], m["content"]) for m in record.messages]


def calls_of(response: ChatResponse) -> tuple[list[Call], str]:
    """The reply's calls in BFCL's decoded form and where they came from: ``"tool_calls"`` (the chat
    protocol's), ``"text"`` (a Python-syntax call list in the reply's text) or ``"none"``."""
    msg = response.message
    if msg.tool_calls:
        return [{c.name: dict(c.arguments)} for c in msg.tool_calls], "tool_calls"
    try:
        return parse_calls(msg.content), "text"
    except ValueError:
        return [], "none"


@dataclass(frozen=True)
class Answer:
    id: str
    category: str
    correct: bool
    source: str  # "tool_calls", "text" or "none" (see calls_of)
    error_type: str
    reply: str  # the reply's text, tool calls included, cut to 300 characters


@dataclass
class BFCLRun:
    """One model's answers to a list of records, in the records' order."""

    answers: list[Answer] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def correct(self) -> list[bool]:
        return [a.correct for a in self.answers]

    @property
    def accuracy(self) -> float:
        return sum(self.correct) / len(self.answers) if self.answers else float("nan")

    def by_category(self) -> dict[str, float]:
        cats: dict[str, list[bool]] = {}
        for a in self.answers:
            cats.setdefault(a.category, []).append(a.correct)
        return {c: sum(v) / len(v) for c, v in cats.items()}

    def called(self) -> float:
        """Share of replies read as calls (by either route): how often the model used the format at all."""
        return sum(a.source != "none" for a in self.answers) / len(self.answers) if self.answers else float("nan")


def _reply_text(response: ChatResponse) -> str:
    msg = response.message
    calls = "; ".join(f"{c.name}({c.arguments})" for c in msg.tool_calls)
    return (msg.content + (" | calls: " + calls if calls else ""))[:300]


def ask(chat: Any, records: Sequence[BFCLRecord], *, batch_size: int = 8, max_tokens: int | None = None,
        progress: Callable[[int, int], None] | None = None, label: str = "BFCL questions") -> BFCLRun:
    """Every record asked once (greedy when the chat model is), scored by BFCL's rules. A chat model whose
    ``complete_many`` takes ``tools_each`` (as :class:`divelab.chat.hf_local.HFChatModel`'s does) is sent
    ``batch_size`` records at a time, similar lengths together; any other chat model one record per
    ``complete``. A progress bar named ``label`` (a heartbeat line with an ETA off a terminal) follows the answers;
    ``progress(done, total)`` is also called after each request."""
    if not records:
        raise ValueError("ask() needs at least one BFCL record")
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    t0 = time.time()
    replies: dict[int, ChatResponse] = {}
    many = getattr(chat, "complete_many", None)
    batched = many is not None and "tools_each" in inspect.signature(many).parameters
    # similar prompt lengths share a batch, so left padding wastes little
    order = sorted(range(len(records)), key=lambda i: (len(repr(records[i].functions)) + len(records[i].question)))
    step = batch_size if batched else 1
    with make_progress() as bar:
        task = bar.add_task(label, total=len(records), info="")
        for s in range(0, len(order), step):
            part = order[s:s + step]
            if batched:
                outs = many([messages_of(records[i]) for i in part], tools_each=[tools_of(records[i]) for i in part],
                            max_tokens=max_tokens)
            else:
                outs = [chat.complete(messages_of(records[i]), tools_of(records[i]), max_tokens=max_tokens)
                        for i in part]
            replies.update(zip(part, outs, strict=True))
            bar.update(task, completed=len(replies))
            if progress:
                progress(len(replies), len(records))
    run = BFCLRun()
    for i, r in enumerate(records):
        calls, source = calls_of(replies[i])
        s = score(r, calls, dots_as_underscores=True)
        run.answers.append(Answer(r.id, r.category, s.correct, source, s.error_type, _reply_text(replies[i])))
    run.seconds = time.time() - t0
    return run
