"""Where AutoRA fits: its model-disagreement experimentalist and its state-based cycle.

AutoRA (Musslick lab) is the framework for closed-loop empirical research this loop is built
around. Two of its pieces are used when it is installed:

- ``autora.experimentalist.model_disagreement.score_sample_custom_distance`` ranks candidate
  trial pairs by how much the two competing theories disagree (theories are wrapped as models
  with a ``predict``); the advocates build their designs from the top of that ranking.
- ``autora.state.StandardState`` + ``on_state`` (autora-core): :func:`autora_cycle` runs one
  experimentalist -> experiment runner -> theorist step of the loop on an AutoRA state, so the
  loop's parts can be dropped into an AutoRA workflow.

AutoRA's packages pin ``numpy<2`` while divelab runs on numpy 2, so they are optional here
(install them with ``pip install --no-deps autora-core autora-experimentalist-model-disagreement``;
they run unchanged on numpy 2). Without them :func:`disagreement_scores` computes the same
squared-difference score itself, so the numbers do not depend on whether AutoRA is present.
"""

from __future__ import annotations

import numpy as np

from divelab.science.autocog.simulate import static_prob_a
from divelab.science.autocog.task import Task
from divelab.science.autocog.theory import Theory


def autora_available() -> bool:
    try:
        import autora.experimentalist.model_disagreement  # noqa: F401
        import autora.state  # noqa: F401
    except ImportError:
        return False
    return True


class TheoryAsModel:
    """A theory with the ``predict(X)`` AutoRA's experimentalists expect; a row of X is a flattened pair."""

    def __init__(self, theory: Theory, task: Task, n_draws: int = 100, seed: int = 0) -> None:
        self.theory, self.task, self.n_draws, self.seed = theory, task, n_draws, seed

    def predict(self, X: np.ndarray) -> np.ndarray:
        X = np.asarray(X, dtype=float)
        pairs = X.reshape(len(X), 2, self.task.n_features)
        return static_prob_a(self.theory, pairs, self.task, self.n_draws, np.random.default_rng(self.seed))


def disagreement_scores(pairs: np.ndarray, theories: list[Theory], task: Task, *, n_draws: int = 100,
                        seed: int = 0, use_autora: bool | None = None) -> tuple[np.ndarray, str]:
    """Squared difference of predicted P(A) per candidate pair (summed over theory pairs).

    Returns the scores (in the order of ``pairs``) and which implementation computed them.
    """
    pairs = np.asarray(pairs)
    models = [TheoryAsModel(t, task, n_draws, seed) for t in theories]
    X = pairs.reshape(len(pairs), -1).astype(float)
    if use_autora is None:
        use_autora = autora_available()
    if use_autora:
        from autora.experimentalist.model_disagreement import score_sample_custom_distance

        df = score_sample_custom_distance(X, models)
        scores = np.zeros(len(pairs))
        scores[df.index.to_numpy()] = df["score"].to_numpy(dtype=float)
        return scores, "autora.experimentalist.model_disagreement"
    preds = [m.predict(X) for m in models]
    scores = np.zeros(len(pairs))
    for i in range(len(preds)):
        for j in range(i + 1, len(preds)):
            scores += (preds[i] - preds[j]) ** 2
    return scores, "divelab (AutoRA not installed)"


def autora_cycle(loop: object, cycle: int) -> object:
    """Run one cycle of an :class:`~divelab.science.autocog.loop.AutoCog` loop through AutoRA's state.

    The experimentalist (advocates + simulation check), the experiment runner (participants) and
    the theorist (scoring, arbiter, reviser) are wrapped with ``autora.state.on_state`` and
    applied to a ``StandardState`` in turn; returns the final state (``conditions`` = the trials
    run, ``experiment_data`` = the observations, ``models`` = the two current theories).
    """
    import pandas as pd
    from autora.state import Delta, StandardState, on_state

    # checked by what the cycle calls, not by class: the loop module imports this one (design uses
    # AutoRA's disagreement scores), so importing it back here would close an import cycle
    needed = ("propose", "run_experiments", "judge_and_revise", "theories")
    if not all(hasattr(loop, name) for name in needed):
        raise TypeError(f"autora_cycle needs an AutoCog loop (with {', '.join(needed)}), got {type(loop).__name__}")

    pending: dict[str, list] = {"proposals": []}

    @on_state()
    def experimentalist(conditions: object) -> Delta:
        pending["proposals"] = loop.propose(cycle)
        rows = [{"experiment": p.design.label, "pair": k, "A": list(a), "B": list(b)}
                for p in pending["proposals"] for k, (a, b) in enumerate(p.design.pairs)]
        return Delta(conditions=pd.DataFrame(rows, columns=["experiment", "pair", "A", "B"]))

    @on_state()
    def runner(experiment_data: object) -> Delta:
        obs = loop.run_experiments(cycle, pending["proposals"])
        rows = [{"experiment": o.exp_id, "metric": o.metric_name, "value": o.value} for o in obs]
        return Delta(experiment_data=pd.DataFrame(rows, columns=["experiment", "metric", "value"]))

    @on_state()
    def theorist(models: object) -> Delta:
        loop.judge_and_revise(cycle)
        return Delta(models=list(loop.theories))

    state = StandardState()
    for step in (experimentalist, runner, theorist):
        state = step(state)
    loop.finish_cycle(cycle)
    return state
