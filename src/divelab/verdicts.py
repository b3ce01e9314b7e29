"""Verdict rules: how a measured value becomes a verdict, recorded so it can be re-checked.

Every verdict in divelab comes from one of these rules. A rule returns a :class:`Ruling`: the
verdict, whether the **direction** holds, whether the **size** agrees with the paper within a
tolerance the claim declares, and the rule itself as plain JSON (``{"name", "args"}``). The
ruling is stored on the claim, so a test (and a reader of ``results.json``) can re-apply the rule
to the recorded values and get the same verdict: no verdict is chosen by hand.

The rules, and when to use which:

- :func:`direction` — "A beats B" (an effect with a confidence interval). A CI that covers zero is
  *not separated from noise*, never "partly": under the null that is a coin flip.
- :func:`value` — "the paper measured X" (an AUROC, a rate); optionally also "better than chance".
- :func:`bound` — "at most / at least L" (an overhead, an error of a numerical check).
- :func:`found` — "a search finds an instance" (a counterexample): finding nothing is not partly.
- :func:`outcome` — a pre-stated yes/no test whose outcome could have gone either way (a model
  comparison, a monotonicity check); ``test`` says what was tested.
- :func:`uninformative` — the experiment could not speak: a failed set-up, a positive control that
  did not fire, a floor or a ceiling on every arm; ``reason`` says which.

What every rule enforces, so that a verdict means the same thing in every row:

- **The interval decides, not the point.** A threshold or a chance level is passed only when the far
  end of the interval is past it (:func:`bound` and :func:`value` with ``chance``). When a value is judged
  by its size alone (:func:`value` without ``chance``), an interval that reaches both inside and outside the
  paper's band is *not separated*: reproduced needs the whole interval inside the band, not reproduced the
  whole interval outside it.
- **A zero-width interval is not noise.** An interval of exactly one point from a resampling method
  means every unit gave the same value or the same difference (an exact tie, a floor, a ceiling):
  :func:`direction` and :func:`value` then rule *uninformative*, with that reason, unless the effect
  is computed exactly (``exact=True``, e.g. by enumeration).
- **Size is tested when the paper gives one.** *Reproduced* means direction and size agree; when the
  paper gives no size the verdict is *direction holds*. A relative tolerance wider than ±50 % must say
  why (``tol_why``).
- **A negative control did not show the effect.** Every rule takes ``control=``: the same quantity measured in
  the same run with the method's key ingredient removed (labels shuffled, a random direction, a sham). A positive
  verdict whose control shows the effect too is *uninformative*: the set-up, not the method, produced it.
  ``{"none": why}`` records that no control can exist. :func:`control` builds the dict; :func:`control_shows`
  re-reads it from a recorded rule.
- **A value is judged with its interval.** :func:`value` needs ``ci`` unless ``exact=True``; ``chance`` is an
  exact constant (a random scorer's AUROC, 1/k) named by ``chance_why`` — a measured baseline is compared with
  :func:`direction` on the paired difference, never treated as a constant.
- **A yes/no outcome cannot check a size.** :func:`outcome` with ``paper_size`` (the paper states one) passes at
  *direction holds* at best.
- **A method claim replicates the training run.** ``training_runs`` (for :func:`direction`) names how
  many independent training runs stand behind each arm; with fewer than two, the interval is over
  evaluation samples of one run and cannot separate the method from the run: *not separated*.

Sizes: ``paper`` is a number or a ``(lo, hi)`` range; ``tol`` widens it, relative to the paper's
value (``tol_kind="rel"``, the default) or in the claim's own unit (``"abs"``). Without a paper
number the size is "not comparable" and ``why`` must say why.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from divelab.formatting import format_number

# The version of these rules a result was judged under (saved with every result). 4: negative controls, values
# judged with their interval, chance only as a named exact constant, outcomes capped when the paper states a size.
RULES_VERSION = 4


class Verdict(StrEnum):
    REPRODUCED = "reproduced"  # direction holds and the size agrees with the paper's
    DIRECTION_HOLDS = "direction holds"  # direction holds; the paper gives no size to compare
    PARTLY = "direction only"  # direction holds, the size is outside the declared tolerance
    NOT_SEPARATED = "not separated from noise"  # the interval covers "no effect"
    NOT_REPRODUCED = "not reproduced"  # the direction fails, or the value/bound/search fails
    UNINFORMATIVE = "uninformative"  # tie, floor, ceiling, failed set-up, silent control: the reason says which
    NOT_CHECKABLE = "not checkable here"  # measured is None; the note says why


VERDICT_VALUES = [v.value for v in Verdict]


class Kind(StrEnum):
    """What a claim's evidence is. Only ``empirical`` claims count in the headline tally."""

    CHECK = "check"  # mathematics or implementation correctness: can only fail through a bug
    BY_CONSTRUCTION = "by construction"  # true because of how the set-up is built
    PLANTED = "planted"  # our simulator or harness writes the phenomenon (its direction or size)
    EMPIRICAL = "empirical"  # could have failed for a reason outside our code and our constants


