"""The eighteen systems of the week, and where each lives in divelab.

A system is *implemented* when its package has a ``reproduce`` module; status is derived from
the code, never written by hand, so ``divelab list`` cannot claim what is not there.
Each ``reproduce`` module defines ``reproduce(scale: str, seed: int) -> Reproduction``.
A package may also define ``cli.py`` with ``register(app: typer.Typer)`` to add its own commands.
"""

from __future__ import annotations

import importlib
import importlib.util
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType


@dataclass(frozen=True)
class System:
    e_number: int
    key: str  # the name users type: `divelab reproduce backtrack`
    name: str
    arxiv: str
    theme: str
    module: str  # python package

    @property
    def alias(self) -> str:
        return f"e{self.e_number}"

    @property
    def implemented(self) -> bool:
        # Looked up on disk, not imported: importing a system package pulls in torch, and
        # `divelab list` should not pay seconds for eighteen status checks.
        return module_file(f"{self.module}.reproduce") is not None

    @property
    def status(self) -> str:
        return "implemented" if self.implemented else "planned"

    def reproduce_module(self) -> ModuleType:
        return importlib.import_module(f"{self.module}.reproduce")


SYSTEMS: tuple[System, ...] = (
    System(162, "infotree", "InfoTree: submodular tree rollouts against advantage collapse", "2605.05262",
           "training", "divelab.training.infotree"),
    System(163, "backtrack", "RLVR vs SFT: learning to backtrack in path-finding", "2606.22938",
           "training", "divelab.training.backtrack"),
    System(164, "pinning", "Governance Decay: ConstraintRot and Constraint Pinning", "2606.22528",
           "safety", "divelab.safety.pinning"),
    System(165, "g2po", "G2PO: group-graph policy optimization", "2606.22995",
           "training", "divelab.training.g2po"),
    System(166, "fugu", "Fugu / Fugu-Ultra: an orchestrator over black-box models", "2606.21228",
           "orchestration", "divelab.orchestration.fugu"),
    System(167, "world-model", "Qwen-AgentWorld: language world models", "2606.24597",
           "training", "divelab.training.world_model"),
    System(168, "metis", "Metis: text-first, code-when-earned memory", "2606.24151",
           "self-improvement", "divelab.selfimprove.metis"),
    System(169, "sherloc", "SHERLOC: diagnostic case-file bug localization", "2606.24820",
           "coding", "divelab.coding.sherloc"),
    System(170, "bayes-control", "Bayesian control for coding agents (refine / verify / ship)", "2606.24453",
           "coding", "divelab.coding.bayes_control"),
    System(171, "first-token-probe", "Do thinking tokens help with safety? The first-token probe", "2606.25013",
           "oversight", "divelab.oversight.first_token"),
    System(172, "cliff-tokens", "Cliff tokens: where a reasoning solution tips into failure", "2606.25524",
           "interpretability", "divelab.interp.cliff_tokens"),
    System(173, "progress-advantage", "Progress advantage: beta * log pi/pi_ref as a step grader", "2606.26080",
           "training", "divelab.training.progress_advantage"),
    System(174, "forensics", "Model forensics: rewind and intervene", "2606.26071",
           "oversight", "divelab.oversight.forensics"),
    System(175, "crosscoder", "One crosscoder feature for RL-induced tool use", "2606.26474",
           "interpretability", "divelab.interp.crosscoder"),
    System(176, "autocog", "AutoCog: an automated cognitive scientist", "2606.26448",
           "science", "divelab.science.autocog"),
    System(177, "kernelpro", "KernelPro: micro-profiling tools and MCTS for GPU kernels", "2606.26453",
           "coding", "divelab.coding.kernelpro"),
    System(178, "red-queen", "Red Queen Godel Machine: co-evolving judges", "2606.26294",
           "self-improvement", "divelab.selfimprove.red_queen"),
    System(179, "dspark", "DSpark: confidence-scheduled speculative decoding", "2607.05147",
           "serving", "divelab.serving.dspark"),
)


def module_file(dotted: str) -> Path | None:
    """The source file of a divelab module (``pkg/mod.py`` or ``pkg/mod/__init__.py``), or None."""
    top, _, rest = dotted.partition(".")
    spec = importlib.util.find_spec(top)
    if spec is None or not spec.submodule_search_locations:
        return None
    for root in spec.submodule_search_locations:
        base = Path(root).joinpath(*rest.split("."))
        for candidate in (base.with_suffix(".py"), base / "__init__.py"):
            if candidate.is_file():
                return candidate
    return None


class UnknownSystemError(ValueError):
    pass


def _names_by_status() -> str:
    done = ", ".join(f"{s.key} ({s.alias})" for s in SYSTEMS if s.implemented) or "none yet"
    planned = [f"{s.key} ({s.alias})" for s in SYSTEMS if not s.implemented]
    return f"valid names: {done}" + (f"; planned, not runnable yet: {', '.join(planned)}" if planned else "")


def _did_you_mean(name: str) -> str:
    import difflib

    names = [s.key for s in SYSTEMS] + [s.alias for s in SYSTEMS]
    close = difflib.get_close_matches(name.strip().lower(), names, n=2, cutoff=0.6)
    return f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""


def get(name: str) -> System:
    """Find a system by key (``backtrack``), alias (``e163``/``E163``/``163``) or module tail."""
    n = name.strip().lower().replace("_", "-")
    for s in SYSTEMS:
        if n in (s.key, s.alias, str(s.e_number), s.module.rsplit(".", 1)[-1].replace("_", "-")):
            return s
    raise UnknownSystemError(f"unknown system {name!r}{_did_you_mean(name)} ({_names_by_status()})")


def implemented() -> list[System]:
    return [s for s in SYSTEMS if s.implemented]


def resolve_implemented(names: list[str]) -> list[System]:
    """Systems to reproduce: all implemented ones when ``names`` is empty. A planned system is an
    error (never a fake result)."""
    if not names:
        return implemented()
    out: list[System] = []
    for name in names:
        s = get(name)
        if not s.implemented:
            raise UnknownSystemError(
                f"system {s.key!r} ({s.alias}, {s.name}) is planned, not implemented yet; {_names_by_status()}"
            )
        if s not in out:
            out.append(s)
    return out
