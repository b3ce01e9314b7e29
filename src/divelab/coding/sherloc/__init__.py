"""SHERLOC: structured hypothesis-driven exploration and reasoning for bug localization (arXiv 2606.24820, E169).

The paper localizes bugs training-free: one reasoning LLM explores a repository with four compact
tools and returns, per suspected location, a five-field diagnostic finding (location, root-cause
hypothesis, solution idea, dependencies, testing impact); injected into repair agents, these case
files raise resolve rates (+5.95 pp on average) and cut localization tokens (-36.7%), while a bad
diagnosis hurts (20% vs 62% with no report).

    from divelab.coding.sherloc import RepoTools, SherlocLocalizer, HeuristicDiagnostician
    res = SherlocLocalizer(HeuristicDiagnostician()).localize(RepoTools("path/to/repo"), issue_text)
    res.case.findings[0]        # file, symbol, line_span, the five fields, confidence
"""

from divelab.coding.sherloc.agent import LocalizationResult, SherlocLocalizer, lexical_fallback
from divelab.coding.sherloc.baselines import (
    bm25_localize,
    lm_line_scorer,
    ochiai_localize,
    surprisal_localize,
)
from divelab.coding.sherloc.benchmark import Task, build_benchmark, build_tasks, open_repo
from divelab.coding.sherloc.finding import CaseFile, Finding, Location, parse_case_file, render
from divelab.coding.sherloc.mutate import Mutant, functions, mutants_of
from divelab.coding.sherloc.policy import HeuristicDiagnostician
from divelab.coding.sherloc.repair import RepairAgent, gate
from divelab.coding.sherloc.repos import REPOS, RepoSpec
from divelab.coding.sherloc.runner import TestRun, run_tests
from divelab.coding.sherloc.spectrum_policy import SpectrumDiagnostician
from divelab.coding.sherloc.tools import TOOL_SPECS, RepoTools

__all__ = [
    "REPOS", "TOOL_SPECS", "CaseFile", "Finding", "HeuristicDiagnostician", "LocalizationResult", "Location",
    "Mutant", "RepairAgent", "RepoSpec", "RepoTools", "SherlocLocalizer", "SpectrumDiagnostician", "Task", "TestRun", "bm25_localize",
    "build_benchmark", "build_tasks", "functions", "gate", "lexical_fallback", "lm_line_scorer", "mutants_of",
    "ochiai_localize", "open_repo", "parse_case_file", "render", "run_tests", "surprisal_localize",
]
