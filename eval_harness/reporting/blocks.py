"""What a run report is made of: sections of blocks (paragraphs, tables, figures, details),
the summary's checks, and the statuses they carry. Sections build these; the renderers
(:mod:`eval_harness.reporting.render`) turn them into Markdown and HTML."""

from __future__ import annotations

import base64
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

Metric = float | int | str | bool | None
SECTION_TITLES = {"summary": "Summary", "agreement": "Dual-judge agreement",
                  "calibration": "Calibration grid and P@5 verdict",
                  "quality_gates": "Quality gates", "cost": "Cost",
                  "trends": "Trends over past runs"}
PASS, FAIL, WARN, NO_DATA = "PASS", "FAIL", "WARN", "NO DATA"


@dataclass(frozen=True)
class Paragraph:
    text: str  # may hold `code` and **bold**, rendered in both formats


@dataclass(frozen=True)
class Table:
    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    numeric: tuple[bool, ...] = ()         # right-aligned columns
    marked: frozenset[int] = frozenset()   # rows shown in bold (the best weight, totals)
    caption: str | None = None


@dataclass(frozen=True)
class Figure:
    file_name: str
    png: bytes = field(repr=False)
    caption: str

    @property
    def data_uri(self) -> str:
        return "data:image/png;base64," + base64.b64encode(self.png).decode("ascii")


@dataclass(frozen=True)
class Details:
    summary: str
    text: str  # shown as preformatted text in HTML, as Markdown in Markdown


Block = Paragraph | Table | Figure | Details


@dataclass(frozen=True)
class Check:
    """One line of the summary: a verdict and the time of the data it rests on."""

    name: str
    status: str  # PASS | FAIL | WARN | NO DATA
    detail: str
    as_of: datetime | None = None


@dataclass(frozen=True)
class Section:
    key: str
    title: str
    blocks: tuple[Block, ...] = ()
    status: str | None = None
    hint: str | None = None  # what to run when the section's data is missing


@dataclass(frozen=True)
class BuiltSection:
    """What a section builder returns: the section, its flat metrics, its summary checks."""

    section: Section
    metrics: Mapping[str, Metric]
    checks: tuple[Check, ...] = ()


def no_data(key: str, hint: str, metrics: dict[str, Metric],
            check: str | None = None) -> BuiltSection:
    """The section ``key`` without data: ``hint`` says what to run; ``check`` names the
    summary line that says so (none when ``check`` is None)."""
    checks = (Check(check, NO_DATA, hint),) if check is not None else ()
    return BuiltSection(Section(key, SECTION_TITLES[key], status=NO_DATA, hint=hint), metrics,
                        checks)
