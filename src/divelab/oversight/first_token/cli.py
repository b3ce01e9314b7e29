"""``divelab probe-first-token``: is the refuse/comply decision readable at the first thinking token?

Reads prompts from a JSONL file (one ``{"prompt": ...}`` per line; other keys are kept as metadata),
samples one thinking trace per prompt from the model, labels each answer, and writes the first-token
AUROC (with the text-only control), the valley curve, and the stance-flip table to ``--out``.
"""

from __future__ import annotations

import json
from pathlib import Path

import typer


def read_prompts(path: Path) -> tuple[list[str], list[dict]]:
    from divelab.jsonl import read_objects

    prompts, metas = [], []
    for n, row in read_objects(path, "prompts"):
        if not isinstance(row.get("prompt"), str):
            raise ValueError(f"{path}:{n} must be an object with a string 'prompt', got {json.dumps(row)[:80]!r}")
        prompts.append(row.pop("prompt"))
        metas.append(row)
    return prompts, metas


def make_labeler(spec: str):
    from divelab.oversight.first_token.labels import RegexLabeler, default_refusal_vote

    if spec == "vote":
        return default_refusal_vote()
    if spec.startswith("regex:") and len(spec) > 6:
        return RegexLabeler(spec[6:])
    raise ValueError(f"unknown labeler {spec!r}; allowed: 'vote' (four regex classifiers, majority) or "
                     f"'regex:PATTERN' (refuse when PATTERN matches the answer)")


def register(app: typer.Typer) -> None:
    @app.command("probe-first-token")
    def probe_first_token(
        model: str = typer.Option(..., help="a local HF checkpoint directory or a divelab zoo name"),
        prompts: Path = typer.Option(..., help="JSONL file, one {\"prompt\": ...} per line"),
        out: Path = typer.Option(Path("first-token-probe"), help="directory for results.json"),
        template: str = typer.Option("{prompt} <think>", help="prompt template; must end with the open delimiter"),
        think_open: str = typer.Option("<think>", "--open", help="thinking open delimiter"),
        think_close: str = typer.Option("</think>", "--close", help="thinking close delimiter"),
        chat: bool = typer.Option(False, help="render the prompt with the tokenizer's chat template first"),
        system: str = typer.Option(None, help="system message (with --chat)"),
        labeler: str = typer.Option("vote", help="'vote' or 'regex:PATTERN' (refuse when it matches the answer)"),
        refuse_words: str = typer.Option("", help="comma-separated refuse-ish stance words (default: built-in)"),
        comply_words: str = typer.Option("", help="comma-separated comply-ish stance words (default: built-in)"),
        unit: str = typer.Option("sentence", help="stance unit: sentence or token"),
        max_new_tokens: int = typer.Option(128, help="tokens to sample per trace"),
        temperature: float = typer.Option(1.0, help="sampling temperature"),
        folds: int = typer.Option(5, help="cross-validation folds"),
        layer: int = typer.Option(None, help="hidden layer for the probe (default: middle)"),
        cv_n: int = typer.Option(0, help="continuations per cut for CV(B) (0: skip)"),
        replay_k: int = typer.Option(0, help="resamples per side for cut-replay of flips (0: skip)"),
        max_flips: int = typer.Option(50, help="most flips to cut-replay"),
        boot: int = typer.Option(2000, help="bootstrap resamples for confidence intervals"),
        threads: int = typer.Option(1, help="torch intra-op threads"),
        seed: int = typer.Option(0, help="seed"),
        save_guard: Path = typer.Option(None, help="also write the probe, fitted on every prompt, as a guard "
                                                   "file for 'divelab serve --guard'"),
        guard_position: str = typer.Option("first", help="where the guard reads the layer: 'first' (the first "
                                                         "thinking token) or 'prompt_last' (the last prompt token)"),
    ) -> None:
        """Probe the first thinking token of a model for its refuse/comply decision."""
        from rich.console import Console

        from divelab.cache import atomic_write_text
        from divelab.oversight.first_token.pipeline import (
            DEFAULT_COMPLY_WORDS,
            DEFAULT_REFUSE_WORDS,
            ProbeSettings,
        )
        from divelab.oversight.first_token.rollout import ThinkFormat

        console = Console()
        try:
            fmt = ThinkFormat(template=template, open=think_open, close=think_close, chat=chat, system=system)
            lab = make_labeler(labeler)
            texts, metas = read_prompts(prompts)
            rw = tuple(w.strip() for w in refuse_words.split(",") if w.strip()) or DEFAULT_REFUSE_WORDS
            cw = tuple(w.strip() for w in comply_words.split(",") if w.strip()) or DEFAULT_COMPLY_WORDS
            settings = ProbeSettings(fmt=fmt, max_new_tokens=max_new_tokens, temperature=temperature, folds=folds,
                                     layer=layer, cv_n=cv_n, replay_k=replay_k, refuse_words=rw, comply_words=cw,
                                     unit=unit, seed=seed, max_flips=max_flips, boot=boot)
            from divelab.oversight.first_token.pipeline import check_prompts

            check_prompts(texts, folds)
            if guard_position not in ("first", "prompt_last"):
                raise ValueError(f"--guard-position must be 'first' or 'prompt_last', got {guard_position!r}")
        except ValueError as exc:
            raise typer.BadParameter(str(exc)) from None
        from divelab.lm import load_model
        from divelab.oversight.first_token.pipeline import run_probe

        try:
            m, tok = load_model(model)
            result = run_probe(m, tok, texts, lab, settings, metas=metas, threads=threads,
                               guard_position=guard_position if save_guard is not None else None)
        except ValueError as exc:
            console.print(f"[red]error:[/red] {exc}")
            raise typer.Exit(2) from None
        result["model"] = model
        guard = result.pop("guard", None)
        out.mkdir(parents=True, exist_ok=True)
        if guard is not None:
            guard.save(save_guard)
            console.print(f"wrote the guard probe {save_guard} (layer {guard.layer}, {guard.position}, threshold "
                          f"{guard.threshold:.3f})")
        atomic_write_text(out / "results.json", json.dumps(result, indent=2, default=float))
        p, t, v = result["probe"], result["text_control"], result["valley"]
        console.print(f"first-token AUROC {p['auroc']:.3f} [{p['ci'][0]:.3f}, {p['ci'][1]:.3f}] "
                      f"(text control {t['auroc']:.3f}); {result['refusals']}/{result['n']} refusals")
        console.print(f"valley: J(0)={v['J'][0]:.3g}, interior min at t={v['argmin']:.2f}, J(1)={v['J'][-1]:.3g}; "
                      f"curvature {v['curvature']:.2f} [{v['curvature_ci'][0]:.2f}, {v['curvature_ci'][1]:.2f}]")
        console.print(f"stance flips: {result['flips_found']}"
                      + (f", performative share {result['performative_share']:.2f}" if "performative_share" in result
                         else ""))
        console.print(f"wrote {out / 'results.json'}")
