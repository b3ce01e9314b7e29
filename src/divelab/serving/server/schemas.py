"""OpenAI-compatible request bodies (pydantic) with a bound on every field, and the error envelope.

A field is either implemented or refused: unknown fields are a 400 that names them (never
accepted and silently ignored), except the few that only concern a hosted service's book-keeping
(``user``, ``metadata``, ``store``), which change no output. Text anywhere in a body must be
encodable as UTF-8 (a lone surrogate such as ``"\\ud800"`` is valid JSON but no tokenizer can
take it), and bodies nest at most :data:`MAX_DEPTH` levels.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from divelab.chat.types import Message, ToolCall, ToolSpec

GREEDY_BELOW = 1e-5  # a temperature under this is greedy (as in vLLM): dividing logits by it overflows
INT64 = (-(2**63), 2**63 - 1)
MAX_DEPTH = 32  # JSON nesting levels a body may use (OpenAI bodies need about 6)
MAX_STOPS = 64
MAX_LOGIT_BIAS = 300
BOOKKEEPING = ("user", "metadata", "store")  # accepted: they concern a hosted service, never the output


def check_text(obj: Any, path: str = "body", depth: int = 0) -> None:
    """Raise ValueError naming the first string (or key) that is not valid UTF-8, or a nesting too deep."""
    if depth > MAX_DEPTH:
        raise ValueError(f"{path}: JSON nested deeper than {MAX_DEPTH} levels")
    if isinstance(obj, str):
        try:
            obj.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise ValueError(f"{path}: text is not valid Unicode ({exc.reason} at position {exc.start}, e.g. a "
                             "lone surrogate); send UTF-8 text") from None
    elif isinstance(obj, dict):
        for k, v in obj.items():
            check_text(k, f"{path} key", depth + 1)
            check_text(v, f"{path}.{k}" if str(k).isascii() else path, depth + 1)
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            check_text(v, f"{path}[{i}]", depth + 1)


class Strict(BaseModel):
    """Unknown fields are refused; NaN / infinity are never numbers."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    @model_validator(mode="before")
    @classmethod
    def _text(cls, data: Any) -> Any:
        check_text(data)
        if isinstance(data, dict):  # book-keeping fields are allowed but not typed
            data = {k: v for k, v in data.items() if k not in BOOKKEEPING}
        return data


class StreamOptions(Strict):
    include_usage: bool = False


class _Sampling(Strict):
    model: str = Field(max_length=512)
    max_tokens: int | None = Field(None, ge=1, le=2**31)
    max_completion_tokens: int | None = Field(None, ge=1, le=2**31)  # the newer chat name for max_tokens
    temperature: float = Field(1.0, ge=0.0, le=2.0)
    top_p: float = Field(1.0, gt=0.0, le=1.0)
    n: int = Field(1, ge=1, le=16)
    stop: str | list[str] | None = None
    seed: int | None = Field(None, ge=INT64[0], le=INT64[1])
    stream: bool = False
    stream_options: StreamOptions | None = None
    presence_penalty: float = Field(0.0, ge=-2.0, le=2.0)
    frequency_penalty: float = Field(0.0, ge=-2.0, le=2.0)
    logit_bias: dict[str, float] | None = None
    divelab_guard: Literal["annotate", "stop", "redirect"] | None = None  # the guard policy for this request

    @field_validator("temperature")
    @classmethod
    def _greedy(cls, v: float) -> float:
        return 0.0 if v < GREEDY_BELOW else v

    @field_validator("stop")
    @classmethod
    def _stops(cls, v: str | list[str] | None) -> str | list[str] | None:
        items = [v] if isinstance(v, str) else (v or [])
        if len(items) > MAX_STOPS:
            raise ValueError(f"at most {MAX_STOPS} stop sequences, got {len(items)}")
        if any(not s or len(s) > 1024 for s in items):
            raise ValueError("stop sequences must be non-empty strings of at most 1024 characters")
        return v

    @field_validator("logit_bias")
    @classmethod
    def _bias(cls, v: dict[str, float] | None) -> dict[str, float] | None:
        if not v:
            return v
        if len(v) > MAX_LOGIT_BIAS:
            raise ValueError(f"at most {MAX_LOGIT_BIAS} logit_bias entries, got {len(v)}")
        for k, b in v.items():
            if not k.isdigit() or not k.isascii():
                raise ValueError(f"logit_bias keys are token ids as decimal strings, got {k!r}")
            if not -100 <= b <= 100:
                raise ValueError(f"logit_bias values must be in [-100, 100], got {b} for token {k}")
        return v

    @field_validator("stream_options")
    @classmethod
    def _stream_opts(cls, v: StreamOptions | None, info: ValidationInfo) -> StreamOptions | None:
        if v is not None and not info.data.get("stream"):
            raise ValueError("stream_options is only allowed with stream: true")
        return v

    def stop_list(self) -> list[str]:
        return [self.stop] if isinstance(self.stop, str) else list(self.stop or [])

    def requested_max(self) -> int | None:
        return self.max_completion_tokens if self.max_completion_tokens is not None else self.max_tokens

    def bias_items(self) -> tuple[tuple[int, float], ...]:
        return tuple((int(k), float(b)) for k, b in (self.logit_bias or {}).items())


TokenIds = Annotated[list[Annotated[int, Field(ge=0, le=2**31)]], Field(min_length=1)]


