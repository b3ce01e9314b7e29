"""``divelab diff-models``: model diffing with a dedicated-feature crosscoder (E175)."""

from __future__ import annotations

from pathlib import Path

import typer


def register(app: typer.Typer) -> None:
    @app.command("diff-models")
    def diff_models_cmd(base: str = typer.Option(..., help="base model: HF checkpoint dir or zoo name"),
                        sibling: str = typer.Option(..., help="fine-tuned sibling: HF checkpoint dir or zoo name"),
                        prompts: Path = typer.Option(..., help='JSONL of {"prompt": str, "label": 0|1}'),
                        out: Path = typer.Option(Path("diff-models-out"), help="output folder"),
                        layer: int = typer.Option(-1, help="decoder layer (-1: the middle one)"),
                        dict_size: int = typer.Option(256), k: int = typer.Option(8),
                        excl_share: float = typer.Option(0.1), steps: int = typer.Option(600)) -> None:
        """Train a DFC on a base/sibling pair; write ranked A-exclusive features and an intervention table."""
        import json

        from divelab.interp.crosscoder.dfc import CrosscoderConfig
        from divelab.interp.crosscoder.diff import diff_models, read_prompts
        from divelab.lm import load_model

        try:
            texts, labels = read_prompts(prompts)
            mb, tb = load_model(base)
            ms, ts = load_model(sibling)
            res = diff_models(mb, ms, tb, ts, texts, labels, layer=None if layer < 0 else layer, out_dir=out,
                              config=CrosscoderConfig(dict_size=dict_size, k=k, excl_share=excl_share, steps=steps))
        except (ValueError, FileNotFoundError) as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(2) from exc
        typer.echo(json.dumps({k: v for k, v in res.items() if k != "features"}))
        for f in res["features"][:5]:
            typer.echo(f"feature {f['index']}: d={f['cohens_d']:.2f} auroc={f['auroc']:.2f} "
                       f"kl_steer={f['kl_steer']:.3f} kl_ablate={f['kl_ablate']:.3f}")
        typer.echo(f"wrote {out}/features.json")
