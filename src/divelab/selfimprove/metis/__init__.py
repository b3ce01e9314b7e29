"""Metis: Bridging Text and Code Memory for Self-Evolving Agents (arXiv 2606.24151).

An agent's experience is kept first as typed text — execution plans, environment facts and
pitfalls — which the agent reads as advice and checks against the environment. Only a plan
whose need has recurred (the "desire-path" gate: k recurrences of the same task pattern, failed
runs included) is handed, as a clean (pattern, plan, facts) request and never as a trajectory, to
a codifier; the tool it writes is validated in a sandbox against recorded examples before it is
exposed, and demoted back to text after repeated failures. The paper's controlled study finds code
memory cheap to run but brittle on new tasks (53% vs 63% for no memory in one setting), and Metis
up to +20.6% accuracy and −22.8% cost over ReAct on AppWorld.

Use with any agent loop::

    from divelab.selfimprove.metis import Metis, MemoryStore, TemplateCodifier
    mem = Metis(MemoryStore("memory.jsonl"), codifier=TemplateCodifier())
    advice = mem.advise(task_text, env="my-app")      # advice.tool (earned) / advice.plan, facts, pitfalls
    ...                                               # your agent acts; report_tool(tool, ok) after a tool call
    mem.observe(episode)                              # distil + gate (an Episode: task, steps, won)
"""

from divelab.selfimprove.metis.agent import ChatAgent, CodeMemory, ExplorerAgent, NoMemory, Outcome, play
from divelab.selfimprove.metis.distill import ChatDistiller, Distilled, Episode, RuleDistiller, Step
from divelab.selfimprove.metis.memory import Entry, MemoryStore
from divelab.selfimprove.metis.metis import Advice, Example, GateEvent, Metis, MetisConfig, exact_check
from divelab.selfimprove.metis.pattern import Pattern, normalise
from divelab.selfimprove.metis.tools import (
    ChatCodifier,
    CodifyRequest,
    NoisyCodifier,
    TemplateCodifier,
    Tool,
    ToolRegistry,
    run_tool_source,
)

__all__ = [
    "Advice", "ChatAgent", "ChatCodifier", "ChatDistiller", "CodeMemory", "CodifyRequest", "Distilled", "Entry",
    "Episode", "Example", "ExplorerAgent", "GateEvent", "MemoryStore", "Metis", "MetisConfig", "NoMemory",
    "NoisyCodifier", "Outcome", "Pattern", "RuleDistiller", "Step", "TemplateCodifier", "Tool", "ToolRegistry",
    "exact_check", "normalise", "play", "run_tool_source",
]
