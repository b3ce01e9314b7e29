"""Fugu / Fugu-Ultra (Sakana AI, arXiv 2606.21228): orchestrators over black-box models behind one endpoint.

Fugu routes each turn to one worker: a bias-free linear head over transcript features, trained by
SFT on soft targets softmax(r̄/τ) and then by sep-CMA-ES with a diversity bonus. Fugu-Ultra (the
Conductor) writes a query-specific workflow of (model_id, subtask, access_list) steps whose
visibility is a DAG, so each worker sees only what its access list names. The claim: the
orchestrator beats every model it calls.
"""

from divelab.orchestration.fugu.conductor import (
    Conductor,
    RecursionCapError,
    ToolMemory,
    Workflow,
    WorkflowError,
    format_reward,
    group_advantages,
    parallel_then_select,
    parse_workflow,
)
from divelab.orchestration.fugu.features import HashingFeatures, HFLastTokenFeatures, render
from divelab.orchestration.fugu.orchestrator import FuguRouter
from divelab.orchestration.fugu.replay import Outcomes, record
from divelab.orchestration.fugu.router import (
    KNNRouter,
    LinearRouter,
    MFRouter,
    best_single,
    calibrate_lambda,
    cascade,
    entropy,
    route_entropy,
    tune_cascade,
)
from divelab.orchestration.fugu.svf import SVF, apply_svf
from divelab.orchestration.fugu.tasks import FAMILIES, Task, extract_answer, make_tasks, score, solve
from divelab.orchestration.fugu.workers import SkillWorker, Worker, default_pool

__all__ = [
    "FAMILIES", "SVF", "Conductor", "FuguRouter", "HFLastTokenFeatures", "HashingFeatures", "KNNRouter",
    "LinearRouter", "MFRouter", "Outcomes", "RecursionCapError", "SkillWorker", "Task", "ToolMemory", "Worker",
    "Workflow", "WorkflowError", "apply_svf", "best_single", "calibrate_lambda", "cascade", "default_pool",
    "entropy", "extract_answer", "format_reward", "group_advantages", "make_tasks", "parallel_then_select",
    "parse_workflow", "record", "render", "route_entropy", "score", "solve", "tune_cascade",
]
