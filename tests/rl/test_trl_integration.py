"""InfoTree's rollout function inside a real ``trl.GRPOTrainer`` (trl 1.16.0), as docs/engines/integrations.md shows."""

from __future__ import annotations

import inspect
import json
import os

import pytest
import torch
from integration_examples import run_examples

import divelab.training.infotree.adapters as adapters
from divelab.lm.models import build_model

trl = pytest.importorskip("trl", reason="trl is not installed (pip install trl)")
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")


@pytest.fixture(scope="module")
def docs_run():
    """Run the docs' TRL examples once, recording every rollout_func output."""
    calls: list[tuple[list, dict]] = []
    real = adapters.trl_rollout_func

    def wrapped(*args, **kwargs):
        fn = real(*args, **kwargs)

        def rollout(prompts, trainer):
            out = fn(prompts, trainer)
            calls.append((list(prompts), out))
            return out

        return rollout

    adapters.trl_rollout_func = wrapped
    try:
        ns = run_examples("trl")
        ns["calls_trl"] = list(calls)
        run_examples("trl-tree", ns=ns)
        ns["calls_tree"] = calls[len(ns["calls_trl"]):]
    finally:
        adapters.trl_rollout_func = real
    return ns


def _teacher_forced_logprobs(model, prompt_ids, completion_ids, temperature=1.0):
    ids = torch.tensor([prompt_ids + completion_ids])
    with torch.no_grad():
        logits = model(input_ids=ids).logits[0].double() / temperature
    lp = torch.log_softmax(logits, -1)
    n = len(prompt_ids)
    return [float(lp[n - 1 + i, t]) for i, t in enumerate(completion_ids)]


def test_trl_rollout_func_signature_is_trls() -> None:
    from trl.trainer.grpo_trainer import RolloutFunc

    assert "rollout_func" in inspect.signature(trl.GRPOTrainer.__init__).parameters
    assert RolloutFunc.__args__[0] == list[str]  # Callable[[list[str], GRPOTrainer], dict[str, Any]]


def test_grpo_trainer_trains_with_divelab_rollout(docs_run) -> None:
    trainer, tok, model = docs_run["trainer"], docs_run["tok"], docs_run["model"]
    assert trainer.state.global_step == 2
    fresh = build_model("tiny-100k", vocab_size=len(tok), seed=0)
    moved = max((p - q).abs().max().item() for p, q in zip(model.parameters(), fresh.parameters(), strict=True))
    assert moved > 1e-4, "GRPOTrainer did not update the model"
    assert len(docs_run["calls_trl"]) == 2
    g = trainer.num_generations
    for prompts, out in docs_run["calls_trl"]:
        n = len(prompts)
        assert n % g == 0 and all(len(out[k]) == n for k in ("prompt_ids", "completion_ids", "logprobs"))
        for i, p in enumerate(prompts):  # the real prompt ids, num_generations rows per prompt
            assert out["prompt_ids"][i] == tok(p, add_special_tokens=False)["input_ids"]
            assert 1 <= len(out["completion_ids"][i]) == len(out["logprobs"][i]) <= 6
    # the log-probs are the policy's: equal to a teacher-forced pass of the same weights
    out = trainer.rollout_func(["go north"] * g, trainer)
    assert len(out["completion_ids"]) == g
    for pid, cid, lps in zip(out["prompt_ids"], out["completion_ids"], out["logprobs"], strict=True):
        ref = _teacher_forced_logprobs(model, pid, cid)
        assert max(abs(a - b) for a, b in zip(lps, ref, strict=True)) < 1e-4
        assert all(lp < 0 for lp in lps)


