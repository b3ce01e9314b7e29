"""The guard inside ``divelab serve``: online scores equal the offline ones, a probe for another model is
refused, each request keeps its own verdict and policy, and ``stop`` ends a flagged generation (the
official ``openai`` client against a real uvicorn server on loopback)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx
import numpy as np
import openai
import pytest
import torch

from divelab.guard import GuardProbe, model_identity, score_prompts
from divelab.serving.dspark import Drafter, DrafterConfig
from divelab.serving.dspark.sps import SPSCurve
from divelab.serving.server import BackgroundServer, create_app

PROMPTS = ["def parse(path):\n    with open(", "import os\nimport sys\n\n", "class Stack:\n    def push(self,",
           "for i in range(10):\n    print(", "    return self._cache[key]\n", "x = [1, 2, 3]\ny ="]


def probe_between(target, tok, position: str) -> tuple[GuardProbe, list[list[int]], list[float]]:
    """A probe with random weights whose threshold sits in the middle of PROMPTS' scores: half are flagged."""
    d = int(target.config.hidden_size)
    layer = int(target.config.num_hidden_layers) // 2 + 1
    raw = GuardProbe(layer=layer, position=position, weights=tuple(np.random.default_rng(0).normal(size=d)),
                     bias=0.0, threshold=0.0, model=model_identity(target), refusal="I can't help with that.")
    ids = [tok.encode(p) for p in PROMPTS]
    scores = [s.score for s in score_prompts(target, raw, ids)]
    thr = float(np.median(scores))
    probe = GuardProbe(**{**raw.__dict__, "threshold": thr})
    return probe, ids, scores


def drafter_for(target):
    torch.manual_seed(0)
    return Drafter.for_target(target, DrafterConfig(kind="markov", gamma=4, window=8, rank=8))


@pytest.fixture(scope="module", params=["prompt_last", "first"])
def position(request) -> str:
    return request.param


@pytest.mark.parametrize("speculative", [False, True])
def test_online_scores_equal_offline(model, position: str, speculative: bool) -> None:
    target, tok = model
    probe, ids, offline = probe_between(target, tok, position)
    drafter = drafter_for(target) if speculative else None
    app = create_app(target, tok, "smoke", drafter, sps=SPSCurve.synthetic_accelerator(0.01, 8), max_batch=4,
                     guard=probe)
    with BackgroundServer(app) as srv:
        base = srv.base_url
        alone = [httpx.post(base + "/completions", json={"model": "smoke", "prompt": p, "max_tokens": 3,
                                                        "temperature": 0}).json()["divelab"]["guard"]
                 for p in ids]
        scored = httpx.post(base + "/guard/score", json={"model": "smoke", "prompt": ids}).json()["data"]

        async def together() -> list[dict]:
            async with httpx.AsyncClient(timeout=120) as c:
                rs = await asyncio.gather(*(c.post(base + "/completions", json={
                    "model": "smoke", "prompt": p, "max_tokens": 3, "temperature": 0}) for p in ids))
            return [r.json()["divelab"]["guard"] for r in rs]

        batched = asyncio.run(together())
    assert [v["score"] for v in scored] == offline  # the endpoint runs the offline scorer itself
    assert all(v["layer"] == probe.layer and v["position"] == position for v in alone)
    if not speculative or position == "prompt_last":  # the same forward, one request at a time: bit for bit
        assert [v["score"] for v in alone] == offline
    else:  # the first step also verifies drafts after the first token: same values up to float rounding
        np.testing.assert_allclose([v["score"] for v in alone], offline, rtol=1e-5, atol=1e-5)
    # batched rows are left-padded: the same values up to float rounding, and the same decisions
    np.testing.assert_allclose([v["score"] for v in batched], offline, rtol=1e-4, atol=1e-4)
    decided = [v["decision"] for v in batched]
    assert decided == ["flag" if s >= probe.threshold else "pass" for s in offline]


