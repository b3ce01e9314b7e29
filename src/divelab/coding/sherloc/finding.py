"""The diagnostic case file: one structured finding per suspected location (pydantic).

Five diagnostic fields, as in SHERLOC: location description, root-cause hypothesis, solution idea,
dependencies, testing impact, plus where (file, symbol, line span) and a confidence in [0, 1].
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from pydantic import BaseModel, Field, ValidationError, field_validator


class Finding(BaseModel):
    file: str = Field(min_length=1)
    symbol: str | None = None
    line_span: tuple[int, int] | None = None
    location_description: str = Field(min_length=1)
    root_cause_hypothesis: str = Field(min_length=1)
    solution_idea: str = Field(min_length=1)
    dependencies: list[str] = Field(default_factory=list)
    testing_impact: str = Field(min_length=1)
    confidence: float = Field(ge=0.0, le=1.0)

    @field_validator("line_span")
    @classmethod
    def _span(cls, v: tuple[int, int] | None) -> tuple[int, int] | None:
        if v is not None and not 1 <= v[0] <= v[1]:
            raise ValueError(f"line_span must be (start, end) with 1 <= start <= end, got {v}")
        return v


class CaseFile(BaseModel):
    findings: list[Finding] = Field(min_length=1)


@dataclass(frozen=True)
class Location:
    """A ranked prediction: file, optional function (qualified name) and optional line span."""

    file: str
    symbol: str | None = None
    span: tuple[int, int] | None = None
    score: float = 0.0


_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.S)


def parse_case_file(text: str) -> CaseFile:
    """Parse a case file from model text (bare JSON or a fenced block); raises ValueError with the reason."""
    candidates = [m.group(1) for m in _FENCE.finditer(text)] or [text]
    last_error = "no JSON object found"
    for c in candidates:
        c = c.strip()
        i, j = c.find("{"), c.rfind("}")
        if i < 0 or j < i:
            continue
        try:
            data = json.loads(c[i:j + 1])
        except json.JSONDecodeError as e:
            last_error = f"invalid JSON: {e}"
            continue
        if isinstance(data, dict) and "findings" not in data and "file" in data:
            data = {"findings": [data]}
        try:
            return CaseFile.model_validate(data)
        except ValidationError as e:
            last_error = "schema error: " + "; ".join(
                f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in e.errors()[:6])
    raise ValueError(last_error)


def to_locations(case: CaseFile) -> list[Location]:
    ordered = sorted(case.findings, key=lambda f: -f.confidence)
    return [Location(f.file, f.symbol, f.line_span, f.confidence) for f in ordered]


def render(case: CaseFile, *, location_only: bool = False) -> str:
    """The case file as text for a repair agent's first message (a JSON block it can parse)."""
    if location_only:
        items = [{"file": f.file, "symbol": f.symbol, "line_span": f.line_span} for f in case.findings]
        head = "Suspected bug locations (from a localizer; may be wrong):"
    else:
        items = [f.model_dump() for f in case.findings]
        head = "Diagnostic case file from a localizer (may be wrong):"
    return f"{head}\n```json\n{json.dumps({'findings': items}, indent=1)}\n```"
