import json

import pytest

from divelab.report import load_results, render_html, render_markdown, write_report
from divelab.scaleout import run_reproduction


def test_write_report_files_and_reload(fake_system, tmp_path):
    rep = run_reproduction(fake_system.module, "smoke", 2)
    paths = write_report([rep], tmp_path / "out")
    assert {p.name for p in paths.values()} == {"results.json", "report.md", "report.html"}
    assert (tmp_path / "out" / "figures" / "fake-curve.png").read_bytes()[:4] == b"\x89PNG"
    data = json.loads(paths["json"].read_text())
    assert data["reproductions"][0]["claims"][0]["measured"] == 3.0
    again = load_results(tmp_path / "out")
    assert again[0].to_dict() == rep.to_dict()


def test_html_is_self_contained_and_escaped(fake_system):
    rep = run_reproduction(fake_system.module, "smoke", 0)
    page = render_html([rep])
    assert "data:image/png;base64," in page
    assert "<b>escaped</b>" not in page and "&lt;b&gt;escaped&lt;/b&gt;" in page
    assert 'class="verdict v-no"' in page and 'class="verdict v-nc"' in page
    assert "http://" not in page and "https://" not in page  # nothing fetched when opened offline


def test_markdown_escapes_pipes(fake_system):
    rep = run_reproduction(fake_system.module, "smoke", 0)
    md = render_markdown([rep])
    assert "a \\| pipe in text" in md
    assert "**not checkable here**" in md


def test_load_results_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="no results.json"):
        load_results(tmp_path)
    (tmp_path / "results.json").write_text("{}")
    with pytest.raises(ValueError, match="not a divelab results.json"):
        load_results(tmp_path)


def test_report_files_are_world_readable_and_report_keeps_results(fake_system, tmp_path):
    rep = run_reproduction(fake_system.module, "smoke", 0)
    paths = write_report([rep], tmp_path)
    assert all(p.stat().st_mode & 0o044 == 0o044 for p in paths.values())
    before = paths["json"].stat().st_mtime_ns
    write_report(load_results(tmp_path), tmp_path, write_json=False)
    assert paths["json"].stat().st_mtime_ns == before


def test_summary_lists_planned_systems_and_tallies_by_kind(fake_system):
    from divelab import registry

    rep = run_reproduction(fake_system.module, "smoke", 0)
    page = render_html([rep])
    planned = [s for s in registry.SYSTEMS if not s.implemented]
    assert page.count("planned: no reproduction yet") == len(planned)
    assert "implemented, not run in this report" in page
    assert '<table id="tally">' in page and "by construction" in page
    md = render_markdown([rep])
    assert "| check | 0 | 0 | 0 | 0 | 0 | 1 | 0 | 0 | 1 |" in md  # the fake's bound claim fails: a check, not reproduced
