"""Plant one bug in a real source file, as a minimal line-level edit, using the shared mutation operators.

:mod:`divelab.codetasks.mutation` (the operators E170 also uses) mutates a *function* and returns the function
re-printed by ``ast.unparse`` (comments and layout lost). A planted bug in a real repository must
leave the rest of the file as it was, so here the function is cut out (dedented), mutated by that
code, and the two ASTs are compared to find the one node that changed; only that node's source
span is rewritten in the file (or, for a dropped statement, only its lines removed). The result is
re-parsed and must equal that mutant, else the mutant is discarded. The gold patch is the
inverse edit.
"""

from __future__ import annotations

import ast
import difflib
import textwrap
import warnings
from dataclasses import dataclass

from divelab.codetasks.mutation import apply_mutation, mutation_sites


@dataclass(frozen=True)
class FunctionInfo:
    qualname: str
    start: int  # first line (the ``def`` line; decorators excluded), 1-based
    end: int


@dataclass(frozen=True)
class Mutant:
    """One planted bug: where it is (in the mutated file) and the text before and after."""

    file: str
    qualname: str
    operator: str
    span: tuple[int, int]  # the changed lines in the mutated file (1-based, inclusive)
    original: str  # the whole file before
    mutated: str  # the whole file after

    def gold_patch(self) -> str:
        """The fix as a unified diff (mutated -> original): the inverse edit."""
        return "".join(difflib.unified_diff(self.mutated.splitlines(True), self.original.splitlines(True),
                                            f"a/{self.file}", f"b/{self.file}", n=2))


def functions(source: str) -> list[FunctionInfo]:
    """Top-level functions and methods of top-level classes (sync ``def`` only)."""
    tree = ast.parse(source)
    out = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            out.append(FunctionInfo(node.name, node.lineno, node.end_lineno or node.lineno))
        elif isinstance(node, ast.ClassDef):
            for sub in node.body:
                if isinstance(sub, ast.FunctionDef):
                    out.append(FunctionInfo(f"{node.name}.{sub.name}", sub.lineno, sub.end_lineno or sub.lineno))
    return out


def function_at(source: str, line: int) -> FunctionInfo | None:
    """The innermost listed function containing ``line``."""
    return line_owner(source).get(line)


def line_owner(source: str) -> dict[int, FunctionInfo]:
    """line -> the innermost listed function containing it (one parse per distinct source, cached)."""
    key = hash(source)
    if key not in _OWNER:
        owner: dict[int, FunctionInfo] = {}
        for f in sorted(functions(source), key=lambda f: f.start):
            for ln in range(f.start, f.end + 1):
                owner[ln] = f
        if len(_OWNER) > 256:
            _OWNER.clear()
        _OWNER[key] = owner
    return _OWNER[key]


_OWNER: dict[int, dict[int, FunctionInfo]] = {}


def _eq(a: object, b: object) -> bool:
    """``ast.dump(a) == ast.dump(b)`` for AST values (lists of nodes too), walked field by field
    with an early exit instead of dumping whole subtrees (leaves compare by ``repr``, as dump does)."""
    if isinstance(a, ast.AST) or isinstance(b, ast.AST):
        if type(a) is not type(b):
            return False
        return all(_eq(getattr(a, f, None), getattr(b, f, None)) for f in a._fields)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_eq(x, y) for x, y in zip(a, b, strict=True))
    return a is b or repr(a) == repr(b)


def _diff(a: ast.AST, b: ast.AST) -> tuple[str, ast.AST, ast.AST | None] | None:
    """The smallest positioned node that differs: ('replace', a, b) or ('drop', stmt, None)."""
    if type(a) is not type(b):
        return ("replace", a, b)
    diffs = [(f, getattr(a, f, None), getattr(b, f, None)) for f in a._fields
             if not _eq(getattr(a, f, None), getattr(b, f, None))]
    if not diffs:
        return None
    if len(diffs) > 1:
        return ("replace", a, b)
    _, va, vb = diffs[0]
    if isinstance(va, list) and isinstance(vb, list):
        if len(va) == len(vb):
            idx = [i for i in range(len(va)) if not _eq(va[i], vb[i])]
            if len(idx) == 1 and isinstance(va[idx[0]], ast.AST) and hasattr(va[idx[0]], "lineno"):
                return _diff(va[idx[0]], vb[idx[0]])
            return ("replace", a, b)
        if len(va) == len(vb) + 1 and all(isinstance(s, ast.stmt) for s in va):
            for i in range(len(va)):
                if _eq(va[:i] + va[i + 1:], vb):
                    return ("drop", va[i], None)
        return ("replace", a, b)
    if isinstance(va, ast.AST) and isinstance(vb, ast.AST) and hasattr(va, "lineno"):
        return _diff(va, vb)
    return ("replace", a, b)


