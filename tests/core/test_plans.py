"""The plan contract: typed overrides, documented fields, and every system written as a plan."""

from __future__ import annotations

import importlib
import types
from dataclasses import dataclass
from typing import Any

import pytest

from divelab import plans, registry


@dataclass(frozen=True)
class Inner:
    updates: int
    """RL updates."""
    lr: float = 1e-3
    """learning rate."""


@dataclass(frozen=True)
class Sample:
    seeds: int
    """training runs per method."""
    Ks: tuple[int, ...]
    """depths evaluated."""
    rl: Inner
    """the RL trainer's settings."""
    name: str = "x"
    """a label."""
    flag: bool = False
    """a switch."""
    cap: int | None = None
    """an optional cap."""


BASE = Sample(seeds=1, Ks=(1, 2), rl=Inner(updates=10))


def _module(**attrs: object) -> types.ModuleType:
    mod = types.ModuleType("fake.reproduce")
    for k, v in attrs.items():
        setattr(mod, k, v)
    return mod


def test_overrides_are_typed_by_the_field_and_reach_nested_plans():
    got = plans.apply_overrides(BASE, {"seeds": "3", "Ks": "1,2,5", "rl.updates": "50", "rl.lr": "0.01",
                                       "flag": "true", "name": "y", "cap": "7"})
    assert got == Sample(seeds=3, Ks=(1, 2, 5), rl=Inner(updates=50, lr=0.01), name="y", flag=True, cap=7)
    assert plans.apply_overrides(got, {"cap": "none"}).cap is None
    assert BASE.seeds == 1  # the original is untouched


@pytest.mark.parametrize(("sets", "message"), [
    ({"sedes": "3"}, "no field 'sedes' in Sample; allowed: seeds, Ks, rl"),
    ({"seeds": "three"}, "cannot read it as int"),
    ({"flag": "maybe"}, "expected true or false"),
    ({"seeds.x": "1"}, "has no fields"),
    ({"rl.epochs": "1"}, "no field 'epochs' in Inner"),
])
def test_bad_overrides_say_what_was_wrong_and_what_is_allowed(sets, message):
    with pytest.raises(ValueError, match=message):
        plans.apply_overrides(BASE, sets)


def test_parse_sets_needs_key_equals_value():
    assert plans.parse_sets(["a=1", " rl.updates = 5 "]) == {"a": "1", "rl.updates": "5"}
    with pytest.raises(ValueError, match="not KEY=VALUE"):
        plans.parse_sets(["seeds"])


def test_field_docs_read_the_string_after_each_field():
    assert plans.field_docs(Sample)["Ks"] == "depths evaluated."
    assert plans.field_docs(Inner) == {"updates": "RL updates.", "lr": "learning rate."}


def test_plan_problems_catch_a_missing_docstring_a_mutable_plan_and_a_missing_scale():
    @dataclass
    class Loose:
        n: int

    good = _module(Plan=Sample, PLANS={"smoke": BASE, "quick": BASE, "full": BASE}, run=lambda p, s: None)
    assert plans.plan_problems(good) == []
    bad = _module(Plan=Loose, PLANS={"smoke": Loose(1), "quick": Loose(2)})
    problems = " | ".join(plans.plan_problems(bad))
    assert "not frozen" in problems and "without a docstring: n" in problems
    assert "must map exactly smoke, quick, full" in problems and "no run(plan, seed)" in problems


@dataclass
class LooseInner:  # mutable, and a field without a docstring
    steps: int


@dataclass(frozen=True)
class Wrapped:
    inner: LooseInner
    """a nested type that breaks the contract."""


@dataclass(frozen=True)
class Deep:
    deep: tuple[Wrapped, ...]
    """nested two levels down, inside a tuple."""


@dataclass(frozen=True)
class LeftOut:
    maybe: LooseInner | None = None
    """a sub-plan that every scale here leaves out (None)."""


@dataclass(frozen=True)
class Untyped:
    anything: Any = None
    """a field whose annotation says nothing: the values tell the type."""


def _problems(plan_cls: type, plan: object) -> list[str]:
    return plans.plan_problems(_module(Plan=plan_cls, PLANS=dict.fromkeys(("smoke", "quick", "full"), plan),
                                       run=lambda p, s: None))


def test_plan_problems_check_nested_types_by_annotation_and_by_value():
    assert _problems(Deep, Deep(deep=(Wrapped(LooseInner(1)),))) == [
        "fake.reproduce.Plan.deep (Wrapped).inner (LooseInner) is not frozen",
        "fake.reproduce.Plan.deep (Wrapped).inner (LooseInner) fields without a docstring: steps"]
    # a sub-plan left out (None) at every scale is still checked, by its annotation
    assert "fake.reproduce.Plan.maybe (LooseInner) is not frozen" in _problems(LeftOut, LeftOut())
    # a field typed Any is checked through the values the plans hold
    assert _problems(Untyped, Untyped(anything=Inner(1))) == []
    assert "fake.reproduce.Plan.anything (LooseInner) is not frozen" in _problems(Untyped, Untyped(LooseInner(1)))


def test_to_dict_is_json_ready():
    d = plans.to_dict(Sample(seeds=1, Ks=(1,), rl=Inner(2), cap=None))
    assert d == {"seeds": 1, "Ks": [1], "rl": {"updates": 2, "lr": 1e-3}, "name": "x", "flag": False, "cap": None}


@pytest.mark.parametrize("system", registry.SYSTEMS, ids=lambda s: s.key)
def test_every_reproduction_is_a_documented_plan_per_scale(system):
    """What each scale means for a system is one dataclass a reader can open (and --set can change)."""
    mod = importlib.import_module(f"{system.module}.reproduce")
    assert plans.plan_problems(mod) == []
    assert not hasattr(mod, "reproduce"), "the runner runs reproductions: run(plan, seed) is the one entry point"
