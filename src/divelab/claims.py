"""Claims and reproductions: the paper's number beside ours, with a verdict.

A reproduction never hard-codes a measured value: ``Claim.measured`` is always computed by the
code that builds the claim. Verdicts come from the rules in :mod:`divelab.verdicts` and are
recorded with the rule, so they can be re-checked; every claim has a kind, and the headline
tally counts empirical claims only.
"""

from __future__ import annotations

import base64
import io
import json
import math
import platform
import time
from dataclasses import InitVar, asdict, dataclass, field
from pathlib import Path
from typing import Any

from divelab.formatting import format_number
from divelab.verdicts import (  # noqa: F401  (re-exported)
    KIND_VALUES,
    POSITIVE,
    RULES_VERSION,
    VERDICT_VALUES,
    Kind,
    Ruling,
    Verdict,
    control_shows,
)

# A positive empirical verdict counts in the headline only with its audit trail (falsifier, negative control,
# replication unit); without it the tally lists it apart under this name, beside the verdicts.
NOT_COUNTED = "positive, not counted"
TALLY_VALUES = [v.value for v in POSITIVE] + [NOT_COUNTED] + [v for v in VERDICT_VALUES
                                                               if v not in {p.value for p in POSITIVE}]
REPLICATION_KEYS = ("unit", "n", "clustered_by")


