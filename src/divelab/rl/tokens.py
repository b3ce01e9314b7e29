"""The few token ids a scoring or generating loop needs, from either kind of tokenizer.

divelab's agent policy (:class:`~divelab.rl.policy.LMPolicy`) and language world model score and write text
as token ids, and need three special ids besides: **pad** (fills a batch; masked out), **sep** (ends the
context, so a candidate's first token is predicted from a fixed place) and **eos** (ends a candidate or a
generated next state, so "this and nothing more" gets probability too). Two kinds of tokenizer reach them:

- a raw ``tokenizers.Tokenizer`` with named special tokens (divelab's word-level tokenizers: ``[PAD]``,
  ``[SEP]``, ``[EOS]`` or whichever names the caller asks for) — ids and text exactly as before;
- any Hugging Face tokenizer (``transformers.PreTrainedTokenizerBase``, e.g. the one that comes with a
  checkpoint): eos is its ``eos_token``; pad is its ``pad_token``, or eos when it has none (padding is
  masked out, so the id only has to exist); sep is its ``sep_token`` when it has one, otherwise the
  single id that ``"\\n"`` encodes to (a line break between the context and the answer is what a causal LM
  has seen countless times in pre-training, and it is an ordinary id of the vocabulary, so no embedding is
  added or resized), and eos when ``"\\n"`` is not one token. Text is encoded without the tokenizer's own
  specials (``add_special_tokens=False``): the loops place pad/sep/eos themselves.

:func:`as_tokens` builds a :class:`Tokens` from either; a tokenizer that lacks what is needed gives a
``ValueError`` that names what is missing and what to pass instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from tokenizers import Tokenizer

WORD_SPECIALS = ("[PAD]", "[SEP]", "[EOS]")


class Tokens(Protocol):
    """Text to ids and back, plus the pad / sep / eos ids and the vocabulary size."""

    pad_id: int
    sep_id: int
    eos_id: int
    vocab_size: int

    def encode(self, text: str) -> list[int]:
        """The ids of ``text`` (no special tokens added)."""
        ...

    def decode(self, ids: Sequence[int]) -> str:
        """The text of ``ids``."""
        ...


class WordTokens:
    """A raw ``tokenizers.Tokenizer`` whose pad / sep / eos are named special tokens."""

    def __init__(self, tokenizer: Tokenizer, pad: str = "[PAD]", sep: str = "[SEP]", eos: str = "[EOS]",
                 hint: str = "divelab.rl.policy.train_word_tokenizer()") -> None:
        ids = {t: tokenizer.token_to_id(t) for t in (pad, sep, eos)}
        missing = [t for t, i in ids.items() if i is None]
        if missing:
            raise ValueError(f"tokenizer lacks special tokens {missing}; train it with {hint}, or pass a "
                             "Hugging Face tokenizer (transformers.AutoTokenizer) instead")
        self.tokenizer = tokenizer
        self.pad_id, self.sep_id, self.eos_id = ids[pad], ids[sep], ids[eos]
        self.vocab_size = tokenizer.get_vocab_size()

    def encode(self, text: str) -> list[int]:
        return self.tokenizer.encode(text).ids

    def decode(self, ids: Sequence[int]) -> str:
        # word-level: the tokens themselves, space-separated (special tokens kept: they carry the format)
        return " ".join(self.tokenizer.id_to_token(i) for i in ids)


class HFTokens:
    """A Hugging Face tokenizer; pad / sep / eos come from its own special tokens (see the module docstring)."""

    def __init__(self, tokenizer: Any) -> None:
        name = type(tokenizer).__name__
        if tokenizer.eos_token_id is None:
            raise ValueError(
                f"the Hugging Face tokenizer {name} has no eos_token, and the end of a candidate or of a generated "
                "text is scored as that token; give it one, e.g. tokenizer.add_special_tokens({'eos_token': "
                "'</s>'}) and resize the model's embeddings, or set tokenizer.eos_token to a token its vocabulary "
                "already has (such as its end-of-text token)")
        self.tokenizer = tokenizer
        self.eos_id = int(tokenizer.eos_token_id)
        self.pad_id = int(tokenizer.pad_token_id) if tokenizer.pad_token_id is not None else self.eos_id
        if tokenizer.sep_token_id is not None:
            self.sep_id = int(tokenizer.sep_token_id)
        else:
            newline = self.encode("\n")
            self.sep_id = newline[0] if len(newline) == 1 else self.eos_id
        self.vocab_size = len(tokenizer)

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def decode(self, ids: Sequence[int]) -> str:
        # special tokens (pad, eos, bos) are markers of the batch, not text
        return self.tokenizer.decode(list(ids), skip_special_tokens=True, clean_up_tokenization_spaces=False)


def is_hf_tokenizer(tokenizer: Any) -> bool:
    if isinstance(tokenizer, Tokenizer):
        return False
    from transformers import PreTrainedTokenizerBase

    return isinstance(tokenizer, PreTrainedTokenizerBase)


def as_tokens(tokenizer: Any, *, word_specials: tuple[str, str, str] = WORD_SPECIALS,
              hint: str = "divelab.rl.policy.train_word_tokenizer()") -> Tokens:
    """:class:`Tokens` of ``tokenizer``: a raw ``tokenizers.Tokenizer`` (its special tokens named
    ``word_specials`` = pad, sep, eos; ``hint`` says how to train one) or any Hugging Face tokenizer."""
    if isinstance(tokenizer, Tokenizer):
        pad, sep, eos = word_specials
        return WordTokens(tokenizer, pad, sep, eos, hint)
    if is_hf_tokenizer(tokenizer):
        return HFTokens(tokenizer)
    raise TypeError(f"expected a tokenizers.Tokenizer or a Hugging Face tokenizer "
                    f"(transformers.PreTrainedTokenizerBase), got {type(tokenizer).__name__}")
