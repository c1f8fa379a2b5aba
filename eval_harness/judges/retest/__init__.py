"""Test-retest (``judges.retest``, ``judge --retest``): each judge re-scores a seeded sample of
the run's queries past the reply cache and is measured against itself
(:mod:`.self_agreement`); the scorings are stored in ``judge_retests`` (:mod:`.sql`) and
priced by ``judge --dry-run`` (:mod:`.cost`).

Import names from the module that defines them; this package imports nothing.
"""