@dataclass
class Claim:
    """One claim of a paper, measured here.

    ``paper_value`` is the value as the paper (or the review) states it, free text, with
    ``source`` naming where it is stated. ``measured`` is ours: a number, a short string,
    or ``None`` when not checkable here (then ``note`` must say why).

    The verdict comes from a rule in :mod:`divelab.verdicts`: pass ``ruling=`` and the claim
    records the verdict, the direction, the size and the rule itself (so it can be re-checked).
    ``kind`` says what the evidence is (check / by construction / planted / empirical) and is
    required. ``baseline`` is free text about the alternatives. A comparative claim records every
    baseline measured in the same run in ``baselines`` (``{"name", "value", "ci"}``), which way is
    ``better`` ("higher" or "lower"), and ``compared_with``: the strongest of them, the one its
    verdict was taken against (:func:`divelab.comparisons.against_strongest` builds all three).
    ``reason`` says why a verdict is uninformative or capped (copied from the ruling).
    """

    statement: str
    paper_value: str
    measured: float | str | None
    verdict: Verdict | None = None
    unit: str = ""
    source: str = ""
    note: str = ""
    ci: tuple[float, float] | None = None  # confidence interval of `measured`, if any
    kind: Kind | None = None
    baseline: str = ""
    direction: str = ""
    size: str = ""
    rule: dict[str, Any] | None = None
    reason: str = ""
    baselines: list[dict[str, Any]] = field(default_factory=list)
    better: str = ""
    compared_with: str = ""
    # the smallest true effect (in ``unit``) this run detects with 80 % power at alpha 0.05: what a
    # "not separated" verdict can rule out. Given by a comparison (from the per-unit spread), or read off
    # ``ci`` for empirical claims that have one.
    mde: float | None = None
    # what outcome would have made the claim fail, and why neither our code nor our constants decide it
    falsifier: str = ""
    # the unit the interval is over: {"unit": "training runs", "n": 3, "clustered_by": ""} (clustered_by names
    # the cluster when units cluster, e.g. steps within games; the interval then comes from cluster_diff_ci)
    replication: dict[str, Any] = field(default_factory=dict)
    ruling: InitVar[Ruling | None] = None

    def __post_init__(self, ruling: Ruling | None) -> None:
        if ruling is not None:
            if self.verdict is not None and Verdict(self.verdict) is not ruling.verdict:
                raise ValueError(f"claim {self.statement!r}: verdict given by hand disagrees with its ruling")
            self.verdict, self.direction, self.size, self.rule, self.reason = (
                ruling.verdict, ruling.direction, ruling.size, ruling.rule, ruling.reason)
        if self.verdict is None:
            raise ValueError(f"claim {self.statement!r} has no verdict: pass ruling=divelab.verdicts.<rule>(...)")
        if isinstance(self.verdict, str) and not isinstance(self.verdict, Verdict):
            try:
                self.verdict = Verdict(self.verdict)
            except ValueError:
                raise ValueError(
                    f"unknown verdict {self.verdict!r}; allowed: {', '.join(VERDICT_VALUES)}"
                ) from None
        if self.kind is None:
            raise ValueError(f"claim {self.statement!r} has no kind; allowed: {', '.join(KIND_VALUES)}")
        if not isinstance(self.kind, Kind):
            try:
                self.kind = Kind(self.kind)
            except ValueError:
                raise ValueError(f"unknown kind {self.kind!r}; allowed: {', '.join(KIND_VALUES)}") from None
        if self.verdict is Verdict.NOT_CHECKABLE:
            if not self.note:
                raise ValueError(f"claim {self.statement!r} is 'not checkable here' but gives no reason in note")
        elif self.rule is None:
            raise ValueError(f"claim {self.statement!r}: a verdict must come from a rule (ruling=...)")
        if isinstance(self.measured, float) and math.isnan(self.measured):
            raise ValueError(f"claim {self.statement!r}: measured value is NaN")
        if self.ci is not None:
            self.ci = (float(self.ci[0]), float(self.ci[1]))
            if (self.mde is None and self.kind is Kind.EMPIRICAL and all(math.isfinite(x) for x in self.ci)
                    and self.ci[1] > self.ci[0]):
                from divelab.stats import mde_from_ci

                self.mde = mde_from_ci(*self.ci)
        if self.mde is not None:
            self.mde = float(self.mde)
        self._check_baselines()
        self._check_replication()

    def _check_replication(self) -> None:
        if not self.replication:
            return
        r = self.replication
        unknown = set(r) - set(REPLICATION_KEYS)
        if unknown or not str(r.get("unit", "")).strip() or not isinstance(r.get("n"), int) or r["n"] < 1:
            raise ValueError(f"claim {self.statement!r}: replication must be {{'unit': str, 'n': int >= 1, "
                             f"'clustered_by': str}}, got {r!r}")
        self.replication = {"unit": str(r["unit"]), "n": int(r["n"]), "clustered_by": str(r.get("clustered_by", ""))}

    def audit_gaps(self) -> list[str]:
        """What a positive empirical verdict lacks to count in the headline: its falsifier, its negative control
        (or the stated reason none can exist), its replication unit. Empty for every other claim."""
        if self.kind is not Kind.EMPIRICAL or self.verdict not in POSITIVE:
            return []
        gaps = []
        if not self.falsifier.strip():
            gaps.append("no falsifier")
        if ((self.rule or {}).get("args") or {}).get("control") is None:
            gaps.append("no negative control")
        if not self.replication:
            gaps.append("no replication unit")
        return gaps

    @property
    def tally_key(self) -> str:
        """The column this claim counts under: its verdict, or "positive, not counted" for an empirical positive
        without its audit trail."""
        return NOT_COUNTED if self.audit_gaps() else self.verdict.value

    def audit_text(self) -> str:
        """The falsifier, the negative control with its value, and the replication unit, in words ("" if none)."""
        parts = []
        if self.falsifier:
            parts.append(f"falsifier: {self.falsifier}")
        ctl = ((self.rule or {}).get("args") or {}).get("control")
        if ctl is not None and "none" in ctl:
            parts.append(f"negative control: none — {ctl['none']}")
        elif ctl is not None:
            ci = ctl.get("ci")
            val = ctl.get("effect", ctl.get("count", ctl.get("passed")))
            shown = format_number(float(val)) if isinstance(val, int | float) and not isinstance(val, bool) else str(val)
            if ci:
                shown += f" [{format_number(ci[0])}, {format_number(ci[1])}]"
            moved = control_shows(self.rule)
            parts.append(f"negative control ({ctl['name']}): {shown}, "
                         + ("shows the effect" if moved else "no effect"))
        if self.replication:
            r = self.replication
            parts.append(f"replication: {r['n']} {r['unit']}" + (f", clustered by {r['clustered_by']}"
                                                                  if r.get("clustered_by") else ""))
        gaps = self.audit_gaps()
        if gaps:
            parts.append("not counted: " + ", ".join(gaps))
        return "; ".join(parts)

    def power_text(self) -> str:
        """The smallest effect this run could detect, in words (empty when unknown)."""
        if self.mde is None or self.mde == 0:  # no spread at all (an exact tie, a floor): nothing to say
            return ""
        if not math.isfinite(self.mde):
            return "too few units to detect any effect"
        unit = " " + self.unit if self.unit else ""
        text = f"detects ≥ {format_number(self.mde)}{unit} at 80 % power"
        paper = self.paper_effect()
        if paper is None:
            return text
        if paper < self.mde:
            return f"{text}; the paper's effect ({format_number(paper)}{unit}) is smaller: under-powered here"
        return f"{text}, enough for the paper's effect ({format_number(paper)}{unit})"

    def paper_effect(self) -> float | None:
        """The paper's effect size for a claim whose sign is the claim (a ``direction`` rule), as a magnitude:
        the end of its band nearer zero, which is what the design must resolve. None when the paper gives no
        size, its band straddles zero, or the band reaches zero ("up to +6.6 points" sets no smallest effect)."""
        rule = self.rule or {}
        if rule.get("name") != "direction":
            return None
        paper = (rule.get("args") or {}).get("paper")
        values = paper if isinstance(paper, list | tuple) else [paper]
        if not values or not all(isinstance(v, int | float) and math.isfinite(v) for v in values):
            return None
        if min(values) < 0 < max(values):
            return None
        nearest = float(min(abs(v) for v in values))
        return nearest if nearest > 0 else None

    def _check_baselines(self) -> None:
        """A comparative claim is judged against the strongest baseline it measured."""
        if not self.baselines:
            if self.compared_with:
                raise ValueError(f"claim {self.statement!r} names compared_with but records no baselines")
            return
        if self.better not in ("higher", "lower"):
            raise ValueError(f"claim {self.statement!r}: better must be 'higher' or 'lower', got {self.better!r}")
        for b in self.baselines:
            if not isinstance(b, dict) or "name" not in b or not isinstance(b.get("value"), int | float):
                raise ValueError(f"claim {self.statement!r}: each baseline needs a name and a numeric value, got {b!r}")
        best = strongest(self.baselines, self.better)
        if self.compared_with != best["name"]:
            raise ValueError(f"claim {self.statement!r} is judged against {self.compared_with!r}, but the strongest "
                             f"baseline measured is {best['name']!r} ({best['value']:.4g})")

    def rule_text(self) -> str:
        """What the verdict rule saw: direction and size, in words."""
        if self.rule is None:
            return ""
        return Ruling(self.verdict, self.direction, self.size, self.rule, self.reason).text()

    def baselines_text(self) -> str:
        """Every baseline measured beside the claim, the one its verdict was taken against first."""
        if not self.baselines:
            return ""
        def one(b: dict[str, Any]) -> str:
            ci = b.get("ci")
            text = f"{b['name']} {format_number(float(b['value']))}"
            return text + (f" [{format_number(ci[0])}, {format_number(ci[1])}]" if ci else "")
        first = [b for b in self.baselines if b["name"] == self.compared_with]
        rest = [b for b in self.baselines if b["name"] != self.compared_with]
        text = "judged against the strongest baseline, " + one(first[0])
        return text + ("; also measured: " + ", ".join(one(b) for b in rest) if rest else "")

    def measured_text(self) -> str:
        if self.measured is None:
            return "—"
        if isinstance(self.measured, float):
            text = format_number(self.measured)
        else:
            text = str(self.measured)
        if self.unit:
            text = f"{text} {self.unit}"
        if self.ci is not None:
            text += f" [{format_number(self.ci[0])}, {format_number(self.ci[1])}]"
        return text

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["verdict"] = self.verdict.value
        d["kind"] = self.kind.value
        d["ci"] = list(self.ci) if self.ci is not None else None
        if self.mde is not None and not math.isfinite(self.mde):
            d["mde"] = "inf"  # standard JSON has no Infinity; from_dict reads it back with float()
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Claim:
        d = dict(d)
        if d.get("ci") is not None:
            d["ci"] = tuple(d["ci"])
        return cls(**d)


