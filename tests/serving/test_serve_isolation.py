"""`divelab serve` under hostile and unusual clients: one request never hurts another (poison
parameters, a request whose forward fails), every body is validated (bounds, seeds, unencodable
text, deep JSON, unsupported fields), the event loop stays free while prompts are tokenised,
metrics stay bounded, and the OpenAI surface (logprobs, echo, penalties, logit bias, batched
prompts, tools, usage in streams) behaves as the SDK expects."""

from __future__ import annotations

import json
import logging
import threading
import time

import httpx
import openai
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import divelab.lm.lean.model as lean_model
from divelab.serving.dspark import plain_greedy
from divelab.serving.server import BackgroundServer, build_app, create_app

PROMPTS = ["def add(a, b):", "import os\n", "class Stack:\n    def", "for i in range(10):"]


def post(url: str, body: dict, **kw) -> httpx.Response:
    """POST JSON as Python writes it: ASCII with escapes, so lone surrogates and NaN reach the server."""
    return httpx.post(url, content=json.dumps(body).encode(), headers={"content-type": "application/json"}, **kw)


def ref_text(model, prompt: str, n: int) -> str:
    target, tok = model
    return tok.decode(plain_greedy(target, tok.encode(prompt), n, tok.eos_token_id), skip_special_tokens=True)


