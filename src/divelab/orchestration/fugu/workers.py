"""Workers: black-box chat models with a price, and programmatic workers with planted skill profiles.

A :class:`Worker` wraps anything that speaks :class:`divelab.chat.ChatModel` (an OpenAI-compatible
endpoint, an in-process HF model, a scripted model) with a cost model. :class:`SkillWorker` is a
programmatic model for the reproduction: it really parses and solves the task, then answers
correctly with its skill probability for that task family (a seeded coin per request), otherwise
with a plausible wrong answer; when earlier answers are visible in its context it copies the first
one with probability ``anchor`` (the herding that the Conductor's isolation is meant to prevent).
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field, replace

from divelab.cache import stable_hash
from divelab.chat import ChatModel, ChatResponse, Message, ToolSpec, assistant
from divelab.orchestration.fugu.tasks import FAMILIES, solve


def n_tokens(text: str) -> int:
    """A tokenizer-free token count (whitespace words), used for pricing."""
    return len(text.split())


@dataclass
class Worker:
    """A named chat model with a price per 1k prompt / completion tokens (or any unit you choose)."""

    name: str
    model: ChatModel
    price_in: float = 1.0
    price_out: float = 1.0

    def __post_init__(self) -> None:
        if not self.name or not re.fullmatch(r"[A-Za-z0-9_.:\-]+", self.name):
            raise ValueError(f"worker name must be non-empty [A-Za-z0-9_.:-], got {self.name!r}")
        if self.price_in < 0 or self.price_out < 0:
            raise ValueError(f"prices must be >= 0, got in={self.price_in}, out={self.price_out}")

    def cost(self, messages: list[Message], response: ChatResponse) -> float:
        p = response.prompt_tokens if response.prompt_tokens is not None else sum(n_tokens(m.text()) for m in messages)
        c = (response.completion_tokens if response.completion_tokens is not None
             else n_tokens(response.message.content))
        return (self.price_in * p + self.price_out * c) / 1000.0

    def call(self, messages: list[Message], **kw: object) -> tuple[ChatResponse, float]:
        resp = self.model.complete(messages, **kw)  # type: ignore[arg-type]
        return resp, self.cost(messages, resp)


def _corrupt(answer: str, rng: random.Random) -> str:
    if re.fullmatch(r"-?\d+", answer):
        v = int(answer)
        return str(v + rng.choice((-1, 1)) * rng.choice((1, 2, 10, 100)) if v > 2 else v + rng.randint(1, 3))
    if ", " in answer:
        xs = answer.split(", ")
        i = rng.randrange(len(xs) - 1)
        xs[i], xs[i + 1] = xs[i + 1], xs[i]
        if xs == answer.split(", "):
            xs = xs[:-1]
        return ", ".join(xs)
    chars = list(answer)
    if len(chars) > 1:
        i = rng.randrange(len(chars) - 1)
        chars[i], chars[i + 1] = chars[i + 1], chars[i]
    out = "".join(chars)
    return out if out != answer else answer + answer[-1]


_ANS = re.compile(r"ANSWER:\s*(.+)")


@dataclass
class SkillWorker:
    """A programmatic chat model with skill ``skills[family]`` (probability of a correct answer).

    Success probability falls by ``decay * difficulty``; the coin is seeded by (name, seed, the full
    context), so replays are exact and ``with_seed`` gives an independent replicate. A system
    message containing "select" makes it a selector: the majority of the visible answers.
    """

    name: str
    skills: dict[str, float]
    decay: float = 0.3
    anchor: float = 0.0
    seed: int = 0
    calls: list[list[Message]] = field(default_factory=list, repr=False)

    def __post_init__(self) -> None:
        bad = set(self.skills) - set(FAMILIES)
        if bad:
            raise ValueError(f"unknown task families {sorted(bad)}; allowed: {', '.join(FAMILIES)}")
        for k, v in self.skills.items():
            if not 0.0 <= v <= 1.0:
                raise ValueError(f"skill for {k!r} must be in [0, 1], got {v}")

    def with_seed(self, seed: int) -> SkillWorker:
        return replace(self, seed=seed, calls=[])

    def complete(self, messages: list[Message], tools: list[ToolSpec] | None = None, *,
                 temperature: float | None = None, max_tokens: int | None = None) -> ChatResponse:
        self.calls.append(list(messages))
        ctx = "\n".join(f"{m.role}: {m.text()}" for m in messages)
        rng = random.Random(stable_hash([self.name, self.seed, ctx]))
        users = [m.content for m in messages if m.role == "user"]
        question = users[-1] if users else ""
        qpart, _, seen = question.partition("\n\nEarlier steps:")
        visible = [a.strip() for a in _ANS.findall(seen)]
        instruction = " ".join(m.content for m in messages if m.role == "system").lower()
        if "select" in instruction and visible:
            counts: dict[str, int] = {}
            for a in visible:
                counts[a] = counts.get(a, 0) + 1
            text = max(counts, key=lambda a: (counts[a], -visible.index(a)))
        elif visible and rng.random() < self.anchor:
            text = visible[0]
        else:
            solved = solve(qpart.removeprefix("Question:").strip())
            if solved is None:
                text = "I cannot parse this request."
            else:
                fam, ans = solved
                diff = _difficulty(qpart)
                p = self.skills.get(fam, 0.0) * (1.0 - self.decay * diff)
                text = ans if rng.random() < p else _corrupt(ans, rng)
        content = f"ANSWER: {text}"
        return ChatResponse(assistant(content), prompt_tokens=sum(n_tokens(m.text()) for m in messages),
                            completion_tokens=n_tokens(content))


def _difficulty(prompt: str) -> float:
    nums = re.findall(r"\d+", prompt)
    words = re.findall(r"'([^']{2,})'", prompt)
    if len(nums) > 2:
        return min(1.0, (len(nums) - 3) / 5)
    if nums:
        return min(1.0, (max(len(n) for n in nums) - 1) / 3)
    if words:
        return min(1.0, max(0.0, (len(words[0]) - 6) / 14))
    return 0.5


def default_pool(seed: int = 0) -> list[Worker]:
    """Five workers with different skill profiles and prices (the reproduction's pool).

    Specialists are cheap and strong on their families; the large generalist is the best single
    worker on average and the most expensive; the tiny one is cheap and weak.
    """
    spec = [
        ("arith-s", {"add": 0.95, "mul": 0.85, "reverse": 0.25, "count": 0.3, "sort": 0.45}, 0.3, 0.5, 1.0),
        ("lexi-s", {"add": 0.35, "mul": 0.15, "reverse": 0.95, "count": 0.85, "sort": 0.35}, 0.3, 0.5, 1.0),
        ("sorter-s", {"add": 0.5, "mul": 0.2, "reverse": 0.35, "count": 0.35, "sort": 0.95}, 0.3, 0.5, 1.0),
        ("general-l", {"add": 0.85, "mul": 0.7, "reverse": 0.8, "count": 0.75, "sort": 0.85}, 0.15, 0.3, 8.0),
        ("tiny-xs", {"add": 0.6, "mul": 0.2, "reverse": 0.45, "count": 0.4, "sort": 0.5}, 0.4, 0.6, 0.25),
    ]
    return [Worker(n, SkillWorker(n, sk, decay=d, anchor=a, seed=seed), price_in=p, price_out=p)
            for n, sk, d, a, p in spec]