KIND_VALUES = [k.value for k in Kind]


@dataclass(frozen=True)
class Ruling:
    verdict: Verdict
    direction: str  # "holds" | "fails" | "not separated" | "n/a"
    size: str  # "agrees" | "differs" | "not comparable: <why>" | "n/a"
    rule: dict[str, Any] = field(default_factory=dict)
    reason: str = ""  # why the verdict is uninformative or capped (empty otherwise)

    def text(self) -> str:
        """One line a reader can check: what the rule saw."""
        args = self.rule.get("args", {})
        if self.verdict is Verdict.UNINFORMATIVE:
            return f"uninformative: {self.reason}"
        parts = [f"direction {self.direction}" if self.direction != "n/a" else ""]
        if self.size.startswith("not comparable"):
            parts.append(f"size {self.size}")
        elif self.size != "n/a":
            band = _band(args.get("paper"), args.get("tol", 0.0), args.get("tol_kind", "rel"))
            if band is not None:
                parts.append(f"size {self.size} (paper band {_fmt(band[0])}…{_fmt(band[1])})")
            else:
                parts.append(f"size {self.size}")
        if self.reason:
            parts.append(self.reason)
        return "; ".join(p for p in parts if p)


def _fmt(x: float) -> str:
    return format_number(float(x))


def _num(x: Any, name: str) -> float:
    try:
        v = float(x)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a number, got {x!r}") from None
    if math.isnan(v):
        raise ValueError(f"{name} is NaN")
    return v


def _paper_range(paper: Any) -> tuple[float, float] | None:
    if paper is None:
        return None
    if isinstance(paper, list | tuple):
        if len(paper) != 2:
            raise ValueError(f"paper range must be (lo, hi), got {paper!r}")
        lo, hi = _num(paper[0], "paper lo"), _num(paper[1], "paper hi")
        return (min(lo, hi), max(lo, hi))
    v = _num(paper, "paper")
    return (v, v)


def _band(paper: Any, tol: float, tol_kind: str) -> tuple[float, float] | None:
    rng = _paper_range(paper)
    if rng is None:
        return None
    lo, hi = rng
    if tol_kind not in ("rel", "abs"):
        raise ValueError(f"tol_kind must be 'rel' or 'abs', got {tol_kind!r}")
    if tol < 0:
        raise ValueError(f"tol must be >= 0, got {tol}")
    if tol_kind == "abs":
        return (lo - tol, hi + tol)
    mid = abs((lo + hi) / 2)
    return (lo - tol * mid, hi + tol * mid)


def _size(measured: float, paper: Any, tol: float, tol_kind: str, why: str) -> str:
    band = _band(paper, tol, tol_kind)
    if band is None:
        if not why:
            raise ValueError("a claim with no paper number must say why sizes are not comparable (why=...)")
        return f"not comparable: {why}"
    return "agrees" if band[0] <= measured <= band[1] else "differs"


