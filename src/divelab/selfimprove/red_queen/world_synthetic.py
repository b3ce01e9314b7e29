"""The controlled world: known true quality, writers as parameterised generators, judges as accept rules.

An item is a feature vector ``[quality (4) | hack (2) | style (1)]``. Its true quality is
``q(x) = 0.5·Σ quality``; it truly deserves acceptance when ``q(x) > tau``. A writer is the mean
``θ`` of its items' quality and hack features under an effort budget ``‖θ‖ ≤ R`` (so effort put into
features a judge likes but that do not matter is taken from quality: the Goodhart trade-off).
Writer items carry the AI style (style ≈ +1); the human pool has style ≈ −1.

A judge ``(a, b)`` accepts ``x`` when ``a·x + b > 0``. The initial judge is biased three ways: it
underweights quality, likes the hack features, prefers the AI style (self-preference), and is
over-strict (``b`` too low). The anchor is a fixed set of labelled human and AI items.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy import stats as _st

DQ, DH = 4, 2
D = DQ + DH + 1
STYLE = D - 1
W_TRUE = 0.5


@dataclass
class SyntheticWorld:
    seed: int = 0
    tau: float = 0.5
    radius: float = 1.0
    noise: float = 0.5
    writer_step: float = 0.25
    judge_step: float = 0.4
    n_anchor: int = 120
    anchor_tau: float | None = None  # a lenient anchor labels with a lower threshold
    init_judge: tuple[float, ...] = (0.25, 0.25, 0.25, 0.25, 2.0, 2.0, 0.7, -1.6)
    init_writer: tuple[float, ...] = (0.5, 0.5, 0.5, 0.5, 0.0, 0.0)
    adversarial: bool = False  # the meta-agent's judge edits learn from matched pairs (equal stringency)
    informed: float = 0.5  # share of judge edits that learn from the judge's mistakes on labelled tasks
    _anchor: dict[bool, list] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if len(self.init_judge) != D + 1 or len(self.init_writer) != DQ + DH:
            raise ValueError(f"init_judge needs {D + 1} numbers and init_writer {DQ + DH}")

    # ---- roles -------------------------------------------------------------------------
    def initial_writer(self) -> np.ndarray:
        return self._project(np.array(self.init_writer, dtype=float))

    def initial_judge(self) -> np.ndarray:
        return np.array(self.init_judge, dtype=float)

    def _project(self, theta: np.ndarray) -> np.ndarray:
        n = np.linalg.norm(theta)
        return theta * (self.radius / n) if n > self.radius else theta

    def mutate_writer(self, writer: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        return self._project(writer + rng.normal(0, self.writer_step, writer.shape))

    def mutate_judge(self, judge: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """A random edit, or (share ``informed``) a few perceptron steps on labelled tasks it got wrong,
        as a meta-agent shown the judge's mistakes would make ("trapping" it with what fooled it)."""
        if rng.random() >= self.informed:
            return judge + rng.normal(0, self.judge_step, judge.shape)
        new = judge.copy()
        lr = self.judge_step * rng.uniform(0.2, 1.0)
        for _ in range(12):
            for x, y in self.judge_task(rng, self.adversarial):
                if self.accepts(new, x) != y:
                    sign = 1.0 if y else -1.0
                    new[:D] += lr * sign * x
                    new[D] += lr * sign
        return new

    def produce(self, writer: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        x = np.empty(D)
        x[:DQ + DH] = writer + rng.normal(0, self.noise, DQ + DH)
        x[STYLE] = 1.0 + rng.normal(0, 0.3)
        return x

    def accepts(self, judge: np.ndarray, item: np.ndarray) -> bool:
        return bool(judge[:D] @ item + judge[D] > 0)

    # ---- ground truth ------------------------------------------------------------------
    def quality(self, item: np.ndarray) -> float:
        return float(W_TRUE * item[:DQ].sum())

    def truth(self, item: np.ndarray, tau: float | None = None) -> bool:
        return self.quality(item) > (self.tau if tau is None else tau)

    def true_quality(self, writer: np.ndarray) -> float:
        """P(an item of this writer truly deserves acceptance), exactly (q is Gaussian)."""
        mean = W_TRUE * writer[:DQ].sum()
        sd = W_TRUE * self.noise * np.sqrt(DQ)
        return float(_st.norm.sf(self.tau, loc=mean, scale=sd))

    def best_true_quality(self) -> float:
        """The highest true quality any writer reaches under the effort budget (exact): all effort on the quality
        features, equally."""
        return self.true_quality(np.concatenate([np.full(DQ, self.radius / np.sqrt(DQ)), np.zeros(DH)]))

    def _pool_item(self, rng: np.random.Generator, source: str) -> np.ndarray:
        x = np.empty(D)
        x[:DQ] = rng.normal(0.25, 0.6, DQ)
        x[DQ:DQ + DH] = rng.normal(0.3, 0.8, DH)
        x[STYLE] = (1.0 if source == "ai" else -1.0) + rng.normal(0, 0.3)
        return x

    def _task(self, rng: np.random.Generator, adversarial: bool, tau: float | None = None) -> list:
        src = "ai" if rng.random() < 0.5 else "human"
        x = self._pool_item(rng, src)
        if not adversarial:
            return [(x, self.truth(x, tau))]
        y = x.copy()  # the matched item from the other source: same content, other style
        y[STYLE] = -x[STYLE]
        return [(x, self.truth(x, tau)), (y, self.truth(y, tau))]

    def judge_task(self, rng: np.random.Generator, adversarial: bool) -> list:
        return self._task(rng, adversarial)

    def anchor(self, adversarial: bool) -> list:
        if adversarial not in self._anchor:
            rng = np.random.default_rng([self.seed, 17])
            self._anchor[adversarial] = [self._task(rng, adversarial, self.anchor_tau) for _ in range(self.n_anchor)]
        return self._anchor[adversarial]

    # ---- measurements ------------------------------------------------------------------
    def eval_items(self, n: int = 600, seed: int = 99) -> dict[str, list[np.ndarray]]:
        """A fresh labelled evaluation pool per source (not the anchor)."""
        rng = np.random.default_rng([self.seed, seed])
        return {s: [self._pool_item(rng, s) for _ in range(n)] for s in ("ai", "human")}

    def judge_stats(self, judge: np.ndarray, pool: dict[str, list[np.ndarray]]) -> dict[str, float]:
        acc = {s: np.array([self.accepts(judge, x) for x in xs]) for s, xs in pool.items()}
        lab = {s: np.array([self.truth(x) for x in xs]) for s, xs in pool.items()}
        correct = np.concatenate([acc[s] == lab[s] for s in pool])
        return {"accuracy": float(correct.mean()), "accept_ai": float(acc["ai"].mean()),
                "accept_human": float(acc["human"].mean()),
                "ratio": float(acc["ai"].mean() / max(acc["human"].mean(), 1e-9)),
                "accept_rate": float(np.concatenate(list(acc.values())).mean())}

    def writer_stats(self, writer: np.ndarray, judge: np.ndarray, n: int = 400, seed: int = 5) -> dict[str, float]:
        """Judged acceptance of a writer's items, their true acceptability, and the judge's agreement."""
        rng = np.random.default_rng([self.seed, seed])
        items = [self.produce(writer, rng) for _ in range(n)]
        judged = np.array([self.accepts(judge, x) for x in items])
        true = np.array([self.truth(x) for x in items])
        return {"judged_accept": float(judged.mean()), "true_accept": float(true.mean()),
                "judge_agreement": float((judged == true).mean()), "true_quality": self.true_quality(writer)}
