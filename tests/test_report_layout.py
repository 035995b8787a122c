"""The report's layout, server-free: summary first, the overview matrix, details on demand,
numbers never wrapped, and the compare view.

The audit is real method output on synthetic data with many groups: group parity and the LiFT
suite over 24 regions (some with long names) and sex, whose intersection has 48 groups, decided
by :func:`fairengine.verdict.finalize_audit` (831 tests). Checked: the top findings are at most 10,
ranked rejected first and then by effect size relative to the tolerance, each on one short line,
with "N more" linking to the full table; the full table is grouped by attribute; the overview
matrix has a block per attribute and for the intersection, every cell's decision is the most
severe of the deciding tests that compare that rate between that group and another; every
method section, finding group and long explanation is a closed ``<details>``; the compare view
lists the decisions changed since the previous audit first (and still renders a history
without decisions); the previous audit's decisions are read from its ``audit.json``. What a
browser shows (first screen, clipping, height) is checked on real audits in
``test_report_real_audits_browser.py``.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from fairengine.audit_context import PreviousAudit
from fairengine.dataset import AuditDataset
from fairengine.group_metrics import run_group_metrics
from fairengine.group_parity import group_parity
from fairengine.results import AuditResult, Finding, gap_question
from fairengine.roles import ColumnRoles
from fairengine.verdict import finalize_audit
from tasks.audit_history import AUDIT_JSON, decisions_of, logged_decisions
from tasks.report import render_report, report_context
from tasks.report.findings import (
    DECISION_ORDER,
    effect_size,
    finding_attribute,
    finding_tolerance,
    rank_key,
    short_label,
)
from tasks.report.overview import MATRIX_OPEN_ROWS, overview_view
from tasks.report.page import TOP_FINDINGS, trend_view
from templates import TEMPLATE_DIR

N_REGIONS = 24
LONG = "with a rather long name that has to wrap"
REGIONS = [f"Region {i:02d} {LONG}" if i % 6 == 0 else f"R{i:02d}" for i in range(N_REGIONS)]


@pytest.fixture(scope="module")
def many_groups() -> AuditResult:
    rng = np.random.default_rng(0)
    per = 250
    n = N_REGIONS * per
    region = np.repeat(REGIONS, per)
    sex = rng.choice(["female", "male"], n)
    y = rng.binomial(1, 0.4, n)
    shift = np.repeat(np.linspace(0, 0.3, N_REGIONS), per)
    score = np.clip(rng.normal(0.3 + 0.3 * y + shift, 0.2), 0, 1)
    frame = pd.DataFrame({"region": region, "sex": sex, "y": y, "score": score})
    roles = ColumnRoles(label="y", protected=("region", "sex"), score="score")
    ds = AuditDataset.from_frame(frame, roles, threshold=0.5)
    methods = [group_parity(ds, tolerance=0.05, exact="never"), run_group_metrics(ds)]
    return finalize_audit(
        config={"columns": {"protected": ["region", "sex"]}},
        dataset={**ds.summary(), "name": "many-groups"},
        model={"name": "scorer", "version": "3", "uri": "models:/scorer/3"},
        validation=None,
        methods=methods,
    )


@pytest.fixture(scope="module")
def html(many_groups: AuditResult) -> str:
    return render_report(many_groups)


def section(html: str, section_id: str) -> str:
    """The markup of ``<section id=section_id>``, nested sections included."""
    start = html.index(f'<section id="{section_id}"')
    depth = 0
    for tag in re.finditer(r"<(/?)section\b", html[start:]):
        depth += -1 if tag.group(1) else 1
        if depth == 0:
            return html[start : start + tag.end()]
    raise AssertionError(f"section {section_id} is not closed")


# ----------------------------------------------------------------------------- summary first


def test_top_findings_are_ten_rejections_first_by_effect_size(many_groups: AuditResult) -> None:
    ctx = report_context(many_groups)
    deciding = [f for f in many_groups.findings() if f.counts]
    assert len(deciding) == 831
    top = ctx["top_findings"]
    assert len(top) == TOP_FINDINGS and ctx["n_more_findings"] == len(deciding) - TOP_FINDINGS
    assert all(f["decision"] == "reject" for f in top)  # 169 rejections: all 10 are
    rejected = [f for f in deciding if f.decision == "reject"]
    largest = sorted(abs(f.estimate) for f in rejected)[-TOP_FINDINGS:][::-1]
    assert [abs(float(f["estimate"])) for f in top] == pytest.approx(largest, abs=1e-4)
    assert [f["effect"] for f in top] == pytest.approx([x / 0.05 for x in largest], abs=2e-3)
    assert top[0]["effect_text"] == f"{largest[0] / 0.05:.0f}×"


def test_top_findings_table_is_one_short_line_each_and_links_to_the_rest(
    many_groups: AuditResult, html: str
) -> None:
    top = section(html, "top-findings")
    rows = re.findall(r"<tr class=\"row-[a-z_]+\">(.*?)</tr>", top, re.S)
    assert len(rows) == TOP_FINDINGS
    for row in rows:
        assert "<details" not in row and '<span class="key">' not in row  # no reading, no key
        label = re.search(r'<td class="label" title="[^"]*">([^<]*)</td>', row)
        assert label is not None and len(label.group(1)) <= 80, row
        assert re.search(r"(Positive-rate|TPR|FPR) gap, region: ", label.group(1))
    ctx = report_context(many_groups)
    assert f'<a href="#findings">{ctx["n_more_findings"]} more tested finding(s)' in top
    for f in (f for f in many_groups.findings() if f.reading):
        assert f.reading not in top


def test_verdict_banner_has_the_counts(many_groups: AuditResult, html: str) -> None:
    banner = section(html, "verdict")
    record = many_groups.decisions
    assert record is not None
    for count, label in (
        (record.n_rejected, "rejected"),
        (record.n_not_rejected, "not rejected"),
        (record.n_undetermined, "undetermined"),
    ):
        assert f"<strong>{count:,}</strong> {label}</li>" in banner
    assert "not tested (estimates)</li>" in banner
    # a fail's reasons repeat the rejected tests: they are one click away, not in the way
    assert re.search(r'<details class="reasons">\s*<summary>Why: ', banner)


def test_identity_is_one_compact_line_and_in_full_further_down(html: str) -> None:
    header = html[html.index("<header") : html.index("</header>")]
    identity = re.search(r'<dl class="identity">(.*?)</dl>', header, re.S)
    assert identity is not None
    text = re.sub(r"<[^>]+>", " ", identity.group(1))
    for part in ("scorer v3", "many-groups, 6,000 rows", "region, sex", "α = 0.05"):
        assert part in text, part
    assert "models:/scorer/3" in identity.group(1)  # the model URI on hover
    about = section(html, "identity")
    assert "models:/scorer/3" in about and "Fingerprint" in about


def test_ranking_rules() -> None:
    gap = Finding("g", "gap", -0.2, pvalue=0.01, null_hypothesis="|gap| ≤ 0.05")
    ratio = Finding("r", "ratio", 3.0, pvalue=0.01, null_hypothesis="E[r] <= 1.25 (fair)")
    zero = Finding("z", "difference", 0.3, pvalue=0.01, null_hypothesis="auc(a) = auc(b)")
    named = Finding("t", "gap", 0.1, pvalue=0.2, null_kind="tolerance")
    estimate = Finding("e", "estimate", 0.5)
    assert finding_tolerance(gap) == 0.05
    assert finding_tolerance(ratio) == 1.25
    assert finding_tolerance(zero) is None
    assert finding_tolerance(named, {"tolerance": 0.02}) == 0.02
    assert finding_tolerance(estimate) is None
    assert effect_size(-0.2, 0.05) == pytest.approx(4.0)
    assert effect_size(0.3, None) == pytest.approx(0.3)
    assert effect_size(math.nan, None) == -math.inf

    def view(key: str, decision: str, effect: float, p: float | None = 0.01) -> dict[str, Any]:
        return {"key": key, "decision": decision, "effect": effect, "adjusted_pvalue_value": p}

    rows = [
        view("small-reject", "reject", 1.1),
        view("big-not", "fail_to_reject", 50.0),
        view("undetermined", "undetermined", 9.0),
        view("big-reject", "reject", 8.0),
        view("same-effect-larger-p", "reject", 1.1, 0.04),
        view("undefined", "reject", -math.inf),
    ]
    assert [r["key"] for r in sorted(rows, key=rank_key)] == [
        "big-reject",
        "small-reject",
        "same-effect-larger-p",
        "undefined",
        "undetermined",
        "big-not",
    ]


def test_short_labels_and_attributes() -> None:
    tol = Finding(
        "dp_gap.race.a_b",
        "Demographic parity gap (positive-prediction rate), race: A − B",
        0.1,
        question=gap_question("positive_rate", "race", "A", "B"),
        null_kind="tolerance",
    )
    perm = Finding(
        "perm_auc.race.a_b", "AUC difference", 0.1, question=gap_question("auc", "race", "A", "B")
    )
    eps = Finding("df_eps.sp.race_x_sex", "Differential fairness ε", 0.4)
    flips = Finding("fliptest_pos.sex.f_m", "FlipTest advantaged (F+) rate, sex: f -> m", 0.1)
    whole = Finding("individual.loss_ratio", "Mean loss ratio", 2.0)
    assert short_label(tol) == "Positive-rate gap, race: A − B"
    assert short_label(perm) == "AUC difference, race: A − B"
    assert short_label(eps) == "Differential fairness ε"
    protected = ["race", "sex"]
    assert finding_attribute(tol, protected) == "race"
    assert finding_attribute(eps, protected) == "race × sex"
    assert finding_attribute(flips, protected) == "sex"
    assert finding_attribute(whole, protected) is None


def test_full_findings_table_is_grouped_by_attribute(many_groups: AuditResult, html: str) -> None:
    ctx = report_context(many_groups)
    groups = ctx["finding_groups"]
    assert [g["name"] for g in groups] == ["region", "sex"]
    assert sum(g["n"] for g in groups) == 831
    for g in groups:
        ranks = [DECISION_ORDER[f["decision"]] for f in g["rows"]]
        assert ranks == sorted(ranks)
    findings = section(html, "findings")
    summaries = re.findall(
        r'<details class="finding-group" id="[^"]+">\s*<summary>(.*?)</summary>', findings, re.S
    )
    assert len(summaries) == 2
    assert "<strong>region</strong> · 828 test(s)" in summaries[0]
    # each row's long reading waits in its own <details>
    assert findings.count('<details class="reading">') == 831


# ----------------------------------------------------------------------------- overview matrix


def worst_decisions(result: AuditResult) -> dict[tuple[str, str, str], str]:
    """``(attribute, rate, group) -> the most severe decision`` computed from the findings."""
    out: dict[tuple[str, str, str], str] = {}
    for f in result.findings():
        if not f.counts or not f.question:
            continue
        metric, attribute, a, b = json.loads(f.question)
        for g in (a, b):
            old = out.get((attribute, metric, g))
            if old is None or DECISION_ORDER[f.decision] < DECISION_ORDER[old]:
                out[(attribute, metric, g)] = f.decision
    return out


def test_overview_matrix_has_every_group_and_the_intersection(
    many_groups: AuditResult,
) -> None:
    ov = overview_view(many_groups)
    assert ov is not None
    blocks = {b["name"]: b for b in ov["blocks"]}
    assert list(blocks) == ["region", "sex", "region × sex"]
    region = blocks["region"]
    assert sorted(r["group"] for r in region["rows"]) == sorted(REGIONS)
    assert region["columns"] == ["Base rate (labels)", "Positive rate", "TPR", "FPR"]
    assert not region["collapsed"] and len(region["rows"]) <= MATRIX_OPEN_ROWS
    inter = blocks["region × sex"]
    assert inter["kind"] == "intersection" and len(inter["rows"]) == 2 * N_REGIONS
    assert inter["collapsed"]  # 48 groups: opened on demand
    assert {c["decision"] for r in inter["rows"] for c in r["cells"]} == {"none"}  # untested
    worst = worst_decisions(many_groups)
    rates = {"Positive rate": "positive_rate", "TPR": "tpr", "FPR": "fpr"}
    checked = 0
    for name in ("region", "sex"):
        block = blocks[name]
        for row in block["rows"]:
            for label, cell in zip(block["columns"], row["cells"], strict=True):
                rate = rates.get(label)
                expected = worst.get((name, rate, row["group"]), "none") if rate else "none"
                assert cell["decision"] == expected, (name, row["group"], label)
                assert re.fullmatch(r"\d\.\d{4}", cell["estimate"])
                assert re.fullmatch(r"\[\d\.\d{4}, \d\.\d{4}\]", cell["interval"])
                checked += 1
    assert checked == (N_REGIONS + 2) * 4
    decisions = {c["decision"] for r in region["rows"] for c in r["cells"]}
    assert {"reject", "fail_to_reject", "none"} <= decisions


def test_overview_matrix_markup(many_groups: AuditResult, html: str) -> None:
    ov = section(html, "overview")
    for g in REGIONS:
        assert f'<th scope="row" class="group">{g}</th>' in ov
    ov_view = overview_view(many_groups)
    assert ov_view is not None
    n_reject = sum(
        c["decision"] == "reject" for b in ov_view["blocks"] for r in b["rows"] for c in r["cells"]
    )
    assert ov.count('class="cell cell-reject"') == n_reject > 0
    mark = '<span class="mark" aria-label="reject">✗</span>'  # not colour alone
    assert ov.count(mark) == n_reject
    assert '<details class="overview-large"><summary>Show the 48 groups' in ov
    # a cell says on hover which groups its tests compared it with
    assert re.search(r'title="Positive rate of region=R\d\d: rejected vs ', ov)


def test_overview_needs_group_rates(many_groups: AuditResult) -> None:
    only_parity = dataclasses.replace(
        many_groups, methods=[m for m in many_groups.methods if m.method == "group_parity"]
    )
    ov = overview_view(only_parity)
    assert ov is not None
    assert [b["name"] for b in ov["blocks"]] == ["region", "sex"]
    assert ov["blocks"][0]["columns"] == ["Positive rate", "TPR", "FPR"]
    nothing = dataclasses.replace(many_groups, methods=[])
    assert overview_view(nothing) is None
    assert 'id="overview"' not in render_report(nothing)


# ----------------------------------------------------------------------------- details on demand


def test_sections_are_details_closed_by_default(many_groups: AuditResult, html: str) -> None:
    assert "<script" not in html.lower()
    methods = section(html, "methods")
    opened = re.findall(r'<details class="method-details"[^>]*>', methods)
    assert len(opened) == len(many_groups.methods)
    assert all(tag == '<details class="method-details">' for tag in opened)  # closed
    for m in many_groups.methods:
        assert re.search(
            rf'<summary class="method-head"><h3>{re.escape(m.title or m.method)}</h3>', methods
        )
    for cls in ("finding-group", "explain", "configuration"):
        tags = re.findall(rf'<details class="{cls}"[^>]*>', html)
        assert tags and all(" open" not in t for t in tags), cls
    order = [
        html.index(f'<section id="{s}"')
        for s in ("verdict", "top-findings", "overview", "findings", "methods", "validation")
    ]
    assert order == sorted(order)


def test_numbers_never_wrap_and_tables_scroll_in_their_own_box() -> None:
    css = (Path(TEMPLATE_DIR) / "report.css").read_text(encoding="utf-8")
    css = re.sub(r"/\*.*?\*/", "", css, flags=re.S)  # comments name the selectors too

    def rule(selector: str) -> str:
        match = re.search(rf"(^|\n|,\s*){re.escape(selector)}\s*(,[^{{]*)?\{{([^}}]*)\}}", css)
        assert match is not None, selector
        return match.group(3)

    assert "overflow-x: auto" in rule(".table-wrap")
    for selector in ("td.num", "td.iv", "table.matrix .cell-text"):
        assert "white-space: nowrap" in rule(selector), selector
    assert "overflow-wrap: anywhere" in rule("table.matrix th.group")
    assert "text-overflow" not in css and "overflow: hidden" not in css.replace(
        ".visually-hidden { position: absolute; width: 1px; height: 1px; overflow: hidden;", ""
    )


# ----------------------------------------------------------------------------- compare view


def with_history(result: AuditResult, history: list[dict[str, Any]]) -> AuditResult:
    metadata = dataclasses.replace(
        result.metadata, previous_audits=[PreviousAudit.from_json(h) for h in history]
    )
    return dataclasses.replace(result, metadata=metadata)


def test_trend_lists_changed_decisions_first(many_groups: AuditResult) -> None:
    deciding = [f for f in many_groups.findings() if f.counts]
    rejected = [f for f in deciding if f.decision == "reject"][:3]
    kept = [f for f in deciding if f.decision == "fail_to_reject"][:2]
    newly_passing = next(f for f in deciding if f.decision == "fail_to_reject" and f not in kept)
    before = {f.key: "fail_to_reject" for f in rejected}  # newly rejected now
    before.update({f.key: "fail_to_reject" for f in kept})  # unchanged
    before[newly_passing.key] = "reject"  # was rejected, is not now
    history = [
        {
            "model_version": "2",
            "verdict": "fail",
            "started_ms": 1_760_000_000_000,
            "estimates": {f.key: f.estimate / 2 for f in rejected},
            "decisions": before,
        },
        {"model_version": "1", "verdict": "pass", "started_ms": 1_750_000_000_000},
    ]
    result = with_history(many_groups, history)
    trend = trend_view(result)
    assert trend is not None
    assert trend["previous_label"] == "v2" and trend["n_compared"] == 6
    changed = trend["changed"]
    assert {c["key"] for c in changed} == {f.key for f in rejected} | {newly_passing.key}
    assert changed[-1]["key"] == newly_passing.key  # the new rejections come first
    assert changed[0]["before"] == "Not rejected" and changed[0]["after"] == "Rejected"
    assert changed[-1]["before"] == "Rejected" and changed[-1]["after"] == "Not rejected"
    full = render_report(result)
    banner = section(full, "verdict")  # the summary says so, with a link
    assert '<a href="#trend">4 decision(s) changed since the previous audit (v2) →</a>' in banner
    page = section(full, "trend")
    assert page.index("Decisions changed since the previous audit (v2)") < page.index(
        '<table class="trend">'
    )
    assert page.count('<tr class="row-reject">') == 3


def test_trend_without_recorded_decisions_still_renders(many_groups: AuditResult) -> None:
    old = [{"model_version": "1", "verdict": "pass", "estimates": {}}]  # before decisions
    page = section(render_report(with_history(many_groups, old)), "trend")
    assert "decisions were not recorded" in page and "Decisions changed" not in page
    assert '<table class="trend">' in page
    same = {f.key: f.decision for f in many_groups.findings() if f.counts}
    history = [{"model_version": "2", "verdict": "fail", "decisions": same}]
    page = section(render_report(with_history(many_groups, history)), "trend")
    assert "No decision changed since the previous audit (v2)" in page
    assert trend_view(many_groups) is None  # no history, no section
    assert 'id="trend"' not in render_report(many_groups)


class FakeClient:
    """``download_artifacts`` of an MLflow client, from a dict of run id -> audit.json."""

    def __init__(self, runs: dict[str, Any]) -> None:
        self.runs = runs

    def download_artifacts(self, run_id: str, path: str, dst_path: str) -> str:
        assert path == AUDIT_JSON
        if run_id not in self.runs:
            raise OSError(f"no artifact {path} in run {run_id}")
        target = Path(dst_path) / "audit.json"
        target.write_text(json.dumps(self.runs[run_id]), encoding="utf-8")
        return str(target)


def test_previous_decisions_are_read_from_the_audit_json(many_groups: AuditResult) -> None:
    stored = json.loads(many_groups.to_json())
    keys = [f.key for f in many_groups.findings() if f.pvalue is not None][:5]
    expected = {f.key: f.decision for f in many_groups.findings() if f.key in keys}
    assert decisions_of(stored, keys) == expected
    assert logged_decisions(FakeClient({"run1": stored}), "run1", keys) == expected
    assert logged_decisions(FakeClient({}), "missing", keys) is None  # unreadable: no decisions
    estimates_only = {"methods": [{"findings": [{"key": keys[0], "decision": "not_tested"}]}]}
    assert decisions_of(estimates_only, keys) == {}  # untested findings have no decision


def test_previous_audits_carry_the_newest_runs_decisions(
    many_groups: AuditResult, tmp_path: Path
) -> None:
    """Through a real MLflow store (the session's SQLite file): the newest earlier audit's
    decisions come from its logged ``audit.json``; an older run keeps estimates only."""
    from mlflow import MlflowClient

    from tasks.mlflow_log import TAGS, previous_audits
    from tasks.settings import default_tracking_uri

    uri = default_tracking_uri()
    client = MlflowClient(tracking_uri=uri, registry_uri=uri)
    experiment = "report-layout-history"
    exp_id = client.create_experiment(experiment, artifact_location=tmp_path.as_uri())
    tags = {TAGS.model_name: "scorer", TAGS.verdict: "fail"}
    # audits carry their audit id (a comparison run of the same model has none and is skipped)
    first = {**tags, TAGS.model_version: "1", TAGS.audit_id: "older"}
    older = client.create_run(exp_id, tags=first).info.run_id
    client.set_terminated(older, "FINISHED")  # logged before audit.json existed: no artifact
    second = {**tags, TAGS.model_version: "2", TAGS.audit_id: many_groups.audit_id}
    newest = client.create_run(exp_id, tags=second).info.run_id
    client.log_dict(newest, json.loads(many_groups.to_json()), AUDIT_JSON)
    client.set_terminated(newest, "FINISHED")
    keys = [f.key for f in many_groups.findings() if f.pvalue is not None]
    history = previous_audits(uri, experiment, "scorer", keys)
    assert [h["model_version"] for h in history] == ["2", "1"]
    assert history[0]["decisions"] == {
        f.key: f.decision for f in many_groups.findings() if f.tested
    }
    assert "decisions" not in history[1]
