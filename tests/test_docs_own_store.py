"""The manual's "Your own store, start to finish" (docs/your-store/index.md) works as written: its
config.yaml, in a folder of its own, on a store made by LangChain and one made by LlamaIndex
(the real libraries, tests/support/rag_library_stores.py: text and UUID ids), through the
commands it lists in that order; P@5 equals ranx's on the harness's TREC runs against qrels in
the store's own ids, and the RAG rows are checksum-identical after. (The walkthrough on a store
laid out like the seeds is below.)"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from eval_harness_pipelines import cli
from live_store import PROJECT_ENVIRONMENT, seeds_project
from walkthroughs import walkthrough_block

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]


PAGE = "your-store/index.md"
THIS = "tests/test_docs_own_store.py"


def walkthrough_config(library: str | None = None, name: str = "") -> str:
    """The section's config.yaml; ``library``: with that library's ``corpus:`` line in force
    (the other commented out) and its NAME filled in; None: as the seeds' layout maps it."""
    text = walkthrough_block(PAGE, THIS, "yaml")
    if library is None:
        return re.sub(r"^( *)(# )?corpus: \{preset: langchain.*$", r"\1corpus: {relation: "
                      "public.l2_insights, id: id, content: content, embedding: embedding, "
                      "tsvector: null}", text, flags=re.M).replace(
            "public.eval_queries", "public.ground_truth")
    lines = []
    for line in text.splitlines():
        match = re.match(r"^( *)(# )?(corpus: \{preset: (\w+),.*)$", line)
        if match:
            line = match.group(1) + ("" if match.group(4) == library else "# ") + \
                match.group(3).replace("NAME", name)
        lines.append(line)
    return "\n".join(lines)


def walkthrough_commands() -> list[list[str]]:
    block = walkthrough_block(PAGE, THIS, "bash")
    return [re.sub(r"\s+#.*$", "", line).split()[1:] for line in block.splitlines()
            if line.strip().startswith("$EH ")]


def test_the_walkthrough_runs_as_written(fresh, tmp_path, monkeypatch, capsys):
    # a store of your own in the seeds' layout; its queries' vectors by the configured model
    # are cached, as after a first attach (the local embedder's extra is not installed here)
    project = seeds_project(fresh, tmp_path, monkeypatch, walkthrough_config(), seed=2)

    commands = [c for c in walkthrough_commands() if c[0] in ("doctor", "migrate", "attach",
                                                           "report", "run")][:5]
    assert [c[0] for c in commands] == ["doctor", "migrate", "attach", "doctor", "report"]
    commands.append(["run"])
    for argv in commands[:-1]:  # `run` is the whole graph: tests/pipelines/test_run.py
        code = cli.main(argv)
        out, err = capsys.readouterr()
        said = out if argv[0] == "doctor" else err  # the doctor says it in its config line
        assert f"{project / 'config.yaml'} (found in the working directory)" in said, err
        assert code == 0 or (argv[0] == "doctor" and code == 1), (argv, out, err)
        if argv[0] == "doctor":  # tsvector: null is measured
            assert "'prod' tsvector: null, so keyword search parses" in out
        if argv[0] == "report":
            assert "Retrieval report: dataset 'prod', 8 queries, 40 documents" in out
    assert cli.build_parser().parse_args(commands[-1]).command == "run"


@pytest.mark.parametrize("library", ["langchain", "llamaindex"])
def test_the_walkthrough_runs_on_a_store_the_library_made(library, request, tmp_path,
                                                                 monkeypatch, capsys):
    from ranx import Qrels, Run, evaluate

    from eval_harness.calibration.trec_runs import run_file_name
    from rag_library_stores import (
        LANGCHAIN_COLLECTION,
        LLAMAINDEX_TABLE,
        answers_lines,
        rag_checksum,
    )

    made = request.getfixturevalue(f"{library}_store")
    name = LANGCHAIN_COLLECTION if library == "langchain" else f"data_{LLAMAINDEX_TABLE}"
    project = tmp_path / "rag-eval"
    project.mkdir()
    (project / "config.yaml").write_text(walkthrough_config(library, name.replace("data_", "", 1)
                                                       if library == "llamaindex" else name),
                                         encoding="utf-8")
    (project / "answers.jsonl").write_text("\n".join(answers_lines(made)) + "\n",
                                           encoding="utf-8")
    monkeypatch.chdir(project)
    monkeypatch.setenv("DATABASE_URL", made.location.url)
    for variable in PROJECT_ENVIRONMENT:
        monkeypatch.delenv(variable, raising=False)
    with made.connection() as conn:
        before = rag_checksum(conn, made.relations)

    commands = walkthrough_commands()
    assert [c[0] for c in commands] == ["doctor", "migrate", "attach", "doctor", "report",
                                        "judge", "calibrate", "answers", "gate", "run",
                                        "report"]
    said = {}
    monkeypatch.setenv("DAGSTER_HOME", str(project / ".eval-harness" / "dagster"))
    for argv in commands:
        code = cli.main(argv)
        out, err = capsys.readouterr()
        # doctor: warn lines; gate: a failed gate; calibrate: the verdict, FAILURE on SciFact
        # (about one relevant abstract per query: a perfect ranking reaches P@5 0.22)
        failed = (argv[0] in ("doctor", "gate", "run")
                  or (argv[0] == "calibrate" and "Verdict: FAILURE" in out))
        assert code == 0 or (failed and code == 1), (argv, out[-2000:], err[-2000:])
        said.setdefault(argv[0], []).append(out + err)
    # run: the whole job ran as a Dagster run that ended (SUCCESS, or FAILURE on a blocking
    # check: SciFact's P@5 verdict), none left unfinished
    from colliding_processes import dagster_run_statuses

    statuses = set(dagster_run_statuses(project / ".eval-harness" / "dagster").values())
    assert statuses and statuses <= {"SUCCESS", "FAILURE"}, statuses
    documents = len(made.data.doc_ids)
    assert f"{len(made.data.query_ids)} queries, {documents} documents" in said["report"][0]
    assert said["report"][0] == said["report"][1] or "P@5" in said["report"][1]
    if library == "langchain":  # what the library did not create, with the statement
        assert "USING hnsw ((\"embedding\"::vector(384)) vector_cosine_ops) WHERE " \
               "\"collection_id\" = '" in said["doctor"][1]
    else:
        assert 'USING hnsw ("embedding" vector_cosine_ops)' in said["doctor"][1]

    # P@5 of every grid point equals ranx's on the TREC run calibrate wrote, against qrels in
    # the store's own ids (the support module's, not the harness's file)
    assert cli.main(["calibrate", "--no-write", "--json"]) in (0, 1)  # 1: the verdict
    grid = json.loads(capsys.readouterr().out.strip().splitlines()[-1])["grid"]
    runs = sorted((project / "runs").glob("run.prod.semantic-*.trec"))
    assert len(runs) == len(grid)
    qrels = Qrels(made.qrels())
    own_ids = set(made.own_id.values())
    for point in grid:
        path = project / "runs" / run_file_name("prod", point["semantic_weight"])
        run = Run.from_file(str(path), kind="trec")
        assert {d for docs in run.to_dict().values() for d in docs} <= own_ids
        assert evaluate(qrels, run, "precision@5") == pytest.approx(point["p_at_5"], abs=1e-9)

    with made.connection() as conn:
        assert rag_checksum(conn, made.relations) == before
