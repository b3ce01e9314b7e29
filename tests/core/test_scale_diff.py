"""tools/scale_diff.py says whether a saved full run still stands for the current code of its system."""

import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))  # scale_diff imports readme_results as a sibling module

import pytest  # noqa: E402
import scale_diff  # noqa: E402
from import_closure import divelab_files  # noqa: E402


def _git(*args):
    return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True)


# the check reads the repository's history: a source tarball or a shallow clone has none to read
pytestmark = pytest.mark.skipif(_git("rev-parse", "--is-shallow-repository").stdout.strip() != "false",
                                reason="needs a git checkout with its history")


def _rep(commit):
    return SimpleNamespace(environment={"commit": commit} if commit else {})


def test_no_recorded_commit_is_unknown():
    assert "unknown" in scale_diff.code_since("g2po", _rep(None))


def test_head_commit_is_unchanged_and_dirty_is_said():
    head = _git("rev-parse", "--short=12", "HEAD").stdout.strip()
    assert "unchanged since" in scale_diff.code_since("g2po", _rep(head))
    assert "uncommitted changes" in scale_diff.code_since("g2po", _rep(head + "+dirty"))


def test_edits_elsewhere_in_the_tree_do_not_make_a_run_stale_but_edits_in_its_code_do():
    head = _git("rev-parse", "--short=12", "HEAD").stdout.strip()
    rep = _rep(head + "+dirty")
    rep.environment["uncommitted"] = "src/divelab/science/autocog/reproduce.py"  # not code g2po runs
    said = scale_diff.code_since("g2po", rep)
    assert "unchanged since" in said and "uncommitted" not in said
    rep.environment["uncommitted"] = "src/divelab/training/g2po/setup.py src/divelab/verdicts.py"
    said = scale_diff.code_since("g2po", rep)
    assert "uncommitted changes in its code: src/divelab/training/g2po/setup.py, src/divelab/verdicts.py" in said


def test_a_commit_before_a_change_lists_the_changed_files():
    # the first commit that touched g2po's setup.py: its parent predates that file's current content
    first = _git("log", "--format=%h", "--reverse", "--", "src/divelab/training/g2po/setup.py").stdout.split()[0]
    assert "setup.py" in scale_diff.code_since("g2po", _rep(first + "~1"))


def test_an_unknown_commit_is_said():
    assert "not in this repository" in scale_diff.code_since("g2po", _rep("0123456789ab"))


def test_the_closure_follows_shared_engines_and_parent_packages():
    files = divelab_files("divelab.training.infotree")
    assert "src/divelab/training/infotree/reproduce.py" in files
    assert "src/divelab/rl/presets.py" in files  # a shared engine's module
    assert not any("/training/g2po/" in f for f in files)  # systems are leaves
    assert "src/divelab/stats.py" in files and "src/divelab/__init__.py" in files
    assert not any("/coding/" in f for f in files)  # nothing it does not import


def test_the_closure_refuses_a_module_that_is_not_there():
    with pytest.raises(ValueError, match="not a module"):
        divelab_files("divelab.no_such_system")


def test_a_change_in_a_shared_engine_is_listed():
    # the parent of the last commit that touched stats.py predates that file's current content
    last = _git("log", "-1", "--format=%h", "--", "src/divelab/stats.py").stdout.strip()
    said = scale_diff.code_since("g2po", _rep(last + "~1"))
    assert "shared code it imports" in said and "divelab/stats.py" in said
