"""What ``doctor`` predicts for the commands that rank (issue #32 item 9), against what the
command then takes, and ``report`` writing the run report: through the CLI, on a small live
store in the seeds' layout mapped with ``tsvector: null``, after ``attach``.

The doctor's ``predict`` line times the commands' own candidate fetch on a few ground-truth
queries and extrapolates to all of them; ``report --json`` gives the seconds its retrieval
figures took (what the terminal prints as ``(X s)``). They agree within FACTOR.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from beir_factory import write_beir
from cli_runs import run_cli
from eval_harness.datasets.demo_store import build_rag_store
from live_store import WORDS, seeds_config_yaml

FACTOR = 3.0  # the prediction and the measured time agree within this factor either way
# (about 8 s: the store is built and attached, and report renders the whole run report)
CONFIG = seeds_config_yaml(schema="rag")


@pytest.fixture
def attached(fresh, tmp_path, monkeypatch, capsys):
    rng = np.random.default_rng(11)
    docs = {f"d{i}": " ".join(rng.choice(WORDS, size=30)) for i in range(600)}
    queries = {f"q{i}": " ".join(rng.choice(WORDS, size=4)) for i in range(120)}
    qrels = [(f"q{i}", f"d{j}", 1) for i in range(120) for j in rng.choice(600, 2, replace=False)]
    with fresh.connection() as conn:
        build_rag_store(conn, write_beir(tmp_path / "beir", docs, queries, qrels, dim=16))
        conn.commit()
    project = tmp_path / "project"
    project.mkdir()
    (project / "config.yaml").write_text(CONFIG)
    monkeypatch.chdir(project)
    monkeypatch.setenv("DATABASE_URL", fresh.url)
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "EVAL_HARNESS_CONFIG", "DAGSTER_HOME"):
        monkeypatch.delenv(name, raising=False)
    code, _, err = run_cli(capsys, "attach", "--dataset", "prod")
    assert code == 0, err
    return project


def test_doctor_predicts_the_report_within_a_factor_and_report_writes_the_html(attached,
                                                                               capsys):
    _, out, _ = run_cli(capsys, "doctor", "--offline")
    predict = [line for line in out.splitlines() if line.split()[1:2] == ["predict"]]
    assert len(predict) == 1, out
    assert "'prod' report, judge and calibrate each fetch the candidates of 120 " in predict[0]
    predicted = float(re.search(r": ~([0-9.,]+) s \(measured on 40 of them", predict[0])
                      .group(1).replace(",", ""))
    # nothing in doctor's lines predicts minutes of re-parsing for the commands that rank
    assert "each on this" not in out

    code, out, err = run_cli(capsys, "report", "--json")
    assert code == 0, err
    report = json.loads(out)
    measured = report["seconds"]
    assert measured / FACTOR <= predicted <= measured * FACTOR, (predicted, measured)

    # report writes the run report, with its figures first, and says where
    html = Path(report["report_html"])
    assert html.is_file() and html.is_relative_to(attached / "reports" / "runs")
    page = html.read_text(encoding="utf-8")
    assert "Retrieval at the configured weights" in page
    assert f"{report['metrics']['p_at_5']:.3f}" in page
    assert (attached / "reports" / "latest.html").read_text(encoding="utf-8") == page
    code, out, _ = run_cli(capsys, "report")
    assert code == 0
    assert re.search(r"^report: reports/runs/[^ ]+/report\.html and \.md, then latest: "
                     r"reports/latest\.html$", out, re.MULTILINE), out
