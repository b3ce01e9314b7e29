"""Importing divelab's verl plug-in prints nothing of verl's own start-up notes (missing optional engines, no
accelerator); DIVELAB_WARNINGS=1 (what `divelab --verbose` sets) shows them again."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(importlib.util.find_spec("verl") is None, reason="verl is not installed")


def _import_stderr(**env: str) -> str:
    base = {k: v for k, v in os.environ.items() if k != "DIVELAB_WARNINGS"}
    proc = subprocess.run([sys.executable, "-W", "default", "-c", "import divelab.rl.verl_plugin"],
                          capture_output=True, text=True, timeout=300, env={**base, **env})
    assert proc.returncode == 0, proc.stderr
    return proc.stderr


def test_importing_the_plugin_is_silent_and_verbose_shows_verls_notes():
    assert _import_stderr() == ""
    loud = _import_stderr(DIVELAB_WARNINGS="1")
    assert "engine is not available" in loud or "WARNING" in loud, loud
