"""Tests for divelab.training.world_model (E167, Qwen-AgentWorld)."""

from __future__ import annotations

from collections.abc import Hashable

import numpy as np
import pytest

from divelab.envs.base import InvalidAction, ReplayRestore, TextEnv
from divelab.envs.toy import CorridorEnv
from divelab.lm.models import build_model
from divelab.rl.grpo import GRPOConfig, GRPOTrainer
from divelab.rl.policy import LMPolicy, PolicyConfig, train_word_tokenizer
from divelab.threads import torch_threads
from divelab.training.world_model import (
    CopyWorldModel,
    LookupWorldModel,
    SimulatedEnv,
    State,
    Steered,
    WorldModel,
    collect_transitions,
    evaluate_fidelity,
    fidelity_reward,
    lm_train,
    parse_prediction,
    simulated_env_factory,
    split_by_game,
    train_tokenizer,
    unique_transitions,
)
from divelab.training.world_model.fidelity import outcome_confusion
from divelab.training.world_model.model import Prediction, target_text
from divelab.training.world_model.outcome import OutcomeModel, features, game_goals


def corridor_factory(game_id: str) -> TextEnv:
    n = {"c4": 4, "c5": 5}[game_id]
    return CorridorEnv(n_rooms=n, goal=n - 1, max_steps=8, game_id=game_id)


def corridor_log(episodes: int = 60, games: tuple[str, ...] = ("c4",)):
    """Random-play transitions (one corridor by default: two corridors share state texts with
    different successors, so together they are not a function of the state)."""
    return collect_transitions(corridor_factory, list(games), episodes, 8, seed=0)


class ThreeFieldEnv(ReplayRestore):
    """A deterministic env with TextWorld-shaped observations ('fb | -= room =- | inventory')."""

    def __init__(self) -> None:
        self._seed, self._actions, self._done = None, [], False

    def _obs(self, fb: str) -> str:
        inv = "you carry a key ." if "take key" in self._actions else "you carry nothing ."
        return f"{fb} | -= hall =- | {inv}"

    def reset(self, seed: int | None = None) -> str:
        self._seed, self._actions, self._done = seed, [], False
        return self._obs("welcome")

    def admissible_actions(self) -> list[str]:
        return [] if self._done else ["look", "take key", "open door"]

    def step(self, action: str):
        if action not in self.admissible_actions():
            raise InvalidAction(action)
        self._actions.append(action)
        won = action == "open door" and "take key" in self._actions
        self._done = won or len(self._actions) >= 6
        return self._obs("you see a long hall" if action == "look" else f"you {action}"), float(won), self._done, \
            {"won": won, "truncated": self._done and not won}

    def state_key(self, observation: str) -> Hashable:
        return observation.split(" | ", 1)[-1]

    def _fresh(self) -> ThreeFieldEnv:  # clone() and actions_taken come from ReplayRestore
        return ThreeFieldEnv()


def check_protocol(env: TextEnv, rng: np.random.Generator) -> None:
    """The protocol checks the real envs pass: reset/step/admissible/restore/clone/state_key."""
    assert isinstance(env, TextEnv)
    obs0 = env.reset(0)
    assert env.admissible_actions() and env.actions_taken == []
    with pytest.raises(InvalidAction):
        env.step("fly to the moon")
    seen, acts = [obs0], []
    done, info = False, {}
    while not done:
        a = env.admissible_actions()[int(rng.integers(len(env.admissible_actions())))]
        obs, r, done, info = env.step(a)
        seen.append(obs)
        acts.append(a)
        assert r == float(info["won"])
    assert info["won"] or info.get("truncated") or info.get("lost")
    assert env.admissible_actions() == []
    with pytest.raises(RuntimeError):
        env.step(acts[0])
    k = len(acts) // 2
    assert env.restore(acts[:k]) == seen[k] and env.actions_taken == acts[:k]
    twin = env.clone()
    assert twin.actions_taken == acts[:k] and twin.admissible_actions() == env.admissible_actions()
    a = env.admissible_actions()[0]
    assert twin.step(a)[0] == env.step(a)[0]  # deterministic, independent copies
    assert isinstance(env.state_key(obs0), Hashable)


