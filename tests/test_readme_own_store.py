"""The README's "Your own store, start to finish" (issue #20) works as written: its config.yaml,
in a folder of its own, on a store laid out like the seeds (``public.l2_insights`` without a
tsvector column, ``public.ground_truth``), through the commands it lists in that order."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from beir_factory import write_beir
from eval_harness.store.demo_rag import build_rag_store
from eval_harness_pipelines import cli
from live_store import WORDS

REPO = Path(__file__).resolve().parents[1]
ENVIRONMENT = ("DAGSTER_HOME", "EVAL_HARNESS_CONFIG", "OPENAI_API_KEY", "ANTHROPIC_API_KEY",
               "EVAL_HARNESS_JUDGE1", "EVAL_HARNESS_JUDGE2", "DAGSTER_POSTGRES_URL")


def own_store_section() -> str:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    start = readme.index("## Your own store, start to finish")
    return readme[start:readme.index("\n## ", start + 1)]


def readme_config() -> str:
    block = own_store_section().split("```yaml\n", 1)[1].split("```", 1)[0]
    return "\n".join(line[3:] for line in block.splitlines())  # the list item's indent


def readme_commands() -> list[list[str]]:
    block = own_store_section().split("```bash\n", 1)[1].split("```", 1)[0]
    return [re.sub(r"\s+#.*$", "", line).split()[1:] for line in block.splitlines()
            if line.strip().startswith("$EH ")]


def test_the_readme_walkthrough_runs_as_written(fresh, tmp_path, monkeypatch, capsys):
    # a store of your own in the seeds' layout; its queries' vectors by the configured model
    # are cached, as after a first attach (the local embedder's extra is not installed here)
    rng = np.random.default_rng(2)
    docs = {f"d{i}": " ".join(rng.choice(WORDS, size=12)) for i in range(40)}
    queries = {f"q{i}": " ".join(rng.choice(WORDS, size=4)) for i in range(8)}
    qrels = [(f"q{i}", f"d{j}", 1) for i in range(8) for j in rng.choice(40, 2, replace=False)]
    with fresh.connection() as conn:
        build_rag_store(conn, write_beir(tmp_path / "beir", docs, queries, qrels, dim=384),
                        schema="public")
        conn.execute("UPDATE query_embeddings SET model = 'all-MiniLM-L6-v2'")
        conn.commit()
    project = tmp_path / "rag-eval"
    project.mkdir()
    (project / "config.yaml").write_text(readme_config(), encoding="utf-8")
    monkeypatch.chdir(project)
    monkeypatch.setenv("DATABASE_URL", fresh.url)
    for variable in ENVIRONMENT:
        monkeypatch.delenv(variable, raising=False)

    commands = readme_commands()
    assert [c[0] for c in commands] == ["doctor", "migrate", "attach", "report", "run"]
    for argv in commands[:-1]:  # `run` is the whole graph: tests/pipelines/test_run.py
        code = cli.main(argv)
        out, err = capsys.readouterr()
        said = out if argv[0] == "doctor" else err  # the doctor says it in its config line
        assert f"{project / 'config.yaml'} (found in the working directory)" in said, err
        assert code == 0 or (argv[0] == "doctor" and code == 1), (argv, out, err)
        if argv[0] == "doctor":  # tsvector: null is measured and its fix named
            assert "'prod' tsvector: null, so keyword search parses" in out
        if argv[0] == "report":
            assert "Retrieval report: dataset 'prod', 8 queries, 40 documents" in out
    assert cli.build_parser().parse_args(commands[-1]).command == "run"
