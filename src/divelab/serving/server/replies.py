"""Engine events to OpenAI replies: a whole JSON body, or server-sent-event chunks as tokens arrive
(logprobs in the shapes of the chat and the completions APIs; tool calls parsed from the text)."""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from fastapi import Request
from fastapi.responses import Response, StreamingResponse

from divelab.chat.hf_local import parse_tool_calls
from divelab.chat.types import ToolSpec
from divelab.serving.server.engine_loop import Job
from divelab.serving.server.openai_http import APIError
from divelab.serving.server.prepare import Prepared, events, submit
from divelab.serving.server.schemas import error_body
from divelab.serving.server.state import ServerState

log = logging.getLogger("divelab.serve")


@dataclass
class Choice:
    text: str = ""
    finish: str | None = None
    logprobs: list = field(default_factory=list)
    tokens: int = 0
    guard: dict | None = None  # the guard's verdict (``divelab.guard``)


# ---------------------------------------------------------------------------- logprobs in OpenAI shapes
def piece(s: ServerState, t: int) -> str:
    return s.tokenizer.decode([t], skip_special_tokens=False)


def chat_logprobs(s: ServerState, entries: list) -> dict:
    def one(t: int, lp: float) -> dict:
        text = piece(s, t)
        return {"token": text, "logprob": lp, "bytes": list(text.encode("utf-8", "replace"))}

    return {"content": [{**one(t, lp), "top_logprobs": [one(a, b) for a, b in top]} for t, lp, top in entries]}


def completion_logprobs(s: ServerState, entries: list, offset: int, prompt: list[int] | None = None,
                        prompt_entries: list | None = None) -> dict:
    tokens, lps, tops, offs = [], [], [], []
    if prompt is not None:  # echo: the first prompt token has no logprob
        rows = [(prompt[0], None, None)] + [(t, lp, top) for t, lp, top in (prompt_entries or [])]
    else:
        rows = []
    rows += [(t, lp, top) for t, lp, top in entries]
    for t, lp, top in rows:
        text = piece(s, t)
        tokens.append(text)
        lps.append(lp)
        tops.append(None if top is None else {piece(s, a): b for a, b in top})
        offs.append(offset)
        offset += len(text)
    return {"tokens": tokens, "token_logprobs": lps, "top_logprobs": tops, "text_offset": offs}


# ---------------------------------------------------------------------------- replies
async def collect(s: ServerState, request: Request, jobs: list[Job], queue: asyncio.Queue) -> list[Choice] | None:
    out = [Choice() for _ in jobs]
    async for i, ev in events(s, request, jobs, queue):
        if ev["type"] == "delta":
            out[i].text += ev["text"]
            out[i].logprobs += ev.get("logprobs", [])
        elif ev["type"] == "done":
            out[i].finish, out[i].tokens = ev["finish_reason"], ev["completion_tokens"]
        elif ev["type"] == "guard":
            out[i].guard = ev["guard"]
        else:
            raise APIError(500, ev["message"], "server_error")
    return None if any(c.finish is None for c in out) else out


def tool_message(text: str, tools: list[ToolSpec], parallel: bool) -> tuple[dict, bool]:
    calls = parse_tool_calls(text, tools) if tools else []
    if not calls:
        return {"role": "assistant", "content": text}, False
    calls = calls if parallel else calls[:1]
    return {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_" + uuid.uuid4().hex[:24], "type": "function",
         "function": {"name": name, "arguments": json.dumps(args)}} for name, args in calls]}, True