def test_state_fields_roundtrip_and_normalisation() -> None:
    s = State.from_observation("You take the Key. | -= Cold Room =- A room. | You are carrying: a key.",
                               ["take key", "go east"])
    assert (s.feedback, s.room, s.inventory) == ("you take the key .", "cold room", "you are carrying : a key .")
    assert s.actions == ("go east", "take key")
    assert State.from_observation(s.observation(), s.actions) == s
    toy = State.from_observation("room 0. you see nothing.", ["look"])
    assert toy.room == "" and toy.observation() == "room 0 . you see nothing ."


def test_collect_split_and_errors() -> None:
    log = corridor_log(3, ("c4", "c5"))
    assert {t.game_id for t in log} == {"c4", "c5"} and all(t.depth < 8 for t in log)
    assert collect_transitions(corridor_factory, ["c4"], 3, 8, seed=0) == [t for t in log if t.game_id == "c4"]
    train, test = split_by_game(log, ["c5"])
    assert {t.game_id for t in test} == {"c5"} and {t.game_id for t in train} == {"c4"}
    with pytest.raises(ValueError, match="no transitions"):
        split_by_game([], ["c5"])
    with pytest.raises(ValueError, match="not in the log"):
        split_by_game(log, ["tw-r3-o3-q3-s9"])
    with pytest.raises(ValueError, match="nothing is left"):
        split_by_game(log, ["c4", "c5"])


def test_parse_and_fidelity_reward() -> None:
    t = corridor_log(1)[0]
    good = parse_prediction(target_text(t, reasoning=True), t.state)
    assert good.well_formed and good.state == t.next_state and good.reward == t.reward
    assert fidelity_reward(good, t) == pytest.approx(1.0)
    bad = parse_prediction("[FB] room [R] 1 [END]", t.state)
    assert not bad.well_formed and fidelity_reward(bad, t) == -1.0
    # predicting a win that did not happen is penalised beyond the lost reward-field point
    flat = parse_prediction(target_text(t, reasoning=False).replace("[R] 0", "[R] 1"), t.state)
    assert t.reward == 0 and fidelity_reward(flat, t) == pytest.approx(0.8 - 0.5)


def test_world_model_reaches_exact_fidelity_on_a_deterministic_toy_env() -> None:
    log = corridor_log()
    wm = WorldModel.new(train_tokenizer(log), seed=0)
    before = evaluate_fidelity(wm, log)["overall"]["exact"]
    assert any(t.reward > 0 for t in log)  # the log has wins to predict
    with torch_threads(1):
        lm_train(wm, unique_transitions(log), "sft", steps=200, lr=5e-3, batch_size=16, seed=0)
    ev = evaluate_fidelity(wm, log)["overall"]
    assert before < 0.2 and ev["exact"] == 1.0 and ev["well_formed"] == 1.0


def test_baselines_lookup_is_exact_on_seen_copy_is_not() -> None:
    log = corridor_log()
    assert evaluate_fidelity(LookupWorldModel(log), log)["overall"]["exact"] == 1.0
    assert evaluate_fidelity(CopyWorldModel(), log)["overall"]["exact"] < 0.5


def test_simulated_env_passes_the_protocol_and_matches_the_real_env() -> None:
    log = corridor_log()
    lookup = LookupWorldModel(log)  # a perfect world model of the seen transitions
    real = corridor_factory("c4")
    sim = SimulatedEnv(lookup, real.reset(0), real.admissible_actions(), "c4", max_steps=8)
    check_protocol(sim, np.random.default_rng(0))
    rng = np.random.default_rng(1)
    for _ in range(5):  # step by step the simulator says what the real env says
        o_real, o_sim = real.reset(0), sim.reset(0)
        done = False
        while not done:
            assert sorted(real.admissible_actions()) == sim.admissible_actions()
            a = real.admissible_actions()[int(rng.integers(len(real.admissible_actions())))]
            o_real, r1, done, _ = real.step(a)
            o_sim, r2, done2, _ = sim.step(a)
            assert State.from_observation(o_real, []).feedback == o_sim and r1 == r2 and done == done2
    assert sim.explore() >= 4


