"""SHERLOC's real diagnostician (SBFL shortlist + repository evidence + an LM's pick): training rows are disjoint
from the test bugs, the scorer picks a shortlisted candidate, and the claims refuse to speak at a 0 ceiling."""

from __future__ import annotations

from dataclasses import replace

import pytest
from sherloc_repo import CLAMP, TOTAL, module, open_calc

from divelab.claims import Verdict
from divelab.coding.sherloc.benchmark import Task
from divelab.coding.sherloc.lm_diagnostician import (
    LETTERS,
    gold_index,
    locations,
    pick,
    shortlist,
    training_rows,
    training_tasks,
)
from divelab.coding.sherloc.mutate import functions
from divelab.coding.sherloc.real_diagnostician import DIAGNOSTICIAN_SFT, DiagConfig, claims_from
from divelab.coding.sherloc.scoring import GRANS
from divelab.lm.adapt import LoraSpec, top_layer_modules

# a diagnostician sized for a test: a 3-function shortlist, one short SFT run on the top layer
SMALL = DiagConfig(k=3, n_train_per_repo=3, n_orders=1, adapt_seeds=(0,),
                   adapt=replace(DIAGNOSTICIAN_SFT, steps=1, batch_size=2,
                                 lora=LoraSpec(r=16, alpha=32, target_modules=top_layer_modules(1))))

OPS = module(CLAMP, TOTAL, "def mean(xs):\n    return total(xs) / len(xs)\n")
TEST = '''\
import unittest
from calc.ops import clamp, mean


class T(unittest.TestCase):
    def test_clamp_low(self):
        self.assertEqual(clamp(-5, 0, 9), 0)

    def test_mean(self):
        self.assertEqual(mean([1, 3]), 2)
'''
# per line: (failing tests, passing tests) executing it
SPECTRUM = {"calc/ops.py": {2: (1, 1), 3: (1, 2), 4: (1, 1), 10: (1, 1), 11: (1, 1), 12: (1, 1), 13: (1, 1),
                            17: (1, 0)}}


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    return open_calc(tmp_path_factory.mktemp("calcrepo"), {"ops.py": OPS}, TEST, tmp_path_factory.mktemp("mat"))


def _task(tid: str, function: str, span: tuple[int, int], issue: str = "") -> Task:
    issue = issue or (f"T.test_mean fails in calc\n\n`tests.test_ops.T.test_mean` fails:\n\n"
                      f'  File "calc/ops.py", line 17, in mean\nZeroDivisionError ({tid})\n')
    return Task(tid, "calc", "calc/ops.py", function, span, "flip", issue, ["tests.test_ops.T.test_mean"], 3, OPS,
                "", SPECTRUM, OPS)


class FakeTok:
    """A character-level tokenizer with a chat template: enough for the prompt and the letter scoring."""

    def apply_chat_template(self, msgs, add_generation_prompt=True, tokenize=False):
        return "".join(f"<{m['role']}>{m['content']}\n" for m in msgs) + "<assistant>"

    def encode(self, text, add_special_tokens=False):
        return [min(ord(ch), 255) for ch in text]


class FavourLetter:
    """A stand-in LM whose next-token distribution favours one letter."""

    def __init__(self, letter: str):
        self.letter = letter

    def __call__(self, input_ids):
        import torch

        logits = torch.zeros((1, input_ids.shape[1], 256))
        logits[0, -1, ord(self.letter)] = 5.0
        return type("Out", (), {"logits": logits})()


def test_training_rows_never_contain_a_test_bug(repo):
    test = [_task("calc-test", "mean", (17, 17))]
    planted = [_task("calc-test", "mean", (17, 17)),          # the test bug itself, planted again
               _task("calc-other-site", "mean", (17, 17)),    # another bug in a function holding a test bug
               _task("calc-train", "clamp", (3, 3))]
    train = training_tasks(planted, test)
    assert [t.id for t in train] == ["calc-train"]
    rows, src = training_rows(FakeTok(), train, {"calc": repo}, k=3, n_orders=2, seed=0)
    assert rows and set(src) == {"calc-train"}
    assert not any("calc-test" in r["prompt"] or "calc-other-site" in r["prompt"] for r in rows)
    assert all(r["completion"] in LETTERS[:3] for r in rows)


def test_scorer_picks_a_shortlisted_candidate_and_returns_valid_locations(repo):
    task = _task("calc-1", "mean", (17, 17))
    cands = shortlist(task, repo, k=3)
    assert [c.function for c in cands][:1] == ["mean"]  # only the failing test runs line 17: Ochiai's first
    g = gold_index(task, cands)
    assert g == 0 and cands[0].on_traceback and cands[0].called_by_test
    for letter in LETTERS[:len(cands)]:
        chosen, lps = pick(FavourLetter(letter), FakeTok(), task, cands, seed=0)
        assert 0 <= chosen < len(cands) and len(lps) == len(cands)
        locs = locations(cands, chosen)
        assert locs[0].symbol == cands[chosen].function and len({(x.file, x.symbol) for x in locs}) == len(cands)
        for loc in locs:
            fn = next(f for f in functions(OPS) if f.qualname == loc.symbol)
            assert fn.start <= loc.span[0] == loc.span[1] <= fn.end
    picks = {pick(FavourLetter(x), FakeTok(), task, cands, seed=0)[0] for x in LETTERS[:len(cands)]}
    assert picks == set(range(len(cands)))  # every letter maps to a different candidate


def test_claims_are_uninformative_when_the_shortlist_never_holds_the_bug(repo):
    tasks = [_task(f"calc-{i}", "not_a_function", (1, 1)) for i in range(4)]
    cands = [shortlist(t, repo, k=3) for t in tasks]
    got = {"cands": cands, "arms": {"untuned": [1, 0, 2, 1], "adapted-0": [0, 1, 1, 2]}, "n_rows": 2,
           "n_train_kept": 1, "n_train_planted": 2, "adapters": [], "collect_s": 0.0}
    others = {"ochiai": [locations(c, 0) for c in cands], "bm25": [locations(c, 1) for c in cands]}
    claims, details = claims_from(tasks, got, others, SMALL, seed=0)
    assert details["shortlist_ceiling"] == 0
    assert len(claims) == len(GRANS) + 1
    assert all(c.verdict == Verdict.UNINFORMATIVE and "ceiling of 0" in c.reason for c in claims)
