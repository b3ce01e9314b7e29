"""Red Queen Gödel Machine: co-evolving agents and their evaluators (arXiv 2606.26294).

Self-improving agent search usually assumes a fixed evaluator, which a search strong enough will
game. RQGM lets the judge evolve under *controlled utility evolution*: search runs in epochs with
a frozen judge, a challenger replaces the incumbent only when its ε-best-belief on a fixed anchor
is strictly higher, and exactly the records that depended on the displaced judge are erased.

Two worlds: a controlled one with known true quality (:class:`SyntheticWorld`) and a real one
(:class:`ProgramWorld`): programs for HumanEval tasks judged by evolving test suites, run in
:mod:`divelab.sandbox`, with the official hidden tests as the truth.
"""

from divelab.selfimprove.red_queen.archive import Archive, Node, Record
from divelab.selfimprove.red_queen.bestbelief import (
    Decision,
    best_belief,
    checkpoint_bound,
    checkpoints,
    compare_judges,
)
from divelab.selfimprove.red_queen.evaluator import (
    ChatJudge,
    ExternalJudge,
    JudgeEvaluator,
    combined_score,
    source_bias,
)
from divelab.selfimprove.red_queen.rqgm import MODES, RQGMConfig, RunResult, World, judge_score, run
from divelab.selfimprove.red_queen.world_programs import (
    Bench,
    BenchConfig,
    ChatMutator,
    ProgramWorld,
    build_bench,
)
from divelab.selfimprove.red_queen.world_synthetic import SyntheticWorld

__all__ = [
    "MODES", "Archive", "Bench", "BenchConfig", "ChatJudge", "ChatMutator", "ProgramWorld", "build_bench", "Decision", "ExternalJudge", "JudgeEvaluator", "Node", "RQGMConfig",
    "Record", "RunResult", "SyntheticWorld", "World", "best_belief", "checkpoint_bound", "checkpoints",
    "combined_score", "compare_judges", "judge_score", "run", "source_bias",
]
