"""Thinking traces from any HF causal LM: format the prompt, sample, find the trace, label the answer.

A :class:`ThinkFormat` renders a prompt so that it **ends with the thinking delimiter** (``<think>``
by default): the first token the model then generates is the *first thinking token*. Generated text up
to the close delimiter is the trace; what follows is the answer, labelled by a pluggable labeler.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from divelab.oversight.first_token.labels import Labeler


@dataclass(frozen=True)
class ThinkFormat:
    """How a prompt becomes the model's input.

    ``template`` must contain ``{prompt}`` and end with the ``open`` delimiter. With ``chat=True`` the
    tokenizer's chat template renders ``system`` + the user prompt (with a generation prompt) and
    ``template`` is applied to that rendering, e.g. ``"{prompt}<think>"``.
    """

    template: str = "{prompt} <think>"
    open: str = "<think>"
    close: str = "</think>"
    chat: bool = False
    system: str | None = None

    def __post_init__(self) -> None:
        if not self.open or not self.close:
            raise ValueError(f"thinking delimiters must be non-empty, got open={self.open!r}, close={self.close!r}")
        if "{prompt}" not in self.template:
            raise ValueError(f"template {self.template!r} has no '{{prompt}}' placeholder")
        if self.open not in self.template:
            raise ValueError(f"no thinking delimiter {self.open!r} found in the template {self.template!r}; the "
                             f"template must end with it so the model's next token is the first thinking token")
        if not self.template.rstrip().endswith(self.open):
            raise ValueError(f"template {self.template!r} must end with the thinking delimiter {self.open!r}")

    def render(self, tokenizer: Any, prompt: str) -> str:
        if self.chat:
            if getattr(tokenizer, "chat_template", None) is None:
                raise ValueError("ThinkFormat(chat=True) but the tokenizer has no chat template")
            msgs = ([{"role": "system", "content": self.system}] if self.system else []) + [
                {"role": "user", "content": prompt}]
            prompt = tokenizer.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
        return self.template.replace("{prompt}", prompt).rstrip()


@dataclass
class Rollout:
    """One sampled trace. ``ids = prompt_ids + gen_ids``; the trace is ``ids[think_start:think_end]``
    (``think_end`` = index of the close delimiter's first token, or len(ids) if it never came)."""

    prompt: str
    prompt_ids: list[int]
    gen_ids: list[int]
    think_end: int
    trace_text: str
    answer_text: str
    label: int
    closed: bool
    meta: dict = field(default_factory=dict)

    @property
    def ids(self) -> list[int]:
        return self.prompt_ids + self.gen_ids

    @property
    def think_start(self) -> int:
        return len(self.prompt_ids)

    @property
    def trace_len(self) -> int:
        return self.think_end - self.think_start

    def cut(self, fraction: float) -> list[int]:
        """The prompt plus the first ``fraction`` of the trace's tokens (a prefix to resample from)."""
        if not 0.0 <= fraction <= 1.0:
            raise ValueError(f"fraction must be in [0, 1], got {fraction}")
        return self.ids[: self.think_start + round(fraction * self.trace_len)]


def encode(tokenizer: Any, text: str) -> list[int]:
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    if not ids:
        raise ValueError(f"prompt {text!r} encodes to no tokens")
    return list(ids)


def split_generation(tokenizer: Any, gen_ids: Sequence[int], close: str) -> tuple[int, str, str, bool]:
    """(index in gen_ids where the close delimiter starts, trace text, answer text, closed?)."""
    gen_ids = list(gen_ids)
    full = tokenizer.decode(gen_ids, skip_special_tokens=False)
    if close not in full:
        return len(gen_ids), tokenizer.decode(gen_ids, skip_special_tokens=True), "", False
    close_ids = tokenizer(close, add_special_tokens=False)["input_ids"]
    if len(close_ids) == 1 and close_ids[0] in gen_ids:  # fast path: the delimiter is one token
        k = gen_ids.index(close_ids[0])
        return (k, tokenizer.decode(gen_ids[:k], skip_special_tokens=False),
                tokenizer.decode(gen_ids[k + 1:], skip_special_tokens=True).strip(), True)
    for k in range(len(gen_ids)):
        text = tokenizer.decode(gen_ids[: k + 1], skip_special_tokens=False)
        if close in text:  # token k completes the delimiter; find the token j where it starts
            j = next(j for j in range(k, -1, -1) if close in tokenizer.decode(gen_ids[j:k + 1],
                                                                                skip_special_tokens=False))
            trace = text[: text.index(close)]
            answer = tokenizer.decode(gen_ids[k + 1:], skip_special_tokens=True)
            after = text[text.index(close) + len(close):]
            # the token that completed the delimiter may carry answer text after it
            return j, trace, (after + answer).strip(), True
    text = tokenizer.decode(gen_ids, skip_special_tokens=True)
    return len(gen_ids), text, "", False


def label_continuation(tokenizer: Any, gen_ids: Sequence[int], close: str, labeler: Labeler,
                       trace_done: bool = False) -> int:
    """Label a continuation: the answer after the close delimiter (or all of it when the prefix already
    contained the delimiter, ``trace_done``)."""
    if trace_done:
        return int(labeler(tokenizer.decode(list(gen_ids), skip_special_tokens=True)))
    _, _, answer, closed = split_generation(tokenizer, gen_ids, close)
    return int(labeler(answer)) if closed else int(labeler(tokenizer.decode(list(gen_ids), skip_special_tokens=True)))


def sample_rollouts(model: Any, tokenizer: Any, prompts: Sequence[str], labeler: Labeler, *,
                    fmt: ThinkFormat | None = None, max_new_tokens: int = 64, temperature: float = 1.0,
                    top_p: float = 1.0, seed: int = 0, batch_size: int = 64,
                    metas: Sequence[dict] | None = None) -> list[Rollout]:
    """Sample one trace per prompt (batched, seeded) and label its answer."""
    from divelab.lm.sampling import generate
    from divelab.progress import track

    fmt = fmt or ThinkFormat()
    if not prompts:
        raise ValueError("no prompts given")
    encoded = [encode(tokenizer, fmt.render(tokenizer, p)) for p in prompts]
    out: list[Rollout] = []
    starts = list(range(0, len(prompts), batch_size))
    for b, s in enumerate(track(starts, "sampling traces")):
        chunk = encoded[s:s + batch_size]
        g = generate(model, chunk, max_new_tokens=max_new_tokens, temperature=temperature, top_p=top_p,
                     eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id, seed=seed + b)
        for j, gen in enumerate(g.tokens):
            i = s + j
            k, trace, answer, closed = split_generation(tokenizer, gen, fmt.close)
            label = int(labeler(answer)) if closed else int(labeler(trace))
            out.append(Rollout(prompt=prompts[i], prompt_ids=chunk[j], gen_ids=list(gen),
                               think_end=len(chunk[j]) + k, trace_text=trace, answer_text=answer, label=label,
                               closed=closed, meta=dict(metas[i]) if metas is not None else {}))
    return out
