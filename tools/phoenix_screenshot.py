"""Take the manual's screenshot of gate results beside a trace in Phoenix (not run by the tests).

    .venv/bin/python -m tools.phoenix_screenshot [--out docs/images/phoenix-annotations.png]

It starts a Phoenix server on loopback (tests/support/phoenix_server.py), sends it the traced
RAG loop of tests/support/traced_rag.py over OTLP/HTTP, runs ``eval-harness answers pull`` and
``gate --to-phoenix`` against a throwaway embedded store (in a temporary folder; no
DATABASE_URL), opens the first trace in headless Chromium (tools/ui_check/browser.py) on its
annotations tab and saves the window as a PNG. Needs the test extra and chromium +
chromium-driver.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "support"))

from phoenix_server import phoenix_server  # noqa: E402
from tools.ui_check.browser import headless_chromium  # noqa: E402
from traced_rag import run_rag  # noqa: E402

PROJECT = "default"


def eval_harness(folder: Path, *argv: str) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "DAGSTER_HOME")}
    env["EVAL_HARNESS_PGDATA"] = str(folder / "pgdata")
    subprocess.run([str(Path(sys.executable).with_name("eval-harness")), "--config",
                    str(folder / "config.yaml"), *argv], check=True, env=env, cwd=folder)


def send(url: str) -> list[str]:
    """The traced loop's spans into Phoenix; the trace ids."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from phoenix.client import Client

    spans, expected = run_rag()
    OTLPSpanExporter(endpoint=f"{url}/v1/traces").export(spans)
    client = Client(base_url=url)
    for _ in range(100):
        if len(client.spans.get_spans(project_identifier=PROJECT, limit=1000)) >= len(spans):
            break
        time.sleep(0.2)
    return [e.trace_id for e in expected]


def click_text(browser, text: str) -> None:
    """Click the last element whose own text is ``text`` (if any), then let the UI render."""
    from selenium.webdriver.common.by import By

    found = browser.find_elements(By.XPATH, f"//*[normalize-space(text())='{text}']")
    if found:
        browser.execute_script("arguments[0].click();", found[-1])
        time.sleep(3)


def shown(browser, text: str) -> bool:
    from selenium.webdriver.common.by import By

    return any(e.is_displayed() for e in browser.find_elements(
        By.XPATH, f"//*[normalize-space(text())='{text}']"))


def small(path: Path) -> None:
    """64 colours are plenty for a UI: the PNG shrinks to a third."""
    from PIL import Image

    Image.open(path).convert("RGB").quantize(colors=64).save(path, optimize=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path,
                        default=ROOT / "docs" / "images" / "phoenix-annotations.png")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="eh-phoenix-shot-") as scratch:
        folder = Path(scratch)
        (folder / "config.yaml").write_text(
            "store: {demo_rag_schema: null}\nquality_gates:\n  answers_file: null\n"
            "  gates:\n    grounding: {enabled: false}\n    answer_reward: {enabled: false}\n"
            f"dagster: {{home: {folder / 'dagster'}}}\n")
        with phoenix_server(folder / "phoenix") as url:
            traces = send(url)
            eval_harness(folder, "answers", "pull", "--phoenix", url, "--project", PROJECT)
            subprocess_gate = ["gate", "--since", "2000-01-01", "--to-phoenix", url]
            try:
                eval_harness(folder, *subprocess_gate)
            except subprocess.CalledProcessError as exc:
                if exc.returncode != 1:  # 1: a gate failed, which the picture may show
                    raise
            from phoenix.client import Client

            project_id = next(p["id"] for p in Client(base_url=url).projects.list()
                              if p["name"] == PROJECT)
            with headless_chromium(folder / "chromedriver.log", folder / "chromium") as browser:
                browser.set_window_size(1700, 1000)
                browser.get(f"{url}/projects/{project_id}/traces/{traces[0]}")
                time.sleep(6)  # the trace view renders client-side
                click_text(browser, "generate")  # the answering LLM span, which is annotated
                click_text(browser, "Annotations")  # unfold the span's annotations
                click_text(browser, "Table")  # each with its label and explanation
                if not shown(browser, "List"):  # the click folded the section again
                    click_text(browser, "Annotations")
                args.out.parent.mkdir(parents=True, exist_ok=True)
                browser.save_screenshot(str(args.out))
    small(args.out)
    print(f"saved {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
