"""An in-process chat model over a local Hugging Face causal LM (the ``divelab.chat`` protocol).

>>> from divelab.lm import load_model                                  # doctest: +SKIP
>>> from divelab.chat import user
>>> from divelab.chat.hf_local import HFChatModel
>>> chat = HFChatModel(*load_model("smollm2-135m-instruct"))
>>> chat.complete([user("What is 2+2?")]).message.content
'The answer to this classic math problem is 4.'

Tools: small instruct models have no native tool-calling API, so the tools are described in the
system message and the model is asked to answer a tool call as one line
``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` (the Hermes/SmolLM2 convention).
The reply is parsed leniently (a tagged JSON object, a bare JSON object with ``name``, or
``tool_name({...})``); what could not be parsed stays plain text, so a model that ignores the
format is *measured* as not calling a tool, never silently repaired. Earlier tool calls and
tool results are rendered in the same textual convention.

Decoding is greedy unless ``temperature > 0`` (then sampled with a seeded generator), so the same
messages give the same reply.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from divelab.chat.types import ChatResponse, Message, ToolCall, ToolSpec

TOOL_INSTRUCTIONS = (
    "You can call these tools:\n{tools}\n"
    "To call a tool, reply with exactly one line naming one of these tools, for example:\n"
    '<tool_call>{{"name": "{example}", "arguments": {{"{arg}": "..."}}}}</tool_call>\n'
    "To answer without a tool, reply with plain text."
)


def render_tools(tools: list[ToolSpec]) -> str:
    lines = []
    for t in tools:
        props = t.parameters.get("properties", {})
        args = ", ".join(f"{k}: {v.get('type', 'any')}" for k, v in props.items())
        lines.append(f"- {t.name}({args}): {t.description}")
    return "\n".join(lines)


def render_call(c: ToolCall) -> str:
    """A tool call as this protocol writes it in an assistant turn (the form :func:`parse_tool_calls` reads)."""
    return "<tool_call>" + json.dumps({"name": c.name, "arguments": c.arguments}) + "</tool_call>"


def to_template_messages(messages: list[Message], tools: list[ToolSpec] | None) -> list[dict[str, str]]:
    """Plain ``{"role", "content"}`` dicts any chat template accepts (tool traffic rendered as text)."""
    out: list[dict[str, str]] = []
    for m in messages:
        if m.role == "tool":
            out.append({"role": "user", "content": f"[tool result]\n{m.content}"})
        elif m.role == "assistant" and m.tool_calls:
            text = "\n".join([m.content] * bool(m.content) + [render_call(c) for c in m.tool_calls])
            out.append({"role": "assistant", "content": text})
        else:
            out.append({"role": m.role, "content": m.content})
    if tools:
        # the format example names the last offered tool (put a harmless one last: the example
        # should not nudge the model toward a governed tool)
        ex = tools[-1]
        arg = next(iter(ex.parameters.get("properties", {})), "input")
        block = TOOL_INSTRUCTIONS.format(tools=render_tools(tools), example=ex.name, arg=arg)
        if out and out[0]["role"] == "system":
            out[0] = {"role": "system", "content": out[0]["content"] + "\n\n" + block}
        else:
            out.insert(0, {"role": "system", "content": block})
    # merge consecutive messages of the same role: small models' templates expect alternation
    merged: list[dict[str, str]] = []
    for d in out:
        if merged and merged[-1]["role"] == d["role"] and d["role"] != "system":
            merged[-1] = {"role": d["role"], "content": merged[-1]["content"] + "\n\n" + d["content"]}
        else:
            merged.append(d)
    return merged


_TAGGED = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.S)
_FUNC = re.compile(r"\b([A-Za-z_][A-Za-z0-9_]*)\s*\(\s*(\{.*?\})\s*\)", re.S)


def _first_json_object(text: str) -> Any:
    dec = json.JSONDecoder()
    for i, ch in enumerate(text):
        if ch in "{[":
            try:
                obj, _ = dec.raw_decode(text[i:])
                return obj
            except json.JSONDecodeError:
                continue
    return None


def _as_calls(obj: Any, names: set[str]) -> list[tuple[str, dict[str, Any]]]:
    items = obj if isinstance(obj, list) else [obj]
    calls = []
    for it in items:
        if not isinstance(it, dict):
            continue
        name = it.get("name") or it.get("tool") or it.get("function")
        args = it.get("arguments", it.get("parameters", it.get("args", {})))
        if isinstance(args, str):
            try:
                args = json.loads(args)
            except json.JSONDecodeError:
                args = {}
        if isinstance(name, str) and name in names and isinstance(args, dict):
            calls.append((name, args))
    return calls


def parse_tool_calls(text: str, tools: list[ToolSpec] | None) -> list[tuple[str, dict[str, Any]]]:
    """``(name, arguments)`` pairs found in a model's reply; only names of offered tools count."""
    if not tools:
        return []
    names = {t.name for t in tools}
    calls: list[tuple[str, dict[str, Any]]] = []
    for chunk in _TAGGED.findall(text):
        calls += _as_calls(_first_json_object(chunk), names)
    if not calls:
        obj = _first_json_object(text)
        if obj is not None:
            calls = _as_calls(obj, names)
    if not calls:
        for name, raw in _FUNC.findall(text):
            if name in names:
                try:
                    args = json.loads(raw)
                except json.JSONDecodeError:
                    continue
                if isinstance(args, dict):
                    calls.append((name, args))
    return calls