def strongest(baselines: list[dict[str, Any]], better: str) -> dict[str, Any]:
    """The strongest of a claim's baselines: the highest value if higher is better, else the lowest."""
    pick = max if better == "higher" else min
    return pick(baselines, key=lambda b: float(b["value"]))


@dataclass
class Figure:
    """A figure of a reproduction, kept as PNG bytes (base64) so reports are self-contained."""

    name: str
    caption: str
    png_base64: str

    @classmethod
    def from_matplotlib(cls, fig: Any, name: str, caption: str, dpi: int = 110) -> Figure:
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=dpi, bbox_inches="tight")
        import matplotlib.pyplot as plt

        plt.close(fig)
        return cls(name=name, caption=caption, png_base64=base64.b64encode(buf.getvalue()).decode("ascii"))

    def png_bytes(self) -> bytes:
        return base64.b64decode(self.png_base64)


def environment_facts() -> dict[str, str]:
    """Facts about the machine a reproduction ran on (recorded with every result)."""
    import os

    facts = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": str(os.cpu_count()),
    }
    try:
        import torch

        facts["torch"] = torch.__version__
        facts["device"] = "cuda" if torch.cuda.is_available() else "cpu"
    except ImportError:  # pragma: no cover - torch is a core dependency
        pass
    try:
        import transformers

        facts["transformers"] = transformers.__version__
    except ImportError:  # pragma: no cover
        pass
    # the CPU and kernels: the seeded numbers depend on them (divelab.machine says how)
    from divelab.machine import numerics_facts

    facts.update(numerics_facts())
    # how busy the machine was: timings (and runtimes) depend on it, the seeded numbers do not
    facts["load_1_5_15_min"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
    commit = _source_commit()
    if commit:
        facts["commit"] = commit
        if commit.endswith("+dirty"):
            # which files differed: a result stands for its commit when none of them is code the system runs
            facts["uncommitted"] = " ".join(_uncommitted_files())
    return facts


def _uncommitted_files() -> list[str]:
    """The source files (paths from the repository root) that differ from the commit, or are new."""
    import subprocess

    src = Path(__file__).resolve().parent
    try:
        out = subprocess.run(["git", "-C", str(src), "status", "--porcelain", "--", "."], capture_output=True,
                             text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return sorted(line[3:].split(" -> ")[-1].strip('"') for line in out.splitlines() if len(line) > 3)


def _source_commit() -> str:
    """The git commit of the checkout divelab runs from, with "+dirty" when its source differs from that commit
    ("" for an installed package outside a checkout)."""
    import subprocess

    src = Path(__file__).resolve().parent
    try:
        head = subprocess.run(["git", "-C", str(src), "rev-parse", "--short=12", "HEAD"], capture_output=True,
                              text=True, timeout=10)
        if head.returncode != 0:
            return ""
        dirty = subprocess.run(["git", "-C", str(src), "status", "--porcelain", "--", "."], capture_output=True,
                               text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""
    return head.stdout.strip() + ("+dirty" if dirty else "")


@dataclass
class Reproduction:
    """All claims of one system at one scale and seed, with figures and how it ran."""

    system: str  # registry key, e.g. "backtrack"
    title: str
    scale: str
    seed: int
    claims: list[Claim] = field(default_factory=list)
    figures: list[Figure] = field(default_factory=list)
    setup: str = ""  # what was run, in a paragraph: models, data, what stands in for what
    planted: str = ""  # what our own simulator or harness writes into the data (required with planted claims)
    details: dict[str, Any] = field(default_factory=dict)  # raw measured tables (JSON-serialisable)
    environment: dict[str, str] = field(default_factory=environment_facts)
    runtime_s: float = 0.0
    started_at: float = field(default_factory=time.time)
    plan: dict[str, Any] = field(default_factory=dict)  # the resolved plan the run used (divelab.plans)
    overrides: dict[str, str] = field(default_factory=dict)  # --set key=value applied to that plan
    # the verdict rules the claims were judged under (divelab.verdicts.RULES_VERSION); a result saved under
    # earlier rules is read, but its positive verdicts lack the audit trail and are not counted
    rules_version: int = RULES_VERSION

    def add(self, claim: Claim) -> Claim:
        self.claims.append(claim)
        return claim

    def verdict_counts(self, kind: Kind | str | None = Kind.EMPIRICAL) -> dict[str, int]:
        """Verdicts of the claims of one kind (empirical by default: the headline); None → all. An empirical
        positive without its falsifier, negative control and replication unit counts as "positive, not counted"."""
        counts = {v: 0 for v in TALLY_VALUES}
        for c in self.claims:
            if kind is None or c.kind == kind:
                counts[c.tally_key] += 1
        return counts

    def kind_counts(self) -> dict[str, int]:
        counts = {k: 0 for k in KIND_VALUES}
        for c in self.claims:
            counts[c.kind.value] += 1
        return counts

    def to_dict(self) -> dict[str, Any]:
        return {
            "system": self.system,
            "title": self.title,
            "scale": self.scale,
            "seed": self.seed,
            "setup": self.setup,
            "planted": self.planted,
            "claims": [c.to_dict() for c in self.claims],
            "figures": [asdict(f) for f in self.figures],
            "details": self.details,
            "environment": self.environment,
            "runtime_s": self.runtime_s,
            "started_at": self.started_at,
            "plan": self.plan,
            "overrides": self.overrides,
            "rules_version": self.rules_version,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Reproduction:
        return cls(
            system=d["system"],
            title=d["title"],
            scale=d["scale"],
            seed=d["seed"],
            setup=d.get("setup", ""),
            planted=d.get("planted", ""),
            claims=[Claim.from_dict(c) for c in d["claims"]],
            figures=[Figure(**f) for f in d.get("figures", [])],
            details=d.get("details", {}),
            environment=d.get("environment", {}),
            runtime_s=d.get("runtime_s", 0.0),
            started_at=d.get("started_at", 0.0),
            plan=d.get("plan", {}),
            overrides=d.get("overrides", {}),
            rules_version=int(d.get("rules_version", 3)),  # results before version 4 did not record it
        )

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, default=_json_default)


def _json_default(o: Any) -> Any:
    try:
        import numpy as np

        if isinstance(o, np.generic):
            return o.item()
        if isinstance(o, np.ndarray):
            return o.tolist()
    except ImportError:  # pragma: no cover
        pass
    raise TypeError(f"not JSON-serialisable: {type(o).__name__}")


def not_checkable(statement: str, paper_value: str, why: str, source: str = "",
                  kind: Kind = Kind.EMPIRICAL) -> Claim:
    """A claim this machine cannot check; ``why`` is shown in the report."""
    return Claim(
        statement=statement,
        paper_value=paper_value,
        measured=None,
        verdict=Verdict.NOT_CHECKABLE,
        source=source,
        note=why,
        kind=kind,
    )