def _ci(ci: Any) -> tuple[float, float] | None:
    if ci is None:
        return None
    lo, hi = _num(ci[0], "ci lo"), _num(ci[1], "ci hi")
    return (min(lo, hi), max(lo, hi))


def _side(lo: float, hi: float, ref: float, sign: int) -> str:
    """Where an interval lies relative to ``ref`` in direction ``sign``."""
    a, b = (lo - ref) * sign, (hi - ref) * sign
    if min(a, b) > 0:
        return "holds"
    if max(a, b) < 0:
        return "fails"
    return "not separated"


ZERO_WIDTH = ("zero-width interval: every unit gave the same {what} (an exact tie, a floor or a "
              "ceiling), so the data cannot speak to the claim")


def _check_tol(paper: Any, tol: float, tol_kind: str, tol_why: str) -> None:
    if paper is not None and tol_kind == "rel" and tol > 0.5 and not tol_why:
        raise ValueError(f"a relative tolerance of ±{tol:.0%} is wider than ±50%: say why (tol_why=...)")


def direction(effect: float, ci: Any = None, *, expected_sign: int = 1, paper: Any = None,
              tol: float = 0.5, tol_kind: str = "rel", why: str = "", exact: bool = False,
              tol_why: str = "", training_runs: int | None = None, control: dict | None = None) -> Ruling:
    """An effect (difference, gain, log-ratio) whose sign is the claim.

    ``ci`` is required unless ``exact`` (the effect is computed exactly, e.g. by enumeration).
    Direction: CI wholly on the expected side → holds; wholly on the other → fails; else not
    separated. Size: the point estimate inside the paper's band widened by ``tol``.
    A zero-width ``ci`` (not ``exact``) is *uninformative*. ``training_runs`` < 2 on a method
    comparison makes the direction "not separated" (the interval is over one run's samples).
    """
    e = _num(effect, "effect")
    s = 1 if expected_sign >= 0 else -1
    c = _ci(ci)
    if c is None and not exact:
        raise ValueError("direction() needs a confidence interval (ci=...) unless exact=True")
    _check_tol(paper, tol, tol_kind, tol_why)
    if training_runs is not None and int(training_runs) < 1:
        raise ValueError(f"training_runs must be >= 1, got {training_runs}")
    lo, hi = c if c is not None else (e, e)
    d = _side(lo, hi, 0.0, s)
    size = _size(e, paper, tol, tol_kind, why)
    args = {"effect": e, "ci": list(c) if c else None, "expected_sign": s, "paper": _jsonable(paper),
            "tol": tol, "tol_kind": tol_kind, "why": why, "exact": exact, "tol_why": tol_why,
            "training_runs": None if training_runs is None else int(training_runs)}
    rule = _with_control({"name": "direction", "args": args}, control)
    if c is not None and lo == hi and not exact:
        return Ruling(Verdict.UNINFORMATIVE, "n/a", "n/a", rule, ZERO_WIDTH.format(what="difference"))
    reason = ""
    if training_runs is not None and int(training_runs) < 2 and d != "not separated":
        d = "not separated"
        reason = ("one training run per arm: the interval is over evaluation samples of that run, "
                  "so it cannot separate the method from the run")
    return _controlled(Ruling(_combine(d, size), d, size, rule, reason),
                       lambda c: _shows_beyond(c, 0.0, s))


