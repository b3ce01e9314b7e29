"""A client for any OpenAI-compatible ``/chat/completions`` endpoint (``divelab serve``, vLLM,
llama.cpp server, Ollama, OpenAI, ...) built on the official ``openai`` SDK: its request building,
typed responses (incl. tool calls) and streaming, with divelab's retry policy on top (rate limits
and server errors retried with exponential backoff, ``Retry-After`` honoured) and errors that say
what went wrong."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import httpx

from divelab.chat.types import ChatResponse, Message, ToolCall, ToolSpec, repair_tool_pairs

# Statuses worth retrying: rate limits, timeouts and server-side failures. Anything else (400
# bad request, 401 key, 404 wrong model/URL) will fail the same way again, so it fails at once.
RETRY_STATUSES = frozenset({408, 409, 425, 429, 500, 502, 503, 504})
API_KEY_ENV_VARS = ("DIVELAB_API_KEY", "OPENAI_API_KEY")
NO_KEY = "no-key"  # the SDK needs some key; local servers ignore it


def env_api_key() -> str | None:
    """The first of ``API_KEY_ENV_VARS`` that is set and not empty, else None."""
    return next((os.environ[v] for v in API_KEY_ENV_VARS if os.environ.get(v)), None)


class ChatClientError(RuntimeError):
    """The endpoint could not be used; the message names the URL and the reason."""


class ChatHTTPError(ChatClientError):
    def __init__(self, status: int, url: str, body: str, attempts: int) -> None:
        self.status = status
        self.url = url
        self.body = body
        self.attempts = attempts
        hint = {
            401: "the API key was refused (set DIVELAB_API_KEY or OPENAI_API_KEY)",
            403: "the API key may not use this model",
            404: "wrong base URL or model name (base URL usually ends in /v1)",
            429: "rate limited",
        }.get(status, "server error" if status >= 500 else "request rejected")
        snippet = body.strip().replace("\n", " ")[:300]
        super().__init__(
            f"HTTP {status} from {url} after {attempts} attempt(s): {hint}. Response body: {snippet or '(empty)'}"
        )


@dataclass
class OpenAIChatClient:
    """``ChatModel`` over HTTP (the ``openai`` SDK underneath; ``.sdk`` is the ``openai.OpenAI``).

    >>> client = OpenAIChatClient(base_url="http://localhost:8000/v1", model="qwen2.5-7b-instruct")
    >>> reply = client.complete([Message("user", "hi")])  # doctest: +SKIP
    >>> for piece in client.stream([Message("user", "hi")]): print(piece, end="")  # doctest: +SKIP

    The key comes from ``api_key`` or the environment (``DIVELAB_API_KEY``, then
    ``OPENAI_API_KEY``); local servers usually need none.
    """

    base_url: str
    model: str
    api_key: str | None = None
    timeout_s: float = 120.0
    max_retries: int = 4
    backoff_s: float = 1.0  # first retry waits this long, then doubles, capped at max_backoff_s
    max_backoff_s: float = 30.0
    default_temperature: float | None = 0.0
    transport: httpx.BaseTransport | None = None  # tests pass httpx.MockTransport here
    sleep: Callable[[float], None] = time.sleep

    def __post_init__(self) -> None:
        if not self.base_url or not self.base_url.startswith(("http://", "https://")):
            raise ValueError(f"base_url must start with http:// or https://, got {self.base_url!r}")
        if not self.model:
            raise ValueError("model must be a non-empty model name as the server knows it")
        if self.max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {self.max_retries}")
        if self.api_key is None:
            self.api_key = env_api_key()
        self.url = self.base_url.rstrip("/") + "/chat/completions"
        openai = _sdk()
        self._http = httpx.Client(timeout=self.timeout_s, transport=self.transport)
        # retries are ours (deterministic, injectable sleep, Retry-After honoured exactly): SDK retries off
        self.sdk = openai.OpenAI(base_url=self.base_url.rstrip("/"), api_key=self.api_key or NO_KEY,
                                 max_retries=0, timeout=self.timeout_s, http_client=self._http)

    def close(self) -> None:
        self.sdk.close()
        self._http.close()

    def __enter__(self) -> OpenAIChatClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _payload(self, messages: list[Message], tools: list[ToolSpec] | None, temperature: float | None,
                 max_tokens: int | None, extra: dict[str, Any]) -> dict[str, Any]:
        if not messages:
            raise ValueError("messages must not be empty")
        payload: dict[str, Any] = {
            "model": self.model,
            "messages": [m.to_openai() for m in repair_tool_pairs(list(messages))],
        }
        temp = self.default_temperature if temperature is None else temperature
        if temp is not None:
            payload["temperature"] = temp
        if max_tokens is not None:
            payload["max_tokens"] = max_tokens
        if tools:
            payload["tools"] = [t.to_openai() for t in tools]
        payload.update(extra)
        return payload

    def complete(
        self,
        messages: list[Message],
        tools: list[ToolSpec] | None = None,
        *,
        temperature: float | None = None,
        max_tokens: int | None = None,
        **extra: Any,
    ) -> ChatResponse:
        """One chat completion. ``extra`` goes into the request as-is (``seed``, ``stop``, ``top_p``, ...)."""
        payload = self._payload(messages, tools, temperature, max_tokens, extra)
        raw = self._call(lambda: self.sdk.chat.completions.with_raw_response.create(**payload))
        try:
            data = raw.http_response.json()
        except json.JSONDecodeError as exc:
            raise ChatClientError(f"{self.url} returned HTTP 200 but not JSON: {raw.http_response.text[:200]!r}"
                                  ) from exc
        return parse_chat_completion(data, self.url, typed=raw.parse())

    def stream(
        self,
        messages: list[Message],
        *,
        temperature: float | None = None,
        max_tokens: int | None = None,
        **extra: Any,
    ) -> Iterator[str]:
        """Stream the reply's text pieces as they arrive (SSE). Retries only before the first byte."""
        payload = self._payload(messages, None, temperature, max_tokens, extra)
        chunks = self._call(lambda: self.sdk.chat.completions.create(stream=True, **payload))
        with chunks:
            for chunk in chunks:
                for choice in chunk.choices or []:
                    if choice.delta is not None and choice.delta.content:
                        yield choice.delta.content

    def _call(self, fn: Callable[[], Any]) -> Any:
        openai = _sdk()
        attempts = 0
        while True:
            attempts += 1
            try:
                return fn()
            except openai.APIStatusError as exc:
                r = exc.response
                if r.status_code in RETRY_STATUSES and attempts <= self.max_retries:
                    self.sleep(self._delay(attempts, r.headers.get("retry-after")))
                    continue
                raise ChatHTTPError(r.status_code, self.url, r.text, attempts) from None
            except openai.APIConnectionError as exc:  # includes timeouts
                if attempts > self.max_retries:
                    cause = exc.__cause__ or exc
                    raise ChatClientError(
                        f"could not reach {self.url} after {attempts} attempt(s): {type(cause).__name__}: {cause}"
                    ) from exc
                self.sleep(self._delay(attempts, None))

    def _delay(self, attempt: int, retry_after: str | None) -> float:
        if retry_after:
            try:  # the server knows best when it will take requests again
                return min(float(retry_after), self.max_backoff_s)
            except ValueError:
                pass
        return min(self.backoff_s * 2 ** (attempt - 1), self.max_backoff_s)


