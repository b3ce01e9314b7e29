"""The OpenAI-compatible endpoint in front of a Fugu router, exercised with the official openai client."""

from __future__ import annotations

import socket
import threading
import time

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
