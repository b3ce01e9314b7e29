"""Token counting for context budgets.

Budgets are only as honest as the counter. ``default_counter()`` uses a real BPE tokenizer when
one is available offline (divelab's own byte-level BPE from ``divelab.lm.tokenizer``, or any
``tokenizer.json`` the user points at); otherwise it falls back to the stated estimate
``ceil(chars / 4)``, the usual rule of thumb for English under GPT-style BPEs.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from divelab.chat.types import Message

# Per-message framing (role markers etc.), as chat templates add a few tokens per message.
MESSAGE_OVERHEAD = 4


@dataclass
class TokenCounter:
    """Counts tokens of text and of messages. ``name`` says which tokenizer stands behind it."""

    name: str = "chars/4 estimate"
    _encode: Any = None  # callable(str) -> sequence of ids, or None for the chars/4 estimate
    _cache: dict[str, int] = field(default_factory=dict, repr=False)

    def count(self, text: str) -> int:
        if not text:
            return 0
        n = self._cache.get(text)
        if n is None:
            n = len(self._encode(text)) if self._encode is not None else math.ceil(len(text) / 4)
            if len(self._cache) < 200_000:
                self._cache[text] = n
        return n

    def count_message(self, m: Message) -> int:
        return self.count(m.text()) + MESSAGE_OVERHEAD

    def count_messages(self, messages: Iterable[Message]) -> int:
        return sum(self.count_message(m) for m in messages)

    @classmethod
    def chars4(cls) -> TokenCounter:
        return cls()

    @classmethod
    def from_tokenizer(cls, tokenizer: Any, name: str | None = None) -> TokenCounter:
        """Wrap a ``tokenizers.Tokenizer`` or a transformers tokenizer."""
        if hasattr(tokenizer, "encode") and hasattr(tokenizer, "get_vocab_size"):  # tokenizers.Tokenizer

            def enc(text: str) -> list[int]:
                return tokenizer.encode(text, add_special_tokens=False).ids

        elif hasattr(tokenizer, "encode"):  # transformers PreTrainedTokenizer(Fast)

            def enc(text: str) -> list[int]:
                return tokenizer.encode(text, add_special_tokens=False)

        else:
            raise TypeError(f"not a tokenizer (needs .encode): {type(tokenizer).__name__}")
        return cls(name=name or f"{type(tokenizer).__name__}", _encode=enc)

    @classmethod
    def from_file(cls, path: str | Path) -> TokenCounter:
        """A ``tokenizer.json`` on disk (any Hugging Face fast tokenizer)."""
        from tokenizers import Tokenizer

        p = Path(path)
        if not p.is_file():
            raise FileNotFoundError(f"tokenizer file not found: {p} (expected a Hugging Face tokenizer.json)")
        return cls.from_tokenizer(Tokenizer.from_file(str(p)), name=f"BPE from {p.name}")


def default_counter(train: bool = False) -> TokenCounter:
    """divelab's own offline byte-level BPE (``divelab.lm.tokenizer``, vocab 4096) when it is
    cached — or, with ``train=True``, after training it once (about half a minute) — else the
    chars/4 estimate. Never trains implicitly, so constructing a compactor stays cheap."""
    try:
        from divelab.lm import tokenizer as lm_tok  # the LM engine's tokenizer; optional here

        if not train and not (lm_tok.tokenizer_path() / "tokenizer.json").exists():
            return TokenCounter.chars4()
        tok = lm_tok.get_tokenizer()
        inner = getattr(tok, "_tokenizer", None) or tok
        counter = TokenCounter.from_tokenizer(inner, name="divelab byte-level BPE (vocab 4096)")
        counter.count("probe text")  # make sure it really encodes
        return counter
    except Exception:  # noqa: BLE001 - no LM engine / no corpus: fall back to the stated estimate
        return TokenCounter.chars4()
