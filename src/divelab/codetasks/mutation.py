"""Mutation operators on Python ASTs: the defects that stand in for an LLM's wrong programs.

Each operator is a classic mutation-testing operator (as in mutmut / cosmic-ray): off-by-one
constants, comparison flips and boundary shifts, arithmetic and boolean operator swaps, negated
or dropped branches, swapped call arguments, ``range`` bounds moved by one, a wrong returned
variable, a dropped statement. Mutations apply only inside the task's entry-point function.
"""

from __future__ import annotations

import ast
import copy
import random
from collections.abc import Callable

_CMP_SWAP: dict[type, list[type]] = {
    ast.Lt: [ast.LtE, ast.Gt], ast.LtE: [ast.Lt, ast.GtE], ast.Gt: [ast.GtE, ast.Lt],
    ast.GtE: [ast.Gt, ast.LtE], ast.Eq: [ast.NotEq], ast.NotEq: [ast.Eq],
    ast.In: [ast.NotIn], ast.NotIn: [ast.In], ast.Is: [ast.IsNot], ast.IsNot: [ast.Is],
}
_BIN_SWAP: dict[type, list[type]] = {
    ast.Add: [ast.Sub], ast.Sub: [ast.Add], ast.Mult: [ast.Add, ast.FloorDiv], ast.FloorDiv: [ast.Div, ast.Mod],
    ast.Div: [ast.FloorDiv], ast.Mod: [ast.FloorDiv], ast.Pow: [ast.Mult],
}

Mutation = tuple[str, Callable[[ast.AST], ast.AST | None]]  # (operator name, node -> new node / None=drop)


def _mutations_of(node: ast.AST, local_names: list[str]) -> list[Mutation]:
    out: list[Mutation] = []
    if isinstance(node, ast.Constant) and isinstance(node.value, bool):
        out.append(("bool-flip", lambda n: ast.Constant(not n.value)))
    elif isinstance(node, ast.Constant) and isinstance(node.value, int):
        out.append(("off-by-one-up", lambda n: ast.Constant(n.value + 1)))
        out.append(("off-by-one-down", lambda n: ast.Constant(n.value - 1)))
    elif isinstance(node, ast.Constant) and isinstance(node.value, str) and len(node.value) <= 3:
        # short string literals are separators and markers (' ', ',', '0'); long ones are messages
        out.append(("string-change", lambda n: ast.Constant("" if n.value else " ")))
    elif isinstance(node, ast.Compare):
        for j, op in enumerate(node.ops):
            for new in _CMP_SWAP.get(type(op), []):
                def f(n, j=j, new=new):
                    n = copy.copy(n)
                    n.ops = [*n.ops[:j], new(), *n.ops[j + 1:]]
                    return n
                out.append(("comparison-flip", f))
    elif isinstance(node, ast.BinOp | ast.AugAssign):
        for new in _BIN_SWAP.get(type(node.op), []):
            def g(n, new=new):
                n = copy.copy(n)
                n.op = new()
                return n
            out.append(("arithmetic-swap", g))
    elif isinstance(node, ast.BoolOp):
        out.append(("bool-op-swap", lambda n: ast.BoolOp(ast.Or() if isinstance(n.op, ast.And) else ast.And(), n.values)))
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not | ast.USub):
        out.append(("drop-unary", lambda n: n.operand))
    elif isinstance(node, ast.If | ast.While):
        out.append(("negate-condition", lambda n: type(n)(ast.UnaryOp(ast.Not(), n.test), n.body, n.orelse)))
        if isinstance(node, ast.If) and node.orelse:
            out.append(("drop-else-branch", lambda n: ast.If(n.test, n.body, [])))
    elif isinstance(node, ast.Call):
        if len(node.args) >= 2 and not any(isinstance(a, ast.Starred) for a in node.args[:2]):
            out.append(("swap-args", lambda n: ast.Call(n.func, [n.args[1], n.args[0], *n.args[2:]], n.keywords)))
        if len(node.args) == 1 and not node.keywords and not isinstance(node.args[0], ast.Starred):
            out.append(("drop-call", lambda n: n.args[0]))
        if isinstance(node.func, ast.Name) and node.func.id == "range" and node.args:
            for delta, name in ((1, "range-bound-up"), (-1, "range-bound-down")):
                def h(n, delta=delta):
                    last = ast.BinOp(n.args[-1], ast.Add() if delta > 0 else ast.Sub(), ast.Constant(1))
                    return ast.Call(n.func, [*n.args[:-1], last], n.keywords)
                out.append((name, h))
    elif isinstance(node, ast.Return) and isinstance(node.value, ast.Name):
        for other in local_names:
            if other != node.value.id:
                out.append(("wrong-return", lambda n, other=other: ast.Return(ast.Name(other, ast.Load()))))
                break
    return out


