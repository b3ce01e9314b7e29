"""A real two-process ``trl.GRPOTrainer`` job with divelab's rollout_func, run under ``accelerate launch``.

Not a test module (pytest does not collect it): ``test_trl_integration.py`` launches it as

    accelerate launch --multi_gpu --num_processes 2 tests/rl/trl_two_process_job.py OUT_DIR [--rollout-file F]

and reads ``OUT_DIR/rank{0,1}.json`` (``--multi_gpu`` is accelerate's torchrun launcher; the job's
``use_cpu=True`` makes the two processes a gloo group). Each process trains the tiny Llama of the docs' TRL
example for two steps with per_device_train_batch_size=2 and num_generations=4, so every prompt group of 4 is
split over the two processes (2 slots each). It records, per process, what TRL handed the rollout_func and
what came back, how many rows TRL's reward stage scored locally and after gathering from all processes, and a
one-process reference of the first group (the same rollout_func settings given all 4 slots at once), which the
two processes' rows together must equal. A second case builds a trainer with ``repetition_penalty=1.1``, which
the rollout_func must refuse on every process. ``--rollout-file`` loads ``trl_rollout_func`` from another file
(e.g. an older version) instead of divelab's.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import tempfile
import traceback
from pathlib import Path
from types import SimpleNamespace
from typing import Any

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

PROMPTS = ["go north", "open the door", "take", "go"]
ROLLOUT_KW = {"selector": "uucb", "tree_fields": True, "init_rollouts": 2, "seed": 5}


def leaf_reward(prompt: Any, completion_ids: list[int]) -> float:  # scores leaves while a tree grows
    return float(completion_ids[0] % 2)


def load_rollout_factory(path: str | None):
    if path is None:
        from divelab.training.infotree.adapters import trl_rollout_func

        return trl_rollout_func
    spec = importlib.util.spec_from_file_location("trl_rollout_under_test", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up while the file executes
    spec.loader.exec_module(mod)
    return mod.trl_rollout_func


def one_process_view(trainer: Any) -> SimpleNamespace:
    """The trainer as the rollout_func sees it, but as a single process (no accelerator)."""
    names = ("model", "num_generations", "num_generations_eval", "processing_class", "max_completion_length",
             "temperature", "top_k", "top_p", "min_p", "repetition_penalty", "eos_token_ids", "args")
    return SimpleNamespace(**{n: getattr(trainer, n) for n in names if hasattr(trainer, n)}, accelerator=None)


def build_trainer(factory, out_dir: str, record: dict, **config: Any):
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    from divelab.lm.models import build_model
    from divelab.lm.tokenizer import train_tokenizer

    tok = train_tokenizer(["go north and take the key", "open the door then go south"] * 10, vocab_size=300)
    model = build_model("tiny-100k", vocab_size=len(tok), seed=0)
    fn = factory(leaf_reward=leaf_reward, **ROLLOUT_KW)

    def rollout(prompts, trainer):
        out = fn(prompts, trainer)
        call = {"prompts": list(prompts), "rows": len(out["completion_ids"]), "prompt_ids": out["prompt_ids"],
                "tokenized": [tok(q, add_special_tokens=False)["input_ids"] for q in prompts],
                "completion_ids": out["completion_ids"], "tree_leaf": out.get("tree_leaf")}
        if not record["rollout_calls"]:  # the model is still the initial one: the one-process reference
            g = trainer.num_generations
            ref = factory(leaf_reward=leaf_reward, **ROLLOUT_KW)([prompts[0]] * g, one_process_view(trainer))
            record["reference"] = {"prompt": prompts[0], "completion_ids": ref["completion_ids"],
                                   "tree_leaf": ref.get("tree_leaf")}
        record["rollout_calls"].append(call)
        return out

    def odd_first_token(completion_ids, **kwargs):
        record["reward_rows_local"].append(len(completion_ids))
        return [float(ids[0] % 2) for ids in completion_ids]

    args = GRPOConfig(output_dir=out_dir, per_device_train_batch_size=2, num_generations=4,
                      max_completion_length=5, max_steps=2, learning_rate=1e-2, beta=0.0, use_cpu=True,
                      report_to=[], save_strategy="no", logging_steps=1, seed=0, **config)
    trainer = GRPOTrainer(model=model, reward_funcs=odd_first_token, args=args, processing_class=tok,
                          train_dataset=Dataset.from_dict({"prompt": PROMPTS}), rollout_func=rollout)
    calculate = trainer._calculate_rewards

    def calculate_rewards(*a, **kw):  # rewards of every process, gathered: what TRL normalises per group
        gathered = calculate(*a, **kw)
        record["reward_rows_gathered"].append(int(gathered.shape[0]))
        return gathered

    trainer._calculate_rewards = calculate_rewards
    return trainer


def run_case(factory, out_dir: str, **config: Any) -> dict:
    record: dict[str, Any] = {"rollout_calls": [], "reward_rows_local": [], "reward_rows_gathered": [],
                              "error": None}
    try:
        trainer = build_trainer(factory, out_dir, record, **config)
        record["num_processes"] = trainer.accelerator.num_processes
        record["distributed_type"] = str(trainer.accelerator.distributed_type)
        record["backend"] = trainer.accelerator.state.backend
        trainer.train()
        record["global_step"] = trainer.state.global_step
    except Exception as e:  # the evidence is the message: the test asserts on it
        record["error"] = f"{type(e).__name__}: {e}"
        record["traceback"] = traceback.format_exc()
    return record


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("out_dir")
    p.add_argument("--rollout-file", default=None, help="load trl_rollout_func from this file")
    a = p.parse_args()
    factory = load_rollout_factory(a.rollout_file)
    rank = int(os.environ.get("RANK", "0"))
    with tempfile.TemporaryDirectory() as work:
        result = {"rank": rank, "train": run_case(factory, work),
                  "repetition_penalty": run_case(factory, work, repetition_penalty=1.1)}
    Path(a.out_dir, f"rank{rank}.json").write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
