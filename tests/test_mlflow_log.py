"""MLflow edge (tasks/mlflow_log.py) without Prefect: tag names, method artifact files.

A real SQLite MLflow store (conftest isolates it under the test session's tmp dir); every check
reads back through ``MlflowClient`` the way a reviewer would.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from fairengine.results import Artifact, MethodResult
from fairengine.verdict import finalize_audit
from tasks.mlflow_log import TAGS, log_audit, stage_method_artifacts


@pytest.fixture(scope="module")
def store(session_tmp: Path) -> tuple[str, object]:
    from mlflow import MlflowClient

    from tasks.settings import default_tracking_uri

    uri = default_tracking_uri()
    assert str(session_tmp) in uri  # conftest isolation
    return uri, MlflowClient(tracking_uri=uri, registry_uri=uri)


def test_tag_names_are_the_fairness_namespace_the_issue_asks_for() -> None:
    assert TAGS.verdict == "fairness.verdict"
    assert TAGS.audit_run_id == "fairness.audit_run_id"
    assert TAGS.report_uri == "fairness.report_uri"
    names = list(vars(TAGS).values())
    assert all(n.startswith("fairness.") for n in names) and len(set(names)) == len(names)


def fake_result(tmp_path: Path):
    """A fake method that wrote two files (one renamed, one in a subfolder), listed a missing
    one and an unsafe name; a second method lists nothing."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    fitted = tmp_path / "map_f_to_m.npz"
    fitted.write_bytes(b"\x00fitted-map\x01" * 10)
    notes = tmp_path / "notes.txt"
    notes.write_text("transparency report")
    escape = tmp_path / "escape.txt"
    escape.write_text("must not be logged")
    fake = MethodResult(
        "fliptest",
        "FlipTest",
        artifacts=[
            Artifact(str(fitted), "maps/female_to_male.npz"),
            Artifact(str(notes), ""),  # no name: the file's own name
            Artifact(str(tmp_path / "gone.npz"), "gone.npz"),
            Artifact(str(escape), "../escape.txt"),
        ],
    )
    plain = MethodResult("group_parity", "Parity")
    result = finalize_audit(
        config={}, dataset={"name": "d"}, model={}, validation=None, methods=[fake, plain]
    )
    return result, fitted


def test_method_artifacts_are_logged_under_artifacts_method_and_bad_entries_warn(
    tmp_path: Path, store, caplog
) -> None:
    uri, client = store
    result, fitted = fake_result(tmp_path)
    with caplog.at_level(logging.WARNING, logger="tasks.mlflow_log"):
        info = log_audit(result, "<html></html>", tracking_uri=uri, experiment="t-artifacts")

    run = client.get_run(info["run_id"])
    assert run.info.status == "FINISHED"  # bad entries did not fail the logging
    listed = {a.path for a in client.list_artifacts(info["run_id"], "artifacts/fliptest")}
    assert listed == {"artifacts/fliptest/maps", "artifacts/fliptest/notes.txt"}
    inner = {a.path for a in client.list_artifacts(info["run_id"], "artifacts/fliptest/maps")}
    assert inner == {"artifacts/fliptest/maps/female_to_male.npz"}
    got = client.download_artifacts(
        info["run_id"], "artifacts/fliptest/maps/female_to_male.npz", str(tmp_path / "dl")
    )
    assert Path(got).read_bytes() == fitted.read_bytes()
    assert client.list_artifacts(info["run_id"], "artifacts/group_parity") == []
    top = {a.path for a in client.list_artifacts(info["run_id"])}
    assert top == {"audit", "artifacts"}  # nothing escaped to the run's root

    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("gone.npz" in w and "does not exist" in w for w in warnings)
    assert any("../escape.txt" in w for w in warnings)
    assert len(warnings) == 2


def test_staging_copies_exactly_the_listed_files(tmp_path: Path) -> None:
    result, _ = fake_result(tmp_path / "src")
    staged = stage_method_artifacts(result.methods, tmp_path / "stage")
    assert staged == {"fliptest": ["maps/female_to_male.npz", "notes.txt"]}
    files = sorted(p.relative_to(tmp_path / "stage") for p in (tmp_path / "stage").rglob("*"))
    assert [str(f) for f in files if (tmp_path / "stage" / f).is_file()] == [
        "fliptest/maps/female_to_male.npz",
        "fliptest/notes.txt",
    ]