class SilentRewards:
    """A world model that gets every next state right and never predicts a win (the failure the
    reward and terminal heads exist for)."""

    def __init__(self, log) -> None:
        self.lookup = LookupWorldModel(log)

    def predict(self, queries):
        return [Prediction(p.state, 0.0, p.well_formed, p.text) for p in self.lookup.predict(queries)]


def test_outcome_heads_learn_rare_wins_and_decide_them_in_the_simulator() -> None:
    log = corridor_log()
    wins = [t for t in log if t.reward > 0]
    assert 0 < len(wins) < len(log) / 5  # wins are rare in random play
    heads = OutcomeModel(unique_transitions(log), seed=0)
    goal = game_goals(log)["c4"]
    decided = heads.decide(goal, [(t.state, t.action) for t in log])
    assert [w for w, _ in decided] == [t.reward > 0 for t in log]  # class-balanced: every win is recalled
    assert all(e or not w for w, e in decided)  # a win ends the episode
    # the language model's own reward token says "never": the simulator's wins come from the heads
    real = corridor_factory("c4")
    silent = SimulatedEnv(SilentRewards(log), real.reset(0), real.admissible_actions(), "c4", max_steps=8)
    sim = SimulatedEnv(SilentRewards(log), real.reset(0), real.admissible_actions(), "c4", max_steps=8,
                       outcome=heads)
    check_protocol(sim, np.random.default_rng(0))
    path = ["go east", "go east", "go east", "take key"]
    for env in (silent, sim, real):
        env.reset(0)
        out = [env.step(a) for a in path]
        # without the heads the episode still ends (no command left) but as a loss, with no reward
        assert out[-1][1] == (0.0 if env is silent else 1.0) and out[-1][2]
        assert out[-1][3]["won"] is (env is not silent) and out[-1][3].get("lost", False) is (env is silent)
    counts = outcome_confusion(SilentRewards(log), heads, unique_transitions(log), game_goals(log))
    assert counts["reward"]["fn"] == 0 and counts["reward"]["tp"] > 0 and counts["done"]["fn"] == 0
    token = outcome_confusion(SilentRewards(log), None, unique_transitions(log), game_goals(log))
    assert token["reward"]["tp"] == 0 and token["reward"]["fn"] == counts["reward"]["tp"]


def test_outcome_features_and_errors() -> None:
    s = State("", "bedchamber", "you are carrying : a keycard .", ("unlock safe with keycard",))
    goal = "first , go south . then , unlock the safe inside the bedchamber with the keycard . you win !"
    f = features(goal, s, "unlock safe with keycard")
    assert f["verb=unlock"] == 1.0 and f["best_overlap"] == 1.0 and f["room_in_best"] == 1.0
    assert f["best_from_end=1"] == 1.0 and features(goal, s, "go north")["best_overlap"] == 0.0
    assert "best_overlap" not in features(goal, s, "look")  # no object to look up in the goal
    assert features(goal, s, "look").keys() & features(goal, s, "wait").keys() == set()  # pairs differ
    no_wins = [t for t in corridor_log() if t.reward == 0]
    never = OutcomeModel(no_wins)  # one class only: predicted as that constant
    assert not any(w or e for w, e in never.decide("x", [(t.state, t.action) for t in no_wins]))
    with pytest.raises(ValueError, match="no transitions"):
        OutcomeModel([])
    with pytest.raises(ValueError, match="no goal for games"):
        OutcomeModel(no_wins, goals={"c5": "x"})
    with pytest.raises(ValueError, match="no first-step transition"):
        game_goals([t for t in no_wins if t.depth > 0])


