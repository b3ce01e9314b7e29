"""The OpenAI-compatible endpoint in front of a Fugu router, exercised with the official openai client."""

from __future__ import annotations

import json
import socket
import threading
import time

import httpx
import pytest

pytest.importorskip("fastapi")
uvicorn = pytest.importorskip("uvicorn")
openai = pytest.importorskip("openai")


@pytest.fixture(scope="module")
def server():
    from divelab.orchestration.fugu.serve import create_app, demo_router

    app = create_app(demo_router(seed=0, n_tasks=200), "fugu")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    srv = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error"))
    th = threading.Thread(target=srv.run, daemon=True)
    th.start()
    for _ in range(100):
        if srv.started:
            break
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}/v1"
    srv.should_exit = True
    th.join(5)


def test_openai_client_gets_a_routed_answer(server):
    client = openai.OpenAI(base_url=server, api_key="none", max_retries=0)
    r = client.chat.completions.create(model="fugu", messages=[{"role": "user", "content": "Reverse the word 'sakana'."}])
    assert r.choices[0].message.content.startswith("ANSWER:")
    assert r.usage.total_tokens > 0
    assert r.model_extra["fugu"]["worker"] in {"arith-s", "lexi-s", "sorter-s", "general-l", "tiny-xs"}
    assert [m.id for m in client.models.list().data] == ["fugu"]


def test_bad_requests_get_openai_errors_not_500(server):
    client = openai.OpenAI(base_url=server, api_key="none", max_retries=0)
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model="fugu", messages=[])
    assert "messages" in str(e.value)
    with pytest.raises(openai.BadRequestError, match="role"):
        client.chat.completions.create(model="fugu", messages=[{"role": "wizard", "content": "hi"}])
    with pytest.raises(openai.NotFoundError, match="does not exist"):
        client.chat.completions.create(model="gpt-9", messages=[{"role": "user", "content": "hi"}])
    import httpx

    r = httpx.post(f"{server}/chat/completions", content=b"{nope", headers={"content-type": "application/json"})
    assert r.status_code == 400 and r.json()["error"]["type"] == "invalid_request_error"


def _post(url: str, body) -> httpx.Response:
    """JSON as Python writes it (ASCII escapes), so lone surrogates reach the server."""
    return httpx.post(url, content=json.dumps(body).encode(), headers={"content-type": "application/json"})


@pytest.mark.parametrize("body, param", [
    ({"temperature": "hot"}, "temperature"),
    ({"temperature": -1}, "temperature"),
    ({"max_tokens": -5}, "max_tokens"),
    ({"messages": "x"}, "messages"),
    ({"messages": [{"role": "user", "content": "a\ud800"}]}, None),
    ({"stream": True}, "stream"),
    ({"n": 2}, "n"),
    ({"logprobs": True}, "logprobs"),
    ({"tool_choice": "required", "tools": [{"type": "function", "function": {"name": "f"}}]}, "tool_choice"),
])
def test_bad_types_ranges_and_unsupported_fields_are_400(server, body, param):
    full = {"model": "fugu", "messages": [{"role": "user", "content": "Reverse 'abc'."}], **body}
    r = _post(f"{server}/chat/completions", full)
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert set(err) == {"message", "type", "param", "code"} and err["type"] == "invalid_request_error"
    if param:
        assert err["param"].startswith(param) and param in err["message"]


def test_deep_json_is_400_and_connection_survives(server):
    with httpx.Client() as c:
        deep = '{"model": "fugu", "messages": ' + "[" * 5000 + "]" * 5000 + "}"
        r = c.post(f"{server}/chat/completions", content=deep.encode(), headers={"content-type": "application/json"})
        assert r.status_code == 400 and r.headers["content-type"].startswith("application/json")
        ok = c.post(f"{server}/chat/completions", json={"model": "fugu",
                                                         "messages": [{"role": "user", "content": "Sort 3 1 2."}]})
        assert ok.status_code == 200


def test_health_and_bounded_metrics(server):
    base = server.replace("/v1", "")
    assert httpx.get(f"{base}/health").json()["status"] == "ok"
    for i in range(30):
        httpx.get(f"{base}/nope/{i}")
    text = httpx.get(f"{base}/metrics").text
    assert 'divelab_requests_total{endpoint="unmatched",status="404"}' in text and "/nope/" not in text


def test_property_no_request_body_gets_a_5xx(server):
    from hypothesis import given, settings
    from hypothesis import strategies as st

    junk = st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(), st.text(max_size=6),
                     st.lists(st.integers(), max_size=2), st.dictionaries(st.text(max_size=3), st.integers(), max_size=2))
    message = st.fixed_dictionaries({}, optional={"role": st.one_of(st.sampled_from(["user", "system", "tool"]), junk),
                                                  "content": st.one_of(st.text(max_size=20), junk)})
    body = st.fixed_dictionaries({}, optional={
        "model": st.one_of(st.just("fugu"), junk), "messages": st.one_of(st.lists(message, max_size=3), junk),
        "temperature": st.one_of(st.floats(-1, 3), junk), "max_tokens": st.one_of(st.integers(-3, 50), junk),
        "stream": junk, "n": junk, "tools": junk, "tool_choice": junk})

    @settings(max_examples=60, deadline=None)
    @given(body)
    def check(b):
        r = httpx.post(f"{server}/chat/completions", content=json.dumps(b).encode(),
                       headers={"content-type": "application/json"}, timeout=30)
        assert r.status_code < 500, r.text[:300]
        if r.status_code >= 400:
            assert set(r.json()["error"]) == {"message", "type", "param", "code"}

    check()
    assert httpx.get(server.replace("/v1", "/health")).json()["status"] == "ok"