@dataclass
class HFChatModel:
    """``ChatModel`` over an in-process HF causal LM with a chat template.

    ``max_context`` truncates the prompt from the left (keeping the system message) when a view is
    longer than the model can read; ``stats`` counts requests and tokens.
    """

    model: Any
    tokenizer: Any
    max_new_tokens: int = 96
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int = 0
    max_context: int = 8192
    stats: dict[str, int] = field(default_factory=lambda: {"requests": 0, "prompt_tokens": 0,
                                                           "completion_tokens": 0, "truncated": 0})

    def __post_init__(self) -> None:
        if getattr(self.tokenizer, "chat_template", None) is None:
            raise ValueError("HFChatModel needs a tokenizer with a chat template (tokenizer.chat_template is None)")
        if self.max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {self.max_new_tokens}")
        if self.temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {self.temperature}")

    def prompt_ids(self, messages: list[Message], tools: list[ToolSpec] | None = None) -> list[int]:
        enc = self.tokenizer.apply_chat_template(to_template_messages(messages, tools), add_generation_prompt=True,
                                                 tokenize=True)
        ids = enc["input_ids"] if isinstance(enc, dict) or hasattr(enc, "keys") else enc
        return list(ids)

    def complete(
        self,
        messages: list[Message],
        tools: list[ToolSpec] | None = None,
        *,
        temperature: float | None = None,
        max_tokens: int | None = None,
    ) -> ChatResponse:
        if not messages:
            raise ValueError("complete() needs at least one message")
        return self.complete_many([messages], tools, temperature=temperature, max_tokens=max_tokens)[0]

    def complete_many(
        self,
        conversations: list[list[Message]],
        tools: list[ToolSpec] | None = None,
        *,
        temperature: float | None = None,
        max_tokens: int | None = None,
        tools_each: list[list[ToolSpec] | None] | None = None,
    ) -> list[ChatResponse]:
        """One reply per conversation from one left-padded ``generate`` call (the same chat protocol as
        :meth:`complete`; greedy replies equal the unbatched ones). Sampling seeds the batch once, so a
        sampled batch is reproducible but not the same draws as one-at-a-time calls. ``tools_each`` gives
        each conversation its own tools (then ``tools`` must be None)."""
        import torch

        if not conversations or any(not m for m in conversations):
            raise ValueError("complete_many() needs at least one conversation, each with at least one message")
        if tools_each is not None:
            if tools is not None:
                raise ValueError("complete_many(): pass tools (shared) or tools_each (one per conversation), not both")
            if len(tools_each) != len(conversations):
                raise ValueError(f"complete_many(): tools_each has {len(tools_each)} entries for "
                                 f"{len(conversations)} conversations")
        per = tools_each if tools_each is not None else [tools] * len(conversations)
        new = max_tokens or self.max_new_tokens
        limit = self.max_context - new
        prompts = []
        for messages, conv_tools in zip(conversations, per, strict=True):
            ids = self.prompt_ids(messages, conv_tools)
            if len(ids) > limit:  # keep the head (system prompt) and the most recent tokens
                head = min(64, limit // 4)
                ids = ids[:head] + ids[len(ids) - (limit - head):]
                self.stats["truncated"] += 1
            prompts.append(ids)
        temp = self.temperature if temperature is None else temperature
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        width = max(len(p) for p in prompts)
        # left padding: every prompt ends at the same column, so generation appends in step for all rows
        x = torch.tensor([[pad] * (width - len(p)) + p for p in prompts])
        mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
        kw: dict[str, Any] = {"max_new_tokens": new, "pad_token_id": self.tokenizer.pad_token_id}
        if temp and temp > 0:
            torch.manual_seed(self.seed + self.stats["requests"])
            kw.update(do_sample=True, temperature=temp, top_p=self.top_p)
        else:
            kw.update(do_sample=False, temperature=None, top_p=None, top_k=None)
        with torch.no_grad():
            out = self.model.generate(x, attention_mask=mask, **kw)
        return [self._response(ids, out[i, width:].tolist(), per[i]) for i, ids in enumerate(prompts)]

    def _response(self, ids: list[int], gen: list[int], tools: list[ToolSpec] | None) -> ChatResponse:
        eos = self.tokenizer.eos_token_id
        finish = "stop" if eos in gen else "length"
        if eos in gen:
            gen = gen[:gen.index(eos)]
        text = self.tokenizer.decode(gen, skip_special_tokens=True).strip()
        self.stats["requests"] += 1
        self.stats["prompt_tokens"] += len(ids)
        self.stats["completion_tokens"] += len(gen)
        calls = parse_tool_calls(text, tools)
        if calls:
            n = self.stats["requests"]
            tcs = tuple(ToolCall(name, args, f"hf_{n}_{i}") for i, (name, args) in enumerate(calls))
            content = _TAGGED.sub("", text).strip() if _TAGGED.search(text) else ""
            msg = Message("assistant", content, tool_calls=tcs)
            finish = "tool_calls"
        else:
            msg = Message("assistant", text)
        return ChatResponse(message=msg, finish_reason=finish, prompt_tokens=len(ids), completion_tokens=len(gen))
