"""`divelab serve` (the `model`, `server` and `sdk` fixtures are in conftest.py): the OpenAI-compatible server on loopback with a tiny zoo model and a tiny
(untrained, so often rejected) DSpark drafter: endpoints through the `openai` SDK and divelab's
client, losslessness through HTTP, seeded sampling, errors, disconnect, 429, /metrics."""

from __future__ import annotations

import json
import threading
import time

import httpx
import openai
import pytest
import torch
from prometheus_client.parser import text_string_to_metric_families

from divelab.chat import Message, OpenAIChatClient
from divelab.serving.dspark import Drafter, DrafterConfig, plain_greedy, save_drafter
from divelab.serving.server import BackgroundServer, build_app, create_app, top_p_filter

PROMPTS = ["def add(a, b):", "import os\n", "class Stack:\n    def", "for i in range(10):"]


def test_greedy_through_http_is_token_identical_to_plain_greedy(model, sdk):
    target, tok = model
    refs = [plain_greedy(target, tok.encode(p), 24, tok.eos_token_id) for p in PROMPTS]
    got: dict[int, object] = {}

    def ask(i: int) -> None:  # concurrent clients: they share the engine loop's batch
        got[i] = sdk.completions.create(model="smoke", prompt=PROMPTS[i], max_tokens=24, temperature=0)

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(len(PROMPTS))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i, ref in enumerate(refs):
        r = got[i]
        assert r.choices[0].text == tok.decode(ref, skip_special_tokens=True), i
        assert r.usage.completion_tokens == len(ref) and r.usage.prompt_tokens == len(tok.encode(PROMPTS[i]))
    # token-id prompts and a streamed chat reply agree with the same reference
    ids = tok.encode(PROMPTS[0])
    assert sdk.completions.create(model="smoke", prompt=ids, max_tokens=24, temperature=0).choices[0].text == \
        tok.decode(refs[0], skip_special_tokens=True)
    # top_p tiny keeps only the argmax: sampling collapses to greedy (checks the per-row logits hook)
    r = sdk.completions.create(model="smoke", prompt=PROMPTS[1], max_tokens=24, temperature=1.0, top_p=1e-9)
    assert r.choices[0].text == tok.decode(refs[1], skip_special_tokens=True)


def test_streaming_chat_and_completions(model, sdk):
    target, tok = model
    pieces, finish = [], None
    stream = sdk.chat.completions.create(model="smoke", messages=[{"role": "user", "content": "hello"}],
                                         max_tokens=12, temperature=0, stream=True,
                                         stream_options={"include_usage": True})
    usage = None
    for ch in stream:
        if ch.usage:
            usage = ch.usage
        for c in ch.choices:
            pieces.append(c.delta.content or "")
            finish = c.finish_reason or finish
    whole = sdk.chat.completions.create(model="smoke", messages=[{"role": "user", "content": "hello"}],
                                        max_tokens=12, temperature=0)
    assert "".join(pieces) == whole.choices[0].message.content and finish == whole.choices[0].finish_reason
    assert usage is not None and usage.completion_tokens == whole.usage.completion_tokens
    # the plain template (the smoke tokenizer has none) is what the server fed the model
    prompt = tok.encode("User: hello\nAssistant:")
    ref = plain_greedy(target, prompt, 12, tok.eos_token_id)
    assert whole.choices[0].message.content == tok.decode(ref, skip_special_tokens=True)
    text = "".join(c.choices[0].text for c in sdk.completions.create(
        model="smoke", prompt=PROMPTS[2], max_tokens=10, temperature=0, stream=True) if c.choices)
    assert text == sdk.completions.create(model="smoke", prompt=PROMPTS[2], max_tokens=10,
                                          temperature=0).choices[0].text


