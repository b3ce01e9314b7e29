"""divelab.chat: message types, the scripted model, and the HTTP client against a mocked server."""

from __future__ import annotations

import json

import httpx
import pytest

from divelab.chat import (
    ChatClientError,
    ChatHTTPError,
    ChatModel,
    Message,
    OpenAIChatClient,
    ScriptedChatModel,
    ToolCall,
    ToolSpec,
    repair_tool_pairs,
)


def _ok(content: str = "hi", tool_calls: list | None = None) -> dict:
    msg: dict = {"role": "assistant", "content": content}
    if tool_calls:
        msg["tool_calls"] = tool_calls
    return {"choices": [{"message": msg, "finish_reason": "stop"}], "usage": {"prompt_tokens": 7, "completion_tokens": 2}}


def _client(handler, **kw) -> tuple[OpenAIChatClient, list[float]]:
    sleeps: list[float] = []
    c = OpenAIChatClient(base_url="http://mock/v1", model="m", api_key="sk-test",
                         transport=httpx.MockTransport(handler), sleep=sleeps.append, **kw)
    return c, sleeps


def test_message_validation() -> None:
    with pytest.raises(ValueError, match="unknown message role"):
        Message("robot", "x")
    with pytest.raises(ValueError, match="only assistant"):
        Message("user", "x", tool_calls=(ToolCall("f"),))


def test_client_sends_openai_payload_and_parses_tool_calls() -> None:
    seen = {}

    def handler(req: httpx.Request) -> httpx.Response:
        seen["url"] = str(req.url)
        seen["auth"] = req.headers.get("authorization")
        seen["body"] = json.loads(req.content)
        return httpx.Response(200, json=_ok("", [{"id": "c1", "type": "function", "function": {
            "name": "send_email", "arguments": json.dumps({"to": "a@b.com"})}}]))

    c, _ = _client(handler)
    assert isinstance(c, ChatModel)
    r = c.complete([Message("user", "mail a@b.com")], [ToolSpec("send_email", "send")])
    assert seen["url"] == "http://mock/v1/chat/completions"
    assert seen["auth"] == "Bearer sk-test"
    assert seen["body"]["model"] == "m" and seen["body"]["tools"][0]["function"]["name"] == "send_email"
    assert r.message.tool_calls == (ToolCall("send_email", {"to": "a@b.com"}, "c1"),)
    assert r.prompt_tokens == 7


def test_client_retries_then_succeeds_with_backoff_and_retry_after() -> None:
    calls = {"n": 0}

    def handler(req: httpx.Request) -> httpx.Response:
        calls["n"] += 1
        if calls["n"] == 1:
            return httpx.Response(429, headers={"retry-after": "3"}, text="slow down")
        if calls["n"] == 2:
            return httpx.Response(503, text="overloaded")
        return httpx.Response(200, json=_ok("done"))

    c, sleeps = _client(handler, backoff_s=0.5)
    assert c.complete([Message("user", "x")]).message.content == "done"
    assert calls["n"] == 3
    assert sleeps == [3.0, 1.0]  # Retry-After honoured, then exponential backoff (0.5 * 2)


def test_client_gives_up_with_clear_error() -> None:
    c, sleeps = _client(lambda req: httpx.Response(500, text="boom"), max_retries=2)
    with pytest.raises(ChatHTTPError) as e:
        c.complete([Message("user", "x")])
    assert e.value.status == 500 and e.value.attempts == 3 and len(sleeps) == 2
    assert "HTTP 500" in str(e.value) and "http://mock/v1/chat/completions" in str(e.value) and "boom" in str(e.value)


def test_client_does_not_retry_client_errors() -> None:
    c, sleeps = _client(lambda req: httpx.Response(404, text="model not found"))
    with pytest.raises(ChatHTTPError, match="wrong base URL or model name"):
        c.complete([Message("user", "x")])
    assert sleeps == []


def test_client_connection_errors_are_retried_and_reported() -> None:
    def handler(req: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=req)

    c, sleeps = _client(handler, max_retries=1)
    with pytest.raises(ChatClientError, match="could not reach http://mock/v1/chat/completions after 2"):
        c.complete([Message("user", "x")])
    assert len(sleeps) == 1


def test_client_rejects_bad_config_and_bad_body() -> None:
    with pytest.raises(ValueError, match="base_url must start with http"):
        OpenAIChatClient(base_url="localhost:8000", model="m")
    c, _ = _client(lambda req: httpx.Response(200, json={"nope": 1}))
    with pytest.raises(ChatClientError, match="no choices"):
        c.complete([Message("user", "x")])


def test_loopback_server_roundtrip() -> None:
    """A real HTTP server on localhost (no mock transport)."""
    import threading
    from http.server import BaseHTTPRequestHandler, HTTPServer

    class H(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802
            body = json.loads(self.rfile.read(int(self.headers["content-length"])))
            out = json.dumps(_ok(f"echo {body['messages'][-1]['content']}")).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)

        def log_message(self, *a: object) -> None:
            pass

    srv = HTTPServer(("127.0.0.1", 0), H)
    th = threading.Thread(target=srv.serve_forever, daemon=True)
    th.start()
    try:
        with OpenAIChatClient(base_url=f"http://127.0.0.1:{srv.server_port}/v1", model="m") as c:
            assert c.complete([Message("user", "ping")]).message.content == "echo ping"
    finally:
        srv.shutdown()


def test_repair_tool_pairs_and_scripted_model() -> None:
    msgs = [Message("tool", "orphan result", tool_call_id="gone"),
            Message("assistant", "", tool_calls=(ToolCall("f", {"a": 1}, "c9"),))]
    fixed = repair_tool_pairs(msgs)
    assert fixed[0].role == "user" and "orphan result" in fixed[0].content
    assert fixed[1].tool_calls == () and "f(" in fixed[1].content
    m = ScriptedChatModel(["a", Message("assistant", "b")])
    assert m.complete([Message("user", "x")]).message.content == "a"
    assert m.complete([Message("user", "y")]).message.content == "b"
    with pytest.raises(RuntimeError, match="ran out"):
        m.complete([Message("user", "z")])
    assert len(m.calls) == 3
