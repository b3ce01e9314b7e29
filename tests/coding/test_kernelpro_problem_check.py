"""KernelPro's Problem checks its templates when it is built, not with a bare KeyError once a search starts."""

from __future__ import annotations

import dataclasses

import pytest

from divelab.coding.kernelpro.problems import Problem, get_problem


def _with_templates(templates: dict[str, str]) -> Problem:
    return dataclasses.replace(get_problem("rowsum"), templates=templates)


def test_a_problem_without_the_ijk_template_is_refused_at_construction():
    body = get_problem("rowsum").templates["ijk"]
    with pytest.raises(ValueError, match=r"'ijk'.*required|templates need a 'ijk'") as err:
        _with_templates({"ikj": body})
    assert "rowsum" in str(err.value) and "ikj" in str(err.value)


def test_an_unknown_template_variant_is_refused():
    body = get_problem("rowsum").templates["ijk"]
    with pytest.raises(ValueError, match="unknown template variant"):
        _with_templates({"ijk": body, "jik": body})


def test_every_shipped_problem_passes_and_the_docstring_names_the_key():
    from divelab.coding.kernelpro.problems import PROBLEMS

    assert all("ijk" in p.templates for p in PROBLEMS.values())
    assert '``"ijk"`` is required' in Problem.__doc__
