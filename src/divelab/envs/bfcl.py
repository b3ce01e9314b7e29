"""The Berkeley Function Calling Leaderboard (BFCL v4) single-turn data, read from the ``bfcl-eval`` wheel,
and a scorer that follows BFCL's own AST-matching rules.

The data ships inside the wheel (``bfcl_eval/data/BFCL_v4_<category>.json`` and, for categories with a
reference answer, ``bfcl_eval/data/possible_answer/...``: one JSON object a line), so nothing is fetched at
run time. Only those files are read: ``bfcl-eval``'s own code pins old numpy and many API clients, so it is
installed with ``--no-deps`` and never imported.

Categories (:data:`CATEGORIES`): ``simple`` (BFCL's ``simple_python``), ``multiple``, ``parallel``,
``parallel_multiple``, ``irrelevance`` and their ``live_`` counterparts (user-contributed questions), plus
``live_relevance``. Java/JavaScript, multi-turn, memory and web-search categories are not read: their answers
need BFCL's language converters or executable back-ends.

A prediction is a list of calls in BFCL's decoded form, ``[{"func_name": {"param": value, ...}}, ...]``
(:func:`parse_calls` turns a Python-syntax answer such as ``[f(a=1), g(b="x")]`` into it). :func:`score`
applies BFCL's rules:

- ``simple``: exactly one call; ``multiple``: exactly one call, checked against the expected function;
  ``parallel`` kinds: as many calls as expected, matched to the expected calls in any order (greedily, as
  BFCL does: each expected call takes the first unused prediction that passes);
- a call passes when its function name matches, every required parameter is present, no parameter is
  unknown to the function or to the answer, every value has the declared type (an int is accepted for a
  float; a value of the answer's own type is accepted as a variable), and every value is in the allowed
  list (strings compared case-insensitively, ignoring spaces and ``,./-_*^``; lists and dicts element-wise),
  and every answer parameter left out is optional (its allowed list holds ``""``);
- ``irrelevance``: correct when there is no call (``[]``, ``[{}]`` or text that is not a call);
  ``live_relevance``: correct when there is at least one call.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from divelab.envs.substrate import SubstrateUnavailable

INSTALL = "pip install --no-deps bfcl-eval==2026.3.23"
# divelab's category name -> the file stem in the wheel
CATEGORIES = {
    "simple": "simple_python",
    "multiple": "multiple",
    "parallel": "parallel",
    "parallel_multiple": "parallel_multiple",
    "irrelevance": "irrelevance",
    "live_simple": "live_simple",
    "live_multiple": "live_multiple",
    "live_parallel": "live_parallel",
    "live_parallel_multiple": "live_parallel_multiple",
    "live_irrelevance": "live_irrelevance",
    "live_relevance": "live_relevance",
}
# Python types of BFCL's type names ("any" is treated as a string, as BFCL does)
_TYPES: dict[str, type] = {"string": str, "integer": int, "float": float, "boolean": bool, "array": list,
                           "tuple": list, "dict": dict, "any": str}
_IGNORED = re.compile(r"[ ,./\-_*^]")

Call = Mapping[str, Mapping[str, Any]]  # {"func_name": {"param": value}}


@dataclass(frozen=True)
class FunctionSpec:
    name: str
    description: str
    parameters: dict[str, Any]  # JSON-schema-like: {"type": "dict", "properties": {...}, "required": [...]}

    @property
    def properties(self) -> dict[str, Any]:
        return self.parameters.get("properties", {})

    @property
    def required(self) -> list[str]:
        return list(self.parameters.get("required", []))


@dataclass(frozen=True)
class BFCLRecord:
    """One BFCL question: its chat turns, the functions offered, and the allowed answers.

    ``ground_truth`` is one ``{func_name: {param: [allowed values]}}`` per expected call (empty for the
    irrelevance and relevance categories, which have no reference answer)."""

    id: str
    category: str
    turns: list[list[dict[str, str]]]
    functions: list[FunctionSpec]
    ground_truth: list[dict[str, dict[str, list[Any]]]]

    @property
    def messages(self) -> list[dict[str, str]]:
        """The chat messages of the (single) turn."""
        return self.turns[0]

    @property
    def question(self) -> str:
        """The last user message."""
        return next(m["content"] for m in reversed(self.messages) if m["role"] == "user")


@dataclass(frozen=True)
class Score:
    correct: bool
    error: str = ""  # why not, in BFCL's words where it has them
    error_type: str = ""


def data_dir() -> Path:
    """The BFCL data folder inside the installed ``bfcl-eval`` wheel (found without importing it)."""
    spec = importlib.util.find_spec("bfcl_eval")
    if spec is None or not spec.submodule_search_locations:
        raise SubstrateUnavailable(f"BFCL data needs the Python package 'bfcl-eval', which is not installed; "
                                   f"install it with: {INSTALL}")
    return Path(next(iter(spec.submodule_search_locations))) / "data"


def _check_category(category: str) -> str:
    if category not in CATEGORIES:
        raise ValueError(f"unknown BFCL category {category!r}; allowed: {', '.join(CATEGORIES)}")
    return CATEGORIES[category]


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def load_category(category: str, root: str | Path | None = None) -> list[BFCLRecord]:
    """Every record of a category, from ``root`` (a folder laid out as the wheel's ``data``; default: the
    installed wheel's), with its reference answers joined by id."""
    stem = _check_category(category)
    base = Path(root) if root is not None else data_dir()
    questions = base / f"BFCL_v4_{stem}.json"
    if not questions.is_file():
        raise FileNotFoundError(f"no BFCL questions for {category!r} at {questions}")
    answers_file = base / "possible_answer" / f"BFCL_v4_{stem}.json"
    answers = {a["id"]: a["ground_truth"] for a in _lines(answers_file)} if answers_file.is_file() else {}
    needs_answer = "relevance" not in category  # irrelevance and relevance have none
    records = []
    for q in _lines(questions):
        if needs_answer and q["id"] not in answers:
            raise ValueError(f"BFCL record {q['id']!r} ({category}) has no possible answer in {answers_file}")
        functions = [FunctionSpec(f["name"], f.get("description", ""), f.get("parameters", {}))
                     for f in q["function"]]
        records.append(BFCLRecord(q["id"], category, q["question"], functions, answers.get(q["id"], [])))
    return records


def sample(sizes: Sequence[tuple[str, int]], seed: int, salt: int, root: str | Path | None = None) -> list[BFCLRecord]:
    """A seeded sample of each category, in file order: ``sizes`` is ``(category, count)`` pairs (all of a category
    when count exceeds its size). ``salt`` keeps the samples of different experiments with the same seed apart."""
    out: list[BFCLRecord] = []
    for k, (cat, n) in enumerate(sizes):
        recs = load_category(cat, root)
        idx = np.random.default_rng([seed, salt, k]).choice(len(recs), size=min(n, len(recs)), replace=False)
        out += [recs[int(i)] for i in sorted(idx)]
    return out


# ----------------------------------------------------------------------------------------------- parsing

def parse_calls(text: str) -> list[dict[str, dict[str, Any]]]:
    """A Python-syntax answer, ``[f(a=1), mod.g(b="x")]`` (brackets optional), in BFCL's decoded form.
    Raises ValueError when the text is not a list of calls with literal keyword arguments."""
    src = text.strip()
    if not src.startswith("["):
        src = f"[{src}]"
    try:
        tree = ast.parse(src, mode="eval").body
    except SyntaxError as exc:
        raise ValueError(f"not a list of function calls: {text[:80]!r} ({exc.msg})") from None
    if not isinstance(tree, ast.List):
        raise ValueError(f"not a list of function calls: {text[:80]!r}")
    calls = []
    for node in tree.elts:
        if not isinstance(node, ast.Call) or node.args:
            raise ValueError(f"not a call with keyword arguments only: {ast.unparse(node)[:80]!r}")
        try:
            args = {kw.arg: ast.literal_eval(kw.value) for kw in node.keywords if kw.arg is not None}
        except ValueError:
            raise ValueError(f"a call's arguments are not literals: {ast.unparse(node)[:80]!r}") from None
        calls.append({ast.unparse(node.func): args})
    return calls


# ----------------------------------------------------------------------------------------------- scoring

def _norm(value: Any) -> Any:
    return _IGNORED.sub("", value).lower().replace("'", '"') if isinstance(value, str) else value


def _answer_type(allowed: Sequence[Any]) -> type | None:
    return next((type(a) for a in allowed if a != ""), None)


def _type_ok(value: Any, allowed: Sequence[Any], expected: type, inner: type | None) -> tuple[bool, bool]:
    """(passes, is a variable): BFCL's type check, nested one level for arrays."""
    answer_t = _answer_type(allowed)
    variable = answer_t is not None and answer_t is not expected
    if type(value) is expected:
        if inner is None:
            return True, variable
        for option in allowed:
            # an option that is not a list (the optional marker "") places no constraint on the items
            if not isinstance(option, list) or all(_type_ok(v, option, inner, None)[0] for v in value):
                return True, variable
    if answer_t is not None and type(value) is answer_t:
        return True, True  # a value of the answer's own type is taken as a variable
    return False, False


def _dict_ok(value: Mapping[str, Any], allowed: Sequence[Any]) -> bool:
    for option in allowed:
        if option == "" or not isinstance(option, Mapping):
            continue
        if all(k in option and _norm(v) in [_norm(a) for a in option[k]] for k, v in value.items()) and \
                all(k in value or "" in opts for k, opts in option.items()):
            return True
    return False


def _options(option: Any) -> list[Any] | None:
    """An allowed list value; the optional marker ``""`` stands for the empty list, as in BFCL's checker."""
    return option if isinstance(option, list) else [] if option == "" else None


def _value_ok(value: Any, allowed: Sequence[Any], expected: type, inner: type | None, variable: bool) -> bool:
    if not variable:
        if expected is dict:
            return _dict_ok(value, allowed)
        if expected is list and inner is dict:
            for option in allowed:  # a list of dicts: one allowed dict per position
                items = _options(option)
                if items is not None and len(items) == len(value) and \
                        all(_dict_ok(v, [o]) for v, o in zip(value, items, strict=True)):
                    return True
            return False
        if expected is str:
            return _norm(value) in [_norm(a) for a in allowed if isinstance(a, str)]
        if expected is list:
            return [_norm(v) for v in value] in [[_norm(x) for x in o] for a in allowed if (o := _options(a)) is not None]
    return value in allowed


def check_call(function: FunctionSpec, call: Call, answer: Mapping[str, Mapping[str, Sequence[Any]]],
               dots_as_underscores: bool = False) -> Score:
    """One predicted call against one expected call (BFCL's simple-function rules)."""
    name = function.name.replace(".", "_") if dots_as_underscores else function.name
    if name not in call:
        return Score(False, f"function {name!r} not called (called: {', '.join(call) or 'nothing'})",
                     "wrong_func_name")
    params, allowed_by_param = call[name], next(iter(answer.values()))
    for p in function.required:
        if p not in params:
            return Score(False, f"missing required parameter {p!r}", "missing_required")
    for p, value in params.items():
        if p not in function.properties or p not in allowed_by_param:
            return Score(False, f"unexpected parameter {p!r}", "unexpected_param")
        detail, allowed = function.properties[p], allowed_by_param[p]
        type_name = detail.get("type", "any")
        expected = _TYPES.get(type_name, str)
        inner = _TYPES.get(detail.get("items", {}).get("type", ""), None) if type_name in ("array", "tuple") else None
        if type_name == "tuple" and isinstance(value, tuple):
            value = list(value)  # JSON has no tuples: the answers hold lists
        if type_name == "float" and type(value) is int:
            value = float(value)
        ok, variable = _type_ok(value, allowed, expected, inner)
        if not ok:
            return Score(False, f"parameter {p!r}: expected type {type_name}, got {type(value).__name__}",
                         "type_error")
        if not _value_ok(value, allowed, expected, inner, variable):
            return Score(False, f"parameter {p!r}: {value!r} is not one of {list(allowed)}", "value_error")
    for p, allowed in allowed_by_param.items():
        if p not in params and "" not in allowed:
            return Score(False, f"parameter {p!r} left out but not optional", "missing_optional")
    return Score(True)


def _no_call(calls: Sequence[Call]) -> bool:
    return len(calls) == 0 or (len(calls) == 1 and len(calls[0]) == 0)


def score(record: BFCLRecord, prediction: Sequence[Call] | str, dots_as_underscores: bool = False) -> Score:
    """Score one prediction (decoded calls, or a Python-syntax answer string) on one record, by BFCL's rules
    (see the module docstring). ``dots_as_underscores`` expects ``a_b`` for a function named ``a.b``, as
    BFCL does for models whose APIs forbid dots in names."""
    if isinstance(prediction, str):
        try:
            calls: Sequence[Call] = parse_calls(prediction)
        except ValueError as exc:
            calls, decode_error = [], str(exc)
        else:
            decode_error = ""
    else:
        calls, decode_error = prediction, ""
    if "irrelevance" in record.category:
        return Score(True) if _no_call(calls) else Score(False, "called a function on an irrelevant question",
                                                         "irrelevance")
    if "relevance" in record.category:
        return Score(False, "no function call", "relevance") if _no_call(calls) else Score(True)
    if decode_error:
        return Score(False, decode_error, "decode_error")
    answers = record.ground_truth
    if len(calls) != len(answers):
        return Score(False, f"{len(calls)} calls for {len(answers)} expected", "wrong_count")
    if "parallel" not in record.category:
        if "multiple" in record.category:
            expected = next(iter(answers[0]))
            function = next((f for f in record.functions if f.name == expected), None)
            if function is None:
                raise ValueError(f"record {record.id!r}: expected function {expected!r} is not among its functions")
        else:
            function = record.functions[0]
        return check_call(function, calls[0], answers[0], dots_as_underscores)
    used: set[int] = set()
    for i, answer in enumerate(answers):
        expected = next(iter(answer))
        function = next((f for f in record.functions if f.name == expected), None)
        if function is None:
            raise ValueError(f"record {record.id!r}: expected function {expected!r} is not among its functions")
        match = next((j for j, c in enumerate(calls)
                      if j not in used and check_call(function, c, answer, dots_as_underscores).correct), None)
        if match is None:
            return Score(False, f"no predicted call matches expected call {i} ({expected})", "no_match")
        used.add(match)
    return Score(True)


def _pick(allowed: Sequence[Any]) -> Any:
    # the first allowed value; "" when only "left out" is allowed; None when nothing is (a few live records)
    return next((a for a in allowed if a != ""), "" if "" in allowed else None)


def _pick_dict(option: Mapping[str, Sequence[Any]]) -> dict[str, Any]:
    return {k: _pick(v) for k, v in option.items() if "" not in v}


def _first(allowed: Sequence[Any]) -> Any:
    value = _pick(allowed)
    if isinstance(value, Mapping):  # an allowed dict lists allowed values per key
        return _pick_dict(value)
    if isinstance(value, list) and value and all(isinstance(v, Mapping) for v in value):
        return [_pick_dict(v) for v in value]
    return value


def reference_calls(record: BFCLRecord) -> list[dict[str, dict[str, Any]]]:
    """A correct answer built from the ground truth: each expected call with the first allowed value of each
    parameter the answer or the function requires (optional ones left out). Empty for the irrelevance and relevance categories."""
    calls = []
    for answer in record.ground_truth:
        name, params = next(iter(answer.items()))
        required = next((f.required for f in record.functions if f.name == name), [])
        calls.append({name: {p: _first(allowed) for p, allowed in params.items()
                             if "" not in allowed or p in required}})
    return calls


def accuracy(records: Sequence[BFCLRecord], predictions: Mapping[str, Sequence[Call] | str],
             dots_as_underscores: bool = False) -> dict[str, float]:
    """Fraction correct per category (a record without a prediction counts as no call)."""
    by_cat: dict[str, list[bool]] = {}
    for r in records:
        by_cat.setdefault(r.category, []).append(score(r, predictions.get(r.id, []), dots_as_underscores).correct)
    return {c: sum(v) / len(v) for c, v in by_cat.items()}
