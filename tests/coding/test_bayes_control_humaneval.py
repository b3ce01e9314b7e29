"""E170 on real code: HumanEval tasks, mutants, the sandboxed harness, pools, replay, live mode, CLI."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import httpx
import pytest

from divelab.chat import ChatClientError, OpenAIChatClient, ScriptedChatModel
from divelab.codetasks.harness import evaluate
from divelab.codetasks.humaneval import load_tasks
from divelab.codetasks.mutation import make_mutants
from divelab.coding.bayes_control import AlwaysVerify, Costs, DPController, run_episode
from divelab.coding.bayes_control.live import LiveEnv
from divelab.coding.bayes_control.pool import PoolConfig, build_pools, pyflakes_messages
from divelab.coding.bayes_control.replay import GeneratorModel, ReplayEnv, estimate_model, public_indices


@pytest.fixture(scope="module")
def tasks():
    return {t.task_id: t for t in load_tasks()}


def test_humaneval_loads_offline_and_splits_tests(tasks):
    assert len(tasks) == 164
    t = tasks["HumanEval/0"]
    assert t.n_tests == 7 and t.n_doc_examples == 2 and t.entry_point == "has_close_elements"


def test_mutants_are_distinct_compiling_and_not_the_reference(tasks):
    t = tasks["HumanEval/0"]
    muts = make_mutants(t.canonical, t.entry_point, n_single=8, n_double=3, seed=0)
    codes = [c for _, c in muts]
    assert len(codes) == 11 and len(set(codes)) == 11 and t.canonical not in codes
    for c in codes:
        compile(c, "m", "exec")
    assert len({ops.split("+")[0] for ops, _ in muts}) >= 3
    assert make_mutants(t.canonical, t.entry_point, 8, 3, seed=0) == muts  # seeded


def test_harness_labels_reference_mutant_and_hang(tasks):
    t = tasks["HumanEval/0"]
    ok = evaluate(t, t.canonical)
    assert ok.loaded and ok.n_failed(t.n_tests) == 0 and ok.doc_passed is True
    wrong = t.canonical.replace("distance < threshold", "distance > threshold")
    bad = evaluate(t, wrong)
    assert bad.n_failed(t.n_tests) > 0 and bad.doc_passed is False
    hang = t.canonical.replace("for idx, elem in enumerate(numbers):", "while True:\n        pass\n    for idx, elem in enumerate(numbers):")
    h = evaluate(t, hang, per_test_s=0.2)
    assert h.n_failed(t.n_tests) == t.n_tests  # every test fails (timed out or skipped), nothing hangs the host
    t38 = tasks["HumanEval/38"]  # no >>> examples: the docstring critic abstains
    assert evaluate(t38, t38.canonical).doc_passed is None


def test_pyflakes_critic_sees_undefined_names():
    assert pyflakes_messages("def f(x):\n    return x\n") == []
    assert any("undefined name" in m for m in pyflakes_messages("def f(x):\n    return y\n"))


def test_pool_replay_and_estimation(tasks):
    chosen = [tasks["HumanEval/0"], tasks["HumanEval/4"], tasks["HumanEval/12"]]
    pools = build_pools(chosen, PoolConfig(n_single=3, n_double=1), seed=0)
    assert all(p.candidates[0].correct and p.candidates[0].operators == "reference" for p in pools)
    assert sum(len(p.wrong_ids) for p in pools) >= 6
    again = build_pools(chosen, PoolConfig(n_single=3, n_double=1), seed=0)  # from the cache
    assert [c.n_failed for p in again for c in p.candidates] == [c.n_failed for p in pools for c in p.candidates]
    gen = GeneratorModel()
    m = estimate_model(pools, 0.25, gen, seed=0)
    assert 0 < m.prior < 1 and m.refine.rho11 > m.refine.rho01
    assert abs(m.critics[0].youden) < 0.1  # syntax: no signal on well-formed mutants
    assert m.critics[3].youden > 0.3  # public tests do carry signal
    import random

    env = ReplayEnv(pools[0], 0.25, gen, random.Random(1))
    assert len(public_indices(pools[0].task, 0.25)) == 2
    r = run_episode(AlwaysVerify(), env, m, Costs(verify=0.2), max_steps=10)
    assert r.shipped_correct in (True, False) and r.cost > 0


def test_live_env_drives_the_shared_openai_client(tasks):
    """Live mode talks to an endpoint through divelab.chat's client (mocked HTTP, no network)."""
    t = tasks["HumanEval/0"]
    body = t.canonical.split('"""')[-1]
    seen = {}

    def handler(request: httpx.Request) -> httpx.Response:
        seen["auth"] = request.headers.get("authorization")
        seen["body"] = json.loads(request.content)
        return httpx.Response(200, json={"choices": [{"message": {"role": "assistant",
                                                                  "content": f"```python\n{body}\n```"}}]})

    chat = OpenAIChatClient("http://mock/v1", "m1", api_key="k", transport=httpx.MockTransport(handler))
    env = LiveEnv(t, chat)
    assert seen["auth"] == "Bearer k" and seen["body"]["model"] == "m1"
    assert [m["role"] for m in seen["body"]["messages"]] == ["system", "user"]
    assert "for idx" in env.code and env.verify() is True
    down = OpenAIChatClient("http://mock/v1", "m1", max_retries=0,
                            transport=httpx.MockTransport(lambda r: httpx.Response(400, text="bad request")))
    with pytest.raises(ChatClientError, match="400"):
        LiveEnv(t, down)


