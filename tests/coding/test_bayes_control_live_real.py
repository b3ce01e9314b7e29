"""E170 live mode on a real LLM: the pipeline, driven by scripted coders (no model needed)."""

from __future__ import annotations

import pytest

from divelab.chat import ScriptedChatModel
from divelab.codetasks.humaneval import load_tasks
from divelab.coding.bayes_control import live_real, runtime
from divelab.coding.bayes_control.belief import BeliefModel, Likelihood, RefineModel

BELIEF = BeliefModel(prior=0.5, critics=(Likelihood(0.99, 0.9), Likelihood(0.95, 0.8), Likelihood(0.9, 0.4),
                                         Likelihood(0.95, 0.3)), refine=RefineModel(0.9, 0.3))


@pytest.fixture(autouse=True)
def _fast_belief(monkeypatch):  # the replay-fitted default needs labelled mutant pools (slow)
    monkeypatch.setattr(runtime, "default_model", lambda level=0.25, seed=0: BELIEF)


SMALL = live_real.LiveRealConfig(n_test=1, n_calib=1, max_steps=1, max_new_tokens=32)  # one task each, one step


def _coder(correct: bool):
    by_prompt = {t.prompt: t for t in load_tasks()}

    def fn(messages, tools):
        task = next(t for p, t in by_prompt.items() if p in messages[1].content)
        body = task.canonical if correct else task.prompt + "    return None\n"
        return f"```python\n{body}\n```"

    return ScriptedChatModel(fn=fn)


def test_correct_coder_passes_and_memo_shares_generations():
    claims, d = live_real.measure(SMALL, chat=_coder(True))
    assert d["pass_at_1"] == 1.0
    assert d["table"]["always-verify"]["shipped_correct"] == 1.0
    # one first attempt per task (calibration + test) shared by all 8 controllers; refinements memoised too
    refinements = sum(e["refinements"] for e in d["episodes"])
    assert d["llm_calls"] <= 2 + refinements < 1 + len(d["episodes"]) + refinements
    assert d["belief_models"]["SmolLM2-135M-Instruct"]["prior"] > BELIEF.prior  # refit on its own attempts
    assert len(claims) == 2 and all(c.kind.value == "empirical" for c in claims)


def test_wrong_coder_is_never_shipped_by_always_verify():
    claims, d = live_real.measure(SMALL, chat=_coder(False))
    assert d["pass_at_1"] == 0.0
    assert d["table"]["always-verify"]["shipped_correct"] == 0.0
    assert d["table"]["never-verify"]["mean_utility"] == -2.0  # ships wrong code: the loss
    assert d["belief_models"]["SmolLM2-135M-Instruct"]["prior"] < BELIEF.prior
    # a generator that never succeeds is a failed set-up, detected from the run, not a null result
    assert all(c.verdict.value == "uninformative" and "never succeeds" in c.reason for c in claims)
    assert all(len(c.baselines) == 4 and c.compared_with for c in claims)
