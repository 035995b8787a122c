"""The report view of ``subgroup_scan``: the top subgroups' table shows the details' numbers
(rules, n, rates, Z, simultaneous intervals, the method's step-down and naive p-values), the
null histogram of the scan maximum is a valid SVG with the observed maximum, and the view says
when the scores are not held out."""

from __future__ import annotations

import html
import re
import xml.etree.ElementTree as ET

import numpy as np
import pandas as pd
import pytest

import fairengine.registry  # noqa: F401  (registers the methods' details types)
from fairengine.dataset import AuditDataset
from fairengine.roles import ColumnRoles
from fairengine.subgroup_scan.config import SubgroupScanConfig
from fairengine.subgroup_scan.method import run_subgroup_scan
from fairengine.subgroup_scan.result import SubgroupScanDetails
from fairengine.verdict import finalize_audit
from tasks.report import render_report
from tasks.report.format import fmt_count, fmt_interval, fmt_number, fmt_pvalue, fmt_rate


def _page(held_out: bool) -> tuple[SubgroupScanDetails, str]:
    rng = np.random.default_rng(0)
    n = 3000
    sex = rng.choice(["Female", "Male"], n)
    age = rng.integers(18, 70, n)
    p = rng.beta(2, 3, n)
    q = np.where((sex == "Female") & (age < 30), 0.4, 1.0)
    y = (rng.random(n) < q * p / (1 - p + q * p)).astype(int)
    frame = pd.DataFrame({"sex": sex, "age": age, "y": y, "s": p})
    ds = AuditDataset.from_frame(frame, ColumnRoles("y", ("sex",), score="s"))
    cfg = SubgroupScanConfig(
        enabled=True, features=["age"], levels=4, min_draws=99, held_out=held_out
    )
    res = run_subgroup_scan(ds, cfg, seed=2)
    assert res.status == "ok" and isinstance(res.details, SubgroupScanDetails)
    audit = finalize_audit(config={}, dataset={}, model={}, validation=None, methods=[res])
    page = render_report(audit)
    assert "could not draw" not in page and "Details (raw JSON)" not in page
    return res.details, page


@pytest.fixture(scope="module", autouse=True)
def strict(request: pytest.FixtureRequest) -> None:
    mp = pytest.MonkeyPatch()
    mp.setenv("FAIRENGINE_STRICT_REPORT", "1")  # a view that raises fails the report
    request.addfinalizer(mp.undo)


def _rows(page: str) -> list[list[str]]:
    table = page[page.index('class="groups compact scan-top"') :]
    table = table[: table.index("</table>")]
    body = table[table.index("<tbody>") :]
    rows = []
    for tr in re.findall(r"<tr>(.*?)</tr>", body, flags=re.S):
        cells = re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", tr, flags=re.S)
        rows.append([html.unescape(re.sub(r"<[^>]+>", " ", c)).split() for c in cells])
    return [[" ".join(c) for c in r] for r in rows]


def test_the_table_shows_the_details_numbers() -> None:
    details, page = _page(held_out=True)
    rows = _rows(page)
    assert len(rows) == len(details.top) >= 1
    for row, s in zip(rows, details.top, strict=True):
        assert row[:6] == [
            str(s.rank + 1),
            html.unescape(s.rule),
            fmt_count(s.n),
            fmt_rate(s.observed_rate),
            fmt_rate(s.expected_rate),
            fmt_number(s.z),
        ]
        assert (
            row[6] == f"{fmt_number(s.deviation)} {fmt_interval(s.interval.low, s.interval.high)}"
        )
        assert row[7:9] == [fmt_pvalue(s.adjusted_pvalue), fmt_pvalue(s.naive_pvalue)]
    assert "sex = Female and age &lt; 30" in page or "sex = Female and age < 30" in page
    assert "not held out" not in page


def test_the_null_histogram_marks_the_observed_maximum() -> None:
    details, page = _page(held_out=False)
    section = page[page.index("Null distribution of the scan maximum") - 20000 :]
    svg = section[section.index("<svg") : section.index("</svg>") + 6]
    ET.fromstring(svg)  # valid XML
    assert f"observed maximum {float(f'{details.statistic:.3g}'):g}" in svg.replace("−", "-")
    assert "The scores are not held out" in page
