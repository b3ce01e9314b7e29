"""The headline language-model check on public games: TextWorldExpress's coin collector, with an exact oracle.

The same pipeline as the TextWorld check (:mod:`~divelab.training.progress_advantage.twcheck`), on games no one
here wrote or selected. The RL engine's substrate test bed (:func:`divelab.rl.substrate_testbed.build_substrate_testbed`)
warm-starts the tiny LM on the first games of the simulator's train split; GRPO with the k3 KL penalty
(``kl_coef = beta``) trains the policy on those games; the policy's rollouts are scored on games of the dev split,
which neither model has seen. The jar in the ``textworld-express`` wheel generates every game from its seed, so
nothing is fetched.

The oracle needs each game's whole state graph. TextWorldExpress shows text only, so states are merged by what
the player sees (room description plus inventory, :class:`~divelab.training.progress_advantage.state_graph.SeenState`),
and every merge is checked against the simulator (:func:`~divelab.training.progress_advantage.state_graph.check_merges`)
before the graph is used: each merged state, re-entered by every other path into it, must behave as it did on the
first path. The games are then played from their explored graphs (as the TextWorld test bed plays its games), so
rollouts and Monte Carlo estimates cost no simulator steps. A game whose graph is incomplete or whose merges fail
the check makes the section's claims uninformative (the oracle would not be exact), and the training runs are
skipped.

Deterministic games only: on the coin collector a slippery variant would add a second set of training runs (the
section's cost, doubled) to a stochastic case the TextWorld and key-and-door test beds already measure.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any

from divelab.cache import entry_path, stable_hash
from divelab.envs.base import EnvFactory, ReplayCache, TextEnv
from divelab.rl.substrate_testbed import SubstrateTestbedConfig
from divelab.training.progress_advantage.twcheck import EvalConfig, TWCheckConfig

# TextWorldExpress's coin collector on its largest map (the jar allows at most 11 locations), no doors and no
# distractor items (the room description plus the inventory then names the state; the merge check tests it)
COIN_PARAMS = "numLocations=11,numDistractorItems=0,includeDoors=0,limitInventorySize=0"
LABEL = "TextWorldExpress coin collector, held-out dev games"
"""the section's substrate, the parenthesised label of its claims (divelab.report.public pairs each with the same
claim on "TextWorld deterministic")"""
_VERSION = 1  # bump to invalidate cached policies when the training code changes


@dataclass(frozen=True)
class PublicPlan:
    """The language-model check on TextWorldExpress's coin collector (see the module docstring)."""

    testbed: SubstrateTestbedConfig
    """the public games and the warm-started reference LM (the engine's substrate test bed; its seed is the run's)."""
    iterations: int
    """GRPO iterations that turn the reference into the (imperfect) RL policy."""
    group_size: int
    """rollouts per game in one GRPO group."""
    evaluation: EvalConfig
    """scoring of the policy's rollouts on the held-out dev games: groups per game, rollouts per group (best-of-n),
    Monte Carlo steps and rollouts for the true advantage."""
    training_runs: int
    """independent trainings of the pair (run r: warm start, GRPO and evaluation seeded seed + r), the claims' unit."""
    max_states: int = 400
    """largest state graph explored per game; a game that does not fit leaves the oracle inexact."""
    check_depth: int = 1
    """commands followed from each other path into a merged state when checking the merge (1: the state's own
    commands and where they lead)."""
    beta: float = TWCheckConfig.beta
    """the GRPO trainer's kl_coef (the TextWorld check's)."""

    def __post_init__(self) -> None:
        for name in ("iterations", "group_size", "training_runs", "max_states", "check_depth"):
            if getattr(self, name) < 1:
                raise ValueError(f"PublicPlan.{name} must be >= 1, got {getattr(self, name)}")
        if self.testbed.simulator != "twx":
            raise ValueError(f"the public check plays TextWorldExpress (simulator 'twx'), got "
                             f"{self.testbed.simulator!r}")


@dataclass(frozen=True)
class PublicPairConfig:
    """One trained pair on the public games (the cache key of its policy)."""

    testbed: SubstrateTestbedConfig
    beta: float = TWCheckConfig.beta
    iterations: int = TWCheckConfig.iterations
    group_size: int = TWCheckConfig.group_size
    lr: float = TWCheckConfig.lr
    ppo_epochs: int = TWCheckConfig.ppo_epochs
    seed: int = 0


# -- the games, their graphs and the merge check ----------------------------------------------------------
@dataclass
class PublicGames:
    """Every train and dev game of a plan, explored once and shared by its training runs."""

    train_ids: list[str]
    eval_ids: list[str]
    caches: dict[str, ReplayCache]  # game id -> the explored game (plays from its graph)
    graphs: dict[str, dict[str, Any]]  # game id -> graph (ReplayCache.export_graph, + complete, real_steps)
    records: dict[str, dict[str, Any]] = field(default_factory=dict)  # game id -> states, complete, the check
    max_steps: int = 12

    @property
    def exact(self) -> bool:
        """Every graph complete and every merge consistent: the oracle is exact."""
        return all(r["complete"] and r["check"]["consistent"] for r in self.records.values())

    def why_inexact(self) -> str:
        bad = [g for g, r in self.records.items() if not r["complete"]]
        wrong = [g for g, r in self.records.items() if not r["check"]["consistent"]]
        parts = ([f"{len(bad)} game graph(s) did not fit in max_states ({bad[0]})"] if bad else []) + \
            ([f"merging states by room description and inventory changed what {len(wrong)} game(s) do "
              f"({wrong[0]}: {self.records[wrong[0]]['check']['mismatches'][:1]})"] if wrong else [])
        return "failed set-up, the oracle is not exact: " + "; ".join(parts)

    def factory(self) -> EnvFactory:
        """``make_env(game_id)`` playing a game from its explored graph, capped at ``max_steps``."""
        from divelab.envs.textworld import StepCap

        def make_env(game_id: str) -> TextEnv:
            if game_id not in self.caches:
                raise ValueError(f"unknown game id {game_id!r}; explored: {', '.join(self.caches)}")
            return StepCap(self.caches[game_id].clone(), self.max_steps)

        return make_env


