"""A real diagnostician: SBFL shortlists the functions, the repository tools gather evidence, SmolLM2 picks one.

The case-file method hands a reasoning LLM what an engineer would look at: the failing test's
output, the suspicious code, what the test calls. Here that is done in three steps, each real:

1. **Shortlist.** Ochiai SBFL (:func:`~divelab.coding.sherloc.baselines.ochiai_functions`) ranks the
   functions; the first ``k`` are the candidates. How often the buggy function is among them is the
   *shortlist ceiling* (no pick can beat it).
2. **Evidence.** :class:`~divelab.coding.sherloc.tools.RepoTools` reads, for each candidate, its most
   suspicious lines, whether it is a frame of the failing test's traceback, whether the failing test
   calls it (the test is found with ``search_code`` and read with ``view_file``), and whether the bug
   report names it.
3. **Pick.** SmolLM2-135M-Instruct reads the report and the candidates (listed under letters, in an
   order shuffled per task by the seed, so a position habit is not Ochiai's order) and the candidate
   whose letter it gives the highest log-probability as the answer is chosen: one forward pass, no
   free generation, so the answer's format cannot fail.

The model is used untuned and after LoRA SFT (:func:`divelab.lm.adapt`) on *training* bugs: bugs
planted with another seed into the same packages, with every function that holds a test bug left
out (:func:`training_tasks`), so no training row shows a test bug or its function. The chosen
function's file is the file prediction and, inside it, Ochiai's most suspicious line the line
prediction; the other candidates follow in Ochiai's order.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from typing import Any

from divelab.cache import stable_hash
from divelab.coding.sherloc.baselines import ochiai_functions
from divelab.coding.sherloc.benchmark import Repo, Task
from divelab.coding.sherloc.finding import Location
from divelab.coding.sherloc.mutate import functions
from divelab.coding.sherloc.policy import _BUILTIN, _CALL, _FRAME, _HIT, _TEST_ID, _WORD, _is_test
from divelab.coding.sherloc.tools import RepoTools, ToolError

LETTERS = "ABCDEFGHIJ"
SYSTEM = ("You are a debugging assistant. A test of a Python package fails. Spectrum-based fault localization "
          "ranked the candidate functions below. Read the bug report and the evidence, then answer with the letter "
          "of the function that contains the bug.")


@dataclass(frozen=True)
class Candidate:
    """One shortlisted function and the evidence the tools found about it."""

    file: str
    function: str
    line: int
    """Ochiai's most suspicious line in the function (the line prediction when it is chosen)"""
    score: float
    """its Ochiai suspiciousness"""
    on_traceback: bool
    called_by_test: bool
    named_in_report: bool
    snippet: str
    """the def line and the most suspicious lines, numbered"""


def _test_calls(tools: RepoTools, issue: str) -> set[str]:
    """Names the failing test's body calls (found with search_code, read with view_file)."""
    test_fn = ((_TEST_ID.findall(issue) or [""])[0]).rsplit(".", 1)[-1]
    if not test_fn:
        return set()
    try:
        hits = [h for h in _HIT.findall(tools.search_code(rf"def {re.escape(test_fn)}\b")) if _is_test(h[0])]
        body = tools.view_file(hits[0][0], int(hits[0][1]), int(hits[0][1]) + 30) if hits else ""
    except ToolError:
        return set()
    return {n for n in _CALL.findall(body) if n not in _BUILTIN and not n.startswith("test")}


def shortlist(task: Task, repo: Repo, k: int = 5, snippet_lines: int = 1) -> list[Candidate]:
    """Ochiai's first ``k`` functions for ``task``, with the repository tools' evidence about each."""
    files = repo.with_task(task)
    tools = RepoTools(repo.root, {task.file: task.mutated})
    ranked = ochiai_functions(files, task.spectrum, len(task.failing_tests))
    frames = set()
    for f, n, name in _FRAME.findall(task.issue):
        rel = tools.relpath(f)
        if rel and not _is_test(rel):
            frames.add((rel, int(n), name))
    calls = _test_calls(tools, task.issue)
    words = set(_WORD.findall(task.issue))
    out = []
    for (f, q), lines in list(ranked.items())[:k]:
        fn = next((x for x in functions(files[f]) if x.qualname == q), None)
        short = q.rsplit(".", 1)[-1]
        top = [ln for ln, s in lines if round(s, 9) == round(lines[0][1], 9)]
        show = sorted(([fn.start] if fn else []) + top[:snippet_lines])
        text = tools.read(f).splitlines()
        snippet = "\n".join(f"    {ln}: {text[ln - 1].strip()[:80]}" for ln in dict.fromkeys(show)
                            if 0 < ln <= len(text))
        on_tb = any(ff == f and (name == short or (fn is not None and fn.start <= ln <= fn.end))
                    for ff, ln, name in frames)
        out.append(Candidate(f, q, top[0], float(lines[0][1]), on_tb, short in calls, short in words, snippet))
    return out


