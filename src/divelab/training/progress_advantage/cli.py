"""``divelab score-trajectories``: progress-advantage scores for a JSONL of agent trajectories."""

from __future__ import annotations

from pathlib import Path

import typer


def register(app: typer.Typer) -> None:
    @app.command("score-trajectories")
    def score_trajectories(
        trajectories: Path = typer.Argument(..., help="JSONL, one {'prompt'?, 'steps': [{'observation', 'action'}], "
                                                      "'success'?, 'group'?} per line"),
        policy: str = typer.Option(..., help="post-trained model: a local HF checkpoint dir or a divelab zoo name"),
        reference: str = typer.Option(..., help="its reference/base model (same tokenizer)"),
        beta: float = typer.Option(1.0, help="the KL coefficient of RL training (only scales the scores)"),
        token_agg: str = typer.Option("mean", help="mean|sum|last|min|max over an action's tokens"),
        step_agg: str = typer.Option("mean", help="mean|sum|last|min|max|bottom10 over a trajectory's steps"),
        out: Path = typer.Option(None, help="write one JSON result per line here (default: stdout)"),
        batch_size: int = typer.Option(8, help="trajectories per forward pass"),
    ) -> None:
        """Score each trajectory with beta*log pi_policy/pi_reference on its action spans; report the blamed
        step of each, the best of each 'group', and the AUROC when 'success' labels are given."""
        import json

        from rich.console import Console

        err = Console(stderr=True)
        try:
            result = run_scoring(trajectories, policy, reference, beta, token_agg, step_agg, batch_size)
        except (ValueError, FileNotFoundError) as exc:
            err.print(f"[red]error:[/red] {exc}")
            raise typer.Exit(2) from None
        lines = "\n".join(json.dumps(r) for r in result["trajectories"]) + "\n"
        if out is None:
            typer.echo(lines, nl=False)
        else:
            from divelab.cache import atomic_write_text

            atomic_write_text(out, lines)
        for k, v in result["summary"].items():
            err.print(f"{k}: {v}")


def run_scoring(path: Path, policy: str, reference: str, beta: float, token_agg: str, step_agg: str,
                batch_size: int = 8) -> dict:
    """The work behind the command (importable for tests and scripts)."""
    import json

    import numpy as np

    from divelab.training.progress_advantage.aggregate import (
        STEP_AGGREGATIONS,
        TOKEN_AGGREGATIONS,
        auroc,
    )
    from divelab.training.progress_advantage.scorer import ProgressAdvantage, load_jsonl

    if token_agg not in TOKEN_AGGREGATIONS:
        raise ValueError(f"unknown token aggregation {token_agg!r}; allowed: {', '.join(TOKEN_AGGREGATIONS)}")
    if step_agg not in STEP_AGGREGATIONS:
        raise ValueError(f"unknown step aggregation {step_agg!r}; allowed: {', '.join(STEP_AGGREGATIONS)}")
    if not Path(path).exists():
        raise FileNotFoundError(f"no such trajectories file: {path}")
    trajs = load_jsonl(path)
    if not trajs:
        raise ValueError(f"{path} holds no trajectories")
    pol, pol_tok = _load(policy)
    ref, ref_tok = _load(reference)
    pa = ProgressAdvantage(pol, ref, pol_tok, beta=beta, reference_tokenizer=ref_tok, batch_size=batch_size)
    scored = pa.score_trajectories(trajs)
    rows = []
    for i, (t, s) in enumerate(zip(trajs, scored, strict=True)):
        rows.append({"index": i, "score": s.score(token_agg, step_agg),
                     "step_advantages": s.step_advantages(token_agg).tolist(),
                     "failure_step": s.failure_step(token_agg), "mean_logprob": s.mean_logprob(),
                     "self_certainty": s.self_certainty(),
                     **({"success": t.success} if t.success is not None else {}),
                     **({"group": t.meta["group"]} if "group" in t.meta else {})})
    groups: dict = {}
    for r in rows:
        if "group" in r:
            groups.setdefault(json.dumps(r["group"]), []).append(r)
    for members in groups.values():
        best = max(members, key=lambda r: r["score"])
        for r in members:
            r["best_in_group"] = r is best
    summary: dict = {"trajectories": len(rows), "aggregation": f"{token_agg}/{step_agg}", "beta": beta}
    labels = [r.get("success") for r in rows]
    if all(v is not None for v in labels) and 0 < sum(labels) < len(labels):
        summary["auroc"] = round(auroc(np.array([r["score"] for r in rows]), np.array(labels)), 4)
    if groups and all(v is not None for v in labels):
        summary["best_of_group_success"] = round(float(np.mean([r["success"] for r in rows
                                                                if r.get("best_in_group")])), 4)
    return {"trajectories": rows, "summary": summary}


def _load(name_or_path: str):  # -> (model, tokenizer)
    from divelab.lm import load_model

    return load_model(name_or_path)
