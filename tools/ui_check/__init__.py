"""The browser check of the Dagster UI (a development tool, not part of the installed package)."""
