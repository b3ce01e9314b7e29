"""Every saved quick result (docs/results/KEY.json) stands for the current code of its system.

The README's quick table and the report a user gets from `make demo` must agree: a saved quick result older
than its system's code (its package or any shared divelab module it imports) would show other numbers than
the user's own run. The check is the one tools/scale_diff.py applies to the full record
(``scale_diff.code_since``): the run's recorded commit, clean, with nothing changed since. Re-save a system's
quick result (`divelab reproduce KEY --out DIR` then `tools/readme_results.py save DIR`) after changing its
code. The test that this check can fail is in tests/core/test_scale_diff.py (an older commit lists the
changed files).
"""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))

import scale_diff  # noqa: E402
from readme_results import RESULTS, _reps  # noqa: E402

# the check reads the repository's history: a source tarball or a shallow clone has none to read
_shallow = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--is-shallow-repository"],
                          capture_output=True, text=True).stdout.strip() != "false"
pytestmark = pytest.mark.skipif(_shallow, reason="needs a git checkout with its history")

QUICK = _reps(RESULTS)


def test_every_system_has_a_saved_quick_result():
    from divelab.registry import SYSTEMS

    assert sorted(QUICK) == sorted(s.key for s in SYSTEMS if s.implemented)


@pytest.mark.parametrize("key", sorted(QUICK))
def test_saved_quick_result_matches_the_current_code(key):
    rep = QUICK[key]
    assert rep.scale == "quick", f"docs/results/{key}.json holds a {rep.scale} run"
    said = scale_diff.code_since(key, rep)
    assert "unchanged since" in said and "uncommitted" not in said, (
        f"docs/results/{key}.json no longer stands for the code: {said}. Re-run it at quick and save it.")
