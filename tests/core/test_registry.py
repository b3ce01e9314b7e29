import pytest

from divelab import registry


def test_all_eighteen_systems_with_unique_names():
    assert [s.e_number for s in registry.SYSTEMS] == list(range(162, 180))
    keys = [s.key for s in registry.SYSTEMS]
    assert len(set(keys)) == 18
    assert all(s.arxiv.count(".") == 1 for s in registry.SYSTEMS)


@pytest.mark.parametrize("name", ["backtrack", "e163", "E163", "163", " Backtrack "])
def test_lookup_by_key_and_alias(name):
    assert registry.get(name).e_number == 163


def test_unknown_name_lists_valid_names():
    with pytest.raises(registry.UnknownSystemError, match=r"valid names: infotree \(e162\)"):
        registry.get("nope")
    with pytest.raises(registry.UnknownSystemError, match=r"did you mean 'backtrack'\?"):
        registry.get("backtrak")


def test_status_is_derived_from_code():
    backtrack = registry.get("e163")
    assert backtrack.implemented  # the foundation issue's system has a reproduce module
    for s in registry.SYSTEMS:
        assert s.status == ("implemented" if s.implemented else "planned")


def test_planned_system_cannot_be_reproduced():
    planned = [s for s in registry.SYSTEMS if not s.implemented]
    if not planned:
        pytest.skip("every system is implemented")
    with pytest.raises(registry.UnknownSystemError, match="planned, not implemented"):
        registry.resolve_implemented([planned[0].key])


def test_default_selection_is_all_implemented():
    assert registry.resolve_implemented([]) == registry.implemented()
    assert registry.resolve_implemented(["e163", "backtrack"]) == [registry.get("e163")]
