"""E171: the CLI on a tiny checkpoint saved to disk, its errors, and a smoke reproduction."""

from __future__ import annotations

import json
from pathlib import Path

TOY_ARGS = ["--template", "<bos> {prompt} <think>", "--labeler", r"regex:\bREFUSE\b", "--unit", "token",
            "--refuse-words", "cannot,unsafe,decline", "--comply-words", "sure,fine,helpful", "--max-new-tokens", "24",
            "--boot", "100"]


def test_cli_probes_a_checkpoint_on_disk(tiny_ckpt: Path, tmp_path: Path, toy_prompts) -> None:
    from typer.testing import CliRunner

    from divelab.cli import app

    out = tmp_path / "out"
    res = CliRunner().invoke(app, ["probe-first-token", "--model", str(tiny_ckpt), "--prompts",
                                   str(toy_prompts(40)), "--out", str(out), "--replay-k", "8", "--max-flips", "6", *TOY_ARGS])
    assert res.exit_code == 0, res.output
    got = json.loads((out / "results.json").read_text())
    assert 0.0 <= got["probe"]["auroc"] <= 1.0 and len(got["valley"]["J"]) == 21
    assert got["n"] == 40 and 0 < got["refusals"] < 40
    assert "flip_table" in got or got["flips_found"] == 0
    assert all("harm" in r for r in got["rollouts"])  # metadata kept
    # the probe one token earlier, the shuffled-label and request-text controls, and the scores behind them
    assert 0.0 <= got["probe_prompt_last"]["auroc"] <= 1.0 and got["shuffled_control"]["n"] == 40
    assert len(got["oof_scores"]) == len(got["oof_scores_text"]) == len(got["oof_scores_prompt_text"]) == 40


def test_cli_errors(tiny_ckpt: Path, tmp_path: Path, toy_prompts) -> None:
    from typer.testing import CliRunner

    from divelab.cli import app

    run = CliRunner().invoke
    base = ["probe-first-token", "--model", str(tiny_ckpt), "--out", str(tmp_path / "o")]
    bad = run(app, [*base, "--prompts", str(toy_prompts(40)), *TOY_ARGS[2:], "--template", "{prompt} Answer:"])
    assert bad.exit_code == 2 and "no thinking delimiter" in bad.output
    few = run(app, [*base, "--prompts", str(toy_prompts(3)), *TOY_ARGS])
    assert few.exit_code == 2 and "fewer prompts" in few.output
    one = run(app, [*base, "--prompts", str(toy_prompts(12)), *TOY_ARGS[:2], "--labeler", "regex:NEVER_MATCHES",
                    "--max-new-tokens", "24"])
    assert one.exit_code == 2 and "same label" in one.output
    lab = run(app, [*base, "--prompts", str(toy_prompts(12)), "--labeler", "llm"])
    assert lab.exit_code == 2 and "allowed" in lab.output
    assert not (tmp_path / "o" / "results.json").exists()


def test_reproduce_smoke_computes_claims(tiny_ckpt: Path) -> None:
    from divelab.claims import Kind
    from divelab.scaleout import run_reproduction
    from divelab.verdicts import reapply

    rep = run_reproduction("divelab.oversight.first_token", "smoke", 0)
    assert rep.system == "first-token-probe" and len(rep.claims) >= 12
    kinds = {c.kind for c in rep.claims}
    assert {Kind.EMPIRICAL, Kind.BY_CONSTRUCTION, Kind.CHECK, Kind.PLANTED} <= kinds
    # the generator's κ sets the first-token AUROC: planted, and the set-up says so
    probe = next(c for c in rep.claims if c.statement.startswith("First-token probe AUROC"))
    assert probe.kind is Kind.PLANTED and "σ(" in rep.planted
    defence = [c for c in rep.claims if c.rule and c.rule["args"].get("training_runs") is not None]
    assert len(defence) == 4 and all(c.rule["args"]["training_runs"] == 1 for c in defence)
    for c in rep.claims:
        if c.rule is not None:  # every verdict re-derives from its recorded rule
            assert reapply(c.rule).verdict is c.verdict
    assert {f.name for f in rep.figures} == {"valley", "continuation_variance", "defence_plane"}
    assert rep.details["regimes"]["fast"]["cv"]["fractions"][1] == 0.2
    json.loads(rep.to_json())
