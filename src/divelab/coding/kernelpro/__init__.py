"""KernelPro: micro-profiling tools as expert surrogates for kernel optimisation (arXiv 2606.26453, E177).

The paper encodes expert heuristics as deterministic micro-profiling tools that turn hardware
counters into diagnoses, runs only the tools a roofline classification says are relevant, and
searches kernel edits with a domain-adapted MCTS (progressive widening, log reward, a hard
correctness wall, search memory); it reports 2.42x / 4.69x / 5.30x geomean over PyTorch eager
on KernelBench L1/L2/L3. This package is the CPU backend: C kernels + transformations compiled by
gcc, objdump and valgrind callgrind as the profilers, a measured roofline.

    from divelab.coding.kernelpro import Evaluator, MCTS, RuleProposer, get_problem
    ev = Evaluator(get_problem("matmul"))
    res = MCTS(RuleProposer()).search(ev, budget=12)
    res.best.config.short(), res.speedup, [d.render() for d in res.ref.diagnoses]
"""

from divelab.coding.kernelpro.backend import (
    CompilerNotFound,
    callgrind,
    check,
    compile_kernel,
    disassemble,
    time_call,
)
from divelab.coding.kernelpro.evaluate import Candidate, Evaluator
from divelab.coding.kernelpro.problems import PROBLEMS, Problem, get_problem
from divelab.coding.kernelpro.program import EDITS, Config, apply_edit, edit_names, render
from divelab.coding.kernelpro.proposer import ChatProposer, RandomProposer, RuleProposer
from divelab.coding.kernelpro.roofline import Roofline, measure_roofline
from divelab.coding.kernelpro.search import MCTS, Greedy, RandomSearch, SearchResult, log_reward
from divelab.coding.kernelpro.synthetic import SyntheticEvaluator
from divelab.coding.kernelpro.tools import TOOLS, Diagnosis, MicroTool, classify, diagnose

__all__ = [
    "EDITS", "MCTS", "PROBLEMS", "TOOLS", "Candidate", "ChatProposer", "CompilerNotFound", "Config", "Diagnosis",
    "Evaluator", "Greedy", "MicroTool", "Problem", "RandomProposer", "RandomSearch", "Roofline", "RuleProposer",
    "SearchResult", "SyntheticEvaluator", "apply_edit", "callgrind", "check", "classify", "compile_kernel",
    "diagnose", "disassemble", "edit_names", "get_problem", "log_reward", "measure_roofline", "render", "time_call",
]