def test_a_failure_while_logging_leaves_no_visible_partial_run(
    tmp_path: Path, store, monkeypatch
) -> None:
    """The run is created first; if anything after that fails, the half-logged run is marked
    FAILED and moved to the trash, and the error reaches the caller (whose retry starts anew)."""
    from mlflow.entities import ViewType

    import tasks.mlflow_log

    uri, client = store
    result, _ = fake_result(tmp_path)

    def broken(*args, **kwargs):
        raise OSError("disk full while staging artifacts")

    monkeypatch.setattr(tasks.mlflow_log, "stage_method_artifacts", broken)
    with pytest.raises(OSError, match="disk full"):
        log_audit(result, "<html></html>", tracking_uri=uri, experiment="t-partial")
    exp = client.get_experiment_by_name("t-partial")
    assert client.search_runs([exp.experiment_id]) == []  # nothing visible
    (trashed,) = client.search_runs([exp.experiment_id], run_view_type=ViewType.DELETED_ONLY)
    assert trashed.info.status == "FAILED"
    assert trashed.data.tags[TAGS.audit_id] == result.audit_id

    monkeypatch.undo()  # the retry logs one complete run
    info = log_audit(result, "<html></html>", tracking_uri=uri, experiment="t-partial")
    (visible,) = client.search_runs([exp.experiment_id])
    assert visible.info.run_id == info["run_id"] and visible.info.status == "FINISHED"


# ------------------------------------------------------------------ findings table, PDF artifact
def table_result():
    """Group parity on two attributes (two-group questions: attribute and groups known), plus a
    hand-made method whose finding has an infinite estimate and no interval, nor a question."""
    import numpy as np
    import pandas as pd

    from fairengine.dataset import AuditDataset
    from fairengine.group_parity import group_parity
    from fairengine.results import Finding
    from fairengine.roles import ColumnRoles

    rng = np.random.default_rng(11)
    n = 2000
    race = rng.choice(["African-American", "Caucasian", "<other>"], n)
    sex = rng.choice(["Female", "Male"], n)
    y = rng.binomial(1, 0.45, n)
    score = np.clip(rng.normal(0.35 + 0.3 * y + 0.1 * (race == "Caucasian"), 0.2), 0, 1)
    frame = pd.DataFrame({"race": race, "sex": sex, "y": y, "score": score})
    ds = AuditDataset.from_frame(
        frame, ColumnRoles(label="y", protected=("race", "sex"), score="score"), threshold=0.5
    )
    odd = MethodResult(
        "ratios",
        "Ratios",
        findings=[
            Finding(key="ratios.err", label="error ratio", estimate=float("inf")),
            Finding(
                key="ratios.tiny",
                label="a test with a tiny p-value",
                estimate=2.5,
                pvalue=3.2e-15,
                null_hypothesis="ratio = 1",
            ),
        ],
    )
    return finalize_audit(
        config={},
        dataset={"name": "table"},
        model={},
        validation=None,
        methods=[group_parity(ds, tolerance=0.02), odd],
    )


def _plain(value, approx: bool = False):
    """A table cell as plain Python: NaN and None are both ``None``, numpy scalars unwrapped;
    ``approx``: a float compared to 1e-9 (pandas' default JSON parser, which
    ``mlflow.load_table`` uses, is exact to about 12 significant digits; the file is exact)."""
    import math

    if hasattr(value, "item"):
        value = value.item()
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    if approx and isinstance(value, float):
        return pytest.approx(value, rel=1e-9, abs=0)
    return value


def test_the_findings_are_a_table_artifact_that_mlflow_load_table_reads_back(
    tmp_path: Path, store, monkeypatch
) -> None:
    """One row per finding in ``audit/findings.json``; ``mlflow.load_table`` (the documented
    reader, which finds the table through the run's ``mlflow.loggedArtifacts`` tag) returns the
    same rows and columns, and a reader can filter the rejected tests of every audit run."""
    import mlflow

    from tasks.mlflow_log import FINDINGS_COLUMNS, FINDINGS_TABLE, findings_rows

    uri, client = store
    result = table_result()
    info = log_audit(result, "<html></html>", tracking_uri=uri, experiment="t-table")
    rows = findings_rows(result)
    assert len(rows) == len(result.findings()) > 10

    monkeypatch.setenv("MLFLOW_EXPERIMENT_ID", info["experiment_id"])  # load_table's experiment
    mlflow.set_tracking_uri(uri)
    table = mlflow.load_table(FINDINGS_TABLE, run_ids=[info["run_id"]])
    assert list(table.columns) == list(FINDINGS_COLUMNS)
    loaded = [{c: _plain(v) for c, v in rec.items()} for rec in table.to_dict("records")]
    assert loaded == [{c: _plain(r[c], approx=True) for c in FINDINGS_COLUMNS} for r in rows]

    stored = client.download_artifacts(info["run_id"], FINDINGS_TABLE, str(tmp_path))
    exact = json.loads(Path(stored).read_text(encoding="utf-8"))  # the file: every digit
    assert exact == {
        "columns": list(FINDINGS_COLUMNS),
        "data": [[r[c] for c in FINDINGS_COLUMNS] for r in rows],
    }
    tiny = next(r for r in rows if r["key"] == "ratios.tiny")
    assert tiny["pvalue"] == 3.2e-15  # pandas' writer (MlflowClient.log_table) writes 0.0

    by_key = {r["key"]: r for r in rows}
    parity = next(f for f in result.findings() if f.key.startswith("dp_gap.race."))
    row = by_key[parity.key]
    assert (row["metric"], row["attribute"]) == ("positive_rate", "race")
    assert {row["group_a"], row["group_b"]} <= {"African-American", "Caucasian", "<other>"}
    assert row["estimate"] == pytest.approx(parity.estimate)
    assert (row["ci_low"], row["ci_high"]) == pytest.approx(
        (parity.interval.low, parity.interval.high)
    )
    assert row["adjusted_pvalue"] == pytest.approx(parity.adjusted_pvalue)
    assert row["decision"] == parity.decision and row["method"] == "group_parity"
    assert row["null_hypothesis"] == parity.null_hypothesis and row["counts"] is True
    odd = by_key["ratios.err"]  # not finite: empty; no question: no attribute
    assert odd["estimate"] is None and odd["attribute"] is None and odd["ci_low"] is None
    assert odd["decision"] == "not_tested" and odd["counts"] is False

    # a second audit run: one table across runs, filtered like any data frame
    again = log_audit(table_result(), "<html></html>", tracking_uri=uri, experiment="t-table")
    both = mlflow.load_table(FINDINGS_TABLE, extra_columns=["run_id"])
    assert set(both["run_id"]) == {info["run_id"], again["run_id"]}
    rejected = both[both["decision"] == "reject"]
    assert len(rejected) == 2 * sum(f.decision == "reject" for f in result.findings())
    assert set(rejected["method"]) == {"group_parity", "ratios"}
    assert set(rejected[rejected["method"] == "ratios"]["key"]) == {"ratios.tiny"}
    listed = {a.path for a in client.list_artifacts(info["run_id"], "audit")}
    assert listed == {"audit/audit.json", "audit/report.html", FINDINGS_TABLE}  # no PDF given


