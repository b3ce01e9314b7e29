"""The HumanEval prompts DSpark's τ rounds decode: a seeded sample of the 164 tasks, each prompt encoded whole and
cut to its last tokens (where the function body begins), the same for the same seed."""

from __future__ import annotations

import pytest

from divelab.codetasks.humaneval import load_tasks
from divelab.serving.dspark.humaneval_prompts import fold_chars, humaneval_prompts


def byte_ids(text: str) -> list[int]:
    return list(text.encode())


def test_prompts_are_the_seeded_tasks_last_tokens() -> None:
    prompts, ids = humaneval_prompts(byte_ids, 12, 16, seed=3)
    assert len(prompts) == len(ids) == 12 == len(set(ids))
    assert all(len(p) == 16 for p in prompts)
    by_id = {t.task_id: t for t in load_tasks()}
    assert ids == sorted(ids, key=lambda i: int(i.split("/")[1]))  # in task order
    for p, i in zip(prompts, ids, strict=True):
        assert p == byte_ids(by_id[i].prompt)[-16:]  # the end, where the body begins
        assert bytes(p).decode(errors="replace").rstrip().endswith(('"""', "'''"))  # every HumanEval prompt ends its docstring


def test_same_seed_same_prompts_another_seed_another_sample() -> None:
    assert humaneval_prompts(byte_ids, 8, 16, seed=3) == humaneval_prompts(byte_ids, 8, 16, seed=3)
    assert humaneval_prompts(byte_ids, 8, 16, seed=3)[1] != humaneval_prompts(byte_ids, 8, 16, seed=4)[1]
    every = humaneval_prompts(byte_ids, 164, 4, seed=0)[1]
    assert len(set(every)) == 164  # without replacement


def test_bad_sizes_fail_with_one_line() -> None:
    with pytest.raises(ValueError, match="n must be in 1..164"):
        humaneval_prompts(byte_ids, 165, 16, seed=0)
    with pytest.raises(ValueError, match="n must be in"):
        humaneval_prompts(byte_ids, 0, 16, seed=0)
    with pytest.raises(ValueError, match="length must be >= 1"):
        humaneval_prompts(byte_ids, 2, 0, seed=0)
    with pytest.raises(ValueError, match="fewer than 100000"):
        humaneval_prompts(byte_ids, 2, 100_000, seed=0)


def test_the_target_tokenizer_encodes_the_whole_prompt_without_special_tokens() -> None:
    """The reproduction encodes with the target's BPE (no bos/eos added) and cuts after encoding: the kept tokens
    are those the prompt's text gets in context."""
    from divelab.lm.tokenizer import train_tokenizer
    from divelab.serving.dspark.reproduce import PLANS, PROMPT_LEN, _public_section

    tok = train_tokenizer([t.prompt for t in load_tasks()[:40]], vocab_size=400)
    plan = PLANS["full"]
    section = _public_section(plan, None, tok, seed=0)
    assert section["status"] == "ran" and not section["folded"] and len(section["prompts"]) == plan.public_prompts
    by_id = {t.task_id: t for t in load_tasks()}
    for p, i in zip(section["prompts"], section["ids"], strict=True):
        whole = tok.encode(by_id[i].prompt)
        assert p == whole[-PROMPT_LEN:] and tok.bos_token_id not in p and tok.eos_token_id not in p
    # the sample is the run seed's (+3: the corpus test and val prompts take +1 and +2)
    assert section["ids"] == humaneval_prompts(byte_ids, plan.public_prompts, PROMPT_LEN, 3)[1]


def test_folding_characters_stays_in_the_vocabulary() -> None:
    enc = fold_chars(64)
    ids = enc("def f(x):\n    return 'é'\n")
    assert all(0 <= i < 64 for i in ids) and len(ids) == len("def f(x):\n    return 'é'\n")
    with pytest.raises(ValueError, match="vocab must be >= 1"):
        fold_chars(0)
