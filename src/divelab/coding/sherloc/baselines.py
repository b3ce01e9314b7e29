"""The localizers a user would otherwise run, all real: BM25 (Agentless-style), Ochiai SBFL, LM surprisal.

- :func:`bm25_localize`: BM25 (``rank_bm25``) of the issue text over files, then over the
  functions of the top files, then over 3-line windows of the top functions (file -> function ->
  line, as Agentless narrows down).
- :func:`ochiai_localize`: spectrum-based fault localization from per-test coverage of the failing
  and passing tests: ``ef / sqrt(F * (ef + ep))`` per line.
- :func:`surprisal_localize`: rank lines by their mean token surprisal under a causal LM given the
  preceding lines (``divelab.lm.token_logprobs``), so a line the LM finds unexpected ranks high.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable

from divelab.coding.sherloc.finding import Location
from divelab.coding.sherloc.mutate import function_at, functions

_TOK = re.compile(r"[A-Za-z]+|\d+")


def tokenize(text: str) -> list[str]:
    """Identifiers split at underscores and camelCase, lower-cased."""
    out = []
    for w in _TOK.findall(text):
        out += [p.lower() for p in re.findall(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+", w) or [w]]
    return out


def _is_test(path: str) -> bool:
    return path.startswith("test") or "/test" in path


def bm25_localize(files: dict[str, str], issue: str, *, top_files: int = 3, k: int = 10) -> list[Location]:
    from rank_bm25 import BM25Okapi

    src = {f: t for f, t in files.items() if f.endswith(".py") and not _is_test(f)}
    names = sorted(src)
    q = tokenize(issue)
    fscore = BM25Okapi([tokenize(src[f]) for f in names]).get_scores(q)
    ranked_files = [names[i] for i in sorted(range(len(names)), key=lambda i: -fscore[i])]
    funcs = [(f, fn) for f in ranked_files[:top_files] for fn in functions(src[f])]
    if not funcs:
        return [Location(f) for f in ranked_files[:k]]
    docs = [tokenize("\n".join(src[f].splitlines()[fn.start - 1:fn.end])) for f, fn in funcs]
    gscore = BM25Okapi(docs).get_scores(q)
    order = sorted(range(len(funcs)), key=lambda i: -gscore[i])[:k]
    out = []
    for i in order:
        f, fn = funcs[i]
        lines = src[f].splitlines()
        windows = [(s, tokenize("\n".join(lines[s - 1:s + 2]))) for s in range(fn.start + 1, max(fn.start + 2, fn.end - 1))]
        if windows:
            ws = BM25Okapi([w for _, w in windows]).get_scores(q)
            s0 = windows[max(range(len(windows)), key=lambda j: ws[j])][0]
        else:
            s0 = fn.start
        out.append(Location(f, fn.qualname, (s0, min(s0 + 2, fn.end)), float(gscore[i])))
    return out


def ochiai_localize(files: dict[str, str], spectrum: dict[str, dict[int, tuple[int, int]]],
                    n_failing: int | None = None, k: int = 10) -> list[Location]:
    """Ochiai over lines; ``spectrum[file][line] = (failing tests, passing tests) executing it``.

    An empty spectrum gives an empty ranking; whether the coverage run behind it failed is
    ``TestRun.coverage_error`` (the benchmark builder refuses such runs)."""
    total_f = n_failing or max((ef for by in spectrum.values() for ef, _ in by.values()), default=0)
    scored = []
    for f, by in spectrum.items():
        for line, (ef, ep) in by.items():
            if ef and total_f:
                scored.append((ef / math.sqrt(total_f * (ef + ep)), f, line))
    scored.sort(key=lambda t: (-t[0], t[1], t[2]))
    out = []
    for s, f, line in scored[:max(k * 5, 50)]:
        fn = function_at(files[f], line) if f in files else None
        out.append(Location(f, fn.qualname if fn else None, (line, line), s))
    return out


def ochiai_functions(files: dict[str, str], spectrum: dict[str, dict[int, tuple[int, int]]],
                     n_failing: int | None = None) -> dict[tuple[str, str], list[tuple[int, float]]]:
    """Functions in Ochiai's order (of their most suspicious line): ``(file, qualified name)`` -> that function's
    lines with their scores, most suspicious first. Module-level lines belong to no function and are left out."""
    out: dict[tuple[str, str], list[tuple[int, float]]] = {}
    for loc in ochiai_localize(files, spectrum, n_failing, k=_RANK_ALL):
        if loc.symbol is not None and loc.span is not None:
            out.setdefault((loc.file, loc.symbol), []).append((loc.span[0], loc.score))
    return out


_RANK_ALL = 100_000  # ochiai_localize keeps max(5k, 50) lines: ask for every line


def surprisal_lines(text: str, score_fn: Callable[[list[str]], list[float]]) -> list[float]:
    """Per-line surprisal of a file (``score_fn`` maps the file's lines to one number per line)."""
    return score_fn(text.splitlines())


def lm_line_scorer(model, tokenizer, *, window: int = 128) -> Callable[[list[str]], list[float]]:
    """Mean token surprisal (nats) of each line under a causal LM, in half-overlapping windows.

    Each token is scored with at least ``window // 2`` tokens of left context (except at the file's
    start); a line's score is the mean surprisal of its tokens.
    """
    import torch

    from divelab.lm import token_logprobs

    def score(lines: list[str]) -> list[float]:
        ids: list[int] = []
        owner: list[int] = []
        for n, line in enumerate(lines):
            t = tokenizer.encode(line + "\n")
            ids += t
            owner += [n] * len(t)
        sums = [0.0] * len(lines)
        counts = [0] * len(lines)
        half = window // 2
        chunks = []
        for start in range(0, max(1, len(ids) - 1), half):
            lo = max(0, start - half)
            chunk = ids[lo:start + half + 1]
            if len(chunk) >= 2:
                chunks.append((lo, start, chunk))
        with torch.no_grad():
            for b in range(0, len(chunks), 64):
                batch = chunks[b:b + 64]
                width = max(len(c) for _, _, c in batch)
                x = torch.zeros((len(batch), width), dtype=torch.long)
                mask = torch.zeros_like(x)
                for r, (_, _, c) in enumerate(batch):
                    x[r, :len(c)] = torch.tensor(c)
                    mask[r, :len(c)] = 1
                lp_all = token_logprobs(model, x, mask)
                for r, (lo, start, c) in enumerate(batch):
                    for pos in range(max(start, 1), min(start + half + 1, lo + len(c))):
                        k = pos - lo - 1
                        sums[owner[pos]] -= float(lp_all[r, k])
                        counts[owner[pos]] += 1
        return [(s_ / c) if c and lines[i].strip() else 0.0 for i, (s_, c) in enumerate(zip(sums, counts, strict=True))]

    return score


def surprisal_localize(files: dict[str, str], line_scores: dict[str, list[float]], k: int = 10) -> list[Location]:
    scored = [(s, f, i + 1) for f, ss in line_scores.items() for i, s in enumerate(ss)
              if function_at(files[f], i + 1) is not None]
    scored.sort(key=lambda t: (-t[0], t[1], t[2]))
    out = []
    for s, f, line in scored[:max(k * 5, 50)]:
        fn = function_at(files[f], line)
        out.append(Location(f, fn.qualname if fn else None, (line, line), s))
    return out
