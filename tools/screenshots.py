"""Regenerate the screenshots in docs/img/ with Debian's headless chromium at 1280 px.

    .venv/bin/python tools/screenshots.py          # all three
    .venv/bin/python tools/screenshots.py report   # only the report's first screen

- ``report-top.png``: the first screen of the report rendered from the saved runs (docs/results/*.json);
  ``report-top.json`` records what it shows (the headline tally and the systems), so a test can tell
  when the picture no longer matches the saved results.
- ``docs-home.png`` and ``docs-system.png``: the documentation site's home page and the DSpark page,
  from a fresh ``mkdocs build``.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
IMG = ROOT / "docs" / "img"
WIDTH, HEIGHT = 1280, 900
SYSTEM_PAGE = "dspark"


def chromium() -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        raise SystemExit("needs Debian's chromium: apt-get install -y chromium")
    return exe


def shoot(url: str, out: Path, profile: Path, height: int = HEIGHT) -> None:
    subprocess.run([chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                    "--disable-component-update", "--disable-sync", "--no-first-run", "--hide-scrollbars",
                    f"--user-data-dir={profile}", "--virtual-time-budget=3000", f"--window-size={WIDTH},{height}",
                    f"--screenshot={out}", url], check=True, capture_output=True, timeout=180)


def saved_reps() -> list:
    from divelab.report import load_results

    reps = []
    # readme_results sits beside this file; a caller that loaded this module by path (the README test) has not
    # put tools/ on sys.path, so the import would depend on which test ran first.
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from readme_results import result_files

    for path in result_files():
        reps += load_results(path)
    return reps


def what_the_report_shows(reps: list) -> dict:
    """The facts on the report's first screen: the stamp a test compares with the saved results."""
    from readme_results import moved

    from divelab.report.render import tallies_by_kind

    return {"tally": tallies_by_kind(reps, moved(reps)), "systems": sorted(r.system for r in reps)}


def report(tmp: Path) -> None:
    from divelab.report import write_report

    reps = saved_reps()  # also puts tools/ on sys.path, for readme_results
    from readme_results import moved

    paths = write_report(reps, tmp / "report", write_json=False, moved=moved(reps))
    shoot(paths["html"].as_uri(), IMG / "report-top.png", tmp / "profile")
    (IMG / "report-top.json").write_text(json.dumps(what_the_report_shows(reps), indent=1) + "\n")


def docs(tmp: Path) -> None:
    site = tmp / "site"
    mkdocs = shutil.which("mkdocs") or str(Path(sys.executable).with_name("mkdocs"))
    subprocess.run([mkdocs, "build", "--strict", "-q", "-d", str(site)], cwd=ROOT, check=True, timeout=600,
                   env={**__import__("os").environ, "NO_MKDOCS_2_WARNING": "1"})
    shoot((site / "index.html").as_uri(), IMG / "docs-home.png", tmp / "profile")
    shoot((site / "systems" / SYSTEM_PAGE / "index.html").as_uri(), IMG / "docs-system.png", tmp / "profile")


def main(argv: list[str]) -> int:
    which = set(argv) or {"report", "docs"}
    with tempfile.TemporaryDirectory() as tmp:
        if "report" in which:
            report(Path(tmp))
        if "docs" in which:
            docs(Path(tmp))
    for name in sorted(p.name for p in IMG.glob("*.png")):
        print(f"docs/img/{name}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
