"""Ray: reproductions as tasks, failures reported, a shared cache raced safely, rollouts on actors.

A local Ray instance (2 CPUs) is started once for the module; everything here also runs without
a cluster. Skipped when Ray is not installed (it is in the dev extras, so CI runs these).
"""

from __future__ import annotations

import textwrap

import numpy as np
import pytest

ray = pytest.importorskip("ray")

from divelab.cache import atomic_dir, lock  # noqa: E402
from divelab.scaleout import Task, run_tasks  # noqa: E402

GOOD = '''
from divelab import verdicts
from divelab.claims import Claim, Kind, Reproduction

def reproduce(scale="smoke", seed=0):
    import numpy as np
    rep = Reproduction(system="{key}", title="{key}", scale=scale, seed=seed)
    x = float(np.random.default_rng(seed).normal())
    rep.add(Claim("draw", "0", x, kind=Kind.EMPIRICAL, ruling=verdicts.value(x, paper=0.0, tol=1.0, tol_kind="abs")))
    return rep
'''
BAD = '''
def reproduce(scale="smoke", seed=0):
    raise RuntimeError("this system is broken on purpose")
'''


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    root = tmp_path_factory.mktemp("raypkgs")
    for name, src in [("raysys_a", GOOD.format(key="a")), ("raysys_b", GOOD.format(key="b")), ("raysys_bad", BAD)]:
        pkg = root / name
        pkg.mkdir()
        (pkg / "__init__.py").write_text("")
        (pkg / "reproduce.py").write_text(textwrap.dedent(src))
    import sys

    sys.path.insert(0, str(root))
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"PYTHONPATH": str(root)}})
    yield root
    ray.shutdown()
    sys.path.remove(str(root))


def test_two_systems_on_ray_match_in_process(cluster):
    tasks = [Task(f"raysys_{k}", k, "smoke", s) for k in ("a", "b") for s in (0, 1)]
    seen = []
    on_ray = run_tasks(tasks, backend="ray", on_result=seen.append)
    here = run_tasks(tasks, backend="inprocess")
    assert len(seen) == 4 and all(o.ok and o.where == "ray" for o in on_ray)
    for a, b in zip(on_ray, here, strict=True):
        assert a.task == b.task
        assert [c.to_dict() for c in a.reproduction.claims] == [c.to_dict() for c in b.reproduction.claims]


def test_a_failing_task_is_reported_with_its_error(cluster):
    outs = run_tasks([Task("raysys_bad", "bad", "smoke", 0), Task("raysys_a", "a", "smoke", 0)],
                     backend="ray", retries=1)
    bad, good = outs
    assert not bad.ok and "broken on purpose" in bad.error and bad.attempts == 2
    assert good.ok


@ray.remote
def _build(path: str, counter: str) -> str:
    from pathlib import Path

    final = Path(path)
    with lock(final):
        if not (final / "done").exists():
            with open(counter, "a") as f:
                f.write("built\n")
            with atomic_dir(final) as tmp:
                (tmp / "weights").write_bytes(b"w" * 1000)
                (tmp / "done").write_text("ok")
    return (final / "weights").read_bytes().decode()[:3]


def test_workers_racing_on_one_cache_entry_build_it_once(cluster, tmp_path):
    final, counter = tmp_path / "models" / "m", tmp_path / "count.txt"
    got = ray.get([_build.remote(str(final), str(counter)) for _ in range(4)])
    assert got == ["www"] * 4
    assert counter.read_text() == "built\n"  # one paid for it, the others waited and reused it
    assert sorted(p.name for p in final.parent.iterdir()) == ["m", "m.lock"]  # no temporaries left


def test_rollouts_on_ray_actors_equal_in_process(cluster):
    import torch

    from divelab.envs.base import ReplayCache
    from divelab.envs.toy import CorridorEnv
    from divelab.lm.models import build_model
    from divelab.rl.policy import LMPolicy, PolicyConfig, train_word_tokenizer
    from divelab.rl.ray_rollout import ShardedSampler

    shared = ReplayCache(CorridorEnv(n_rooms=3, goal=1, max_steps=6))

    def make_env(game_id: str):
        return shared.clone()

    tok = train_word_tokenizer(["room 0 1 2 3 . you see a key nothing .", "look wait go west go east take key"])
    torch.manual_seed(0)
    model = build_model("tiny-100k", tok.get_vocab_size(), seed=0, hidden_size=32, num_hidden_layers=1,
                        num_attention_heads=2, intermediate_size=64)
    policy = LMPolicy(model, tok, PolicyConfig(history=0))
    games = ["c0", "c1", "c2"]

    def batch(sampler):
        groups = sampler.collect(policy, make_env, games, 4, np.random.default_rng(7))
        return [[(t.group_index, t.traj_id, [s.action for s in t.steps], round(t.steps[0].logprob, 6))
                 for t in g] for g in groups]

    remote = ShardedSampler(workers=2, backend="ray", max_steps=6)
    assert batch(remote) == batch(ShardedSampler(workers=1, backend="inprocess", max_steps=6))
    # weights are refreshed each call: change the policy and the actors follow
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.5 * torch.randn_like(p))
    policy.invalidate()
    assert batch(remote) == batch(ShardedSampler(workers=3, backend="inprocess", max_steps=6))
    remote.close()
