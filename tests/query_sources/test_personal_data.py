"""The personal-data rules users' queries are skipped by."""

from __future__ import annotations

import pytest

from eval_harness.query_sources.personal_data import personal_data


@pytest.mark.parametrize(("text", "found"), [
    ("send it to jane.doe+rag@example.co.uk", "an e-mail address"),
    ("my number is 555-123-4567", "a phone number"),
    ("ring (020) 7946 0958 after six", "a phone number"),
    ("+1 415 555 2671", "a phone number"),
    ("account 123456789 is locked", "a long digit run"),
    ("IBAN DE89370400440532013000", "a long digit run"),
])
def test_personal_data_is_found(text, found):
    assert personal_data(text) == found


@pytest.mark.parametrize("text", [
    "what is P@5 at k = 10", "vitamin D3 trials 2019-2020", "is 1,200 mg of ibuprofen safe",
    "ISO 8601 dates", "compare gpt-4o and claude", "room 101 at 10:30",
])
def test_ordinary_queries_pass(text):
    assert personal_data(text) is None
