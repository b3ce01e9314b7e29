"""Byte-level BPE trained offline on the corpus's train split, wrapped as a ``transformers`` fast
tokenizer.

Byte-level means every string round-trips exactly (indentation, tabs, unicode), which matters for
Python source. Special tokens: ``<|endoftext|>`` (eos, also the document separator in training
streams), ``<|pad|>`` and ``<|bos|>``; none is added automatically by ``encode`` (callers add
what they need). Trained tokenizers are cached under
``cache_root()/tokenizers/<hash of (vocab size, corpus manifest, recipe version)>``, written
atomically.
"""

from __future__ import annotations

import io
import os
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

from divelab.cache import atomic_dir, atomic_write_bytes, entry_path, stable_hash
from divelab.lm.corpus import CorpusConfig, load_corpus, manifest

EOS, PAD, BOS = "<|endoftext|>", "<|pad|>", "<|bos|>"
SPECIAL_TOKENS = [EOS, PAD, BOS]
MIN_VOCAB = 256 + len(SPECIAL_TOKENS) + 1
MAX_VOCAB = 65_535  # every id fits in uint16, the dtype the cached token streams use
_VERSION = 1  # bump when the training recipe changes, so old cache entries are not reused


def _check_vocab(vocab_size: int) -> None:
    if not isinstance(vocab_size, int) or vocab_size < MIN_VOCAB or vocab_size > MAX_VOCAB:
        raise ValueError(f"vocab_size must be an int in [{MIN_VOCAB}, {MAX_VOCAB}] (256 bytes + "
                         f"{len(SPECIAL_TOKENS)} special tokens + merges); got {vocab_size!r}")


def train_tokenizer(texts: list[str], vocab_size: int = 4096) -> PreTrainedTokenizerFast:
    """Train a byte-level BPE tokenizer on ``texts`` (no caching)."""
    _check_vocab(vocab_size)
    if not texts:
        raise ValueError("train_tokenizer needs at least one text")
    os.environ.setdefault("RAYON_NUM_THREADS", "2")  # this machine has 2 cores, shared
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=2, special_tokens=SPECIAL_TOKENS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(texts, trainer=trainer)
    return wrap(tok)


def wrap(tok: Tokenizer) -> PreTrainedTokenizerFast:
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=EOS, pad_token=PAD, bos_token=BOS,
                                   clean_up_tokenization_spaces=False)
    fast.model_max_length = 1_000_000  # streams are chunked by the trainer, not by the tokenizer
    return fast


def tokenizer_key(vocab_size: int, corpus: CorpusConfig | None = None) -> str:
    return stable_hash({"vocab_size": vocab_size, "corpus": manifest(corpus).split_key("train"),
                        "version": _VERSION})


def tokenizer_path(vocab_size: int = 4096, corpus: CorpusConfig | None = None) -> Path:
    return entry_path("tokenizers", tokenizer_key(vocab_size, corpus))


def get_tokenizer(vocab_size: int = 4096, corpus: CorpusConfig | None = None) -> PreTrainedTokenizerFast:
    """The BPE tokenizer for the corpus's train split: trained once, then loaded from the cache.

    >>> tok = get_tokenizer(512, CorpusConfig(max_bytes=200_000))
    >>> tok.decode(tok.encode("def f(x):\\n    return x\\n"))
    'def f(x):\\n    return x\\n'
    """
    _check_vocab(vocab_size)
    path = tokenizer_path(vocab_size, corpus)
    if not (path / "tokenizer.json").exists():
        fast = train_tokenizer(load_corpus("train", corpus), vocab_size)
        with atomic_dir(path) as tmp:
            fast.save_pretrained(tmp)
    return load_tokenizer(path)


def load_tokenizer(path: str | Path) -> PreTrainedTokenizerFast:
    fast = PreTrainedTokenizerFast.from_pretrained(str(path), local_files_only=True)
    fast.model_max_length = 1_000_000
    return fast


def encode_split(tokenizer: PreTrainedTokenizerFast, split: str = "train",
                 corpus: CorpusConfig | None = None) -> np.ndarray:
    """The split as one token stream (each file followed by eos), cached as ``.npy``."""
    key = stable_hash({"tok": stable_hash(tokenizer.backend_tokenizer.to_str()),
                       "split": manifest(corpus).split_key(split), "split_name": split})
    path = entry_path("tokens", f"{key}.npy")
    if not path.exists():
        stream = _encode_texts(tokenizer, tuple(load_corpus(split, corpus)))
        buf = io.BytesIO()
        np.save(buf, stream)
        atomic_write_bytes(path, buf.getvalue())
    return np.load(path)


def _encode_texts(tokenizer: PreTrainedTokenizerFast, texts: tuple[str, ...]) -> np.ndarray:
    eos = tokenizer.eos_token_id
    dtype = np.uint16 if len(tokenizer) < 65_536 else np.int32
    parts: list[np.ndarray] = []
    for enc in tokenizer.backend_tokenizer.encode_batch(list(texts), add_special_tokens=False):
        parts.append(np.asarray(enc.ids + [eos], dtype=dtype))
    return np.concatenate(parts) if parts else np.zeros(0, dtype=dtype)