def value(measured: float, *, paper: Any = None, tol: float = 0.25, tol_kind: str = "rel",
          ci: Any = None, chance: float | None = None, expected_sign: int = 1, why: str = "",
          tol_why: str = "", exact: bool = False, chance_why: str = "", control: dict | None = None) -> Ruling:
    """A measured value compared with the paper's; with ``chance``, also "better than chance".

    ``ci`` is required unless ``exact`` (the value is computed exactly, not sampled). ``chance`` is an exact
    constant and ``chance_why`` names it ("AUROC of a random scorer", "1/7: a uniform pick among 7 models"): a
    measured baseline is not a constant; compare with it by :func:`direction` on the paired difference.

    With ``chance``: direction holds when the CI is wholly beyond ``chance`` on the expected side
    (a CI is then required), fails when wholly on the other, else not separated. Without ``chance``
    the direction is n/a and the verdict is the size alone. A zero-width ``ci`` is *uninformative*.
    """
    m = _num(measured, "measured")
    c = _ci(ci)
    s = 1 if expected_sign >= 0 else -1
    _check_tol(paper, tol, tol_kind, tol_why)
    if c is None and not exact:
        raise ValueError("value() needs the measurement's interval (ci=...) unless the value is exact (exact=True)")
    if chance is not None and not chance_why.strip():
        raise ValueError("value(chance=...) needs chance_why=... naming the exact constant (a random scorer's "
                         "AUROC, 1/k of a uniform pick); a measured baseline is compared with direction() on the "
                         "paired difference")
    args = {"measured": m, "paper": _jsonable(paper), "tol": tol, "tol_kind": tol_kind,
            "ci": list(c) if c else None, "chance": chance, "expected_sign": s, "why": why, "tol_why": tol_why,
            "exact": exact, "chance_why": chance_why}
    rule = _with_control({"name": "value", "args": args}, control)
    if c is not None and c[0] == c[1]:
        return Ruling(Verdict.UNINFORMATIVE, "n/a", "n/a", rule, ZERO_WIDTH.format(what="value"))
    if chance is None:
        d = "n/a"
    else:
        if c is None:
            raise ValueError("value() against chance needs a confidence interval (ci=...): "
                             "the far end of the interval decides")
        d = _side(c[0], c[1], _num(chance, "chance"), s)
    size = _size(m, paper, tol, tol_kind, why)
    if d == "n/a":
        if size.startswith("not comparable"):
            raise ValueError("value() with neither a paper number nor chance has nothing to judge")
        band = _band(paper, tol, tol_kind)
        if c is not None and band is not None and not (band[0] <= c[0] and c[1] <= band[1]) \
                and c[1] >= band[0] and c[0] <= band[1]:
            # the size is the whole claim, so the interval decides it: one reaching both inside and outside
            # the paper's band cannot tell agreement from disagreement, whichever side the point is on
            return Ruling(Verdict.NOT_SEPARATED, d, "straddles the band", rule,
                          f"the interval [{_fmt(c[0])}, {_fmt(c[1])}] reaches both inside and outside the paper's "
                          f"band [{_fmt(band[0])}, {_fmt(band[1])}]")
        verdict = Verdict.REPRODUCED if size == "agrees" else Verdict.NOT_REPRODUCED
        band = _band(paper, tol, tol_kind)
        return _controlled(Ruling(verdict, d, size, rule), lambda ctl: _shows_inside(ctl, band))
    verdict = _combine(d, size)
    return _controlled(Ruling(verdict, d, size, rule), lambda ctl: _shows_beyond(ctl, _num(chance, "chance"), s))


def bound(measured: float, limit: float, *, sense: str = "<=", ci: Any = None, exact: bool = False,
          control: dict | None = None) -> Ruling:
    """``measured <= limit`` (or ``>=``): an overhead cap, a rate ceiling, a numerical error.

    The far end of the interval decides: with ``ci``, the bound holds when the whole interval is
    within the limit, fails when the whole interval is past it, and is not separated otherwise. A
    value without an interval is judged only when it is exact (``exact=True``: a deterministic
    numerical check, not a sample): a rate or a timing needs its interval.
    """
    m, lim = _num(measured, "measured"), _num(limit, "limit")
    if sense not in ("<=", ">="):
        raise ValueError(f"sense must be '<=' or '>=', got {sense!r}")
    c = _ci(ci)
    if c is None and not exact:
        raise ValueError("bound() needs the measurement's interval (ci=...) unless the value is exact "
                         "(exact=True): a sampled rate or a timing is judged by the far end of its interval")
    lo, hi = c if c is not None else (m, m)
    sign = 1 if sense == ">=" else -1
    # "holds" means the whole interval is on the allowed side of the limit (equality allowed).
    a, b = (lo - lim) * sign, (hi - lim) * sign
    d = "holds" if min(a, b) >= 0 else "fails" if max(a, b) < 0 else "not separated"
    verdict = {"holds": Verdict.REPRODUCED, "fails": Verdict.NOT_REPRODUCED, "not separated": Verdict.NOT_SEPARATED}[d]
    rule = _with_control({"name": "bound", "args": {"measured": m, "limit": lim, "sense": sense,
                                                    "ci": list(c) if c else None, "exact": exact}}, control)
    return _controlled(Ruling(verdict, d, "n/a", rule), lambda ctl: _shows_within(ctl, lim, sign))