class CompletionRequest(_Sampling):
    prompt: Annotated[str, Field(min_length=1)] | TokenIds | Annotated[list[str], Field(min_length=1, max_length=64)] \
        | Annotated[list[TokenIds], Field(min_length=1, max_length=64)]
    echo: bool = False
    logprobs: int | None = Field(None, ge=0, le=20)
    best_of: int | None = Field(None, ge=1, le=16)
    suffix: str | None = None

    @field_validator("best_of")
    @classmethod
    def _best_of(cls, v: int | None, info: ValidationInfo) -> int | None:
        if v is not None and v != info.data.get("n", 1):
            raise ValueError("best_of other than n is not supported (this server returns every sampled choice)")
        return v

    @field_validator("suffix")
    @classmethod
    def _suffix(cls, v: str | None) -> str | None:
        if v:
            raise ValueError("suffix (insertion) is not supported: the served models are left-to-right only")
        return v

    def prompts(self) -> list[str | list[int]]:
        """The batch of prompts: one string / id list, or a list of them."""
        p = self.prompt
        if isinstance(p, str) or (p and isinstance(p[0], int)):
            return [p]
        return list(p)


class FunctionCall(Strict):
    name: str = Field(max_length=256)
    arguments: str = "{}"


class ToolCallIn(Strict):
    id: str = ""
    type: Literal["function"] = "function"
    function: FunctionCall


class ChatMessage(Strict):
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[dict[str, Any]] | None = None
    name: str | None = None
    tool_calls: list[ToolCallIn] | None = None
    tool_call_id: str | None = None
    refusal: str | None = None

    def text(self) -> str:
        if self.content is None:
            return ""
        if isinstance(self.content, str):
            return self.content
        parts = []
        for p in self.content:
            if p.get("type") != "text" or not isinstance(p.get("text"), str):
                raise ValueError(f"only text content parts are supported, got type {p.get('type')!r}")
            parts.append(p["text"])
        return "".join(parts)

    def to_message(self) -> Message:
        """divelab's chat message (``developer`` is a system message); raises ValueError on bad tool-call JSON."""
        calls = []
        for c in self.tool_calls or ():
            args = json.loads(c.function.arguments or "{}")
            if not isinstance(args, dict):
                raise ValueError(f"tool call {c.function.name!r}: arguments must be a JSON object")
            calls.append(ToolCall(c.function.name, args, c.id))
        return Message("system" if self.role == "developer" else self.role, self.text(), tool_calls=tuple(calls),
                       tool_call_id=self.tool_call_id or "")


class FunctionDef(Strict):
    name: str = Field(pattern=r"^[A-Za-z0-9_\-]{1,64}$")
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})
    strict: bool | None = None


class ToolDef(Strict):
    type: Literal["function"]
    function: FunctionDef


class NamedToolChoice(Strict):
    type: Literal["function"]
    function: dict[str, str]


class ResponseFormat(BaseModel):
    model_config = ConfigDict(extra="allow")
    type: str

    @field_validator("type")
    @classmethod
    def _text_only(cls, v: str) -> str:
        if v != "text":
            raise ValueError(f"response_format type {v!r} is not supported (no constrained decoding here); "
                             "only {'type': 'text'}")
        return v


class ToolFields(Strict):
    """``tools`` are offered to the model through its prompt (see :mod:`divelab.chat.hf_local`), so a call
    can be asked for but never forced: ``tool_choice`` is ``auto`` or ``none``."""

    tools: list[ToolDef] | None = Field(None, max_length=128)
    tool_choice: Literal["none", "auto", "required"] | NamedToolChoice | None = None
    parallel_tool_calls: bool = True

    @field_validator("tool_choice")
    @classmethod
    def _tool_choice(cls, v: Any, info: ValidationInfo) -> Any:
        if v is not None and not isinstance(v, str):
            raise ValueError("tool_choice naming a function is not supported: tools are offered through the "
                             "prompt and a call cannot be forced; use 'auto' or 'none'")
        if v == "required":
            raise ValueError("tool_choice 'required' is not supported: tools are offered through the prompt and "
                             "a call cannot be forced; use 'auto' or 'none'")
        if v == "auto" and not info.data.get("tools"):
            raise ValueError("tool_choice 'auto' needs tools")
        return v

    def offered_tools(self) -> list[ToolSpec]:
        if self.tool_choice == "none":
            return []
        return [ToolSpec(t.function.name, t.function.description, t.function.parameters) for t in self.tools or ()]


class ChatRequest(_Sampling, ToolFields):
    messages: list[ChatMessage] = Field(min_length=1, max_length=4096)
    logprobs: bool = False
    top_logprobs: int | None = Field(None, ge=0, le=20)
    response_format: ResponseFormat | None = None

    @field_validator("top_logprobs")
    @classmethod
    def _top_logprobs(cls, v: int | None, info: ValidationInfo) -> int | None:
        if v is not None and not info.data.get("logprobs"):
            raise ValueError("top_logprobs needs logprobs: true")
        return v


def error_body(message: str, type_: str = "invalid_request_error", param: str | None = None,
               code: str | None = None) -> dict[str, Any]:
    """The OpenAI error envelope: ``{"error": {"message", "type", "param", "code"}}`` (always UTF-8-safe)."""
    def safe(s: str | None) -> str | None:
        return None if s is None else s.encode("utf-8", "backslashreplace").decode("utf-8")

    return {"error": {"message": safe(message), "type": type_, "param": safe(param), "code": code}}
