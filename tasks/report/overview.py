"""The overview matrix: per protected attribute and per intersection, every group's rates
(positive rate, TPR, FPR; the label base rate where the LiFT suite computed it) with their
intervals, each cell marked with the decision of the tests that concern that group and rate.

Sources, first found wins: for a single attribute, group parity's rates (the rates its tests
compare), else the LiFT suite's (``group_metrics``); for an intersection, the LiFT suite's
intersection encoding, else the intersectional method's per-intersection rates. A cell's
decision is the most severe among the deciding tests (those counted in the verdict) that
compare this rate between this group and another of the same attribute: rejected, then
undetermined, then not rejected; a cell no test concerns is neutral. Which tests and against
which groups is in the cell's ``title`` (shown on hover) and in the findings table.

The matrix is plain view data for ``templates/report.html.j2`` (macro ``overview_block``):
strings, plus bar positions in percent for the small interval bar drawn with CSS.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from fairengine.group_metrics.result import GroupMetricsDetails, GroupRate
from fairengine.group_parity.result import GroupParityDetails, RateEstimate
from fairengine.intersectional.result import GroupingRates, IntersectionalDetails, RateColumns
from fairengine.results import AuditResult, Finding
from tasks.report.findings import (
    DECISION_LABELS,
    DECISION_MARKS,
    DECISION_ORDER,
    intersection_name,
    question_parts,
)
from tasks.report.format import DASH, fmt_count, fmt_interval, fmt_level, fmt_rate, slug

#: The matrix's columns: rate name -> header. ``base_rate`` (labels) is shown where available,
#: never tested, so always neutral.
OVERVIEW_RATES: tuple[tuple[str, str], ...] = (
    ("base_rate", "Base rate (labels)"),
    ("positive_rate", "Positive rate"),
    ("tpr", "TPR"),
    ("fpr", "FPR"),
)
NEUTRAL = "none"
MATRIX_OPEN_ROWS = 30
"""A block with more groups than this starts closed (``<details>``; the page stays short)."""


@dataclass(frozen=True)
class Rate:
    """One group's rate with its interval (any of them NaN when undefined)."""

    estimate: float
    low: float
    high: float


@dataclass(frozen=True)
class GroupRow:
    """One group of a block: its name, rows and rates by name (missing: not computed)."""

    group: str
    n: float
    rates: dict[str, Rate]


@dataclass(frozen=True)
class Block:
    """The groups of one attribute or intersection, from one source."""

    name: str
    kind: str  # "attribute" or "intersection"
    source: str
    level: str
    rows: list[GroupRow]


@dataclass(frozen=True)
class GroupTest:
    """One deciding test that concerns a group: its decision, the other group, its label."""

    decision: str
    other: str
    label: str


def _rate(r: RateEstimate | GroupRate | None) -> Rate | None:
    return None if r is None else Rate(r.estimate, r.low, r.high)


def _column_rate(c: RateColumns | None, i: int) -> Rate | None:
    return None if c is None else Rate(c.rate[i], c.low[i], c.high[i])


def _blocks(result: AuditResult, protected: list[str]) -> list[Block]:
    """The blocks of the matrix, attributes in the audit's order, then intersections."""
    by_method = {m.method: m for m in result.methods if m.status == "ok"}
    gp = by_method.get("group_parity")
    gm = by_method.get("group_metrics")
    it = by_method.get("intersectional")
    attributes: dict[str, Block] = {}
    intersections: dict[str, Block] = {}
    if gp is not None and isinstance(gp.details, GroupParityDetails):
        level = fmt_level(gp.parameters.get("confidence_level", 0.95))
        for attr, info in gp.details.attributes.items():
            rows = [
                GroupRow(
                    g.group,
                    g.n,
                    {r: Rate(*_triple(g.rates.of(r))) for r in ("positive_rate", "tpr", "fpr")},
                )
                for g in info.groups
            ]
            attributes[attr] = Block(attr, "attribute", "group parity", level, rows)
    if gm is not None and isinstance(gm.details, GroupMetricsDetails):
        for name, enc in gm.details.encodings.items():
            rows = []
            for g in enc.groups:
                rates = {
                    r: rate
                    for r, rate in (
                        ("base_rate", _rate(g.base_rate)),
                        ("positive_rate", _rate(g.positive_rate)),
                        ("tpr", _rate(g.tpr)),
                        ("fpr", _rate(g.fpr)),
                    )
                    if rate is not None
                }
                rows.append(GroupRow(g.group, g.n, rates))
            display = intersection_name(name, protected)
            if enc.kind == "intersection":
                intersections.setdefault(
                    display, Block(display, "intersection", "LiFT suite", "95%", rows)
                )
            elif display in attributes:  # group parity's rates; add the label base rate
                attributes[display] = _with_base_rates(attributes[display], rows)
            else:
                attributes[display] = Block(display, "attribute", "LiFT suite", "95%", rows)
    if it is not None and isinstance(it.details, IntersectionalDetails):
        level = fmt_level(it.details.estimators.confidence_level)
        for grouping in it.details.rates.values():
            if len(grouping.attributes) < 2:
                continue
            display = " × ".join(grouping.attributes)
            if display not in intersections:
                intersections[display] = Block(
                    display,
                    "intersection",
                    "intersectional (smoothed)",
                    level,
                    _grouping_rows(grouping),
                )
    ordered = [attributes.pop(a) for a in protected if a in attributes]
    return [*ordered, *attributes.values(), *intersections.values()]


