"""Progress bars: drawn on stderr when it is a terminal, absent from files, pipes and JSON.

The helper is checked with a stream that says it is a terminal and with one that does not;
the library entry points are checked for the ``progress(done, total)`` calls they make; and
the commands are run once with a real pseudo-terminal as stderr and once with a pipe.
"""

from __future__ import annotations

import fcntl
import io
import json
import os
import pty
import select
import struct
import subprocess
import sys
import termios
import textwrap
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from psycopg.types.json import Jsonb

from beir_factory import write_beir
from eval_harness.datasets.embeddings import embed_in_batches
from eval_harness.datasets.ingest import ingest_beir
from eval_harness.gates.registry import build_gates
from eval_harness.gates.runner import evaluate_window
from eval_harness.gates.window import TimeWindow
from eval_harness.progress import is_terminal, progress_bar
from eval_harness.settings import QualityGateSettings
from eval_harness_pipelines import cli

BAR_MARKS = ("%|", "\r", "\x1b[")  # tqdm's bar, its carriage returns, cursor movements


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def recorder() -> tuple[list[tuple[int, int | None]], object]:
    calls: list[tuple[int, int | None]] = []
    return calls, lambda done, total=None: calls.append((done, total))


# ---------------------------------------------------------------------------------------
# The helper


@pytest.mark.unit
def test_a_terminal_gets_a_bar_with_the_description_and_the_count():
    stream = FakeTerminal()
    with progress_bar("judging", unit="pair", stream=stream) as progress:
        assert progress is not None
        progress(0, 8)
        progress(8, 8)
    drawn = stream.getvalue()
    assert "judging" in drawn and "/8" in drawn and "pair" in drawn
    assert "%|" in drawn and "\r" in drawn


@pytest.mark.unit
def test_an_unknown_total_counts_up_and_a_later_total_makes_it_a_bar():
    stream = FakeTerminal()
    with progress_bar("gating", unit="answer", stream=stream) as progress:
        progress(3, None)
        progress(3, 10)
    drawn = stream.getvalue()
    assert "3/10" in drawn and "%|" in drawn


@pytest.mark.unit
def test_no_terminal_no_bar_and_no_callback(tmp_path):
    stream = io.StringIO()
    with progress_bar("judging", stream=stream) as progress:
        assert progress is None
    assert stream.getvalue() == ""
    with (tmp_path / "log.txt").open("w") as log, progress_bar("judging", stream=log) as none:
        assert none is None
    assert (tmp_path / "log.txt").read_text() == ""


@pytest.mark.unit
def test_a_closed_or_odd_stream_is_not_a_terminal(tmp_path):
    stream = (tmp_path / "closed.txt").open("w")
    stream.close()
    assert not is_terminal(stream) and not is_terminal(object())


def test_tqdm_disable_turns_the_bar_off_in_a_terminal_too():
    # tqdm reads TQDM_* variables when it is imported, hence a process of its own
    script = textwrap.dedent("""
        import io
        from eval_harness.progress import progress_bar

        class Terminal(io.StringIO):
            def isatty(self):
                return True

        stream = Terminal()
        with progress_bar("judging", stream=stream) as progress:
            progress(1, 2)
        print(repr(stream.getvalue()))
    """)
    env = {**os.environ, "TQDM_DISABLE": "1"}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "''", done.stderr


# ---------------------------------------------------------------------------------------
# What the library reports


class CountingEmbedder:
    model = "test-ones-4"

    def __init__(self) -> None:
        self.batches: list[int] = []

    def embed(self, texts):
        self.batches.append(len(texts))
        return np.array([[len(t), 1.0, 2.0, 3.0] for t in texts], dtype=np.float32)


@pytest.mark.unit
def test_embedding_in_batches_reports_each_batch_and_keeps_the_order():
    calls, progress = recorder()
    embedder = CountingEmbedder()
    texts = [f"text {'x' * i}" for i in range(5)]
    vectors = embed_in_batches(embedder, texts, batch_size=2, progress=progress)
    assert embedder.batches == [2, 2, 1]
    assert calls == [(2, 5), (4, 5), (5, 5)]
    assert vectors[:, 0].tolist() == [len(t) for t in texts]
    assert embed_in_batches(embedder, [], progress=progress).shape == (0, 0)




def test_ingest_reports_the_texts_it_embeds_and_nothing_when_none_changed(fresh, tmp_path):
    docs = {f"d{i}": f"document {i}" for i in range(300)}
    folder = write_beir(tmp_path / "data", docs, {"q1": "first", "q2": "second"},
                        [("q1", "d1", 1), ("q2", "d2", 1)])
    (folder / "embeddings.npz").unlink()
    embedder = CountingEmbedder()
    calls, progress = recorder()
    with fresh.connection() as conn:
        report = ingest_beir(conn, folder, name="p", embedder_factory=lambda: embedder,
                             progress=progress)
        assert report.embeddings == "computed by test-ones-4 for 302 texts"
        assert calls == [(256, 302), (302, 302)]  # documents and queries, 256 at a time
        calls.clear()
        again = ingest_beir(conn, folder, name="p", embedder_factory=lambda: embedder,
                            progress=progress)
    assert calls == [] and not again.changed
    assert again.embeddings.endswith("for 0 texts, 302 unchanged texts keep their stored vectors")


