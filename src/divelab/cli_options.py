"""Checks on every numeric option of every ``divelab`` command, and help text shown as written.

Commands are written by each system's own ``cli.py``; rather than each of them checking its numbers
(and most forgetting: ``--seed 1e23`` once reached torch as "Overflow when unpacking long long"),
the CLI wraps every command (:func:`with_ranges`) so that each integer and float option gets a range
from :data:`RANGES`, by option name. A value outside it fails before any work with a message that names
the flag and the allowed range. An option whose name is not in the table still gets a finite,
64-bit check (:data:`FALLBACK_INT`, :data:`FALLBACK_FLOAT`); a test makes sure none needs it.
"""

from __future__ import annotations

import copy
import functools
import importlib
import inspect
import math
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import typer
import typer.models
from rich.markup import escape

MAX_SEED = 2**32 - 1  # numpy's SeedSequence and torch.manual_seed both accept [0, 2**32)
MAX_COUNT = 2**31 - 1  # counts reach torch and C code as 32-bit ints


@dataclass(frozen=True)
class Range:
    """Allowed values of one numeric option: ``low <= x <= high`` (``low < x`` when ``open_low``)."""

    low: float
    high: float
    open_low: bool = False
    what: str = ""  # a word on what the value means, shown in the error

    def allows(self, x: float) -> bool:
        if isinstance(x, float) and not math.isfinite(x):
            return False
        above = x > self.low if self.open_low else x >= self.low
        return above and x <= self.high

    def text(self, integer: bool) -> str:
        kind = "an integer" if integer else "a number"
        if self.open_low:
            span = f"above {_num(self.low)}" + ("" if math.isinf(self.high) else f" and at most {_num(self.high)}")
        else:
            span = f"from {_num(self.low)}" + ("" if math.isinf(self.high) else f" to {_num(self.high)}")
        return f"{kind} {span}" + (f" ({self.what})" if self.what else "")


@dataclass(frozen=True)
class ConstantsRange:
    """A :class:`Range` whose bounds are constants of the module that enforces them, so the two cannot
    disagree. That module may load heavy libraries (the tokenizer loads ``transformers``) and ``divelab
    --help`` must stay fast, so the constants are read the first time a value is checked or the range shown."""

    module: str
    low: str  # names of the module's constants
    high: str
    what: str = ""

    def resolve(self) -> Range:
        mod = importlib.import_module(self.module)
        return Range(getattr(mod, self.low), getattr(mod, self.high), what=self.what)

    def allows(self, x: float) -> bool:
        return self.resolve().allows(x)

    def text(self, integer: bool) -> str:
        return self.resolve().text(integer)


AnyRange = Range | ConstantsRange


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


INF = math.inf
COUNT = Range(1, MAX_COUNT)
COUNT0 = Range(0, MAX_COUNT, what="0 skips it")
FRACTION = Range(0, 1, open_low=True)
POSITIVE = Range(0, INF, open_low=True)
NONNEG = Range(0, INF)

# By option name (the Python parameter name). ``(name, "int")`` / ``(name, "float")`` keys settle a
# name used with both types (``--budget`` counts kernels in KernelPro, is a fraction in pinning).
RANGES: dict[str | tuple[str, str], AnyRange] = {
    "seed": Range(0, MAX_SEED),
    "port": Range(0, 65535, what="0 picks a free port"),
    "threads": Range(1, 1024),
    "retries": Range(0, 100),
    "cycles": COUNT, "episodes": COUNT, "max_steps": COUNT, "steps": COUNT, "n": COUNT, "k": COUNT,
    "per_problem": COUNT, "every": COUNT, "max_new_tokens": COUNT, "batch_size": COUNT, "seq_len": COUNT,
    "dict_size": COUNT, "filler": COUNT0, "seeds": COUNT, "gamma": COUNT,
    "max_turns": COUNT, "max_batch": COUNT, "max_queue": COUNT, "boot": COUNT, "max_flips": COUNT0,
    "folds": Range(2, MAX_COUNT), "cpt_steps": COUNT0, "sft_steps": COUNT0, "rl_steps": COUNT0,
    "regenerate": COUNT0, "calibrate_prompts": COUNT0, "cv_n": COUNT0, "replay_k": COUNT0, "prompts": COUNT,
    "vocab_size": ConstantsRange("divelab.lm.tokenizer", "MIN_VOCAB", "MAX_VOCAB",
                                 what="the tokenizer's 256 bytes, special tokens and merges"),
    "draft_vocab": Range(0, MAX_COUNT, what="0 scores the whole vocabulary"),
    "samples_per_prompt": COUNT, "layers": Range(1, 64), "code_eval_prompts": Range(0, 164, what="0 skips the code domain"),
    "layer": Range(-1, 4096, what="-1 picks the middle layer"),
    ("budget", "int"): COUNT,
    ("budget", "float"): FRACTION,
    "excl_share": FRACTION,
    "temperature": Range(0, 100, what="0 is greedy"),
    "beta": POSITIVE, "lr": Range(0, 10, open_low=True), "verifier_cost": NONNEG,
    "lora_r": COUNT, "lora_alpha": COUNT, "max_length": COUNT, "num_generations": Range(2, MAX_COUNT),
    "save_every": COUNT,
}
FALLBACK_INT = Range(-(2**63), 2**63 - 1)
FALLBACK_FLOAT = Range(-INF, INF)


