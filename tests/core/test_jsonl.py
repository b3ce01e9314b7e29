"""divelab.jsonl: input files name the file and the line of what is wrong."""

from __future__ import annotations

import pytest

from divelab.jsonl import read_objects


def test_objects_come_with_their_line_numbers_and_blank_lines_are_skipped(tmp_path):
    f = tmp_path / "rows.jsonl"
    f.write_text('{"a": 1}\n\n{"b": 2}\n')
    assert read_objects(f) == [(1, {"a": 1}), (3, {"b": 2})]


@pytest.mark.parametrize("text, match", [
    ('{"a": 1}\n{oops\n', r"rows.jsonl:2 is not valid JSON"),
    ('{"a": 1}\n[1, 2]\n', r"rows.jsonl:2: a JSON object per line is needed, got list"),
    ("\n\n", r"holds no prompts"),
])
def test_bad_files_say_where(tmp_path, text, match):
    f = tmp_path / "rows.jsonl"
    f.write_text(text)
    with pytest.raises(ValueError, match=match):
        read_objects(f, "prompts")
    with pytest.raises(ValueError, match="prompts file .*missing.jsonl does not exist"):
        read_objects(tmp_path / "missing.jsonl", "prompts")
