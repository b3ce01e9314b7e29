"""Compaction strategies: how a long history is cut down to a token budget.

Every compactor answers ``view(history, budget) -> messages``: given the full, append-only
history, the messages the model will see. Stateful ones (running summaries) keep their state
between calls of one episode; ``reset()`` starts a new episode. Leading ``system`` messages are
the immutable system slot and are never compacted — the paper's point is that governance rules
usually live *outside* that slot (memory, onboarding turns, policy files loaded into context).

Here: keep-last-N eviction, head+tail, and a running summariser driven by any ``Summarizer``
(an LLM through ``ChatSummarizer``, or sumy's LexRank/TextRank through ``SumySummarizer``).
Adapters around AutoGen / LangChain / LangMem live in ``adapters.py``; the pinning wrapper in
``pinning.py``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from divelab.chat.types import ChatModel, Message
from divelab.safety.pinning.tokens import TokenCounter, default_counter


@runtime_checkable
class Compactor(Protocol):
    name: str
    compactions: int  # how many times this episode the view dropped or rewrote history

    def view(self, history: list[Message], budget: int) -> list[Message]: ...

    def reset(self) -> None: ...


def split_system(history: list[Message]) -> tuple[list[Message], list[Message]]:
    """Leading system messages (never compacted) and the rest."""
    i = 0
    while i < len(history) and history[i].role == "system":
        i += 1
    return list(history[:i]), list(history[i:])


class Budgeted:
    """What the compactors share: ``compactions`` counts this episode's views that dropped or rewrote history,
    ``reset()`` zeroes it, and :meth:`split` keeps the leading system messages apart (never compacted) and says how
    many tokens the rest may take. A dataclass subclass declares ``name``, ``counter`` and ``compactions`` as fields."""

    name: str
    counter: TokenCounter
    compactions: int

    def reset(self) -> None:
        self.compactions = 0

    def split(self, history: list[Message], budget: int, floor: int = 0) -> tuple[list[Message], list[Message], int]:
        """``(system messages, the rest, room)``: room is the budget left after the system messages, at least
        ``floor`` tokens."""
        sys_msgs, rest = split_system(history)
        return sys_msgs, rest, max(budget - self.counter.count_messages(sys_msgs), floor)


def fit_suffix(messages: list[Message], budget: int, counter: TokenCounter) -> int:
    """Index where the longest suffix of ``messages`` that fits in ``budget`` tokens starts."""
    used = 0
    start = len(messages)
    for i in range(len(messages) - 1, -1, -1):
        used += counter.count_message(messages[i])
        if used > budget:
            break
        start = i
    return start


def fit_prefix(messages: list[Message], budget: int, counter: TokenCounter) -> int:
    """Length of the longest prefix of ``messages`` that fits in ``budget`` tokens."""
    used = 0
    for i, m in enumerate(messages):
        used += counter.count_message(m)
        if used > budget:
            return i
    return len(messages)


@dataclass
class KeepLastN(Budgeted):
    """Evict the oldest messages: keep the newest ``n`` (or, with ``n=None``, as many as fit)."""

    n: int | None = None
    counter: TokenCounter = field(default_factory=default_counter)
    name: str = "keep-last-n"
    compactions: int = 0

    def view(self, history: list[Message], budget: int) -> list[Message]:
        sys_msgs, rest = split_system(history)
        room = budget - self.counter.count_messages(sys_msgs)
        if self.n is None and self.counter.count_messages(rest) <= room:
            return list(history)
        start = fit_suffix(rest, max(room, 0), self.counter) if self.n is None else max(0, len(rest) - self.n)
        if start > 0:
            self.compactions += 1
        return sys_msgs + rest[start:]


@dataclass
class HeadTail(Budgeted):
    """Keep the first messages (``head_frac`` of the budget) and the newest; drop the middle."""

    head_frac: float = 0.3
    counter: TokenCounter = field(default_factory=default_counter)
    name: str = "head-tail"
    compactions: int = 0

    def __post_init__(self) -> None:
        if not 0.0 <= self.head_frac < 1.0:
            raise ValueError(f"head_frac must be in [0, 1), got {self.head_frac}")

    def view(self, history: list[Message], budget: int) -> list[Message]:
        sys_msgs, rest, room = self.split(history, budget)
        if self.counter.count_messages(rest) <= room:
            return list(history)
        self.compactions += 1
        marker = Message("user", "[... earlier messages omitted ...]")
        room = max(room - self.counter.count_message(marker), 0)
        head_n = fit_prefix(rest, int(room * self.head_frac), self.counter)
        head = rest[:head_n]
        tail_room = room - self.counter.count_messages(head)
        tail_start = max(fit_suffix(rest, max(tail_room, 0), self.counter), head_n)
        return sys_msgs + head + [marker] + rest[tail_start:]


class Summarizer(Protocol):
    """Writes a summary of ``messages`` (extending ``previous``) in at most ~``max_tokens`` tokens."""

    name: str

    def __call__(self, messages: list[Message], previous: str, max_tokens: int) -> str: ...


def transcript(messages: list[Message]) -> str:
    return "\n\n".join(f"[{m.role}] {m.text()}" for m in messages)


DEFAULT_SUMMARY_PROMPT = (
    "You are compacting the context of a long-running assistant. Write a concise summary of the "
    "conversation below so the assistant can continue the task. Keep what is needed to continue "
    "the work. Stay under {max_tokens} tokens.\n\n"
    "Previous summary (may be empty):\n{previous}\n\n<transcript>\n{transcript}\n</transcript>"
)


@dataclass
class ChatSummarizer:
    """An LLM summariser: any ``ChatModel``, prompt configurable (``{previous}``,
    ``{transcript}``, ``{max_tokens}`` are filled in). The default prompt is task-focused, like
    the stock prompts the paper measures; it does not mention rules on purpose."""

    model: ChatModel
    prompt: str = DEFAULT_SUMMARY_PROMPT
    name: str = "llm-summary"

    def __post_init__(self) -> None:
        for slot in ("{transcript}",):
            if slot not in self.prompt:
                raise ValueError(f"summary prompt must contain {slot}; got {self.prompt[:80]!r}...")

    def __call__(self, messages: list[Message], previous: str, max_tokens: int) -> str:
        text = self.prompt.format(previous=previous or "(none)", transcript=transcript(messages),
                                  max_tokens=max_tokens)
        reply = self.model.complete([Message("user", text)], max_tokens=max(16, max_tokens))
        return reply.message.content.strip()


class RegexSentenceTokenizer:
    """Offline sentence/word tokenizer for sumy (NLTK's punkt data cannot be downloaded here):
    sentences end at . ! ? followed by space, or at a line break."""

    language = "english"
    _split = re.compile(r"(?<=[.!?])\s+|\n+")
    _word = re.compile(r"[A-Za-z][A-Za-z'-]*")

    def to_sentences(self, paragraph: str) -> tuple[str, ...]:
        return tuple(s.strip() for s in self._split.split(paragraph) if s and s.strip())

    def to_words(self, sentence: str) -> tuple[str, ...]:
        return tuple(self._word.findall(sentence))


SUMY_METHODS = ("lexrank", "textrank", "lsa", "luhn")


@dataclass
class SumySummarizer:
    """Extractive summary by sumy (LexRank, TextRank, LSA or Luhn): picks whole sentences by
    centrality, no LLM. Sentences are kept verbatim, so a rule survives exactly when its sentence
    is picked."""

    method: str = "lexrank"
    counter: TokenCounter = field(default_factory=default_counter)
    name: str = ""

    def __post_init__(self) -> None:
        if self.method not in SUMY_METHODS:
            raise ValueError(f"unknown sumy method {self.method!r}; allowed: {', '.join(SUMY_METHODS)}")
        self.name = self.name or f"sumy-{self.method}"
        self._cache: dict[tuple[str, int], str] = {}

    def _summarizer(self):  # noqa: ANN202 - sumy has no type hints
        from sumy.summarizers.lex_rank import LexRankSummarizer
        from sumy.summarizers.lsa import LsaSummarizer
        from sumy.summarizers.luhn import LuhnSummarizer
        from sumy.summarizers.text_rank import TextRankSummarizer

        cls = {"lexrank": _numpy_lexrank(LexRankSummarizer), "textrank": _numpy_textrank(TextRankSummarizer), "lsa": LsaSummarizer,
               "luhn": LuhnSummarizer}[self.method]
        s = cls()
        s.stop_words = _STOP_WORDS
        return s

    def summarize_text(self, text: str, max_tokens: int) -> str:
        key = (text, max_tokens)
        if key in self._cache:
            return self._cache[key]
        from sumy.parsers.plaintext import PlaintextParser

        tok = RegexSentenceTokenizer()
        sentences = tok.to_sentences(text)
        if not sentences or max_tokens <= 0:
            return ""
        avg = max(1.0, sum(self.counter.count(s) for s in sentences) / len(sentences))
        k = max(1, min(len(sentences), int(max_tokens / (avg + 1))))
        doc = PlaintextParser.from_string(text, tok).document
        picked = [str(s) for s in self._summarizer()(doc, k)]
        out: list[str] = []
        used = 0
        for s in picked:  # document order; stop at the budget
            n = self.counter.count(s) + 1
            if used + n > max_tokens:
                continue
            out.append(s)
            used += n
        summary = "\n".join(out)
        self._cache[key] = summary
        return summary

    def __call__(self, messages: list[Message], previous: str, max_tokens: int) -> str:
        body = "\n".join(m.text() for m in messages)
        return self.summarize_text((previous + "\n" + body).strip(), max_tokens)


def _numpy_lexrank(base: type) -> type:
    """sumy's LexRank with its sentence-similarity matrix built by numpy: the same idf-modified cosine, threshold
    and row normalisation as sumy's ``_create_matrix``, whose double loop in Python is quadratic in the sentences
    and took most of the audit's CPU on long logs."""
    import numpy as np

    class NumpyLexRank(base):  # type: ignore[misc, valid-type]
        def _create_matrix(self, sentences, threshold, tf_metrics, idf_metrics):  # noqa: ANN001, ANN202
            col = {t: j for j, t in enumerate(idf_metrics)}
            a = np.zeros((len(sentences), len(col)))
            for i, (words, tf) in enumerate(zip(sentences, tf_metrics, strict=True)):
                for t in frozenset(words):
                    a[i, col[t]] = tf[t] * idf_metrics[t]
            norms = np.sqrt((a * a).sum(axis=1))
            denom = np.outer(norms, norms)
            sim = np.divide(a @ a.T, denom, out=np.zeros_like(denom), where=denom > 0)
            adj = (sim > threshold).astype(float)
            degrees = adj.sum(axis=1)
            degrees[degrees == 0] = 1
            return adj / degrees[:, None]

    return NumpyLexRank


def _numpy_textrank(base: type) -> type:
    """sumy's TextRank with its edge weights built by numpy: shared word counts over the sum of the log lengths,
    exactly sumy's ``_rate_sentences_edge`` for every pair, without its quadratic loop in Python."""
    import numpy as np

    class NumpyTextRank(base):  # type: ignore[misc, valid-type]
        def _create_matrix(self, document):  # noqa: ANN001, ANN202
            words = [self._to_words_set(sent) for sent in document.sentences]
            col: dict[str, int] = {}
            for ws in words:
                for w in ws:
                    col.setdefault(w, len(col))
            n = len(words)
            c = np.zeros((n, max(1, len(col))))
            for i, ws in enumerate(words):
                for w in ws:
                    c[i, col[w]] += 1
            rank = c @ c.T  # sum over words1 of words2.count(w)
            lens = np.array([len(ws) for ws in words], dtype=float)
            logs = np.log(np.where(lens > 0, lens, 1.0))
            norm = logs[:, None] + logs[None, :]
            small = np.isclose(norm, 0.0)
            weights = np.where(rank == 0, 0.0, np.where(small, rank, rank / np.where(small, 1.0, norm)))
            weights /= (weights.sum(axis=1)[:, np.newaxis] + self._ZERO_DIVISION_PREVENTION)
            return np.full((n, n), (1. - self.damping) / n) + self.damping * weights

    return NumpyTextRank


_STOP_WORDS = frozenset(
    "a an the and or but if of to in on at by for with from as is are was were be been being this that these "
    "those it its i you he she we they me him her us them my your our their not no do does did so then than "
    "can could will would shall should may might must have has had".split()
)

SUMMARY_PREFIX = "Summary of the earlier conversation:\n"


@dataclass
class SummarizingCompactor(Budgeted):
    """Running summary: when the history exceeds the budget, the oldest unsummarised messages
    (all but the newest ``keep_frac`` of the budget) are folded into the summary, which replaces
    them as one message. The summary gets at most ``summary_frac`` of the budget."""

    summarizer: Summarizer
    keep_frac: float = 0.5
    summary_frac: float = 0.25
    counter: TokenCounter = field(default_factory=default_counter)
    name: str = ""
    compactions: int = 0

    def __post_init__(self) -> None:
        if not (0 < self.keep_frac < 1 and 0 < self.summary_frac < 1 and self.keep_frac + self.summary_frac <= 1):
            raise ValueError("need 0 < keep_frac, summary_frac < 1 and keep_frac + summary_frac <= 1")
        self.name = self.name or getattr(self.summarizer, "name", "summary")
        self.reset()

    def reset(self) -> None:
        super().reset()
        self._summary = ""
        self._upto = 0  # history[sys_n : sys_n + _upto] is folded into _summary

    def view(self, history: list[Message], budget: int) -> list[Message]:
        sys_msgs, rest, room = self.split(history, budget)
        current = self._assemble(rest)
        if self.counter.count_messages(current) <= room:
            return sys_msgs + current
        pending = rest[self._upto:]
        keep_start = fit_suffix(pending, int(room * self.keep_frac), self.counter)
        keep_start = max(keep_start, 1) if pending else 0  # always fold at least one message
        to_fold = pending[:keep_start]
        if to_fold:
            self._summary = self.summarizer(to_fold, self._summary, int(room * self.summary_frac))
            self._upto += len(to_fold)
            self.compactions += 1
        return sys_msgs + self._assemble(rest)

    def _assemble(self, rest: list[Message]) -> list[Message]:
        head = [Message("user", SUMMARY_PREFIX + self._summary)] if self._upto else []
        return head + rest[self._upto:]


@dataclass
class NoCompaction:
    """The full-context baseline: the model sees everything."""

    name: str = "full-context"
    compactions: int = 0

    def reset(self) -> None:
        self.compactions = 0

    def view(self, history: list[Message], budget: int) -> list[Message]:
        return list(history)
