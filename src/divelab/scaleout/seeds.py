"""Several seeds of one reproduction, aggregated into one set of claims.

Each claim's recorded rule is re-applied to the across-seed mean of the value it judged, with a
Student-t interval across seeds (``divelab.stats.mean_ci``) in place of the single run's interval;
searches add their counts, yes/no tests pass when they pass in a majority of seeds. The verdict
is therefore again a recorded rule, checkable like any other.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from divelab import stats, verdicts
from divelab.claims import Claim, Reproduction, Verdict, strongest

MAX_SEEDS = 1000


def parse_seeds(text: str) -> list[int]:
    """``"0-4"`` → [0, 1, 2, 3, 4]; ``"0,3,7"``; ``"2"``. Ranges and lists may be mixed."""
    seeds: list[int] = []
    for part in str(text).split(","):
        part = part.strip()
        m = re.fullmatch(r"(\d+)(?:-(\d+))?", part)
        if not m:
            raise ValueError(f"--seeds {text!r}: {part!r} is not a seed or a range; allowed: '0-4', '0,3,7', '2'")
        lo, hi = int(m.group(1)), int(m.group(2) or m.group(1))
        if hi < lo:
            raise ValueError(f"--seeds {text!r}: range {part!r} runs backwards")
        seeds.extend(range(lo, hi + 1))
    if len(set(seeds)) != len(seeds):
        raise ValueError(f"--seeds {text!r} names a seed twice")
    if len(seeds) > MAX_SEEDS:
        raise ValueError(f"--seeds {text!r} asks for {len(seeds)} seeds; at most {MAX_SEEDS}")
    return seeds


def _num(x: Any) -> float | None:
    return float(x) if isinstance(x, int | float) and not isinstance(x, bool) else None


def _ci(values: list[float]) -> tuple[float, float]:
    return stats.mean_ci(values) if len(values) > 1 else (values[0], values[0])


def _aggregate_control(args: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The seeds' negative controls as one: their effects' mean with its interval across seeds (counts and
    passes summed), or the first seed's stated absence."""
    ctls = [a.get("control") for a in args]
    if any(c is None for c in ctls):
        return None
    first = ctls[0]
    if "none" in first:
        return dict(first)
    if "effect" in first:
        eff = [float(c["effect"]) for c in ctls]
        return verdicts.control(first["name"], float(np.mean(eff)), _ci(eff) if len(eff) > 1 else first["ci"])
    if "count" in first:
        return {"name": first["name"], "count": sum(int(c["count"]) for c in ctls),
                "trials": sum(int(c["trials"]) for c in ctls)}
    return {"name": first["name"], "passed": sum(bool(c["passed"]) for c in ctls) * 2 > len(ctls)}


def _aggregate_rule(rules: list[dict[str, Any]]) -> verdicts.Ruling:
    name = rules[0]["name"]
    args = [r["args"] for r in rules]
    a0 = dict(args[0])
    a0.pop("control", None)
    control = _aggregate_control(args)
    if name == "direction":
        eff = [float(a["effect"]) for a in args]
        a0.pop("effect"), a0.pop("ci")
        a0["exact"] = False
        # every seed trains its own run, so the seeds replicate the training run
        a0["training_runs"] = len(args) * int(a0.get("training_runs") or 1)
        return verdicts.direction(float(np.mean(eff)), _ci(eff), control=control, **a0)
    if name == "value":
        vals = [float(a["measured"]) for a in args]
        a0.pop("measured")
        a0["ci"] = list(_ci(vals))
        return verdicts.value(float(np.mean(vals)), control=control, **a0)
    if name == "bound":
        vals = [float(a["measured"]) for a in args]
        exact = all(a.get("exact") for a in args) and len(set(vals)) == 1
        return verdicts.bound(float(np.mean(vals)), a0["limit"], sense=a0["sense"],
                              ci=None if exact else _ci(vals), exact=exact, control=control)
    if name == "found":
        return verdicts.found(sum(a["count"] for a in args), sum(a["trials"] for a in args), control=control)
    passed = sum(bool(a["passed"]) for a in args)
    return verdicts.outcome(passed * 2 > len(args), test=f"{a0['test']} (majority of seeds: passed in "
                                                         f"{passed}/{len(args)})",
                            paper_size=a0.get("paper_size", ""), control=control)


