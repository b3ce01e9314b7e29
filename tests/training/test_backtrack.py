"""E163 (learning to backtrack): the maze mapping, the zero-signal property, rollouts, fits, and a
smoke reproduction."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from divelab import stats
from divelab.claims import Kind, Verdict
from divelab.lm.models import build_model
from divelab.training.backtrack import (
    VOCAB,
    Explorer,
    Maze,
    MazeSpec,
    MazeWalker,
    fit_growth,
    golden_episode,
    rollout,
    sample_mazes,
    signal_share,
)
from divelab.training.backtrack.policy import rollout_reference
from divelab.verdicts import reapply


def _maze(K: int, L: int, W: int, correct: tuple[int, ...]) -> Maze:
    return Maze(spec=MazeSpec(K, L, W), correct=correct)


@pytest.mark.parametrize(("K", "L", "W"), [(1, 2, 1), (3, 2, 2), (4, 3, 3), (2, 5, 4)])
def test_golden_path_is_shortest_and_never_backward(K: int, L: int, W: int) -> None:
    maze = Maze.sample(MazeSpec(K, L, W), np.random.default_rng(K * 10 + L))
    w = MazeWalker(maze)
    for a in maze.golden_actions():
        assert not w.backward_facing()
        w.step(a)
    assert w.done and w.steps == K * (W + 1) == maze.spec.shortest_path
    ep = golden_episode(maze)
    assert not any(ep.backward_flags()) and ep.steps == K * (W + 1)


def test_dead_end_structure_and_backward_facing_states() -> None:
    maze = _maze(2, 3, 2, correct=(1, 0))
    w = MazeWalker(maze)
    assert w.observation() == "S" and w.legal_actions() == ["E0", "E1", "E2"]
    assert w.step("E2") == "C" and not w.backward_facing()  # walking in: not yet known to be wrong
    assert w.step("F") == "D" and w.backward_facing()  # W = 2 steps down a wrong exit: dead end
    assert w.legal_actions() == ["B", "R"]
    assert w.step("B") == "C" and w.backward_facing()  # on the way back out
    assert w.step("F") == "D" and w.backward_facing()  # a re-entry is still backward-facing
    w.step("B")
    assert w.step("B") == "S" and w.backward_facing()  # the junction after a failed exit
    assert w.step("E1") == "C" and not w.backward_facing()  # a new exit: forward again
    w.step("F")
    assert w.step("F") == "J" and w.k == 1  # the correct corridor leads on after W cells
    assert w.step("E2") == "C"
    w.step("F")
    assert w.step("R") == "S" and not w.backward_facing() and w.restarts == 1
    with pytest.raises(ValueError, match="illegal move 'F'"):
        w.step("F")  # at a junction only exits (and B beyond the start)


def test_bad_specs_name_the_problem() -> None:
    with pytest.raises(ValueError, match="K \\(depth\\)"):
        MazeSpec(0, 2, 2)
    with pytest.raises(ValueError, match="L \\(branching\\)"):
        MazeSpec(2, 1, 2)
    with pytest.raises(ValueError, match="W \\(dead-end length\\)"):
        MazeSpec(2, 2, 0)


def _scripted(maze: Maze, rng: np.random.Generator, backtrack: bool) -> int:
    """Optimal backtracker (untried exits in random order) or always-restart agent."""
    w = MazeWalker(maze)
    tried: dict[int, set[int]] = {}
    while not w.done:
        obs = w.observation()
        if obs in ("S", "J"):
            left = [i for i in range(maze.spec.L) if i not in tried.get(w.k, set())] if backtrack else \
                list(range(maze.spec.L))
            x = int(rng.choice(left))
            tried.setdefault(w.k, set()).add(x)
            w.step(f"E{x}")
        elif obs == "D":
            w.step("B" if backtrack else "R")
        else:
            w.step("B" if w.backward_facing() else "F")
    return w.steps


@pytest.mark.parametrize(("K", "L", "W"), [(3, 2, 2), (2, 3, 3)])
def test_reference_hitting_times_match_simulation(K: int, L: int, W: int) -> None:
    spec = MazeSpec(K, L, W)
    rng = np.random.default_rng(0)
    back = np.mean([_scripted(Maze.sample(spec, rng), rng, True) for _ in range(3000)])
    restart = np.mean([_scripted(Maze.sample(spec, rng), rng, False) for _ in range(3000)])
    assert back == pytest.approx(spec.optimal_backtracking_steps(), rel=0.05)
    assert restart == pytest.approx(spec.restart_steps(), rel=0.08)
    assert spec.restart_steps() > spec.optimal_backtracking_steps()


def test_sft_signal_on_backward_states_is_exactly_zero_and_rl_is_not() -> None:
    model = build_model("tiny-100k", vocab_size=len(VOCAB), seed=0)
    specs = [MazeSpec(3, 2, 2)]
    rng = np.random.default_rng(1)
    golden = [golden_episode(m) for m in sample_mazes(specs, 16, rng)]
    n = sum(e.n_actions for e in golden)
    s = signal_share(model, golden, torch.ones(n), window=127)
    assert s["backward_moves"] == 0 and s["token_share"] == 0.0
    assert s["grad_norm_backward"] == 0.0 and s["grad_norm_forward"] > 0
    walks = rollout(Explorer(back_prob=0.5), sample_mazes(specs, 16, rng), cap=30, seed=2)
    adv = torch.tensor([float(i % 3 - 1) or 0.5 for i, e in enumerate(walks) for _ in range(e.n_actions)])
    r = signal_share(model, walks, adv, window=127)
    assert r["backward_moves"] > 0 and 0 < r["token_share"] < 1 and r["grad_share"] > 0


def test_kv_rollout_matches_rereading_the_context() -> None:
    model = build_model("tiny-100k", vocab_size=len(VOCAB), seed=3)
    mazes = sample_mazes([MazeSpec(3, 2, 2)], 6, np.random.default_rng(0))
    a = rollout(model, mazes, cap=40, seed=4, window=9)  # a small window so it binds
    b = rollout_reference(model, mazes, cap=40, seed=4, window=9)
    assert [[s.tokens for s in e.segments] for e in a] == [[s.tokens for s in e.segments] for e in b]


def test_kv_rollout_keeps_only_the_window_in_its_cache() -> None:
    # a long walk must not attend over (and copy) its whole history at every step
    model = build_model("tiny-100k", vocab_size=len(VOCAB), seed=3)
    seen: list[int] = []
    model.register_forward_pre_hook(
        lambda _m, _a, kw: seen.append(kw["cache"].get_seq_length() if kw["cache"] else 0),
        with_kwargs=True)
    rollout(model, sample_mazes([MazeSpec(4, 3, 2)], 4, np.random.default_rng(1)), cap=120, seed=0, window=9)
    assert len(seen) > 60 and max(seen) <= 9


def test_rollout_is_seeded_and_validates() -> None:
    model = build_model("tiny-100k", vocab_size=len(VOCAB), seed=0)
    mazes = sample_mazes([MazeSpec(2, 2, 2)], 4, np.random.default_rng(0))
    a = [e.steps for e in rollout(model, mazes, cap=30, seed=5)]
    assert a == [e.steps for e in rollout(model, mazes, cap=30, seed=5)]
    with pytest.raises(ValueError, match="cap"):
        rollout(model, mazes, cap=0, seed=0)
    with pytest.raises(ValueError, match="window"):
        rollout(model, mazes, cap=5, seed=0, window=8)


def test_growth_fits_tell_linear_from_exponential() -> None:
    K = np.arange(1, 7)
    lin = fit_growth(K, 5 * K + 1)
    assert lin.preferred == "linear" and lin.slope == pytest.approx(5)
    exp = fit_growth(K, 3 * 2.0**K)
    assert exp.preferred == "exponential" and exp.ratio == pytest.approx(2)
    with pytest.raises(ValueError):
        fit_growth([1, 2], [1, 2])


def test_smoke_reproduce_computes_every_claim_and_is_deterministic() -> None:
    from divelab.scaleout import run_reproduction

    rep = run_reproduction("divelab.training.backtrack", "smoke", 0)
    assert rep.system == "backtrack" and len(rep.claims) >= 6
    for c in rep.claims:
        assert c.measured is not None and c.verdict in Verdict and c.kind in Kind
        assert reapply(c.rule).verdict is c.verdict  # every verdict follows from its recorded rule
    empirical = [c for c in rep.claims if c.kind is Kind.EMPIRICAL]
    assert empirical and all(c.baseline and c.falsifier for c in empirical)
    d = rep.details["L=2"]
    seeds = len(d["SFT"]["per_seed"])
    assert seeds >= 3  # a method comparison replicates the training run, even at smoke
    assert all(c.replication == {"unit": "training runs", "n": seeds, "clustered_by": ""} for c in empirical)
    inherited = next(c for c in rep.claims if "relative to its base" in c.statement)
    Ks = d["K"]
    per_seed_ratio = [fit_growth(Ks, s).ratio / fit_growth(Ks, b).ratio
                      for s, b in zip(d["SFT"]["per_seed"], d["base"]["per_seed"], strict=True)]
    assert inherited.measured == pytest.approx(np.mean(per_seed_ratio), abs=1e-3)
    assert inherited.ci == pytest.approx(stats.mean_ci(per_seed_ratio)) and inherited.ci[0] <= inherited.measured
    # the base imitates our restarting explorer, so SFT's ×L growth is planted, and the set-up says so
    planted = next(c for c in rep.claims if "grow exponentially" in c.statement)
    assert planted.kind is Kind.PLANTED and rep.planted and "restart" in rep.planted
    # RL and distilled are judged in log steps at the deepest K against the strongest of SFT, the base and a
    # uniform random walk, by a paired t-interval over the training runs, with the sham-reward control beside
    names = {"SFT": "SFT", "base (starting policy)": "base", "uniform random walk": "uniform random walk"}
    for method, stmt, sham in (("RL", "RL reaches the goal in fewer steps", "RL (sham reward)"),
                               ("distilled", "Distilling RL traces", "distilled (sham RL)")):
        c = next(c for c in rep.claims if stmt in c.statement)
        assert {b["name"] for b in c.baselines} == set(names)
        assert c.compared_with == min(c.baselines, key=lambda b: b["value"])["name"]
        best = np.log(np.array(d[names[c.compared_with]]["per_seed"])[:, -1])
        per_run = np.log(np.array(d[method]["per_seed"])[:, -1]) - best
        assert c.measured == pytest.approx(per_run.mean(), abs=1e-3)
        assert c.rule["args"]["ci"] == pytest.approx(list(stats.mean_ci(per_run)))
        assert c.rule["args"]["training_runs"] == seeds and "training runs detect an effect" in c.note
        ctl = np.log(np.array(d[sham]["per_seed"])[:, -1]) - best
        assert c.rule["args"]["control"]["effect"] == pytest.approx(ctl.mean())
    linear = next(c for c in rep.claims if "grow linearly" in c.statement)
    assert linear.rule["args"]["control"]["name"].startswith("RL with sham reward")
    assert 0.0 <= linear.measured <= 1.0 and linear.ci == pytest.approx(
        stats.proportion_ci(round(linear.measured * seeds), seeds))
    zero = next(c for c in rep.claims if "zero training signal" in c.statement)
    assert zero.measured.startswith("SFT 0.000 of moves / 0.000")
    assert {f.name for f in rep.figures} == {"hitting_time_vs_K", "signal_share"}
    assert d["SFT"]["mean"][0] > 0 and d["uniform random walk"]["mean"][0] > 0
    again = run_reproduction("divelab.training.backtrack", "smoke", 0)  # models now come from the cache; walks are re-sampled
    assert [c.measured for c in again.claims] == [c.measured for c in rep.claims]
    with pytest.raises(ValueError, match="unknown scale"):
        run_reproduction("divelab.training.backtrack", "huge", 0)


def test_sham_reward_permutes_rewards_but_keeps_the_walks(tmp_path, monkeypatch) -> None:
    from dataclasses import replace

    from divelab.training.backtrack import ModelSpec, RLConfig, SFTConfig, train_base, train_rl

    monkeypatch.setenv("DIVELAB_CACHE", str(tmp_path))
    specs = [MazeSpec(2, 2, 2)]
    base = train_base(specs, ModelSpec(), SFTConfig(steps=3, batch=4, walk_cap=12), seed=1)
    cfg = RLConfig(updates=2, mazes=2, group=3, cap=40)
    real = train_rl(base, specs, ModelSpec(), cfg, seed=1)
    sham = train_rl(base, specs, ModelSpec(), replace(cfg, sham_reward=True), seed=1)
    # the first update walks the same mazes with the same seeds from the same base, so its walks agree
    assert real.meta["history"][0]["steps"] == sham.meta["history"][0]["steps"]
    assert sham.meta["key"] != real.meta["key"]  # a separate cache entry
    a, b = real.model.state_dict(), sham.model.state_dict()
    assert any(not torch.equal(a[k], b[k]) for k in a)  # permuted rewards, different update


def test_training_is_deterministic_across_fresh_caches(tmp_path, monkeypatch) -> None:
    from divelab.training.backtrack import ModelSpec, RLConfig, SFTConfig, train_base, train_rl

    specs = [MazeSpec(2, 2, 2)]
    states = []
    for d in ("a", "b"):
        monkeypatch.setenv("DIVELAB_CACHE", str(tmp_path / d))
        base = train_base(specs, ModelSpec(), SFTConfig(steps=3, batch=4, walk_cap=12), seed=1)
        rl = train_rl(base, specs, ModelSpec(), RLConfig(updates=2, mazes=2, group=3, cap=12), seed=1)
        assert rl.meta["cached"] is False
        states.append(rl.model.state_dict())
    assert all(torch.equal(states[0][k], states[1][k]) for k in states[0])
