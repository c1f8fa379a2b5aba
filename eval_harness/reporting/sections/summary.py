"""Section 1: the summary, one line per verdict of the other sections, with the time its
data is from ("as of"), and the report's worst status."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import psycopg

from eval_harness.reporting import formatting as fmt
from eval_harness.reporting.blocks import (
    FAIL,
    NO_DATA,
    PASS,
    SECTION_TITLES,
    WARN,
    Check,
    Paragraph,
    Section,
    Table,
)


def summary_section(conn: psycopg.Connection, run_id: str | None, dataset: str,
                    now: datetime, checks: Sequence[Check]) -> Section:
    """FAIL when a check fails, WARN when one warns or has no data, else PASS."""
    statuses = {check.status for check in checks}
    status = FAIL if FAIL in statuses else WARN if statuses & {WARN, NO_DATA} else PASS
    store = f"database `{conn.info.dbname}` on {conn.info.host}"
    rows = tuple((check.name, check.status, check.detail, fmt.when(check.as_of))
                 for check in checks)
    return Section("summary", SECTION_TITLES["summary"], (
        Paragraph(f"Run `{run_id or 'none'}`, dataset `{dataset}`, report generated "
                  f"{now:%Y-%m-%d %H:%M:%S} UTC from {store}."),
        Table(("check", "status", "detail", "data as of (UTC)"), rows)), status)