def _triple(r: RateEstimate) -> tuple[float, float, float]:
    return r.estimate, r.low, r.high


def _with_base_rates(block: Block, rows: list[GroupRow]) -> Block:
    """``block`` with the label base rate of ``rows`` (same groups) added to its rows."""
    base = {r.group: r.rates["base_rate"] for r in rows if "base_rate" in r.rates}
    if not base:
        return block
    new_rows = [
        GroupRow(
            r.group, r.n, {**({"base_rate": base[r.group]} if r.group in base else {}), **r.rates}
        )
        for r in block.rows
    ]
    return Block(
        block.name, block.kind, block.source + " and the LiFT suite", block.level, new_rows
    )


def _grouping_rows(g: GroupingRates) -> list[GroupRow]:
    rows = []
    for i, name in enumerate(g.group):
        rates = {
            r: rate
            for r, rate in (
                ("base_rate", _column_rate(g.base_rate, i)),
                ("positive_rate", _column_rate(g.selection_rate, i)),
                ("tpr", _column_rate(g.tpr, i)),
                ("fpr", _column_rate(g.fpr, i)),
            )
            if rate is not None
        }
        rows.append(GroupRow(name, g.n[i], rates))
    return rows


def group_tests(
    findings: Sequence[Finding], protected: list[str]
) -> dict[tuple[str, str, str], list[GroupTest]]:
    """``(attribute, rate, group) -> the deciding tests comparing that rate between this
    group and another``, from the findings' gap questions."""
    marks: dict[tuple[str, str, str], list[GroupTest]] = {}
    for f in findings:
        q = question_parts(f)
        if q is None or not f.counts:
            continue
        metric, attribute, a, b = q
        name = intersection_name(attribute, protected)
        label = f.label or f.key
        marks.setdefault((name, metric, a), []).append(GroupTest(f.decision, b, label))
        marks.setdefault((name, metric, b), []).append(GroupTest(f.decision, a, label))
    return marks


def _cell(rate: Rate | None, marks: list[GroupTest], what: str) -> dict[str, Any]:
    """One cell: estimate, interval, the most severe decision and the interval bar."""
    decision = NEUTRAL
    if marks:
        decision = min((m.decision for m in marks), key=lambda d: DECISION_ORDER.get(d, 3))
    title = what
    if marks:
        parts = []
        for d in sorted({m.decision for m in marks}, key=lambda d: DECISION_ORDER.get(d, 3)):
            others = ", ".join(m.other for m in marks if m.decision == d)
            parts.append(f"{DECISION_LABELS.get(d, d).lower()} vs {others}")
        title += ": " + "; ".join(parts)
    else:
        title += ": no test compares this rate"
    if rate is None:
        return {
            "estimate": DASH,
            "interval": "",
            "decision": decision,
            "mark": "",
            "title": title,
            "bar": None,
        }
    return {
        "estimate": fmt_rate(rate.estimate),
        "interval": fmt_interval(rate.low, rate.high, fmt_rate),
        "decision": decision,
        "mark": DECISION_MARKS.get(decision, ""),
        "n_tests": len(marks),
        "title": title,
        "bar": _bar(rate),
    }


def _pct(x: float) -> float:
    return round(min(max(x, 0.0), 1.0) * 100, 2)


def _bar(rate: Rate) -> dict[str, str] | None:
    """Positions (percent of the bar, rates on [0, 1]) of the interval and the estimate."""
    if not all(math.isfinite(v) for v in (rate.estimate, rate.low, rate.high)):
        return None
    low, high = _pct(min(rate.low, rate.high)), _pct(max(rate.low, rate.high))
    return {  # the 2 px estimate line stays inside the bar: left = (100% - 2px) * estimate
        "left": f"{low}%",
        "width": f"{max(high - low, 0.0)}%",
        "point": f"calc((100% - 2px) * {_pct(rate.estimate) / 100:.4f})",
    }


def overview_view(result: AuditResult) -> dict[str, Any] | None:
    """The matrix's view data; ``None`` when no method computed group rates."""
    protected = list(result.dataset.roles.protected)
    blocks = _blocks(result, protected)
    if not blocks:
        return None
    marks = group_tests(result.findings(), protected)
    out = []
    for bi, block in enumerate(blocks):
        columns = [
            (r, label) for r, label in OVERVIEW_RATES if any(r in row.rates for row in block.rows)
        ]
        rows = []
        n_marked = 0
        n_rejected = 0
        for row in block.rows:
            cells = []
            for r, label in columns:
                m = marks.get((block.name, r, row.group), [])
                n_marked += bool(m)
                cell = _cell(row.rates.get(r), m, f"{label} of {block.name}={row.group}")
                n_rejected += cell["decision"] == "reject"
                cells.append(cell)
            rows.append({"group": row.group, "n": fmt_count(row.n), "cells": cells})
        out.append(
            {
                "name": block.name,
                "kind": block.kind,
                "anchor": slug("overview", bi, block.name),
                "source": block.source,
                "level": block.level,
                "columns": [label for _, label in columns],
                "rows": rows,
                "tested": n_marked > 0,
                "n_rejected_cells": n_rejected,
                "collapsed": len(rows) > MATRIX_OPEN_ROWS,
            }
        )
    return {"blocks": out}
