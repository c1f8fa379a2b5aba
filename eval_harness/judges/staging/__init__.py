"""Staged dual judging (``judges.staged``): judge 2 asked for a growing seeded sample of
queries until kappa's lower bound on it clears the floor, judge 1 alone on the rest, and what
that saved (:mod:`.staged`).

Import names from the module that defines them; this package imports nothing.
"""