async def run(s: ServerState, request: Request, body, prep: Prepared, chat: bool):
    """Submit the prepared request and answer it: streamed as it decodes, or whole when done."""
    jobs, queue = submit(s, prep, body, chat)
    rid = ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex[:24]
    prompt_tokens = sum(len(p) for p in prep.prompts)
    include_usage = bool(body.stream_options and body.stream_options.include_usage)
    if body.stream and not prep.tools:
        return StreamingResponse(stream(s, request, jobs, queue, rid, chat, prep, body.n, prompt_tokens,
                                        include_usage), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache"})
    choices_in = await collect(s, request, jobs, queue)
    if choices_in is None:  # the client left; nobody reads this
        return Response(status_code=499)
    choices = []
    for c, ch in enumerate(choices_in):
        if chat:
            msg, called = tool_message(ch.text, prep.tools, body.parallel_tool_calls)
            choices.append({"index": c, "message": msg, "finish_reason": "tool_calls" if called else ch.finish,
                            "logprobs": chat_logprobs(s, ch.logprobs) if body.logprobs else None})
        else:
            pi = c // body.n
            text = (prep.echo[pi] if body.echo else "") + ch.text
            lp = None
            if body.logprobs is not None:
                job = jobs[c]
                lp = completion_logprobs(s, ch.logprobs, 0, job.prompt if body.echo else None, job.prompt_lp)
            choices.append({"index": c, "text": text, "logprobs": lp, "finish_reason": ch.finish})
        if ch.guard is not None:
            choices[-1]["divelab"] = {"guard": ch.guard}
    completion = sum(ch.tokens for ch in choices_in)
    usage = {"prompt_tokens": prompt_tokens, "completion_tokens": completion,
             "total_tokens": prompt_tokens + completion}
    fp = "divelab-dspark" if s.engine.speculative else "divelab-plain"
    if body.stream:  # tools with stream: the reply is parsed whole, then sent as chunks
        return StreamingResponse(replay(s, rid, choices, usage if include_usage else None, fp),
                                 media_type="text/event-stream", headers={"Cache-Control": "no-cache"})
    reply = {"id": rid, "object": "chat.completion" if chat else "text_completion", "created": int(time.time()),
             "model": s.model_name, "choices": choices, "usage": usage, "system_fingerprint": fp}
    if choices_in and choices_in[0].guard is not None:
        reply["divelab"] = {"guard": choices_in[0].guard}  # the first choice's verdict; every choice has its own
    return reply


def sse(d: dict) -> str:
    return f"data: {json.dumps(d)}\n\n"


async def replay(s: ServerState, rid: str, choices: list[dict], usage: dict | None, fp: str) -> AsyncIterator[str]:
    made = int(time.time())
    base = {"id": rid, "object": "chat.completion.chunk", "created": made, "model": s.model_name,
            "system_fingerprint": fp}
    for ch in choices:
        delta = {k: v for k, v in ch["message"].items() if v is not None}
        if "tool_calls" in delta:
            delta["tool_calls"] = [{"index": k, **tc} for k, tc in enumerate(delta["tool_calls"])]
        yield sse({**base, "choices": [{"index": ch["index"], "delta": delta, "logprobs": ch["logprobs"],
                                        "finish_reason": None}]})
        yield sse({**base, "choices": [{"index": ch["index"], "delta": {}, "logprobs": None,
                                        "finish_reason": ch["finish_reason"]}]})
    if usage is not None:
        yield sse({**base, "choices": [], "usage": usage})
    yield "data: [DONE]\n\n"


async def stream(s: ServerState, request: Request, jobs: list[Job], queue: asyncio.Queue, rid: str, chat: bool,
                 prep: Prepared, n: int, prompt_tokens: int, include_usage: bool) -> AsyncIterator[str]:
    obj = "chat.completion.chunk" if chat else "text_completion"
    made = int(time.time())
    offsets = [0] * len(jobs)

    def chunk(choices: list[dict], usage: dict | None = None, tokens: int | None = None,
              extra: dict | None = None) -> str:
        d: dict[str, Any] = {"id": rid, "object": obj, "created": made, "model": s.model_name, "choices": choices,
                             **(extra or {})}
        if include_usage:
            d["usage"] = usage
        if tokens is not None:
            d["x_divelab_tokens"] = tokens  # tokens carried by this chunk (for inter-token latency)
        return sse(d)

    def choice(i: int, text: str | None, finish: str | None, lps: list | None = None,
               first: bool = False) -> dict:
        if chat:
            delta: dict[str, Any] = {"role": "assistant", "content": ""} if first else {}
            if text:
                delta["content"] = text
            return {"index": i, "delta": delta, "logprobs": chat_logprobs(s, lps) if lps else None,
                    "finish_reason": finish}
        lp = None
        if lps:
            lp = completion_logprobs(s, lps, offsets[i])
            offsets[i] = lp["text_offset"][-1] + len(lp["tokens"][-1])
        return {"index": i, "text": text or "", "logprobs": lp, "finish_reason": finish}

    try:
        if chat:
            for i in range(len(jobs)):
                yield chunk([choice(i, None, None, first=True)])
        elif prep.echo:
            for i, job in enumerate(jobs):
                lp = None
                if job.params.logprobs is not None:
                    lp = completion_logprobs(s, [], 0, job.prompt, job.prompt_lp)
                    offsets[i] = len(prep.echo[i // n])
                yield chunk([{"index": i, "text": prep.echo[i // n], "logprobs": lp, "finish_reason": None}])
        completion = 0
        async for i, ev in events(s, request, jobs, queue):
            if ev["type"] == "delta" and (ev["text"] or ev.get("logprobs")):
                yield chunk([choice(i, ev["text"], None, ev.get("logprobs"))], tokens=ev["tokens"])
            elif ev["type"] == "guard":  # before the choice's first text
                yield chunk([choice(i, None, None)], extra={"divelab": {"guard": ev["guard"]}})
            elif ev["type"] == "done":
                completion += ev["completion_tokens"]
                yield chunk([choice(i, None, ev["finish_reason"])])
            elif ev["type"] == "error":
                yield sse(error_body(ev["message"], "server_error"))
        if include_usage:
            yield chunk([], {"prompt_tokens": prompt_tokens, "completion_tokens": completion,
                             "total_tokens": prompt_tokens + completion})
        yield "data: [DONE]\n\n"
    except Exception as exc:  # noqa: BLE001  (headers are sent: the error goes in the stream)
        log.exception("stream failed")
        s.engine.cancel(jobs)
        yield sse(error_body(f"internal server error: {type(exc).__name__}", "server_error"))
