"""Libraries' own output (transformers' weight-loading bars and log warnings, deprecation notices) is off
in the CLI by default; `divelab --verbose COMMAND` turns it back on."""

from __future__ import annotations

import os
import subprocess
import sys

from divelab.cli import top_level_verbose


def _probe(*args: str) -> str:
    # run one cheap command through divelab's main(), then ask transformers what it would show
    code = ("import sys, divelab.cli as c\n"
            "try:\n    c.main(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
            "from transformers.utils import logging as l\nimport os\n"
            "print(l.is_progress_bar_enabled(), l.get_verbosity() >= l.ERROR, os.environ.get('DIVELAB_WARNINGS'))")
    env = {k: v for k, v in os.environ.items()
           if k not in ("DIVELAB_WARNINGS", "TRANSFORMERS_VERBOSITY", "HF_HUB_DISABLE_PROGRESS_BARS")}
    proc = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip().splitlines()[-1]


def test_a_command_runs_with_loading_bars_and_library_warnings_off():
    assert _probe("kernelpro", "problems") == "False True None"


def test_verbose_before_the_command_turns_them_back_on():
    assert _probe("--verbose", "kernelpro", "problems") == "True False 1"


def test_verbose_after_the_command_is_the_commands_own():
    assert top_level_verbose(["--verbose", "reproduce", "x"])
    assert not top_level_verbose(["reproduce", "--verbose"])
    assert not top_level_verbose([])