def order(task_id: str, n: int, seed: int) -> list[int]:
    """The seeded order in which a task's candidates are listed (index into the shortlist)."""
    idx = list(range(n))
    random.Random(int(stable_hash([seed, task_id], 8), 16)).shuffle(idx)
    return idx


def _yn(b: bool) -> str:
    return "yes" if b else "no"


def report(issue: str, error_lines: int = 4, max_chars: int = 700) -> str:
    """The bug report, shortened: everything up to the traceback's last frame, then the first ``error_lines``
    lines of the error it raised (a long assertion diff is cut), at most ``max_chars`` characters."""
    lines = issue.rstrip().splitlines()
    last = max((i for i, ln in enumerate(lines) if ln.lstrip().startswith('File "')), default=None)
    if last is not None:
        lines = lines[:last + 2 + error_lines]
    text = "\n".join(lines)
    return text if len(text) <= max_chars else text[:max_chars] + "\n[...]"


def messages(issue: str, cands: list[Candidate], listed: list[int]) -> list[dict[str, str]]:
    """The chat the model answers: the shortened report and the candidates under letters."""
    lines = []
    for letter, i in zip(LETTERS, listed, strict=False):
        c = cands[i]
        lines.append(f"{letter}. {c.function} in {c.file} (SBFL {c.score:.2f}; in traceback: {_yn(c.on_traceback)}; "
                     f"test calls it: {_yn(c.called_by_test)}; in report: {_yn(c.named_in_report)})\n{c.snippet}")
    user = (f"Bug report:\n{report(issue)}\n\nCandidates:\n" + "\n".join(lines)
            + f"\n\nWhich function contains the bug? Answer with one letter ({', '.join(LETTERS[:len(listed)])}).")
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]


def prompt_text(tok: Any, issue: str, cands: list[Candidate], listed: list[int]) -> str:
    return tok.apply_chat_template(messages(issue, cands, listed), add_generation_prompt=True, tokenize=False)


def letter_ids(tok: Any, n: int) -> list[int]:
    """The token id of each answer letter (each must be one token)."""
    out = []
    for letter in LETTERS[:n]:
        ids = tok.encode(letter, add_special_tokens=False)
        if len(ids) != 1:
            raise ValueError(f"answer letter {letter!r} is {len(ids)} tokens for this tokenizer; need 1")
        out.append(ids[0])
    return out


def letter_logprobs(model: Any, tok: Any, prompt: str, n: int) -> list[float]:
    """log p(letter | prompt) for the first ``n`` letters, from one forward pass."""
    import torch

    ids = tok.encode(prompt, add_special_tokens=False)
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([ids])).logits[0, -1].float()
    lp = torch.log_softmax(logits, dim=-1)
    return [float(lp[i]) for i in letter_ids(tok, n)]


def pick(model: Any, tok: Any, task: Task, cands: list[Candidate], seed: int) -> tuple[int, list[float]]:
    """(index of the chosen candidate in the shortlist, the letters' log-probs in listed order)."""
    if not cands:
        raise ValueError(f"task {task.id}: empty shortlist")
    listed = order(task.id, len(cands), seed)
    lps = letter_logprobs(model, tok, prompt_text(tok, task.issue, cands, listed), len(cands))
    best = max(range(len(lps)), key=lambda j: (lps[j], -j))
    return listed[best], lps


def locations(cands: list[Candidate], chosen: int) -> list[Location]:
    """The chosen candidate first, then the others in Ochiai's order; each at its most suspicious line."""
    ranked = [chosen] + [i for i in range(len(cands)) if i != chosen]
    return [Location(cands[i].file, cands[i].function, (cands[i].line, cands[i].line), 1.0 - r / len(cands))
            for r, i in enumerate(ranked)]


def gold_index(task: Task, cands: list[Candidate]) -> int | None:
    """Where the buggy function sits in the shortlist (None when it is not there)."""
    return next((i for i, c in enumerate(cands) if c.file == task.file and c.function == task.function), None)


# ------------------------------------------------------------------------------------------- training rows
def training_tasks(train: list[Task], test: list[Task]) -> list[Task]:
    """The training bugs with every bug in a function that holds a test bug left out (and any test bug itself)."""
    held = {(t.repo, t.file, t.function) for t in test}
    ids = {t.id for t in test}
    return [t for t in train if t.id not in ids and (t.repo, t.file, t.function) not in held]


def training_rows(tok: Any, train: list[Task], repos: dict[str, Repo], k: int, n_orders: int, seed: int
                  ) -> tuple[list[dict[str, str]], list[str]]:
    """SFT rows (prompt -> the buggy function's letter) from training bugs whose shortlist holds the buggy
    function, each listed in ``n_orders`` shuffled orders; and the task id behind each row."""
    rows, src = [], []
    for t in train:
        cands = shortlist(t, repos[t.repo], k)
        g = gold_index(t, cands)
        if g is None:
            continue
        for r in range(n_orders):
            listed = order(t.id, len(cands), seed * 1000 + r)
            rows.append({"prompt": prompt_text(tok, t.issue, cands, listed), "completion": LETTERS[listed.index(g)]})
            src.append(t.id)
    return rows, src