def test_seeded_sampling_reproducible_n_and_stop(model, sdk):
    target, tok = model

    def sample(seed: int, n: int = 1):
        return sdk.completions.create(model="smoke", prompt=PROMPTS[0], max_tokens=20, temperature=1.0,
                                      seed=seed, n=n)

    a, b = sample(7, n=2), sample(7, n=2)
    assert [c.text for c in a.choices] == [c.text for c in b.choices]
    assert len(a.choices) == 2 and a.choices[0].text != a.choices[1].text  # choice i uses seed + i
    assert 2 <= a.usage.completion_tokens <= 40  # usage sums both choices (each <= max_tokens)
    busy = threading.Thread(target=sdk.completions.create, kwargs=dict(  # other traffic shares the loop
        model="smoke", prompt=PROMPTS[3], max_tokens=60, temperature=0.9))
    busy.start()
    c = sample(7, n=2)
    busy.join()
    assert [x.text for x in c.choices] == [x.text for x in a.choices]
    others = {sample(s).choices[0].text for s in (1, 2, 3)}
    assert len(others | {a.choices[0].text}) >= 2  # different seeds give different samples
    # stop strings: cut before the stop, finish_reason "stop"
    ref = tok.decode(plain_greedy(target, tok.encode(PROMPTS[0]), 24, tok.eos_token_id), skip_special_tokens=True)
    stop = ref[8:11]
    r = sdk.completions.create(model="smoke", prompt=PROMPTS[0], max_tokens=24, temperature=0, stop=[stop])
    assert r.choices[0].text == ref[: ref.find(stop)] and r.choices[0].finish_reason == "stop"
    r = sdk.completions.create(model="smoke", prompt=PROMPTS[0], max_tokens=3, temperature=0)
    assert r.choices[0].finish_reason == "length" and r.usage.completion_tokens == 3


def test_models_health_and_divelab_client(server):
    client = openai.OpenAI(base_url=server.base_url, api_key="-", max_retries=0)
    assert [m.id for m in client.models.list().data] == ["smoke"]
    h = httpx.get(server.base_url.replace("/v1", "/health")).json()
    assert h["status"] == "ok" and h["speculative"] is True
    with OpenAIChatClient(base_url=server.base_url, model="smoke") as c:
        r = c.complete([Message("system", "be brief"), Message("user", "hi")], max_tokens=6)
        assert r.completion_tokens and r.completion_tokens <= 6 and isinstance(r.message.content, str)
        streamed = "".join(c.stream([Message("system", "be brief"), Message("user", "hi")], max_tokens=6))
        assert streamed == r.message.content  # default temperature 0 in divelab's client


@pytest.mark.parametrize("body, status, needle", [
    ({"model": "gpt-9", "prompt": "x", "max_tokens": 2}, 404, "not served here"),
    ({"model": "smoke", "prompt": "x", "max_tokens": 0}, 400, "max_tokens"),
    ({"model": "smoke", "prompt": "x", "max_tokens": 100_000}, 400, "context"),
    ({"model": "smoke", "prompt": [1, 99999], "max_tokens": 2}, 400, "token ids"),
    ({"model": "smoke", "prompt": "x", "temperature": -1}, 400, "temperature"),
])
def test_bad_completion_requests_get_openai_errors(server, body, status, needle):
    r = httpx.post(server.base_url + "/completions", json=body)
    assert r.status_code == status
    assert needle in r.json()["error"]["message"] and "Traceback" not in r.text