def test_a_probe_for_another_model_is_refused(model, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from divelab.cli import app

    target, tok = model
    probe, _, _ = probe_between(target, tok, "prompt_last")
    saved = probe.save(tmp_path / "probe.json")
    body = json.loads(saved.read_text())
    body["model"]["weights"] = "0" * 16  # as if trained on another fine-tune of the same architecture
    (tmp_path / "other.json").write_text(json.dumps(body))
    with pytest.raises(ValueError, match="weights differ"):
        from divelab.guard import load_guard

        load_guard(tmp_path / "other.json", target)
    res = CliRunner().invoke(app, ["serve", "--model", "smoke", "--drafter", "none", "--guard",
                                   str(tmp_path / "other.json"), "--port", "1"])
    assert res.exit_code == 2, res.output
    lines = [ln for ln in res.output.strip().splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:") and "weights differ" in lines[0], res.output


def test_guard_state_is_isolated_per_request(model) -> None:
    """One batch holds a flagged request under ``stop``, a flagged one under ``annotate`` and an unflagged one
    under ``stop``: each gets its own verdict and only the first is stopped; the others decode exactly as on a
    server with no guard."""
    target, tok = model
    probe, ids, offline = probe_between(target, tok, "prompt_last")
    flagged = [p for p, s in zip(ids, offline, strict=True) if s >= probe.threshold]
    passed = [p for p, s in zip(ids, offline, strict=True) if s < probe.threshold]
    jobs = [(flagged[0], "stop"), (flagged[1], "annotate"), (passed[0], "stop"), (passed[1], None)]
    plain = create_app(target, tok, "smoke", max_batch=4)
    guarded = create_app(target, tok, "smoke", max_batch=4, guard=probe, guard_policy="annotate")
    with BackgroundServer(plain) as a, BackgroundServer(guarded) as b:
        def body(p, pol):
            return {"model": "smoke", "prompt": p, "max_tokens": 12, "temperature": 0,
                    **({"divelab_guard": pol} if pol else {})}

        async def together(base: str, with_policy: bool) -> list[dict]:
            async with httpx.AsyncClient(timeout=120) as c:
                rs = await asyncio.gather(*(c.post(base + "/completions", json=body(p, pol if with_policy else None))
                                            for p, pol in jobs))
            return [r.json() for r in rs]

        ref = asyncio.run(together(a.base_url, False))
        got = asyncio.run(together(b.base_url, True))
        metrics = httpx.get(b.base_url.replace("/v1", "/metrics")).text
        again = httpx.post(b.base_url + "/completions", json=body(passed[1], None)).json()
    verdicts = [g["divelab"]["guard"] for g in got]
    assert [v["decision"] for v in verdicts] == ["flag", "flag", "pass", "pass"]
    assert [v["policy"] for v in verdicts] == ["stop", "annotate", "stop", "annotate"]
    assert got[0]["choices"][0]["finish_reason"] == "content_filter" and got[0]["choices"][0]["text"] == ""
    for i in (1, 2, 3):
        assert got[i]["choices"][0]["text"] == ref[i]["choices"][0]["text"]
        assert got[i]["choices"][0]["finish_reason"] == ref[i]["choices"][0]["finish_reason"]
    assert again["divelab"]["guard"]["decision"] == "pass"  # a later request does not inherit a verdict
    assert 'divelab_guard_decisions_total{action="stopped",decision="flag"} 1.0' in metrics


def test_stop_ends_a_flagged_generation_through_the_openai_sdk(model) -> None:
    target, tok = model
    probe, ids, offline = probe_between(target, tok, "first")
    flagged = tok.decode(ids[int(np.argmax(offline))])
    with BackgroundServer(create_app(target, tok, "smoke", drafter_for(target), max_batch=4, guard=probe,
                                     sps=SPSCurve.synthetic_accelerator(0.01, 8), guard_policy="stop")) as srv:
        sdk = openai.OpenAI(base_url=srv.base_url, api_key="-", max_retries=0)
        r = sdk.completions.create(model="smoke", prompt=flagged, max_tokens=16, temperature=0)
        assert r.choices[0].finish_reason == "content_filter" and r.choices[0].text == ""
        assert r.divelab["guard"]["decision"] == "flag" and r.divelab["guard"]["action"] == "stopped"
        chunks = list(sdk.completions.create(model="smoke", prompt=flagged, max_tokens=16, temperature=0,
                                             stream=True))
        assert chunks[0].divelab["guard"]["score"] == pytest.approx(r.divelab["guard"]["score"])
        assert chunks[-1].choices[0].finish_reason == "content_filter"
        assert "".join(c.choices[0].text for c in chunks if c.choices) == ""
        red = sdk.completions.create(model="smoke", prompt=flagged, max_tokens=16, temperature=0,
                                     extra_body={"divelab_guard": "redirect"})
        assert red.choices[0].text == probe.refusal and red.divelab["guard"]["action"] == "redirected"
        ann = sdk.completions.create(model="smoke", prompt=flagged, max_tokens=16, temperature=0,
                                     extra_body={"divelab_guard": "annotate"})
        assert ann.choices[0].text and ann.divelab["guard"]["decision"] == "flag"


def test_chat_is_guarded_and_an_unguarded_server_refuses_a_policy(model) -> None:
    target, tok = model
    probe, _, _ = probe_between(target, tok, "prompt_last")
    msgs = [{"role": "user", "content": PROMPTS[0]}]
    with BackgroundServer(create_app(target, tok, "smoke", max_batch=4, guard=probe)) as srv, \
            BackgroundServer(create_app(target, tok, "smoke", max_batch=4)) as plain:
        sdk = openai.OpenAI(base_url=srv.base_url, api_key="-", max_retries=0)
        r = sdk.chat.completions.create(model="smoke", messages=msgs, max_tokens=8, temperature=0)
        assert r.divelab["guard"]["decision"] in ("flag", "pass") and r.choices[0].divelab["guard"] == r.divelab["guard"]
        chunks = list(sdk.chat.completions.create(model="smoke", messages=msgs, max_tokens=8, temperature=0,
                                                  stream=True))
        first_with_guard = next(i for i, c in enumerate(chunks) if getattr(c, "divelab", None))
        first_text = next(i for i, c in enumerate(chunks) if c.choices and c.choices[0].delta.content)
        assert first_with_guard < first_text
        assert chunks[first_with_guard].divelab["guard"]["score"] == r.divelab["guard"]["score"]
        bad = httpx.post(plain.base_url + "/completions", json={"model": "smoke", "prompt": "x", "max_tokens": 2,
                                                                "divelab_guard": "stop"})
        assert bad.status_code == 400 and "no guard" in bad.json()["error"]["message"]
        assert httpx.post(plain.base_url + "/guard/score", json={"model": "smoke", "prompt": "x"}).status_code == 404
        assert "divelab" not in httpx.post(plain.base_url + "/completions", json={
            "model": "smoke", "prompt": "x", "max_tokens": 2}).json()
