"""Query-sources domain: ground truth for a dataset without any, written from its documents
or sampled from its users' queries (:mod:`eval_harness.query_sources`), in a job of its own
(``ground_truth_job``): it may call a paid API, and what it adds is judged by the next judging
run, as any new query is.
"""

from typing import Literal

import dagster as dg

from eval_harness.query_sources.generate import generate_queries
from eval_harness.query_sources.users_queries import queries_from_answers
from eval_harness_pipelines.resources import EvalSettings, LiveStore

GROUP = "query_sources"


class NewQueriesConfig(dg.Config):
    dataset: str | None = None  # a key of `datasets` in config.yaml; default_dataset if unset
    source: Literal["generated", "users"] = "generated"  # ground-truth generate | from-answers
    queries: int = 50           # generated: queries the dataset should have; users: to sample
    seed: int = 0


@dg.asset(group_name=GROUP, deps=["corpus"],
          description="Queries for a dataset without ground truth: written from its documents "
                      "(generated) or sampled from the answers' queries (users), stored with "
                      "their origin; a rerun adds none.")
def new_queries(context: dg.AssetExecutionContext, config: NewQueriesConfig,
                settings: EvalSettings, store: LiveStore) -> dg.MaterializeResult:
    cfg = settings.load()
    dataset = config.dataset or cfg.default_dataset
    with store.location().connection() as conn:
        if config.source == "users":
            users = queries_from_answers(conn, cfg, dataset, n=config.queries, seed=config.seed)
            for notice in users.notices:
                context.log.warning(notice)
            return dg.MaterializeResult(metadata={
                "dataset": dataset, "origin": "users", "new": users.new,
                "sampled": len(users.sampled), "answers_read": users.answers,
                "distinct_queries": users.distinct, "days": users.days,
                "skipped_personal_data": users.skipped_personal})
        generated = generate_queries(conn, cfg, dataset, n=config.queries, seed=config.seed)
    for notice in generated.notices:
        context.log.warning(notice)
    return dg.MaterializeResult(metadata={
        "dataset": dataset, "origin": "generated", "new": generated.new,
        "already": generated.already, "dropped": len(generated.dropped),
        "writer": generated.writer, "critic": generated.critic,
        "cost_usd": round(generated.cost_usd, 6),
        "source_in_top_5": (dg.MetadataValue.float(generated.source_in_top_5)
                            if generated.source_in_top_5 is not None else "none")})


ground_truth_job = dg.define_asset_job(
    "ground_truth_job", selection=dg.AssetSelection.groups(GROUP),
    description="Queries for a dataset without ground truth (generated or users'); judge them "
                "with judging_job next.")

defs = dg.Definitions(assets=[new_queries], jobs=[ground_truth_job])
