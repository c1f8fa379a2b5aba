"""On judge labels with a human sample the decision also needs the PPI-corrected gain to clear
max(0, min_gain) (eval_harness.calibration.decision.with_judged_gain), so biased judges
cannot move the weights on their bias.

The corpus (tests/support/judged_gain_corpus.py): judges that call every document carrying
the query's words relevant favour the keyword-heavy 0.2 over the weights in force 0.7 by
about +0.2 P@5, while the hidden qrels favour 0.7 by about 0.14. With honest judges and the
weights in force 0.2 the qrels' gain of 0.7 is real, and the decision changes the weights.
"""

from __future__ import annotations

import json

import pytest

from eval_harness.calibration.decision import WeightDecision, decide_weights, with_judged_gain
from eval_harness.calibration.history import decision_from_grid, figure_from_grid, grid_frame
from eval_harness.calibration.ppi_gain import UNCORRECTED, judged_gain
from eval_harness.calibration.run import calibrate_with_settings, in_force_p_at_5
from eval_harness.calibration.text import format_table
from eval_harness.settings import load_settings
from judged_gain_corpus import gain_scenario, honest_gain_scenario, label_sample  # noqa: F401

N_SAMPLE = 25


def _calibrate(db, scenario, store):
    settings = load_settings(scenario["config"], environ={"DATABASE_URL": store.url})
    return calibrate_with_settings(db, settings, scenario["name"], labels="judges")


def _uncorrected(result) -> WeightDecision:
    """The decision the permutation test alone makes on the same judge-labelled sweep."""
    decided = result.decision
    grid = [(p.semantic_weight, p.keyword_weight) for p in result.grid]
    return decide_weights(result.sweep.per_query_p_at_5, grid, decided.in_force,
                          in_force_p_at_5(result.candidates, result.sweep, decided.in_force),
                          best_index=result.sweep.index_of(decided.best[0]),
                          alpha=decided.alpha, min_gain=decided.min_gain,
                          permutations=10_000, bootstrap_resamples=200, label_source="judges")


def test_biased_judges_with_a_human_sample_keep_the_weights(db, gain_scenario, store):
    label_sample(db, gain_scenario, n=N_SAMPLE)
    result = _calibrate(db, gain_scenario, store)
    decision = result.decision

    without_ppi = _uncorrected(result)  # the judges alone would move the weights to 0.2
    assert without_ppi.changed and without_ppi.best == (0.2, 0.8)
    assert without_ppi.adjusted_p <= 0.05 and without_ppi.gain > 0.1

    assert not decision.changed and decision.weights == (0.7, 0.3)
    assert decision.best == (0.2, 0.8) and decision.adjusted_p == without_ppi.adjusted_p
    gain = judged_gain(db, result, 0.2, 0.7, alpha=decision.alpha)
    assert (decision.ppi_gain, decision.ppi_low, decision.ppi_high, decision.n_human) == (
        gain.estimate, gain.low, gain.high, N_SAMPLE)
    assert decision.ppi_low <= 0.0
    assert (f"after correcting the judges with {N_SAMPLE} human-labelled queries (PPI; "
            f"judges alone {decision.gain:+.4f})") in decision.sentence
    assert "the judges' gain is not the people's" in decision.sentence
    assert "uncorrected" not in decision.sentence
    assert "a change needs adjusted p <= alpha and the interval's lower bound > 0" \
        in format_table(result)

    data = json.loads(json.dumps(result.to_dict()))
    assert data["decision"]["ppi_gain"] == decision.ppi_gain
    assert data["decision"]["n_human"] == N_SAMPLE
    assert decision_from_grid(grid_frame(result)) == decision  # the history round-trips it

    # the verdict describes the weights kept (0.7 / 0.3), PPI-corrected there, not 0.2
    figure, corrected = result.figure, result.corrected
    assert (figure.semantic_weight, figure.keyword_weight, figure.weights) == (0.7, 0.3, "kept")
    assert figure.basis == "ppi" and corrected.kept.semantic_weight == 0.7
    assert figure.p_at_5 == pytest.approx(min(max(corrected.kept.ppi.estimate, 0.0), 1.0))
    assert figure.p_at_5 != pytest.approx(min(max(corrected.best.ppi.estimate, 0.0), 1.0))
    assert "at the weights kept, semantic 0.70 / keyword 0.30" in figure.sentence(result.bands)
    assert data["verdict"]["semantic_weight"] == 0.7 and data["verdict"]["weights"] == "kept"
    bands = result.bands
    assert figure_from_grid(grid_frame(result), bands) == figure  # what the history says


def test_honest_judges_with_a_real_gain_change_the_weights(db, honest_gain_scenario, store):
    label_sample(db, honest_gain_scenario, n=N_SAMPLE)
    result = _calibrate(db, honest_gain_scenario, store)
    decision = result.decision
    assert decision.changed and decision.in_force == (0.2, 0.8)
    assert decision.best[0] in (0.7, 0.9) and decision.weights == decision.best
    assert decision.ppi_low > 0.0 and decision.adjusted_p <= 0.05
    assert decision.sentence.startswith(f"changed 0.2 / 0.8 -> {decision.best[0]:g} / ")
    assert f"[{decision.ppi_low:+.4f}, {decision.ppi_high:+.4f}] after correcting" \
        in decision.sentence
    figure = result.figure  # at the new weights, corrected there (the best point)
    assert (figure.semantic_weight, figure.weights, figure.basis) == (
        decision.best[0], "changed", "ppi")
    assert figure.p_at_5 == pytest.approx(min(max(result.corrected.best.ppi.estimate, 0), 1))


def test_without_a_human_sample_the_bias_is_uncorrected(db, gain_scenario, store):
    result = _calibrate(db, gain_scenario, store)
    decision = result.decision
    assert decision.changed and decision.ppi_gain is None  # the permutation test alone
    assert decision.note == UNCORRECTED and decision.sentence.endswith(UNCORRECTED)


@pytest.mark.unit
def test_either_guard_alone_keeps_the_weights():
    judges = WeightDecision(changed=False, in_force=(0.7, 0.3), best=(0.2, 0.8), gain=0.2,
                            low=0.1, high=0.3, adjusted_p=0.2, alpha=0.05, min_gain=0.0,
                            permutations=10_000, label_source="judges")
    # the PPI interval clears 0 but the search does not survive: kept
    assert not with_judged_gain(judges, estimate=0.2, low=0.1, high=0.3, n_human=40).changed
    significant = WeightDecision(**{**judges.__dict__, "adjusted_p": 0.01, "min_gain": 0.05})
    # the search survives, the interval clears 0 but not min_gain: kept
    kept = with_judged_gain(significant, estimate=0.08, low=0.04, high=0.12, n_human=40)
    assert not kept.changed and "does not clear 0.05" in kept.sentence
    assert with_judged_gain(significant, estimate=0.1, low=0.06, high=0.14, n_human=40).changed
