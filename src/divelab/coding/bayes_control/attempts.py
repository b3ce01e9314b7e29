"""Real attempts of a small coder on generated tasks, and every critic's verdict on them, cached by content.

Per task the coder (SmolLM2-135M-Instruct, optionally with a LoRA adapter) samples ``k`` attempts
(temperature > 0, one seeded batch). Each attempt is then judged, for real:

- ``syntax`` (``compile``) and ``pyflakes``, in process (static analysis; the code is not run);
- ``public-tests``: the docstring's two ``>>>`` examples, run in :mod:`divelab.sandbox`;
- ``self-consistency``: the attempt's outputs on extra inputs (not the hidden tests'), run in the
  sandbox, compared with the other attempts' outputs on the same inputs (agreement score);
- ``reviewer``: SmolLM2 itself (adapter switched off) asked whether the function does what its docstring
  says; the score is log P(yes) - log P(no) of its first answer token;
- the hidden suite (the costly verifier, and the ground truth), run in the sandbox.

Refinement is regeneration: a fresh sample from the same prompt (the paper's "regenerate or repair";
repair with feedback would need a model call per controller decision). So the ``k`` samples of a task
are the attempts a controller can draw, in a seeded order.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from divelab.cache import atomic_write_text, entry_path, stable_hash
from divelab.codetasks.harness import evaluate
from divelab.coding.bayes_control.live import SYSTEM
from divelab.coding.bayes_control.pool import pyflakes_messages, syntax_ok
from divelab.coding.bayes_control.tasks_generated import GeneratedTask
from divelab.sandbox import Limits, run_python

CACHE_KIND = "bayes-control-attempts"
_VERSION = 2  # bump when the prompt, the decoding, a critic or the record layout changes
FENCE = "```python\n"
REVIEW = ("Here is a Python function and its docstring.\n\n```python\n{code}```\n\nDoes the function do exactly what "
          "its docstring says, on every input? Answer yes or no.")


def coder_messages(task: GeneratedTask) -> list[dict[str, str]]:
    """The chat the coder sees (the one :class:`~divelab.coding.bayes_control.live.LiveEnv` uses)."""
    return [{"role": "system", "content": SYSTEM},
            {"role": "user", "content": f"Complete this function:\n\n{task.task.prompt}"}]


def coder_prefix(task: GeneratedTask) -> str:
    """The reply starts with an opened code block (the format), and the model writes the whole function. Given
    the def line as well, SmolLM2-135M closes the block at once (it reads the docstring as the whole answer)."""
    return FENCE


def prompt_text(tok: Any, task: GeneratedTask) -> str:
    return tok.apply_chat_template(coder_messages(task), add_generation_prompt=True, tokenize=False) + coder_prefix(task)


def code_of(task: GeneratedTask, reply: str) -> str:
    """The module to test: what the model wrote up to the closing fence (or all of it). A function that is
    renamed or never written fails the tests, as it would for a user."""
    return reply.split("```", 1)[0].rstrip() + "\n"


@dataclass(frozen=True)
class Sampling:
    """How the coder's attempts at one task are sampled (one left-padded batch per task)."""

    k: int = 8
    """attempts per task (refinement draws the next one)"""
    temperature: float = 0.8
    """sampling temperature"""
    top_p: float = 0.95
    """nucleus sampling mass"""
    max_new_tokens: int = 80
    """longest attempt in tokens"""

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def sample_attempts(model: Any, tok: Any, task: GeneratedTask, s: Sampling, seed: int) -> list[dict[str, Any]]:
    """``s.k`` attempts in one left-padded batch, seeded; each with its code and mean token log-prob."""
    import torch

    ids = tok(prompt_text(tok, task), add_special_tokens=False)["input_ids"]
    x = torch.tensor([ids] * s.k)
    torch.manual_seed(seed)
    with torch.no_grad():
        out = model.generate(x, attention_mask=torch.ones_like(x), do_sample=True, temperature=s.temperature,
                             top_p=s.top_p, max_new_tokens=s.max_new_tokens, pad_token_id=tok.pad_token_id,
                             stop_strings=["```"], tokenizer=tok, output_scores=True, return_dict_in_generate=True)
    seqs = out.sequences[:, len(ids):]
    # log-probs of the chosen tokens under the sampling distribution (the token-probability baseline)
    logp = torch.stack([torch.log_softmax(sc.float(), -1) for sc in out.scores], 1)
    chosen = logp.gather(-1, seqs[:, :logp.shape[1]].unsqueeze(-1)).squeeze(-1)
    rows = []
    for i in range(s.k):
        toks = seqs[i].tolist()
        text = tok.decode(toks, skip_special_tokens=True)
        n = len(tok(text.split("```", 1)[0], add_special_tokens=False)["input_ids"]) or 1
        lp = chosen[i, :n]
        lp = lp[torch.isfinite(lp)]
        rows.append({"code": code_of(task, text), "reply": text,
                     "mean_logprob": float(lp.mean()) if lp.numel() else -math.inf})
    return rows


