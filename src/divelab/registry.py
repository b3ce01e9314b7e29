"""The eighteen systems of the week, and where each lives in divelab.

A system is *implemented* when its package has a ``reproduce`` module; status is derived from
the code, never written by hand, so ``divelab list`` cannot claim what is not there.
Each ``reproduce`` module defines a documented ``Plan`` per scale (``PLANS``) and ``run(plan, seed) ->
Reproduction`` (:mod:`divelab.plans`); the runner (:func:`divelab.scaleout.run_reproduction`) runs it.
A package may also define ``cli.py`` with ``register(app: typer.Typer)`` to add its own commands.

The registry is each system's one descriptor: the docs navigation, the API pages and the README's
papers table are generated from it (``tools/registry_docs.py write``; a test runs ``check``).
What can be derived is derived: the docs page, the plan's dotted path and the CLI commands.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
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
    sources: tuple[str, ...]
    """The parts of the paper (abstract, a section, table, figure or algorithm) that the paper's
    values in this reproduction's claims come from: where a reader checks the numbers."""

    @property
    def alias(self) -> str:
        return f"e{self.e_number}"

    @property
    def docs_page(self) -> str:
        """The system's page, relative to the repository root."""
        return f"docs/systems/{self.key}.md"

    @property
    def api_page(self) -> str:
        """The system's API reference page (generated), relative to the repository root."""
        return f"docs/api/{self.key}.md"

    @property
    def plan(self) -> str:
        """Dotted path of the reproduction's plan: the frozen dataclass that sizes each scale
        (see :mod:`divelab.plans`)."""
        return f"{self.module}.reproduce.Plan"

    def cli_commands(self) -> tuple[str, ...]:
        """The commands the system's ``cli.py`` registers, as typed (``divelab sherloc localize``);
        empty when it has none. Loads only ``cli.py`` (a cli module imports its system inside each
        command), so this costs milliseconds, but `divelab list` never calls it."""
        module = load_cli(self.module)
        if module is None:
            return ()
        import typer

        scratch = typer.Typer()
        module.register(scratch)
        own = [g for g in scratch.registered_groups if g.name == self.key]
        if own and len(own) == len(scratch.registered_groups) and not scratch.registered_commands:
            scratch = own[0].typer_instance  # the package registered its own group, named by its key
        return tuple(_command_paths(scratch, f"divelab {self.key}"))

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
           "training", "divelab.training.infotree",
           ("abstract: the zero-advantage impossibility result", "method: greedy submodular tree expansion")),
    System(163, "backtrack", "RLVR vs SFT: learning to backtrack in path-finding", "2606.22938",
           "training", "divelab.training.backtrack",
           ("abstract: SFT cannot learn to backtrack, RLVR can",
            "main theorem: Θ(W·K) vs Θ(W·L^K) hitting times", "distillation of RLVR traces")),
    System(164, "pinning", "Governance Decay: ConstraintRot and Constraint Pinning", "2606.22528",
           "safety", "divelab.safety.pinning",
           ("ConstraintRot benchmark", "headline results", "Constraint Pinning method")),
    System(165, "g2po", "G2PO: group-graph policy optimization", "2606.22995",
           "training", "divelab.training.g2po",
           ("abstract: up to 22.2% over GRPO", "method: group-graph advantages",
            "results: ALFWorld, WebShop, AppWorld")),
    System(166, "fugu", "Fugu / Fugu-Ultra: an orchestrator over black-box models", "2606.21228",
           "orchestration", "divelab.orchestration.fugu",
           ("Fugu per-turn router", "Fugu-Ultra conductor", "vendor-reported benchmark numbers")),
    System(167, "world-model", "Qwen-AgentWorld: language world models", "2606.24597",
           "training", "divelab.training.world_model",
           ("three-stage recipe", "AgentWorldBench", "two uses: simulator for agent RL, warm-up")),
    System(168, "metis", "Metis: text-first, code-when-earned memory", "2606.24151",
           "self-improvement", "divelab.selfimprove.metis",
           ("controlled study", "Metis design", "results")),
    System(169, "sherloc", "SHERLOC: diagnostic case-file bug localization", "2606.24820",
           "coding", "divelab.coding.sherloc",
           ("method: the diagnostic case file", "results: localization accuracy and cost")),
    System(170, "bayes-control", "Bayesian control for coding agents (refine / verify / ship)", "2606.24453",
           "coding", "divelab.coding.bayes_control",
           ("method: refine / verify / ship as a Bayesian decision",)),
    System(171, "first-token-probe", "Do thinking tokens help with safety? The first-token probe", "2606.25013",
           "oversight", "divelab.oversight.first_token",
           ("setup", "method: the first-token probe", "caveats")),
    System(172, "cliff-tokens", "Cliff tokens: where a reasoning solution tips into failure", "2606.25524",
           "interpretability", "divelab.interp.cliff_tokens",
           ("definitions: cliff tokens", "results: Cliff-del and Cliff-keep", "Cliff-DPO",
            "efficiency")),
    System(173, "progress-advantage", "Progress advantage: beta * log pi/pi_ref as a step grader", "2606.26080",
           "training", "divelab.training.progress_advantage",
           ("core identity: beta * log pi/pi_ref", "results: best-of-8 and uncertainty")),
    System(174, "forensics", "Model forensics: rewind and intervene", "2606.26071",
           "oversight", "divelab.oversight.forensics",
           ("the rewind-and-intervene protocol", "environments and findings")),
    System(175, "crosscoder", "One crosscoder feature for RL-induced tool use", "2606.26474",
           "interpretability", "divelab.interp.crosscoder",
           ("DFC architecture and loss", "interventions and scoring", "results")),
    System(176, "autocog", "AutoCog: an automated cognitive scientist", "2606.26448",
           "science", "divelab.science.autocog",
           ("components of the loop", "controls and ablations", "the discovered theory")),
    System(177, "kernelpro", "KernelPro: micro-profiling tools and MCTS for GPU kernels", "2606.26453",
           "coding", "divelab.coding.kernelpro",
           ("method: 15 micro-profiling tools, roofline-first diagnosis, MCTS", "results")),
    System(178, "red-queen", "Red Queen Godel Machine: co-evolving judges", "2606.26294",
           "self-improvement", "divelab.selfimprove.red_queen",
           ("algorithm: co-evolving agents and judges", "results and ablation")),
    System(179, "dspark", "DSpark: confidence-scheduled speculative decoding", "2607.05147",
           "serving", "divelab.serving.dspark",
           ("Table 1", "Fig. 2", "Figs. 5-6", "Algorithm 1", "§5.2", "§8")),
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


def load_cli(package: str) -> ModuleType | None:
    """A package's ``cli.py`` module, or None when it has none."""
    path = module_file(f"{package}.cli")
    if path is None:
        return None
    # Load cli.py by its path, not as `package.cli`: importing the package would run its
    # __init__ (torch, transformers: seconds) just to list a command in --help. A cli module
    # imports its system inside each command, when the command runs.
    name = f"divelab._commands.{package.replace('.', '_')}"
    module = sys.modules.get(name)
    if module is None:
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return module


def _command_paths(app, prefix: str) -> list[str]:  # noqa: ANN001 - a typer.Typer, imported lazily
    """Every command under ``app`` as typed after ``prefix``, groups descended."""
    paths = []
    for info in app.registered_commands:
        # typer names an unnamed command after its function, underscores as dashes
        paths.append(f"{prefix} {info.name or info.callback.__name__.lower().replace('_', '-')}")
    for group in app.registered_groups:
        paths += _command_paths(group.typer_instance, f"{prefix} {group.name}")
    return paths


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