def aggregate_claims(claims: list[Claim], seeds: list[int]) -> Claim:
    """One claim from its copies across seeds (same statement, same rule)."""
    first = claims[0]
    checkable = [c for c in claims if c.verdict is not Verdict.NOT_CHECKABLE]
    if not checkable:
        return first
    per_seed = ", ".join(f"seed {s}: {c.measured_text()} ({c.verdict.value})"
                         for s, c in zip(seeds, claims, strict=True))
    note = (first.note + " " if first.note else "") + f"Mean over {len(claims)} seeds; {per_seed}."
    names = {c.rule["name"] for c in checkable}
    informative = [c for c in checkable if c.verdict is not Verdict.UNINFORMATIVE]
    if informative and len(informative) < len(checkable):
        # a seed whose data could not speak does not vote: judge the seeds that could, and say so
        dropped = len(checkable) - len(informative)
        kept = [s for s, c in zip(seeds, claims, strict=True) if c in informative]
        out = aggregate_claims(informative, kept)
        out.note += f" {dropped} of {len(claims)} seeds were uninformative and are left out."
        return out
    if not informative:
        reasons = sorted({c.reason or "uninformative" for c in checkable})
        return Claim(statement=first.statement, paper_value=first.paper_value, measured=first.measured,
                     unit=first.unit, source=first.source, note=note, kind=first.kind, baseline=first.baseline,
                     ruling=verdicts.uninformative("; ".join(reasons) + f" (in all {len(claims)} seeds)"))
    if len(checkable) != len(claims) or len(names) != 1:
        raise ValueError(f"claim {first.statement!r} is checked by different rules across seeds ({sorted(names)}); "
                         "it cannot be aggregated")
    ruling = _aggregate_rule([c.rule for c in checkable])
    measured: float | str | None = first.measured
    ci = None
    values = [_num(c.measured) for c in claims]
    if all(v is not None for v in values):
        measured = float(np.mean(values))
        ci = _ci(values) if len(values) > 1 else None
    else:
        measured = "; ".join(str(c.measured) for c in claims)
    return Claim(statement=first.statement, paper_value=first.paper_value, measured=measured, unit=first.unit,
                 source=first.source, note=note, ci=ci, kind=first.kind, baseline=first.baseline, ruling=ruling,
                 falsifier=first.falsifier,
                 # the interval is now across seeds: each seed is an independent run of the whole reproduction
                 replication={"unit": "seeds (independent runs)", "n": len(claims), "clustered_by": ""},
                 **_mean_baselines(claims))


def _mean_baselines(claims: list[Claim]) -> dict[str, Any]:
    """Each baseline's value averaged across seeds; the strongest of the averages is the one named."""
    first = claims[0]
    names = [b["name"] for b in first.baselines]
    if not names or any(sorted(b["name"] for b in c.baselines) != sorted(names) for c in claims):
        return {}
    mean = [{"name": n, "value": float(np.mean([b["value"] for c in claims for b in c.baselines if b["name"] == n])),
             "ci": None} for n in names]
    return {"baselines": mean, "better": first.better, "compared_with": strongest(mean, first.better)["name"]}


def aggregate_seeds(reps: list[Reproduction]) -> Reproduction:
    """One reproduction from the same system run with several seeds: claims matched by statement,
    values averaged with a t-interval across seeds, verdicts from each claim's rule re-applied."""
    if not reps:
        raise ValueError("no reproductions to aggregate")
    systems = {r.system for r in reps}
    if len(systems) != 1 or len({r.scale for r in reps}) != 1:
        raise ValueError(f"aggregate one system at one scale at a time, got {sorted(systems)}")
    if len(reps) == 1:
        return reps[0]
    reps = sorted(reps, key=lambda r: r.seed)
    seeds = [r.seed for r in reps]
    first = reps[0]
    out = Reproduction(system=first.system, title=first.title, scale=first.scale, seed=first.seed,
                       setup=first.setup + f" Aggregated over seeds {seeds}.", environment=first.environment,
                       planted=first.planted, plan=first.plan, overrides=first.overrides)
    out.runtime_s = float(sum(r.runtime_s for r in reps))
    by_statement: dict[str, list[Claim]] = {}
    order: list[str] = []
    for r in reps:
        for c in r.claims:
            if c.statement not in by_statement:
                order.append(c.statement)
            by_statement.setdefault(c.statement, []).append(c)
    for statement in order:
        copies = by_statement[statement]
        if len(copies) != len(reps):
            missing = len(reps) - len(copies)
            raise ValueError(f"claim {statement!r} is missing from {missing} of the {len(reps)} seeds")
        out.add(aggregate_claims(copies, seeds))
    out.figures = [type(f)(name=f.name, caption=f"{f.caption} (seed {first.seed})", png_base64=f.png_base64)
                   for f in first.figures]
    out.details = {"seeds": seeds, "per_seed_runtime_s": [r.runtime_s for r in reps]}
    runs = [rec for r in reps for rec in r.details.get("scaleout", [])]
    if runs:  # how each seed's task ran (attempts, dead workers), kept through the aggregation
        out.details["scaleout"] = runs
    return out