def test_a_given_pdf_is_logged_as_audit_report_pdf(tmp_path: Path, store) -> None:
    """The PDF is logged under the name the run documents, whatever the local file is named."""
    from tasks.mlflow_log import PDF_ARTIFACT

    uri, client = store
    pdf = tmp_path / "printed.pdf"
    pdf.write_bytes(b"%PDF-1.4\n% not a real PDF, bytes only\n%%EOF\n")
    result, _ = fake_result(tmp_path / "src")
    info = log_audit(result, "<html></html>", tracking_uri=uri, experiment="t-pdf", pdf=pdf)
    listed = {a.path for a in client.list_artifacts(info["run_id"], "audit")}
    assert PDF_ARTIFACT in listed
    got = client.download_artifacts(info["run_id"], PDF_ARTIFACT, str(tmp_path / "dl"))
    assert Path(got).read_bytes() == pdf.read_bytes()


class _LosesOneRace:
    """A real MLflow client whose first tag write fails the way the MLflow server answered in
    CI when two audits of one model version finished together (MLflow's SQL store inserts a
    tag by select-then-insert, so the second concurrent insert breaks the unique key)."""

    def __init__(self, client, error: str) -> None:
        self.client, self.error, self.calls = client, error, 0

    def set_model_version_tag(self, name, version, key, value) -> None:
        from mlflow.exceptions import RestException

        self.calls += 1
        if self.calls == 1:
            raise RestException({"error_code": "BAD_REQUEST", "message": self.error})
        self.client.set_model_version_tag(name, version, key, value)


RACE = (
    "(sqlite3.IntegrityError) UNIQUE constraint failed: model_version_tags.workspace, "
    "model_version_tags.key, model_version_tags.name, model_version_tags.version"
)


def test_a_tag_write_that_lost_a_race_is_repeated_and_lands(store) -> None:
    from tasks.mlflow_log import set_version_tag

    _, client = store
    client.create_registered_model("raced")
    client.create_model_version("raced", "file:///nowhere", run_id=None)
    racer = _LosesOneRace(client, RACE)
    set_version_tag(racer, "raced", "1", TAGS.verdict, "fail")
    assert racer.calls == 2
    assert client.get_model_version("raced", "1").tags[TAGS.verdict] == "fail"


def test_other_tag_errors_are_raised_at_once(store) -> None:
    from mlflow.exceptions import MlflowException

    from tasks.mlflow_log import set_version_tag

    _, client = store
    racer = _LosesOneRace(client, "RESOURCE_DOES_NOT_EXIST: Registered Model 'x' not found")
    with pytest.raises(MlflowException, match="not found"):
        set_version_tag(racer, "x", "1", TAGS.verdict, "fail")
    assert racer.calls == 1

    class _AlwaysLoses(_LosesOneRace):  # every attempt loses: raised after `attempts`
        def set_model_version_tag(self, name, version, key, value) -> None:
            self.calls = 0
            super().set_model_version_tag(name, version, key, value)

    loser = _AlwaysLoses(client, RACE)
    with pytest.raises(MlflowException, match="UNIQUE constraint"):
        set_version_tag(loser, "x", "1", TAGS.verdict, "fail", attempts=2)
