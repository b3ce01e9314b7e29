"""``--vocab-size`` is checked against the tokenizer's own limits, before any work, without slowing ``--help``."""

from __future__ import annotations

import subprocess
import sys

import pytest
from typer.testing import CliRunner

from divelab.cli import app
from divelab.lm import tokenizer, zoo

runner = CliRunner()


@pytest.fixture
def trained(monkeypatch: pytest.MonkeyPatch) -> list[dict]:
    """Stands in for training: records the call and stops it with an error the CLI reports."""
    calls: list[dict] = []

    def ensure_trained(recipe: str, **overrides) -> None:
        calls.append(overrides)
        raise ValueError("stopped before training (test)")

    monkeypatch.setattr(zoo, "ensure_trained", ensure_trained)
    return calls


@pytest.mark.parametrize("vocab", [100, tokenizer.MIN_VOCAB - 1, tokenizer.MAX_VOCAB + 1])
def test_a_vocab_size_the_tokenizer_refuses_fails_with_the_range_before_any_work(trained, vocab) -> None:
    res = runner.invoke(app, ["train-lm", "--recipe", "smoke", "--vocab-size", str(vocab)], env={"COLUMNS": "300"})
    assert res.exit_code == 2, res.output
    allowed = f"allowed: an integer from {tokenizer.MIN_VOCAB} to {tokenizer.MAX_VOCAB}"
    assert "--vocab-size" in res.output and allowed in res.output and "Traceback" not in res.output
    assert trained == []


@pytest.mark.parametrize("vocab", [tokenizer.MIN_VOCAB, tokenizer.MAX_VOCAB])
def test_the_tokenizers_limits_themselves_pass(trained, vocab) -> None:
    res = runner.invoke(app, ["train-lm", "--recipe", "smoke", "--vocab-size", str(vocab)], env={"COLUMNS": "300"})
    assert "stopped before training (test)" in res.output and trained[0]["vocab_size"] == vocab


def test_listing_the_commands_does_not_import_the_tokenizer() -> None:
    probe = subprocess.run([sys.executable, "-c", "import sys; from divelab.cli import make_app; make_app(); "
                            "print('divelab.lm.tokenizer' in sys.modules, 'transformers' in sys.modules)"],
                           capture_output=True, text=True, timeout=60)
    assert probe.stdout.strip() == "False False", probe.stderr
