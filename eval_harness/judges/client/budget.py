"""The spending limit of one judge run (see :mod:`eval_harness.judges.client.runner`: calls
reserve their worst-case cost before they are sent and settle it with the real one)."""

from __future__ import annotations


class Budget:
    """Spending limit of one run, in USD; ``None`` means no limit. This one is the process's
    own; :class:`~.quota.SharedBudget` is held in the store for every process of a dataset."""

    # None: every settlement is this process's, so a call waiting for room is told of it;
    # a shared budget's waiter looks again every this many seconds
    poll_seconds: float | None = None

    def __init__(self, limit_usd: float | None) -> None:
        self.limit_usd = limit_usd
        self.spent_usd = 0.0
        self.reserved_usd = 0.0
        self.pending = 0  # reservations not yet settled

    def try_reserve(self, amount: float) -> bool:
        if self.limit_usd is not None and (
                self.spent_usd + self.reserved_usd + amount > self.limit_usd + 1e-12):
            return False
        self.reserved_usd += amount
        self.pending += 1
        return True

    def charge(self, amount: float) -> None:
        """A cost nothing was reserved for: the results of a batch an earlier run submitted."""
        self.spent_usd += amount

    def settle(self, reserved: float, actual: float) -> None:
        self.pending -= 1
        # counted, not compared as floats: rounding must not leave a phantom reservation
        self.reserved_usd = max(0.0, self.reserved_usd - reserved) if self.pending else 0.0
        self.spent_usd += actual

    def exhausted_message(self, next_cost: float) -> str:
        return (f"the judge budget of ${self.limit_usd:.2f} for this run is used up "
                f"(${self.spent_usd:.4f} spent, the next call could cost up to "
                f"${next_cost:.4f}); raise judges.budget_usd (or EVAL_HARNESS_JUDGE_BUDGET_USD) "
                "and run again: what was judged is kept and cached")


class BudgetLineExhausted(RuntimeError):
    """A budget line (retests, anchors) does not cover the next call of its purpose: that
    step stops, the run goes on (the pipeline is not stopped)."""


class BudgetLine(Budget):
    """The spending limit of one purpose of calls (``retest``, ``anchor``), apart from the
    run's judge budget: labelling cannot starve the drift check, nor it the labelling.
    ``key`` is the config key that sets it; once a call does not fit, every later call of
    the purpose is refused too (:attr:`exhausted` holds the sentence saying so)."""

    def __init__(self, limit_usd: float | None, *, key: str, step: str) -> None:
        super().__init__(limit_usd)
        self.key, self.step = key, step
        self.exhausted: str | None = None
        self.refused = 0  # calls of the purpose not sent because the line was used up

    def exhausted_message(self, next_cost: float) -> str:
        limit = (f"${self.limit_usd:,.2f}" if self.limit_usd >= 1
                 else f"${self.limit_usd:.4f}")
        return (f"{self.step} stopped: its budget line {self.key} of {limit} is "
                f"used up (${self.spent_usd:.4f} spent, the next call could cost up to "
                f"${next_cost:.4f}); the run went on without the rest; raise {self.key} to "
                "measure it all")