def test_steered_modes_do_what_they_say() -> None:
    check_protocol(Steered(ThreeFieldEnv(), "partial", 0.5), np.random.default_rng(0))
    check_protocol(Steered(ThreeFieldEnv(), "error", 0.5), np.random.default_rng(0))
    check_protocol(Steered(ThreeFieldEnv(), "paginate", 0.5), np.random.default_rng(0))
    env = Steered(ThreeFieldEnv(), "partial", 1.0)
    env.reset(0)
    obs = env.step("take key")[0]
    assert obs.endswith(" | ...") and "carry" not in obs  # the inventory is withheld
    env = Steered(ThreeFieldEnv(), "error", 1.0)
    env.reset(0)
    obs, r, done, info = env.step("take key")
    assert obs.startswith("error") and info["steered"] == "error" and env.env.actions_taken == []
    env = Steered(ThreeFieldEnv(), "paginate", 1.0)
    env.reset(0)
    page1 = env.step("take key")[0]
    assert "next page" in page1 and env.admissible_actions() == ["next page"]
    page2 = env.step("next page")[0]
    assert page2.endswith("you carry a key .") and env.admissible_actions() == ["look", "take key", "open door"]
    faithful = Steered(ThreeFieldEnv(), "partial", 0.0)
    faithful.reset(0)
    assert faithful.step("take key")[0] == "you take key | -= hall =- | you carry a key ."
    with pytest.raises(ValueError, match="allowed: partial, error, paginate"):
        Steered(ThreeFieldEnv(), "lie")


def test_grpo_trains_unchanged_inside_the_simulator() -> None:
    log = corridor_log()
    make_sim = simulated_env_factory(LookupWorldModel(log), corridor_factory, ["c4"], max_steps=8,
                                     steering={"mode": "error", "rate": 0.2})
    tok = train_word_tokenizer([t.state.observation() for t in log] + [t.action for t in log])
    pol = LMPolicy(build_model("tiny-100k", tok.get_vocab_size(), seed=0, hidden_size=32, num_hidden_layers=1),
                   tok, PolicyConfig(history=0, head_tokens=0, tail_tokens=32))
    with torch_threads(1):
        logs = GRPOTrainer(pol, make_sim, ["c4"], GRPOConfig(iterations=2, group_size=4, max_steps=8, seed=0)).train()
    assert len(logs) == 2 and logs[0].n_steps > 0
    with pytest.raises(ValueError, match="unknown game id"):
        make_sim("c5")


def test_world_model_save_load_roundtrip(tmp_path) -> None:
    log = corridor_log(3)
    wm = WorldModel.new(train_tokenizer(log), seed=0)
    q = [(log[0].state, log[0].action)]
    wm.save(tmp_path / "wm")
    assert WorldModel.load(tmp_path / "wm").predict(q)[0].text == wm.predict(q)[0].text
    with pytest.raises(FileNotFoundError):
        WorldModel.load(tmp_path / "nothing")