def test_gate_run_reports_each_stored_batch_out_of_the_stale_answers(fresh):
    with fresh.connection() as conn:
        for i in range(5):
            conn.execute("INSERT INTO answers VALUES (%s, 'q', %s, %s, '2025-05-05T10:00Z')",
                         (f"p{i}", f"Aspirin helps [1]. Case {i}.",
                          Jsonb([{"id": "s", "text": "aspirin"}])))
        conn.commit()
    defaults = QualityGateSettings()
    rule_gates = build_gates(replace(defaults, gates={
        name: replace(gate, enabled=name in ("format_compliance", "citation_coverage"))
        for name, gate in defaults.gates.items()}))
    calls, progress = recorder()
    window = TimeWindow.day("2025-05-05")
    evaluate_window(fresh, window, rule_gates, batch_size=2, progress=progress)
    assert calls == [(0, 5), (2, 5), (4, 5), (5, 5)]
    calls.clear()
    evaluate_window(fresh, window, rule_gates, batch_size=2, progress=progress)
    assert calls == [(0, 0)]  # nothing stale, nothing evaluated


def test_judge_run_reports_every_judged_pair(fresh, settings, tmp_path):
    from eval_harness.judges.dual.run import judge_dataset

    folder = write_beir(tmp_path / "data", {f"d{i}": f"doc {i} aspirin" for i in range(6)},
                        {"q1": "aspirin", "q2": "doc"}, [("q1", "d1", 1), ("q2", "d2", 1)])
    local = replace(settings, database_url=fresh.url, openai_api_key=None,
                    anthropic_api_key=None)
    calls, progress = recorder()
    with fresh.connection() as conn:
        ingest_beir(conn, folder, name="j")
        summary = judge_dataset(conn, local, "j", progress=progress)
    assert calls[0] == (0, summary.pairs) and calls[-1] == (summary.pairs, summary.pairs)
    assert [done for done, _ in calls] == list(range(summary.pairs + 1))


# ---------------------------------------------------------------------------------------
# The commands


@pytest.fixture
def answered(fresh, tmp_path):
    """The dataset ``cli`` (6 documents, 2 queries) and one answer, in the test's database."""
    folder = write_beir(tmp_path / "data", {f"d{i}": f"doc {i} aspirin" for i in range(6)},
                        {"q1": "aspirin", "q2": "doc"}, [("q1", "d1", 1), ("q2", "d2", 1)])
    with fresh.connection() as conn:
        ingest_beir(conn, folder, name="cli")
        conn.execute("INSERT INTO answers VALUES ('c1', 'q', %s, %s, '2025-05-06T10:00Z')",
                     ("Aspirin lowers the risk of heart attacks [1]. Statins lower "
                      "cholesterol [2].", Jsonb([{"id": "s1", "text": "aspirin"},
                                                 {"id": "s2", "text": "statins"}])))
        conn.commit()


def write_cli_config(path, answered):
    path.write_text(textwrap.dedent("""
        default_dataset: cli
        quality_gates:
          gates:
            grounding: {enabled: false}
            answer_reward: {enabled: false}
    """))


pytestmark = pytest.mark.project(config=write_cli_config, database="fresh")  # the tests below


def test_judge_command_draws_on_a_terminal_stderr_and_keeps_json_clean(project, monkeypatch,
                                                                       capsys):
    terminal = FakeTerminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    assert cli.main(["--config", str(project), "judge", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert "judging" in terminal.getvalue() and f"/{summary['pairs']}" in terminal.getvalue()


def test_commands_print_no_bar_when_stderr_is_not_a_terminal(project, capsys):
    for argv in (["judge"], ["judge", "--json"], ["gate", "--since", "2025-05-06"]):
        code = cli.main(["--config", str(project), *argv])
        out, err = capsys.readouterr()
        assert code == 0, err
        assert not any(mark in out + err for mark in BAR_MARKS), argv


def _run_with_pty_stderr(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[int, str]:
    """Run ``argv`` with an 80-column pseudo-terminal as stderr; its exit code and what it
    drew there."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    process = subprocess.Popen(argv, env=env, cwd=cwd, stdout=subprocess.DEVNULL,
                               stderr=slave, stdin=subprocess.DEVNULL)
    drawn = b""
    try:  # the slave stays open here, so reading never hits EIO before the data is in
        while True:
            if select.select([master], [], [], 0.1)[0]:
                drawn += os.read(master, 65536)
            elif process.poll() is not None:
                break
    finally:
        os.close(slave)
        os.close(master)
    return process.wait(timeout=60), drawn.decode("utf-8", "replace")


def test_gate_command_draws_a_bar_on_a_real_terminal(project):
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVAL_HARNESS_")}
    env["DATABASE_URL"] = project.store.url
    argv = [str(Path(sys.executable).with_name("eval-harness")), "--config", str(project),
            "gate", "--since", "2025-05-06"]
    code, drawn = _run_with_pty_stderr(argv, env, project.folder)
    assert code == 0, drawn
    assert "gating" in drawn and "%|" in drawn and "/1" in drawn
