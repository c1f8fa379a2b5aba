"""The kappa gate (eval_harness.agreement.kappa_gate): the lower confidence bound of pooled
kappa against the floor, and why a gate without an interval fails."""

from __future__ import annotations

from eval_harness.agreement.kappa_gate import kappa_gate


def test_gate_uses_the_lower_bound_not_the_point_estimate():
    assert not kappa_gate(lower_bound=0.62, kappa=0.78, floor=0.7, n_scored=50).passed
    assert kappa_gate(lower_bound=0.70, kappa=0.78, floor=0.7, n_scored=50).passed
    nothing = kappa_gate(lower_bound=None, kappa=None, floor=0.7, n_scored=0)
    assert not nothing.passed and "No (query, document) pair is scored" in nothing.description
    one_query = kappa_gate(lower_bound=None, kappa=0.9, floor=0.7, n_scored=4)
    assert not one_query.passed and "at least 2 judged queries" in one_query.description
