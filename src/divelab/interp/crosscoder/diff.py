"""``diff_models``: the component end to end on any two HF checkpoints — harvest, train a DFC, rank features,
and measure each top feature's effect (steer / ablate) on the sibling's next-token distribution."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import torch

from divelab.interp.crosscoder.dfc import A, CrosscoderConfig, train_crosscoder
from divelab.interp.crosscoder.harvest import check_pair, forward, harvest_pairs, layer_hook, left_pad
from divelab.interp.crosscoder.interventions import ablate_features, recon_patch, steer_features
from divelab.interp.crosscoder.ranking import is_dead, rank_features


def read_prompts(path: str | Path) -> tuple[list[str], np.ndarray]:
    """JSONL lines ``{"prompt": str, "label": 0 | 1}`` (1 = the sibling's new behaviour)."""
    texts, labels = [], []
    if not Path(path).is_file():
        raise ValueError(f"--prompts {path} does not exist; give a JSONL file of {{\"prompt\": str, \"label\": 0|1}}")
    for i, line in enumerate(Path(path).read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            texts.append(str(row["prompt"]))
            labels.append(int(row["label"]))
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"{path}:{i}: expected {{\"prompt\": str, \"label\": 0|1}}, got {line[:80]!r}") from exc
    if set(labels) != {0, 1}:
        raise ValueError(f"{path}: labels must include both 0 and 1, got {sorted(set(labels))}")
    return texts, np.array(labels)


@torch.no_grad()
def _kl(model, other, tok, texts, layer, edit) -> float:
    ids, mask = left_pad(tok, texts)
    p = torch.log_softmax(forward(model, ids, mask)[:, -1].float(), -1)
    cap: list = []
    with layer_hook(other, layer, capture=cap):
        forward(other, ids, mask)
    with layer_hook(model, layer, edit=lambda x: edit(x, cap[0][:, -1:]), start=ids.shape[1] - 1):
        q = torch.log_softmax(forward(model, ids, mask)[:, -1].float(), -1)
    return float((p.exp() * (p - q)).sum(-1).mean())


def diff_models(base, sibling, tok_base, tok_sibling, texts, labels, *, layer: int | None = None,
                config: CrosscoderConfig | None = None, top: int = 10, alpha: float = 4.0,
                out_dir: str | Path | None = None) -> dict:
    check_pair(sibling, base, tok_sibling, tok_base)
    layer = base.config.num_hidden_layers // 2 if layer is None else layer
    with torch.no_grad():
        acts_a, acts_b = harvest_pairs(sibling, base, tok_sibling, texts, layer,
                                       out_dir=Path(out_dir) / "acts" if out_dir else None)
    cc = train_crosscoder(acts_a, acts_b, config or CrosscoderConfig())
    ranked = rank_features(cc, acts_a, acts_b, labels, partition="A" if cc.n_a else None, top=top)
    if ranked and all(is_dead(f) for f in ranked):
        warnings.warn(f"every ranked feature is dead (Cohen's d = 0, AUROC 0.5 on all {len(ranked)}): none fires "
                      "differently on the two classes, so the ranking and the effects below say nothing. Give more "
                      "prompts of each label, more --steps, or a smaller --dict-size / larger --k", stacklevel=2)
    pos = [t for t, y in zip(texts, labels, strict=True) if y == 1][:64]
    table = [{**vars(f), "kl_steer": _kl(sibling, base, tok_sibling, pos, layer, steer_features(cc, A, [f.index],
                                                                                                 alpha)),
              "kl_ablate": _kl(sibling, base, tok_sibling, pos, layer, ablate_features(cc, A, [f.index]))}
             for f in ranked]
    result = {"layer": layer, "crosscoder": cc.config.label(), "forbidden_max": cc.forbidden_max(),
              "kl_recon_patch": _kl(sibling, base, tok_sibling, pos, layer, recon_patch(cc, A)), "features": table}
    if out_dir:
        import io

        from divelab.cache import atomic_write_bytes, atomic_write_text

        atomic_write_text(Path(out_dir) / "features.json", json.dumps(result, indent=2))
        buf = io.BytesIO()
        torch.save(cc.save_dict(), buf)
        atomic_write_bytes(Path(out_dir) / "crosscoder.pt", buf.getvalue())
    return result
