"""Transcript features for the router: a cheap hashing backbone and an HF causal LM's last hidden state.

Both render a transcript as the raw ``"role: content\\n"`` text the paper's router reads. The HF
backbone takes the hidden state at the last token (the paper uses Qwen3-0.6B's penultimate token);
:mod:`divelab.orchestration.fugu.svf` adapts its weights by singular-value offsets only.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from divelab.chat import Message


def render(transcript: str | Sequence[Message]) -> str:
    if isinstance(transcript, str):
        return transcript
    return "".join(f"{m.role}: {m.text()}\n" for m in transcript)


class HashingFeatures:
    """Word 1-2-gram and char 3-gram hashing (scikit-learn), l2-normalised, plus cheap metadata.

    Metadata: log length, share of digits, quote present, code block present, and a constant 1.
    Stateless: nothing to fit, so train and serve see the same map.
    """

    def __init__(self, n_features: int = 128) -> None:
        if n_features < 8:
            raise ValueError(f"n_features must be >= 8, got {n_features}")
        from sklearn.feature_extraction.text import HashingVectorizer

        self.n_features = n_features
        self._word = HashingVectorizer(n_features=n_features, ngram_range=(1, 2), alternate_sign=False,
                                       token_pattern=r"(?u)\b\w+\b|[+*]")
        self._char = HashingVectorizer(n_features=n_features, analyzer="char_wb", ngram_range=(3, 3),
                                       alternate_sign=False)

    @property
    def dim(self) -> int:
        return 2 * self.n_features + 5

    def __call__(self, transcripts: Sequence[str | Sequence[Message]]) -> np.ndarray:
        texts = [render(t) for t in transcripts]
        if not texts:
            return np.zeros((0, self.dim))
        w = self._word.transform(texts).toarray()
        c = self._char.transform(texts).toarray()
        meta = np.array([[np.log1p(len(t)) / 6, sum(ch.isdigit() for ch in t) / max(1, len(t)),
                          float("'" in t), float("```" in t), 1.0] for t in texts])
        return np.hstack([_l2(w), _l2(c), meta])


def _l2(a: np.ndarray) -> np.ndarray:
    n = np.linalg.norm(a, axis=1, keepdims=True)
    return a / np.where(n == 0, 1.0, n)


class HFLastTokenFeatures:
    """Hidden state of any HF causal LM at the last token of the rendered transcript (text output unused).

    ``layer=-1`` is the final hidden layer. ``model`` and ``tokenizer`` are a loaded pair, e.g.
    ``divelab.lm.load_model("smollm2-135m-instruct")`` or a local checkpoint directory.
    """

    def __init__(self, model: Any, tokenizer: Any, layer: int = -1, max_tokens: int = 512) -> None:
        self.model, self.tokenizer, self.layer, self.max_tokens = model, tokenizer, layer, max_tokens

    @property
    def dim(self) -> int:
        return int(self.model.config.hidden_size)

    def __call__(self, transcripts: Sequence[str | Sequence[Message]]) -> np.ndarray:
        import torch

        rows = []
        with torch.no_grad():
            for t in transcripts:
                ids = self.tokenizer(render(t), return_tensors="pt")["input_ids"][:, -self.max_tokens:]
                out = self.model(input_ids=ids, output_hidden_states=True)
                rows.append(out.hidden_states[self.layer][0, -1].float().numpy())
        return np.stack(rows) if rows else np.zeros((0, self.dim))


def family_keywords(text: str) -> list[str]:
    """Lower-case word tokens (used by docs/tests to inspect what the router sees)."""
    return re.findall(r"\w+", text.lower())