def test_tree_aware_path_in_grpo_trainer(docs_run) -> None:
    assert docs_run["tree_trainer"].state.global_step == 1
    (prompts, out), = docs_run["calls_tree"]
    g = docs_run["tree_trainer"].num_generations
    assert len(out["completion_ids"]) == len(prompts) and len(prompts) % g == 0
    for b in range(len(prompts) // g):
        rows = range(b * g, (b + 1) * g)
        ids = [out["completion_ids"][i] for i in rows]
        lens = [out["tree_branch_len"][i] for i in rows]
        assert lens[0] == lens[1] == 0  # init_rollouts from the root
        for j, k in enumerate(lens):  # a branched completion shares exactly its prefix with an earlier sibling
            if k:
                assert any(ids[m][:k] == ids[j][:k] for m in range(j))
    with pytest.raises(ValueError, match="needs leaf_reward"):
        adapters.trl_rollout_func(selector="uucb")


def test_rows_per_process_when_a_prompt_group_spans_two_processes(docs_run) -> None:
    """2 processes × per-device batch 2 × num_generations 4 (valid in TRL): each process gets 2 slots of one
    prompt and must return 2 rows (the old function returned 8); together they are the 4 leaves of one tree."""
    from types import SimpleNamespace

    trainer = docs_run["tree_trainer"]
    fn = adapters.trl_rollout_func(selector="uucb", leaf_reward=lambda p, ids: float(ids[0] % 2), tree_fields=True,
                                   seed=3)
    outs = []
    for rank in (0, 1):
        view = SimpleNamespace(model=trainer.model, num_generations=4, num_generations_eval=4,
                               processing_class=trainer.processing_class, max_completion_length=6, temperature=1.0,
                               accelerator=SimpleNamespace(process_index=rank, num_processes=2))
        fn_rank = adapters.trl_rollout_func(selector="uucb", leaf_reward=lambda p, ids: float(ids[0] % 2),
                                            tree_fields=True, seed=3)
        outs.append(fn_rank(["go north", "go north"], view))
    assert [len(o["completion_ids"]) for o in outs] == [2, 2]
    leaves = outs[0]["tree_leaf"] + outs[1]["tree_leaf"]
    assert len(set(leaves)) == 4  # four distinct leaves of the one tree both processes grew
    view.top_k, view.top_p = 1, 1.0  # top_k=1 is greedy: every leaf from the root is the argmax token
    one = fn(["go north"] * 4, SimpleNamespace(**{**vars(view), "accelerator": None}))
    assert len({ids[0] for ids in one["completion_ids"]}) == 1 and all(lp[0] == 0.0 for lp in one["logprobs"])
    view.repetition_penalty = 1.2
    with pytest.raises(ValueError, match="repetition_penalty=1.2 is not supported"):
        fn(["go north"] * 4, view)


@pytest.fixture(scope="module")
def two_processes(tmp_path_factory) -> dict[int, dict]:
    """trl_two_process_job.py under ``accelerate launch`` with 2 CPU processes: each rank's evidence.

    accelerate 1.15's ``--cpu`` starts one process unless given an MPI hostfile; ``--multi_gpu`` is its
    torchrun launcher, and the job's ``use_cpu=True`` makes the two processes a gloo (MULTI_CPU) group,
    which the job records and the tests check. The port and the one failure worth a relaunch (the port
    taken under the job) are two_process_launch's; any other failure fails here with the job's stderr."""
    import sys
    from pathlib import Path

    from two_process_launch import launch

    pytest.importorskip("accelerate", reason="accelerate is not installed")
    out = tmp_path_factory.mktemp("trl-two-processes")
    job = Path(__file__).with_name("trl_two_process_job.py")
    threads = {k: "1" for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")}
    env = {**os.environ, **threads, "TOKENIZERS_PARALLELISM": "false", "CUDA_VISIBLE_DEVICES": ""}

    def command(port: int) -> list[str]:
        return [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", "2",
                "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no",
                "--num_cpu_threads_per_process", "1", "--main_process_port", str(port), str(job), str(out)]

    launch(command, env=env, timeout_s=600)  # far above a run on an idle machine: room for a loaded one
    return {r: json.loads((out / f"rank{r}.json").read_text()) for r in (0, 1)}


@pytest.mark.slow
def test_two_process_grpo_trainer_gets_one_row_per_prompt_slot(two_processes) -> None:
    """A real 2-process GRPOTrainer (per-device batch 2, num_generations 4): every prompt group is split
    over the two processes; each returns 2 rows, TRL scores 2 locally and 4 after gathering, training
    finishes, and the two processes' rows are the 4 leaves of the one tree a single process grows."""
    runs = {r: two_processes[r]["train"] for r in (0, 1)}
    for run in runs.values():
        assert run["error"] is None, run.get("traceback")
        assert (run["num_processes"], run["backend"], run["global_step"]) == (2, "gloo", 2)
        assert run["distributed_type"].endswith("MULTI_CPU")
        assert run["reward_rows_local"] == [2, 2] and run["reward_rows_gathered"] == [4, 4]
        for call in run["rollout_calls"]:
            assert call["rows"] == 2 and len(set(call["prompts"])) == 1
            assert call["prompt_ids"] == call["tokenized"]  # the real prompt ids
    calls = list(zip(runs[0]["rollout_calls"], runs[1]["rollout_calls"], strict=True))
    assert len(calls) == 2
    for c0, c1 in calls:  # one prompt group of 4 split 2 + 2: four distinct leaves of one tree
        assert c0["prompts"] == c1["prompts"]
        leaves = c0["tree_leaf"] + c1["tree_leaf"]
        assert len(leaves) == len(set(leaves)) == 4
    ref = runs[0]["reference"]
    assert ref == runs[1]["reference"] and ref["prompt"] == calls[0][0]["prompts"][0]
    c0, c1 = calls[0]
    assert c0["completion_ids"] + c1["completion_ids"] == ref["completion_ids"]
    assert c0["tree_leaf"] + c1["tree_leaf"] == ref["tree_leaf"]


@pytest.mark.slow
def test_two_process_grpo_trainer_refuses_repetition_penalty(two_processes) -> None:
    """GRPOConfig(repetition_penalty=1.1) in the same 2-process job: every process stops at the
    rollout_func's error naming the setting and the allowed value, before any row reaches TRL."""
    for r in (0, 1):
        run = two_processes[r]["repetition_penalty"]
        assert run["error"].startswith("ValueError") and "repetition_penalty=1.1 is not supported" in run["error"]
        assert "allowed: 1.0" in run["error"] and run["rollout_calls"] == []
