"""cliff-tokens find-cliffs: --chat on a model without a chat template is a clear error, and the
potential estimation reports progress per prefix (one long trace can take minutes), also off a terminal."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

import divelab.lm
import divelab.progress
from divelab.interp.cliff_tokens.cli import run_find_cliffs
from divelab.interp.cliff_tokens.potential import RolloutConfig, Trace, estimate_potentials
from divelab.interp.cliff_tokens.task import Problem
from hf_tiny import bpe_tokenizer, tiny_gpt2


def test_chat_without_a_chat_template_names_the_model_and_suggests_dropping_chat(tmp_path, monkeypatch):
    tok = bpe_tokenizer()
    assert not getattr(tok, "chat_template", None)
    monkeypatch.setattr(divelab.lm, "load_model", lambda name: (tiny_gpt2(tok), tok))
    task = tmp_path / "task.jsonl"
    task.write_text('{"prompt": "2+2=", "answer": "4"}\n')
    with pytest.raises(ValueError, match=r"'my-base-model'.*no chat template.*drop --chat"):
        run_find_cliffs("my-base-model", task, chat=True, n=2, max_new_tokens=4)


class _CountingRollouts:
    """Every prefix succeeds in half its continuations; records nothing else."""

    def __init__(self, n: int, batch_rows: int) -> None:
        self.config = RolloutConfig(n=n, batch_rows=batch_rows)

    def success_counts(self, items):
        return [self.config.n // 2 for _ in items]


def test_potentials_progress_counts_prefixes_not_traces(monkeypatch, capsys):
    monkeypatch.setenv("DIVELAB_QUIET", "0")
    monkeypatch.setattr(divelab.progress, "HEARTBEAT_S", 0.0)
    p = Problem("q", "a")
    traces = [Trace(p, [1], list(range(2, 2 + t)), finished=False, correct=False) for t in (5, 9)]
    estimate_potentials(_CountingRollouts(n=4, batch_rows=8), traces)
    lines = [ln for ln in capsys.readouterr().err.splitlines() if "potentials" in ln]
    # 6 + 10 prefixes (every token and the prompt alone), 2 per batch: the count moves within a trace
    assert lines and lines[-1].split(": ")[-1].startswith("16/16"), lines
    assert any(": 2/16" in ln for ln in lines), lines
    assert [tr.ks for tr in traces] == [[2] * 6, [2] * 10]


def test_sample_traces_reports_its_batches(monkeypatch, capsys):
    from divelab.interp.cliff_tokens import potential

    monkeypatch.setenv("DIVELAB_QUIET", "0")
    monkeypatch.setattr(divelab.progress, "HEARTBEAT_S", 0.0)
    monkeypatch.setattr(potential, "sample_batch", lambda model, prompts, **kw: [[7] for _ in prompts])
    roll = SimpleNamespace(config=RolloutConfig(n=2, batch_rows=2, max_new_tokens=3), tokenizer=bpe_tokenizer(),
                           model=None, eos={0}, pad_id=0, checker=lambda text, ans: False, decode=lambda ids: "x")
    out = potential.sample_traces(roll, [Problem("q", "a")] * 3)
    assert len(out) == 3
    assert any("sampling 3 responses" in ln and "2/2" in ln for ln in capsys.readouterr().err.splitlines())