class _Sites(ast.NodeTransformer):
    """Pre-order walk numbering mutation sites; with ``target`` set it applies one mutation."""

    def __init__(self, local_names: list[str], target: tuple[int, int] | None = None):
        self.local_names = local_names
        self.target = target
        self.sites: list[tuple[int, int, str]] = []  # (node index, mutation index, operator)
        self.count = 0

    def visit(self, node: ast.AST):  # noqa: D102
        idx = self.count
        self.count += 1
        muts = _mutations_of(node, self.local_names)
        for m, (name, _) in enumerate(muts):
            self.sites.append((idx, m, name))
        if self.target is not None and self.target[0] == idx:
            new = muts[self.target[1]][1](node)
            return ast.copy_location(new, node) if new is not None else None
        return self.generic_visit(node)

    def generic_visit(self, node: ast.AST) -> ast.AST:
        # Statement lists: also allow dropping a non-final simple statement ("dropped statement").
        for fieldname in ("body", "orelse"):
            body = getattr(node, fieldname, None)
            if isinstance(body, list) and len(body) > 1:
                kept = []
                for stmt in body:
                    idx = self.count
                    self.count += 1
                    droppable = isinstance(stmt, ast.Assign | ast.AugAssign | ast.Expr) and not (
                        isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant))
                    if droppable:
                        self.sites.append((idx, 0, "drop-statement"))
                    if droppable and self.target is not None and self.target[0] == idx:
                        continue
                    kept.append(stmt)
                setattr(node, fieldname, kept)
        return super().generic_visit(node)


def _entry(tree: ast.Module, entry_point: str) -> ast.FunctionDef:
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == entry_point:
            return node
    raise ValueError(f"no function {entry_point!r} in the module")


def _local_names(fn: ast.FunctionDef) -> list[str]:
    names = [a.arg for a in fn.args.args]
    for n in ast.walk(fn):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store) and n.id not in names:
            names.append(n.id)
    return names


def mutation_sites(source: str, entry_point: str) -> list[tuple[int, int, str]]:
    tree = ast.parse(source)
    fn = _entry(tree, entry_point)
    body = fn.body[1:] if fn.body and isinstance(fn.body[0], ast.Expr) and isinstance(
        fn.body[0].value, ast.Constant) else fn.body  # never mutate the docstring
    v = _Sites(_local_names(fn))
    holder = ast.Module(body=copy.deepcopy(body), type_ignores=[])
    v.visit(holder)
    return v.sites


def apply_mutation(source: str, entry_point: str, site: tuple[int, int]) -> str | None:
    """The module source with one mutation applied, or None if it does not compile."""
    tree = ast.parse(source)
    fn = _entry(tree, entry_point)
    has_doc = bool(fn.body) and isinstance(fn.body[0], ast.Expr) and isinstance(fn.body[0].value, ast.Constant)
    body = fn.body[1:] if has_doc else fn.body
    holder = ast.Module(body=body, type_ignores=[])
    _Sites(_local_names(fn), target=site).visit(holder)
    if not holder.body:
        return None
    fn.body = ([fn.body[0]] if has_doc else []) + holder.body
    ast.fix_missing_locations(tree)
    try:
        out = ast.unparse(tree)
        compile(out, "<mutant>", "exec")
    except (SyntaxError, ValueError, TypeError, RecursionError):
        return None
    return out


def make_mutants(source: str, entry_point: str, n_single: int, n_double: int, seed: int) -> list[tuple[str, str]]:
    """Distinct mutants of ``source``: ``(operator names, code)``, single and double mutations."""
    rng = random.Random(seed)
    seen = {source}
    singles: list[tuple[str, str]] = []
    sites = mutation_sites(source, entry_point)
    order = list(range(len(sites)))
    rng.shuffle(order)
    for i in order:
        idx, m, name = sites[i]
        code = apply_mutation(source, entry_point, (idx, m))
        if code is not None and code not in seen:
            seen.add(code)
            singles.append((name, code))
    chosen = singles[:n_single]
    doubles: list[tuple[str, str]] = []
    tries = 0
    while len(doubles) < n_double and singles and tries < 20 * max(1, n_double):
        tries += 1
        name1, first = rng.choice(singles)
        sites2 = mutation_sites(first, entry_point)
        if not sites2:
            continue
        idx, m, name2 = rng.choice(sites2)
        code = apply_mutation(first, entry_point, (idx, m))
        if code is not None and code not in seen:
            seen.add(code)
            doubles.append((f"{name1}+{name2}", code))
    return chosen + doubles
