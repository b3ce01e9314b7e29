"""A zoo of tiny models trained on the stdlib corpus once, then loaded from the cache.

``pretrained("quick")`` returns ``(model, tokenizer)``: the first call trains the recipe (with a
progress bar; an interrupted run resumes from its last checkpoint), later calls load the
``save_pretrained`` directory (safetensors + tokenizer) from
``cache_root()/models/<stable_hash(recipe + corpus manifest)>``, written with ``atomic_dir``.

Recipes (sized for a 2-core CPU; measured numbers are in ``docs/lm.md``):

- ``smoke``: tiny-100k, 512-token vocab, a 0.6 MB slice of the corpus: seconds, for tests.
- ``small``: tiny-1m, 4096-token vocab, a few minutes.
- ``quick``: tiny-4m, 4096-token vocab, a few minutes.
- ``full``: tiny-16m, 8192-token vocab, hours (resumable: checkpoints every 50 steps).

A model config name (``tiny-4m``) selects the recipe built on that config; keyword overrides
(``steps``, ``seq_len``, ``vocab_size``, ...) change the recipe and therefore the cache key.
"""

from __future__ import annotations

import contextlib
import json
import math
import shutil
from collections.abc import Iterator
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from transformers import AutoModelForCausalLM, PreTrainedModel, PreTrainedTokenizerFast

from divelab.cache import atomic_dir, entry_path, lock, stable_hash
from divelab.lm.corpus import CorpusConfig, manifest
from divelab.lm.models import MODEL_CONFIGS, build_model, count_parameters
from divelab.lm.tokenizer import encode_split, get_tokenizer, load_tokenizer
from divelab.lm.train import TrainConfig, TrainResult, train

_VERSION = 1  # bump when the training code changes in a way that changes results
META_FILE = "divelab_zoo.json"


@dataclass(frozen=True)
class Recipe:
    """Everything that determines a zoo model (hashed into its cache key)."""

    model: str
    vocab_size: int
    train: TrainConfig
    corpus: CorpusConfig = CorpusConfig()
    description: str = ""

    def __post_init__(self) -> None:
        if self.model not in MODEL_CONFIGS:
            raise ValueError(f"unknown model config {self.model!r}; allowed: {', '.join(MODEL_CONFIGS)}")
        max_pos = MODEL_CONFIGS[self.model].max_position_embeddings
        if self.train.seq_len > max_pos:
            raise ValueError(f"seq_len {self.train.seq_len} exceeds {self.model}'s max_position_embeddings {max_pos}")


RECIPES: dict[str, Recipe] = {
    "smoke": Recipe("tiny-100k", 512,
                    TrainConfig(steps=150, batch_size=8, seq_len=128, lr=5e-3, warmup=10, eval_every=0, eval_batches=4),
                    CorpusConfig(max_bytes=600_000), "seconds; for tests"),
    "small": Recipe("tiny-1m", 4096,
                    TrainConfig(steps=100, batch_size=16, seq_len=256, lr=4e-3, warmup=10, eval_every=50,
                                eval_batches=8, ckpt_every=50),
                    description="a few minutes"),
    "quick": Recipe("tiny-4m", 4096,
                    TrainConfig(steps=100, batch_size=16, seq_len=256, lr=3e-3, warmup=10, eval_every=50,
                                eval_batches=8, ckpt_every=25),
                    description="a few minutes; about 2 s per 4k-token step on 2 idle cores"),
    "full": Recipe("tiny-16m", 8192,
                   TrainConfig(steps=1500, batch_size=8, seq_len=512, lr=1.5e-3, warmup=100, eval_every=250,
                               eval_batches=16, ckpt_every=50),
                   description="hours: 13.4 s/step measured under load (about 4-6 h); not run here"),
}
CONFIG_RECIPE = {"tiny-100k": "smoke", "tiny-1m": "small", "tiny-4m": "quick", "tiny-16m": "full"}
_TRAIN_FIELDS = {f for f in TrainConfig.__dataclass_fields__}


