"""Data for the real worker pool: an evaluation pool per family and SFT rows that never meet it.

A query's *content* is what decides its answer (the two numbers, the word, the word and letter, the
list), whatever phrasing carries it. Training rows are drawn from their own seeded stream and every
row whose content appears in the evaluation pool is skipped, so no phrasing of an evaluation query is
ever trained on. Rows are TRL's ``{"prompt", "completion"}`` format with the prompt already rendered by
the worker's chat template, so the loss falls on the answer only (TRL appends the end-of-turn token).
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Iterable, Sequence

from divelab.cache import stable_hash
from divelab.orchestration.fugu.tasks import FAMILIES, Task, make_task

ANSWER_PREFIX = "ANSWER: "
"""What a trained worker writes before its answer (``tasks.extract_answer`` reads it)."""


def content_key(task: Task) -> tuple[str, ...]:
    """The family and the values that decide the answer (numbers and quoted strings), phrasing aside."""
    return (task.family, *re.findall(r"'[^']*'|-?\d+", task.prompt))


def _draw(families: Sequence[str], per_family: int, stream: str, seed: int,
          exclude: set[tuple[str, ...]], by_content: bool) -> list[Task]:
    out: list[Task] = []
    for fam in families:
        if fam not in FAMILIES:
            raise ValueError(f"unknown task family {fam!r}; allowed: {', '.join(FAMILIES)}")
        rng = random.Random(stable_hash([stream, seed, fam]))
        seen: set[tuple[str, ...]] = set()
        tries = 0
        while len(seen) < per_family:
            t = make_task(fam, rng)
            tries += 1
            k = content_key(t) if by_content else (t.prompt,)
            if content_key(t) not in exclude and k not in seen:
                seen.add(k)
                out.append(t)
            if tries > 200 * per_family + 1000:
                raise ValueError(f"family {fam!r} has too few distinct queries for {per_family} "
                                 f"(got {len(seen)} after excluding {len(exclude)} held-out contents)")
    return out


def eval_pool(per_family: int, seed: int = 0) -> list[Task]:
    """``per_family`` distinct queries of every family (distinct by content), in family order."""
    if per_family < 1:
        raise ValueError(f"per_family must be >= 1, got {per_family}")
    return _draw(FAMILIES, per_family, "fugu-real-eval", seed, set(), by_content=True)


def train_tasks(families: Sequence[str], per_family: int, held_out: Iterable[Task], seed: int = 0) -> list[Task]:
    """``per_family`` distinct training prompts of each family whose content is in no held-out query (one
    content may recur in another phrasing: the reverse family has only a few hundred words)."""
    if per_family < 1:
        raise ValueError(f"per_family must be >= 1, got {per_family}")
    if not families:
        raise ValueError("train_tasks needs at least one family")
    return _draw(families, per_family, "fugu-real-train", seed, {content_key(t) for t in held_out},
                 by_content=False)


def sft_rows(tasks: Sequence[Task], render: Callable[[str], str], seed: int = 0) -> list[dict[str, str]]:
    """TRL prompt-completion rows, shuffled (seeded): ``render(question)`` is the chat-templated prompt."""
    rows = [{"prompt": render(t.prompt), "completion": ANSWER_PREFIX + t.answer} for t in tasks]
    random.Random(seed).shuffle(rows)
    return rows


def chat_renderer(tokenizer: object) -> Callable[[str], str]:
    """The prompt text a chat worker sees for one user question (its chat template, generation prompt on)."""
    def render(question: str) -> str:
        return tokenizer.apply_chat_template([{"role": "user", "content": question}],  # type: ignore[attr-defined]
                                             add_generation_prompt=True, tokenize=False)
    return render
