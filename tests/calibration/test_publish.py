"""Publishing a decision (eval_harness.calibration.publish): a ``changed`` decision writes
config.yaml and a row with the best weights; a ``kept`` one writes only its row, with the
weights in force; every row carries the evidence."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from eval_harness.calibration.decision import WeightDecision
from eval_harness.calibration.publish import publish_calibrated_weights

CONFIG = "datasets:\n  {name}:\n    path: x   # a comment\n"


def decision(changed: bool) -> WeightDecision:
    return WeightDecision(changed, (0.7, 0.3), (0.6, 0.4), 0.06, 0.03, 0.09,
                          0.004 if changed else 0.2, 0.05, 0.0, 10_000)


def publish(db, config_path, name, changed):
    return publish_calibrated_weights(
        db, config_path, dataset=name, semantic_weight=0.6, p_at_5=0.5, verdict="failure",
        run_id="r1", calibrated_at=datetime.now(UTC), decision=decision(changed))


def evidence(db, row_id):
    return db.execute("SELECT semantic_weight, keyword_weight, decision, in_force_semantic, "
                      "in_force_keyword, best_semantic, best_keyword, gain, ci_low, ci_high, "
                      "adjusted_p, alpha FROM calibrated_weights WHERE id = %s",
                      (row_id,)).fetchone()


def test_kept_writes_its_row_with_the_weights_in_force_and_leaves_config_alone(db, tmp_path):
    name = f"d{uuid.uuid4().hex[:8]}"
    config = tmp_path / "config.yaml"
    config.write_text(CONFIG.format(name=name))
    before = config.read_bytes()
    published = publish(db, config, name, changed=False)
    assert config.read_bytes() == before and published.config is None
    assert (published.semantic, published.keyword) == (0.7, 0.3)
    assert published.config_note.startswith("the weights in force were kept (kept 0.7 / 0.3")
    assert evidence(db, published.row_id) == (0.7, 0.3, "kept", 0.7, 0.3, 0.6, 0.4, 0.06, 0.03,
                                              0.09, 0.2, 0.05)


def test_changed_writes_config_and_its_row(db, tmp_path):
    name = f"d{uuid.uuid4().hex[:8]}"
    config = tmp_path / "config.yaml"
    config.write_text(CONFIG.format(name=name))
    published = publish(db, config, name, changed=True)
    assert published.config is not None and published.config.changed
    assert "semantic: 0.6" in config.read_text() and "# a comment" in config.read_text()
    assert evidence(db, published.row_id) == (0.6, 0.4, "changed", 0.7, 0.3, 0.6, 0.4, 0.06,
                                              0.03, 0.09, 0.004, 0.05)


def test_changed_without_a_config_file_says_where_the_weights_went(db):
    name = f"d{uuid.uuid4().hex[:8]}"
    published = publish(db, None, name, changed=True)
    assert published.config is None and (published.semantic, published.keyword) == (0.6, 0.4)
    assert (f"no config file is in use (dataset '{name}' is configured by defaults only)"
            in published.config_note and "--config FILE" in published.config_note)
