"""The run report's sections, one module each. A builder reads what the store and the DuckDB
history hold now (nothing is re-computed here) and returns a
:class:`~eval_harness.reporting.blocks.BuiltSection`; missing data gives the section a hint
saying what to run instead of failing the report."""
