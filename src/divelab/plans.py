"""A reproduction's plan: everything it sizes by scale, in one frozen dataclass.

Every ``reproduce`` module defines

* ``Plan`` — a frozen dataclass; each field has a docstring (a string literal on the line after
  it, as mkdocstrings reads it) saying what it sizes;
* ``PLANS`` — ``{"smoke": Plan(...), "quick": Plan(...), "full": Plan(...)}``;
* ``run(plan: Plan, seed: int) -> Reproduction`` — the measurement, split into section functions
  that each measure one thing and return its claims.

The runner (:func:`divelab.scaleout.tasks.run_one`) owns the rest: it checks the scale, resolves
the plan (``--set key=value`` overrides a field; nested plans take dotted keys such as
``rl.updates=50``), pins threads, selects the plotting backend, times the run, and records the
resolved plan and the overrides in ``results.json``. So "what does quick mean for system X?" is
answered by reading one dataclass, and a run's record says exactly what it ran.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import json
import textwrap
import types
import typing
from collections.abc import Mapping, Sequence
from typing import Any

from divelab.scale import SCALES, check_scale


def field_docs(cls: type) -> dict[str, str]:
    """Each field's docstring: the string literal right after its annotated assignment."""
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if not dataclasses.is_dataclass(klass):
            continue
        try:
            src = textwrap.dedent(inspect.getsource(klass))
        except (OSError, TypeError):
            continue
        body = ast.parse(src).body[0].body  # type: ignore[attr-defined]
        for stmt, nxt in zip(body, [*body[1:], None], strict=True):
            if (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)
                    and isinstance(nxt, ast.Expr) and isinstance(nxt.value, ast.Constant)
                    and isinstance(nxt.value.value, str)):
                docs[stmt.target.id] = inspect.cleandoc(nxt.value.value)
    return docs


def _dataclass_types(hint: Any) -> list[type]:
    """The dataclass types an annotation holds: itself, or inside a union, tuple, list or mapping."""
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return [hint]
    return [t for arg in typing.get_args(hint) for t in _dataclass_types(arg)]


