"""TRL prompt/completion rows from function-calling tasks (:mod:`divelab.envs.tool_tasks`), rendered exactly as
:class:`divelab.chat.hf_local.HFChatModel` renders a conversation at test time (tools in the system message):

- :func:`call_rows`: the question as the prompt, the answering tool call as the completion (or, when no offered
  tool fits, a one-line plain answer saying so): the tool-call format and when to call;
- :func:`result_rows`: the question and the call as the prompt, up to the tool turn, and what the tool returned
  as the completion: predicting the environment's next observation, as a world model does.
  ``shuffle_seed`` pairs each call with another task's result instead (a sham: same texts, no dynamics).

TRL appends the end-of-turn token to each completion and puts the loss on the completion only.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import numpy as np

from divelab.chat.hf_local import render_call, to_template_messages
from divelab.chat.types import Message
from divelab.envs.tool_tasks import ToolTask

NO_TOOL = "None of the offered functions can answer this."
_SLOT = "\x00RESULT\x00"  # stands for the tool's output while the conversation is rendered


def _render(tokenizer: Any, messages: list[Message], task: ToolTask, generation: bool) -> str:
    return tokenizer.apply_chat_template(to_template_messages(messages, list(task.tools)),
                                         add_generation_prompt=generation, tokenize=False)


def call_rows(items: Sequence[ToolTask], tokenizer: Any) -> list[dict[str, str]]:
    """One row per task: the call that answers it (or :data:`NO_TOOL`)."""
    return [{"prompt": _render(tokenizer, [Message("user", t.question)], t, True),
             "completion": NO_TOOL if t.call is None else render_call(t.call)} for t in items]


def result_rows(items: Sequence[ToolTask], tokenizer: Any, shuffle_seed: int | None = None) -> list[dict[str, str]]:
    """One row per task with a call: the conversation up to the tool's turn, then its result (JSON)."""
    with_call = [t for t in items if t.call is not None]
    results = [json.dumps(t.result) for t in with_call]
    if shuffle_seed is not None:
        results = [results[int(i)] for i in np.random.default_rng([shuffle_seed, 1678]).permutation(len(results))]
    rows = []
    for t, res in zip(with_call, results, strict=True):
        text = _render(tokenizer, [Message("user", t.question), Message("assistant", "", tool_calls=(t.call,)),
                                   Message("tool", _SLOT, tool_call_id="1")], t, False)
        rows.append({"prompt": text[:text.index(_SLOT)], "completion": res})
    return rows
