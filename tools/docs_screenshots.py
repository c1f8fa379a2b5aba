"""Take the manual's pictures: its start page and one guide, as built by MkDocs, and the run
report the main job writes, as headless Chromium shows them (not run by the tests).

    ./scripts/run.sh    # writes reports/latest.html, the report pictured
    .venv/bin/python -m tools.docs_screenshots [--out docs/images]

It builds the site into a temporary folder (``mkdocs build --strict``; the docs extra), opens
``index.html`` and ``guides/judges.html`` from the file system (the site loads nothing from
the network) in headless Chromium (tools/ui_check/browser.py) and saves each window as a PNG:
``site-start.png`` and ``site-guide-judges.png``; then ``reports/latest.html`` as
``report.png`` (its top: the checks, then the figures). The Dagster UI's pictures
(``dagster-asset-graph.png``) are taken by ``python -m tools.ui_check --screenshots DIR``.
Needs the test and docs extras and chromium + chromium-driver.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tools.ui_check.browser import headless_chromium

ROOT = Path(__file__).resolve().parents[1]
PAGES = {"site-start.png": "index.html", "site-guide-judges.png": "guides/judges.html"}


def small(path: Path) -> None:
    """64 colours are plenty for a page of text: the PNG shrinks to a third."""
    from PIL import Image

    Image.open(path).convert("RGB").quantize(colors=64).save(path, optimize=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "images")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="eh-docs-shot-") as scratch:
        folder = Path(scratch)
        site = folder / "site"
        subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet",
                        "--site-dir", str(site)], cwd=ROOT, check=True)
        with headless_chromium(folder / "chromedriver.log", folder / "chromium") as browser:
            browser.set_window_size(1400, 900)
            for name, page in PAGES.items():
                browser.get((site / page).as_uri())
                time.sleep(2)  # the theme lays the page out with its own script
                out = args.out / name
                browser.save_screenshot(str(out))
                small(out)
                print(out)
            report = ROOT / "reports" / "latest.html"
            if report.is_file():
                browser.get(report.as_uri())
                time.sleep(2)
                out = args.out / "report.png"
                browser.save_screenshot(str(out))
                small(out)
                print(out)
            else:
                print(f"{report} not found: run ./scripts/run.sh first (no report.png taken)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
