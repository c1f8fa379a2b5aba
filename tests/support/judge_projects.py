"""A judge project in a database of its own, judged by real processes on the fake provider,
and what an undisturbed run writes: the reference the killed and sharded runs must equal."""

from __future__ import annotations

from pathlib import Path

from colliding_processes import beir, child_env, fake_keys, finish, ingest, two_judges_config
from eval_harness.store import migrate
from scratch_databases import scratch_database


def judge_project(location, tmp_path: Path, *, n_queries: int = 6) -> dict:
    """A small dataset (texts unique to this test) in ``location`` and a config for it."""
    tag = tmp_path.name[-12:]
    folder = beir(tmp_path / "judged", n_docs=30, n_queries=n_queries, tag=tag)
    run = finish(ingest(folder, "jd", env=child_env(location), cwd=tmp_path))
    assert run[0] == 0, run
    config = two_judges_config(folder, tmp_path, concurrency=8)
    return {"config": config, "folder": folder, "tag": tag}


def judged_rows(location, dataset: str = "jd"):
    """The judge columns of every query, with documents named by their external ids."""
    with location.connection() as conn:
        return conn.execute("""
            SELECT g.external_id,
                   array(SELECT d.external_id FROM unnest(g.judged_docs) WITH ORDINALITY j(id, n)
                         JOIN l2_insights d ON d.id = j.id ORDER BY j.n),
                   g.judge1_score, g.judge2_score, g.judge1_model, g.judge2_model, g.kappa,
                   g.judge1_status, g.judge2_status, g.judge_prompt_versions
            FROM ground_truth g WHERE g.dataset = %s ORDER BY g.external_id""",
                            (dataset,)).fetchall()


def clean_judge_run(server_url, project, fake) -> list:
    """The judge columns after one undisturbed run (in this process) in a database of its own."""
    from eval_harness.judges.dual.run import judge_dataset
    from eval_harness.settings import load_settings
    from eval_harness.datasets.ingest import ingest_beir

    with scratch_database(server_url, "eh_clean") as clean:
        settings = load_settings(project["config"],
                                 environ={"DATABASE_URL": clean.url, **fake_keys(fake)})
        with clean.connection() as conn:
            migrate(conn)
            ingest_beir(conn, project["folder"], name="jd")
            assert judge_dataset(conn, settings, "jd").complete
        return judged_rows(clean)
