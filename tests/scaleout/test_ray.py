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

PLAN = '''
from dataclasses import dataclass


@dataclass(frozen=True)
class Plan:
    n: int = 1
    """a size the stand-in does not use."""


PLANS = dict(smoke=Plan(), quick=Plan(), full=Plan())  # no braces: the sources below go through str.format
'''
GOOD = PLAN + '''
from divelab import verdicts
from divelab.claims import Claim, Kind, Reproduction

def run(plan, seed=0):
    import numpy as np
    rep = Reproduction(system="{key}", title="{key}", scale="", seed=seed)
    x = float(np.random.default_rng(seed).normal())
    rep.add(Claim("draw", "0", x, kind=Kind.EMPIRICAL, ruling=verdicts.value(x, paper=0.0, tol=1.0, tol_kind="abs", exact=True)))
    return rep
'''
BAD = PLAN + '''
def run(plan, seed=0):
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


DIES_ONCE = PLAN + '''
import os
from divelab import verdicts
from divelab.claims import Claim, Kind, Reproduction

MARK = {mark!r}

def run(plan, seed=0):
    if not os.path.exists(MARK):  # the first attempt takes its worker process down, as an OOM kill would
        open(MARK, "w").close()
        os._exit(1)
    rep = Reproduction(system="dies", title="dies", scale="", seed=seed)
    rep.add(Claim("ran", "1", 1.0, kind=Kind.EMPIRICAL, ruling=verdicts.value(1.0, paper=1.0, tol=0.1, exact=True)))
    return rep
'''


def _dies_once(root, tmp_path) -> str:
    name = f"raysys_dies_{tmp_path.name.replace('-', '_')}"
    pkg = root / name
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "reproduce.py").write_text(textwrap.dedent(DIES_ONCE.format(mark=str(tmp_path / "died"))))
    return name


def test_a_killed_worker_is_retried_and_recorded_in_results_and_report(cluster, tmp_path):
    from divelab.report import write_report

    (out,) = run_tasks([Task(_dies_once(cluster, tmp_path), "dies", "smoke", 3)], backend="ray", retries=1)
    assert out.ok and out.attempts == 2 and out.worker_deaths == 1
    assert out.failed_attempts[0].startswith("attempt 1: worker died")
    (run,) = out.reproduction.details["scaleout"]
    assert run == {"seed": 3, "where": "ray", "attempts": 2, "worker_deaths": 1,
                   "failed_attempts": out.failed_attempts}
    paths = write_report([out.reproduction], tmp_path / "report")
    import json

    saved = json.loads(paths["json"].read_text())["reproductions"][0]["details"]["scaleout"]
    assert saved[0]["worker_deaths"] == 1 and saved[0]["attempts"] == 2
    for kind in ("markdown", "html"):
        assert "Retried: seed 3 took 2 attempts (ray, 1 worker death(s)): attempt 1: worker died" in \
            paths[kind].read_text()


def test_a_killed_worker_without_retries_fails_naming_the_death(cluster, tmp_path):
    (out,) = run_tasks([Task(_dies_once(cluster, tmp_path), "dies", "smoke", 0)], backend="ray")
    assert not out.ok and out.attempts == 1 and out.worker_deaths == 1
    assert out.record()["failed_attempts"] == out.failed_attempts and "worker died" in out.failed_attempts[0]


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("address, says", [
    (f"127.0.0.1:{_free_port()}", "is unreachable (connection refused"),
    ("head-node:notaport", "is malformed; allowed: 'local'"),
    ("http://head:6379", "is malformed"),
    ("head:99999", "is malformed"),
], ids=["unreachable", "port-not-a-number", "url", "port-out-of-range"])  # fixed ids: the free port differs per process
def test_cli_bad_ray_address_is_one_line_in_seconds(fake_system, tmp_path, address, says):
    import time

    from typer.testing import CliRunner

    from divelab.cli import app

    t0 = time.perf_counter()
    res = CliRunner().invoke(app, ["reproduce", "fake", "--ray", address, "--out", str(tmp_path / "out")],
                             env={"COLUMNS": "400"})
    assert time.perf_counter() - t0 < 15
    assert res.exit_code == 2, res.output
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: Ray address") and says in lines[0], res.output
    assert not (tmp_path / "out" / "results.json").exists()  # nothing ran


def test_silent_address_fails_within_the_timeout_in_one_error_line():
    """10.255.255.1 routes nowhere; where a proxy answers for it instead, Ray's handshake never completes.
    Either way the CLI stops within its deadline with one error line, never a traceback or a long hang."""
    import os
    import subprocess
    import sys
    import time

    from divelab.scaleout import check_ray_address

    assert check_ray_address("local") is None and check_ray_address(None) is None
    t0 = time.perf_counter()
    res = subprocess.run([sys.executable, "-m", "divelab.cli", "reproduce", "backtrack", "--ray", "10.255.255.1:6379"],
                         capture_output=True, text=True, timeout=120,
                         env={**os.environ, "DIVELAB_RAY_TIMEOUT": "3", "COLUMNS": "400"})
    assert time.perf_counter() - t0 < 60
    errors = [ln for ln in res.stderr.splitlines() if ln.startswith("error:")]
    assert res.returncode == 2 and len(errors) == 1 and "Traceback" not in res.stderr, res.stderr
    assert "Ray address '10.255.255.1:6379'" in errors[0]