def _sdk():
    """The ``openai`` SDK, imported on first use so ``divelab.chat`` imports without it."""
    try:
        import openai
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("OpenAIChatClient needs the openai SDK: pip install 'openai>=1.30'") from exc
    return openai


def parse_chat_completion(data: dict[str, Any], url: str = "the endpoint", typed: Any = None) -> ChatResponse:
    """Turn a chat-completions JSON body into a ``ChatResponse`` (tool-call arguments parsed).
    ``typed`` is the SDK's ``ChatCompletion`` for the same body, used for the tool calls when given."""
    try:
        choice = data["choices"][0]
        msg = choice["message"]
    except (KeyError, IndexError, TypeError):
        raise ChatClientError(f"{url} returned no choices[0].message: {json.dumps(data)[:300]}") from None
    raw_calls = msg.get("tool_calls") or []
    try:  # the SDK's typed tool calls (ChatCompletionMessageFunctionToolCall) where the body parses
        sdk_calls = typed.choices[0].message.tool_calls if typed is not None else None
        raw_calls = [{"id": tc.id, "function": {"name": tc.function.name, "arguments": tc.function.arguments}}
                     for tc in sdk_calls] if sdk_calls else raw_calls
    except (AttributeError, IndexError, TypeError):
        pass
    calls: list[ToolCall] = []
    for i, tc in enumerate(raw_calls):
        fn = tc.get("function", {}) or {}
        raw_args = fn.get("arguments") or "{}"
        try:
            args = json.loads(raw_args) if isinstance(raw_args, str) else dict(raw_args)
        except json.JSONDecodeError:
            # Keep malformed arguments visible to the grader rather than dropping the call.
            args = {"_unparsed": raw_args}
        if not isinstance(args, dict):
            args = {"_value": args}
        calls.append(ToolCall(name=fn.get("name", ""), arguments=args, id=tc.get("id") or f"call_{i}"))
    usage = data.get("usage") or {}
    return ChatResponse(
        message=Message("assistant", msg.get("content") or "", tool_calls=tuple(calls)),
        finish_reason=choice.get("finish_reason") or "stop",
        prompt_tokens=usage.get("prompt_tokens"),
        completion_tokens=usage.get("completion_tokens"),
        raw=data,
    )
