"""``divelab first-token-probe probe-first-token --save-guard``: the probe it saves is the probe it measured,
loads for the model it was trained on, and scores that model's prompts offline."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

ARGS = ["--template", "<bos> {prompt} <think>", "--labeler", r"regex:\bREFUSE\b", "--unit", "token",
        "--max-new-tokens", "24", "--boot", "100"]


@pytest.mark.parametrize("position", ["first", "prompt_last"])
def test_cli_saves_a_guard_that_loads_and_scores(tiny_ckpt: Path, tmp_path: Path, toy_prompts, position: str) -> None:
    from typer.testing import CliRunner

    from divelab.cli import app
    from divelab.guard import load_guard, score_prompts
    from divelab.lm import load_model

    guard = tmp_path / "guard.json"
    res = CliRunner().invoke(app, ["first-token-probe", "probe-first-token", "--model", str(tiny_ckpt), "--prompts",
                                   str(toy_prompts(40)), "--out", str(tmp_path / "out"), *ARGS,
                                   "--save-guard", str(guard), "--guard-position", position])
    assert res.exit_code == 0, res.output
    model, tok = load_model(str(tiny_ckpt))
    probe = load_guard(guard, model)
    n_states = model.config.num_hidden_layers + 1
    assert probe.position == position and probe.layer == (n_states - 1) // 2 + 1
    got = json.loads((tmp_path / "out" / "results.json").read_text())
    assert "guard" not in got  # the results file is unchanged by saving a guard
    key = "probe" if position == "first" else "probe_prompt_last"
    assert probe.meta["oof_auroc"] == pytest.approx(got[key]["auroc"])  # the probe it measured
    rows = got["rollouts"]
    scored = score_prompts(model, probe, [tok.encode(rows[0]["prompt"])])
    assert scored[0].flagged == (scored[0].score >= probe.threshold)


def test_cli_refuses_an_unknown_position(tiny_ckpt: Path, tmp_path: Path, toy_prompts) -> None:
    from typer.testing import CliRunner

    from divelab.cli import app

    res = CliRunner().invoke(app, ["first-token-probe", "probe-first-token", "--model", str(tiny_ckpt), "--prompts",
                                   str(toy_prompts(40)), "--out", str(tmp_path / "out"), *ARGS,
                                   "--save-guard", str(tmp_path / "g.json"), "--guard-position", "last"])
    assert res.exit_code == 2 and "--guard-position" in res.output
    assert not (tmp_path / "g.json").exists()