def allowed_names() -> list[str]:
    return [*RECIPES, *CONFIG_RECIPE]


def recipe(name: str = "quick", **overrides: object) -> Recipe:
    """The named recipe (or the recipe of a model config name) with overrides applied.

    Overrides: ``vocab_size``, ``model``, ``corpus`` (a CorpusConfig) and any TrainConfig field
    (``steps``, ``seq_len``, ``batch_size``, ``lr``, ``seed``, ...).
    """
    if name in RECIPES:
        base = RECIPES[name]
    elif name in CONFIG_RECIPE:
        base = RECIPES[CONFIG_RECIPE[name]]
    else:
        raise ValueError(f"unknown zoo name {name!r}; allowed: {', '.join(allowed_names())}")
    train_kw = {k: v for k, v in overrides.items() if k in _TRAIN_FIELDS}
    other = {k: v for k, v in overrides.items() if k not in _TRAIN_FIELDS}
    bad = set(other) - {"vocab_size", "model", "corpus", "description"}
    if bad:
        raise ValueError(f"unknown recipe override(s) {sorted(bad)}; allowed: vocab_size, model, corpus, "
                         f"and TrainConfig fields {sorted(_TRAIN_FIELDS)}")
    if name in CONFIG_RECIPE and "model" not in other:
        other["model"] = name
    return replace(base, train=replace(base.train, **train_kw), **other)  # type: ignore[arg-type]


def recipe_key(r: Recipe) -> str:
    d = asdict(r)
    d.pop("description")
    d["train"].pop("num_threads")  # threads change speed, not results
    return stable_hash({"recipe": d, "corpus": manifest(r.corpus).key, "version": _VERSION})


def model_path(name: str = "quick", **overrides: object) -> Path:
    """Where the zoo model lives (whether or not it has been trained yet)."""
    return entry_path("models", recipe_key(recipe(name, **overrides)))


def ensure_trained(name: str = "quick", *, force: bool = False, **overrides: object) -> Path:
    """Train the recipe unless it is cached; return the model directory."""
    r = recipe(name, **overrides)
    final = entry_path("models", recipe_key(r))
    runs = entry_path("runs", final.name)  # checkpoints: an interrupted run resumes here
    with lock(final):
        if force:
            shutil.rmtree(final, ignore_errors=True)
            shutil.rmtree(runs, ignore_errors=True)
        if (final / META_FILE).exists():
            return final
        tokenizer = get_tokenizer(r.vocab_size, r.corpus)
        train_tokens = encode_split(tokenizer, "train", r.corpus)
        val_tokens = encode_split(tokenizer, "val", r.corpus)
        model = build_model(r.model, len(tokenizer), seed=r.train.seed)
        model.config.eos_token_id = tokenizer.eos_token_id
        model.config.pad_token_id = tokenizer.pad_token_id
        model.config.bos_token_id = tokenizer.bos_token_id
        result: TrainResult = train(model, train_tokens, val_tokens, r.train, ckpt_dir=runs,
                                    description=f"training {name} ({r.model})")
        meta = {"name": name, "recipe": asdict(r), "key": final.name, "parameters": count_parameters(model),
                "corpus": manifest(r.corpus).to_dict(), "train_tokens": int(len(train_tokens)),
                "val_tokens": int(len(val_tokens)), "result": result.to_dict()}
        with atomic_dir(final) as tmp, _quiet_hf():
            model.generation_config.eos_token_id = tokenizer.eos_token_id
            model.generation_config.pad_token_id = tokenizer.pad_token_id
            model.save_pretrained(tmp, safe_serialization=True)
            tokenizer.save_pretrained(tmp)
            _write_meta(tmp, meta)
        shutil.rmtree(runs, ignore_errors=True)
    return final


def _write_meta(directory: Path, meta: dict) -> None:
    (directory / META_FILE).write_text(json.dumps(meta, indent=2, default=str))


@contextlib.contextmanager
def _quiet_hf() -> Iterator[None]:
    # transformers' own "Writing model shards" bar would clutter divelab's rich output
    from transformers.utils import logging as hf_logging

    was = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was:
            hf_logging.enable_progress_bar()