def stream_text(base: str, prompt: str, max_tokens: int, out: dict, key) -> None:
    """A greedy streamed completion; stores its text, or the error events it got."""
    text, errors = [], []
    with httpx.stream("POST", base + "/completions", timeout=120, json={
            "model": "smoke", "prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "stream": True}) as r:
        for line in r.iter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                d = json.loads(line[6:])
                if "error" in d:
                    errors.append(d["error"])
                text += [c["text"] for c in d.get("choices", [])]
    out[key] = ("".join(text), errors, r.status_code)


def wait_idle(base: str) -> dict:
    t0 = time.time()
    while (h := httpx.get(base.replace("/v1", "/health")).json())["running"] + h["waiting"] and time.time() - t0 < 20:
        time.sleep(0.05)
    return h


# ------------------------------------------------------------------------------------------- isolation
POISON = [  # (body, acceptable status) — each once made the loop fail every request, or gave a 500
    ({"prompt": "x", "temperature": 1.5e-38, "max_tokens": 8}, 200),
    ({"prompt": "x", "temperature": 1e-45, "max_tokens": 8}, 200),
    ({"prompt": "x", "temperature": 5e-6, "max_tokens": 8, "n": 2}, 200),
    ({"prompt": "x", "temperature": 0.7, "seed": 2**64, "max_tokens": 8, "n": 2}, 400),
    ({"prompt": "x", "temperature": 0.7, "seed": 2**63 - 1, "max_tokens": 8, "n": 2}, 200),
    ({"prompt": "\ud800", "max_tokens": 8}, 400),
    ({"prompt": ["ok", "\udfff"], "max_tokens": 8}, 400),
    ({"prompt": "x", "stop": ["\ud800"], "max_tokens": 8}, 400),
    ({"prompt": "x", "temperature": "hot"}, 400),
    ({"prompt": "x", "logit_bias": {"5": 1e30}}, 400),
]


def test_poison_requests_never_hurt_concurrent_greedy_streams(model, server):
    base = server.base_url
    refs = [ref_text(model, p, 40) for p in PROMPTS]
    got: dict = {}
    streams = [threading.Thread(target=stream_text, args=(base, p, 40, got, i)) for i, p in enumerate(PROMPTS)]
    for t in streams:
        t.start()
    statuses = []
    for body, want in POISON:
        r = post(base + "/completions", {"model": "smoke", **body}, timeout=60)
        statuses.append((r.status_code, want, body))
        assert r.headers["content-type"].startswith("application/json")
    deep = "[" * 5000 + "]" * 5000
    r = httpx.post(base + "/completions", content=f'{{"model": "smoke", "prompt": {deep}}}'.encode(),
                   headers={"content-type": "application/json"})
    statuses.append((r.status_code, 400, "deep"))
    r = post(base + "/chat/completions", {"model": "smoke", "messages": [
        {"role": "user", "content": "a\ud800b"}]})
    statuses.append((r.status_code, 400, "surrogate message"))
    for t in streams:
        t.join()
    assert [s[0] for s in statuses] == [s[1] for s in statuses], statuses
    for i, ref in enumerate(refs):
        text, errors, status = got[i]
        assert status == 200 and not errors and text == ref, i
    # a temperature too small to divide by is greedy (as in vLLM), not a NaN
    r = post(base + "/completions", {"model": "smoke", "prompt": PROMPTS[0], "max_tokens": 40,
                                                "temperature": 1e-30}).json()
    assert r["choices"][0]["text"] == refs[0]
    h = wait_idle(base)
    assert h["status"] == "ok" and h["running"] == 0 and h["waiting"] == 0  # no orphaned choice keeps decoding


def test_a_request_whose_decoding_fails_fails_alone(model, server, monkeypatch):
    """Inject a fault: any decoding step (not prefill) that touches position >= 150 raises, so only
    the request with the long prompt can fail; the loop must finish it with its own error event."""
    target, tok = model
    base = server.base_url

    def fault(module, args, kwargs):
        ids = args[0] if args else kwargs["input_ids"]
        pos = kwargs.get("position_ids")
        if pos is not None and ids.shape[1] <= 8 and int(pos.max()) >= 150:
            raise RuntimeError("injected fault")

    lean_attend = lean_model._attend

    def lean_fault(seq, q, keys, values, start, k, *a, **kw):  # the lean engine: the same fault inside the
        # step's one forward, at that request's attention, after earlier requests wrote their caches
        if k <= 8 and start + k > 150:
            raise RuntimeError("injected fault")
        return lean_attend(seq, q, keys, values, start, k, *a, **kw)

    if server.app.state.engine.lean is None:
        hook = target.register_forward_pre_hook(fault, with_kwargs=True)
    else:
        monkeypatch.setattr(lean_model, "_attend", lean_fault)
        hook = None
    try:
        refs = [ref_text(model, p, 30) for p in PROMPTS]
        got: dict = {}
        long_prompt = " ".join(["word"] * 100)  # 300 tokens
        assert len(tok.encode(long_prompt)) > 150
        threads = [threading.Thread(target=stream_text, args=(base, p, 30, got, i)) for i, p in enumerate(PROMPTS)]
        threads.append(threading.Thread(target=stream_text, args=(base, long_prompt, 30, got, "poison")))
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        r = post(base + "/completions", {"model": "smoke", "prompt": long_prompt, "max_tokens": 5})
    finally:
        if hook is not None:
            hook.remove()
        monkeypatch.undo()
    assert r.status_code == 500 and "decoding failed" in r.json()["error"]["message"]
    assert r.json()["error"]["type"] == "server_error"
    _, errors, status = got["poison"]
    assert status == 200 and errors and "injected fault" in errors[0]["message"]  # an SSE error event
    for i, ref in enumerate(refs):
        assert got[i][0] == ref and not got[i][1], i
    assert wait_idle(base)["status"] == "ok"


def test_seeds_span_int64_and_every_choice_finishes(server, sdk):
    for seed in (2**63 - 1, -(2**63), 0):
        r = sdk.completions.create(model="smoke", prompt="x", max_tokens=6, temperature=0.8, seed=seed, n=3)
        assert len(r.choices) == 3 and all(c.finish_reason for c in r.choices)
    with pytest.raises(openai.BadRequestError) as e:
        sdk.completions.create(model="smoke", prompt="x", max_tokens=6, temperature=0.8, seed=2**63, n=2)
    assert e.value.body["param"] == "seed"
    assert wait_idle(server.base_url)["running"] == 0


# ------------------------------------------------------------------------------------------- validation
@pytest.mark.parametrize("path, body, param", [
    ("/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "tool_choice": "required",
                           "tools": [{"type": "function", "function": {"name": "f"}}]}, "tool_choice"),
    ("/chat/completions", {"messages": [{"role": "user", "content": "hi"}],
                           "response_format": {"type": "json_object"}}, "response_format"),
    ("/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "functions": [{"name": "f"}]},
     "functions"),
    ("/completions", {"prompt": "x", "top_k": 5}, "top_k"),
    ("/completions", {"prompt": "x", "suffix": "y"}, None),
    ("/completions", {"prompt": "x", "best_of": 3}, None),
    ("/completions", {"prompt": "x", "stream_options": {"include_usage": True}}, None),
    ("/completions", {"prompt": "x", "logprobs": 50}, "logprobs"),
    ("/completions", {"prompt": "x", "presence_penalty": 3}, "presence_penalty"),
    ("/completions", {"prompt": "x", "logit_bias": {"hello": 3}}, "logit_bias"),
    ("/completions", {"prompt": "x", "logit_bias": {"999999": 3}}, "logit_bias"),
    ("/completions", {"prompt": "x", "temperature": float("nan")}, None),
])
def test_unsupported_or_out_of_range_fields_are_named_in_a_400(server, path, body, param):
    r = post(server.base_url + path, {"model": "smoke", **body})
    err = r.json()["error"]
    assert r.status_code == 400 and err["type"] == "invalid_request_error"
    needle = param or next(k for k in body if k not in ("prompt", "messages"))
    assert needle in err["message"], err
    if param:
        assert err["param"].startswith(param)


def test_client_errors_are_logged_as_one_line(server, caplog):
    with caplog.at_level(logging.WARNING, logger="divelab.serve"):
        post(server.base_url + "/completions", {"model": "smoke", "prompt": "x", "top_k": 3})
        time.sleep(0.1)
    recs = [r for r in caplog.records if r.name == "divelab.serve"]
    assert len(recs) == 1 and recs[0].exc_info is None and "400" in recs[0].getMessage()
    assert "\n" not in recs[0].getMessage() and "top_k" in recs[0].getMessage()


def test_metrics_are_labelled_by_route_template(server):
    base = server.base_url.replace("/v1", "")
    for i in range(40):
        assert httpx.get(f"{base}/junk/{i}").status_code == 404
    text = httpx.get(base + "/metrics").text
    labels = {line.split("{")[1].split("}")[0] for line in text.splitlines()
              if line.startswith("divelab_requests_total{")}
    assert not any("junk" in x for x in labels)
    assert 'endpoint="unmatched",status="404"' in labels
    assert any('endpoint="/v1/completions"' in x for x in labels)


# ------------------------------------------------------------------------------------------- OpenAI surface
def test_logprobs_and_echo_match_the_model(model, sdk):
    target, tok = model
    ids = tok.encode(PROMPTS[0])
    r = sdk.completions.create(model="smoke", prompt=PROMPTS[0], max_tokens=6, temperature=0, logprobs=3, echo=True)
    c = r.choices[0]
    assert c.text.startswith(PROMPTS[0]) and c.text[len(PROMPTS[0]):] == ref_text(model, PROMPTS[0], 6)
    lp = c.logprobs
    n_gen = r.usage.completion_tokens
    assert len(lp.tokens) == len(ids) + n_gen and lp.token_logprobs[0] is None and lp.top_logprobs[0] is None
    with torch.no_grad():
        full = torch.log_softmax(target(torch.tensor([ids])).logits[0].float(), -1)
    for q in range(1, len(ids)):  # prompt tokens: the model's log-probability of each given the ones before
        assert lp.token_logprobs[q] == pytest.approx(float(full[q - 1, ids[q]]), abs=1e-4)
    first = int(full[-1].argmax())
    assert lp.token_logprobs[len(ids)] == pytest.approx(float(full[-1, first]), abs=1e-4)
    for q in range(len(ids), len(lp.tokens)):  # greedy: the chosen token is the top one
        assert len(lp.top_logprobs[q]) == 3
        assert lp.token_logprobs[q] == pytest.approx(max(lp.top_logprobs[q].values()), abs=1e-5)
    assert lp.text_offset[len(ids)] == len(PROMPTS[0]) or lp.text_offset == sorted(lp.text_offset)
    chat = sdk.chat.completions.create(model="smoke", messages=[{"role": "user", "content": "hi"}], max_tokens=5,
                                       temperature=0, logprobs=True, top_logprobs=2)
    content = chat.choices[0].logprobs.content
    assert len(content) == chat.usage.completion_tokens
    assert all(len(e.top_logprobs) == 2 and e.logprob <= 0 for e in content)
    n = 0
    for ch in sdk.chat.completions.create(model="smoke", messages=[{"role": "user", "content": "hi"}], max_tokens=5,
                                          temperature=0, logprobs=True, stream=True):
        for cc in ch.choices:
            n += len(cc.logprobs.content) if cc.logprobs and cc.logprobs.content else 0
    assert n == chat.usage.completion_tokens


def reference_penalised(model, prompt: str, n: int, presence: float, frequency: float,
                        bias: dict[int, float]) -> str:
    """Greedy decoding with OpenAI penalties and bias, computed without a cache, one token at a time."""
    target, tok = model
    ids, out = tok.encode(prompt), []
    with torch.no_grad():
        for _ in range(n):
            x = target(torch.tensor([ids + out])).logits[0, -1].float().clone()
            for t, b in bias.items():
                x[t] += b
            counts = torch.bincount(torch.tensor(out, dtype=torch.long), minlength=x.shape[0]).float()
            x -= frequency * counts + presence * (counts > 0).float()
            out.append(int(x.argmax()))
            if out[-1] == tok.eos_token_id:
                break
    return tok.decode(out, skip_special_tokens=True)


def test_penalties_and_logit_bias_are_exact_under_speculation(model, sdk):
    target, tok = model
    for prompt in PROMPTS[:2]:
        want = reference_penalised(model, prompt, 24, 0.5, 1.5, {})
        got = sdk.completions.create(model="smoke", prompt=prompt, max_tokens=24, temperature=0,
                                     presence_penalty=0.5, frequency_penalty=1.5).choices[0].text
        assert got == want
        assert got != ref_text(model, prompt, 24)  # the penalties changed the output
    forced = tok.encode(" x")[-1]
    got = sdk.completions.create(model="smoke", prompt=PROMPTS[0], max_tokens=5, temperature=0,
                                 logit_bias={str(forced): 100}).choices[0].text
    assert got == tok.decode([forced] * 5)


def test_batched_prompts_with_n(model, sdk):
    target, tok = model
    r = sdk.completions.create(model="smoke", prompt=PROMPTS[:2], max_tokens=10, temperature=0, n=2)
    assert [c.index for c in r.choices] == [0, 1, 2, 3]
    refs = [ref_text(model, p, 10) for p in PROMPTS[:2]]
    assert [c.text for c in r.choices] == [refs[0], refs[0], refs[1], refs[1]]
    assert r.usage.prompt_tokens == sum(len(tok.encode(p)) for p in PROMPTS[:2])
    ids = [tok.encode(p) for p in PROMPTS[:2]]
    r2 = sdk.completions.create(model="smoke", prompt=ids, max_tokens=10, temperature=0)
    assert [c.text for c in r2.choices] == refs


def test_tools_go_through_the_prompt(sdk):
    tools = [{"type": "function", "function": {"name": "get_weather", "description": "weather in a city",
                                               "parameters": {"type": "object",
                                                              "properties": {"city": {"type": "string"}}}}}]
    msgs = [{"role": "user", "content": "weather in Paris?"}]
    plain = sdk.chat.completions.create(model="smoke", messages=msgs, max_tokens=4, temperature=0)
    offered = sdk.chat.completions.create(model="smoke", messages=msgs, max_tokens=4, temperature=0, tools=tools)
    declined = sdk.chat.completions.create(model="smoke", messages=msgs, max_tokens=4, temperature=0, tools=tools,
                                           tool_choice="none")
    assert offered.usage.prompt_tokens > plain.usage.prompt_tokens  # the tools are described to the model
    assert declined.usage.prompt_tokens == plain.usage.prompt_tokens
    m = offered.choices[0]
    assert (m.finish_reason == "tool_calls") == bool(m.message.tool_calls)
    # earlier tool traffic is rendered too, and a stream with tools is well-formed
    history = msgs + [{"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny"}]
    chunks = list(sdk.chat.completions.create(model="smoke", messages=history, max_tokens=4, temperature=0,
                                              tools=tools, stream=True, stream_options={"include_usage": True}))
    assert chunks[-1].usage is not None and chunks[-1].usage.prompt_tokens > offered.usage.prompt_tokens
    assert any(c.choices and c.choices[0].finish_reason for c in chunks)


# ------------------------------------------------------------------------------------------- engine loop
class _SlowCountingTokenizer:
    """The smoke tokenizer, but ``encode`` of a text starting "SLOW" waits for a gate, and every
    decode is counted (tokens decoded in total)."""

    def __init__(self, tok) -> None:
        self._tok, self.gate, self.decoded = tok, threading.Event(), 0

    def __getattr__(self, name):
        return getattr(self._tok, name)

    def encode(self, text, *a, **kw):
        if isinstance(text, str) and text.startswith("SLOW"):
            self.gate.wait(20)
        return self._tok.encode(text, *a, **kw)

    def decode(self, ids, *a, **kw):
        self.decoded += len(ids)
        return self._tok.decode(ids, *a, **kw)


def test_event_loop_free_during_tokenisation_and_detokenisation_is_linear(model):
    target, tok = model
    slow = _SlowCountingTokenizer(tok)
    app = create_app(target, slow, "smoke", None, max_batch=4)
    with BackgroundServer(app) as srv:
        health = srv.base_url.replace("/v1", "/health")
        th = threading.Thread(target=httpx.post, args=(srv.base_url + "/completions",),
                              kwargs={"json": {"model": "smoke", "prompt": "SLOW x", "max_tokens": 2}, "timeout": 30})
        th.start()
        time.sleep(0.3)
        try:
            t0 = time.time()
            assert httpx.get(health, timeout=5).status_code == 200
            assert time.time() - t0 < 2.0 and th.is_alive()  # answered while the prompt is still being tokenised
        finally:
            slow.gate.set()
            th.join()
        slow.decoded = 0
        r = post(srv.base_url + "/completions", {"model": "smoke", "prompt": "x", "max_tokens": 300,
                                                             "temperature": 0}, timeout=60).json()
        n = r["usage"]["completion_tokens"]
        assert n > 50 and slow.decoded < 12 * n  # re-decoding the whole output each step costs ~n²/2


def test_incremental_detokenizer_equals_full_decode(model):
    from divelab.serving.server.detok import IncrementalDetokenizer

    _, tok = model
    text = "déjà vu — naïve café 😀 def f(x):\n    return x ** 2  # ∑"
    ids = tok.encode(text)
    d = IncrementalDetokenizer(tok)
    pieces = [d.push([t]) for t in ids]
    assert "".join(pieces) + d.flush() == tok.decode(ids, skip_special_tokens=True)
    assert all("\ufffd" not in p for p in pieces)


def test_admission_prefills_waiting_requests_in_one_batch(model):
    target, tok = model
    gate = threading.Event()  # the loop blocks inside its first forward until released
    app = create_app(target, tok, "smoke", None, max_batch=4)
    hook = (app.state.engine.lean or target).register_forward_hook(lambda *a: None if gate.wait(20) else None)
    sizes: list[int] = []
    eng = app.state.engine.greedy
    orig = eng.prefill_many
    eng.prefill_many = lambda reqs, now=0.0: (sizes.append(len(reqs)), orig(reqs, now))[1]
    try:
        with BackgroundServer(app) as srv:
            body = {"model": "smoke", "prompt": "x", "max_tokens": 3, "temperature": 0}
            url = srv.base_url + "/completions"
            ts = [threading.Thread(target=httpx.post, args=(url,), kwargs={"json": body, "timeout": 30})
                  for _ in range(4)]
            ts[0].start()
            t0 = time.time()
            while app.state.engine.load["running"] == 0 and time.time() - t0 < 5:
                time.sleep(0.01)
            for t in ts[1:]:
                t.start()
            while app.state.engine.load["waiting"] < 3 and time.time() - t0 < 5:
                time.sleep(0.01)
            gate.set()
            for t in ts:
                t.join()
    finally:
        gate.set()
        hook.remove()
    assert sizes[:2] == [1, 3]


def test_threads_option_sets_torch_threads():
    before = torch.get_num_threads()
    try:
        build_app("smoke", threads=2)
        assert torch.get_num_threads() == 2
        with pytest.raises(ValueError, match="threads"):
            build_app("smoke", threads=0)
    finally:
        torch.set_num_threads(before)


# ------------------------------------------------------------------------------------------- property
JUNK = st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(allow_nan=False),
                 st.text(max_size=8), st.lists(st.integers(-3, 5000), max_size=3),
                 st.dictionaries(st.text(max_size=3), st.integers(), max_size=2))
