"""``divelab find-cliffs``: cliff tokens of your own model on your own verifiable task (a JSONL file)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer


def load_task(path: Path) -> list:
    """``{"prompt": ..., "answer": ...}`` per line (``answer`` may also be called ``reference``)."""
    from divelab.interp.cliff_tokens.task import Problem
    from divelab.jsonl import read_objects

    out = []
    for i, row in read_objects(path, "problems"):
        if "prompt" not in row:
            raise ValueError(f"{path}:{i} needs a 'prompt' field; got {row!r:.80}")
        answer = row.get("answer", row.get("reference"))
        if answer is None or str(answer).strip() == "":
            raise ValueError(f"{path}:{i} has no reference answer: every line needs 'answer' (or 'reference'), "
                             "the checker compares responses with it")
        out.append(Problem(str(row["prompt"]), str(answer)))
    return out


def run_find_cliffs(model: str, task: Path, checker: str = "last-number", n: int = 64, per_problem: int = 1,
                    every: int = 1, max_new_tokens: int = 128, temperature: float = 1.0, chat: bool = False,
                    batch_rows: int = 256, seed: int = 0, plot: Path | None = None,
                    threads: int | None = None) -> dict:
    """The work behind the command (importable): returns ``{"cliffs": rows, "traces": rows, "summary": {...}}``.

    ``threads`` pins torch's CPU threads for the run (1 is fastest for tiny models on a busy machine)."""
    if threads is None:
        return _run_find_cliffs(model, task, checker, n, per_problem, every, max_new_tokens, temperature, chat,
                                batch_rows, seed, plot)
    from divelab.threads import torch_threads

    with torch_threads(threads):
        return _run_find_cliffs(model, task, checker, n, per_problem, every, max_new_tokens, temperature, chat,
                                batch_rows, seed, plot)


def _run_find_cliffs(model: str, task: Path, checker: str, n: int, per_problem: int, every: int,
                     max_new_tokens: int, temperature: float, chat: bool, batch_rows: int, seed: int,
                     plot: Path | None) -> dict:
    from divelab.interp.cliff_tokens.detector import detect
    from divelab.interp.cliff_tokens.potential import RolloutConfig, Rollouts, sample_traces
    from divelab.interp.cliff_tokens.task import get_checker
    from divelab.lm import load_model

    problems = load_task(task)
    check = get_checker(checker)
    print(f"loading {model} ...", file=sys.stderr, flush=True)
    m, tok = load_model(model)
    if chat and not getattr(tok, "chat_template", None):
        raise ValueError(f"--chat: the tokenizer of {model!r} has no chat template, so prompts cannot be wrapped "
                         "as a chat; drop --chat to feed each prompt as plain text")
    cfg = RolloutConfig(n=n, temperature=temperature, max_new_tokens=max_new_tokens, batch_rows=batch_rows,
                        seed=seed)
    probe = Rollouts(m, tok, check, cfg)
    traces = sample_traces(probe, problems, per_problem, chat=chat, seed=seed)
    starts = probe.success_counts([(t.prompt_ids, [], t.problem.answer) for t in traces[::per_problem]])
    if not any(t.correct for t in traces) and sum(starts) == 0:
        raise ValueError(f"the checker {checker!r} accepted none of {len(traces) + n * len(starts)} sampled "
                         "responses: every potential would be 0 and no cliff can exist. Check the answers, the "
                         f"checker (allowed: last-number, exact, contains, chain) and --chat / --max-new-tokens")
    det = detect(m, tok, problems, checker=check, config=cfg, every=every, chat=chat, traces=traces)
    by = det.by_trace()
    rows = [{"trace": i, "prompt": t.problem.prompt, "correct": t.correct, "cliffs": len(by.get(i, [])),
             "response": det.rollouts.decode(t.response_ids), "potentials": t.potentials} for i, t in
            enumerate(det.traces)]
    wrong = [r for r in rows if not r["correct"]]
    right = [r for r in rows if r["correct"]]
    summary = {"traces": len(rows), "accuracy": len(right) / len(rows), "cliffs": len(det.cliffs),
               "wrong traces with a cliff": sum(r["cliffs"] > 0 for r in wrong) / max(1, len(wrong)),
               "right traces with a cliff": sum(r["cliffs"] > 0 for r in right) / max(1, len(right)),
               "continuations": det.rollouts.cost.continuations,
               "continuations/s": round(det.rollouts.cost.per_second(), 1)}
    if plot is not None:
        _plot(det, Path(plot))
    return {"cliffs": det.table(), "traces": rows, "summary": summary}


