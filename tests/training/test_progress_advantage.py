"""Progress advantage (E173): aggregations on hand-worked cases, scoring with two tiny HF models,
the tabular identity (property-based), the text game, the CLI and the smoke reproduction."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from divelab.lm.models import build_model
from divelab.training.progress_advantage import (
    ProgressAdvantage,
    Step,
    Trajectory,
    TrajectoryScores,
    aggregate_steps,
    aggregate_tokens,
    auroc,
    best_of_n,
    failure_step,
)
from divelab.training.progress_advantage import mdp as M
from divelab.training.progress_advantage.lmcheck import make_tokenizer
from divelab.training.progress_advantage.textgame import ACTIONS, GameSpec, KeyDoorGame, expert_action

# -- aggregations ---------------------------------------------------------------------------------


def test_token_aggregations_hand_worked() -> None:
    v = [-1.0, 2.0, 0.5]
    assert aggregate_tokens(v, "mean") == pytest.approx(0.5)
    assert aggregate_tokens(v, "sum") == pytest.approx(1.5)
    assert aggregate_tokens(v, "last") == pytest.approx(0.5)
    assert aggregate_tokens(v, "min") == pytest.approx(-1.0)
    assert aggregate_tokens(v, "max") == pytest.approx(2.0)


def test_step_aggregations_bottom10() -> None:
    assert aggregate_steps(np.arange(20.0), "bottom10") == pytest.approx(0.5)  # lowest 2 of 20
    assert aggregate_steps([3.0, -4.0, 1.0, 2.0, 0.0], "bottom10") == pytest.approx(-4.0)  # at least one
    assert aggregate_steps(np.arange(21.0), "bottom10") == pytest.approx(1.0)  # ceil(2.1) = 3 lowest
    assert aggregate_steps([1.0, 3.0], "mean") == pytest.approx(2.0)


def test_aggregation_errors_name_what_is_allowed() -> None:
    with pytest.raises(ValueError, match="allowed: mean, sum, last, min, max"):
        aggregate_tokens([1.0], "median")
    with pytest.raises(ValueError, match="bottom10"):
        aggregate_steps([1.0], "top")
    with pytest.raises(ValueError, match="empty"):
        aggregate_steps([], "mean")


def test_failure_step_is_argmin_of_running_sum() -> None:
    assert failure_step([1.0, -3.0, 1.0, 1.0]) == 1  # cumsum 1, -2, -1, 0
    assert failure_step([-1.0, -1.0, 5.0, -10.0]) == 3  # cumsum -1, -2, 3, -7
    assert failure_step([0.5, -0.5, 0.0]) == 1  # tie between steps 1 and 2 -> earliest
    assert best_of_n([0.1, 0.7, 0.7, -1]) == 1


def test_auroc_hand_worked() -> None:
    assert auroc([0.1, 0.2, 0.8, 0.9], [0, 0, 1, 1]) == pytest.approx(1.0)
    assert auroc([0.9, 0.8, 0.2, 0.1], [0, 0, 1, 1]) == pytest.approx(0.0)
    # positives {0.5, 0.3}, negatives {0.4, 0.3}: pairs won 1 + 1 + 0 + 0.5 = 2.5 of 4
    assert auroc([0.5, 0.3, 0.4, 0.3], [1, 1, 0, 0]) == pytest.approx(0.625)
    with pytest.raises(ValueError, match="both classes"):
        auroc([1.0, 2.0], [1, 1])


def test_trajectory_scores_hand_worked() -> None:
    s = TrajectoryScores(policy_logprobs=[np.array([-1.0, -2.0]), np.array([-0.5])],
                         reference_logprobs=[np.array([-2.0, -2.0]), np.array([-1.0])],
                         policy_entropy=[np.zeros(2), np.zeros(1)], policy_self_certainty=[np.zeros(2), np.zeros(1)],
                         beta=0.5)
    np.testing.assert_allclose(s.step_advantages("mean"), [0.25, 0.25])
    np.testing.assert_allclose(s.step_advantages("sum"), [0.5, 0.25])
    np.testing.assert_allclose(s.step_advantages("min"), [0.0, 0.25])
    np.testing.assert_allclose(s.step_advantages("max"), [0.5, 0.25])
    np.testing.assert_allclose(s.step_advantages("last"), [0.0, 0.25])
    assert s.score("sum", "min") == pytest.approx(0.25)
    assert s.score("max", "sum") == pytest.approx(0.75)
    assert s.mean_logprob() == pytest.approx(-3.5 / 3)


# -- scoring with two tiny HF models ------------------------------------------------------------------


@pytest.fixture(scope="module")
def pair():
    tok = make_tokenizer(GameSpec())
    return build_model("tiny-100k", len(tok), seed=0), build_model("tiny-100k", len(tok), seed=1), tok


def _trajs() -> list[Trajectory]:
    return [Trajectory(steps=[Step("start room 1 key east door east 6 left >", "go east ;"),
                              Step("ok room 2 key here door east 5 left >", "take key ;")], success=True),
            Trajectory(steps=[Step("start room 0 key here door east 7 left >", "open door ;")], success=False),
            Trajectory(steps=[Step("start room 3 key west door east 6 left >", "go go")])]


def test_scores_match_a_manual_forward_pass(pair) -> None:
    policy, reference, tok = pair
    pa = ProgressAdvantage(policy, reference, tok, beta=0.3)
    scored = pa.score_trajectories(_trajs())
    assert [s.n_steps for s in scored] == [2, 1, 1]
    assert [len(x) for x in scored[0].policy_logprobs] == [3, 3]
    assert len(scored[2].policy_logprobs[0]) == 2
    # independent computation for trajectory 0, step 1 ("take key ;")
    text = "start room 1 key east door east 6 left > go east ; ok room 2 key here door east 5 left > take key ;"
    ids = [tok.bos_token_id, *tok.encode(text, add_special_tokens=False)]
    with torch.no_grad():
        lp_pol = torch.log_softmax(policy(input_ids=torch.tensor([ids])).logits[0].double(), -1)
        lp_ref = torch.log_softmax(reference(input_ids=torch.tensor([ids])).logits[0].double(), -1)
    n = len(ids)
    want_p = [lp_pol[j - 1, ids[j]].item() for j in range(n - 3, n)]
    want_r = [lp_ref[j - 1, ids[j]].item() for j in range(n - 3, n)]
    np.testing.assert_allclose(scored[0].policy_logprobs[1], want_p, atol=1e-4)
    np.testing.assert_allclose(scored[0].reference_logprobs[1], want_r, atol=1e-4)
    assert scored[0].step_advantages("sum")[1] == pytest.approx(0.3 * (sum(want_p) - sum(want_r)), abs=1e-4)
    # entropies are valid: 0 <= H <= log V
    ent = np.concatenate(scored[0].policy_entropy)
    assert np.all(ent >= 0) and np.all(ent <= np.log(len(tok)) + 1e-6)


def test_batching_does_not_change_scores(pair) -> None:
    policy, reference, tok = pair
    a = ProgressAdvantage(policy, reference, tok, beta=1.0, batch_size=1).score_trajectories(_trajs())
    b = ProgressAdvantage(policy, reference, tok, beta=1.0, batch_size=8).score_trajectories(_trajs())
    for x, y in zip(a, b, strict=True):
        np.testing.assert_allclose(x.step_advantages("sum"), y.step_advantages("sum"), atol=1e-4)


def test_identical_models_score_zero_and_best_of_n(pair) -> None:
    policy, _, tok = pair
    twin = build_model("tiny-100k", len(tok), seed=0)
    pa = ProgressAdvantage(policy, twin, tok, beta=1.0)
    np.testing.assert_allclose(pa.scores(_trajs(), "sum", "sum"), 0.0, atol=1e-5)
    _, reference, _ = pair
    pa = ProgressAdvantage(policy, reference, tok, beta=1.0)
    scores = pa.scores(_trajs(), "min", "min")
    assert pa.best_of_n(_trajs(), "min", "min") == int(np.argmax(scores))
    assert 0 <= pa.localise_failure(_trajs()[0]) < 2


def test_mismatches_are_refused(pair) -> None:
    policy, reference, tok = pair
    with pytest.raises(ValueError, match="different vocabulary sizes"):
        ProgressAdvantage(policy, build_model("tiny-100k", len(tok) + 3, seed=0), tok)
    other_tok = make_tokenizer(GameSpec(n_rooms=3, slack=0))
    with pytest.raises(ValueError, match="tokenizers differ"):
        ProgressAdvantage(policy, reference, tok, reference_tokenizer=other_tok)
    small = build_model("tiny-100k", 10, seed=0)
    with pytest.raises(ValueError, match="do not belong together"):
        ProgressAdvantage(small, build_model("tiny-100k", 10, seed=1), tok)
    with pytest.raises(ValueError, match="same object"):
        ProgressAdvantage(policy, policy, tok)
    with pytest.raises(ValueError, match="beta must be a positive"):
        ProgressAdvantage(policy, reference, tok, beta=0.0)
    with pytest.raises(ValueError, match="at least one step"):
        ProgressAdvantage(policy, reference, tok).score_trajectories([Trajectory(steps=[])])


def test_trajectory_json_errors() -> None:
    with pytest.raises(ValueError, match="'steps' list"):
        Trajectory.from_dict({"actions": []})
    with pytest.raises(ValueError, match="step 0 must be an object with a string 'action'"):
        Trajectory.from_dict({"steps": [{"observation": "x"}]})
    t = Trajectory.from_dict({"steps": [{"observation": "o", "action": "a"}], "success": 1, "group": 3})
    assert t.success is True and t.meta == {"group": 3}


# -- the exact tabular check -------------------------------------------------------------------------


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000), n_states=st.integers(2, 6), n_actions=st.integers(2, 4),
       beta=st.floats(0.05, 3.0), gamma=st.floats(0.3, 0.95))
def test_identity_on_random_stochastic_mdps(seed: int, n_states: int, n_actions: int, beta: float,
                                            gamma: float) -> None:
    rng = np.random.default_rng(seed)
    mdp = M.random_mdp(rng, n_states, n_actions, gamma)
    ref = rng.dirichlet(np.ones(n_actions), size=n_states)
    Q, V = M.soft_value_iteration(mdp, ref, beta)
    pi = M.soft_policy_iteration(mdp, ref, beta)
    assert M.identity_error(pi, ref, beta, Q, V) < 1e-8
    # pi really is the optimum of the regularised objective: no random perturbation beats it
    best = M.kl_objective(mdp, pi, ref, beta)
    for _ in range(3):
        other = pi * np.exp(rng.normal(scale=0.3, size=pi.shape))
        other /= other.sum(1, keepdims=True)
        assert M.kl_objective(mdp, other, ref, beta) <= best + 1e-9


def test_reward_recovery_holds_only_without_slip() -> None:
    ref = np.full((6, 3), 1 / 3)
    gaps = {}
    for slip in (0.0, 0.2):
        mdp = M.slip_chain(6, slip)
        Q, V = M.soft_value_iteration(mdp, ref, 0.5)
        pi = M.soft_policy_iteration(mdp, ref, 0.5)
        assert M.identity_error(pi, ref, 0.5, Q, V) < 1e-8
        gaps[slip] = M.reward_recovery_gap(mdp, pi, ref, 0.5, V)
    assert gaps[0.0] < 1e-9
    assert gaps[0.2] > 0.05


def test_kl_policy_gradient_approaches_identity() -> None:
    mdp = M.slip_chain(6, 0.2)
    ref = np.full((6, 3), 1 / 3)
    Q, V = M.soft_value_iteration(mdp, ref, 0.5)
    h = M.kl_policy_gradient(mdp, ref, 0.5, Q, V, steps=600, lr=1.0, log_every=100)
    assert h.identity_error[0] > 0.5
    assert h.identity_error[-1] < 1e-3
    assert h.objective[-1] > h.objective[0]
    s1 = M.kl_policy_gradient(mdp, ref, 0.5, Q, V, steps=30, sampled=True, seed=3)
    s2 = M.kl_policy_gradient(mdp, ref, 0.5, Q, V, steps=30, sampled=True, seed=3)
    assert s1.identity_error == s2.identity_error  # same seed, same run
    assert s1.identity_error[-1] < s1.identity_error[0]


def test_mdp_input_errors() -> None:
    with pytest.raises(ValueError, match="slip must be in"):
        M.slip_chain(5, 1.5)
    mdp = M.slip_chain(4, 0.1)
    with pytest.raises(ValueError, match="pi_ref must have shape"):
        M.soft_value_iteration(mdp, np.full((4, 2), 0.5), 1.0)


# -- the text game and its oracle -------------------------------------------------------------------------


def test_expert_wins_and_oracle_labels_first_wrong_step() -> None:
    from divelab.training.progress_advantage.lmcheck import Episode, oracle_labels

    spec = GameSpec()
    for start in range(spec.n_rooms):
        for key in range(spec.n_rooms - 1):
            g = KeyDoorGame(spec, start, key)
            while not g.done:
                g.step(expert_action(spec, g.state))
            assert g.won
    g = KeyDoorGame(spec, 1, 2)  # shortest 5 steps, budget 6
    states, acts = [], ["go east ;", "take key ;", "go west ;", "go east ;", "go east ;", "go east ;"]
    for a in acts:
        states.append(g.state)
        g.step(a)
    assert g.done and not g.won
    ep = Episode([], [], [""] * 6, acts, states, False, (1, 2))
    adv, wrong = oracle_labels(spec, ep)
    assert wrong == 2  # walking away with the key exhausts the budget
    assert adv[0] == 0 and adv[2] == -1
    assert set(ACTIONS) == {"go east ;", "go west ;", "take key ;", "open door ;"}


def test_sampling_is_seeded(pair) -> None:
    from divelab.training.progress_advantage.lmcheck import sample_tasks

    policy, _, tok = pair
    a = sample_tasks(policy, tok, GameSpec(), [(0, 1), (2, 3)], 2, seed=5)
    b = sample_tasks(policy, tok, GameSpec(), [(0, 1), (2, 3)], 2, seed=5)
    assert [e.ids for e in a] == [e.ids for e in b]
    for e in a:  # the scorer re-tokenises exactly what was sampled
        tt = ProgressAdvantage(policy, pair[1], tok).tokenize(e.to_trajectory())
        assert tt.input_ids == e.ids and tt.action_spans == e.spans


# -- CLI and reproduction ----------------------------------------------------------------------------------


def test_cli_scores_a_jsonl(pair, tmp_path) -> None:
    from typer.testing import CliRunner

    from divelab.cli import app
    from divelab.training.progress_advantage.lmcheck import save_pair

    policy, reference, tok = pair
    save_pair(policy, reference, tok, tmp_path)
    data = tmp_path / "t.jsonl"
    rows = [dict(t.to_dict(), group=0) for t in _trajs()[:2]]
    data.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    out = tmp_path / "scores.jsonl"
    res = CliRunner().invoke(app, ["score-trajectories", str(data), "--policy", str(tmp_path / "policy"),
                                   "--reference", str(tmp_path / "reference"), "--beta", "0.5",
                                   "--token-agg", "min", "--out", str(out)])
    assert res.exit_code == 0, res.output
    got = [json.loads(x) for x in out.read_text().splitlines()]
    want = ProgressAdvantage(policy, reference, tok, beta=0.5).scores(_trajs()[:2], "min", "mean")
    np.testing.assert_allclose([g["score"] for g in got], want, atol=1e-4)
    assert sum(g["best_in_group"] for g in got) == 1
    bad = CliRunner().invoke(app, ["score-trajectories", str(data), "--policy", str(tmp_path / "policy"),
                                   "--reference", str(tmp_path / "reference"), "--step-agg", "median"])
    assert bad.exit_code == 2 and "allowed" in bad.output


def test_reproduce_smoke_computes_claims() -> None:
    import re

    from divelab.claims import Kind, Verdict
    from divelab.scaleout import run_reproduction
    from divelab.training.progress_advantage.lm_claims import SHAM
    from divelab.training.progress_advantage.reproduce import PLANS, exact_check

    rep = run_reproduction("divelab.training.progress_advantage", "smoke", 0)
    assert rep.system == "progress-advantage"
    lm = rep.details["lm"]
    runs = PLANS["smoke"].training_runs
    assert set(lm) == {"TextWorld deterministic", "TextWorld slippery (slip 0.2)"}
    for variant in lm.values():  # one result per training run, each reseeded
        assert len(variant) == runs
        assert len({r["config"]["testbed"]["seed"] for r in variant}) == runs
        for res in variant:  # 2 games x 2 groups x 4 rollouts, scored by both the token and command levels
            assert res["policy"]["n_rollouts"] == 16 and res["command_level"]["n_rollouts"] == 16
            assert len(res["policy"]["progress"]) == 30 and "mean command log-prob" in res["policy"]["baselines"]
            assert res["policy"]["step_corr_mc"]["n_steps"] == 4
            assert all(0.9 < v <= 1.0 for v in res["optimal_success"].values())
    assert len(rep.claims) >= 5
    assert rep.claims[0].measured < 1e-8 and rep.claims[0].verdict is Verdict.REPRODUCED
    assert [c.kind for c in rep.claims[:3]] == [Kind.CHECK] * 3
    pg = rep.claims[2]
    assert pg.rule["name"] == "bound" and (pg.verdict is Verdict.REPRODUCED) == (pg.measured <= 1e-6)  # can fail
    bon = [c for c in rep.claims if c.statement.startswith("best-of-") and c.verdict is not Verdict.NOT_CHECKABLE]
    assert len(bon) == 2 and all(c.rule["name"] == "direction" and "best-of-" not in c.compared_with for c in bon)
    # every baseline, the trivial picks included, is recorded beside the verdict, which is taken on the strongest
    names = set(lm["TextWorld deterministic"][0]["policy"]["baselines"]) | {"random pick", "first rollout"}
    assert all({b["name"] for b in c.baselines} == names for c in bon)
    assert all(c.compared_with == max(c.baselines, key=lambda b: b["value"])["name"] for c in bon)
    # no comparison with a baseline's point estimate as if it were chance: paired differences over training runs
    lm_claims = [c for c in rep.claims if c.kind is Kind.EMPIRICAL and c.verdict is not Verdict.NOT_CHECKABLE]
    assert len(lm_claims) == 10 and all(c.rule["name"] == "direction" for c in lm_claims)
    assert all(c.replication == {"unit": "training runs", "n": runs, "clustered_by": ""} and c.falsifier
               and c.rule["args"]["training_runs"] == runs and c.rule["args"]["control"]["name"] == SHAM
               for c in lm_claims)
    # statements name no measured count (they are matched across runs and machines)
    assert not any(re.search(r"\b\d+ (failed|steps)\b", c.statement) for c in rep.claims)
    assert all(c.rule["args"]["exact"] for c in rep.claims if c.rule and c.rule["name"] == "bound")
    agg = [c for c in rep.claims if c.statement.startswith("dependence on the aggregation")]
    assert len(agg) == 2 and all(c.rule["name"] == "direction" and "sum/sum" in c.baseline for c in agg)
    assert all(c.measured is not None for c in rep.claims if c.verdict is not Verdict.NOT_CHECKABLE)
    assert rep.figures and rep.setup
    json.loads(rep.to_json())
    a, b = exact_check(PLANS["smoke"].exact, 1), exact_check(PLANS["smoke"].exact, 1)
    assert a["random_identity_error"] == b["random_identity_error"]
    assert a["pg_sampled"]["identity_error"] == b["pg_sampled"]["identity_error"]


# -- the TextWorld check's pieces, on the engine's toy corridor -----------------------------------------


def _corridor(max_steps: int = 6):
    from divelab.envs.toy import CorridorEnv

    return lambda game_id: CorridorEnv(n_rooms=3, goal=1, max_steps=max_steps)


def _engine_step(obs: str, action: str, context: str = "", candidates: list[str] | None = None, info=None):
    from divelab.rl.rollout import Step as EStep

    cands = candidates or [action]
    return EStep(observation=obs, context=context, action=action, candidates=cands, action_index=cands.index(action),
                 logprob=0.0, reward=0.0, state_key=obs, next_state_key=None, step_id=0, done=False, info=info or {})


def test_slip_env_executes_random_commands_and_restores_exactly() -> None:
    from divelab.training.progress_advantage.twcheck import SlipEnv, slip_factory

    rng = np.random.default_rng(0)
    env = SlipEnv(_corridor()("c"), 0.0, rng)
    env.reset(0)
    _, _, _, info = env.step("go east")
    assert info["executed"] == "go east" and not info["slipped"]
    make = slip_factory(_corridor(12), 1.0, seed=3)
    env = make("c")
    env.reset(0)
    executed, slipped, last = [], 0, None
    for _ in range(8):
        adm = env.admissible_actions()
        last, _, done, info = env.step("wait")
        assert info["executed"] in adm
        executed.append(info["executed"])
        slipped += info["slipped"]
        if done:
            break
    assert 0 < slipped < len(executed)  # slip 1 draws among all commands, "wait" included
    assert env.restore(executed) == last and env.actions_taken == executed
    with pytest.raises(ValueError, match="slip"):
        SlipEnv(_corridor()("c"), 1.5, rng)


def test_oracle_values_and_first_wrong_step_on_a_hand_made_graph() -> None:
    from types import SimpleNamespace

    from divelab.training.progress_advantage.twcheck import Oracle

    graph = {"roots": {"null": 0}, "nodes": [
        {"admissible": ["win", "wait"], "done": False,
         "children": {"win": ["", 1.0, True, {}, 1], "wait": ["", 0.0, False, {}, 0]}},
        {"admissible": [], "done": True, "children": {}}]}
    traj = SimpleNamespace(steps=[_engine_step("o", "wait"), _engine_step("o", "win")])
    adv, wrong = Oracle(graph, max_steps=2, slip=0.0, gamma=0.9).label(traj)
    np.testing.assert_allclose(adv, [-0.1, 0.0])
    assert wrong == 0
    o = Oracle(graph, max_steps=2, slip=0.5, gamma=0.9)  # worked by hand
    assert o.value(0, 1) == pytest.approx(0.75)
    assert o.q(0, "win", 2) == pytest.approx(0.91875) and o.q(0, "wait", 2) == pytest.approx(0.75625)
    assert o.value(0, 2) == pytest.approx(0.91875)
    assert Oracle(graph, 2, 0.0).label(SimpleNamespace(steps=[_engine_step("o", "jump")])) is None


def test_mc_advantage_of_a_uniform_policy_on_the_last_step() -> None:
    from divelab.rl.rollout import Trajectory as ETraj
    from divelab.rl.warmstart import UniformPolicy
    from divelab.training.progress_advantage.twcheck import mc_advantage

    acts = ["go east", "wait", "wait", "wait", "wait", "take key"]
    env = _corridor()("c")
    obs = [env.reset(0)]
    for a in acts[:-1]:
        obs.append(env.step(a)[0])
    traj = ETraj("corridor", 0, [_engine_step(o, a) for o, a in zip(obs, acts, strict=True)], True, False, seed=0)
    # one step left in the key room: taking the key wins (Q = 1); a uniform pick of 5 commands wins 1/5
    a = mc_advantage(UniformPolicy(), _corridor(), traj, 5, 400, 6, np.random.default_rng(0))
    assert a == pytest.approx(0.8, abs=0.08)
    b = mc_advantage(UniformPolicy(), _corridor(), traj, 1, 50, 6, np.random.default_rng(1))
    assert b == mc_advantage(UniformPolicy(), _corridor(), traj, 1, 50, 6, np.random.default_rng(1))


@pytest.fixture(scope="module")
def corridor_pair():
    from divelab.rl.policy import LMPolicy, PolicyConfig, train_word_tokenizer
    from divelab.rl.testbed import SMALL_LM

    texts = ["room 0. you see nothing.", "room 1. you see a key.", "you win. look wait go west go east take key"]
    tok = train_word_tokenizer(texts)
    policy, reference = (LMPolicy(build_model("tiny-100k", tok.get_vocab_size(), seed=s, **SMALL_LM), tok,
                                  PolicyConfig(history=0, head_tokens=0, tail_tokens=16)) for s in (0, 1))
    return policy, reference, tok


def test_token_and_command_level_scores_agree_with_the_engine_policy(corridor_pair) -> None:
    from divelab.rl.rollout import Trajectory as ETraj
    from divelab.training.progress_advantage.twcheck import (
        sample_groups,
        score_command_level,
        score_token_level,
    )

    policy, reference, tok = corridor_pair
    a = sample_groups(policy, _corridor(), ["corridor"], reps=2, n=3, max_steps=5, seed=4)
    b = sample_groups(policy, _corridor(), ["corridor"], reps=2, n=3, max_steps=5, seed=4)
    assert len(a) == 6 and [[s.action for s in t.steps] for t in a] == [[s.action for s in t.steps] for t in b]
    pa = ProgressAdvantage(policy.model, reference.model, tok, beta=0.05)
    token, command = score_token_level(pa, policy, a), score_command_level(policy, reference, a, beta=0.05)
    for t, x, c in zip(a, token, command, strict=True):
        assert x.n_steps == c.n_steps == len(t.steps)
        # the command level is exactly the engine policy's log-prob of the chosen command
        np.testing.assert_allclose(c.step_logprobs("sum"), [s.logprob for s in t.steps], atol=1e-5)
    # same context, two commands: token-level sums differ exactly as the command log-probs do
    ctx, cands = "room 1. you see a key.", ["look", "take key", "go west"]
    pair = [ETraj("c", 0, [_engine_step("o", act, ctx, cands)], False, False) for act in ("look", "take key")]
    tk, cm = score_token_level(pa, policy, pair), score_command_level(policy, reference, pair, beta=0.05)
    np.testing.assert_allclose(tk[1].step_logprobs("sum") - tk[0].step_logprobs("sum"),
                               cm[1].step_logprobs("sum") - cm[0].step_logprobs("sum"), atol=1e-5)
    # the action span is the command's words then [EOS], as the engine scores it
    assert tk[0].policy_logprobs[0].shape == (2,) and tk[1].policy_logprobs[0].shape == (3,)
