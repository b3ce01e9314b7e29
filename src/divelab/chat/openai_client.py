"""A small client for any OpenAI-compatible ``/chat/completions`` endpoint (vLLM, llama.cpp
server, Ollama, OpenAI, ...), over httpx, with retries and errors that say what went wrong."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx

from divelab.chat.types import ChatResponse, Message, ToolCall, ToolSpec, repair_tool_pairs

# Statuses worth retrying: rate limits, timeouts and server-side failures. Anything else (400
# bad request, 401 key, 404 wrong model/URL) will fail the same way again, so it fails at once.
RETRY_STATUSES = frozenset({408, 409, 425, 429, 500, 502, 503, 504})
API_KEY_ENV_VARS = ("DIVELAB_API_KEY", "OPENAI_API_KEY")


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
    """``ChatModel`` over HTTP.

    >>> client = OpenAIChatClient(base_url="http://localhost:8000/v1", model="qwen2.5-7b-instruct")
    >>> reply = client.complete([Message("user", "hi")])  # doctest: +SKIP

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
            self.api_key = next((os.environ[v] for v in API_KEY_ENV_VARS if os.environ.get(v)), None)
        self.url = self.base_url.rstrip("/") + "/chat/completions"
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        self._http = httpx.Client(timeout=self.timeout_s, headers=headers, transport=self.transport)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> OpenAIChatClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def complete(
        self,
        messages: list[Message],
        tools: list[ToolSpec] | None = None,
        *,
        temperature: float | None = None,
        max_tokens: int | None = None,
    ) -> ChatResponse:
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
        data = self._post(payload)
        return parse_chat_completion(data, self.url)

    def _post(self, payload: dict[str, Any]) -> dict[str, Any]:
        attempts = 0
        while True:
            attempts += 1
            try:
                r = self._http.post(self.url, json=payload)
            except (httpx.TimeoutException, httpx.TransportError) as exc:
                if attempts > self.max_retries:
                    raise ChatClientError(
                        f"could not reach {self.url} after {attempts} attempt(s): {type(exc).__name__}: {exc}"
                    ) from exc
                self.sleep(self._delay(attempts, None))
                continue
            if r.status_code == 200:
                try:
                    return r.json()
                except json.JSONDecodeError as exc:
                    raise ChatClientError(f"{self.url} returned HTTP 200 but not JSON: {r.text[:200]!r}") from exc
            if r.status_code in RETRY_STATUSES and attempts <= self.max_retries:
                self.sleep(self._delay(attempts, r.headers.get("retry-after")))
                continue
            raise ChatHTTPError(r.status_code, self.url, r.text, attempts)

    def _delay(self, attempt: int, retry_after: str | None) -> float:
        if retry_after:
            try:  # the server knows best when it will take requests again
                return min(float(retry_after), self.max_backoff_s)
            except ValueError:
                pass
        return min(self.backoff_s * 2 ** (attempt - 1), self.max_backoff_s)


def parse_chat_completion(data: dict[str, Any], url: str = "the endpoint") -> ChatResponse:
    """Turn a chat-completions JSON body into a ``ChatResponse`` (tool-call arguments parsed)."""
    try:
        choice = data["choices"][0]
        msg = choice["message"]
    except (KeyError, IndexError, TypeError):
        raise ChatClientError(f"{url} returned no choices[0].message: {json.dumps(data)[:300]}") from None
    calls: list[ToolCall] = []
    for i, tc in enumerate(msg.get("tool_calls") or []):
        fn = tc.get("function", {})
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
