"""Publishing a dataset's calibrated weights: a ``calibrated_weights`` row and config.yaml.

Every calibration records its decision (:mod:`eval_harness.calibration.decision`) in a row;
config.yaml is written only when the decision is ``changed``. A ``kept`` decision's row holds
the weights in force, so the newest row of a dataset stays its current weights.

Two readers take the weights a calibration chose. The RAG system reads the newest row of its
dataset in the harness schema's ``calibrated_weights`` table
(:data:`eval_harness.calibration.sql.LATEST_WEIGHTS_SQL`); the harness itself (search,
reports, judges) reads ``datasets.<name>.hybrid_search`` in config.yaml
(:meth:`eval_harness.settings.Settings.weights_for`). Both get the same weights, the row
inside a transaction that commits only once the config file was written (or could not be,
for a reason that is the user's to fix and that is said: no config file, no entry for the
dataset). A config file that cannot be rewritten otherwise (changed meanwhile, an alias)
rolls the row back, so the table never announces weights the run then failed on.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import psycopg

from eval_harness.calibration import sql
from eval_harness.calibration.decision import WeightDecision
from eval_harness.calibration.config_writeback import (DatasetNotInConfig, WeightsWritten,
                                              write_calibrated_weights)
from eval_harness.retrieval.weights import keyword_weight_for

# Calibration scores the ground truth's expected documents: labels people gave (BEIR qrels,
# the RAG system's own ground truth), not judge scores.
LABEL_SOURCE = "human"


@dataclass(frozen=True)
class WeightsPublished:
    dataset: str
    semantic: float
    keyword: float
    row_id: int                   # the calibrated_weights row
    run_id: str | None
    config: WeightsWritten | None  # None: config.yaml was not written (``config_note`` says why)
    config_note: str | None
    label_source: str = LABEL_SOURCE
    decision: WeightDecision | None = None  # None: a grid from before the decision rule

    def to_dict(self) -> dict:
        config = None if self.config is None else {
            "path": str(self.config.path), "key": self.config.key,
            "changed": self.config.changed, "semantic": self.config.semantic,
            "keyword": self.config.keyword}
        return {"dataset": self.dataset, "semantic": self.semantic, "keyword": self.keyword,
                "calibrated_weights_id": self.row_id, "run_id": self.run_id,
                "label_source": self.label_source, "config": config,
                "config_note": self.config_note,
                "decision": None if self.decision is None else self.decision.decision}


def publish_calibrated_weights(conn: psycopg.Connection, config_path: Path | None, *,
                               dataset: str, semantic_weight: float, p_at_5: float | None,
                               verdict: str | None, run_id: str | None,
                               calibrated_at: datetime,
                               label_source: str = LABEL_SOURCE,
                               decision: WeightDecision | None = None) -> WeightsPublished:
    """Insert the ``calibrated_weights`` row and write ``datasets.<dataset>.hybrid_search``
    into ``config_path``, in one transaction of ``conn`` (which must have none open).

    Without a config file, or when it has no entry for ``dataset``, only the row is written
    and ``config_note`` says so in one sentence; any other :class:`ConfigWriteError` is
    raised and nothing is written. ``label_source`` (human or judges) is what the
    calibration scored; the row keeps it. With a ``kept`` ``decision`` the row records the
    weights in force (``semantic_weight`` is then ignored) and config.yaml is not touched;
    ``decision`` None (a grid stored before the decision rule) publishes ``semantic_weight``.
    """
    if conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
        raise RuntimeError("publish_calibrated_weights needs a connection without an open "
                           "transaction (commit or roll back first).")
    semantic, keyword = float(semantic_weight), keyword_weight_for(semantic_weight)
    kept = decision is not None and not decision.changed
    if kept:
        semantic, keyword = decision.in_force
    with conn.transaction():
        row_id = sql.insert_calibrated_weights(
            conn, dataset=dataset, semantic_weight=semantic, keyword_weight=keyword,
            p_at_5=p_at_5, verdict=verdict, label_source=label_source, run_id=run_id,
            calibrated_at=calibrated_at, decision=decision)
        written, note = None, None
        if kept:
            note = (f"the weights in force were kept ({decision.sentence}), so "
                    f"config.yaml was left untouched")
        elif config_path is None:
            note = (f"no config file is in use (dataset '{dataset}' is configured by defaults "
                    f"only), so its weights went only to the calibrated_weights table; to keep "
                    f"them in config.yaml, use a config file (--config FILE) with a "
                    f"datasets.{dataset} entry")
        else:
            try:
                written = write_calibrated_weights(config_path, dataset, semantic_weight)
            except DatasetNotInConfig as exc:
                note = f"{str(exc).rstrip('.')} (they are in the calibrated_weights table)"
    return WeightsPublished(dataset, semantic, keyword, row_id, run_id, written, note,
                            label_source, decision)
