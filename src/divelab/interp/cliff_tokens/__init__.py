"""Cliff tokens: where a reasoning solution tips into failure (arXiv 2606.25524, E172).

The potential ``P_t = P(correct | prefix up to token t)``, estimated from N sampled continuations per prefix, can
fall abruptly at a single token, a *cliff*, found by a one-sided z-test (delta0 = 0.1, alpha = 0.05). Cliffs
concentrate in wrong solutions; deleting the cliff token and resampling recovers them, and DPO on that single
token (Cliff-DPO) raises accuracy while training on a tiny fraction of the positions full-sequence DPO touches.

>>> from divelab.lm import load_model                                               # doctest: +SKIP
>>> from divelab.interp.cliff_tokens import Problem, RolloutConfig, detect           # doctest: +SKIP
>>> model, tok = load_model("path/to/checkpoint")                                    # doctest: +SKIP
>>> found = detect(model, tok, [Problem("17+25=", "42")], checker="last-number",
...                config=RolloutConfig(n=64), per_problem=4)                        # doctest: +SKIP
>>> for row in found.table(): print(row)                                             # doctest: +SKIP
"""

from divelab.interp.cliff_tokens.cliff_test import (
    CliffSpan,
    cliff_matrix,
    find_cliffs,
    is_cliff,
    required_drop,
)
from divelab.interp.cliff_tokens.detector import Cliff, Detection, detect
from divelab.interp.cliff_tokens.dpo import (
    DPOConfig,
    SequencePair,
    TokenPair,
    cliff_pairs,
    dpo_sigmoid_loss,
    random_token_pairs,
    sequence_pairs,
    train_dpo,
)
from divelab.interp.cliff_tokens.interventions import Intervention, cliff_del_keep
from divelab.interp.cliff_tokens.potential import (
    RolloutConfig,
    Rollouts,
    Trace,
    estimate_potentials,
    sample_traces,
    token_stats,
)
from divelab.interp.cliff_tokens.task import CHECKERS, Problem, get_checker
from divelab.interp.cliff_tokens.taxonomy import ENTROPY_BOUNDARY, TYPES, classify

__all__ = [
    "CHECKERS", "ENTROPY_BOUNDARY", "TYPES", "Cliff", "CliffSpan", "DPOConfig", "Detection", "Intervention",
    "Problem", "RolloutConfig", "Rollouts", "SequencePair", "TokenPair", "Trace", "classify", "cliff_del_keep",
    "cliff_matrix", "cliff_pairs", "detect", "dpo_sigmoid_loss", "estimate_potentials", "find_cliffs",
    "get_checker", "is_cliff", "random_token_pairs", "required_drop", "sample_traces", "sequence_pairs",
    "token_stats", "train_dpo",
]