def _cut(source: str, fn: FunctionInfo) -> tuple[str, int]:
    lines = source.splitlines(True)[fn.start - 1:fn.end]
    first = lines[0]
    indent = len(first) - len(first.lstrip(" \t"))
    text = "".join(lines)
    return textwrap.dedent(text), indent


def _splice(source: str, fn: FunctionInfo, fn_src: str, indent: int, mutant_fn_src: str
            ) -> tuple[str, tuple[int, int]] | None:
    a_fn = ast.parse(fn_src).body[0]
    b_fn = ast.parse(mutant_fn_src).body[0]
    d = _diff(a_fn, b_fn)
    if d is None or not hasattr(d[1], "lineno"):
        return None
    kind, a, b = d
    lines = source.splitlines(True)
    off = fn.start - 1
    l0, l1 = a.lineno + off, (a.end_lineno or a.lineno) + off  # 1-based lines in the file
    c0 = a.col_offset + indent
    c1 = (a.end_col_offset or 0) + (indent if a.end_lineno else 0)
    first = lines[l0 - 1].encode()
    last = lines[l1 - 1].encode()
    if kind == "drop":
        if first[:c0].strip() or last[c1:].strip() not in (b"", b";") and not last[c1:].strip().startswith(b"#"):
            return None
        new_lines = lines[:l0 - 1] + lines[l1:]
        span = (max(fn.start, l0 - 1), min(l0, len(new_lines)))
    else:
        text = ast.unparse(b)
        if "\n" in text:
            return None
        if isinstance(a, ast.expr) and not isinstance(a, ast.Name | ast.Constant | ast.Attribute):
            text = f"({text})"
        new = (first[:c0] + text.encode() + last[c1:]).decode()
        new_lines = lines[:l0 - 1] + [new] + lines[l1:]
        span = (l0, l0)
    mutated = "".join(new_lines)
    try:
        tree = ast.parse(mutated)
    except SyntaxError:
        return None
    got = next((f for f in functions(mutated) if f.qualname == fn.qualname and f.start == fn.start), None)
    if got is None:
        return None
    got_src, _ = _cut(mutated, got)
    del tree
    try:
        if ast.dump(ast.parse(got_src).body[0]) != ast.dump(b_fn):
            return None
    except SyntaxError:
        return None
    return mutated, span


def mutants_of(source: str, file: str, fn: FunctionInfo, *, lines: set[int] | None = None) -> list[Mutant]:
    """Every single-operator mutant of ``fn`` that can be planted as a minimal edit.

    ``lines``: keep only mutants whose changed line is in this set (e.g. lines the tests execute).
    """
    out, seen = [], set()
    for res, name in _spliced(source, fn):
        if res[0] in seen:
            continue
        mutated, span = res
        if lines is not None and name != "drop-statement" and span[0] not in lines:
            continue
        seen.add(mutated)
        out.append(Mutant(file, fn.qualname, name, span, source, mutated))
    return out


_SPLICED: dict[tuple[str, str, int, int], list[tuple[tuple[str, tuple[int, int]], str]]] = {}


def _spliced(source: str, fn: FunctionInfo) -> list[tuple[tuple[str, tuple[int, int]], str]]:
    """((mutated file, span), operator) of every mutation site of ``fn`` that splices, in site
    order, memoised by (source, function): the repair agent asks for the same function's mutants
    under every condition, and splicing (parse, diff, re-parse) is the costly part."""
    key = (source, fn.qualname, fn.start, fn.end)
    if key in _SPLICED:
        return _SPLICED[key]
    fn_src, indent = _cut(source, fn)
    try:
        sites = mutation_sites(fn_src, fn.qualname.split(".")[-1])
    except (SyntaxError, ValueError):
        sites = []
    out = []
    for idx, m, name in sites:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SyntaxWarning)  # e.g. a constant made subscripted by a mutant
            mut_fn = apply_mutation(fn_src, fn.qualname.split(".")[-1], (idx, m))
        if mut_fn is None:
            continue
        res = _splice(source, fn, fn_src, indent, mut_fn)
        if res is not None:
            out.append((res, name))
    if len(_SPLICED) >= 32:  # each entry holds whole mutated files; repair reuses the recent ones
        _SPLICED.clear()
    _SPLICED[key] = out
    return out
