"""The span annotation eval_harness.gates.phoenix posts for a gate result, with hostile text
in the answer id and the explanation (the round trip through a running Phoenix is
tests/gates/test_phoenix_round_trip.py)."""

from __future__ import annotations

import json

import pytest

from eval_harness.gates.outcomes import GateOutcome
from eval_harness.gates.phoenix import annotation

pytestmark = pytest.mark.unit

HOSTILE = "ax\x1b]0;pwned\x07\x1b[2J\r\nALL GATES PASSED\x01\ufffe\u202e"


def test_an_annotation_is_utf8_json_whatever_the_id_and_explanation_hold():
    outcome = GateOutcome(HOSTILE + "\ud800", "citation_coverage", 0.0, False, 0.7,
                          f'uncited: "{HOSTILE}"', "0af7651916cd43dd8448eb211c80319c",
                          "b7ad6b7169203331")
    body = json.dumps(annotation(outcome), ensure_ascii=False).encode("utf-8")  # raised before
    sent = json.loads(body)
    assert sent["metadata"]["answer_id"] == HOSTILE + "\\ud800"  # the control characters kept
    assert sent["result"]["explanation"] == f'uncited: "{HOSTILE}"'
    assert b"\x1b" not in body and b"\n" not in body  # JSON escapes them itself
