"""The kappa gate: may calibration trust the judges' labels? The lower confidence bound of
pooled Cohen's kappa (judge 1 vs judge 2) against ``agreement.kappa_floor``, and the one
verdict (PASS, WARN, FAIL) every place that shows the gate says.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class KappaGate:
    """The trust gate: the lower confidence bound of pooled kappa against the floor."""

    passed: bool
    lower_bound: float | None
    kappa: float | None
    floor: float
    n_scored: int
    description: str


PASS, WARN, FAIL = "PASS", "WARN", "FAIL"


@dataclass(frozen=True)
class KappaVerdict:
    """The kappa gate's one verdict, said the same way everywhere it is shown (the
    ``agreement`` command and its exit code, ``reports/agreement.md``, the run report's
    summary and agreement section, the Dagster check and ``run``'s check lines).

    ``WARN`` is a failed gate on labels that came from local stand-ins for API judges whose
    keys are unset (with ``agreement.stand_in_judges: warn``): the stand-ins' agreement is no
    evidence about the judges that were configured, neither for nor against them, so it does
    not block. ``FAIL`` blocks; ``PASS`` passes.
    """

    status: str                 # PASS | WARN | FAIL
    description: str            # the gate's sentence, and why a failure only warns
    stand_ins: str | None       # stand_in_note(): the labels' stand-ins, else None

    @property
    def blocks(self) -> bool:
        return self.status == FAIL


def kappa_verdict(gate: KappaGate, *, configured: tuple[str, str] | None,
                  used: tuple[Sequence[str], Sequence[str]],
                  stand_in_judges: str = "warn") -> KappaVerdict:
    """The verdict of ``gate`` on labels written by the judge models ``used`` (per slot)
    when ``configured`` (judge1, judge2 specs; None: unknown) were asked for."""
    note = stand_in_note(configured, used) if configured is not None else None
    if note is None:
        return KappaVerdict(PASS if gate.passed else FAIL, gate.description, None)
    nothing = "agreement of stand-ins says nothing about the configured judges"
    if gate.passed:
        return KappaVerdict(PASS, f"{gate.description} Note: {note}, and {nothing}.", note)
    if stand_in_judges == "warn":
        return KappaVerdict(WARN, f"{gate.description} Only a warning: {note}, and {nothing}; "
                            "set the keys for the real gate (agreement.stand_in_judges: block "
                            "makes it block anyway).", note)
    return KappaVerdict(FAIL, f"{gate.description} It blocks although {note} "
                        "(agreement.stand_in_judges: block).", note)


def kappa_gate(*, lower_bound: float | None, kappa: float | None, floor: float, n_scored: int,
               confidence: float = 0.95) -> KappaGate:
    """Pass iff the lower confidence bound of pooled kappa is at least ``floor``.

    The point estimate alone is not enough: with few queries a kappa of 0.75 can have a
    lower bound of 0.4. No scored pair, or an interval that could not be computed (fewer
    than two queries), fails with a description saying why.
    """
    level = f"{confidence:.0%}"
    if n_scored == 0:
        return KappaGate(False, None, None, floor, 0,
                         "No (query, document) pair is scored by both judges, so agreement "
                         "is unknown; run the judges before calibrating on these labels.")
    if lower_bound is None:
        return KappaGate(False, None, kappa, floor, n_scored,
                         f"Kappa is {_fmt(kappa)} but its {level} interval is undefined "
                         "(a bootstrap over queries needs at least 2 judged queries); judge "
                         "more queries before trusting these labels.")
    if lower_bound < floor:
        return KappaGate(False, lower_bound, kappa, floor, n_scored,
                         f"The lower {level} bound of pooled kappa is {_fmt(lower_bound)} "
                         f"(kappa {_fmt(kappa)}), below the floor {floor:.2f}: the judge "
                         "labels are not trustworthy enough; review the disagreement queue "
                         "or improve the judges.")
    return KappaGate(True, lower_bound, kappa, floor, n_scored,
                     f"The lower {level} bound of pooled kappa is {_fmt(lower_bound)} "
                     f"(kappa {_fmt(kappa)}), at or above the floor {floor:.2f}.")


def stand_in_note(configured: tuple[str, str], used: tuple[Sequence[str], Sequence[str]]
                  ) -> str | None:
    """Why the labels say nothing about the configured judges, or ``None``.

    A slot is a stand-in when it is configured with an API judge but every label it wrote
    came from a local judge (its API key was unset and ``judges.fallback_to_local`` swapped
    one in). Agreement of stand-ins is no evidence about the judges that were configured.
    """
    swapped = [f"{', '.join(models)} for {spec}" for spec, models in zip(configured, used)
               if not spec.startswith("local:") and models
               and all(m.startswith("local:") for m in models)]
    if not swapped:
        return None
    return ("the labels come from local stand-ins (" + "; ".join(swapped) + ") because the "
            "API keys are unset")


def _fmt(value: float | None) -> str:
    return "undefined" if value is None else f"{value:.3f}"
