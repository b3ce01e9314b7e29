"""The OpenAI-compatible FastAPI app: ``/v1/completions``, ``/v1/chat/completions``, ``/v1/models``,
``/health``, ``/metrics``. Every request becomes one :class:`Job` per prompt and choice on the shared
:class:`EngineLoop`; handlers only translate HTTP <-> jobs. Bodies are validated by the pydantic
models of :mod:`divelab.serving.server.schemas`; tokenisation runs in a worker thread so a huge
prompt never stalls the event loop."""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from divelab.chat.hf_local import parse_tool_calls, to_template_messages
from divelab.chat.types import ToolSpec
from divelab.serving.server.auth import require_api_key
from divelab.serving.server.engine_loop import EngineLoop, Job, QueueFull, SamplingParams
from divelab.serving.server.metrics import ServerMetrics
from divelab.serving.server.openai_http import APIError, RouteMetrics, guarded, install_errors, read_body
from divelab.serving.server.schemas import ChatRequest, CompletionRequest, error_body

log = logging.getLogger("divelab.serve")
DEFAULT_COMPLETION_TOKENS = 16  # the OpenAI default for /v1/completions
DEFAULT_CHAT_TOKENS = 256


def plain_chat_prompt(messages: list[dict[str, str]]) -> str:
    """The template for models without one: ``Role: text`` lines, then ``Assistant:``."""
    lines = [f"{m['role'].capitalize()}: {m['content']}" for m in messages]
    return "\n".join(lines) + "\nAssistant:"


def context_length(model) -> int:
    cfg = model.config
    for name in ("max_position_embeddings", "n_positions", "max_sequence_length"):
        if getattr(cfg, name, None):
            return int(getattr(cfg, name))
    return 2048


@dataclass
class Prepared:
    """A request ready for the engine: token-id prompts (one per batched prompt) and what the reply needs."""

    prompts: list[list[int]]
    echo: list[str] = field(default_factory=list)  # completions with echo: each prompt's text
    tools: list[ToolSpec] = field(default_factory=list)  # chat: tools offered through the prompt


@dataclass
class Choice:
    text: str = ""
    finish: str | None = None
    logprobs: list = field(default_factory=list)
    tokens: int = 0


