"""The Wilson score interval (eval_harness.metrics.proportions): a published table, hand-worked
and degenerate cases, properties."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from eval_harness.metrics.proportions import wilson_interval

pytestmark = pytest.mark.unit


# --- Wilson interval ------------------------------------------------------------------------

# Newcombe (1998), Statistics in Medicine 17:857-872, Table II, method 3 (Wilson score
# interval without continuity correction), 95%: the published four-decimal bounds.
NEWCOMBE_TABLE = [((81, 263), (0.2553, 0.3662)), ((15, 148), (0.0624, 0.1605)),
                  ((0, 20), (0.0000, 0.1611)), ((1, 29), (0.0061, 0.1718))]


@pytest.mark.parametrize(("counts", "expected"), NEWCOMBE_TABLE)
def test_wilson_interval_matches_newcombes_table(counts, expected):
    low, high = wilson_interval(*counts)
    assert (round(low, 4), round(high, 4)) == expected


def test_wilson_interval_hand_worked_and_degenerate_cases():
    # 9 of 10, z = 1.959964, z^2 = 3.841459:
    # centre = (9 + 1.920729) / 13.841459 = 0.788988
    # half   = 1.959964 * sqrt(10) / 13.841459 * sqrt(0.09 + 3.841459 / 40) = 0.193137
    low, high = wilson_interval(9, 10)
    assert low == pytest.approx(0.595851, abs=2e-6) and high == pytest.approx(0.982125, abs=2e-6)
    assert wilson_interval(20, 20) == (pytest.approx(1 - 0.161125, abs=1e-6), 1.0)
    assert wilson_interval(0, 20)[0] == 0.0
    assert wilson_interval(81, 263, confidence=0.99)[0] < wilson_interval(81, 263)[0]
    with pytest.raises(ValueError, match="n must be positive"):
        wilson_interval(0, 0)
    with pytest.raises(ValueError, match="successes must lie"):
        wilson_interval(11, 10)
    with pytest.raises(ValueError, match="confidence"):
        wilson_interval(1, 10, confidence=1.0)
    with pytest.raises(TypeError):
        wilson_interval(1.5, 10)


@given(st.integers(1, 5000).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n))))
def test_wilson_interval_contains_the_rate_and_is_symmetric(counts):
    successes, n = counts
    low, high = wilson_interval(successes, n)
    assert 0.0 <= low <= successes / n <= high <= 1.0
    mirror_low, mirror_high = wilson_interval(n - successes, n)
    assert low == pytest.approx(1.0 - mirror_high, abs=1e-12)
    assert high == pytest.approx(1.0 - mirror_low, abs=1e-12)