def _dataclass_values(value: Any) -> list[Any]:
    """The dataclass instances a field's value holds: itself, or inside a tuple, list or mapping."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return [value]
    if isinstance(value, Mapping):
        value = list(value.values())
    if isinstance(value, (list, tuple)):
        return [v for x in value for v in _dataclass_values(x)]
    return []


def _type_problems(cls: type, where: str, instances: list[Any], seen: set[type]) -> list[str]:
    """Problems of one plan type and, recursively, of every dataclass type its fields hold (by annotation,
    and by the values ``instances`` of it carry, so a field typed ``Any`` is checked too)."""
    problems = []
    if not cls.__dataclass_params__.frozen:  # type: ignore[attr-defined]
        problems.append(f"{where} is not frozen")
    docs = field_docs(cls)
    missing = [f.name for f in dataclasses.fields(cls) if not docs.get(f.name)]
    if missing:
        problems.append(f"{where} fields without a docstring: {', '.join(missing)}")
    try:
        hints = typing.get_type_hints(cls)
    except (NameError, TypeError):  # an annotation that does not resolve: the values still tell the types
        hints = {}
    for f in dataclasses.fields(cls):
        values = [v for inst in instances for v in _dataclass_values(getattr(inst, f.name))]
        nested = dict.fromkeys([*_dataclass_types(hints.get(f.name)), *(type(v) for v in values)])
        for t in nested:
            if t in seen:
                continue
            seen.add(t)
            inner = [v for v in values if type(v) is t]
            problems += _type_problems(t, f"{where}.{f.name} ({t.__name__})", inner, seen)
    return problems


def plan_problems(module: types.ModuleType) -> list[str]:
    """What keeps ``module`` from following the plan contract (empty when it follows it): ``Plan`` and every
    dataclass type nested in its fields (by annotation or by value) must be frozen with every field documented."""
    name = module.__name__
    plan_cls = getattr(module, "Plan", None)
    if plan_cls is None or not dataclasses.is_dataclass(plan_cls):
        return [f"{name} defines no Plan dataclass"]
    plans = getattr(module, "PLANS", None)
    instances = [p for p in plans.values() if isinstance(p, plan_cls)] if isinstance(plans, Mapping) else []
    problems = _type_problems(plan_cls, f"{name}.Plan", instances, {plan_cls})
    if not isinstance(plans, Mapping) or set(plans) != set(SCALES):
        problems.append(f"{name}.PLANS must map exactly {', '.join(SCALES)} to a Plan")
    elif any(not isinstance(p, plan_cls) for p in plans.values()):
        problems.append(f"{name}.PLANS holds something that is not a {name}.Plan")
    if not callable(getattr(module, "run", None)):
        problems.append(f"{name} defines no run(plan, seed)")
    return problems


def parse_sets(items: Sequence[str]) -> dict[str, str]:
    """``["a=1", "rl.updates=50"]`` → ``{"a": "1", "rl.updates": "50"}``, with a clear error."""
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--set {item!r} is not KEY=VALUE (e.g. --set seeds=3 or --set rl.updates=50)")
        out[key.strip()] = value.strip()
    return out


def _coerce(raw: str, hint: Any, current: Any, where: str) -> Any:
    """Parse ``raw`` as the type of field ``where`` (from its annotation, else its current value)."""
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin in (types.UnionType, typing.Union):
        non_none = [a for a in args if a is not type(None)]
        if raw.lower() in ("none", "null") and len(non_none) < len(args):
            return None
        hint = non_none[0] if len(non_none) == 1 else type(current)
        origin, args = typing.get_origin(hint), typing.get_args(hint)
    try:
        if hint is bool or isinstance(current, bool):
            low = raw.lower()
            if low in ("1", "true", "yes", "on"):
                return True
            if low in ("0", "false", "no", "off"):
                return False
            raise ValueError("expected true or false")
        if hint is int:
            return int(raw)
        if hint is float:
            return float(raw)
        if hint is str:
            return raw
        if origin is tuple or isinstance(current, tuple):
            elem = args[0] if args else (type(current[0]) if current else str)
            text = raw.strip().strip("()[]")
            parts = [p.strip() for p in text.split(",") if p.strip()]
            return tuple(_coerce(p, elem, elem() if isinstance(elem, type) else None, where) for p in parts)
        value = json.loads(raw)
    except (ValueError, TypeError) as exc:
        raise ValueError(f"--set {where}={raw!r}: cannot read it as {getattr(hint, '__name__', hint)} ({exc})") from None
    if current is not None and not isinstance(value, type(current)):
        raise ValueError(f"--set {where}={raw!r}: expected a value like {current!r}")
    return value


def apply_overrides(plan: Any, sets: Mapping[str, str]) -> Any:
    """A copy of ``plan`` with ``sets`` (dotted field paths → text values) applied, typed by the fields."""
    for path, raw in sets.items():
        plan = _set(plan, path.split("."), raw, path)
    return plan


def _set(obj: Any, parts: list[str], raw: str, path: str) -> Any:
    if not dataclasses.is_dataclass(obj):
        raise ValueError(f"--set {path}: {'.'.join(parts)} is inside a value that has no fields")
    names = [f.name for f in dataclasses.fields(obj)]
    head = parts[0]
    if head not in names:
        raise ValueError(f"--set {path}: no field {head!r} in {type(obj).__name__}; allowed: {', '.join(names)}")
    current = getattr(obj, head)
    if len(parts) > 1:
        return dataclasses.replace(obj, **{head: _set(current, parts[1:], raw, path)})
    hint = typing.get_type_hints(type(obj)).get(head, type(current))
    return dataclasses.replace(obj, **{head: _coerce(raw, hint, current, path)})


def resolve(module: types.ModuleType, scale: str, sets: Mapping[str, str] | None = None) -> Any:
    """The plan ``module`` runs at ``scale`` with ``sets`` applied."""
    check_scale(scale)
    problems = plan_problems(module)
    if problems:
        raise ValueError("; ".join(problems))
    return apply_overrides(module.PLANS[scale], sets or {})


def to_dict(plan: Any) -> dict[str, Any]:
    """The plan as JSON-ready data (tuples → lists, non-string keys → strings)."""

    def conv(x: Any) -> Any:
        if dataclasses.is_dataclass(x) and not isinstance(x, type):
            return {f.name: conv(getattr(x, f.name)) for f in dataclasses.fields(x)}
        if isinstance(x, Mapping):
            return {str(k): conv(v) for k, v in x.items()}
        if isinstance(x, (list, tuple)):
            return [conv(v) for v in x]
        if isinstance(x, (str, int, float, bool)) or x is None:
            return x
        return repr(x)

    return conv(plan)