TEXT = st.one_of(st.text(st.characters(exclude_categories=()), max_size=12),  # lone surrogates included
                 st.sampled_from(["\ud800", "x\udfff", "def f(x):"]))
# well-typed values at and beyond the edges of each range: these reach the engine
TYPED = {"max_tokens": st.integers(-1, 6), "temperature": st.one_of(st.floats(0, 2), st.floats(0, 1e-30)),
         "top_p": st.floats(0, 1), "n": st.integers(0, 3), "stop": st.one_of(TEXT, st.lists(TEXT, max_size=3)),
         "seed": st.one_of(st.integers(-(2**63), 2**63 - 1), st.integers(-(2**65), 2**65)), "stream": st.booleans(),
         "presence_penalty": st.floats(-2.5, 2.5), "frequency_penalty": st.floats(-2.5, 2.5),
         "logit_bias": st.dictionaries(st.sampled_from(["0", "5", "x", "99999"]), st.floats(-200, 200), max_size=2),
         "stream_options": st.fixed_dictionaries({"include_usage": st.booleans()})}
MESSAGE = st.fixed_dictionaries({"role": st.sampled_from(["user", "system", "assistant", "tool", "x"]),
                                 "content": TEXT})


def bodies(core: dict, extra: dict) -> st.SearchStrategy:
    """Well-typed bodies (most reach the engine) and bodies where any field may be junk."""
    typed = st.fixed_dictionaries({"model": st.just("smoke"), **core}, optional={**TYPED, **extra})
    junky = st.fixed_dictionaries({}, optional={k: st.one_of(v, JUNK) for k, v in
                                                {"model": st.just("smoke"), **core, **TYPED, **extra}.items()})
    return st.one_of(typed, junky)


