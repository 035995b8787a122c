"""MLflow edge (tasks/mlflow_log.py) without Prefect: tag names, method artifact files.

A real SQLite MLflow store (conftest isolates it under the test session's tmp dir); every check
reads back through ``MlflowClient`` the way a reviewer would.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from fairengine.audit import finalize_audit
from fairengine.results import Artifact, MethodResult
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
