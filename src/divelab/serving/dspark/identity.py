"""Which target a drafter was trained for, recorded beside it and checked when it is loaded.

A drafter shares its target's embedding and LM head and reads its hidden states, so a drafter loaded
for another model of the same sizes runs without an error and drafts tokens the target rejects: still
lossless, only slow, and nothing says why. The record makes that a clear error at load time.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

from divelab.cache import stable_hash

TARGET_FILE = "target.json"
# what decides whether a drafter's features and token ids mean the same in another model (config
# attribute names; GPT-2's n_embd / n_layer / n_head answer to these through its attribute map)
ARCH_KEYS = ("model_type", "vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
             "num_key_value_heads", "intermediate_size", "max_position_embeddings", "tie_word_embeddings", "head_dim")


def _attr(config: Any, key: str) -> Any:
    try:
        value = getattr(config, key, None)
    except Exception:  # noqa: BLE001 - some configs compute attributes that may raise when unset
        return None
    return value if isinstance(value, bool | int | float | str) or value is None else str(value)


def target_identity(target: Any) -> dict[str, Any]:
    """The target's name, vocabulary size, embedding shape and a hash of its architecture config."""
    config = target.config
    arch = {k: _attr(config, k) for k in ARCH_KEYS}
    emb = target.get_input_embeddings().weight
    return {"name_or_path": str(getattr(config, "_name_or_path", "") or ""),
            "vocab_size": int(config.vocab_size), "embedding_shape": [int(x) for x in emb.shape],
            "config_hash": stable_hash(arch), "config": arch}


def write_identity(folder: Path, identity: dict[str, Any] | None) -> None:
    if identity is not None:
        (folder / TARGET_FILE).write_text(json.dumps(identity, indent=1))


def check_identity(folder: Path, target: Any) -> None:
    """Refuse a drafter recorded for another target (architecture, vocabulary or embedding differ); warn
    when only the name differs (a moved checkpoint is fine) or when the drafter predates the record."""
    path = Path(folder) / TARGET_FILE
    now = target_identity(target)
    name = now["name_or_path"] or type(target).__name__
    if not path.exists():
        warnings.warn(f"the drafter in {folder} has no record of the model it was trained for (saved by an older "
                      f"divelab); only its sizes are checked against {name}. Re-save it with save_drafter (or "
                      "re-run train-drafter) to record its target", stacklevel=3)
        return
    saved = json.loads(path.read_text())
    was = saved.get("name_or_path") or "an unnamed model"
    diffs = [f"{k} {saved.get(k)} vs {now[k]}" for k in ("vocab_size", "embedding_shape") if saved.get(k) != now[k]]
    if saved.get("config_hash") != now["config_hash"]:
        old, new = saved.get("config", {}), now["config"]
        diffs.append("config " + (", ".join(f"{k} {old.get(k)} vs {new.get(k)}" for k in new if old.get(k) != new.get(k))
                                  or "hash differs"))
    if diffs:
        raise ValueError(f"the drafter in {folder} was trained for {was}, not for {name}: {'; '.join(diffs)}. "
                         f"Train a drafter for this model (divelab dspark train-drafter --target ...)")
    # by the last path component: the same checkpoint in another folder (or divelab's cache elsewhere) is the same
    if saved.get("name_or_path") and now["name_or_path"] and \
            Path(saved["name_or_path"]).name != Path(now["name_or_path"]).name:
        warnings.warn(f"the drafter in {folder} was trained for {was}; loading it for {name}, which has the same "
                      "architecture and vocabulary (a renamed checkpoint is fine; a different fine-tune drafts "
                      "worse)", stacklevel=3)