def test_smoke_reproduction() -> None:
    from divelab.claims import Kind
    from divelab.scaleout import run_reproduction

    rep = run_reproduction("divelab.training.world_model", "smoke", 0)
    assert rep.system == "world-model" and len(rep.claims) >= 8
    from divelab.training.world_model import transfer

    # the transfer to BFCL runs at full only, and says so
    moved = [c for c in rep.claims if c.statement in (transfer.STATEMENT, transfer.CHECK_STATEMENT)]
    assert [c.verdict.value for c in moved] == ["not checkable here"] * 2 and "full scale" in moved[0].note
    assert sum(c.kind == Kind.EMPIRICAL for c in rep.claims) >= 6
    assert set(rep.details["fidelity_held_out"]) == {"copy", "lookup", "cpt", "sft", "rl"}
    by = {c.statement: c for c in rep.claims}
    # judged against the stronger of the copy and lookup world models, both recorded
    vs = by["the trained world model beats the best simple world model on held-out games (F1)"]
    assert {b["name"] for b in vs.baselines} == {"copy", "lookup"}
    assert vs.compared_with == max(vs.baselines, key=lambda b: b["value"])["name"]
    # one world-model training run: stage and model comparisons cannot separate the method from the run
    for c in rep.claims:
        if c.rule and c.rule["name"] == "direction" and ("stage raises" in c.statement or c is vs):
            assert c.rule["args"]["training_runs"] == 1 and c.verdict.value != "reproduced", c.statement
        if c.rule and c.rule["name"] == "value":  # the rate's interval (games resampled whole) is in the rule
            assert c.rule["args"]["ci"] is not None, c.statement
    # a simulator GRPO never won inside is a failed set-up, read from the runs, not noise; so is a
    # comparison over fewer than 3 training seeds (smoke has one)
    from divelab.training.world_model.reproduce import GRPO_STATEMENTS

    sim = by[GRPO_STATEMENTS["real"][0]]
    never = max(rep.details["grpo_success_inside_training_env"]["sim"]) == 0
    assert sim.verdict.value == "uninformative" and ("never succeeded" in sim.reason) is never
    # judged against the strongest of real-game GRPO, the untrained start and a random agent, all recorded per seed
    assert {b["name"] for b in sim.baselines} == {"real", "start", "random"}
    assert sim.compared_with == max(sim.baselines, key=lambda b: b["value"])["name"]
    # against the untrained agents alone: its own row, unless one of them is already the strongest above
    start = by.get(GRPO_STATEMENTS["start"][0])
    assert (start is None) is (sim.compared_with in ("start", "random"))
    assert start is None or {b["name"] for b in start.baselines} == {"start", "random"}
    runs = rep.details["grpo_real_success"]
    assert len(runs["start"]) == len(runs["random"]) == len(runs["sim"]) == len(runs["sham-sim"])
    assert sim.replication["unit"] == "training runs" and sim.falsifier
    # the reward and terminal heads are scored on held-out transitions against the strongest trivial rule, with
    # heads fitted on shuffled labels as the negative control (the terminal head is a claim of its own only when
    # some logged episode ends without a win: otherwise it is the win decision again, one measurement that makes
    # one claim)
    lost = any(k.startswith("the simulator's episode-end") for k in by)
    for outcome in ("win (reward)", *(("episode-end (terminal)",) if lost else ())):
        for metric in ("precision", "recall"):
            c = next(c for k, c in by.items() if k.startswith(f"the simulator's {outcome} decisions on held-out "
                                                                f"games: {metric}"))
            assert c.kind == Kind.EMPIRICAL and (c.measured is None or c.ci is not None), c.statement
            assert c.measured is None or (c.replication["clustered_by"] == "game"
                                          and "control" in c.rule["args"]), c.statement
    assert rep.details["outcome_held_out"]["heads fitted on shuffled labels"]["reward"] is not None
    assert rep.details["outcome_held_out"]["heads"]["done"] is not None  # kept in details either way
    held = rep.details["outcome_held_out"]["heads"]["reward"]
    assert sum(held.values()) == rep.details["fidelity_held_out"]["rl"]["n"]
    # the SmolLM2 world model: every row is there; with the model installed, it is judged against the strongest
    # of the tiny model's stages, lookup and copy (all recorded), and one GRPO seed is uninformative
    from divelab.lm import real
    from divelab.training.world_model.reproduce import LLM_STATEMENTS

    llm = {k: by[s] for k, (s, _) in LLM_STATEMENTS.items() if s in by}
    assert set(LLM_STATEMENTS) - set(llm) <= {"start"}  # "start" is folded into "real" when an untrained agent wins
    if not real.is_available():
        assert all(c.verdict.value == "not checkable here" for c in llm.values())
        return
    vs_llm = llm["vs"]
    assert {b["name"] for b in vs_llm.baselines} == {"tiny cpt", "tiny sft", "tiny rl", "lookup", "copy"}
    assert vs_llm.compared_with == max(vs_llm.baselines, key=lambda b: b["value"])["name"]
    assert "competence" in vs_llm.note and llm["exact"].ci is not None
    details = rep.details["smollm2_world_model"]
    assert set(details["fidelity_held_out"]) == {"cpt", "sft"} and details["n_eval"] == 6
    for k in ("real", "start", "tiny"):
        assert k not in llm or llm[k].verdict.value == "uninformative", k
    assert len(details["grpo"]["real_success"]["llm-sim"]) == 1
