"""AutoCog: Closing the Loop to Discover Psychological Theories with an Automated Cognitive Scientist.

arXiv 2606.26448 (E176). Competing theories are executable cognitive models (here: programs in a
small grammar for multi-cue two-option choice); advocates design experiments their theory should
win and check by simulation that they discriminate, participants are run, theories are scored by
how well their *simulated* behaviour matches all data so far, and an arbiter and a reviser rewrite
the loser. Here the participants are simulated from known strategies (take-the-best, tallying,
WADD, diminishing-returns WADD, perseveration, ...), so recovery can be scored.

Example::

    from divelab.science.autocog import AutoCog, LoopConfig, get_strategy
    loop = AutoCog(get_strategy("drwadd"), LoopConfig(), seed=0, trace_dir="autocog-trace")
    loop.run(cycles=5)
    print(loop.winner.describe())
"""

from divelab.science.autocog.autora_bridge import autora_available, autora_cycle, disagreement_scores
from divelab.science.autocog.confirm import ConfirmatoryResult, confirmatory_study, power
from divelab.science.autocog.design import Proposal, optimise, simulation_check, welch
from divelab.science.autocog.export import export_html
from divelab.science.autocog.loop import AutoCog, LoopConfig, Observation
from divelab.science.autocog.loss import normalised_loss
from divelab.science.autocog.metrics import LIBRARY, Metric, jsd, pair_rates, prefers
from divelab.science.autocog.recovery import classify, probe_design
from divelab.science.autocog.roles import (
    ChatAdvocate,
    ChatArbiter,
    ChatReviser,
    LocalSearchReviser,
    ProgrammaticAdvocate,
    ProgrammaticArbiter,
)
from divelab.science.autocog.simulate import Data, choice_prob, simulate, static_prob_a
from divelab.science.autocog.strategies import STRATEGIES, Strategy, get_strategy
from divelab.science.autocog.task import Design, Task, candidate_pool
from divelab.science.autocog.theory import SEEDS, Theory, dial, neighbours

__all__ = [
    "LIBRARY", "SEEDS", "STRATEGIES", "AutoCog", "ChatAdvocate", "ChatArbiter", "ChatReviser",
    "ConfirmatoryResult", "Data", "Design", "LocalSearchReviser", "LoopConfig", "Metric", "Observation",
    "ProgrammaticAdvocate", "ProgrammaticArbiter", "Proposal", "Strategy", "Task", "Theory",
    "autora_available", "autora_cycle", "candidate_pool", "choice_prob", "classify", "confirmatory_study",
    "dial", "disagreement_scores", "export_html", "get_strategy", "jsd", "neighbours", "normalised_loss",
    "optimise", "pair_rates", "power", "prefers", "probe_design", "simulate", "simulation_check",
    "static_prob_a", "welch",
]