def found(count: int, trials: int, *, control: dict | None = None) -> Ruling:
    """A search for an instance (a counterexample, a failure). Nothing found → not reproduced. The control
    (``{"name", "count", "trials"}``: the same search where nothing should be found) shows the effect when it
    finds something."""
    n, t = int(count), int(trials)
    if t <= 0 or n < 0 or n > t:
        raise ValueError(f"need 0 <= count <= trials and trials > 0, got count={n}, trials={t}")
    rule = _with_control({"name": "found", "args": {"count": n, "trials": t}}, control)
    return _controlled(Ruling(Verdict.REPRODUCED if n > 0 else Verdict.NOT_REPRODUCED, "holds" if n else "fails",
                              "n/a", rule), lambda ctl: int(ctl["count"]) > 0)


def outcome(passed: bool, *, test: str, paper_size: str = "", control: dict | None = None) -> Ruling:
    """A pre-stated yes/no test that could have gone either way; ``test`` says what it was.

    ``paper_size`` is the size the paper states, in words (empty when it states none): a yes/no test cannot
    check it, so a pass is then *direction holds*, never reproduced. The control (``{"name", "passed"}``: the
    same test with the key ingredient removed) shows the effect when it passes too."""
    if not test:
        raise ValueError("outcome() needs test=... describing the pre-stated test")
    p = bool(passed)
    size = f"not comparable: a yes/no test cannot check the paper's size ({paper_size})" if paper_size else "n/a"
    verdict = (Verdict.DIRECTION_HOLDS if paper_size else Verdict.REPRODUCED) if p else Verdict.NOT_REPRODUCED
    rule = _with_control({"name": "outcome", "args": {"passed": p, "test": test, "paper_size": paper_size}}, control)
    return _controlled(Ruling(verdict, "holds" if p else "fails", size, rule), lambda ctl: bool(ctl["passed"]))


def uninformative(reason: str) -> Ruling:
    """The experiment could not speak: a failed set-up, a positive control that did not fire, a
    floor or a ceiling on every arm. ``reason`` is shown beside the verdict."""
    if not reason or not reason.strip():
        raise ValueError("uninformative() needs reason=... saying why the data cannot speak to the claim")
    return Ruling(Verdict.UNINFORMATIVE, "n/a", "n/a", {"name": "uninformative", "args": {"reason": reason}},
                  reason)


POSITIVE = (Verdict.REPRODUCED, Verdict.DIRECTION_HOLDS, Verdict.PARTLY)


def control(name: str, effect: float, ci: Any) -> dict[str, Any]:
    """A negative control for ``control=``: the claim's quantity measured in the same run with the method's key
    ingredient removed (``name`` says what), with its interval."""
    c = _ci(ci)
    if not name or c is None:
        raise ValueError("a negative control needs a name (what was removed) and an interval")
    return {"name": name, "effect": _num(effect, "control effect"), "ci": list(c)}


def _with_control(rule: dict[str, Any], ctl: dict | None) -> dict[str, Any]:
    if ctl is None:
        return rule
    if not isinstance(ctl, dict) or not (("none" in ctl and str(ctl["none"]).strip()) or ctl.get("name")):
        raise ValueError("control= must be a dict with the negative control's name and values (verdicts.control), "
                         "or {'none': '<why no negative control can exist>'}")
    rule["args"]["control"] = dict(ctl)
    return rule


