"""Incremental detokenisation: each step decodes only a few trailing tokens, not the whole output.

The method of vLLM and TGI: decode the window ``ids[prefix:]`` and the already-emitted window
``ids[prefix:read]``; the new text is the difference. Decoding with a few tokens of left context
keeps tokenizers that merge or strip spaces at word starts correct, and a window ending in an
incomplete UTF-8 character (decoded as U+FFFD) waits for the next token.
"""

from __future__ import annotations


class IncrementalDetokenizer:
    """``push(new_ids)`` returns the text those tokens completed; ``flush()`` whatever is left at the end.

    >>> d = IncrementalDetokenizer(tok)        # doctest: +SKIP
    >>> "".join(d.push([t]) for t in ids) + d.flush() == tok.decode(ids, skip_special_tokens=True)
    True
    """

    def __init__(self, tokenizer, skip_special_tokens: bool = True) -> None:
        self.tok, self.skip = tokenizer, skip_special_tokens
        self.ids: list[int] = []
        self.prefix = 0  # start of the context window
        self.read = 0  # tokens whose text has been returned

    def _decode(self, ids: list[int]) -> str:
        return self.tok.decode(ids, skip_special_tokens=self.skip)

    def push(self, new_ids: list[int]) -> str:
        self.ids.extend(new_ids)
        before = self._decode(self.ids[self.prefix: self.read])
        now = self._decode(self.ids[self.prefix:])
        if len(now) > len(before) and not now.endswith("\ufffd"):
            self.prefix, self.read = self.read, len(self.ids)
            return now[len(before):]
        return ""

    def flush(self) -> str:
        """The text of tokens still held back (an incomplete character is returned as U+FFFD)."""
        before = self._decode(self.ids[self.prefix: self.read])
        now = self._decode(self.ids[self.prefix:])
        self.prefix = self.read = len(self.ids)
        return now[len(before):]