def create_app(target, tokenizer, model_name: str, drafter=None, calibration=None, scheduler: str = "dspark",
               max_batch: int = 8, max_queue: int = 64, seed: int = 0, sps=None, gamma: int | None = None,
               max_context: int | None = None, api_key: str | None = None, public_metrics: bool = False) -> FastAPI:
    """Build the app; the engine loop starts with the app (lifespan) and stops with it. With ``api_key``
    every route but ``/health`` (and ``/metrics`` when ``public_metrics``) needs ``Authorization: Bearer``."""
    metrics = ServerMetrics()
    engine = EngineLoop(target, tokenizer, drafter, calibration, scheduler=scheduler, sps=sps, gamma=gamma,
                        max_batch=max_batch, max_queue=max_queue, seed=seed, metrics=metrics)
    ctx_len = max_context or context_length(target)
    vocab = int(target.config.vocab_size)
    has_template = bool(getattr(tokenizer, "chat_template", None))
    created = int(time.time())

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        engine.start()
        try:
            yield
        finally:
            engine.close()

    app = FastAPI(title="divelab serve", lifespan=lifespan)
    app.state.engine = engine
    app.state.metrics = metrics
    app.state.model_name = model_name
    install_errors(app, log)
    require_api_key(app, api_key, public_metrics=public_metrics, log=log)  # inside RouteMetrics: 401s counted
    app.add_middleware(RouteMetrics, counter=metrics.requests, routes=lambda: app.router.routes)
    guard = guarded(log)

    # ---------------------------------------------------------------------------- helpers
    def check_model(name: str) -> None:
        if name != model_name:
            raise APIError(404, f"model {name!r} is not served here; this server serves {model_name!r} "
                                "(see GET /v1/models)", "not_found_error", "model", "model_not_found")

    def params_for(body, prompt_len: int, default_max: int, chat: bool) -> SamplingParams:
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

    def encode_completion(body: CompletionRequest) -> Prepared:
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

    def encode_chat(body: ChatRequest) -> Prepared:
        tools = body.offered_tools()
        try:
            msgs = [m.to_message() for m in body.messages]
        except (ValueError, TypeError) as exc:
            raise APIError(400, f"malformed messages: {exc}", param="messages") from None
        if tools or any(m.role == "tool" or m.tool_calls for m in msgs):  # tool traffic rendered as text
            dicts = to_template_messages(msgs, tools or None)
        else:
            dicts = [{"role": m.role, "content": m.content} for m in msgs]
        if has_template:
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

    def submit(prep: Prepared, body, chat: bool) -> tuple[list[Job], asyncio.Queue]:
        default = DEFAULT_CHAT_TOKENS if chat else DEFAULT_COMPLETION_TOKENS
        params = [params_for(body, len(p), default, chat) for p in prep.prompts]  # all checked before any queues
        aloop = asyncio.get_running_loop()
        queue: asyncio.Queue = asyncio.Queue()
        jobs = []
        for ids, par in zip(prep.prompts, params, strict=True):
            for i in range(body.n):
                p = par if par.seed is None else replace(par, seed=par.seed + i)
                c = len(jobs)
                jobs.append(Job(list(ids), p, sink=lambda ev, c=c: aloop.call_soon_threadsafe(queue.put_nowait,
                                                                                              (c, ev))))
        try:
            engine.submit(jobs)
        except QueueFull as exc:
            raise APIError(429, f"server overloaded: {exc}; retry later", "rate_limit_error",
                           code="rate_limit_exceeded", headers={"Retry-After": "1"}) from None
        return jobs, queue

    async def events(request: Request, jobs: list[Job], queue: asyncio.Queue) -> AsyncIterator[tuple[int, dict]]:
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
                    engine.cancel(jobs)
                    yield i, ev
                    return
                yield i, ev
        finally:
            if left:
                engine.cancel(jobs)

    # ---------------------------------------------------------------------------- logprobs in OpenAI shapes
    def piece(t: int) -> str:
        return tokenizer.decode([t], skip_special_tokens=False)

    def chat_logprobs(entries: list) -> dict:
        def one(t: int, lp: float) -> dict:
            s = piece(t)
            return {"token": s, "logprob": lp, "bytes": list(s.encode("utf-8", "replace"))}

        return {"content": [{**one(t, lp), "top_logprobs": [one(a, b) for a, b in top]} for t, lp, top in entries]}

    def completion_logprobs(entries: list, offset: int, prompt: list[int] | None = None,
                            prompt_entries: list | None = None) -> dict:
        tokens, lps, tops, offs = [], [], [], []
        if prompt is not None:  # echo: the first prompt token has no logprob
            rows = [(prompt[0], None, None)] + [(t, lp, top) for t, lp, top in (prompt_entries or [])]
        else:
            rows = []
        rows += [(t, lp, top) for t, lp, top in entries]
        for t, lp, top in rows:
            s = piece(t)
            tokens.append(s)
            lps.append(lp)
            tops.append(None if top is None else {piece(a): b for a, b in top})
            offs.append(offset)
            offset += len(s)
        return {"tokens": tokens, "token_logprobs": lps, "top_logprobs": tops, "text_offset": offs}

    # ---------------------------------------------------------------------------- replies
    async def collect(request: Request, jobs: list[Job], queue: asyncio.Queue) -> list[Choice] | None:
        out = [Choice() for _ in jobs]
        async for i, ev in events(request, jobs, queue):
            if ev["type"] == "delta":
                out[i].text += ev["text"]
                out[i].logprobs += ev.get("logprobs", [])
            elif ev["type"] == "done":
                out[i].finish, out[i].tokens = ev["finish_reason"], ev["completion_tokens"]
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

    async def run(request: Request, body, prep: Prepared, chat: bool):
        jobs, queue = submit(prep, body, chat)
        rid = ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex[:24]
        prompt_tokens = sum(len(p) for p in prep.prompts)
        include_usage = bool(body.stream_options and body.stream_options.include_usage)
        if body.stream and not prep.tools:
            return StreamingResponse(stream(request, jobs, queue, rid, chat, prep, body.n, prompt_tokens,
                                            include_usage), media_type="text/event-stream",
                                     headers={"Cache-Control": "no-cache"})
        choices_in = await collect(request, jobs, queue)
        if choices_in is None:  # the client left; nobody reads this
            return Response(status_code=499)
        choices = []
        for c, ch in enumerate(choices_in):
            if chat:
                msg, called = tool_message(ch.text, prep.tools, body.parallel_tool_calls)
                choices.append({"index": c, "message": msg, "finish_reason": "tool_calls" if called else ch.finish,
                                "logprobs": chat_logprobs(ch.logprobs) if body.logprobs else None})
            else:
                pi = c // body.n
                text = (prep.echo[pi] if body.echo else "") + ch.text
                lp = None
                if body.logprobs is not None:
                    job = jobs[c]
                    lp = completion_logprobs(ch.logprobs, 0, job.prompt if body.echo else None, job.prompt_lp)
                choices.append({"index": c, "text": text, "logprobs": lp, "finish_reason": ch.finish})
        completion = sum(ch.tokens for ch in choices_in)
        usage = {"prompt_tokens": prompt_tokens, "completion_tokens": completion,
                 "total_tokens": prompt_tokens + completion}
        fp = "divelab-dspark" if engine.speculative else "divelab-plain"
        if body.stream:  # tools with stream: the reply is parsed whole, then sent as chunks
            return StreamingResponse(replay(rid, choices, usage if include_usage else None, fp),
                                     media_type="text/event-stream", headers={"Cache-Control": "no-cache"})
        return {"id": rid, "object": "chat.completion" if chat else "text_completion", "created": int(time.time()),
                "model": model_name, "choices": choices, "usage": usage, "system_fingerprint": fp}

    def sse(d: dict) -> str:
        return f"data: {json.dumps(d)}\n\n"

    async def replay(rid: str, choices: list[dict], usage: dict | None, fp: str) -> AsyncIterator[str]:
        made = int(time.time())
        base = {"id": rid, "object": "chat.completion.chunk", "created": made, "model": model_name,
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

    async def stream(request: Request, jobs: list[Job], queue: asyncio.Queue, rid: str, chat: bool, prep: Prepared,
                     n: int, prompt_tokens: int, include_usage: bool) -> AsyncIterator[str]:
        obj = "chat.completion.chunk" if chat else "text_completion"
        made = int(time.time())
        offsets = [0] * len(jobs)

        def chunk(choices: list[dict], usage: dict | None = None, tokens: int | None = None) -> str:
            d: dict[str, Any] = {"id": rid, "object": obj, "created": made, "model": model_name, "choices": choices}
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
                return {"index": i, "delta": delta, "logprobs": chat_logprobs(lps) if lps else None,
                        "finish_reason": finish}
            lp = None
            if lps:
                lp = completion_logprobs(lps, offsets[i])
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
                        lp = completion_logprobs([], 0, job.prompt, job.prompt_lp)
                        offsets[i] = len(prep.echo[i // n])
                    yield chunk([{"index": i, "text": prep.echo[i // n], "logprobs": lp, "finish_reason": None}])
            completion = 0
            async for i, ev in events(request, jobs, queue):
                if ev["type"] == "delta" and (ev["text"] or ev.get("logprobs")):
                    yield chunk([choice(i, ev["text"], None, ev.get("logprobs"))], tokens=ev["tokens"])
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
            engine.cancel(jobs)
            yield sse(error_body(f"internal server error: {type(exc).__name__}", "server_error"))

    # ---------------------------------------------------------------------------- routes
    @app.post("/v1/completions")
    @guard
    async def completions(request: Request):
        body = await read_body(request, CompletionRequest)
        check_model(body.model)
        prep = await asyncio.to_thread(encode_completion, body)  # a huge prompt must not stall the event loop
        return await run(request, body, prep, chat=False)

    @app.post("/v1/chat/completions")
    @guard
    async def chat_completions(request: Request):
        body = await read_body(request, ChatRequest)
        check_model(body.model)
        prep = await asyncio.to_thread(encode_chat, body)
        return await run(request, body, prep, chat=True)

    @app.get("/v1/models")
    async def models():
        return {"object": "list", "data": [{"id": model_name, "object": "model", "created": created,
                                            "owned_by": "divelab", "max_model_len": ctx_len,
                                            "speculative": engine.speculative}]}

    @app.get("/health")
    async def health():
        alive = engine.alive
        body = {"status": "ok" if alive else "engine loop stopped", "model": model_name,
                "speculative": engine.speculative, **engine.load}
        return JSONResponse(body, status_code=200 if alive else 503)

    @app.get("/metrics")
    async def metrics_route():
        return Response(metrics.render(), media_type=metrics.content_type)

    return app