COMPLETION = bodies({"prompt": st.one_of(TEXT, st.lists(TEXT, max_size=2), st.lists(st.integers(-2, 5000),
                                                                                      max_size=4))},
                    {"echo": st.booleans(), "logprobs": st.integers(-1, 6)})
CHAT = bodies({"messages": st.lists(MESSAGE, max_size=3)},
              {"logprobs": st.booleans(), "top_logprobs": st.integers(-1, 4),
               "tool_choice": st.sampled_from(["auto", "none"])})


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                 HealthCheck.too_slow])
@given(st.one_of(st.tuples(st.just("/completions"), COMPLETION), st.tuples(st.just("/chat/completions"), CHAT)))
def test_no_request_body_gets_a_5xx(server, model, req):
    path, body = req
    r = httpx.post(server.base_url + path, content=json.dumps(body).encode(),
                   headers={"content-type": "application/json"}, timeout=60)
    assert r.status_code < 500, (r.status_code, r.text[:300])
    if r.status_code >= 400:
        assert set(r.json()["error"]) == {"message", "type", "param", "code"}


def test_server_is_healthy_after_the_property_test(model, sdk, server):
    assert wait_idle(server.base_url)["status"] == "ok"
    r = sdk.completions.create(model="smoke", prompt=PROMPTS[1], max_tokens=12, temperature=0)
    assert r.choices[0].text == ref_text(model, PROMPTS[1], 12)
