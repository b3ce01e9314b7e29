"""Open the HTML report in a real browser (Debian's headless chromium) and read back the DOM:
the summary is on the first screen, every section is reachable from it, every figure loads."""

import re
import shutil
import subprocess

import pytest

from divelab import registry
from divelab.report import write_report
from divelab.scaleout import run_reproduction

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

# Appended to a copy of the report: after load, record whether every image decoded and which
# anchors the summary links to resolve to an element, so --dump-dom can show it.
PROBE = """<script>
window.addEventListener('load', () => {
  const imgs = [...document.images];
  document.body.dataset.figures = imgs.length + ':' + imgs.filter(i => i.complete && i.naturalWidth > 0).length;
  const links = [...document.querySelectorAll('#summary a[href^="#"]')];
  document.body.dataset.links = links.length + ':' + links.filter(a => document.getElementById(a.hash.slice(1))).length;
});
</script>"""


def _chromium(tmp_path, *args):
    return [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            f"--user-data-dir={tmp_path / 'profile'}", "--virtual-time-budget=3000", *args]


@pytest.mark.browser
@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (.ci/run installs it)")
def test_report_navigation_in_chromium(fake_system, tmp_path):
    rep = run_reproduction(fake_system.module, "smoke", 0)
    paths = write_report([rep], tmp_path / "out")
    probed = tmp_path / "probed.html"
    probed.write_text(paths["html"].read_text().replace("</body>", PROBE + "</body>"))
    proc = subprocess.run(_chromium(tmp_path, "--dump-dom", probed.as_uri()), capture_output=True, text=True,
                          timeout=120)
    dom = proc.stdout
    assert proc.returncode == 0, proc.stderr[-2000:]
    # the summary lists all eighteen systems plus the run one, planned ones marked as such
    # a smoke run says so before anything else; the run's own system is the summary's first row
    assert dom.index('id="smoke-warning"') < dom.index('<table id="summary">')
    summary = dom.split('<table id="summary">', 1)[1].split("</table>", 1)[0]
    assert 'href="#sys-fake"' in summary.split("</tr>", 2)[1]
    assert summary.count("<tr") == 1 + len(registry.SYSTEMS)  # the fake system is registered too
    assert "planned: no reproduction yet" in summary or not [s for s in registry.SYSTEMS if not s.implemented]
    # every section is reachable from the summary, every figure decoded
    n_links = int(re.search(r'data-links="(\d+):(\d+)"', dom).group(1))
    assert re.search(r'data-links="(\d+):\1"', dom) and n_links == 1
    assert re.search(r'data-figures="(\d+):\1"', dom) and 'data-figures="0:0"' not in dom
    table = dom.split('id="claims-fake">', 1)[1].split("</table>", 1)[0]
    assert table.count("<tr>") == 1 + len(rep.claims)
    assert 'class="verdict v-ok"' in table and "not checkable here" in table
    # and it renders to pixels: the first screen is the summary
    shot = tmp_path / "shot.png"
    subprocess.run(_chromium(tmp_path, f"--screenshot={shot}", "--window-size=1200,900", paths["html"].as_uri()),
                   capture_output=True, timeout=120, check=True)
    assert shot.read_bytes()[:4] == b"\x89PNG"
