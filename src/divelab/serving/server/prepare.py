"""Requests to engine jobs: bodies tokenised and checked against the served model, submitted as one
:class:`Job` per prompt and choice, and their events read back until every job is done."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field, replace

from fastapi import Request

from divelab.chat.hf_local import to_template_messages
from divelab.chat.types import ToolSpec
from divelab.serving.server.engine_loop import Job, QueueFull, SamplingParams
from divelab.serving.server.openai_http import APIError
from divelab.serving.server.schemas import ChatRequest, CompletionRequest
from divelab.serving.server.state import ServerState

DEFAULT_COMPLETION_TOKENS = 16  # the OpenAI default for /v1/completions
DEFAULT_CHAT_TOKENS = 256


def plain_chat_prompt(messages: list[dict[str, str]]) -> str:
    """The template for models without one: ``Role: text`` lines, then ``Assistant:``."""
    lines = [f"{m['role'].capitalize()}: {m['content']}" for m in messages]
    return "\n".join(lines) + "\nAssistant:"


@dataclass
class Prepared:
    """A request ready for the engine: token-id prompts (one per batched prompt) and what the reply needs."""

    prompts: list[list[int]]
    echo: list[str] = field(default_factory=list)  # completions with echo: each prompt's text
    tools: list[ToolSpec] = field(default_factory=list)  # chat: tools offered through the prompt


def check_model(s: ServerState, name: str) -> None:
    if name != s.model_name:
        raise APIError(404, f"model {name!r} is not served here; this server serves {s.model_name!r} "
                            "(see GET /v1/models)", "not_found_error", "model", "model_not_found")


def params_for(s: ServerState, body, prompt_len: int, default_max: int, chat: bool) -> SamplingParams:
    ctx_len, vocab = s.ctx_len, s.vocab
    if prompt_len >= ctx_len:
        raise APIError(400, f"the prompt is {prompt_len} tokens; the model's context is {ctx_len}",
                       param="messages" if chat else "prompt", code="context_length_exceeded")
    room = ctx_len - prompt_len
    mt = body.requested_max()
    if mt is None:
        mt = min(default_max, room)
    if mt > room:
        raise APIError(400, f"max_tokens {mt} + prompt {prompt_len} tokens exceeds the model's context of "
                            f"{ctx_len} tokens (at most {room} new tokens)", param="max_tokens",
                       code="context_length_exceeded")
    bad = [t for t, _ in body.bias_items() if t >= vocab]
    if bad:
        raise APIError(400, f"logit_bias token ids must be in [0, {vocab}), got {bad[:5]}", param="logit_bias")
    if chat:
        lp = (body.top_logprobs or 0) if body.logprobs else None
    else:
        lp = body.logprobs
    return SamplingParams(max_tokens=mt, temperature=body.temperature, top_p=body.top_p,
                          stop=tuple(body.stop_list()), seed=body.seed,
                          presence_penalty=body.presence_penalty, frequency_penalty=body.frequency_penalty,
                          logit_bias=body.bias_items(), logprobs=lp,
                          prompt_logprobs=bool(not chat and body.echo and lp is not None))


def encode_completion(s: ServerState, body: CompletionRequest) -> Prepared:
    tokenizer, vocab = s.tokenizer, s.vocab
    prompts, echo = [], []
    for k, prompt in enumerate(body.prompts()):
        where = "prompt" if len(body.prompts()) == 1 else f"prompt[{k}]"
        if isinstance(prompt, str):
            ids = tokenizer.encode(prompt)
        else:
            ids = list(prompt)
            bad = [t for t in ids if not 0 <= t < vocab]
            if bad:
                raise APIError(400, f"prompt token ids must be in [0, {vocab}), got {bad[:5]}", param=where)
        if not ids:
            raise APIError(400, "the prompt encodes to zero tokens: give some text", param=where)
        prompts.append(ids)
        if body.echo:
            echo.append(prompt if isinstance(prompt, str) else tokenizer.decode(ids, skip_special_tokens=True))
    return Prepared(prompts, echo)


def encode_chat(s: ServerState, body: ChatRequest) -> Prepared:
    tokenizer = s.tokenizer
    tools = body.offered_tools()
    try:
        msgs = [m.to_message() for m in body.messages]
    except (ValueError, TypeError) as exc:
        raise APIError(400, f"malformed messages: {exc}", param="messages") from None
    if tools or any(m.role == "tool" or m.tool_calls for m in msgs):  # tool traffic rendered as text
        dicts = to_template_messages(msgs, tools or None)
    else:
        dicts = [{"role": m.role, "content": m.content} for m in msgs]
    if s.has_template:
        try:
            text = tokenizer.apply_chat_template(dicts, add_generation_prompt=True, tokenize=False)
        except Exception as exc:  # noqa: BLE001  (templates raise jinja errors for orders they do not allow)
            raise APIError(400, f"the model's chat template rejected the messages: {exc}",
                           param="messages") from None
        ids = tokenizer.encode(text, add_special_tokens=False)
    else:
        ids = tokenizer.encode(plain_chat_prompt(dicts))
    if not ids:
        raise APIError(400, "the messages encode to zero tokens", param="messages")
    return Prepared([ids], tools=tools)


def submit(s: ServerState, prep: Prepared, body, chat: bool) -> tuple[list[Job], asyncio.Queue]:
    default = DEFAULT_CHAT_TOKENS if chat else DEFAULT_COMPLETION_TOKENS
    params = [params_for(s, body, len(p), default, chat) for p in prep.prompts]  # all checked before any queues
    if body.divelab_guard is not None and s.guard is None:
        raise APIError(400, "divelab_guard was given but this server has no guard; start it with "
                            "divelab serve --guard PROBE", param="divelab_guard")
    policy = (body.divelab_guard or s.guard.policy) if s.guard is not None else None
    aloop = asyncio.get_running_loop()
    queue: asyncio.Queue = asyncio.Queue()
    jobs = []
    for ids, par in zip(prep.prompts, params, strict=True):
        for i in range(body.n):
            p = par if par.seed is None else replace(par, seed=par.seed + i)
            c = len(jobs)
            jobs.append(Job(list(ids), p, sink=lambda ev, c=c: aloop.call_soon_threadsafe(queue.put_nowait,
                                                                                          (c, ev)), guard=policy))
    try:
        s.engine.submit(jobs)
    except QueueFull as exc:
        raise APIError(429, f"server overloaded: {exc}; retry later", "rate_limit_error",
                       code="rate_limit_exceeded", headers={"Retry-After": "1"}) from None
    return jobs, queue


async def events(s: ServerState, request: Request, jobs: list[Job],
                 queue: asyncio.Queue) -> AsyncIterator[tuple[int, dict]]:
    """Yield (choice index, event) until every job is done; cancel every choice if the client leaves
    or one choice fails (a failed choice ends the request: the others would decode for nobody)."""
    left = len(jobs)
    checked = time.monotonic()
    try:
        while left:
            if time.monotonic() - checked > 0.25:  # even while tokens flow
                checked = time.monotonic()
                if await request.is_disconnected():
                    return
            try:
                i, ev = await asyncio.wait_for(queue.get(), timeout=0.25)
            except TimeoutError:
                continue
            if ev["type"] == "done":
                left -= 1
            elif ev["type"] == "error":
                s.engine.cancel(jobs)
                yield i, ev
                return
            yield i, ev
    finally:
        if left:
            s.engine.cancel(jobs)
