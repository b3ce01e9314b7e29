import json
import os
import re
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from divelab.cli import app
from divelab.scaleout import run_reproduction

runner = CliRunner()


def test_list_shows_all_eighteen():
    res = runner.invoke(app, ["list"], env={"COLUMNS": "200"})
    assert res.exit_code == 0
    for e in range(162, 180):
        assert f"e{e}" in res.output
    from divelab import registry

    assert res.output.count("implemented") == len(registry.implemented())
    assert res.output.count("planned") == 18 - len(registry.implemented())


def test_reproduce_writes_report(fake_system, tmp_path):
    res = runner.invoke(app, ["reproduce", "fake", "--scale", "smoke", "--seed", "4", "--out", str(tmp_path)],
                        env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    data = json.loads((tmp_path / "results.json").read_text())
    rep = data["reproductions"][0]
    assert rep["seed"] == 4 and rep["scale"] == "smoke" and rep["claims"][0]["measured"] == 5.0
    assert rep["runtime_s"] > 0
    assert (tmp_path / "report.html").exists()
    # and `divelab report` re-renders from results.json alone
    (tmp_path / "report.html").unlink()
    res = runner.invoke(app, ["report", str(tmp_path)])
    assert res.exit_code == 0 and (tmp_path / "report.html").exists()


def test_bad_scale_and_names_fail_clearly(tmp_path):
    res = runner.invoke(app, ["reproduce", "backtrack", "--scale", "huge", "--out", str(tmp_path)])
    assert res.exit_code == 2 and "allowed: smoke, quick, full" in res.output
    res = runner.invoke(app, ["reproduce", "nosuch", "--out", str(tmp_path)])
    assert res.exit_code == 2 and "valid names" in res.output
    assert not (tmp_path / "results.json").exists()


def test_report_on_missing_dir_fails_clearly(tmp_path):
    res = runner.invoke(app, ["report", str(tmp_path)])
    assert res.exit_code == 2 and "no results.json" in res.output


def test_console_script_end_to_end_on_e163(tmp_path):
    """The real entry point, the real first system, smoke scale."""
    exe = os.path.join(os.path.dirname(sys.executable), "divelab")
    env = {**os.environ, "COLUMNS": "200"}
    proc = subprocess.run([exe, "reproduce", "e163", "--scale", "smoke", "--out", str(tmp_path)],
                          capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads((tmp_path / "results.json").read_text())
    rep = data["reproductions"][0]
    assert rep["system"] == "backtrack" and len(rep["claims"]) >= 4
    assert all(c["verdict"] for c in rep["claims"])
    assert rep["figures"], "E163 reproduction should carry figures"


def test_list_never_truncates_keys_at_80_columns():
    res = runner.invoke(app, ["list"], env={"COLUMNS": "80"})
    assert res.exit_code == 0
    from divelab import registry

    for s in registry.SYSTEMS:
        assert s.key in res.output, f"{s.key} truncated or wrapped at 80 columns"


def test_set_overrides_a_plan_field_and_the_run_records_plan_and_override(fake_system, tmp_path):
    res = runner.invoke(app, ["reproduce", "fake", "--scale", "smoke", "--set", "points=5", "--out", str(tmp_path)],
                        env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    rep = json.loads((tmp_path / "results.json").read_text())["reproductions"][0]
    assert rep["plan"] == {"points": 5} and rep["overrides"] == {"points": "5"}
    res = runner.invoke(app, ["reproduce", "fake", "--scale", "smoke", "--out", str(tmp_path)], env={"COLUMNS": "200"})
    rep = json.loads((tmp_path / "results.json").read_text())["reproductions"][0]
    assert rep["plan"] == {"points": 2} and rep["overrides"] == {}


@pytest.mark.parametrize(("args", "message"), [
    (["--set", "pints=5"], "no field 'pints' in Plan; allowed: points"),
    (["--set", "points"], "not KEY=VALUE"),
    (["--set", "points=many"], "cannot read it as int"),
])
def test_bad_set_is_a_one_line_error_before_any_work(fake_system, tmp_path, args, message):
    res = runner.invoke(app, ["reproduce", "fake", "--scale", "smoke", *args, "--out", str(tmp_path)],
                        env={"COLUMNS": "300"})
    assert res.exit_code == 2 and message in res.output.replace("\n", " ")
    assert not (tmp_path / "results.json").exists()


def test_reproduce_off_a_terminal_logs_lines_and_prints_a_summary(fake_system, tmp_path):
    res = runner.invoke(app, ["reproduce", "fake", "--scale", "smoke", "--out", str(tmp_path)],
                        env={"COLUMNS": "80"})
    assert res.exit_code == 0, res.output
    assert "[1/1] e999 fake: started (scale smoke, seed 0)" in res.output
    assert re.search(r"\[1/1\] e999 fake seed 0: finished in [\d.]+ s", res.output)
    assert "measured thing" not in res.output  # the summary, not every claim
    res = runner.invoke(app, ["reproduce", "fake", "--scale", "smoke", "--out", str(tmp_path), "--verbose"],
                        env={"COLUMNS": "200"})
    assert "measured thing" in res.output


def test_heartbeat_off_a_terminal(monkeypatch, capsys):
    from divelab import progress

    monkeypatch.setattr(progress, "HEARTBEAT_S", 0.0)
    monkeypatch.delenv("DIVELAB_QUIET", raising=False)
    list(progress.track(range(3), "training"))
    err = capsys.readouterr().err
    assert "… training: 3/3 after" in err
    assert re.search(r"… training: [12]/3 after \d+ s, about \d+ s left", err)  # an ETA while work remains


def test_unknown_and_planned_names_list_implemented_apart_from_planned(tmp_path):
    from divelab import registry

    planned = [s for s in registry.SYSTEMS if not s.implemented]
    if not planned:
        pytest.skip("every system is implemented")
    res = runner.invoke(app, ["reproduce", planned[0].key, "--out", str(tmp_path)], env={"COLUMNS": "300"})
    assert res.exit_code == 2 and "is planned" in res.output
    assert "valid names:" in res.output and "planned, not runnable yet:" in res.output


def test_help_is_fast_and_plain():
    exe = os.path.join(os.path.dirname(sys.executable), "divelab")
    proc = subprocess.run([exe, "--help"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and "--help" in proc.stdout and "reproduce" in proc.stdout
    # no system package (torch) is imported to list the commands
    probe = subprocess.run([sys.executable, "-c", "import sys; from divelab.cli import make_app; make_app(); "
                            "print('torch' in sys.modules)"], capture_output=True, text=True, timeout=60)
    assert probe.stdout.strip() == "False", probe.stderr


@pytest.mark.parametrize("seed", ["-1", "4294967296"])
def test_bad_seed_fails_before_any_work(tmp_path, seed):
    res = runner.invoke(app, ["reproduce", "backtrack", "--seed", seed, "--out", str(tmp_path / "o")],
                        env={"COLUMNS": "300"})
    assert res.exit_code == 2 and "allowed: an integer from 0" in res.output and "Traceback" not in res.output
    assert not (tmp_path / "o").exists()


def test_bad_out_fails_before_any_work(tmp_path):
    a_file = tmp_path / "file.txt"
    a_file.write_text("x")
    for out, msg in [(str(a_file), "existing file"), (str(a_file / "sub"), "which is a file"),
                     ("/proc/divelab", "inside /proc"), ("", "--out is empty")]:
        res = runner.invoke(app, ["reproduce", "backtrack", "--out", out], env={"COLUMNS": "300"})
        assert res.exit_code == 2 and msg in res.output, (out, res.output)
    assert a_file.read_text() == "x"


def test_report_on_malformed_results_names_file_and_field_and_touches_nothing(fake_system, tmp_path):
    res = runner.invoke(app, ["reproduce", "fake", "--scale", "smoke", "--out", str(tmp_path)])
    assert res.exit_code == 0
    good = json.loads((tmp_path / "results.json").read_text())
    cases = {
        "runtime_s": lambda d: d["reproductions"][0].__setitem__("runtime_s", "slow"),
        "png": lambda d: d["reproductions"][0]["figures"][0].__setitem__("png_base64", "%%%"),
        "ci": lambda d: d["reproductions"][0]["claims"][0].__setitem__("ci", [1]),
    }
    for field, corrupt in cases.items():
        bad = json.loads(json.dumps(good))
        corrupt(bad)
        run = tmp_path / field
        run.mkdir()
        (run / "results.json").write_text(json.dumps(bad))
        res = runner.invoke(app, ["report", str(run)], env={"COLUMNS": "300"})
        assert res.exit_code == 2 and "results.json" in res.output and field in res.output, res.output
        assert sorted(p.name for p in run.iterdir()) == ["results.json"]
    (tmp_path / "utf" ).mkdir()
    (tmp_path / "utf" / "results.json").write_bytes(b"\xff\xfe{")
    res = runner.invoke(app, ["report", str(tmp_path / "utf")])
    assert res.exit_code == 2 and "not UTF-8" in res.output
    (tmp_path / "dir" / "results.json").mkdir(parents=True)
    res = runner.invoke(app, ["report", str(tmp_path / "dir" / "results.json")])
    assert res.exit_code == 2 and "no results.json at" in res.output


def _commands(typer_app, path=("divelab",)):
    """(command path, callback) of every command of the CLI, groups included."""
    for info in typer_app.registered_commands:
        yield (*path, info.name or info.callback.__name__), info.callback
    for group in typer_app.registered_groups:
        yield from _commands(group.typer_instance, (*path, group.name))


def test_every_numeric_option_of_every_command_has_a_declared_range():
    from divelab.cli import make_app
    from divelab.cli_options import numeric_parameters

    seen = 0
    for path, callback in _commands(make_app(plugins=True)):
        for name, _integer, allowed in numeric_parameters(callback):
            seen += 1
            assert allowed is not None, f"{' '.join(path)} --{name}: add its range to divelab.cli_options.RANGES"
    assert seen > 40  # every system's commands were walked


@pytest.mark.parametrize("args, flag", [
    (["train-lm", "--seed", "100000000000000000000000"], "--seed"),
    (["train-lm", "--seed", "1e23"], "--seed"),
    (["train-lm", "--steps", "0"], "--steps"),
    (["dspark", "generate", "hi", "--temperature", "nan"], "--temperature"),
    (["kernelpro", "optimize", "softmax", "--budget", "-3"], "--budget"),
    (["pinning", "audit-compaction", "--budget", "1.5"], "--budget"),
    (["serve", "--port", "70000"], "--port"),
    (["reproduce", "fugu", "--retries", "1e9"], "--retries"),
])
def test_bad_numbers_name_the_flag_and_the_range_before_any_work(args, flag):
    res = runner.invoke(app, args, env={"COLUMNS": "300"})
    assert res.exit_code == 2, res.output
    assert flag in res.output and "allowed:" in res.output and "Traceback" not in res.output


def test_help_shows_brackets_and_version_is_printed():
    res = runner.invoke(app, ["reproduce", "--help"], env={"COLUMNS": "300"})
    assert "divelab[ray]" in res.output
    res = runner.invoke(app, ["--version"])
    from importlib.metadata import version

    assert res.exit_code == 0 and res.output.strip() == f"divelab {version('divelab')}"


def test_system_commands_are_grouped_by_system_and_old_names_still_work():
    from divelab.cli import make_app

    top = {info.name or info.callback.__name__ for info in make_app(plugins=True).registered_commands}
    assert top <= {"list", "reproduce", "report", "train-lm", "adapt", "serve"}, top
    res = runner.invoke(app, ["dspark", "--help"], env={"COLUMNS": "200"})
    assert res.exit_code == 0 and "generate" in res.output and "train-drafter" in res.output
    res = runner.invoke(app, ["sherloc", "localize", "--help"], env={"COLUMNS": "200"})
    assert res.exit_code == 0 and "--repo" in res.output
    res = runner.invoke(app, ["localize", "--help"], env={"COLUMNS": "200"})
    assert res.exit_code == 0 and "--repo" in res.output and "is now `divelab sherloc localize`" in res.output


def test_unknown_names_get_a_suggestion(tmp_path):
    res = runner.invoke(app, ["reproduce", "dspak", "--out", str(tmp_path / "o")], env={"COLUMNS": "300"})
    assert res.exit_code == 2 and "did you mean 'dspark'?" in res.output
    assert "valid names: implemented" not in res.output  # no stutter
    res = runner.invoke(app, ["genrate"], env={"COLUMNS": "300"})
    assert res.exit_code == 2 and "dspark generate" in res.output


def test_list_is_readable_at_80_columns():
    res = runner.invoke(app, ["list"], env={"COLUMNS": "80"})
    lines = res.output.splitlines()
    assert max(len(line) for line in lines) <= 80 and len(lines) <= 60, res.output


def test_report_defaults_to_where_reproduce_writes(fake_system, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert runner.invoke(app, ["reproduce", "fake", "--scale", "smoke"]).exit_code == 0
    (tmp_path / "divelab-report" / "report.html").unlink()
    res = runner.invoke(app, ["report"])
    assert res.exit_code == 0 and (tmp_path / "divelab-report" / "report.html").exists()


def test_second_run_into_the_same_out_keeps_the_first_runs_results(fake_system, tmp_path):
    from divelab.report import load_results, write_report

    first = run_reproduction(fake_system.module, "smoke", 0)
    first.system = "backtrack"
    write_report([first], tmp_path)
    res = runner.invoke(app, ["reproduce", "fake", "--scale", "smoke", "--out", str(tmp_path)], env={"COLUMNS": "300"})
    assert res.exit_code == 0, res.output
    assert sorted(r.system for r in load_results(tmp_path)) == ["backtrack", "fake"]
    assert "backtrack (smoke)" in res.output  # and the user is told
    # a results.json it cannot read is refused, never overwritten
    (tmp_path / "results.json").write_text("{")
    res = runner.invoke(app, ["reproduce", "fake", "--scale", "smoke", "--out", str(tmp_path)], env={"COLUMNS": "300"})
    assert res.exit_code == 2 and "cannot add to" in res.output
    assert (tmp_path / "results.json").read_text() == "{"


def test_library_deprecation_warnings_stay_out_of_user_output():
    code = ("import warnings, divelab.cli as c; c.quiet_libraries(); "
            "warnings.warn_explicit('old api', FutureWarning, 'x.py', 1, module='transformers.x')")
    proc = subprocess.run([sys.executable, "-W", "default", "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and "old api" not in proc.stderr, proc.stderr