def pretrained(name: str = "quick", *, vocab_size: int | None = None, steps: int | None = None,
               seq_len: int | None = None, batch_size: int | None = None, lr: float | None = None,
               seed: int | None = None, force: bool = False,
               **overrides: object) -> tuple[PreTrainedModel, PreTrainedTokenizerFast]:
    """A trained tiny model and its tokenizer: trained on first use, then loaded from the cache.

    ``name`` is a recipe (``smoke``, ``small``, ``quick``, ``full``) or a model config
    (``tiny-4m`` → the recipe built on it). ``None`` keeps the recipe's value; anything set
    (including further TrainConfig fields, ``model=`` or ``corpus=``) changes the cache key.

    >>> model, tok = pretrained("smoke")            # doctest: +SKIP
    >>> model, tok = pretrained("tiny-4m", steps=50, seed=1)   # doctest: +SKIP
    """
    explicit = {"vocab_size": vocab_size, "steps": steps, "seq_len": seq_len, "batch_size": batch_size,
                "lr": lr, "seed": seed}
    overrides.update({k: v for k, v in explicit.items() if v is not None})
    path = ensure_trained(name, force=force, **overrides)
    with _quiet_hf():
        model = AutoModelForCausalLM.from_pretrained(path, local_files_only=True)
    model.eval()
    return model, load_tokenizer(path)


def info(name: str = "quick", **overrides: object) -> dict | None:
    """The stored metadata (recipe, corpus manifest, loss curves) of a trained zoo model, or None."""
    p = model_path(name, **overrides) / META_FILE
    return json.loads(p.read_text()) if p.exists() else None


def summary(meta: dict) -> dict:
    """Headline numbers of a zoo entry's metadata: val loss (nats/token), perplexity, bits per byte.

    Bits per byte use the val split's bytes per token, so they compare across vocab sizes.
    """
    res = meta["result"]
    loss = res.get("final_val_loss")
    val_bytes = meta["corpus"]["splits"]["val"]["bytes"]
    bpt = val_bytes / max(1, meta["val_tokens"])
    return {"model": meta["recipe"]["model"], "parameters": meta["parameters"],
            "vocab_size": meta["recipe"]["vocab_size"], "steps": res["steps"], "tokens_seen": res["tokens_seen"],
            "train_wall_time_s": res["wall_time_s"], "val_loss": loss,
            "val_ppl": None if loss is None else math.exp(loss),
            "val_bits_per_byte": None if loss is None else loss / math.log(2) / bpt, "bytes_per_token": bpt}


def split_loss(model: PreTrainedModel, tokenizer: PreTrainedTokenizerFast, split: str = "val",
               corpus: CorpusConfig | None = None, *, seq_len: int = 256, batch_size: int = 16,
               max_tokens: int | None = None) -> dict:
    """Cross-entropy of ``model`` on a whole corpus split (non-overlapping windows of ``seq_len``),
    in nats/token, with perplexity and bits per byte. Any HF causal LM with a compatible tokenizer."""
    import torch

    from divelab.lm.train import evaluate

    stream = torch.as_tensor(encode_split(tokenizer, split, corpus).astype("int64"))
    if max_tokens is not None:
        stream = stream[:max_tokens]
    n = len(stream) // seq_len
    if n == 0:
        raise ValueError(f"the {split} split has {len(stream)} tokens, fewer than seq_len={seq_len}")
    windows = stream[: n * seq_len].view(n, seq_len)
    batches = [{"input_ids": w, "attention_mask": torch.ones_like(w), "labels": w}
               for w in windows.split(batch_size)]
    loss = evaluate(model, batches)
    bytes_per_token = manifest(corpus).splits[split].bytes / max(1, len(encode_split(tokenizer, split, corpus)))
    return {"split": split, "tokens": n * seq_len, "loss": loss, "ppl": math.exp(loss),
            "bits_per_byte": loss / math.log(2) / bytes_per_token}