def public_games(cfg: SubstrateTestbedConfig, max_states: int, check_depth: int = 1) -> PublicGames:
    """The test bed's games (the first ``cfg.train_episodes`` of the train split, ``cfg.eval_episodes`` of the dev
    split), each explored with states merged by what the player sees and checked against the simulator.
    Raises :class:`~divelab.envs.substrate.SubstrateUnavailable` without Java or the package."""
    from divelab.envs.substrate import PinnedEpisode, Simulator, pinned_ids
    from divelab.envs.textworld import uniform_success
    from divelab.envs.twx import TWXEnv
    from divelab.training.progress_advantage.state_graph import check_merges, explore

    sim = Simulator()  # one Java process for every game; closed below, restarted only if play leaves a graph
    split_ids = {s: pinned_ids(cfg.specs(s), range(n)) for s, n in (("train", cfg.train_episodes),
                                                                   ("dev", cfg.eval_episodes))}
    games = PublicGames(split_ids["train"], split_ids["dev"], {}, {}, max_steps=cfg.max_steps)
    try:
        for split, n in (("train", cfg.train_episodes), ("dev", cfg.eval_episodes)):
            for spec in cfg.specs(split):
                for k in range(n):
                    def raw(spec: Any = spec, k: int = k) -> TextEnv:  # no step cap inside a graph
                        return PinnedEpisode(TWXEnv(spec, 10**9, cfg.reward, sim), k)

                    cache, graph = explore(raw(), max_states)
                    gid = f"{spec.game_id}@{k}"
                    check = check_merges(graph, raw, check_depth)
                    games.caches[gid], games.graphs[gid] = cache, graph
                    games.records[gid] = {"states": sum(not nd["done"] for nd in graph["nodes"]),
                                          "complete": bool(graph["complete"]), "real_steps": graph["real_steps"],
                                          "uniform_success": uniform_success(graph, cfg.max_steps),
                                          "check": check}
    finally:
        sim.close()
    assert list(games.caches) == games.train_ids + games.eval_ids
    return games


# -- the training runs ----------------------------------------------------------------------------------
def run_once(plan: PublicPlan, games: PublicGames, seed: int) -> dict[str, Any]:
    """One training run: the warm start (seeded ``seed``), GRPO+KL on the train games played from their graphs,
    and :func:`~divelab.training.progress_advantage.twcheck.evaluate` on the held-out dev games."""
    from divelab.rl.grpo import GRPOConfig
    from divelab.rl.substrate_testbed import build_substrate_testbed
    from divelab.training.progress_advantage.twcheck import evaluate, grpo_policy

    tb_cfg = replace(plan.testbed, seed=seed)
    tb = build_substrate_testbed(tb_cfg)
    if (tb.game_ids, tb.eval_game_ids) != (games.train_ids, games.eval_ids):
        raise ValueError("the test bed's games differ from the explored ones; build PublicGames from the same "
                         "SubstrateTestbedConfig")
    cfg = PublicPairConfig(testbed=tb_cfg, beta=plan.beta, iterations=plan.iterations, group_size=plan.group_size,
                           seed=seed)
    reference = tb.new_policy()
    reference.model.eval()
    make_env = games.factory()
    gcfg = GRPOConfig(iterations=cfg.iterations, group_size=cfg.group_size, max_steps=tb_cfg.max_steps, lr=cfg.lr,
                      kl_coef=cfg.beta, ppo_epochs=cfg.ppo_epochs, seed=seed,
                      description="progress-advantage: GRPO+KL policy (TextWorldExpress coin)")
    path = entry_path("progress-advantage-twx", stable_hash({**asdict(cfg), "max_states": plan.max_states,
                                                             "version": _VERSION}))
    policy, success, kl = grpo_policy(tb.new_policy, make_env, tb.game_ids, gcfg, path)

    def graphs() -> dict[str, dict[str, Any]]:
        return {g: games.graphs[g] for g in games.eval_ids}

    ev = plan.evaluation
    return evaluate(policy, reference, tb.tokenizer, make_env, games.eval_ids, graphs, beta=cfg.beta, slip=0.0,
                    max_steps=tb_cfg.max_steps, ev=ev, seed=seed, config={**asdict(cfg), "eval": asdict(ev)},
                    curves={"rl_success": success, "kl": kl})


def public_check(plan: PublicPlan | None, seed: int) -> dict[str, Any]:
    """The section's record: ``status`` "not planned" (no plan at this scale), "unavailable" (``why``: no Java or
    no package, with the install hint), "inexact" (``why``; the games' records, and no training run) or "ran" (the
    games' records and one :func:`run_once` result per training run, run r seeded ``seed + r``)."""
    from divelab.envs.substrate import SubstrateUnavailable

    if plan is None:
        return {"status": "not planned"}
    try:
        games = public_games(plan.testbed, plan.max_states, plan.check_depth)
    except SubstrateUnavailable as exc:
        return {"status": "unavailable", "why": str(exc)}
    out: dict[str, Any] = {"label": LABEL, "n": plan.evaluation.n, "games": games.records}
    if not games.exact:
        return {"status": "inexact", "why": games.why_inexact(), **out}
    return {"status": "ran", **out, "runs": [run_once(plan, games, seed + r) for r in range(plan.training_runs)]}