def range_for(name: str, integer: bool) -> AnyRange | None:
    """The declared range of an option, or None when the table has none."""
    return RANGES.get((name, "int" if integer else "float")) or RANGES.get(name)


def _numeric(annotation: object) -> bool | None:
    """True for an int option, False for a float one, None for anything else (``int | None`` counts)."""
    args = typing.get_args(annotation) if typing.get_origin(annotation) in (typing.Union, types.UnionType) else ()
    kinds = {a for a in (args or (annotation,)) if a is not type(None)}
    if kinds == {int}:
        return True
    if kinds == {float}:
        return False
    return None


def _checker(integer: bool, allowed: AnyRange, then: Callable[..., Any] | None) -> Callable[..., Any]:
    def check(ctx: typer.Context, param: typer.CallbackParam, value: Any) -> Any:
        if value is not None and not (isinstance(value, bool) or allowed.allows(value)):
            raise typer.BadParameter(f"{value} is out of range; allowed: {allowed.text(integer)}")
        return then(ctx, param, value) if then is not None else value

    return check


def with_ranges(callback: Callable[..., Any]) -> Callable[..., Any]:
    """``callback`` with a range check on each numeric parameter, help text escaped for rich.

    Typer reads a command's options from its signature; the returned function has the same
    signature with each int/float parameter's ``Option``/``Argument`` given a checking callback.
    """
    if getattr(callback, "__divelab_checked__", False):
        return callback
    sig = inspect.signature(callback, eval_str=True)
    hints = typing.get_type_hints(callback)
    params = []
    for p in sig.parameters.values():
        annotation = hints.get(p.name, p.annotation)
        default = p.default
        info = copy.copy(default) if isinstance(default, typer.models.ParameterInfo) else (
            None if default is inspect.Parameter.empty else typer.Option(default))
        if info is not None:
            if getattr(info, "help", None):
                info.help = escape(info.help)
            integer = _numeric(annotation)
            if integer is not None:
                allowed = range_for(p.name, integer) or (FALLBACK_INT if integer else FALLBACK_FLOAT)
                info.callback = _checker(integer, allowed, info.callback)
                info.callback.__divelab_range__ = allowed
            default = info
        params.append(p.replace(default=default, annotation=annotation))

    @functools.wraps(callback)
    def command(*args: Any, **kwargs: Any) -> Any:
        return callback(*args, **kwargs)

    del command.__wrapped__  # typer must read the new signature, not the original's
    command.__signature__ = sig.replace(parameters=params)
    command.__annotations__ = {p.name: p.annotation for p in params}
    command.__doc__ = escape(inspect.getdoc(callback) or "")
    command.__divelab_checked__ = True
    return command


def allowed_text(name: str, message: str) -> str | None:
    """The allowed range of option ``name`` for an error typer raised before our check ran
    (``--seed 1e23`` is "not a valid integer"), or None when the option has no range."""
    integer = "float" not in message and "number" not in message
    r = range_for(name, integer) or range_for(name, not integer)
    return r.text(integer) if r else None


def numeric_parameters(callback: Callable[..., Any]) -> list[tuple[str, bool, AnyRange | None]]:
    """``(name, is_int, declared range)`` of each numeric parameter of a command (for tests)."""
    hints = typing.get_type_hints(callback)
    out = []
    for name, annotation in hints.items():
        integer = _numeric(annotation)
        if integer is not None:
            out.append((name, integer, range_for(name, integer)))
    return out