def review_scores(model: Any, tok: Any, codes: list[str]) -> list[float]:
    """SmolLM2 as reviewer: log P(yes) - log P(no) for its first answer token, one batch."""
    import torch

    yes = [tok(w, add_special_tokens=False)["input_ids"][0] for w in ("Yes", "yes")]
    no = [tok(w, add_special_tokens=False)["input_ids"][0] for w in ("No", "no")]
    prompts = [tok(tok.apply_chat_template([{"role": "user", "content": REVIEW.format(code=c)}],
                                           add_generation_prompt=True, tokenize=False),
                   add_special_tokens=False)["input_ids"] for c in codes]
    width = max(len(p) for p in prompts)
    pad = tok.pad_token_id
    x = torch.tensor([[pad] * (width - len(p)) + p for p in prompts])
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
    pos = (mask.cumsum(-1) - 1).clamp(min=0)
    ctx = model.disable_adapter() if hasattr(model, "disable_adapter") else _null()
    with torch.no_grad(), ctx:
        logits = model(input_ids=x, attention_mask=mask, position_ids=pos).logits[:, -1, :].float()
    lp = torch.log_softmax(logits, -1)
    return [float(torch.logsumexp(lp[i, yes], 0) - torch.logsumexp(lp[i, no], 0)) for i in range(len(codes))]


class _null:  # noqa: N801 - a do-nothing context manager
    def __enter__(self) -> None:
        return None

    def __exit__(self, *a: object) -> None:
        return None


_OUTPUTS = r'''
import json, signal, sys
def _alarm(s, f):
    raise TimeoutError()
signal.signal(signal.SIGALRM, _alarm)
ns = {"__name__": "candidate"}
out = []
try:
    exec(compile(CANDIDATE, "candidate.py", "exec"), ns)
    f = ns[ENTRY]
except BaseException as e:
    print(MARK + json.dumps(["load-error:" + type(e).__name__] * len(INPUTS)))
    sys.exit(0)
for args in INPUTS:
    signal.setitimer(signal.ITIMER_REAL, 0.5)
    try:
        r = "ok:" + repr(f(*args))
    except BaseException as e:
        r = "error:" + type(e).__name__
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    out.append(r[:300])
print(MARK + json.dumps(out))
'''
_MARK = "@@divelab-outputs@@"


def outputs_on(task: GeneratedTask, code: str) -> list[str]:
    """The attempt's output (or error type) on each of the task's extra inputs, run in the sandbox."""
    prog = (f"MARK = {_MARK!r}\nCANDIDATE = {code!r}\nENTRY = {task.task.entry_point!r}\n"
            f"INPUTS = {[list(a) for a in task.extra_inputs]!r}\n" + _OUTPUTS)
    r = run_python(prog, limits=Limits(wall_s=8.0, cpu_s=8, memory_mb=512, processes=8))
    for line in r.stdout.splitlines():
        if line.startswith(_MARK):
            return json.loads(line[len(_MARK):])
    return [f"run-ended:{r.status.value}"] * len(task.extra_inputs)


def agreement(outputs: list[list[str]]) -> list[float]:
    """Per attempt: the mean, over extra inputs, of the share of the OTHER attempts giving the same output
    (an attempt that errors agrees with nobody)."""
    n = len(outputs)
    scores = []
    for i, oi in enumerate(outputs):
        per = []
        for j, o in enumerate(oi):
            same = sum(1 for m in range(n) if m != i and outputs[m][j] == o) if o.startswith("ok:") else 0
            per.append(same / max(n - 1, 1))
        scores.append(sum(per) / len(per) if per else 0.0)
    return scores


def judge(task: GeneratedTask, attempts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every critic's verdict and the ground truth for each attempt (sandboxed runs)."""
    outs = [outputs_on(task, a["code"]) for a in attempts]
    agree = agreement(outs)
    rows = []
    for a, o, ag in zip(attempts, outs, agree, strict=True):
        ev = evaluate(task.task, a["code"], run_doc=True, tests=None, per_test_s=0.5)
        rows.append({**a, "syntax": syntax_ok(a["code"]), "pyflakes": not pyflakes_messages(a["code"]),
                     "public": bool(ev.doc_passed), "agreement": ag, "outputs": o,
                     "n_failed": ev.n_failed(task.task.n_tests), "correct": ev.n_failed(task.task.n_tests) == 0})
    return rows


def task_attempts(model: Any, tok: Any, weights: str, task: GeneratedTask, s: Sampling, seed: int
                  ) -> list[dict[str, Any]]:
    """The judged attempts of one task, from the cache when this (weights, task, sampling, seed) was done."""
    key = stable_hash({"v": _VERSION, "weights": weights, "prompt": task.task.prompt, "test": task.task.test,
                       "extra": repr(task.extra_inputs), "sampling": s.to_dict(), "seed": seed}, 32)
    path = entry_path(CACHE_KIND, f"{key}.json")
    if path.is_file():
        return json.loads(path.read_text())
    attempts = sample_attempts(model, tok, task, s, seed)
    scores = review_scores(model, tok, [a["code"] for a in attempts])
    rows = [{**r, "review": sc} for r, sc in zip(judge(task, attempts), scores, strict=True)]
    atomic_write_text(path, json.dumps(rows))
    return rows
