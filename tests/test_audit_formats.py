"""audit.json formats: today's files read back as typed results, losslessly; files of the
previous format (``fairengine.audit/1``, written by the main branch before typed details) still
load for the report's trend section and render, each method's details read as today's type
where they match and kept verbatim where they do not."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from fairengine.registry import built_in_for, method_spec
from fairengine.results import AUDIT_SCHEMA, AuditResult, UnknownDetails
from tasks.report import render_report

FORMAT1 = Path(__file__).parent / "data" / "full_audit_format1.json.gz"
"""Every built-in method's result, written by commit 9f587d4 (format 1) from
``tests/report_full_audit.py``'s small full audit."""


ADDED_DEFAULTS = {"task": "binary", "flip": "decision", "loss": "cross-entropy", "classes": []}
"""Fields added to FlipTest's and individual fairness's details for regression and multiclass
audits: a format-1 file (binary audits only) reads them as these binary defaults."""


def without_added_nulls(new: object, old: object) -> object:
    """``new`` without the keys ``old`` lacks, each of which must be null (or, for a field added
    for the other tasks, its binary default)."""
    if isinstance(new, dict) and isinstance(old, dict):
        extra = set(new) - set(old)
        assert all(new[k] is None or new[k] == ADDED_DEFAULTS.get(k, None) for k in extra), {
            k: new[k] for k in extra
        }
        return {k: without_added_nulls(v, old[k]) for k, v in new.items() if k in old}
    if isinstance(new, list) and isinstance(old, list) and len(new) == len(old):
        return [without_added_nulls(a, b) for a, b in zip(new, old, strict=True)]
    return new


@pytest.fixture(scope="module")
def format1() -> dict:
    with gzip.open(FORMAT1, "rt", encoding="utf-8") as fh:
        return json.load(fh)


def test_a_format_1_file_loads_with_its_findings_and_verdict(format1: dict) -> None:
    assert format1["schema"] == "fairengine.audit/1"
    old = AuditResult.from_dict(format1)
    assert old.verdict.status == format1["verdict"]["status"]
    for m, raw in zip(old.methods, format1["methods"], strict=True):
        assert [f.to_dict() for f in m.findings] == raw["findings"]
        details = m.to_dict()["details"]
        if isinstance(m.details, UnknownDetails):  # kept verbatim, saying why
            assert details == raw["details"] and m.details.note
        elif m.status == "ok":  # read as today's type: the same JSON again (optional fields
            # the old file left out are now written as null)
            assert isinstance(m.details, method_spec(m.method).details)
            assert without_added_nulls(details, raw["details"]) == raw["details"]
    # the report renders it (the test suite's strict views: a view that raises fails here)
    html = render_report(old)
    assert "FairEngine audit report" in html


def test_every_built_in_method_reads_format_1_details_as_its_type(format1: dict) -> None:
    """Every built-in method kept its JSON shape, so format-1 details read as today's types and
    the report draws them with the method's own view (none falls back to the generic one)."""
    old = AuditResult.from_dict(format1)
    typed = {
        m.method
        for m in old.methods
        if m.status == "ok" and not isinstance(m.details, UnknownDetails)
    }
    # format 1 audited binary models only, and predates subgroup_scan
    assert typed == set(built_in_for("binary")) - {"subgroup_scan"}, typed


def test_the_current_format_round_trips_exactly(format1: dict) -> None:
    """Writing a result and reading it back gives the same JSON and the same typed details."""
    old = AuditResult.from_dict(format1)
    text = old.to_json()
    again = AuditResult.from_json(text)
    assert json.loads(text)["schema"] == AUDIT_SCHEMA
    assert again.to_dict() == old.to_dict()
    for a, b in zip(again.methods, old.methods, strict=True):
        assert type(a.details) is type(b.details)


def test_a_fresh_process_reads_built_in_details_as_their_types() -> None:
    """Reading an audit file with fairengine.audit_file is enough: the built-in details types
    are registered without the caller importing the registry (a report re-rendered from a file
    in a new process)."""
    import subprocess
    import sys

    code = (
        "import gzip, json\n"
        "from fairengine.audit_file import read_audit\n"
        "from fairengine.results import UnknownDetails\n"
        f"r = read_audit(gzip.open({str(FORMAT1)!r}, 'rt').read())\n"
        "print(sum(isinstance(m.details, UnknownDetails) for m in r.methods))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=300
    )
    assert out.stdout.strip() == "0", out.stderr
