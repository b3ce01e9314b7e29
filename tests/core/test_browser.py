"""Open the HTML report in a real browser (Debian's headless chromium) and read back the DOM."""

import shutil
import subprocess

import pytest

from divelab.report import write_report

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.browser
@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (.ci/run installs it)")
def test_report_renders_claims_table_in_chromium(fake_system, tmp_path):
    rep = fake_system.reproduce_module().reproduce(scale="smoke", seed=0)
    paths = write_report([rep], tmp_path / "out")
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           f"--user-data-dir={tmp_path / 'profile'}", "--virtual-time-budget=3000",
           "--dump-dom", paths["html"].as_uri()]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    dom = proc.stdout
    assert proc.returncode == 0, proc.stderr[-2000:]
    # the DOM the browser built has the claims table with one row per claim, verdicts styled
    assert '<table id="claims">' in dom
    table = dom.split('<table id="claims">', 1)[1].split("</table>", 1)[0]
    assert table.count("<tr>") == 1 + len(rep.claims)
    assert 'class="verdict v-ok"' in table and "not checkable here" in table
    # and it renders to pixels: a screenshot is produced
    shot = tmp_path / "shot.png"
    subprocess.run([*cmd[:-2], f"--screenshot={shot}", "--window-size=1200,900", paths["html"].as_uri()],
                   capture_output=True, timeout=120, check=True)
    assert shot.read_bytes()[:4] == b"\x89PNG"