def _controlled(ruling: Ruling, shows: Callable[[dict[str, Any]], bool]) -> Ruling:
    """A positive ruling whose negative control shows the effect too is uninformative."""
    ctl = ruling.rule.get("args", {}).get("control")
    if ctl is None or "none" in ctl or ruling.verdict not in POSITIVE or not shows(ctl):
        return ruling
    return Ruling(Verdict.UNINFORMATIVE, ruling.direction, ruling.size, ruling.rule,
                  f"the negative control ({ctl['name']}) shows the effect too: the set-up, not the method, produces it")


def _control_ci(ctl: dict[str, Any]) -> tuple[float, float]:
    c = _ci(ctl.get("ci"))
    if c is None:
        raise ValueError(f"negative control {ctl.get('name')!r} needs an interval (ci)")
    return c


def _shows_beyond(ctl: dict[str, Any], ref: float, sign: int) -> bool:
    return _side(*_control_ci(ctl), ref, sign) == "holds"


def _shows_inside(ctl: dict[str, Any], band: tuple[float, float] | None) -> bool:
    lo, hi = _control_ci(ctl)
    return band is not None and band[0] <= lo and hi <= band[1]


def _shows_within(ctl: dict[str, Any], limit: float, sign: int) -> bool:
    lo, hi = _control_ci(ctl)
    return min((lo - limit) * sign, (hi - limit) * sign) >= 0


def control_shows(rule: dict[str, Any] | None) -> bool | None:
    """Whether a recorded rule's negative control showed the effect (whatever the claim's own verdict: a claim
    that is not positive still records whether its control moved); None when no control was run or none can
    exist."""
    ctl = ((rule or {}).get("args") or {}).get("control")
    if ctl is None or "none" in ctl:
        return None
    return _shows_recorded(rule)


def _shows_recorded(rule: dict[str, Any]) -> bool:
    a, ctl = rule["args"], rule["args"]["control"]
    name = rule["name"]
    if name == "found":
        return int(ctl["count"]) > 0
    if name == "outcome":
        return bool(ctl["passed"])
    if name == "bound":
        return _shows_within(ctl, float(a["limit"]), 1 if a["sense"] == ">=" else -1)
    if name == "value" and a.get("chance") is None:
        return _shows_inside(ctl, _band(a.get("paper"), a.get("tol", 0.0), a.get("tol_kind", "rel")))
    ref = float(a["chance"]) if name == "value" else 0.0
    return _shows_beyond(ctl, ref, int(a.get("expected_sign", 1)))


def _combine(d: str, size: str) -> Verdict:
    if d == "fails":
        return Verdict.NOT_REPRODUCED
    if d == "not separated":
        return Verdict.NOT_SEPARATED
    if size == "differs":
        return Verdict.PARTLY
    if size.startswith("not comparable"):
        return Verdict.DIRECTION_HOLDS
    return Verdict.REPRODUCED


def _jsonable(x: Any) -> Any:
    if isinstance(x, tuple):
        return [float(v) for v in x]
    if x is None:
        return None
    if isinstance(x, list):
        return [float(v) for v in x]
    return float(x)


# Every rule records its arguments under its own parameter names (``{"name": ..., "args": {...}}``), so
# re-applying one is calling it with them: a new rule is one function plus one entry here.
RULES: dict[str, Callable[..., Ruling]] = {
    "direction": direction, "value": value, "bound": bound, "found": found, "outcome": outcome,
    "uninformative": uninformative,
}


def reapply(rule: dict[str, Any]) -> Ruling:
    """Apply a recorded rule again (from a claim or a results.json) and return its ruling."""
    name = rule.get("name")
    if name not in RULES:
        raise ValueError(f"unknown verdict rule {name!r}; allowed: {', '.join(RULES)}")
    return RULES[name](**rule.get("args", {}))