@pytest.mark.parametrize("body", [
    {"model": "smoke", "messages": []},
    {"model": "smoke", "messages": [{"role": "robot", "content": "x"}]},
    {"model": "smoke", "messages": [{"content": "no role"}]},
    {"model": "smoke", "messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]},
    {"model": "smoke", "messages": "hello"},
])
def test_malformed_messages_are_400(server, body):
    r = httpx.post(server.base_url + "/chat/completions", json=body)
    assert r.status_code == 400 and r.json()["error"]["type"] == "invalid_request_error"
    bad_json = httpx.post(server.base_url + "/chat/completions", content=b"{not json",
                          headers={"content-type": "application/json"})
    assert bad_json.status_code == 400 and "error" in bad_json.json()


def test_sdk_raises_typed_errors(sdk):
    with pytest.raises(openai.NotFoundError):
        sdk.completions.create(model="nope", prompt="x", max_tokens=2)
    with pytest.raises(openai.BadRequestError):
        sdk.chat.completions.create(model="smoke", messages=[{"role": "user", "content": "x"}], max_tokens=10**6)


def test_drafter_for_another_model_is_refused(tmp_path):
    from divelab.lm.models import build_model

    other = build_model("tiny-100k", 41, seed=1)
    save_drafter(Drafter.for_target(other, DrafterConfig(kind="markov", gamma=4, window=8, rank=8)), tmp_path / "d")
    with pytest.raises(ValueError, match="does not match model 'smoke'"):
        build_app("smoke", tmp_path / "d")


def test_disconnect_frees_the_slot_and_metrics_parse(server, model):
    base = server.base_url
    # Slow every target forward down, so that whether the server notices a client leaving (it checks
    # every 0.25 s) does not depend on how fast this machine happens to decode the smoke model.
    slow = model[0].register_forward_pre_hook(lambda *_: time.sleep(0.02))
    try:
        _disconnects(base)
    finally:
        slow.remove()


def _disconnects(base: str) -> None:
    before = _metric(base, "divelab_generation_tokens_total")
    with httpx.stream("POST", base + "/completions", json={"model": "smoke", "prompt": "x", "max_tokens": 400,
                                                           "temperature": 0, "stream": True}) as r:
        lines = r.iter_lines()
        assert next(lines).startswith("data: ")
    _wait_idle(base)
    mid = _metric(base, "divelab_generation_tokens_total")
    assert mid - before < 400  # it stopped early
    with pytest.raises(httpx.ReadTimeout):  # a non-streaming client that gives up
        httpx.post(base + "/completions", json={"model": "smoke", "prompt": "y", "max_tokens": 450, "temperature": 0},
                   timeout=httpx.Timeout(5.0, read=0.3))
    _wait_idle(base)
    assert _metric(base, "divelab_generation_tokens_total") - mid < 450
    fams = {f.name for f in text_string_to_metric_families(httpx.get(base.replace("/v1", "/metrics")).text)}
    assert {"divelab_requests", "divelab_tau", "divelab_queue_length", "divelab_time_to_first_token_seconds",
            "divelab_inter_token_latency_seconds", "divelab_generation_tokens"} <= fams
    assert _metric(base, "divelab_tau") >= 1.0


def _wait_idle(base: str) -> None:
    t0 = time.time()
    while httpx.get(base.replace("/v1", "/health")).json()["running"] and time.time() - t0 < 10:
        time.sleep(0.05)
    assert httpx.get(base.replace("/v1", "/health")).json()["running"] == 0
    time.sleep(0.2)


def _metric(base: str, name: str) -> float:
    text = httpx.get(base.replace("/v1", "/metrics")).text
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            if s.name == name:
                return s.value
    raise AssertionError(f"{name} not in /metrics")


def test_full_queue_answers_429(model):
    target, tok = model
    gate = threading.Event()  # the engine loop blocks inside its first forward until released
    app = create_app(target, tok, "smoke", None, max_batch=1, max_queue=1)
    hook = (app.state.engine.lean or target).register_forward_hook(lambda *a: None if gate.wait(20) else None)
    try:
        with BackgroundServer(app) as srv:
            body = {"model": "smoke", "prompt": "x", "max_tokens": 4, "temperature": 0}
            url = srv.base_url + "/completions"
            first = threading.Thread(target=httpx.post, args=(url,), kwargs={"json": body, "timeout": 30})
            first.start()  # admitted: the loop is now stuck in its prefill
            t0 = time.time()
            while app.state.engine.load["running"] == 0 and time.time() - t0 < 5:
                time.sleep(0.01)
            second = threading.Thread(target=httpx.post, args=(url,), kwargs={"json": body, "timeout": 30})
            second.start()  # fills the one queue place
            while app.state.engine.load["waiting"] == 0 and time.time() - t0 < 5:
                time.sleep(0.01)
            r = httpx.post(url, json=body)
            gate.set()
            assert r.status_code == 429 and r.headers["retry-after"] == "1"
            assert r.json()["error"]["code"] == "rate_limit_exceeded"
            first.join()
            second.join()
            assert httpx.post(url, json=body).status_code == 200  # the queue drained: accepted again
    finally:
        gate.set()
        hook.remove()


def test_top_p_filter_keeps_the_nucleus():
    x = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]]))
    kept = torch.isfinite(top_p_filter(x.clone(), 0.7))
    assert kept.tolist() == [[True, True, False, False]]
    assert torch.isfinite(top_p_filter(x.clone(), 1.0)).all()
    assert json.dumps(kept.tolist())


def test_serve_command_registers_without_importing_torch():
    import subprocess
    import sys

    code = ("import sys, importlib.util, typer\n"
            "spec = importlib.util.spec_from_file_location('servecli', sys.argv[1])\n"
            "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)\n"
            "app = typer.Typer(); m.register(app)\n"
            "assert [c.name for c in app.registered_commands] == ['serve'], app.registered_commands\n"
            "assert 'torch' not in sys.modules and 'uvicorn' not in sys.modules\n")
    from divelab.serving.server import cli

    subprocess.run([sys.executable, "-c", code, cli.__file__], check=True, timeout=60)