def test_live_episode_refines_then_ships_verified(tasks):
    t = tasks["HumanEval/0"]
    good = t.canonical
    bad = good.replace("distance < threshold", "distance > threshold")
    chat = ScriptedChatModel([f"```python\n{bad}\n```", f"```python\n{good}\n```"])
    env = LiveEnv(t, chat)
    from divelab.coding.bayes_control.belief import BeliefModel, Likelihood, RefineModel

    model = BeliefModel(0.5, (Likelihood(0.99, 0.98), Likelihood(0.95, 0.85), Likelihood(0.9, 0.1), Likelihood(0.99, 0.2)),
                        RefineModel(0.9, 0.4))
    r = run_episode(DPController(model, Costs(verify=0.3), horizon=4), env, model, Costs(verify=0.3), max_steps=4)
    assert r.shipped_correct is True and len(chat.calls) == 2
    assert "refine" in r.actions and r.actions[0].startswith("critic")
    assert any(e["event"] == "critic:2" and e["passed"] is False for e in env.log)  # doc examples caught it


def test_cli_verify_or_ship_with_loopback_server(tasks, tmp_path):
    import typer
    from typer.testing import CliRunner

    from divelab.coding.bayes_control.cli import register

    app = typer.Typer()  # our command alone (divelab.cli also imports every other system's CLI)
    register(app)
    app.command("noop")(lambda: None)  # with one command typer would make it the root

    body = tasks["HumanEval/0"].canonical

    class H(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802
            self.rfile.read(int(self.headers["Content-Length"]))
            out = json.dumps({"choices": [{"message": {"content": f"```python\n{body}\n```"}}]}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)

        def log_message(self, *a):
            pass

    srv = HTTPServer(("127.0.0.1", 0), H)
    th = threading.Thread(target=srv.serve_forever, daemon=True)
    th.start()
    cal = tmp_path / "cal.json"
    cal.write_text(json.dumps({"prior": 0.5, "critics": [[0.99, 0.98], [0.95, 0.85], [0.9, 0.1], [0.99, 0.2]],
                               "refine": [0.9, 0.4]}))
    try:
        res = CliRunner().invoke(app, ["verify-or-ship", "--base-url", f"http://127.0.0.1:{srv.server_port}/v1",
                                       "--model", "x", "--tasks", "HumanEval/0", "--calibration", str(cal),
                                       "--out", str(tmp_path / "t.json")])
    finally:
        srv.shutdown()
    assert res.exit_code == 0, res.output
    assert "shipped correct: True" in res.output
    assert json.loads((tmp_path / "t.json").read_text())[0]["task_id"] == "HumanEval/0"
    bad = CliRunner().invoke(app, ["verify-or-ship", "--base-url", "http://x/v1", "--model", "x", "--controller", "nope"])
    assert bad.exit_code == 2 and "allowed" in bad.output
    # a server that is down is one error before the first task, exit 2 (was exit 1 after the episode failed)
    down = CliRunner().invoke(app, ["verify-or-ship", "--base-url", f"http://127.0.0.1:{srv.server_port}/v1",
                                    "--model", "x", "--tasks", "HumanEval/0"])
    assert down.exit_code == 2 and "no OpenAI-compatible server answers" in down.output


def test_shuffled_label_control_removes_the_critics_evidence_only(tasks):
    """The negative control's belief model: critic likelihoods fitted on shuffled correctness labels carry no
    evidence, while the prior and the refinement rates stay those of the real logs."""
    chosen = [tasks["HumanEval/0"], tasks["HumanEval/4"], tasks["HumanEval/12"]]
    pools = build_pools(chosen, PoolConfig(n_single=3, n_double=1), seed=0)
    gen = GeneratorModel()
    real = estimate_model(pools, 0.25, gen, seed=0)
    sham = estimate_model(pools, 0.25, gen, seed=0, shuffle_labels=True)
    assert sham.prior == real.prior and sham.refine == real.refine
    assert real.critics[3].youden > 0.3 and abs(sham.critics[3].youden) < 0.15
    assert abs(sham.critics[2].youden) < 0.15 < real.critics[2].youden
    assert estimate_model(pools, 0.25, gen, seed=0, shuffle_labels=False) == real  # the default is unchanged
