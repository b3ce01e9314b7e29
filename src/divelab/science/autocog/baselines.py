"""What the loop's recovery is measured against: trivial pickers, a one-experiment model selection,
and participants whose choices carry no information (the negative control).

Recovery is scored as "the final theory behaves most like the ground truth among the 7 known
strategies" (:func:`.recovery.classify`), so any picker of one of those 7 labels is a baseline:

- a uniform pick (exactly 1/7 per run);
- the most common ground truth of the group, always (a constant pick; "the strategy with the most
  parameters" is another constant pick and cannot beat it);
- the loop's first starting theory, never revised (the no-op loop);
- the better of the two starting theories, chosen in hindsight (an upper bound on any loop that
  never revises);
- one random experiment on N participants, then the nearest of the 7 known strategies: ordinary
  model selection, which knows the candidate set that the loop has to search for.

:class:`ShuffledChoices` is the negative control: the same simulated participants, with each
participant's responses permuted across trials, so that neither the ratings nor the response
history predict a choice. A loop that "recovers" the ground truth from such data would be
recovering it from the set-up, not from behaviour.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from divelab.science.autocog.design import random_designs
from divelab.science.autocog.recovery import N_PROBE, classify, data_features
from divelab.science.autocog.simulate import ChoiceModel, Data, simulate
from divelab.science.autocog.strategies import STRATEGIES
from divelab.science.autocog.task import Design, Task, candidate_pool
from divelab.science.autocog.theory import SEEDS


class ShuffledChoices:
    """Participants from ``model`` whose responses are permuted across trials, per participant."""

    def __init__(self, model: ChoiceModel) -> None:
        self.model = model
        self.name = f"{model.name} (choices shuffled)"

    def __call__(self, design: Design, n: int, rng: np.random.Generator) -> Data:
        d = simulate(self.model, design, n, rng)
        return Data(d.design, d.trials, rng.permuted(d.chose_left, axis=1))


def one_experiment_pick(participants: ChoiceModel, task: Task, seed: int, *, n: int = 25, n_pairs: int = 8,
                        n_trials: int = 96) -> str:
    """Model selection without a loop: one random design, ``n`` participants, the nearest known strategy
    (the same features recovery compares, each strategy simulated on that design)."""
    rng = np.random.default_rng([seed, 7177])
    pool = candidate_pool(task, 200, rng)
    design = random_designs(pool, task, rng, n_designs=1, n_pairs=n_pairs, n_trials=n_trials, label="one-shot")[0]
    f = data_features(simulate(participants, design, n, rng))
    dist = {name: float(np.linalg.norm(f - data_features(simulate(s, design, N_PROBE,
                                                                  np.random.default_rng([seed, 7178, i])))))
            for i, (name, s) in enumerate(STRATEGIES.items())}
    return min(dist, key=dist.get)


def starting_classes(start: tuple[str, ...], task: Task = Task()) -> list[str]:
    """The known strategy each starting theory already behaves like on the probe battery."""
    return [classify(SEEDS[s](), task, seed=0) for s in start]


def recovery_baselines(runs: list[dict], start_classes: list[str]) -> dict[str, list[float]]:
    """Per run, 1 when the baseline names the run's ground truth (the uniform pick: its probability)."""
    truth = [r["strategy"] for r in runs]
    common = Counter(truth).most_common(1)[0][0]
    return {
        f"uniform pick among the {len(STRATEGIES)} known strategies": [1 / len(STRATEGIES)] * len(truth),
        f"always the most common ground truth ({common})": [float(t == common) for t in truth],
        f"first starting theory, never revised (behaves like {start_classes[0]})":
            [float(t == start_classes[0]) for t in truth],
        "better starting theory in hindsight, never revised": [float(t in start_classes) for t in truth],
        "one random experiment, nearest of the known strategies": [float(r["one_experiment_pick"] == r["strategy"])
                                                                   for r in runs],
    }