def _plot(det, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from divelab.cache import atomic_write_bytes

    k = len(det.traces)
    fig, axes = plt.subplots(k, 1, figsize=(7, 1.6 * k + 0.4), squeeze=False)
    for i, (ax, tr) in enumerate(zip(axes[:, 0], det.traces, strict=True)):
        p = np.array([np.nan if v is None else v for v in tr.potentials], dtype=float)
        xs = np.flatnonzero(~np.isnan(p))
        ax.plot(xs, p[xs], marker=".", color="tab:green" if tr.correct else "tab:red")
        for c in det.cliffs:
            if c.trace == i:
                ax.axvline(c.token, color="k", ls=":", lw=1)
                ax.annotate(f"{c.text!r} ({c.kind})", (c.token, 0.9), fontsize=7)
        ax.set_ylim(-0.05, 1.05)
        ax.set_ylabel(f"#{i}")
    axes[-1, 0].set_xlabel("response token t")
    fig.suptitle("token-wise potential (dotted: cliff tokens)")
    fig.tight_layout()
    import io

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    plt.close(fig)
    atomic_write_bytes(path, buf.getvalue())


def register(app: typer.Typer) -> None:
    @app.command("find-cliffs")
    def find_cliffs(
        model: str = typer.Option(..., help="a local HF checkpoint directory or a divelab zoo name"),
        task: Path = typer.Option(..., help="JSONL, one {'prompt', 'answer'} per line"),
        checker: str = typer.Option("last-number", help="last-number | exact | contains | chain"),
        n: int = typer.Option(64, help="continuations per prefix (the paper's N)"),
        per_problem: int = typer.Option(1, help="responses sampled per problem"),
        every: int = typer.Option(1, help="compute the potential every k tokens (1 = dense)"),
        max_new_tokens: int = typer.Option(128, help="length cap of responses and continuations"),
        temperature: float = typer.Option(1.0, help="sampling temperature of responses and continuations"),
        chat: bool = typer.Option(False, help="wrap prompts in the tokenizer's chat template"),
        seed: int = typer.Option(0),
        threads: int = typer.Option(1, help="torch CPU threads (1 is fastest for tiny models on a busy CPU)"),
        out: Path = typer.Option(None, help="write the full result (cliffs, traces, potentials) as JSON here"),
        plot: Path = typer.Option(None, help="write a per-trace potential plot (PNG) here"),
    ) -> None:
        """Find the tokens where your model's solutions tip into failure (E172 cliff tokens)."""
        from rich.console import Console
        from rich.table import Table

        err = Console(stderr=True)
        try:
            result = run_find_cliffs(model, task, checker, n, per_problem, every, max_new_tokens, temperature,
                                     chat, seed=seed, plot=plot, threads=threads)
        except (ValueError, FileNotFoundError) as exc:
            err.print(f"[red]error:[/red] {exc}")
            raise typer.Exit(2) from None
        table = Table(title="cliff tokens")
        for col in ("trace", "token", "text", "p_prev", "p_curr", "type", "context"):
            table.add_column(col)
        for r in result["cliffs"]:
            table.add_row(*(str(r[c]) for c in ("trace", "token", "text", "p_prev", "p_curr", "type", "context")))
        Console().print(table)
        for k, v in result["summary"].items():
            err.print(f"{k}: {v}")
        if out is not None:
            from divelab.cache import atomic_write_text

            atomic_write_text(out, json.dumps(result, indent=1))
