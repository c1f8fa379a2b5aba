"""Report file names of a dataset's calibration (eval_harness.calibration.report)."""

from __future__ import annotations

from eval_harness.calibration.report import dataset_file_stem, report_file_names


def test_dataset_names_become_file_names_without_collisions():
    assert dataset_file_stem("scifact.v2-test_1") == "scifact.v2-test_1"
    odd, other = dataset_file_stem("prod store/eu"), dataset_file_stem("prod store?eu")
    assert odd.startswith("prod_store_eu-") and odd != other
    escape = dataset_file_stem("../etc")
    assert "/" not in escape and not escape.startswith(".") and escape.startswith("etc-")
    assert report_file_names("prod") == ("calibration-results-prod.md", "calibration-p5-prod.png")
