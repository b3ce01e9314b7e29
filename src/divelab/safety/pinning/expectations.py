"""What each audited compactor does with the first turns of a history, and what governance decay
predicts for a rule stated there.

The kind of a compactor is read from what its code is documented to do, never from what it lost in
a run, so the audit can check the prediction against the outcome:

- ``evicts``: drops the oldest turns first (keep-last-N, AutoGen's buffered context, LangChain's
  ``trim_messages(strategy="last")``). A policy stated in the first turns is lost.
- ``keeps-head``: always keeps the first turns and drops the middle (head+tail, AutoGen's
  head-and-tail context, AutoGen's token-limited context, which pops the middle message until the
  history fits). A policy stated in the first turns is kept.
- ``summarises``: folds the oldest turns into a summary written for the task (a running summary,
  LangChain's ``SummarizationMiddleware``, LangMem's ``summarize_messages``). The paper's mechanism
  predicts the summary drops the policy; whether it does depends on what the writer picks.

The first two are deterministic: their outcome follows from where the policy sits (by
construction). A summariser's outcome is empirical when a real LLM writes the summary.
"""

from __future__ import annotations

from dataclasses import dataclass

KINDS = ("evicts", "keeps-head", "summarises")
PREDICTS_LOSS = {"evicts": True, "keeps-head": False, "summarises": True}
# the paper's violation rate on each stock framework path (episode, review)
STOCK_PAPER = {"LangGraph": 0.65, "LangMem": 0.95, "AutoGen": 1.00}
KIND_TEXT = {"evicts": "evicts the oldest turns", "keeps-head": "keeps the head",
             "summarises": "summarises the oldest turns"}


@dataclass(frozen=True)
class Behaviour:
    kind: str
    """one of KINDS."""
    does: str
    """what the compactor's code is documented to do, in one line."""
    framework: str = ""
    """the framework whose own code runs (empty for divelab's and sumy's compactors)."""
    stock_path: bool = False
    """the compactor is that framework's stock compaction path as the paper measures it."""

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown compactor kind {self.kind!r}; allowed: {', '.join(KINDS)}")

    @property
    def deterministic(self) -> bool:
        """Eviction and head-keeping decide by position alone, so their outcome is fixed by the set-up."""
        return self.kind != "summarises"

    @property
    def predicts_loss(self) -> bool:
        return PREDICTS_LOSS[self.kind]


BEHAVIOURS: dict[str, Behaviour] = {
    "keep-last-n": Behaviour("evicts", "KeepLastN keeps the newest messages that fit the budget"),
    "head-tail": Behaviour("keeps-head", "HeadTail keeps the first messages (30% of the budget) and the newest"),
    "sumy-lexrank": Behaviour("summarises", "a running summary of extracted sentences picked by LexRank centrality"),
    "sumy-textrank": Behaviour("summarises", "a running summary of extracted sentences picked by TextRank"),
    "autogen-buffered": Behaviour("evicts", "BufferedChatCompletionContext keeps the last buffer_size messages",
                                  "AutoGen", stock_path=True),
    "autogen-head-tail": Behaviour("keeps-head", "HeadAndTailChatCompletionContext keeps the first head_size and "
                                   "last tail_size messages", "AutoGen"),
    "autogen-token-limited": Behaviour("keeps-head", "TokenLimitedChatCompletionContext pops the middle message "
                                       "until the history fits the token limit", "AutoGen"),
    "langchain-trim": Behaviour("evicts", "trim_messages(strategy='last') keeps the system message and the newest "
                                "turns", "LangGraph", stock_path=True),
    "langchain-summarization": Behaviour("summarises", "SummarizationMiddleware replaces all but the newest turns "
                                         "with one summary message", "LangGraph", stock_path=True),
    "langmem-summarize": Behaviour("summarises", "summarize_messages folds the oldest turns into a running summary",
                                   "LangMem", stock_path=True),
    "llm-summary": Behaviour("summarises", "SummarizingCompactor folds the oldest turns into a running summary "
                             "written by a chat model"),
}


def behaviour(name: str) -> Behaviour:
    """The documented behaviour of the compactor ``name`` (a name from the audit's registry)."""
    if name not in BEHAVIOURS:
        raise ValueError(f"no documented behaviour for compactor {name!r}; known: {', '.join(BEHAVIOURS)}")
    return BEHAVIOURS[name]
